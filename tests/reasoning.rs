//! Reasoning models and tool calls against the built-in simulator, whose answers have known
//! figures (docs/metrics.md "Reasoning and tool calls").
//!
//! The simulator here takes `STEP_MS` per decode step whatever the batch (no batch growth, one
//! token a step) and prefills 200 tokens in a fraction of a millisecond. With `--reasoning-tokens
//! THINK` and `OUTPUT` tokens asked for, every request streams THINK reasoning tokens, then
//! OUTPUT − THINK answer tokens, one a step. So:
//! - thinking time (first token to first answer token) = THINK steps;
//! - TTFC = TTFT + THINK steps;
//! - the answer's decode speed = (answer − 1) tokens over (answer − 1) steps = 1000 / `STEP_MS`;
//! - the reasoning share = THINK / OUTPUT, exactly; the mean token counts exactly THINK and
//!   OUTPUT − THINK.
//!
//! Timings are checked against the simulator's own record of each request (`tests/sim_truth`):
//! when it wrote the first token, the first answer token and the last, within fixed tolerances;
//! the counts against the known ones exactly. A starved machine fails the test naming the slip.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::config::{BackendChoice, ChatExtras, MultiTurn, RunConfig};
use servetop::metrics::LevelStats;
use servetop::run::session::Session;
use servetop::sim::{self, AcceptLength, MetricsFlavor, SimConfig, SimHandle};
use servetop::workload::RequestCount;

mod sim_run;
mod sim_truth;
use sim_run::finished;

const STEP_MS: f64 = 4.0;
const THINK: u64 = 200;
const OUTPUT: u32 = 300;

fn sim_config(flavor: MetricsFlavor, think: u64) -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = STEP_MS;
    c.batch_growth = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    c.metrics = Some(flavor);
    c.reasoning_tokens = think;
    c
}

async fn start(sim: SimConfig) -> SimHandle {
    sim::start(sim, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

fn chat_config(h: &SimHandle, concurrency: Vec<u64>, requests: u32) -> RunConfig {
    RunConfig {
        backend: BackendChoice::OpenaiChat,
        concurrency,
        input_len: 200,
        output_len: OUTPUT,
        requests_per_level: RequestCount::Fixed(requests),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        ..RunConfig::minimal(&h.url())
    }
}

fn stats(s: &Session, i: usize) -> &LevelStats {
    s.summary.sweep[i].stats.as_ref().expect("level has stats")
}

/// `got` within `tol` of `want` (ms).
fn near(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: {got:.3} ms, the server's record says {want:.3} ms (± {tol} ms)"
    );
}

/// The median over `records` of what `f` computes from one (ms).
fn server_median(
    records: &[&servetop::sim::SimRequestTrace],
    f: impl Fn(&servetop::sim::SimRequestTrace) -> Option<f64>,
) -> f64 {
    let v: Vec<f64> = records.iter().filter_map(|r| f(r)).collect();
    assert_eq!(v.len(), records.len(), "every request has the figure");
    sim_truth::nearest_rank(&v, 50.0)
}

async fn known_figures(flavor: MetricsFlavor, concurrency: Vec<u64>) {
    let h = start(sim_config(flavor, THINK)).await;
    let levels = concurrency.len();
    let started = std::time::Instant::now();
    let dir = sim_run::temp_run_dir(&format!("reasoning-{flavor:?}"));
    let s = sim_run::finished_into(chat_config(&h, concurrency, 8), &dir).await;
    let (records, origins) = sim_truth::run_records(&dir);
    let truth = sim_truth::of(&h);
    sim_truth::guard(&truth, started.elapsed().as_secs_f64());
    sim_truth::agree_all(&records, &origins, &truth);
    let ms = |a: u64, b: u64| (a as f64 - b as f64) / 1e3;
    // Both ends of a span move by at most the delivery tolerance; a median by the medians'.
    let span_tol = 2.0 * sim_truth::MEDIAN_TOL_MS;
    for i in 0..levels {
        let st = stats(&s, i);
        let label = s.summary.sweep[i].label();
        assert_eq!(st.scalars.completed, 8, "{label}");
        assert_eq!(
            st.scalars.mean_reasoning_tokens,
            Some(THINK as f64),
            "{label}"
        );
        assert_eq!(
            st.scalars.mean_content_tokens,
            Some(f64::from(OUTPUT) - THINK as f64),
            "{label}"
        );
        assert_eq!(
            st.scalars.reasoning_share,
            Some(THINK as f64 / f64::from(OUTPUT)),
            "{label}"
        );
        let server = sim_truth::of_level(&truth, s.summary.sweep[i].index);
        assert_eq!(server.len(), 8, "{label}: the server's record");
        let first_token = st.dists.ttft_ms.as_ref().unwrap();
        let first_answer = st.dists.ttfc_ms.as_ref().unwrap();
        let thinking = st.dists.thinking_ms.as_ref().unwrap();
        let answer = st.dists.content_decode_tokens_per_s.as_ref().unwrap();
        let whole = st.dists.decode_tokens_per_s.as_ref().unwrap();
        println!(
            "{label}: TTFT p50 {:.1} ms, TTFC p50 {:.1} ms, thinking p50 {:.1} ms, answer {:.1} tok/s",
            first_token.p50, first_answer.p50, thinking.p50, answer.p50
        );
        // Thinking: from the first token's frame to the first answer token's.
        near(
            &format!("{label} thinking p50"),
            thinking.p50,
            server_median(&server, |r| {
                Some(ms(r.first_content_unix_us?, r.first_write_unix_us()?))
            }),
            span_tol,
        );
        // TTFC: from servetop's send to the server's frame with the first answer token.
        let level = s.summary.sweep[i].index;
        let mine: Vec<_> = records
            .iter()
            .filter(|r| r.level == level)
            .cloned()
            .collect();
        let ttfc = sim_truth::nearest_rank(
            &sim_truth::server_seen_ms(&mine, &origins, &truth, |r| r.first_content_unix_us),
            50.0,
        );
        near(
            &format!("{label} TTFC p50"),
            first_answer.p50,
            ttfc,
            span_tol + ttfc * 1e-3,
        );
        // The answer's and the whole output's decode speed: the median of the server's own
        // speeds (tokens after the first over its frames' span), compared as the time that
        // speed gives those tokens, so the tolerance is in ms.
        let answer_tokens = (f64::from(OUTPUT) - THINK as f64) - 1.0;
        let answer_speed = server_median(&server, |r| {
            Some(answer_tokens / ms(r.last_write_unix_us()?, r.first_content_unix_us?) * 1e3)
        });
        near(
            &format!("{label} answer decode time at the median speed"),
            answer_tokens / answer.p50 * 1e3,
            answer_tokens / answer_speed * 1e3,
            span_tol,
        );
        let tokens = f64::from(OUTPUT - 1);
        let speed = server_median(&server, |r| {
            Some(tokens / ms(r.last_write_unix_us()?, r.first_write_unix_us()?) * 1e3)
        });
        near(
            &format!("{label} decode time at the median speed"),
            tokens / whole.p50 * 1e3,
            tokens / speed * 1e3,
            span_tol,
        );
    }
    // What the simulator streamed, after the warmup (64 tokens, all thinking).
    let streams = h.log.lock().unwrap().streams.clone();
    assert_eq!(streams[0].reasoning_tokens, 64);
    assert!(
        streams
            .iter()
            .skip(1)
            .all(|l| l.reasoning_tokens == THINK && l.answer_tokens == u64::from(OUTPUT) - THINK)
    );
}

/// vLLM 0.32's shape: `delta.reasoning`, and `completion_tokens_details.reasoning_tokens` in
/// the usage; at one stream and at eight at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_figures_are_known_answers_vllm_shape() {
    known_figures(MetricsFlavor::Vllm, vec![1, 8]).await;
}

/// SGLang's shape: `delta.reasoning_content` and no reasoning count in the usage, so the
/// thinking tokens are counted per event (exact per-chunk usage).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_figures_are_known_answers_sglang_shape() {
    known_figures(MetricsFlavor::Sglang, vec![8]).await;
}

/// Without reasoning, TTFC is TTFT and the thinking figures stay empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reasoning_ttfc_is_ttft() {
    let h = start(sim_config(MetricsFlavor::Vllm, 0)).await;
    let s = finished(RunConfig {
        output_len: 20,
        ..chat_config(&h, vec![2], 4)
    })
    .await;
    let st = stats(&s, 0);
    assert_eq!(st.scalars.reasoning_share, Some(0.0));
    assert!(st.dists.thinking_ms.is_none());
    let (answer, first) = (
        st.dists.ttfc_ms.as_ref().unwrap(),
        st.dists.ttft_ms.as_ref().unwrap(),
    );
    assert_eq!(answer.count, first.count);
    assert!(
        (answer.mean - first.mean).abs() < 1e-9,
        "{answer:?} {first:?}"
    );
}

/// A multi-turn chat with a thinking model sends back the answers only: every assistant
/// message the simulator received is made of answer words, none of its thinking vocabulary,
/// and has the answer's length. The turns' figures count both kinds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thinking_chat_sends_back_answers_only() {
    let think = 12;
    let output = 30u32;
    let h = start(sim_config(MetricsFlavor::Sglang, think)).await;
    let s = finished(RunConfig {
        concurrency: vec![],
        input_len: 300,
        output_len: output,
        multi_turn: Some(MultiTurn {
            turns: 3,
            conversations: 2,
            concurrency: 2,
            followup_len: 20,
        }),
        requests_per_level: RequestCount::Fixed(1),
        ..chat_config(&h, vec![], 1)
    })
    .await;
    let st = s.summary.multi_turn[0].stats.as_ref().unwrap();
    assert_eq!(st.scalars.completed, 6);
    assert_eq!(st.scalars.mean_reasoning_tokens, Some(think as f64));
    assert_eq!(st.scalars.total_output_tokens, 6 * u64::from(output));
    let received = h.log.lock().unwrap().received_assistant.clone();
    // Turn 2 sends one earlier answer, turn 3 two: three per conversation.
    assert_eq!(received.len(), 6, "{received:?}");
    for m in &received {
        let words: Vec<&str> = m.split_whitespace().collect();
        assert_eq!(words.len() as u64, u64::from(output) - think, "{m}");
        assert!(
            words
                .iter()
                .all(|w| sim::tokenizer::OUTPUT_WORDS.contains(w)),
            "thinking in the history: {m}"
        );
    }
}

/// `--tools`: the simulator answers each request with two tool calls after 10 thinking
/// tokens. servetop counts exactly the calls the simulator streamed, and the time from the
/// first token to the first tool call matches the simulator's own log within a millisecond.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_are_counted_and_timed_against_the_simulators_log() {
    let mut c = sim_config(MetricsFlavor::Vllm, 10);
    c.tool_calls = 2;
    let h = start(c).await;
    let tools = ChatExtras::load_tools("builtin").unwrap();
    let s = finished(RunConfig {
        output_len: 41,
        chat: ChatExtras {
            tools: Some(tools),
            tool_choice: Some("auto".into()),
            chat_template_kwargs: None,
        },
        ..chat_config(&h, vec![1, 4], 6)
    })
    .await;
    let log = h.log.lock().unwrap().streams.clone();
    let measured: Vec<&servetop::summary::LevelSummary> = s.summary.sweep.iter().collect();
    assert_eq!(log.len(), 1 + 12, "one warmup and twelve measured streams");
    assert!(log.iter().all(|l| l.tool_calls == 2), "{log:?}");
    for l in &measured {
        let st = l.stats.as_ref().unwrap();
        assert_eq!(st.scalars.mean_tool_calls, Some(2.0), "{}", l.label());
        assert_eq!(st.scalars.mean_reasoning_tokens, Some(10.0));
    }
    // The simulator's first token → first tool call, against the client's, request by request
    // in sorted order (both sides are the same set of streams).
    let sim_gaps: Vec<f64> = log
        .iter()
        .skip(1)
        .map(|l| {
            l.first_tool_call
                .unwrap()
                .checked_sub(l.first_token.unwrap())
                .unwrap()
                .as_secs_f64()
                * 1e3
        })
        .collect();
    let ttft = measured[0].stats.as_ref().unwrap();
    let first_tool = ttft.dists.first_tool_call_ms.as_ref().unwrap();
    assert_eq!(first_tool.count, 6);
    let sim_mean = sim_gaps.iter().sum::<f64>() / sim_gaps.len() as f64;
    let client_mean: f64 = measured
        .iter()
        .map(|l| {
            let d = &l.stats.as_ref().unwrap().dists;
            (d.first_tool_call_ms.as_ref().unwrap().mean - d.ttft_ms.as_ref().unwrap().mean)
                * d.ttft_ms.as_ref().unwrap().count as f64
        })
        .sum::<f64>()
        / 12.0;
    assert!(
        (client_mean - sim_mean).abs() < 1.0,
        "first token to first tool call: client {client_mean:.2} ms, simulator {sim_mean:.2} ms"
    );
}
