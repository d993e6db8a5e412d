//! Replaying a production trace (`--trace`) against the built-in simulator: the simulator must
//! see each request arrive at its recorded offset, and its prefix cache must serve what the
//! trace's `hash_ids` imply (docs/metrics.md "Trace replay").
//!
//! The simulator here prefills a million tokens a second and caches every prompt's 16-token
//! blocks once its prefill is done, far more than these traces hold; the samples' requests that
//! share blocks arrive at least 300 ms after the request that first named them. So every block
//! a request shares with an earlier one is a cache hit, and the measured hit rate is the
//! trace's expected one exactly when prompts have their recorded lengths (the simulator's
//! `/tokenize` sizes them exactly).
//!
//! Arrival tolerance: p99 of |(arrival − first arrival) − (recorded offset ÷ speedup)| within
//! 5 ms, plus the simulator's own schedule slip (a loaded machine wakes it late).

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;

use servetop::config::RunConfig;
use servetop::metrics::LevelStats;
use servetop::run::session::Session;
use servetop::sim::{self, SimConfig, SimHandle};
use servetop::workload::trace::{TraceConfig, TraceFormat};

mod sim_run;
use sim_run::finished;

const ARRIVAL_TOLERANCE_MS: f64 = 5.0;

async fn start() -> SimHandle {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 5.0;
    sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

fn trace(file: &str, speedup: f64, limit: Option<u32>) -> TraceConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/data")
        .join(file);
    TraceConfig::load(path, None, speedup, None, limit).unwrap()
}

fn replay_config(h: &SimHandle, t: TraceConfig) -> RunConfig {
    RunConfig {
        concurrency: vec![],
        warmup_requests: 0,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        trace: Some(t),
        ..RunConfig::minimal(&h.url())
    }
}

fn stats(s: &Session) -> &LevelStats {
    s.summary.traces[0]
        .stats
        .as_ref()
        .expect("the trace level has stats")
}

/// p99 of the arrival-time error (ms): each arrival's offset from the first against the
/// recorded offset from the first, in time order.
fn arrival_error_p99_ms(h: &SimHandle, recorded_ms: &[f64]) -> f64 {
    let log = h.log.lock().unwrap();
    let mut arrived: Vec<_> = log.requests.iter().map(|r| r.arrived).collect();
    arrived.sort();
    assert_eq!(
        arrived.len(),
        recorded_ms.len(),
        "every request reached the simulator"
    );
    let mut err: Vec<f64> = arrived
        .iter()
        .zip(recorded_ms)
        .map(|(a, want)| {
            let got = a.duration_since(arrived[0]).as_secs_f64() * 1e3;
            (got - (want - recorded_ms[0])).abs()
        })
        .collect();
    err.sort_by(f64::total_cmp);
    let k = ((err.len() as f64 * 0.99).ceil() as usize).clamp(1, err.len());
    err[k - 1]
}

fn slip_ms(h: &SimHandle) -> f64 {
    h.log.lock().unwrap().schedule_slip.as_secs_f64() * 1e3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mooncake_trace_replays_at_its_times_with_its_cache_hits() {
    let h = start().await;
    let t = trace("trace-mooncake.jsonl", 1.0, None);
    let loaded = t.loaded.clone().unwrap();
    let recorded: Vec<f64> = loaded.requests.iter().map(|r| r.at_ms).collect();
    let want_hit = loaded.expected_cache_hit_rate().unwrap();
    let s = finished(replay_config(&h, t)).await;
    let level = &s.summary.traces[0];
    let st = stats(&s);
    assert_eq!((st.scalars.completed, st.scalars.failed), (10, 0));
    let err = arrival_error_p99_ms(&h, &recorded);
    let tol = ARRIVAL_TOLERANCE_MS + slip_ms(&h);
    assert!(err <= tol, "arrival error p99 {err:.3} ms > {tol:.3} ms");
    let hit = st.scalars.prefix_cache_hit_rate.unwrap();
    assert!(
        (hit - want_hit).abs() < 0.005,
        "prefix-cache hit rate {hit:.4}, the trace implies {want_hit:.4}"
    );
    // Recorded lengths: the simulator counted every prompt at its recorded length.
    let log = h.log.lock().unwrap();
    let mut inputs: Vec<u64> = log.requests.iter().map(|r| r.input_tokens).collect();
    let mut want: Vec<u64> = loaded.requests.iter().map(|r| r.input_len).collect();
    inputs.sort_unstable();
    want.sort_unstable();
    assert_eq!(inputs, want);
    let t = level.trace.as_ref().unwrap();
    assert_eq!(t.expected_prefix_cache_hit_rate, Some(want_hit));
    let file = serde_json::to_value(&s.summary).unwrap();
    let l = &file["traces"][0];
    assert_eq!(l["kind"], "trace");
    assert_eq!(l["completed"], 10);
    assert_eq!(l["failed"], 0);
    assert!(l["p99_client_queue_ms"].is_number(), "{l}");
    println!(
        "mooncake: arrival error p99 {err:.3} ms (tolerance {tol:.1}) · prefix-cache hit rate {:.2} % (trace implies {:.2} %) · TTFT p50 {:.1} ms · client queue p99 {:.3} ms",
        hit * 100.0,
        want_hit * 100.0,
        st.dists.ttft_ms.as_ref().unwrap().p50,
        st.dists.client_queue_ms.as_ref().unwrap().p99,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_azure_trace_replays_sped_up_with_no_shared_prefix() {
    let h = start().await;
    let t = trace("trace-azure.csv", 2.0, None);
    let loaded = t.loaded.clone().unwrap();
    assert_eq!(loaded.format, TraceFormat::Azure);
    let recorded: Vec<f64> = loaded.requests.iter().map(|r| r.at_ms).collect();
    let s = finished(replay_config(&h, t)).await;
    let st = stats(&s);
    assert_eq!((st.scalars.completed, st.scalars.failed), (10, 0));
    let err = arrival_error_p99_ms(&h, &recorded);
    let tol = ARRIVAL_TOLERANCE_MS + slip_ms(&h);
    assert!(err <= tol, "arrival error p99 {err:.3} ms > {tol:.3} ms");
    // No hash_ids: every prompt is its own text, nothing for the cache to serve.
    assert_eq!(st.scalars.prefix_cache_hit_rate, Some(0.0));
    let level = &s.summary.traces[0];
    let info = level.trace.as_ref().unwrap();
    assert_eq!(info.expected_prefix_cache_hit_rate, None);
    // Recorded 2.826 s from first to last, replayed twice as fast.
    assert!(
        (info.duration_s - 1.413).abs() < 1e-3,
        "{}",
        info.duration_s
    );
    let log = h.log.lock().unwrap();
    let outputs: u64 = log.requests.iter().map(|r| r.output_tokens).sum();
    let want: u64 = loaded
        .requests
        .iter()
        .map(|r| u64::from(r.output_len))
        .sum();
    assert_eq!(outputs, want, "each request got its recorded output length");
    println!("azure ×2: arrival error p99 {err:.3} ms (tolerance {tol:.1})");
}
