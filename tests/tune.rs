//! `servetop tune` against the simulator, where the best configuration is known from its
//! flags: with one request's service time set by `--decode-step-ms` and `--max-running`
//! requests served at once, a configuration's capacity grows as max-running / step. Of
//! (1, 10 ms), (1, 20 ms), (4, 10 ms), (4, 20 ms) the third serves 2× the next best.
//!
//! Each capacity is checked against two independent answers: a plain `run --search rate` of
//! that configuration alone, on its own server, with the same seed (the same arrival schedule),
//! and the bounds the simulator's service-time model puts on it ([`Shape`]): no more than the
//! highest rate a probe can meet the SLO at, no less than N/S shrunk by the search's precision.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod real_server;

use std::path::{Path, PathBuf};
use std::process::Command;

use real_server::results;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_servetop")
}

/// The simulator as a --serve command: one token per step, steps that do not grow with the
/// batch, so a request's service time is its tokens × `--decode-step-ms`.
fn sim() -> String {
    format!(
        "{} sim --port {{port}} --preset fast --batch-growth 0 --accept-length 1 \
         --prefill-tokens-per-s {PREFILL_TOKENS_PER_S}",
        bin()
    )
}

/// The simulator's prefill speed (the `fast` preset's, given on its command line).
const PREFILL_TOKENS_PER_S: f64 = 1_000_000.0;

/// The plan both the tune and the plain searches run: short probes, near-constant arrivals
/// (a gap's spread is 3 % of its mean, so a rate above capacity builds its queue at once and
/// [`slo_bound`] can count on the arrival times), one seed.
const PLAN: &[&str] = &[
    "--input-len",
    "32",
    "--output-len",
    "4",
    "--slo",
    "ttft:150",
    "--slo-percentile",
    "90",
    "--search-seconds",
    "1",
    "--search-min-requests",
    "20",
    "--search-probe-concurrency",
    "8",
    "--search-precision",
    "20%",
    "--burstiness",
    "1000",
    "--seed",
    "7",
    "--no-gpu",
    "--headless",
];

/// The tests take turns: each compares capacities measured at different times, which another
/// test's load on the same cores would shift.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

const GRID: [(&str, &str); 4] = [("1", "10"), ("1", "20"), ("4", "10"), ("4", "20")];

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-tune-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `servetop tune --serve SERVE` of the `--serve-param` flags `params`, into `dir`, with the
/// shared plan (a C=1 level of 3 requests) and `extra`.
fn tune_command(serve: &str, params: &[&str], dir: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["tune", "--serve", serve])
        .args(params)
        .args([
            "--concurrency",
            "1",
            "--requests-per-level",
            "3",
            "--min-requests",
            "3",
        ])
        .args(["--out", dir.to_str().unwrap()])
        .args(PLAN)
        .args(extra);
    c
}

/// `servetop tune` of the grid into `dir`; its results.json.
fn tune(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let params = [
        "--serve-param=--max-running=1,4",
        "--serve-param=--decode-step-ms=10,20",
    ];
    let out = tune_command(&sim(), &params, dir, extra).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    results(dir)
}

/// A plain `run --search rate` of one configuration: its capacity (the search converged).
fn plain_search(dir: &Path, (running, step): (&str, &str)) -> f64 {
    let cmd = format!("{} --max-running {running} --decode-step-ms {step}", sim());
    let mut args = vec![
        "run",
        "--serve",
        &cmd,
        "--search",
        "rate",
        "--out",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(PLAN);
    let out = Command::new(bin()).args(&args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = &results(dir)["search"];
    assert_eq!(s["status"], "converged", "{s}");
    s["pass_rate"].as_f64().unwrap()
}

/// The entry of `tune.configs` for one configuration.
fn entry<'a>(t: &'a serde_json::Value, (running, step): (&str, &str)) -> &'a serde_json::Value {
    t["tune"]["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["params"]["--max-running"] == running && c["params"]["--decode-step-ms"] == step
        })
        .unwrap()
}

/// The number after `flag` in the plan (a percentage without its `%`).
fn plan(flag: &str) -> f64 {
    let i = PLAN.iter().position(|a| *a == flag).unwrap();
    let v = PLAN[i + 1];
    v.strip_prefix("ttft:")
        .unwrap_or(v)
        .trim_end_matches('%')
        .parse()
        .unwrap()
}

/// A request's prefill, in ms.
fn prefill_ms() -> f64 {
    plan("--input-len") / PREFILL_TOKENS_PER_S * 1000.0
}

/// A request's decode steps: one per output token after the first.
fn decode_steps() -> f64 {
    plan("--output-len") - 1.0
}

/// One configuration's server as its flags make it, by the service-time model of
/// src/sim/batcher.rs: each request holds one of `running` slots for its prefill
/// (`--input-len / prefill speed`, a step that stalls the whole batch) and then one decode step
/// of `step_ms` per output token after the first (the first comes with the prefill). Steps are
/// laid on an absolute timeline that only moves forward, so over a busy period the engine's
/// steps never add up to less than their configured lengths.
struct Shape {
    running: f64,
    step_ms: f64,
}

impl Shape {
    fn of((running, step): (&str, &str)) -> Self {
        Shape {
            running: running.parse().unwrap(),
            step_ms: step.parse().unwrap(),
        }
    }

    /// N / S: the most requests per second `running` slots of service time
    /// S = prefill + decode steps × step can complete.
    fn most_rate(&self) -> f64 {
        let service_ms = prefill_ms() + decode_steps() * self.step_ms;
        self.running / service_ms * 1000.0
    }

    /// Engine time each request costs the server as a whole, at least: its prefill, which
    /// stalls every slot, and its decode steps, shared with up to `running − 1` others.
    fn engine_ms_per_request(&self) -> f64 {
        prefill_ms() + decode_steps() * self.step_ms / self.running
    }

    /// The least time to first token request `k` (from 0) of a probe at `rate` can have: it
    /// is admitted no sooner than the `k − running + 1` before it have been served, after the
    /// first request arrived, and it arrives no later than `k` gaps after that one (each gap
    /// `1 / rate` on average, their sum within 4 standard deviations: a gamma gap of shape
    /// `--burstiness` B spreads `1 / sqrt(B)` of its mean).
    fn least_ttft_ms(&self, k: f64, rate: f64) -> f64 {
        let ahead = (k - self.running + 1.0).max(0.0);
        let arrives_ms = (k + 4.0 * (k / plan("--burstiness")).sqrt()) / rate * 1000.0;
        ahead * self.engine_ms_per_request() + prefill_ms() - arrives_ms
    }

    /// Whether a probe at `rate` can meet the SLO: its `max(rate × seconds, min requests)`
    /// requests meet the TTFT limit at the percentile only if the request of that rank (a
    /// request at least as late as the rank, since the least TTFT grows with the index above
    /// N/S) can be within the limit (and 1 % more, the histogram's rounding).
    fn could_pass(&self, rate: f64) -> bool {
        let n = (rate * plan("--search-seconds"))
            .ceil()
            .max(plan("--search-min-requests"));
        let k = (plan("--slo-percentile") / 100.0 * n).ceil() - 1.0;
        self.least_ttft_ms(k, rate) <= 1.01 * plan("--slo")
    }

    /// The highest rate a probe can pass at: above N/S the queue grows through the probe, and
    /// past this rate the requests at the percentile wait longer than the limit. (A probe of
    /// one second passes a little above N/S: its queue has not had time to grow to the limit.)
    fn slo_bound(&self) -> f64 {
        let mut rate = self.most_rate();
        while self.could_pass(rate) {
            rate *= 1.001;
        }
        rate
    }
}

/// A capacity lies within what the configuration's shape allows: at most its SLO-limited bound
/// ([`Shape::slo_bound`]), and at least N/S shrunk by the search's precision: rates up to N/S
/// meet the SLO (arrivals no faster than the slots free up wait for no more than a step), so
/// the converged bracket `[pass, fail]` with `fail ≤ (1 + precision) × pass` has
/// `pass ≥ N/S / (1 + precision)`.
fn assert_within_shape(capacity: f64, config: (&str, &str)) {
    let shape = Shape::of(config);
    let (most, bound) = (shape.most_rate(), shape.slo_bound());
    let least = most / (1.0 + plan("--search-precision") / 100.0);
    assert!(
        (least..=bound).contains(&capacity),
        "{config:?}: capacity {capacity} req/s outside [{least}, {bound}] (N/S {most})"
    );
}

/// A tune's entry is measured, and its capacity agrees with the plain search's within the
/// searches' precision (`--search-precision 20%`): they differ by at most 20 % of the larger.
fn assert_agrees(e: &serde_json::Value, plain: f64) {
    assert_eq!(e["status"], "measured", "{e}");
    let mine = e["capacity"].as_f64().unwrap();
    assert!(
        (mine - plain).abs() <= 0.2 * mine.max(plain),
        "{}: tune {mine}, plain {plain}",
        e["label"]
    );
}

/// Every server a tune started is gone once it ends (no process with its port runs).
fn servers_gone(dir: &Path, t: &serde_json::Value) {
    for c in t["tune"]["configs"].as_array().unwrap() {
        let r = results(&dir.join(c["dir"].as_str().unwrap()));
        for s in r["servers"].as_array().unwrap() {
            let port = s["port"].as_u64().unwrap();
            assert!(
                real_server::server_gone(port),
                "the server on port {port} still runs"
            );
        }
    }
}

#[test]
fn tune_picks_the_known_best_and_each_capacity_matches_a_plain_search() {
    let _turn = turn();
    let plain_dir = scratch("plain");
    let plain: Vec<f64> = GRID
        .iter()
        .enumerate()
        .map(|(i, c)| plain_search(&plain_dir.join(i.to_string()), *c))
        .collect();
    // The known order: (4, 10 ms) first, by far.
    assert!(plain[2] > 1.5 * plain[3].max(plain[0]), "{plain:?}");
    for (c, p) in GRID.iter().zip(&plain) {
        assert_within_shape(*p, *c);
    }

    // With the early stop.
    let dir = scratch("early");
    let t = tune(&dir, &[]);
    let best = &t["tune"]["best"];
    assert_eq!(best["params"]["--max-running"], "4", "{best}");
    assert_eq!(best["params"]["--decode-step-ms"], "10", "{best}");
    assert_eq!(best["status"], "measured");
    for (i, c) in GRID.iter().enumerate() {
        let e = entry(&t, *c);
        match e["status"].as_str().unwrap() {
            "measured" => {
                assert_within_shape(e["capacity"].as_f64().unwrap(), *c);
                assert_agrees(e, plain[i]);
            }
            "stopped early" => {
                // Stopped after one rate probe, below a bound its plain search confirms.
                assert!(e["capacity"].is_null(), "{e}");
                let bound = e["below"].as_f64().unwrap();
                assert!(
                    plain[i] < bound,
                    "{c:?}: plain {:?}, bound {bound}",
                    plain[i]
                );
                let sub = results(&dir.join(e["dir"].as_str().unwrap()));
                assert_eq!(
                    sub["search"]["probes"].as_array().unwrap().len(),
                    1,
                    "{c:?}"
                );
            }
            other => panic!("{c:?}: {other}: {e}"),
        }
    }
    // The two slow configurations come after a faster one: both are stopped early.
    assert_eq!(entry(&t, GRID[1])["status"], "stopped early");
    assert_eq!(entry(&t, GRID[3])["status"], "stopped early");
    servers_gone(&dir, &t);
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("SIMULATED SERVER") && md.contains("## Leaderboard"),
        "{md}"
    );
    assert!(md.contains("--max-running 4 --decode-step-ms 10"), "{md}");
    assert!(dir.join("charts/pareto.png").is_file());
    assert!(
        t["tune"]["pareto"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["on_front"] == true)
    );

    // Without it, every configuration is measured and agrees with its plain search.
    let full_dir = scratch("full");
    let full = tune(&full_dir, &["--no-early-stop"]);
    assert_eq!(full["tune"]["best"]["params"]["--max-running"], "4");
    assert_eq!(full["tune"]["best"]["params"]["--decode-step-ms"], "10");
    for (i, c) in GRID.iter().enumerate() {
        let e = entry(&full, *c);
        assert_within_shape(e["capacity"].as_f64().unwrap(), *c);
        assert_agrees(e, plain[i]);
        assert!(
            e["single_stream_tokens_per_s"].as_f64().unwrap() > 0.0,
            "{e}"
        );
    }
    for d in [plain_dir, dir, full_dir] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A configuration whose server cannot start is recorded with the reason and skipped; the
/// others are measured, and the tune's results.json says which is which.
#[test]
fn a_configuration_that_cannot_start_is_skipped_with_its_reason() {
    let _turn = turn();
    let dir = scratch("bad");
    let out = tune_command(&sim(), &["--serve-param=--max-running=2,0,oops"], &dir, &[])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let t = results(&dir);
    let configs = t["tune"]["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 3);
    assert_eq!(configs[0]["status"], "measured", "{}", configs[0]);
    for bad in &configs[1..] {
        assert_eq!(bad["status"], "failed", "{bad}");
        assert!(bad["capacity"].is_null());
        let reason = bad["reason"].as_str().unwrap();
        assert!(reason.contains("exited"), "{reason}");
    }
    assert_eq!(t["tune"]["best"]["params"]["--max-running"], "2");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Waits until a level of the run writing `dir` is under way; the port of its server.
fn level_running(dir: &Path) -> u64 {
    let t = std::time::Instant::now();
    loop {
        let r = std::fs::read(dir.join("results.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        if let Some(r) = r {
            let levels = r["sweep"]
                .as_array()
                .into_iter()
                .chain(r["rates"].as_array())
                .flatten();
            if levels.into_iter().any(|l| l["status"] == "running") {
                return r["servers"][0]["port"].as_u64().unwrap();
            }
        }
        assert!(
            t.elapsed().as_secs() < 120,
            "no level of {} ran",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Ctrl-C in the middle of the second configuration stops the tune (130), its server goes,
/// and the tune's results.json keeps the first configuration's answer; `--resume` runs the rest
/// without measuring the first again.
#[test]
fn an_interrupted_tune_stops_its_server_and_resumes_where_it_stopped() {
    let _turn = turn();
    let dir = scratch("resume");
    let params = [
        "--serve-param=--max-running=1,2,4",
        "--serve-param=--decode-step-ms=10",
    ];
    let first = dir.join("max-running-1_decode-step-ms-10");
    let second = dir.join("max-running-2_decode-step-ms-10");
    let mut child = tune_command(&sim(), &params, &dir, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let port = level_running(&second);
    assert!(first.join("results.json").is_file());
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(
        real_server::server_gone(port),
        "the server on port {port} still runs"
    );
    let t = results(&dir);
    assert_eq!(t["state"], "interrupted");
    let statuses: Vec<&str> = t["tune"]["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses[1..], ["pending", "pending"], "{statuses:?}");
    assert!(statuses[0] == "measured", "{statuses:?}");
    let first_answer = t["tune"]["configs"][0].clone();

    let out = Command::new(bin())
        .args(["tune", "--resume", dir.to_str().unwrap(), "--headless"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let t = results(&dir);
    assert_eq!(t["state"], "finished");
    assert_eq!(
        t["tune"]["configs"][0], first_answer,
        "the first was measured again"
    );
    for c in t["tune"]["configs"].as_array().unwrap() {
        let s = c["status"].as_str().unwrap();
        assert!(s == "measured" || s == "stopped early", "{c}");
    }
    assert!(!stderr.contains("[tune 1/3]"), "{stderr}");
    // What the interrupted run measured is kept beside the new one.
    let aside = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("max-running-2_decode-step-ms-10.interrupted-")
        })
        .count();
    assert_eq!(aside, 1);
    // A finished tune has nothing to resume: bad input, nothing rewritten.
    let again = Command::new(bin())
        .args(["tune", "--resume", dir.to_str().unwrap(), "--headless"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already finished"));
    assert_eq!(results(&dir), t);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The processes of a server still "loading" (its `sleep 60`), not the tune that started it
/// (whose own command line holds the template, `{port}` unfilled).
fn loading_server() -> Vec<String> {
    real_server::pids_with("sleep 60")
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| !String::from_utf8_lossy(&c).contains("{port}"))
        })
        .collect()
}

/// Ctrl-C while a configuration's server is still loading stops the tune at once, and the
/// server's whole process group with it (here a command that would load for 60 s).
#[test]
fn ctrl_c_while_a_server_loads_stops_it() {
    let _turn = turn();
    let dir = scratch("loading");
    let slow = format!("sleep 60; {}", sim());
    let mut child = tune_command(&slow, &["--serve-param=--max-running=1,2"], &dir, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The tune has written its results.json and started the first server (the sleep).
    let t0 = std::time::Instant::now();
    while loading_server().is_empty() {
        assert!(t0.elapsed().as_secs() < 30, "the server never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let t1 = std::time::Instant::now();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    // Not after the 60 s load or the 600 s --serve-timeout: at once (the grace period aside).
    assert!(t1.elapsed().as_secs() < 20, "{:?}", t1.elapsed());
    let t = std::time::Instant::now();
    while !loading_server().is_empty() {
        assert!(
            t.elapsed().as_secs() < 10,
            "the loading server outlived the tune"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let r = results(&dir);
    assert_eq!(r["state"], "interrupted");
    assert_eq!(r["tune"]["configs"][0]["status"], "pending");
    let _ = std::fs::remove_dir_all(&dir);
}
