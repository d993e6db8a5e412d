//! Faults end to end: the simulator injects each kind of failure and counts what it injected;
//! the run must finish, count failures by kind exactly as injected, and keep every completed
//! request in requests.jsonl.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::event::RunState;
use servetop::metrics::{FailureKind, RequestRecord};
use servetop::run::run_headless;
use servetop::sim::faults::{FaultKind, Faults};
use servetop::sim::{self, AcceptLength, SimConfig};
use servetop::workload::RequestCount;

async fn run_with_fault(kind: FaultKind, expect: FailureKind) {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 5.0;
    c.accept_length = AcceptLength::Fixed(2);
    c.faults = Faults {
        rates: vec![(kind, 0.4)],
        reset_before: 0.0,
        stall_s: 2.0,
        slow_first_s: 2.0,
        ..Faults::default()
    };
    c.seed = 7;
    let h = sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!(
        "servetop-fault-{}-{}",
        kind.name(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = servetop::config::RunConfig::demo();
    cfg.base_url = h.url();
    cfg.concurrency = vec![4];
    cfg.output_len = 31;
    cfg.requests_per_level = RequestCount::Fixed(20);
    cfg.warmup_requests = 0;
    cfg.long_context = vec![];
    cfg.no_gpu = true;
    cfg.no_metrics = true;
    // Shorter than the injected stall and slow first token, so those become timeouts.
    cfg.first_token_timeout_s = 1.0;
    cfg.idle_timeout_s = 1.0;
    let (state, s) = run_headless(cfg, Some(dir.clone())).await.unwrap();
    assert_eq!(state, RunState::Finished, "{kind:?}");
    let injected = h
        .log
        .lock()
        .unwrap()
        .injected
        .get(&kind)
        .copied()
        .unwrap_or(0);
    assert!(
        injected > 0,
        "{kind:?}: the simulator injected nothing; pick another seed"
    );
    let sc = &s.summary.sweep[0].stats.as_ref().unwrap().scalars;
    let counted = sc.failures.get(expect.name()).map_or(0, |f| f.count);
    let lines = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let records: Vec<RequestRecord> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A connection reset right after the first token can beat the response headers out of
    // the simulator's socket (a loaded machine): the client then sees a connection closed
    // before any byte, and retries once on a fresh connection, as it does for a stale pooled
    // one. Every injected fault is a failure of its kind or such a retry.
    let retried = records.iter().map(|r| u64::from(r.retries)).sum::<u64>();
    assert_eq!(
        counted + retried,
        injected,
        "{kind:?} counted as {expect:?}: {:?}, {retried} retried",
        sc.failures
    );
    assert_eq!(sc.failed, counted, "{kind:?}: no other kind of failure");
    assert_eq!(
        sc.completed + sc.failed,
        20,
        "{kind:?}: every request accounted for"
    );
    assert_eq!(
        records.iter().filter(|r| r.is_ok()).count() as u64,
        sc.completed,
        "{kind:?}"
    );
    assert_eq!(records.len(), 20);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors() {
    run_with_fault(FaultKind::Http500, FailureKind::HttpStatus).await;
    run_with_fault(FaultKind::Http429, FailureKind::HttpStatus).await;
    run_with_fault(FaultKind::Ctx400, FailureKind::ContextTooLong).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_streams() {
    run_with_fault(FaultKind::ResetMid, FailureKind::StreamCut).await;
    run_with_fault(FaultKind::Malformed, FailureKind::BadPayload).await;
    run_with_fault(FaultKind::ErrorEvent, FailureKind::ServerError).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_servers_time_out() {
    run_with_fault(FaultKind::Stall, FailureKind::Timeout).await;
    run_with_fault(FaultKind::SlowFirst, FailureKind::Timeout).await;
}

fn restart_config(h_url: &str, wait_s: f64) -> servetop::config::RunConfig {
    let mut cfg = servetop::config::RunConfig::demo();
    cfg.base_url = h_url.to_string();
    cfg.concurrency = vec![2];
    cfg.output_len = 20;
    cfg.requests_per_level = RequestCount::Fixed(24);
    cfg.long_context = vec![];
    cfg.no_gpu = true;
    cfg.no_metrics = true;
    cfg.server_wait_s = wait_s;
    cfg.grace_s = 0.2;
    cfg
}

/// Waits until the simulator has finished `n` requests (warmup included): the run is then
/// under way, however slow the machine (no fixed sleep).
async fn served(h: &sim::SimHandle, n: usize) {
    let t = std::time::Instant::now();
    while h.log.lock().unwrap().requests.len() < n {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "nothing served"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn restart_sim() -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 10.0;
    c.accept_length = AcceptLength::Fixed(1);
    c
}

/// Waits until the run in `dir` has journalled that the server stopped accepting connections:
/// it has seen the outage, however slow the machine (no fixed sleep).
async fn noticed_outage(dir: &std::path::Path) {
    let t = std::time::Instant::now();
    loop {
        let journal = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
        if journal.contains("stopped accepting connections") {
            return;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "the run never said the server went away"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The server goes away a few requests in and comes back on the same address once the run has
/// said it is waiting: the run finishes with every request accounted for. The requests that
/// failed did so as the server went away (their stream cut, a 503 from its stopping engine, a
/// refused connect), all before it came back; every request sent after it came back completed.
/// How many failed as it went away depends on how the stop's tasks are scheduled (a loaded
/// machine can answer a few more requests with 503 before it stops accepting), not on the run,
/// so the test holds the failures to the outage, not to a count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_comes_back_is_waited_for() {
    let h = sim::start(restart_sim(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = h.addr;
    let cfg = restart_config(&h.url(), 20.0);
    let dir = std::env::temp_dir().join(format!("servetop-comes-back-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = tokio::spawn(run_headless(cfg, Some(dir.clone())));
    served(&h, 3).await;
    drop(h); // the server process "exits": streams in flight are cut, new connections refused
    noticed_outage(&dir).await;
    let _back = sim::start(restart_sim(), addr).await.unwrap();
    let (state, s) = run.await.unwrap().unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    let level = &s.summary.sweep[0];
    let sc = &level.stats.as_ref().unwrap().scalars;
    assert_eq!(sc.completed + sc.failed, 24, "every request accounted for");
    assert!(
        sc.failures.iter().all(|(k, v)| k == "stream_cut"
            || k == "connect"
            || (k == "http_status" && v.first_message.contains("503"))),
        "{:?}",
        sc.failures
    );
    assert!(
        s.summary
            .warnings
            .iter()
            .any(|w| w.contains("stopped accepting connections")),
        "{:?}",
        s.summary.warnings
    );
    assert!(
        s.summary.warnings.iter().any(|w| w.contains("came back")),
        "{:?}",
        s.summary.warnings
    );
    // Waited for, so measured: the level's outage (a_levels_outage_is_measured_… checks it).
    assert!(sc.outage_s > 0.0 && sc.outages.len() == 1, "{sc:?}");
    let back_us = (sc.outages[0].to_s * 1e6).round() as u64;
    let records: Vec<RequestRecord> = std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &RequestRecord| r.level == level.index && !r.warmup)
        .collect();
    assert_eq!(records.len(), 24);
    let failed_late: Vec<&RequestRecord> = records
        .iter()
        .filter(|r| !r.is_ok() && r.end_at_us > back_us)
        .collect();
    assert!(
        failed_late.is_empty(),
        "failed after the server came back ({back_us} µs): {failed_late:?}"
    );
    let after = records.iter().filter(|r| r.send_at_us >= back_us).count();
    assert!(
        after > 0 && sc.failed > 0,
        "{after} requests sent after the server came back, {} failed",
        sc.failed
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// µs since the Unix epoch now: the clock the level's `origin_unix_us` is on.
fn unix_us() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

/// The outage `o` of level `level` starts exactly at the end of the request that failed to
/// connect (requests.jsonl), and is the one `outage` event of the journal (events.jsonl).
fn outage_in_the_files(dir: &std::path::Path, level: u32, o: servetop::metrics::OutageWindow) {
    let records: Vec<RequestRecord> = std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let connect_failed = records
        .iter()
        .filter(|r| r.level == level && !r.warmup)
        .filter(|r| {
            matches!(
                r.outcome,
                servetop::metrics::Outcome::Failed {
                    kind: FailureKind::Connect,
                    ..
                }
            )
        })
        .map(|r| r.end_at_us)
        .min()
        .unwrap();
    assert_eq!((o.from_s * 1e6).round() as u64, connect_failed);
    // The journal holds the event the fold summed.
    let journal = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let outages: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "outage")
        .collect();
    assert_eq!(outages.len(), 1, "{outages:?}");
    let d = &outages[0]["data"];
    assert_eq!(d["level"], level);
    assert_eq!(d["from_us"], connect_failed);
    assert_eq!(d["to_us"], (o.to_s * 1e6).round() as u64);
}

/// A viewer folding the journal (`servetop attach`) gets the level's scalars `sc`, and
/// `servetop report` of the saved run writes summary.md (`md`) byte for byte as the run did.
async fn attach_and_report_agree(
    dir: &std::path::Path,
    sc: &servetop::metrics::LevelScalars,
    md: &str,
) {
    let origin = servetop::live::source::Origin::of_dir(dir).unwrap();
    let mut viewer =
        servetop::tui::viewer::Viewer::open(servetop::live::source::open(&origin).unwrap(), true)
            .await
            .unwrap();
    viewer.read_to_end().await;
    let browsed = viewer.app().session.summary.sweep[0].stats.clone().unwrap();
    assert_eq!(browsed.scalars, *sc);
    let report = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["report", dir.to_str().unwrap(), "--chart-size", "400x225"])
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let again = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md == again,
        "report wrote another summary.md:\n{md}\n---\n{again}"
    );
}

/// A level's outage measured (docs/metrics.md "Per level", outage): a C=1 level whose server is
/// stopped a few requests in and started again on the same address 2.5 s later has `outage_s`
/// the gap the test made, give or take the watch's probe interval; its `outages` window starts
/// at the end of the request that failed to connect (requests.jsonl) and is the `outage` event
/// of events.jsonl; its steady window leaves the outage's seconds out; a viewer's fold of the
/// journal and `servetop report` agree with the run; the next level, with no outage, has
/// `outage_s` 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_levels_outage_is_measured_and_left_out_of_its_steady_window() {
    let h = sim::start(restart_sim(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = h.addr;
    let mut cfg = restart_config(&h.url(), 30.0);
    cfg.concurrency = vec![1, 2];
    cfg.output_len = 10;
    cfg.requests_per_level = RequestCount::Fixed(30);
    let dir = std::env::temp_dir().join(format!("servetop-outage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = tokio::spawn(run_headless(cfg, Some(dir.clone())));
    // The warmup and three of the first level's 30 requests: it is under way.
    served(&h, 4).await;
    let (down_at, down_unix) = (std::time::Instant::now(), unix_us());
    drop(h);
    // Not a whole number of seconds: the watch's probes (a second apart from the failed
    // connect) fall mid-way between two, not on the restart itself.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let up_from = std::time::Instant::now();
    let up_from_unix = unix_us();
    let _back = sim::start(restart_sim(), addr).await.unwrap();
    // Accepting from somewhere between these two instants.
    let (up_by, up_by_unix) = (std::time::Instant::now(), unix_us());
    let (state, s) = run.await.unwrap().unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    let (first, second) = (&s.summary.sweep[0], &s.summary.sweep[1]);
    let sc = &first.stats.as_ref().unwrap().scalars;
    assert_eq!(sc.completed + sc.failed, 30, "{sc:?}");
    assert_eq!(sc.outages.len(), 1, "{:?}", sc.outages);
    let o = sc.outages[0];
    assert!((sc.outage_s - (o.to_s - o.from_s)).abs() < 1e-9, "{sc:?}");

    // The gap the test made: from the stop to the restart (at most the restart's own few ms
    // apart, `up_by − up_from`). The outage starts at the first failed connect after the stop:
    // the C=1 worker's stream is cut at the stop and its next connect is refused at once, on
    // this machine's loopback. It ends at the watch's first successful probe after the
    // restart: the watch probes once a second, so at most 1 s after it plus one loopback
    // connect and a task wake-up. Hence outage_s lies in [gap − (a refused connect), gap +
    // 1 s + (a connect and a wake-up)]; 1.2 s bounds both sides with 200 ms for the connect,
    // the wake-up and the restart's bind, which take milliseconds even on a loaded machine.
    let gap_lo = (up_from - down_at).as_secs_f64();
    let gap_hi = (up_by - down_at).as_secs_f64();
    assert!(
        sc.outage_s > gap_lo - 1.2 && sc.outage_s < gap_hi + 1.2,
        "outage_s {} against a gap of {gap_lo:.3}..{gap_hi:.3} s",
        sc.outage_s
    );
    // On the level's clock: the outage starts after the stop and ends after the restart, at
    // most the probe interval (and the same 200 ms) later.
    let origin = first.origin_unix_us.unwrap();
    let at = |s: f64| origin + (s * 1e6).round() as u64;
    assert!(at(o.from_s) >= down_unix, "{o:?}");
    assert!(at(o.to_s) >= up_from_unix, "{o:?}");
    assert!(at(o.to_s) <= up_by_unix + 1_200_000, "{o:?}");

    outage_in_the_files(&dir, first.index, o);

    // The steady window's whole bins that overlap the outage are not counted: at least as
    // many seconds as the outage's whole ones are missing from it.
    let (from, to) = (sc.steady_from_s.unwrap(), sc.steady_to_s.unwrap());
    let whole = to.floor() - from.ceil();
    let steady = sc.steady_duration_s.unwrap_or(0.0);
    assert!(
        whole - steady >= sc.outage_s.floor(),
        "{whole} whole bins, {steady} steady, outage {} s",
        sc.outage_s
    );
    // summary.md says so in the level's done cell.
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let note = format!("{} (outage {:.1} s)", sc.completed, sc.outage_s);
    assert!(md.contains(&note), "{note} not in\n{md}");

    attach_and_report_agree(&dir, sc, &md).await;

    let clean = &second.stats.as_ref().unwrap().scalars;
    assert_eq!(clean.outage_s.to_bits(), 0.0_f64.to_bits());
    assert!(clean.outages.is_empty());
    let csv = servetop::export::csv::sweep_csv(&[("run".into(), &s.summary)]);
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .contains(",duration_s,outage_s,")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stays_away_aborts_the_run_cleanly() {
    let h = sim::start(restart_sim(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let mut cfg = restart_config(&h.url(), 1.5);
    cfg.concurrency = vec![2, 4];
    let run = tokio::spawn(run_headless(cfg, None));
    served(&h, 3).await;
    drop(h);
    let (state, s) = run.await.unwrap().unwrap();
    assert_eq!(state, RunState::Aborted);
    let e = s.summary.error.as_deref().unwrap();
    assert!(e.contains("did not come back within"), "{e}");
    // The outage runs to the level's end: the whole wait (1.5 s, counted from after the failed
    // connect's end, where the outage starts) is in it.
    let sc = &s.summary.sweep[0].stats.as_ref().unwrap().scalars;
    assert!(sc.outage_s >= 1.5 && sc.outages.len() == 1, "{sc:?}");
    assert_eq!(
        s.summary.sweep[1].status,
        servetop::summary::LevelStatus::Waiting,
        "the rest is not run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_reset_before_the_first_byte_do_not_lose_requests() {
    // Resets hit new connections, including the probes and /tokenize calls before the level, and
    // a reset before any byte is answered is retried once on a fresh connection (as a stale
    // pooled connection is). So the exact count per request is not the simulator's count; what
    // must hold is that the run finishes and every request is accounted for.
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 2.0;
    c.faults = Faults::parse("reset-before=0.5").unwrap();
    c.seed = 3;
    let h = sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let mut cfg = restart_config(&h.url(), 5.0);
    cfg.warmup_requests = 0;
    let (state, s) = run_headless(cfg, None).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    let sc = &s.summary.sweep[0].stats.as_ref().unwrap().scalars;
    assert_eq!(sc.completed + sc.failed, 24);
    assert!(
        sc.failures
            .keys()
            .all(|k| k == "connect" || k == "stream_cut"),
        "{:?}",
        sc.failures
    );
    assert!(
        h.log
            .lock()
            .unwrap()
            .injected
            .get(&FaultKind::ResetBefore)
            .copied()
            .unwrap_or(0)
            > 0
    );
}

/// The simulator binary (fast preset, 10 ms steps, one token each) with `--inject faults`, and
/// the URL it printed; its stderr piped when `keep_stderr`.
fn sim_binary(faults: &str, keep_stderr: bool) -> (std::process::Child, String) {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    let mut sim = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args([
            "sim",
            "--port",
            "0",
            "--preset",
            "fast",
            "--decode-step-ms",
            "10",
        ])
        .args(["--accept-length", "1", "--inject", faults])
        .stdout(Stdio::piped())
        .stderr(if keep_stderr {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(sim.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (sim, line.trim().to_string())
}

/// `servetop sim --inject restart=S,down-s=D` takes the whole server away and brings it back on
/// the same port: a run against it says so, waits, and finishes with every request accounted for.
#[test]
fn the_simulator_binary_restarts_and_a_run_survives_it() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_servetop");
    // Its stderr says when it goes down and comes back.
    let (sim, url) = sim_binary("restart=2,down-s=1.5", true);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let dir = std::env::temp_dir().join(format!("servetop-restart-bin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(bin)
        .args([
            "run",
            "--base-url",
            &url,
            "--concurrency",
            "2",
            "--requests-per-level",
            "40",
            "--output-len",
            "20",
            "--long-context",
            "none",
            "--headless",
            "--no-gpu",
            "--no-metrics",
            "--server-wait",
            "15",
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let _ = Command::new("kill")
        .args(["-INT", &sim.id().to_string()])
        .status();
    let sim_out = sim.wait_with_output().unwrap();
    let sim_err = String::from_utf8_lossy(&sim_out.stderr);
    assert!(sim_err.contains("SIMULATED outage 1"), "{sim_err}");
    assert!(sim_err.contains("SIMULATED restart 1"), "{sim_err}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["state"], "finished");
    let sc = &v["sweep"][0];
    assert_eq!(
        sc["completed"].as_u64().unwrap() + sc["failed"].as_u64().unwrap(),
        40,
        "{sc}"
    );
    // Streams open at the outage are cut, requests sent while it is down cannot connect, and
    // one that arrives as the engine stops gets its 503.
    let failures = sc["failures"].as_object().unwrap();
    assert!(failures.contains_key("stream_cut"), "{failures:?}");
    assert!(
        failures.iter().all(|(k, v)| k == "stream_cut"
            || k == "connect"
            || (k == "http_status" && v["first_message"].as_str().unwrap().contains("503"))),
        "{failures:?}"
    );
    let lines = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    assert_eq!(
        lines
            .lines()
            .filter(|l| !l.contains("\"warmup\":true"))
            .count(),
        40
    );
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("stopped accepting connections"),
        "{warnings}"
    );
    assert!(warnings.contains("came back"), "{warnings}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A level longer than the prompt lookahead sizes its later prompts while it runs (a /tokenize
/// call each): an outage then must be waited out by the prompt producer too, not end the run.
/// (Found by `servetop soak`: a restart 15 minutes in aborted the run at "preparing prompts".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_while_later_prompts_are_prepared_is_waited_for() {
    let mut c = restart_sim();
    c.decode_step_ms = 5.0;
    let h = sim::start(c.clone(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let addr = h.addr;
    let mut cfg = restart_config(&h.url(), 20.0);
    cfg.concurrency = vec![8];
    cfg.output_len = 4;
    cfg.requests_per_level = RequestCount::Fixed(1100);
    let run = tokio::spawn(run_headless(cfg, None));
    // Wait until the level is under way (the producer is still 76 prompts short), then go away.
    loop {
        let served = h.log.lock().unwrap().requests.len();
        if served >= 10 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    drop(h);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let _back = sim::start(c, addr).await.unwrap();
    let (state, s) = run.await.unwrap().unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", s.summary.error);
    let sc = &s.summary.sweep[0].stats.as_ref().unwrap().scalars;
    assert_eq!(
        sc.completed + sc.failed,
        1100,
        "every request accounted for"
    );
    assert!(sc.completed >= 1000, "{sc:?}");
}

/// A server that stays away ends the binary with exit code 1, with what it measured on disk:
/// results.json (aborted, the reason), summary.md, the CSV tables and the charts.
#[test]
fn a_server_that_stays_away_exits_1_with_everything_flushed() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_servetop");
    // Down 3 s after it starts, for a minute: longer than the run's --server-wait of 1 s.
    let (mut sim, url) = sim_binary("restart=3,down-s=60", false);
    let dir = std::env::temp_dir().join(format!("servetop-away-bin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // 40 requests of 50 tokens, two at a time: about 10 s of work, cut at 3 s.
    let out = Command::new(bin)
        .args(["run", "--base-url", &url, "--concurrency", "2,4"])
        .args(["--requests-per-level", "40", "--output-len", "50"])
        .args(["--long-context", "none", "--headless", "--no-gpu"])
        .args(["--server-wait", "1", "--out", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let _ = sim.kill();
    let _ = sim.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["state"], "aborted");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("did not come back within"),
        "{}",
        v["error"]
    );
    let done = v["sweep"][0]["completed"].as_u64().unwrap();
    assert!(done >= 1, "{}", v["sweep"][0]);
    let lines = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let ok = lines
        .lines()
        .filter(|l| !l.contains("\"warmup\":true") && l.contains("\"status\":\"ok\""))
        .count() as u64;
    assert_eq!(ok, done, "every completed request is in requests.jsonl");
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("did not come back within"), "{md}");
    assert!(dir.join("sweep.csv").is_file());
    let charts: Vec<_> = std::fs::read_dir(dir.join("charts"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "png"))
        .collect();
    assert!(!charts.is_empty(), "charts were written");
    let _ = std::fs::remove_dir_all(&dir);
}
