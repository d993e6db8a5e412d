//! Thinking and tool calls on a real vLLM: its CPU build (`scripts/vllm/setup.sh`) serving the
//! tiny random-weight model's thinking variant (`make_model.py --reasoning`: `<think>`,
//! `</think>`, `<tool_call>` and `</tool_call>` as tokens, a template that opens `<think>`).
//! Everything the model writes is thinking until the `</think>` vLLM forces when a request's
//! `thinking_token_budget` (servetop's `--thinking-budget`) runs out; then the answer, or with
//! `tool_choice: "required"` a call its structured-output grammar forces.
//!
//! Known answers, from two servers:
//! - `--reasoning-parser deepseek_r1 --enable-auto-tool-choice --tool-call-parser hermes`: each
//!   request thinks exactly its budget (counted from the events: `deepseek_r1`'s usage says 0
//!   when the template opened `<think>`), or one more where vLLM merged the forced `</think>`
//!   into the last thinking event (its API server behind its engine: a CI run saw 13 for 12);
//!   TTFC − TTFT is the budget's steps and the forced tag's at the request's own time per output
//!   token (each level's median of 8 at least 70 % of it, and at C=1 at most 130 %: at C=2 the
//!   other request's prefill may land inside the thinking); a required call with
//!   `parallel_tool_calls: false` is exactly one call a request. Planted: the
//!   template told not to open `<think>` (`deepseek_r1` then calls every token thinking and the
//!   budget never starts) is caught, naming `--reasoning-parser`.
//! - No parser at all: a budget is refused (vLLM's own message, kept as the failure); thinking
//!   asked for but none streamed, and `</think>` written as answer text (forced with a logit
//!   bias), are each caught.
//!
//! Without the venv every test says why it skipped and passes; `SERVETOP_REQUIRE_VLLM=1` (set
//! by `.ci/run`) makes a missing venv fail them. vLLM computes on core 0, this process on the
//! others; each start takes about 40 s on 2 cores.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod real_server;

use std::path::{Path, PathBuf};

use real_server::vllm::{VllmServer, available, cache_dir, root};
use real_server::{the_warning, warnings_of};
use servetop::config::{BackendChoice, ChatExtras, RunConfig};
use servetop::event::RunState;
use servetop::run::run_headless;
use servetop::run::session::Session;
use servetop::summary::LevelSummary;
use servetop::workload::RequestCount;

/// Tests that talk to a server take turns: vLLM takes a core of two.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const OUTPUT: u32 = 40;
/// `<think>` and `</think>` in the thinking model's vocabulary (`make_model.py` adds the tags
/// after its 4096).
const START_THINK_ID: &str = "4096";
const END_THINK_ID: &str = "4097";

/// Every request's body: the special tokens (ids 0-4) banned, as the random-weight model under
/// `ignore_eos` otherwise falls into `</s>`, whose text vLLM skips: tokens that stream no event
/// and no answer. The lone bytes past 0x7F too, for the same reason (their text waits for a
/// character that never completes: `partial_utf8_tokens`), and the thinking tags: a `</think>`
/// or `<think>` alone in a delta is an event `deepseek_r1` never sends. The budget's own
/// `</think>` still comes: vLLM forces it after the bias, with a logit of 1e9. Plus `more`.
fn body(more: &serde_json::Value) -> serde_json::Value {
    static SILENT: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    let silent = SILENT.get_or_init(|| {
        let ids = real_server::vllm::partial_utf8_tokens(&cache_dir().join("model-reasoning"));
        println!("{} tokens of lone bytes banned", ids.len());
        ids
    });
    let mut b = serde_json::json!({
        "logit_bias": {
            "0": -100, "1": -100, "2": -100, "3": -100, "4": -100,
            START_THINK_ID: -100, END_THINK_ID: -100
        }
    });
    for id in silent {
        b["logit_bias"][id.to_string()] = (-100).into();
    }
    for (k, v) in more.as_object().unwrap() {
        if k == "logit_bias" {
            for (id, bias) in v.as_object().unwrap() {
                b["logit_bias"][id] = bias.clone();
            }
        } else {
            b[k] = v.clone();
        }
    }
    b
}

fn model_reasoning() -> Option<String> {
    let m = cache_dir().join("model-reasoning");
    if m.join("tokenizer.json").exists() {
        return Some(m.display().to_string());
    }
    let why = format!(
        "vllm_reasoning: the thinking test model is missing ({}); write it with scripts/vllm/setup.sh",
        m.display()
    );
    assert!(
        std::env::var_os("SERVETOP_REQUIRE_VLLM").is_none(),
        "{why} (SERVETOP_REQUIRE_VLLM is set)"
    );
    eprintln!("skipped: {why}");
    None
}

fn run_config(url: &str) -> RunConfig {
    RunConfig {
        backend: BackendChoice::OpenaiChat,
        concurrency: vec![2],
        input_len: 64,
        output_len: OUTPUT,
        requests_per_level: RequestCount::Fixed(4),
        first_token_timeout_s: 120.0,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        server_wait_s: 10.0,
        record_chunks: true,
        extra_body: Some(body(&serde_json::json!({}))),
        ..RunConfig::minimal(url)
    }
}

async fn run(cfg: RunConfig, dir: &Path) -> Session {
    let (state, session) = run_headless(cfg, Some(dir.to_path_buf())).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    session
}

fn temp_run_dir(name: &str) -> PathBuf {
    real_server::temp_run_dir("vllm-reasoning", name)
}

fn row(l: &LevelSummary) {
    let st = l.stats.as_ref().unwrap();
    let d = &st.dists;
    let p50 = |x: &Option<servetop::metrics::dist::DistStats>| {
        x.as_ref()
            .map_or("never".into(), |d| format!("{:.1}", d.p50))
    };
    println!(
        "| {} | {} | {} | {} | {:?} / {:?} | {:?} |",
        l.label(),
        p50(&d.ttft_ms),
        p50(&d.ttfc_ms),
        p50(&d.thinking_ms),
        st.scalars.mean_reasoning_tokens,
        st.scalars.mean_content_tokens,
        st.scalars.mean_tool_calls
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_budgets_tool_calls_and_a_misfit_template() {
    if !available("thinking_budgets_tool_calls_and_a_misfit_template") {
        return;
    }
    let Some(model) = model_reasoning() else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let srv = VllmServer::start(
        "deepseek_r1",
        &[
            "--model",
            &model,
            "--reasoning-parser",
            "deepseek_r1",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
        ],
    );
    let server_up = started.elapsed().as_secs_f64();

    // Two budgets over C=1 and C=2.
    let dir = temp_run_dir("budgets");
    let s = run(
        RunConfig {
            concurrency: vec![1, 2],
            thinking_budgets: vec![4, 12],
            requests_per_level: RequestCount::Fixed(8),
            ..run_config(&srv.url())
        },
        &dir,
    )
    .await;
    let records = real_server::records(&dir);
    // The forced `</think>`: one token, counted in the usage, streamed in no event of its own.
    real_server::thinking_took_its_budget(&s, &records, OUTPUT, |_| 1.0);
    assert!(
        !s.summary.warnings.iter().any(|w| w.contains("reasoning")),
        "{:?}",
        s.summary.warnings
    );

    // A required call, one at most a request: exactly one each, after the budget's thinking.
    let dir = temp_run_dir("tools");
    let tools = root().join("tests/fixtures/tools/strict_get_time.json");
    let s = run(
        RunConfig {
            thinking_budgets: vec![4],
            chat: ChatExtras {
                tools: Some(ChatExtras::load_tools(tools.to_str().unwrap()).unwrap()),
                tool_choice: Some("required".into()),
                chat_template_kwargs: None,
            },
            extra_body: Some(body(&serde_json::json!({"parallel_tool_calls": false}))),
            ..run_config(&srv.url())
        },
        &dir,
    )
    .await;
    let l = &s.summary.sweep[0];
    println!(
        "| level | TTFT p50 (ms) | TTFC p50 (ms) | thinking p50 (ms) | reasoning / answer tokens | tool calls |"
    );
    row(l);
    for r in real_server::records(&dir).iter().filter(|r| !r.warmup) {
        assert_eq!(r.tool_calls, 1, "{r:?}");
        assert_eq!(r.reasoning_tokens, Some(4), "{r:?}");
        assert!(r.first_tool_call_us.is_some(), "{r:?}");
    }
    assert!(warnings_of(&s, &l.label(), "tool calls were required").is_empty());

    a_misfit_template_is_caught(&srv.url()).await;
    drop(srv);
    println!(
        "vllm_reasoning (deepseek_r1): server up in {server_up:.0} s, {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}

/// The template told not to open `<think>`: `deepseek_r1` still calls every token thinking, and
/// the budget never starts.
async fn a_misfit_template_is_caught(url: &str) {
    let dir = temp_run_dir("misfit");
    let s = run(
        RunConfig {
            thinking_budgets: vec![8],
            chat: ChatExtras {
                chat_template_kwargs: Some(serde_json::json!({"enable_thinking": false})),
                ..ChatExtras::default()
            },
            ..run_config(url)
        },
        &dir,
    )
    .await;
    let l = &s.summary.sweep[0];
    row(l);
    let st = l.stats.as_ref().unwrap();
    assert_eq!(st.scalars.unanswered_requests, 4);
    assert!(st.dists.ttfc_ms.is_none(), "TTFC never happened");
    the_warning(
        &s,
        "template misfit",
        "C=2 (think 8)",
        &[
            "every output token of all 4 requests arrived as reasoning",
            "a thinking budget of 8 tokens was sent, yet they thought for all 40 tokens",
            "--reasoning-parser",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_reasoning_parser_is_caught() {
    if !available("no_reasoning_parser_is_caught") {
        return;
    }
    let Some(model) = model_reasoning() else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let srv = VllmServer::start("no-parser", &["--model", &model]);
    let server_up = started.elapsed().as_secs_f64();

    // A budget without a parser: vLLM refuses every request, and says which flag.
    let dir = temp_run_dir("refused");
    let s = run(
        RunConfig {
            thinking_budgets: vec![8],
            ..run_config(&srv.url())
        },
        &dir,
    )
    .await;
    let st = s.summary.sweep[0].stats.as_ref().unwrap();
    assert_eq!(st.scalars.completed, 0);
    let f = &st.scalars.failures["server_error"];
    assert_eq!(f.count, 4);
    assert!(
        f.first_message.contains("--reasoning-parser"),
        "{}",
        f.first_message
    );
    println!("budget refused: {}", f.first_message);

    // Thinking asked for, none streamed.
    let dir = temp_run_dir("none-streamed");
    let s = run(
        RunConfig {
            chat: ChatExtras {
                chat_template_kwargs: Some(serde_json::json!({"enable_thinking": true})),
                ..ChatExtras::default()
            },
            ..run_config(&srv.url())
        },
        &dir,
    )
    .await;
    the_warning(
        &s,
        "no reasoning",
        "C=2",
        &[
            "enable_thinking was sent, yet none of 4 requests streamed any reasoning",
            "--reasoning-parser",
        ],
    );

    // `</think>` written as the answer (a logit bias makes it every token).
    let dir = temp_run_dir("literal-tags");
    let s = run(
        RunConfig {
            extra_body: Some(body(
                &serde_json::json!({"logit_bias": {END_THINK_ID: 100}}),
            )),
            ..run_config(&srv.url())
        },
        &dir,
    )
    .await;
    let st = s.summary.sweep[0].stats.as_ref().unwrap();
    assert_eq!(st.scalars.think_tag_requests, 4);
    the_warning(
        &s,
        "literal tags",
        "C=2",
        &["literal <think> or </think>", "--reasoning-parser"],
    );
    drop(srv);
    println!(
        "vllm_reasoning (no parser): server up in {server_up:.0} s, {:.0} s in all",
        started.elapsed().as_secs_f64()
    );
}
