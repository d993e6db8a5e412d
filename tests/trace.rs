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

mod run_files;
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

/// A replayed trace: the file's name, its format, the speedup, the `--max-concurrency`.
struct Replayed<'a> {
    source: &'a str,
    format: &'a str,
    speedup: f64,
    cap: Option<u32>,
}

/// What a replayed trace's files must say, computed here from its records and the trace file.
struct TraceWant {
    n: usize,
    /// The replayed offsets' span, s.
    span_s: f64,
    offered: f64,
    achieved: f64,
    window: f64,
    out_tput: f64,
    /// Prompt tokens served from the cache over all prompt tokens, the records' own.
    hit: f64,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    e2e: Vec<f64>,
    queue: Vec<f64>,
    peak: u64,
}

impl TraceWant {
    fn of(rs: &[run_files::Rec], recorded_ms: &[f64], speedup: f64) -> Self {
        let n = rs.len();
        assert_eq!(n, recorded_ms.len());
        let ms = |f: &dyn Fn(&run_files::Rec) -> f64| rs.iter().map(f).collect::<Vec<f64>>();
        let sends = rs.iter().map(|r| r.send);
        let send_span = sends.clone().max().unwrap() - sends.min().unwrap();
        let window = run_files::window_s(rs);
        let span_s = (recorded_ms[n - 1] - recorded_ms[0]) * 1e-3 / speedup;
        Self {
            n,
            span_s,
            offered: (n - 1) as f64 / span_s,
            achieved: (n - 1) as f64 / (send_span as f64 * 1e-6),
            window,
            out_tput: rs.iter().map(|r| r.output).sum::<u64>() as f64 / window,
            hit: rs.iter().map(|r| r.cached).sum::<u64>() as f64
                / rs.iter().map(|r| r.input).sum::<u64>() as f64,
            ttft: ms(&|r| r.ttft as f64 * 1e-3),
            tpot: ms(&|r| r.tpot_us() * 1e-3),
            e2e: ms(&|r| r.e2e as f64 * 1e-3),
            queue: ms(&|r| r.queue_ms()),
            peak: run_files::peak_in_flight(rs),
        }
    }
}

/// The files of a replayed trace read back (docs/outputs.md): `servetop report DIR` writes them
/// from results.json as a finished run does, and every figure of `trace.csv`,
/// `trace_timeline.csv` and summary.md's "Trace replay" tables must be what the run's records,
/// the trace file (`recorded_ms`, `want_hit`) and the server's own cache count (`server_hit`)
/// give, computed here: counts exactly, rates and means to rounding, percentiles as the
/// nearest rank within the histogram's 0.1 %.
fn trace_files_follow_the_records(
    dir: &Path,
    replay: &Replayed<'_>,
    recorded_ms: &[f64],
    want_hit: Option<f64>,
    server_hit: f64,
) {
    run_files::succeed(std::process::Command::new(run_files::bin()).args([
        "report",
        dir.to_str().unwrap(),
        "--chart-size",
        "400x225",
    ]));
    let level = run_files::results(dir)["traces"][0]["index"]
        .as_u64()
        .unwrap();
    let rs = run_files::records(dir, level);
    let w = TraceWant::of(&rs, recorded_ms, replay.speedup);
    run_files::close(
        "records' hit rate against the server's",
        w.hit,
        server_hit,
        1e-9,
        0.0,
    );
    trace_csv_read_back(dir, replay, &w, want_hit);
    trace_md_read_back(dir, replay, &w, want_hit);
    timeline_read_back(dir, replay, &rs);
}

/// trace.csv's row.
fn trace_csv_read_back(dir: &Path, replay: &Replayed<'_>, w: &TraceWant, want_hit: Option<f64>) {
    use run_files::{cell_f64, close, csv, hdr_close, nearest_rank};
    let rows = csv(dir, "trace.csv");
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    let cap = replay.cap.map_or(String::new(), |c| c.to_string());
    for (k, want) in [
        ("source", replay.source),
        ("format", replay.format),
        ("speedup", &replay.speedup.to_string()),
        ("requests", "10"),
        ("status", "done"),
        ("completed", "10"),
        ("failed", "0"),
        ("max_concurrency", &cap),
    ] {
        assert_eq!(row[k], want, "trace.csv {k}");
    }
    let exact = [
        ("duration_s", w.span_s),
        ("offered_request_rate", w.offered),
        ("achieved_request_rate", w.achieved),
        ("request_throughput", w.n as f64 / w.window),
        ("output_throughput", w.out_tput),
        ("prefix_cache_hit_rate", w.hit),
    ];
    for (k, want) in exact {
        close(
            &format!("trace.csv {k}"),
            cell_f64(row, k),
            want,
            1e-9,
            1e-12,
        );
    }
    match want_hit {
        Some(want) => close(
            "trace.csv expected_prefix_cache_hit_rate",
            cell_f64(row, "expected_prefix_cache_hit_rate"),
            want,
            1e-9,
            1e-12,
        ),
        None => assert_eq!(row["expected_prefix_cache_hit_rate"], "", "no hash_ids"),
    }
    let pct = [
        ("median_ttft_ms", &w.ttft, 0.5),
        ("p99_ttft_ms", &w.ttft, 0.99),
        ("median_tpot_ms", &w.tpot, 0.5),
        ("p99_tpot_ms", &w.tpot, 0.99),
        ("median_e2el_ms", &w.e2e, 0.5),
        ("p99_e2el_ms", &w.e2e, 0.99),
        ("median_client_queue_ms", &w.queue, 0.5),
        ("p99_client_queue_ms", &w.queue, 0.99),
    ];
    for (k, xs, q) in pct {
        hdr_close(
            &format!("trace.csv {k}"),
            cell_f64(row, k),
            nearest_rank(xs, q),
        );
    }
    assert_eq!(
        row["max_concurrent_requests"],
        w.peak.to_string(),
        "trace.csv max_concurrent_requests"
    );
}

/// summary.md's "Trace replay" row, as printed: labelled with the file, and the speedup when
/// there is one.
fn trace_md_read_back(dir: &Path, replay: &Replayed<'_>, w: &TraceWant, want_hit: Option<f64>) {
    use run_files::{md_row, nearest_rank, printed};
    let label = if replay.speedup.to_bits() == 1f64.to_bits() {
        replay.source.to_string()
    } else {
        format!("{} ×{}", replay.source, replay.speedup)
    };
    let md = md_row(dir, "Trace replay", &label);
    assert_eq!(
        [&md[1], &md[5], &md[11], &md[13]],
        ["10", "10", &w.peak.to_string(), "0"]
    );
    printed("summary.md over (s)", &md[2], w.span_s, 1e-9);
    printed("summary.md w.offered req/s", &md[3], w.offered, 1e-9);
    printed("summary.md sent req/s", &md[4], w.achieved, 1e-9);
    printed("summary.md out tok/s", &md[6], w.out_tput, 1e-9);
    for (col, xs) in [(7, &w.ttft), (8, &w.tpot), (9, &w.e2e), (10, &w.queue)] {
        let (p50, p99) = md[col].split_once(" / ").unwrap();
        printed(
            &format!("summary.md column {col} p50"),
            p50,
            nearest_rank(xs, 0.5),
            1e-3,
        );
        printed(
            &format!("summary.md column {col} p99"),
            p99,
            nearest_rank(xs, 0.99),
            1e-3,
        );
    }
    let implied = want_hit.map_or("-".into(), |w| format!("{:.1} %", w * 100.0));
    assert_eq!(
        md[12],
        format!("{:.1} % / {implied}", w.hit * 100.0),
        "summary.md prefix cache"
    );
}

/// `trace_timeline.csv` and summary.md's table "Over the trace's timeline".
fn timeline_read_back(dir: &Path, replay: &Replayed<'_>, rs: &[run_files::Rec]) {
    use run_files::{cell_f64, close, csv, hdr_close, md_rows, nearest_rank, printed};
    // 0.1 s bins (a sixtieth of either sample's span, under 4 s, is under the 0.1 s floor) by
    // scheduled time, from the level's origin, empty ones kept.
    const BIN_US: u64 = 100_000;
    let nbins = (rs.iter().map(|r| r.sched).max().unwrap() / BIN_US + 1) as usize;
    let bins: Vec<Vec<run_files::Rec>> = (0..nbins as u64)
        .map(|i| {
            rs.iter()
                .copied()
                .filter(|r| r.sched / BIN_US == i)
                .collect()
        })
        .collect();
    if replay.cap.is_some() {
        // The cap holds requests back past their own bin: binning them by when they were sent
        // instead of when they were due would move them.
        assert!(
            rs.iter().any(|r| r.send / BIN_US != r.sched / BIN_US),
            "no request was held past its bin: {rs:?}"
        );
    }
    let rows = csv(dir, "trace_timeline.csv");
    assert_eq!(rows.len(), nbins, "one row a 0.1 s bin");
    let figure = |b: &[run_files::Rec], k: &str| -> Option<f64> {
        let xs: Vec<f64> = b
            .iter()
            .map(|r| match k {
                "ttft_p50_ms" | "ttft_p99_ms" => r.ttft as f64 * 1e-3,
                "e2el_p50_ms" => r.e2e as f64 * 1e-3,
                _ => r.queue_ms(),
            })
            .collect();
        let q = if k.contains("p50") { 0.5 } else { 0.99 };
        (!xs.is_empty()).then(|| nearest_rank(&xs, q))
    };
    const FIGS: [&str; 4] = [
        "ttft_p50_ms",
        "ttft_p99_ms",
        "e2el_p50_ms",
        "client_queue_p99_ms",
    ];
    for (i, (row, b)) in rows.iter().zip(&bins).enumerate() {
        close(
            "trace_timeline.csv start_s",
            cell_f64(row, "start_s"),
            i as f64 * 0.1,
            0.0,
            1e-9,
        );
        assert_eq!(row["sent"], b.len().to_string(), "bin {i} sent");
        assert_eq!(row["failed"], "0", "bin {i}");
        for k in FIGS {
            match figure(b, k) {
                Some(want) => hdr_close(&format!("bin {i} {k}"), cell_f64(row, k), want),
                None => assert_eq!(row[k], "", "bin {i} {k}: no request, no figure"),
            }
        }
    }

    // summary.md's timeline table: rows of `per` bins, the requests added up, each figure the
    // highest of the row's bins ("N bins of 0.10 s a row: each figure is the highest").
    let md = run_files::read(dir, "summary.md");
    let per: usize = md
        .lines()
        .find_map(|l| {
            l.strip_suffix(" bins of 0.10 s a row: each figure is the highest of the row's bins.")
        })
        .map_or(1, |k| k.parse().unwrap());
    let table = md_rows(dir, "### Over the trace's timeline");
    assert_eq!(table.len(), nbins.div_ceil(per), "{per} bins a row");
    for (j, (cells, group)) in table.iter().zip(bins.chunks(per)).enumerate() {
        let from = (j * per) as f64 * 0.1;
        let to = from + group.len() as f64 * 0.1;
        assert_eq!(cells[0], format!("{from:.2}–{to:.2}"), "row {j}");
        let all: Vec<run_files::Rec> = group.concat();
        assert_eq!(cells[1], all.len().to_string(), "row {j} requests");
        assert_eq!(cells[2], "0", "row {j} failed");
        for (c, k) in FIGS.iter().enumerate() {
            let highest = group
                .iter()
                .filter_map(|b| figure(b, k))
                .max_by(f64::total_cmp);
            match highest {
                Some(want) => printed(
                    &format!("summary.md timeline row {j} {k}"),
                    &cells[3 + c],
                    want,
                    1e-3,
                ),
                None => assert_eq!(cells[3 + c], "-", "row {j} {k}"),
            }
        }
    }
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
    let replayed = Replayed {
        source: "trace-mooncake.jsonl",
        format: "mooncake",
        speedup: 1.0,
        cap: None,
    };
    trace_files_follow_the_records(&dir, &replayed, &recorded, Some(want_hit), server_hit);
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
async fn an_azure_trace_replays_sped_up_with_no_shared_prefix_two_in_flight_at_most() {
    let h = start().await;
    let t = trace("trace-azure.csv", 2.0, None);
    let loaded = t.loaded.clone().unwrap();
    assert_eq!(loaded.format, TraceFormat::Azure);
    let recorded = recorded_ms("trace-azure.csv");
    let mut cfg = replay_config(&h, t);
    cfg.open_loop.max_concurrency = Some(2);
    let (s, dir) = replay(cfg, "azure").await;
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
    let server_cached = h.log.lock().unwrap().total_cached_tokens;
    let replayed = Replayed {
        source: "trace-azure.csv",
        format: "azure",
        speedup: 2.0,
        cap: Some(2),
    };
    trace_files_follow_the_records(&dir, &replayed, &recorded, None, server_cached as f64);
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
