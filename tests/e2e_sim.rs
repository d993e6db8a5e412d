//! End-to-end: headless runs against the built-in simulator on 127.0.0.1:0, checked against the
//! simulator's own configuration and its log of what it served.
//!
//! Tolerances: measured times are held to the simulator's own record of what it did (its
//! frames' times, `tests/sim_truth`), with the fixed delivery tolerances stated there, never
//! to its configured step: a busy machine stretches the server's steps and the client's
//! reading of them alike.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::config::{BackendChoice, RunConfig};
use servetop::event::RunState;
use servetop::metrics::{CountSource, LevelStats};
use servetop::run::run_headless;
use servetop::run::session::Session;
use servetop::runner;
use servetop::sim::{self, AcceptLength, SimConfig, SimHandle};
use servetop::summary::LevelStatus;
use servetop::workload::RequestCount;

mod sim_run;
mod sim_truth;

fn sim_config() -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 20.0;
    c.accept_length = AcceptLength::Fixed(4);
    c.batch_growth = 0.0;
    c.context_ms_per_1k = 0.0;
    c.prefill_tokens_per_s = 1_000_000.0;
    c.context_length = 32768;
    c
}

fn run_config(url: &str) -> RunConfig {
    RunConfig {
        output_len: 201,
        requests_per_level: RequestCount::Fixed(3),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        // (No GPU sampling: NVML is not what these tests are about, and CI has no GPU.)
        ..RunConfig::minimal(url)
    }
}

async fn start(sim: SimConfig) -> SimHandle {
    sim::start(sim, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

async fn run_with(
    h: &SimHandle,
    edit: impl FnOnce(&mut RunConfig),
    edit_prepared: impl FnOnce(&mut runner::Prepared),
) -> Session {
    let mut cfg = run_config(&h.url());
    edit(&mut cfg);
    let mut prepared = runner::prepare(&cfg, None).await.expect("prepare");
    edit_prepared(&mut prepared);
    sim_run::finish_prepared(&cfg, prepared).await
}

fn stats(s: &Session, i: usize) -> &LevelStats {
    s.summary.sweep[i].stats.as_ref().expect("level has stats")
}

/// A level's decode figures against the server's record of its requests, each of
/// `after_first` tokens after its first: the mean TPOT, per-token ITL (each frame's gap split
/// over its tokens), chunk gap and decode speed, and the ITL median. A request's span from its
/// first to its last token may differ between the client's and the server's records by twice
/// the delivery tolerance, so a mean over its tokens by that over `after_first`; a median by
/// twice the median tolerance.
fn decode_against_server(
    d: &servetop::metrics::LevelDists,
    server: &[&servetop::sim::SimRequestTrace],
    after_first: u64,
) {
    assert!(!server.is_empty());
    let gap_ms = |w: &[(u64, u32)]| (w[1].0 - w[0].0) as f64 / 1e3;
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let per_token: Vec<f64> = server
        .iter()
        .flat_map(|r| {
            r.writes.windows(2).flat_map(move |w| {
                std::iter::repeat_n(gap_ms(w) / f64::from(w[1].1), w[1].1 as usize)
            })
        })
        .collect();
    let gaps: Vec<f64> = server
        .iter()
        .flat_map(|r| r.writes.windows(2).map(gap_ms))
        .collect();
    let tpot: Vec<f64> = server
        .iter()
        .filter_map(|r| sim_truth::server_tpot_ms(r))
        .collect();
    let span_tol = 2.0 * (sim_truth::TOL_MS + 1.0);
    let chunks = gaps.len() as f64 / server.len() as f64;
    let checks = [
        (
            "TPOT mean",
            d.tpot_ms.as_ref().unwrap().mean,
            mean(&tpot),
            span_tol / after_first as f64,
        ),
        (
            "ITL mean",
            d.itl_ms.as_ref().unwrap().mean,
            mean(&per_token),
            span_tol / after_first as f64,
        ),
        (
            "chunk gap mean",
            d.chunk_gap_ms.as_ref().unwrap().mean,
            mean(&gaps),
            span_tol / chunks,
        ),
        (
            "ITL p50",
            d.itl_ms.as_ref().unwrap().p50,
            sim_truth::nearest_rank(&per_token, 50.0),
            2.0 * sim_truth::MEDIAN_TOL_MS,
        ),
    ];
    for (what, got, want, tol) in checks {
        assert!(
            (got - want).abs() <= tol + want * 1e-3,
            "{what}: {got:.4} ms, the server's frames give {want:.4} ms (± {tol:.3} ms)"
        );
    }
    // Decode speed is the inverse of TPOT, request by request.
    let speed: Vec<f64> = tpot.iter().map(|t| 1e3 / t).collect();
    let want = mean(&speed);
    let got = d.decode_tokens_per_s.as_ref().unwrap().mean;
    let rel = span_tol / after_first as f64 / tpot.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        (got / want - 1.0).abs() <= rel * 1.01 + 1e-3,
        "decode tok/s {got:.2}, the server's frames give {want:.2} (± {:.1} %)",
        rel * 100.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_accept_length_c1_gives_exact_decode_numbers() {
    let h = start(sim_config()).await;
    let s = run_with(&h, |_| {}, |_| {}).await;
    let st = stats(&s, 0);
    let (sc, d) = (&st.scalars, &st.dists);
    assert_eq!(sc.completed, 3);
    assert_eq!(sc.failed, 0);
    // 1 token from prefill + 50 steps × 4 tokens, counted exactly from per-chunk usage.
    assert_eq!(sc.total_output_tokens, 3 * 201);
    assert_eq!(
        sc.chunk_token_sources.get(&CountSource::PerChunkUsage),
        Some(&3)
    );
    assert_eq!(sc.accept_length_client, Some(4.0));
    // 4 tokens a step: TPOT and per-token ITL a quarter of the chunk gap, each what the
    // simulator's own record of its frames gives (20 ms steps unless the machine stretched
    // them). Counted per chunk, TPOT and ITL would read 4× the server's.
    let truth = sim_truth::of(&h);
    decode_against_server(d, &sim_truth::of_level(&truth, 0), 200);
    assert_eq!(
        d.itl_ms.as_ref().unwrap().count,
        3 * 200,
        "one ITL value per token"
    );
    // Ground truth: the simulator made 50 decode steps for each measured request.
    let log = h.log.lock().unwrap();
    let served: Vec<_> = log.requests.iter().skip(1).collect();
    assert_eq!(served.len(), 3);
    assert!(
        served
            .iter()
            .all(|r| r.decode_steps == 50 && r.output_tokens == 201)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_per_chunk_usage_the_estimate_is_rescaled_and_labelled() {
    let mut c = sim_config();
    c.continuous_usage = false;
    let h = start(c).await;
    let s = run_with(&h, |_| {}, |_| {}).await;
    let sc = &stats(&s, 0).scalars;
    assert_eq!(sc.total_output_tokens, 3 * 201, "totals from final usage");
    assert_eq!(sc.output_token_sources.get(&CountSource::Usage), Some(&3));
    assert_eq!(
        sc.chunk_token_sources.get(&CountSource::ChunkEstimate),
        Some(&3)
    );
    assert_eq!(sc.accept_length_client, Some(4.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefill_rate_sets_ttft_and_prompts_are_exact() {
    let mut c = sim_config();
    c.prefill_tokens_per_s = 10_000.0;
    c.prefill_chunk_tokens = 65536;
    let h = start(c).await;
    let s = run_with(
        &h,
        |c| {
            c.input_len = 5000;
            c.output_len = 2;
        },
        |_| {},
    )
    .await;
    let st = stats(&s, 0);
    // Every prompt is exactly 5000 tokens as the server counts them.
    assert_eq!(st.scalars.mean_input_tokens, Some(5000.0));
    assert_eq!(st.scalars.total_input_tokens, 3 * 5000);
    // The simulator's own TTFT (its read of the request to its first token) is its prefill:
    // 5000 tokens at 10,000 tok/s, a sleep of at least 0.5 s.
    let ttft = st.dists.ttft_ms.as_ref().unwrap();
    let log = h.log.lock().unwrap();
    let sim: Vec<f64> = log
        .requests
        .iter()
        .skip(1)
        .map(|r| r.ttft.as_secs_f64() * 1000.0)
        .collect();
    assert_eq!(sim.len(), 3);
    assert!(
        sim.iter().all(|t| *t >= 500.0),
        "the server's TTFTs {sim:?}"
    );
    let sim_mean = sim.iter().sum::<f64>() / 3.0;
    // The client's span contains the simulator's (it starts before the server reads the
    // request and ends after the token is written), so the difference is never negative and
    // at most the read and delivery tolerances of the server's record.
    let diff = ttft.mean - sim_mean;
    let tol = sim_truth::READ_TOL_MS + sim_truth::TOL_MS;
    assert!(
        (0.0..=tol).contains(&diff),
        "client TTFT {} ms against the server's {sim_mean} ms",
        ttft.mean
    );
    // Prefill speed is input over TTFT: no faster than the server's 10,000 tok/s, no slower
    // than the slowest TTFT the client saw allows.
    let prefill = st.scalars.prefill_tokens_per_s.unwrap();
    assert!(
        prefill <= 10_000.0 && prefill >= 5000.0 / (ttft.max / 1e3),
        "prefill {prefill} tok/s with TTFTs up to {} ms",
        ttft.max
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queueing_beyond_max_running_shows_as_ttft_not_lost_requests() {
    let mut c = sim_config();
    c.max_running = 2;
    c.decode_step_ms = 10.0;
    c.accept_length = AcceptLength::Fixed(1);
    let h = start(c).await;
    let started = std::time::Instant::now();
    let mut cfg = run_config(&h.url());
    cfg.concurrency = vec![2, 6];
    cfg.output_len = 20;
    cfg.requests_per_level = RequestCount::Fixed(12);
    let dir = sim_run::temp_run_dir("e2e-queue");
    let s = sim_run::finished_into(cfg, &dir).await;
    let run_ms = started.elapsed().as_secs_f64() * 1000.0;
    let (c2, c6) = (stats(&s, 0), stats(&s, 1));
    assert_eq!((c2.scalars.completed, c6.scalars.completed), (12, 12));
    assert_eq!(c6.scalars.failed, 0);
    assert_eq!(c6.scalars.max_concurrent_requests, 6);
    // A request takes ~191 ms (prefill and its first token, then 19 steps of 10 ms); at C=6
    // with 2 running, 4 wait in the server's queue. Served two at a time, the first pair waits
    // for nothing, the second for one service, and every later request for two (each waits
    // behind the four that queued before it): TTFTs 0, 0, 191, 191, then eight of ~382 ms.
    // What the server really did is in its own record: the median TTFT servetop measured is
    // the median from the server's read of each request to its first frame, within the
    // client's send and delivery tolerances; and the wait is there (a loaded machine only
    // makes the simulator later, never earlier than its model).
    let (t2, t6) = (
        c2.dists.ttft_ms.as_ref().unwrap(),
        c6.dists.ttft_ms.as_ref().unwrap(),
    );
    let truth = sim_truth::of(&h);
    sim_truth::guard(&truth, run_ms / 1000.0);
    let (records, origins) = sim_truth::run_records(&dir);
    sim_truth::agree_all(&records, &origins, &truth);
    for (level, got) in [(0, t2.p50), (1, t6.p50)] {
        let mine: Vec<_> = records
            .iter()
            .filter(|r| r.level == level)
            .cloned()
            .collect();
        let server = sim_truth::server_seen_ttft_ms(&mine, &origins, &truth);
        assert_eq!(server.len(), 12);
        let want = sim_truth::nearest_rank(&server, 50.0);
        let tol = 2.0 * sim_truth::MEDIAN_TOL_MS + want * 1e-3;
        assert!(
            (got - want).abs() <= tol,
            "level {level}: TTFT p50 {got:.3} ms, the server's record gives {want:.3} ms (± {tol:.3})"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(t2.p99 < 60.0, "C=2 TTFT p99 {}", t2.p99);
    assert!(t6.p50 >= 0.95 * 382.0, "C=6 TTFT p50 {}", t6.p50);
    // ...and not client-side queueing: the closed loop sends as soon as a slot frees.
    assert!(c6.dists.client_queue_ms.as_ref().unwrap().p99 < 20.0);
    assert_eq!(h.log.lock().unwrap().peak_waiting, 4, "C=6 − 2 running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_long_context_is_skipped_with_the_flag_to_raise() {
    let h = start(sim_config()).await;
    let s = run_with(
        &h,
        |c| {
            c.concurrency = vec![];
            c.long_context = vec![20_000, 60_000];
            c.long_context_output_len = 8;
        },
        |_| {},
    )
    .await;
    let lc = &s.summary.long_context;
    assert_eq!(lc[0].status, LevelStatus::Done);
    assert_eq!(
        lc[0].stats.as_ref().unwrap().scalars.mean_input_tokens,
        Some(20_000.0)
    );
    assert_eq!(lc[1].status, LevelStatus::Skipped);
    let reason = lc[1].reason.as_deref().unwrap();
    assert!(
        reason.contains("32768") && reason.contains("--context-length"),
        "{reason}"
    );
    assert!(reason.contains("at least 60008"), "{reason}");
    let md = servetop::export::markdown::summary_md(&s.summary);
    assert!(
        md.contains("| 60K | - | - | - | - | skipped (see below) |"),
        "{md}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_rejection_without_precheck_is_classified_as_context_skip() {
    let h = start(sim_config()).await;
    let s = run_with(
        &h,
        |c| {
            c.concurrency = vec![];
            // A length that fits too: a plan where nothing fits is refused before it starts.
            c.long_context = vec![1_000, 40_000];
            c.long_context_repeats = 3;
        },
        // Pretend the server did not report its limit, so the request is really sent.
        |p| p.server.context_limit = None,
    )
    .await;
    assert_eq!(s.summary.long_context[0].status, LevelStatus::Done);
    let l = &s.summary.long_context[1];
    assert_eq!(l.status, LevelStatus::Skipped);
    let reason = l.reason.as_deref().unwrap();
    assert!(
        reason.contains("refused") && reason.contains("--context-length"),
        "{reason}"
    );
    let f = &l.stats.as_ref().unwrap().scalars.failures["context_too_long"];
    // The first refusal stops the repeats: a refused prompt is refused again.
    assert_eq!(f.count, 1);
    assert!(f.first_message.contains("maximum context length is 32768"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_and_sglang_native_backends_count_exactly() {
    let mut c = sim_config();
    c.decode_step_ms = 5.0;
    c.accept_length = AcceptLength::Fixed(2);
    let h = start(c).await;
    for backend in [BackendChoice::OpenaiChat, BackendChoice::Sglang] {
        let s = run_with(
            &h,
            |c| {
                c.backend = backend;
                c.concurrency = vec![2];
                c.output_len = 21;
                c.requests_per_level = RequestCount::Fixed(4);
            },
            |_| {},
        )
        .await;
        let sc = &stats(&s, 0).scalars;
        assert_eq!(sc.completed, 4, "{backend:?}");
        assert_eq!(sc.total_output_tokens, 4 * 21, "{backend:?}");
        // Two tokens a step, one event a step. A chunk is a delivery: where the client was
        // descheduled for longer than a step (a loaded machine), two events reach it in one read
        // and make one chunk of 4, and the level counts that delivery as holding several events.
        // A token event read together with the stream's closing events (its usage, `[DONE]`)
        // is a delivery of several events too, of the same tokens: tokens a chunk stay 2.
        let share = sc.multi_event_delivery_share.unwrap_or(0.0);
        if share == 0.0 {
            assert_eq!(sc.accept_length_client, Some(2.0), "{backend:?}");
        } else {
            assert!(sc.accept_length_client.unwrap() >= 2.0, "{backend:?}");
        }
        // The chat template adds tokens; the warmup learned how many, so prompts still total 100.
        assert_eq!(sc.mean_input_tokens, Some(100.0), "{backend:?}");
        let src = if backend == BackendChoice::Sglang {
            CountSource::EngineNative
        } else {
            CountSource::PerChunkUsage
        };
        assert_eq!(sc.chunk_token_sources.get(&src), Some(&4), "{backend:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_directory_is_complete_and_consistent() {
    let h = start(sim_config()).await;
    let dir = std::env::temp_dir().join(format!("servetop-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = run_config(&h.url());
    cfg.concurrency = vec![1, 2];
    cfg.output_len = 9;
    cfg.long_context = vec![2000, 40_000];
    cfg.long_context_output_len = 5;
    let (state, _s) = run_headless(cfg, Some(dir.clone())).await.unwrap();
    assert_eq!(state, RunState::Finished);
    let lines = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    // 1 warmup + 3 + 3 sweep + 1 long context (40K is skipped before sending).
    assert_eq!(lines.lines().count(), 8);
    for l in lines.lines() {
        let r: servetop::metrics::RequestRecord = serde_json::from_str(l).unwrap();
        assert!(r.is_ok());
    }
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["state"], "finished");
    assert_eq!(v["tool"]["name"], "servetop");
    assert_eq!(v["server"]["engine"], "sim");
    assert_eq!(v["server"]["simulated"], true);
    for key in [
        "concurrency",
        "completed",
        "failed",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
        "mean_decode_tokens_per_s",
        "accept_length_client",
        "mean_ttft_ms",
        "median_ttft_ms",
        "p90_ttft_ms",
        "p99_ttft_ms",
        "mean_itl_ms",
        "p99_itl_ms",
        "mean_tpot_ms",
        "p99_e2el_ms",
    ] {
        assert!(!v["sweep"][1][key].is_null(), "sweep key {key}");
    }
    for key in [
        "context_tokens",
        "status",
        "mean_ttft_ms",
        "prefill_tokens_per_s",
        "mean_decode_tokens_per_s",
    ] {
        assert!(
            !v["long_context"][0][key].is_null(),
            "long_context key {key}"
        );
    }
    assert_eq!(v["long_context"][1]["status"], "skipped");
    assert!(
        v["long_context"][1]["reason"]
            .as_str()
            .unwrap()
            .contains("--context-length")
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert_eq!(v["simulated"], true);
    assert!(md.contains("SIMULATED SERVER"), "{md}");
    assert!(md.contains("| C | done | req/s |"));
    assert!(md.contains("| context | input tokens |"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A level longer than the prompt lookahead (1024 prompts prepared before it starts) gets the rest
/// from a producer while it runs: every request is sent exactly once, each prompt exactly sized.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_longer_than_the_prompt_lookahead_sends_every_request_once() {
    let mut c = sim_config();
    c.decode_step_ms = 0.5;
    c.accept_length = AcceptLength::Fixed(1);
    let h = start(c).await;
    let dir = std::env::temp_dir().join(format!("servetop-lookahead-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = run_config(&h.url());
    cfg.concurrency = vec![8];
    cfg.input_len = 24;
    cfg.output_len = 2;
    cfg.requests_per_level = RequestCount::Fixed(1500);
    cfg.warmup_requests = 0;
    let (state, s) = run_headless(cfg, Some(dir.clone())).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    assert_eq!(stats(&s, 0).scalars.completed, 1500);
    let mut seen = vec![false; 1500];
    for line in std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
    {
        let r: servetop::metrics::RequestRecord = serde_json::from_str(line).unwrap();
        assert!(
            !std::mem::replace(&mut seen[r.index as usize], true),
            "index {} twice",
            r.index
        );
        assert_eq!(r.input_tokens, 24, "every prompt exactly sized");
    }
    assert!(seen.iter().all(|&x| x), "every index sent");
    assert_eq!(h.log.lock().unwrap().total_prompt_tokens, 1500 * 24);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs of events in one write (a busy API server) are one delivery each: the gap before a run
/// is split over its tokens, so ITL is the decode step, not half zeros, and the tokens per chunk
/// they make are labelled bursts, not speculation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_written_together_are_one_delivery() {
    // One token per 20 ms step; after the first token the server writes two steps' events in
    // one write, every 40 ms. 1 + 40 tokens: the first alone, then 20 writes of 2 events.
    let mut c = sim_config();
    c.accept_length = AcceptLength::Fixed(1);
    c.write_batch = 2;
    let h = start(c).await;
    let s = run_with(&h, |c| c.output_len = 41, |_| {}).await;
    let l = &s.summary.sweep[0];
    let (sc, d) = (&stats(&s, 0).scalars, &stats(&s, 0).dists);
    assert_eq!((sc.completed, sc.total_output_tokens), (3, 3 * 41));
    // 21 deliveries a request, 20 of them of two events: exact counts.
    assert_eq!(sc.deliveries, 3 * 21);
    assert!((sc.multi_event_delivery_share.unwrap() - 20.0 / 21.0).abs() < 1e-12);
    assert_eq!(d.tokens_per_chunk.as_ref().unwrap().count, 3 * 20);
    assert_eq!(sc.accept_length_client, Some(2.0));
    // Each write's gap split over its 2 tokens: the ITL values are the server's frame gaps
    // halved, their median and mean what the simulator's own record gives (its frames' times,
    // which a busy machine may stretch past 40 ms). Counted event by event, half the ITL values
    // would be 0 and the median 0 or a whole gap. A request's span moves by at most twice the
    // delivery tolerance between the records, over its 40 tokens after the first.
    let truth = sim_truth::of(&h);
    let server = sim_truth::of_level(&truth, 0);
    assert_eq!(server.len(), 3);
    let per_token: Vec<f64> = server
        .iter()
        .flat_map(|r| {
            r.writes.windows(2).flat_map(|w| {
                let gap = (w[1].0 - w[0].0) as f64 / 1e3 / f64::from(w[1].1);
                std::iter::repeat_n(gap, w[1].1 as usize)
            })
        })
        .collect();
    assert_eq!(per_token.len(), 3 * 40);
    let span_tol = 2.0 * (sim_truth::TOL_MS + 1.0) / 40.0;
    let itl = d.itl_ms.as_ref().unwrap();
    let want_mean = per_token.iter().sum::<f64>() / per_token.len() as f64;
    assert!(
        (itl.mean - want_mean).abs() <= span_tol,
        "ITL mean {} ms, the server's frames give {want_mean:.3} ms",
        itl.mean
    );
    let want_p50 = sim_truth::nearest_rank(&per_token, 50.0);
    assert!(
        (itl.p50 - want_p50).abs() <= 2.0 * sim_truth::MEDIAN_TOL_MS + want_p50 * 1e-3,
        "ITL p50 {} ms, the server's frames give {want_p50:.3} ms",
        itl.p50
    );
    assert!(itl.min > 10.0, "no zero gap survives: ITL min {}", itl.min);
    let tpot: Vec<f64> = server
        .iter()
        .filter_map(|r| sim_truth::server_tpot_ms(r))
        .collect();
    let want_tpot = tpot.iter().sum::<f64>() / tpot.len() as f64;
    let got_tpot = d.tpot_ms.as_ref().unwrap().mean;
    assert!(
        (got_tpot - want_tpot).abs() <= span_tol,
        "TPOT mean {got_tpot} ms, the server's frames give {want_tpot:.3} ms"
    );
    // The simulator's engine reports one token per step: two per chunk are bursts, not drafts.
    assert!(l.delivery_bursts, "{:?}", l.accept_length_server);
    assert_eq!(l.accept_length_client(), None);
    let w = s.summary.warnings.join("\n");
    assert!(w.contains("delivery bursts"), "{w}");
    let md = servetop::export::markdown::sweep_table(&s.summary.sweep, &[]);
    assert!(md.contains("— (bursts: 2.00 tok/chunk)"), "{md}");
}

/// E2E ends at the last token, not at `[DONE]`: a server that holds the usage chunk and
/// `[DONE]` back 300 ms after the last token moves neither E2E, TPOT nor decode speed, while
/// each stream really does stay open that much longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trailer_after_the_last_token_is_not_latency() {
    let mut c = sim_config();
    c.trailer_delay_ms = 300.0;
    let h = start(c).await;
    let s = run_with(&h, |_| {}, |_| {}).await;
    let st = stats(&s, 0);
    let (sc, d) = (&st.scalars, &st.dists);
    assert_eq!(sc.completed, 3);
    // The server's record of its frames: E2E − TTFT, TPOT and decode speed are the span of
    // the token frames, whatever the trailer. Ended at [DONE] each request would read 300 ms
    // more (TPOT 1.5 ms a token more), far outside the tolerances.
    let truth = sim_truth::of(&h);
    let mut server = sim_truth::of_level(&truth, 0);
    assert_eq!(server.len(), 3);
    server.sort_by_key(|r| r.received_unix_us);
    decode_against_server(d, &server, 200);
    let spans: Vec<f64> = server
        .iter()
        .map(|r| (r.last_write_unix_us().unwrap() - r.first_write_unix_us().unwrap()) as f64 / 1e3)
        .collect();
    let want = spans.iter().sum::<f64>() / 3.0;
    let got = d.e2el_ms.as_ref().unwrap().mean - d.ttft_ms.as_ref().unwrap().mean;
    let tol = 2.0 * (sim_truth::TOL_MS + 1.0);
    assert!(
        (got - want).abs() <= tol,
        "E2E − TTFT {got:.1} ms, the server's first to last token frame {want:.1} ms (± {tol} ms)"
    );
    // The trailer is real: at C=1 each next request reached the server only after the
    // previous stream closed, at least 300 ms after its last token.
    for w in server.windows(2) {
        let held = (w[1].received_unix_us - w[0].last_write_unix_us().unwrap()) as f64 / 1e3;
        assert!(
            held >= 300.0,
            "the next request came {held:.1} ms after the last token"
        );
    }
    // So the window (first send to the last token) holds two trailers but not the third: it
    // is the server's from reading the first request to writing the last token, less the
    // first request's way in and plus the last token's way out. Ended at [DONE] it would hold
    // the third trailer too, 300 ms more than the read and delivery tolerances together.
    let server_window =
        (server[2].last_write_unix_us().unwrap() - server[0].received_unix_us) as f64 / 1e3;
    let window = sc.duration_s * 1e3;
    let tol = sim_truth::READ_TOL_MS + sim_truth::TOL_MS;
    assert!(
        tol < 300.0 && (window - server_window).abs() <= tol,
        "window {window:.1} ms, the server's from the first read to the last token {server_window:.1} ms (± {tol} ms)"
    );
}

/// The guard every suite above runs: a simulator that fell more than a fifth of a run behind
/// its own schedule fails the test naming the slip; one that kept to it passes.
#[test]
fn a_starved_simulator_is_named_not_measured() {
    let mut t = servetop::sim::SimTruth {
        simulated: true,
        schedule_slip_ms: 2100.0,
        ..servetop::sim::SimTruth::default()
    };
    let why = sim_truth::starved(&t, 10.0).expect("21 % of the run: starved");
    assert!(
        why.contains("slipped 2100 ms") && why.contains("starved"),
        "{why}"
    );
    t.schedule_slip_ms = 1900.0;
    assert_eq!(sim_truth::starved(&t, 10.0), None, "19 % passes");
}
