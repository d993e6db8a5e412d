//! Open-loop request-rate levels end to end against the built-in simulator (127.0.0.1:0):
//! the achieved rate against the offered one, the seeded schedule kept to the microsecond,
//! overload showing up as server-side TTFT (no cap) or as client queue time (`--max-concurrency`),
//! and a cancelled level leaving consistent files.
//!
//! Capacity of the simulator used for overload: `max_running` requests decode at once, each
//! needs `(output_len − 1) / accept_length` decode steps of `decode_step_ms` (prefill is
//! negligible at 1M tok/s and batch growth is 0), so it completes at most
//! `max_running / (steps × step)` requests per second.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use servetop::config::RunConfig;
use servetop::event::RunState;
use servetop::export::RunFiles;
use servetop::metrics::{Outcome, RequestRecord};
use servetop::run::run_prepared;
use servetop::run::session::Session;
use servetop::runner;
use servetop::sim::{self, AcceptLength, SimConfig, SimHandle};
use servetop::summary::{LevelStatus, LevelSummary, RunSummary};
use servetop::workload::{OpenLoop, RequestCount};
use tokio_util::sync::CancellationToken;

mod sim_truth;

/// 20 ms steps of exactly 4 tokens; `max_running` requests at once.
fn sim_config(max_running: u32) -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 20.0;
    c.accept_length = AcceptLength::Fixed(4);
    c.batch_growth = 0.0;
    c.context_ms_per_1k = 0.0;
    c.prefill_tokens_per_s = 1_000_000.0;
    c.max_running = max_running;
    c
}

/// Requests/s the simulator can complete at `output_len` tokens per request.
fn capacity(c: &SimConfig, output_len: u32) -> f64 {
    let AcceptLength::Fixed(per_step) = c.accept_length else {
        panic!("capacity needs a fixed accept length");
    };
    let steps = f64::from(output_len - 1) / f64::from(per_step);
    f64::from(c.max_running) / (steps * c.decode_step_ms / 1000.0)
}

fn run_config(url: &str, rate: f64, requests: u32, output_len: u32) -> RunConfig {
    RunConfig {
        concurrency: vec![],
        output_len,
        requests_per_level: RequestCount::Fixed(requests),
        open_loop: OpenLoop {
            request_rates: vec![rate],
            ..OpenLoop::default()
        },
        grace_s: 0.5,
        seed: 42,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        no_metrics: true,
        server_wait_s: 5.0,
        ..RunConfig::minimal(url)
    }
}

async fn start(c: SimConfig) -> SimHandle {
    sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-open-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A state to cancel the run in, polled every 10 ms.
type CancelWhen = Box<dyn Fn() -> bool + Send>;

/// Runs `cfg` into `dir`, cancelling once `cancel_when` holds when given.
async fn run(cfg: &RunConfig, dir: &Path, cancel_when: Option<CancelWhen>) -> (RunState, Session) {
    let mut cfg = cfg.clone();
    cfg.out_dir = dir.to_path_buf();
    let prepared = runner::prepare(&cfg, None).await.expect("prepare");
    let files = RunFiles::create(dir).unwrap();
    let cancel = CancellationToken::new();
    if let Some(when) = cancel_when {
        let c = cancel.clone();
        tokio::spawn(async move {
            while !when() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            c.cancel();
        });
    }
    run_prepared(
        &cfg,
        prepared,
        RunSummary::new(cfg.clone(), None),
        servetop::run::sink::Sink::new(Some(files)),
        true,
        cancel,
    )
    .await
}

fn records(dir: &Path) -> Vec<RequestRecord> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &RequestRecord| !r.warmup)
        .collect()
}

fn rate_level(s: &Session) -> &LevelSummary {
    assert_eq!(s.summary.rates.len(), 1);
    &s.summary.rates[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn achieved_rate_matches_the_offered_one_on_the_seeded_schedule() {
    let sim = sim_config(256);
    let (rate, n, output_len) = (40.0, 200, 21);
    // 40 req/s of 100 ms requests is about 4 in flight: far inside the simulator's capacity.
    assert!(capacity(&sim, output_len) > 20.0 * rate);
    let h = start(sim).await;
    let dir = temp_dir("achieved");
    let cfg = run_config(&h.url(), rate, n, output_len);
    let (state, s) = run(&cfg, &dir, None).await;
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    let l = rate_level(&s);
    assert_eq!(l.label(), "40 req/s");
    assert_eq!(l.status, LevelStatus::Done);
    let st = l.stats.as_ref().unwrap();
    let (sc, d) = (&st.scalars, &st.dists);
    assert_eq!((sc.completed, sc.failed), (u64::from(n), 0));

    // The schedule, checked without the product's generator: the first request is due at 0,
    // each later one no earlier than the one before, and the gaps look exponential (Poisson
    // arrivals at `rate`): their mean within 4 σ of 1 / rate (σ = mean / sqrt(gaps)), their
    // coefficient of variation near 1 (its sampling σ for an exponential is about sqrt(2 / gaps),
    // 0.1 here: ±0.3 is 3 σ), and half of them shorter than ln 2 / rate (σ = 0.5 / sqrt(gaps):
    // ±0.11 is 3 σ). Every request goes out at or after its time.
    let mut recs = records(&dir);
    assert_eq!(recs.len(), n as usize);
    recs.sort_by_key(|r| r.index);
    assert_eq!(recs[0].sched_at_us, 0, "the first request is due at once");
    let gaps: Vec<f64> = recs
        .windows(2)
        .map(|w| {
            assert!(
                w[1].sched_at_us >= w[0].sched_at_us,
                "request {}",
                w[1].index
            );
            (w[1].sched_at_us - w[0].sched_at_us) as f64 / 1e6
        })
        .collect();
    let k = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / k;
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
    assert!(
        (mean - 1.0 / rate).abs() < 4.0 / rate / k.sqrt(),
        "mean gap {mean:.4} s for {rate} req/s"
    );
    assert!((sd / mean - 1.0).abs() < 0.3, "gaps' CV {:.2}", sd / mean);
    let short = gaps
        .iter()
        .filter(|g| **g < std::f64::consts::LN_2 / rate)
        .count() as f64
        / k;
    assert!(
        (short - 0.5).abs() < 0.11,
        "{short:.2} of gaps under the median"
    );
    for r in &recs {
        assert!(r.send_at_us >= r.sched_at_us, "never sent early");
    }
    // No drift: the times come from the seed alone, however late earlier sends were, so a
    // second run with the same seed (whose sends are late by other microseconds) is due at the
    // very same instants.
    let dir2 = temp_dir("achieved-again");
    let (state, s2) = run(&cfg, &dir2, None).await;
    assert_eq!(state, RunState::Finished, "{:?}", s2.summary.error);
    let mut again = records(&dir2);
    again.sort_by_key(|r| r.index);
    let times = |v: &[RequestRecord]| v.iter().map(|r| r.sched_at_us).collect::<Vec<_>>();
    assert_eq!(times(&recs), times(&again));
    let _ = std::fs::remove_dir_all(&dir2);
    // Poisson noise: (n − 1) / span has a relative standard deviation of 1 / sqrt(n − 2).
    let sigma = rate / f64::from(n - 2).sqrt();
    let scheduled = sc.scheduled_request_rate.unwrap();
    let achieved = sc.achieved_request_rate.unwrap();
    assert!(
        (scheduled - rate).abs() < 4.0 * sigma,
        "the schedule drew {scheduled:.2} req/s for {rate}"
    );
    // The client kept the schedule: sends went out at the schedule's own rate.
    assert!(
        (achieved - scheduled).abs() / scheduled < 0.02,
        "sent at {achieved:.3} req/s, scheduled {scheduled:.3}"
    );
    let queue = d.client_queue_ms.as_ref().unwrap();
    assert!(queue.p99 < 50.0, "client queue p99 {} ms", queue.p99);
    eprintln!(
        "offered {rate} req/s · schedule drew {scheduled:.2} · sent at {achieved:.2} · completed {:.2} req/s · client queue p50 {:.3} / p99 {:.3} ms · TTFT p50 {:.1} ms · peak in flight {}",
        sc.request_throughput,
        queue.p50,
        queue.p99,
        d.ttft_ms.as_ref().unwrap().p50,
        sc.max_concurrent_requests
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The wait is the server's: each request agrees with the simulator's own record, and the TTFT
/// p99 is the p99 of what that record gives (servetop's send to the server's first frame),
/// within the delivery tolerance; that backlog is the one arithmetic predicts.
fn the_wait_is_the_servers(h: &SimHandle, dir: &Path, ttft_p99: f64, backlog_wait_ms: f64) {
    let (records, origins) = sim_truth::run_records(dir);
    let truth = sim_truth::of(h);
    sim_truth::agree_all(&records, &origins, &truth);
    let want = sim_truth::nearest_rank(
        &sim_truth::server_seen_ttft_ms(&records, &origins, &truth),
        99.0,
    );
    assert!(
        (ttft_p99 - want).abs() <= sim_truth::TOL_MS + want * 1e-3,
        "TTFT p99 {ttft_p99} ms, the server's record gives {want:.1} ms"
    );
    assert!(
        (0.5 * backlog_wait_ms..=1.5 * backlog_wait_ms).contains(&want),
        "the server's TTFT p99 {want:.0} ms against a backlog of about {backlog_wait_ms:.0} ms"
    );
}

/// With a cap the wait moved into the client: its queue p99 is the records' own send −
/// schedule p99, about the backlog arithmetic predicts.
fn the_wait_is_the_clients(dir: &Path, queue_p99: f64, backlog_wait_ms: f64) {
    let (records, _) = sim_truth::run_records(dir);
    let waits: Vec<f64> = records
        .iter()
        .filter(|r| !r.warmup && r.is_ok())
        .map(|r| (r.send_at_us - r.sched_at_us) as f64 / 1e3)
        .collect();
    let want = sim_truth::nearest_rank(&waits, 99.0);
    assert!(
        (queue_p99 - want).abs() <= want * 1e-3 + 1e-3,
        "client queue p99 {queue_p99} ms, the records' own {want:.3} ms"
    );
    assert!(
        (0.5 * backlog_wait_ms..=1.5 * backlog_wait_ms).contains(&want),
        "client queue p99 {want:.0} ms against a backlog of about {backlog_wait_ms:.0} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_queues_in_the_server_or_with_a_cap_in_the_client() {
    let sim = sim_config(4);
    let (rate, n, output_len) = (40.0, 80, 41);
    // 4 running × 1 / (10 steps × 20 ms) = 20 req/s: half the offered rate.
    let cap = capacity(&sim, output_len);
    assert!((cap - 20.0).abs() < 1e-9);
    let h = start(sim).await;
    // Arrivals end near n / rate; by then the server has done about cap × n / rate, and the rest
    // wait: the last request waits about (n − cap × n / rate) / cap seconds.
    let backlog_wait_ms = (f64::from(n) - cap * f64::from(n) / rate) / cap * 1000.0;

    // No cap: every request is sent on time and waits in the simulator's queue, as TTFT.
    let dir = temp_dir("overload");
    let cfg = run_config(&h.url(), rate, n, output_len);
    let (state, s) = run(&cfg, &dir, None).await;
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    let st = rate_level(&s).stats.as_ref().unwrap();
    let (sc, d) = (&st.scalars, &st.dists);
    assert_eq!(sc.completed, u64::from(n));
    let (ttft, queue) = (
        d.ttft_ms.as_ref().unwrap(),
        d.client_queue_ms.as_ref().unwrap(),
    );
    the_wait_is_the_servers(&h, &dir, ttft.p99, backlog_wait_ms);
    assert!(queue.p99 < 50.0, "client queue p99 {} ms", queue.p99);
    assert!(
        sc.request_throughput < cap * 1.1,
        "completed {} req/s above capacity {cap}",
        sc.request_throughput
    );
    assert!(
        sc.achieved_request_rate.unwrap() > 0.8 * rate,
        "no cap: sent at the offered rate"
    );
    // The simulator's own peak of requests held (running + waiting: while any wait, all 4
    // slots run) against the client's exact peak in flight: the same requests seen from both
    // ends, the client's higher only by those between its send and the server's read. By
    // arithmetic it is near 80 − 20 req/s × (2 s of arrivals − 0.2 s first service) = 44.
    let sim_peak = h.log.lock().unwrap().peak_waiting as u64 + 4;
    assert!(
        (30..=60).contains(&sim_peak),
        "the simulator held at most {sim_peak}"
    );
    assert!(
        (sim_peak..=sim_peak + 3).contains(&sc.max_concurrent_requests),
        "peak in flight {} vs the simulator's {sim_peak}",
        sc.max_concurrent_requests
    );
    eprintln!(
        "no cap: offered {rate} req/s, capacity {cap} · sent at {:.2} · completed {:.2} req/s · TTFT p50 {:.0} / p99 {:.0} ms (backlog estimate {backlog_wait_ms:.0}) · client queue p99 {:.2} ms · peak in flight {}",
        sc.achieved_request_rate.unwrap(),
        sc.request_throughput,
        ttft.p50,
        ttft.p99,
        queue.p99,
        sc.max_concurrent_requests
    );
    // Files: rates.csv and rates.png beside the others.
    let files = servetop::export::report::export_run(&dir, &s.summary, &[], (800, 450)).unwrap();
    assert!(files.iter().any(|f| f.ends_with("charts/rates.png")));
    let csv = std::fs::read_to_string(dir.join("rates.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2);
    assert!(
        csv.lines().nth(1).unwrap().contains(",40,1,0,,done,80,"),
        "{csv}"
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("## Request-rate sweep"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);

    // --max-concurrency 4: the client holds requests back; the wait moves from TTFT to the
    // client queue, and never more than 4 are in flight.
    let dir = temp_dir("capped");
    let mut cfg = run_config(&h.url(), rate, n, output_len);
    cfg.open_loop.max_concurrency = Some(4);
    let (state, s) = run(&cfg, &dir, None).await;
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    let st = rate_level(&s).stats.as_ref().unwrap();
    let (sc, d) = (&st.scalars, &st.dists);
    assert_eq!(sc.completed, u64::from(n));
    let (ttft, queue) = (
        d.ttft_ms.as_ref().unwrap(),
        d.client_queue_ms.as_ref().unwrap(),
    );
    the_wait_is_the_clients(&dir, queue.p99, backlog_wait_ms);
    assert!(
        ttft.p99 < 100.0,
        "the server did not queue: TTFT p99 {}",
        ttft.p99
    );
    // 80 requests due in 2 s against a 20 req/s server: the cap is reached, and held.
    assert_eq!(sc.max_concurrent_requests, 4);
    assert!(
        sc.achieved_request_rate.unwrap() < cap * 1.1,
        "with the cap, sends follow completions"
    );
    eprintln!(
        "cap 4: sent at {:.2} · completed {:.2} req/s · TTFT p99 {:.1} ms · client queue p50 {:.0} / p99 {:.0} ms · peak in flight {}",
        sc.achieved_request_rate.unwrap(),
        sc.request_throughput,
        ttft.p99,
        queue.p50,
        queue.p99,
        sc.max_concurrent_requests
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_mid_level_leaves_consistent_files() {
    let h = start(sim_config(256)).await;
    let dir = temp_dir("cancel");
    // 10 s of arrivals of 300 ms requests; cancelled once the simulator has served 20 of them
    // (a state, not a time: a loaded machine may take long to get there).
    let cfg = run_config(&h.url(), 20.0, 200, 61);
    let log = h.log.clone();
    let served_20: CancelWhen = Box::new(move || log.lock().unwrap().requests.len() >= 20);
    let (state, s) = run(&cfg, &dir, Some(served_20)).await;
    assert_eq!(state, RunState::Interrupted);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["state"], "interrupted");
    let l = &v["rates"][0];
    assert_eq!(l["status"], "interrupted");
    assert_eq!(l["arrival"]["request_rate"], 20.0);
    let recs = records(&dir);
    let ok = recs.iter().filter(|r| r.is_ok()).count() as u64;
    let cancelled = recs
        .iter()
        .filter(|r| r.outcome == Outcome::Cancelled)
        .count() as u64;
    assert_eq!(
        ok,
        l["completed"].as_u64().unwrap(),
        "every completion is on file"
    );
    assert_eq!(cancelled, l["cancelled"].as_u64().unwrap());
    assert_eq!(l["failed"], 0);
    assert!(
        ok > 5 && ok < 100,
        "{ok} completed: really interrupted part-way"
    );
    // Each request at most once, each in flight when it was cancelled or done by then.
    let mut idx: Vec<u32> = recs.iter().map(|r| r.index).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), recs.len(), "no request recorded twice");
    assert_eq!(s.in_flight(l["index"].as_u64().unwrap() as u32), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--request-rate inf`: every request of the level is due at its start, so all are in the
/// server at once. By the simulator's record, every one of the 24 reached it before the first
/// finished (each takes 5 steps of 20 ms), and the level's peak in flight is all 24; the
/// schedule says 0 for each; results.json writes the rate `"inf"` and reads it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_infinite_rate_sends_every_request_at_once() {
    let h = start(sim_config(256)).await;
    let n = 24;
    let cfg = run_config(&h.url(), f64::INFINITY, n, 21);
    let dir = temp_dir("inf");
    let (state, s) = run(&cfg, &dir, None).await;
    assert_eq!(state, RunState::Finished);
    let l = rate_level(&s);
    assert_eq!(l.label(), "inf req/s");
    let st = l.stats.as_ref().unwrap();
    assert_eq!(st.scalars.completed, u64::from(n));
    assert_eq!(st.scalars.max_concurrent_requests, u64::from(n));
    let recs = records(&dir);
    assert!(recs.iter().all(|r| r.sched_at_us == 0), "all due at 0");
    let truth = sim_truth::of(&h);
    let measured: Vec<&servetop::sim::SimRequestTrace> = sim_truth::of_level(&truth, l.index);
    assert_eq!(measured.len(), n as usize);
    let last_arrival = measured.iter().map(|r| r.received_unix_us).max().unwrap();
    let first_end = measured
        .iter()
        .map(|r| r.last_write_unix_us().unwrap())
        .min()
        .unwrap();
    assert!(
        last_arrival < first_end,
        "the last request arrived {} µs after the first ended",
        last_arrival - first_end
    );
    let (saved, _) = servetop::export::report::load_run(&dir).unwrap();
    let a = saved.rates[0].arrival.unwrap();
    assert!(a.request_rate.is_infinite(), "{a:?}");
    assert!(saved.config.open_loop.request_rates[0].is_infinite());
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    assert!(
        text.contains(r#""request_rate": "inf""#),
        "written as \"inf\""
    );
    let _ = std::fs::remove_dir_all(&dir);
}
