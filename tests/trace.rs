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
//! Arrivals: servetop schedules each request at its recorded offset ÷ speedup from the first
//! (to the microsecond, from its requests.jsonl), the simulator's own record shows each request
//! arriving when servetop says it sent it (`tests/sim_truth`), and any lateness of the sender is
//! what servetop reports as client queue, computed here from the records.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use servetop::event::RunState;
use servetop::run::run_headless;

use servetop::config::RunConfig;
use servetop::metrics::LevelStats;
use servetop::run::session::Session;
use servetop::sim::{self, SimConfig, SimHandle};
use servetop::workload::trace::{TraceConfig, TraceFormat};

mod sim_truth;

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

/// The recorded offsets of a sample trace in ms, read from the file here (Mooncake's
/// `timestamp` in ms; Azure's `TIMESTAMP` wall-clock time), not from servetop's loader.
fn recorded_ms(file: &str) -> Vec<f64> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/data")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    if path.extension().is_some_and(|x| x == "jsonl") {
        return text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["timestamp"]
                    .as_f64()
                    .unwrap()
            })
            .collect();
    }
    // "2023-11-16 18:15:46.6805900": the samples stay within one day.
    text.lines()
        .skip(1)
        .map(|l| {
            let time = l.split(',').next().unwrap().split(' ').nth(1).unwrap();
            let hms: Vec<f64> = time.split(':').map(|x| x.parse().unwrap()).collect();
            (hms[0] * 3600.0 + hms[1] * 60.0 + hms[2]) * 1e3
        })
        .collect()
}

/// The sample Mooncake trace's prefix-cache hit rate, from the file: each request's leading
/// run of `hash_ids` named by an earlier request, 512 tokens a block (Mooncake's), capped at
/// its prompt, over all prompt tokens.
fn mooncake_hit_rate() -> f64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/data/trace-mooncake.jsonl");
    let mut seen: Vec<u64> = Vec::new();
    let (mut hit, mut total) = (0u64, 0u64);
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let input = v["input_length"].as_u64().unwrap();
        let ids: Vec<u64> = v["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        let mut lead = 0;
        while lead < ids.len() && seen.contains(&ids[lead]) {
            lead += 1;
        }
        hit += (lead as u64 * 512).min(input);
        total += input;
        seen.extend(&ids);
    }
    hit as f64 / total as f64
}

/// Runs `cfg` writing its directory (a fresh one under the temp dir) and returns the session.
async fn replay(cfg: RunConfig, name: &str) -> (Session, PathBuf) {
    let dir = std::env::temp_dir().join(format!("servetop-trace-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (state, session) = run_headless(cfg, Some(dir.clone())).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    (session, dir)
}

/// Each request was scheduled at its recorded offset ÷ `speedup` after the first, reached the
/// server when servetop says it sent it, and the level's client-queue p99 is the records' own
/// (send − schedule). Returns the largest client queue (ms).
fn arrivals_follow_the_trace(h: &SimHandle, dir: &Path, recorded_ms: &[f64], speedup: f64) -> f64 {
    let (records, origins) = sim_truth::run_records(dir);
    let mut measured: Vec<_> = records.iter().filter(|r| !r.warmup).collect();
    measured.sort_by_key(|r| r.index);
    assert_eq!(measured.len(), recorded_ms.len(), "every request was sent");
    let (s0, r0) = (measured[0].sched_at_us as f64, recorded_ms[0]);
    for (r, at) in measured.iter().zip(recorded_ms) {
        let want_us = (at - r0) / speedup * 1e3;
        let got_us = r.sched_at_us as f64 - s0;
        assert!(
            (got_us - want_us).abs() <= 2.0,
            "request {}: scheduled {got_us:.0} µs after the first, recorded {want_us:.0} µs at ×{speedup}",
            r.index
        );
    }
    sim_truth::agree_all(&records, &origins, &sim_truth::of(h));
    let queue: Vec<f64> = measured
        .iter()
        .map(|r| (r.send_at_us - r.sched_at_us) as f64 / 1e3)
        .collect();
    let p99 = sim_truth::nearest_rank(&queue, 99.0);
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let got = results["traces"][0]["p99_client_queue_ms"]
        .as_f64()
        .unwrap();
    assert!(
        (got - p99).abs() <= p99 * 1e-3 + 1e-3,
        "client queue p99 {got} ms, the records' own {p99} ms"
    );
    p99
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mooncake_trace_replays_at_its_times_with_its_cache_hits() {
    let h = start().await;
    let t = trace("trace-mooncake.jsonl", 1.0, None);
    let loaded = t.loaded.clone().unwrap();
    let recorded = recorded_ms("trace-mooncake.jsonl");
    let want_hit = mooncake_hit_rate();
    let (s, dir) = replay(replay_config(&h, t), "mooncake").await;
    let level = &s.summary.traces[0];
    let st = stats(&s);
    assert_eq!((st.scalars.completed, st.scalars.failed), (10, 0));
    let queue = arrivals_follow_the_trace(&h, &dir, &recorded, 1.0);
    let hit = st.scalars.prefix_cache_hit_rate.unwrap();
    assert!(
        (hit - want_hit).abs() < 0.005,
        "prefix-cache hit rate {hit:.4}, the trace implies {want_hit:.4}"
    );
    // ...and what the server itself counted as served from its cache.
    let (cached, queried) = {
        let l = h.log.lock().unwrap();
        (l.total_cached_tokens, l.total_cache_queries)
    };
    let server_hit = cached as f64 / queried as f64;
    assert!(
        (hit - server_hit).abs() < 1e-9,
        "prefix-cache hit rate {hit:.6}, the server's own {server_hit:.6} ({cached} of {queried} tokens)"
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
        "mooncake: client queue p99 {queue:.3} ms · prefix-cache hit rate {:.2} % (trace implies {:.2} %) · TTFT p50 {:.1} ms · client queue p99 {:.3} ms",
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
    let recorded = recorded_ms("trace-azure.csv");
    let (s, dir) = replay(replay_config(&h, t), "azure").await;
    let st = stats(&s);
    assert_eq!((st.scalars.completed, st.scalars.failed), (10, 0));
    let queue = arrivals_follow_the_trace(&h, &dir, &recorded, 2.0);
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
    println!("azure ×2: client queue p99 {queue:.3} ms");
}
