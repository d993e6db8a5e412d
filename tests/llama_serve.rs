//! `--serve` against the real llama-server (built by `scripts/llama/build.sh`): servetop starts
//! it, restarts it with a larger `-c` for a ladder, survives it being killed mid-level, and runs
//! a `-np` sweep, leaving no server behind. Without the binary every test says why it skipped
//! and passes; with `SERVETOP_REQUIRE_LLAMA=1` (set by `.ci/run`) they must run.
//!
//! Each server is pinned to the last core (`taskset`, `-t 1`); the tests take turns.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod real_server;

use std::path::Path;
use std::process::{Command, Stdio};

use real_server::llama::{ALIAS, Paths, paths};
use real_server::{
    cores, first_level_running, measured_by, pids_with, results, server_contexts, server_gone,
    temp_run_dir,
};

/// Tests that start a server take turns: they share one core.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The llama-server command for `--serve`, on the last core, `-np` slots.
fn serve_command(p: &Paths, np: u32) -> String {
    let n = cores();
    let pin = if n >= 2 {
        format!("taskset -c {} ", n - 1)
    } else {
        String::new()
    };
    format!(
        "{pin}{} -m {} -a {ALIAS} --host 127.0.0.1 --port {{port}} -c {{context_len}} -np {np} -t 1 --metrics",
        p.server.display(),
        p.target.display()
    )
}

fn servetop(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_servetop"));
    c.args(["run", "--headless", "--no-gpu"]).args(args);
    c
}

fn dir_arg(dir: &Path) -> &str {
    dir.to_str().unwrap()
}

/// What each test starts from: the binary and models (None, after saying why, when they are not
/// built), its turn on the server's core, the command for `slots` slots, a fresh run directory.
struct Setup {
    p: Paths,
    _turn: std::sync::MutexGuard<'static, ()>,
    cmd: String,
    dir: std::path::PathBuf,
}

fn setup(test: &str, name: &str, slots: u32) -> Option<Setup> {
    let p = paths(test)?;
    let turn = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(Setup {
        cmd: serve_command(&p, slots),
        dir: temp_run_dir("llama-serve", name),
        p,
        _turn: turn,
    })
}

/// servetop starts llama-server at `-c 1024`, and the ladder's 2000- and 4000-token lengths (16
/// output tokens each) make it restart the server at the first `--context-steps` value that
/// holds each: 2048, then 4096. Every length is measured, each by the server results.json
/// says, the context is read back from the restarted server's /props, and no llama-server is
/// left when servetop exits.
#[test]
fn serve_restarts_the_server_for_a_longer_context() {
    let Some(Setup {
        cmd, dir, _turn, ..
    }) = setup(
        "serve_restarts_the_server_for_a_longer_context",
        "restart",
        1,
    )
    else {
        return;
    };
    let out = servetop(&[
        "--serve",
        &cmd,
        "--context-len",
        "1024",
        "--context-steps",
        "2048,4096,8192",
        "--concurrency",
        "none",
        "--long-context",
        "500,2000,4000",
        "--long-context-output-len",
        "16",
        "--long-context-repeats",
        "1",
        "--out",
        dir_arg(&dir),
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = results(&dir);
    assert_eq!(server_contexts(&r), [1024, 2048, 4096], "{stderr}");
    let done = |i| ("done".to_string(), i);
    assert_eq!(measured_by(&r), [done(0), done(1), done(2)], "{stderr}");
    // Read back from the last server's /props, not taken from the flag.
    assert_eq!(r["server"]["context_limit"].as_u64(), Some(4096));
    let port = r["servers"][0]["port"].as_u64().unwrap();
    assert!(
        server_gone(port),
        "a llama-server on port {port} outlived servetop"
    );
    assert!(
        std::fs::read_to_string(dir.join("server.log"))
            .unwrap()
            .contains("llama")
    );
}

/// llama-server killed (SIGKILL, as the OOM killer does) during the first level: the level
/// records how it exited, with its last log lines, and keeps its failed requests;
/// `--restart-on-crash` starts it again on the same port and the second level is measured whole
/// by the new server.
#[test]
fn a_killed_server_is_classified_and_restarted_once() {
    let Some(Setup { p, cmd, dir, _turn }) = setup(
        "a_killed_server_is_classified_and_restarted_once",
        "crash",
        1,
    ) else {
        return;
    };
    let child = servetop(&[
        "--serve",
        &cmd,
        "--context-len",
        "2048",
        "--restart-on-crash",
        "--concurrency",
        "1,2",
        "--requests-per-level",
        "200",
        "--input-len",
        "100",
        "--output-len",
        "32",
        "--long-context",
        "none",
        "--out",
        dir_arg(&dir),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let port = first_level_running(&dir);
    let server = pids_with(&format!("llama-server -m {}", p.target.display()))
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c).starts_with(&*p.server.to_string_lossy())
            })
        })
        .collect::<Vec<_>>();
    assert_eq!(server.len(), 1, "one llama-server runs: {server:?}");
    assert!(
        Command::new("kill")
            .args(["-KILL", &server[0]])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = results(&dir);
    real_server::assert_crash_recorded_and_restarted(&r, 200);
    assert_eq!(r["servers"][1]["port"].as_u64(), Some(port), "{stderr}");
    assert!(
        server_gone(port),
        "a llama-server on port {port} outlived servetop"
    );
}

/// The share of the time requests were generating (first token to last) that another request
/// of the same level was generating too: 0 when the server serves one at a time.
fn overlap_share(dir: &Path) -> f64 {
    let windows: Vec<(u64, u64)> = real_server::records(dir)
        .iter()
        .filter(|r| !r.warmup && r.level == 0)
        .map(|r| {
            (
                r.send_at_us + r.ttft_us.unwrap(),
                r.send_at_us + r.e2e_us.unwrap(),
            )
        })
        .collect();
    let total: u64 = windows.iter().map(|(a, b)| b - a).sum();
    let shared: u64 = windows
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| {
            windows
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, &(c, d))| b.min(d).saturating_sub(a.max(c)))
                .max()
                .unwrap_or(0)
        })
        .sum();
    shared as f64 / total as f64
}

/// `--serve-param=-np=1,2`: the plan runs once per slot count, each llama-server started with
/// it (the command's own `-np 1` replaced), each run in its own directory, the comparison in the
/// run directory. The known answer: with one slot llama-server generates for one request at a
/// time, so at C=2 no two requests' generation overlaps; with two slots they run side by side.
#[test]
fn an_np_sweep_runs_each_slot_count_and_compares_them() {
    let Some(Setup {
        cmd, dir, _turn, ..
    }) = setup(
        "an_np_sweep_runs_each_slot_count_and_compares_them",
        "np-sweep",
        1,
    )
    else {
        return;
    };
    let out = servetop(&[
        "--serve",
        &cmd,
        "--context-len",
        "2048",
        "--serve-param=-np=1,2",
        "--concurrency",
        "2",
        "--requests-per-level",
        "12",
        "--input-len",
        "200",
        "--output-len",
        "32",
        "--long-context",
        "none",
        "--out",
        dir_arg(&dir),
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for np in ["1", "2"] {
        let sub = dir.join(format!("np-{np}"));
        let r = results(&sub);
        let ran = r["servers"][0]["command"].as_str().unwrap();
        assert!(ran.contains(&format!(" -np {np} ")), "{ran}");
        assert_eq!(ran.matches(" -np ").count(), 1, "{ran}");
        assert_eq!(r["sweep"][0]["completed"].as_u64(), Some(12), "{stderr}");
        let port = r["servers"][0]["port"].as_u64().unwrap();
        assert!(
            server_gone(port),
            "a llama-server on port {port} outlived servetop"
        );
    }
    let (one, two) = (
        overlap_share(&dir.join("np-1")),
        overlap_share(&dir.join("np-2")),
    );
    assert!(
        one < 0.05,
        "with one slot {:.0} % of generation overlapped",
        one * 100.0
    );
    assert!(
        two > 0.5,
        "with two slots only {:.0} % of generation overlapped",
        two * 100.0
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("## -np 1 (") && md.contains("## -np 2 ("),
        "{md}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("sweep.csv"))
            .unwrap()
            .lines()
            .count(),
        3
    );
}

/// `servetop tune` over llama-server's slot count: four configurations, one of them an
/// invalid value llama-server refuses, each searched for the highest rate meeting a TTFT SLO
/// on its own server. The refused one is recorded as failed with llama-server's own words;
/// every other gets a capacity or the bound its early stop proved, the best is one of them,
/// and no llama-server outlives the tune.
#[test]
fn a_tune_of_slot_counts_finds_the_best_and_skips_the_one_that_cannot_start() {
    let Some(Setup {
        cmd, dir, _turn, ..
    }) = setup(
        "a_tune_of_slot_counts_finds_the_best_and_skips_the_one_that_cannot_start",
        "tune",
        1,
    )
    else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args([
            "tune",
            "--headless",
            "--no-gpu",
            "--serve",
            &cmd,
            "--context-len",
            "2048",
            "--serve-param=-np=1,2,4,nope",
            "--concurrency",
            "1",
            "--requests-per-level",
            "3",
            "--min-requests",
            "3",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--slo",
            "ttft:500",
            "--search-seconds",
            "2",
            "--search-min-requests",
            "20",
            "--search-probe-concurrency",
            "8",
            "--search-precision",
            "25%",
            "--out",
            dir_arg(&dir),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let t = results(&dir);
    let configs = t["tune"]["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 4);
    let nope = &configs[3];
    assert_eq!(nope["params"]["-np"], "nope");
    assert_eq!(nope["status"], "failed", "{nope}");
    assert!(nope["capacity"].is_null());
    assert!(nope["reason"].as_str().unwrap().contains("-np"), "{nope}");
    let mut best_capacity: f64 = 0.0;
    for c in &configs[..3] {
        let sub = results(&dir.join(c["dir"].as_str().unwrap()));
        let port = sub["servers"][0]["port"].as_u64().unwrap();
        assert!(
            server_gone(port),
            "a llama-server on port {port} outlived the tune"
        );
        assert!(
            c["single_stream_tokens_per_s"].as_f64().unwrap() > 0.0,
            "{c}"
        );
        match c["status"].as_str().unwrap() {
            "measured" => best_capacity = best_capacity.max(c["capacity"].as_f64().unwrap()),
            "stopped early" => {
                // Stopped after one probe, at a rate an earlier configuration met.
                assert_eq!(sub["search"]["probes"].as_array().unwrap().len(), 1, "{c}");
                assert_eq!(sub["search"]["status"], "stopped_early");
                assert!(c["below"].as_f64().unwrap() > 0.0, "{c}");
            }
            other => panic!("{other}: {c}"),
        }
    }
    let best = &t["tune"]["best"];
    assert_eq!(best["capacity"].as_f64(), Some(best_capacity), "{best}");
    assert!(dir.join("charts/pareto.png").is_file());
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("## Leaderboard") && md.contains("| failed |"),
        "{md}"
    );
}
