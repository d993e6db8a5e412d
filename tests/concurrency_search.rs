//! `--search concurrency` end to end, run as a user runs it (the binary against a simulator
//! child), on a shape whose answer follows from the simulator's own rules.
//!
//! The simulator (`sim::SimConfig::step_ms`) gives every running request one token a decode step
//! (accept length 1), and a step lasts `D · (1 + g · (b − 1))` with `b` requests in the batch;
//! prefill at 1M tok/s takes 0.1 ms for these prompts, and context does not slow a step. A
//! request of `O` output tokens gets its first token at prefill, then `O − 1` decode steps, so
//! its TPOT is the mean step over its life. A closed loop of `C` streams keeps `C` requests in
//! the batch (less only for the moment between one request's end and the next one's start),
//! so its TPOT is `D · (1 + g · (C − 1))` at most, and a TPOT limit `X` is met exactly while
//! `C ≤ 1 + (X / D − 1) / g`.
//!
//! With D = 40 ms, g = 0.5 and X = 110 ms: C = 4 gives 100 ms (10 % under the limit), C = 5 gives
//! 120 ms (9 % over), so the most concurrent requests that meet the limit is 4. Sessions of
//! several turns with no tool wait keep each user's request in the batch the same way, so the
//! most users is 4 too.
//!
//! Beyond the answer, every probe's verdict is held to the server's own record of that probe's
//! requests (their TPOT p90 as the simulator wrote their tokens), and the simulator must not
//! have been starved by a busy machine. A search whose simulator's record put a probe within
//! 5 % of the limit (a machine that stalled its steps) is made again on a fresh simulator, up to
//! three times, then the test says so: the answer is the rule's only where the record kept to it.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, results, succeed};

const STEP_MS: f64 = 40.0;
const GROWTH: f64 = 0.5;
const OUTPUT: u32 = 13;
const TPOT_LIMIT_MS: f64 = 110.0;

/// The tests time a simulator on a 2-core machine: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The most concurrent requests whose TPOT meets the limit, from the simulator's rule.
fn capacity() -> u32 {
    (1.0 + (TPOT_LIMIT_MS / STEP_MS - 1.0) / GROWTH).floor() as u32
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-csearch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The simulator of the module comment.
fn simulator() -> (sim_child::KillOnDrop, String) {
    let (child, url) = sim_child::spawn(
        &[
            "--decode-step-ms",
            &STEP_MS.to_string(),
            "--batch-growth",
            &GROWTH.to_string(),
            "--accept-length",
            "1",
            "--context-ms-per-1k",
            "0",
            "--prefill-tokens-per-s",
            "1000000",
            "--max-running",
            "256",
        ],
        &[],
    );
    (sim_child::KillOnDrop(child), url)
}

/// `servetop run --search concurrency` against `url` with `extra` flags; the run directory's
/// results.json, and the seconds it took.
fn search(url: &str, dir: &Path, extra: &[&str]) -> (Value, f64) {
    let started = std::time::Instant::now();
    succeed(
        Command::new(bin())
            .args(["run", "--base-url", url, "--headless", "--no-gpu"])
            .args(["--input-len", "100", "--output-len", &OUTPUT.to_string()])
            .args([
                "--slo",
                &format!("tpot:{TPOT_LIMIT_MS}"),
                "--slo-percentile",
                "90",
            ])
            .args(["--search", "concurrency", "--max-concurrency", "32"])
            .args(["--search-seconds", "2", "--search-min-requests", "20"])
            .args(extra)
            .arg("--out")
            .arg(dir),
    );
    (results(dir), started.elapsed().as_secs_f64())
}

/// Searches made on a fresh simulator before the test says the machine kept it off its rule.
const TRIES: u32 = 3;

/// [`search`] on a fresh simulator, made again while the simulator's own record puts a probe's
/// TPOT p90 (or a turn's) within 5 % of the limit, where its rule puts every level at least
/// 8 % from it: a machine that stalls the simulator's steps (seen: 2.1 s behind over 29 s with
/// the test's process stopped 150 ms every 1.5 s, C=4 at 114.3 ms) moves the answer itself, so
/// the search cannot be judged on it. The simulator, its URL, the results and the seconds of
/// the first search the simulator kept to its rule; none, saying so, after [`TRIES`].
fn search_on_rule(
    dir: &Path,
    extra: &[&str],
    levels_key: &str,
) -> Option<(sim_child::KillOnDrop, String, Value, f64)> {
    for attempt in 1..=TRIES {
        let (sim, url) = simulator();
        let _ = std::fs::remove_dir_all(dir);
        let (v, run_s) = search(&url, dir, extra);
        let truth = sim_truth::fetch(&url);
        let near: Vec<String> = v[levels_key]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|l| {
                let level = l["index"].as_u64().unwrap_or(0) as u32;
                let all: Vec<f64> = sim_truth::of_level(&truth, level)
                    .into_iter()
                    .filter_map(sim_truth::server_tpot_ms)
                    .collect();
                let mut p90s: Vec<(String, f64)> = Vec::new();
                if !all.is_empty() {
                    p90s.push(("all".into(), sim_truth::nearest_rank(&all, 90.0)));
                }
                p90s.extend(
                    turn_p90s(dir, &truth, level)
                        .into_iter()
                        .map(|(t, p)| (format!("turn {t}"), p)),
                );
                let c = l["concurrency"].clone();
                p90s.into_iter()
                    .filter(|(_, p)| (p - TPOT_LIMIT_MS).abs() <= 0.05 * TPOT_LIMIT_MS)
                    .map(move |(what, p)| format!("C={c} {what}: {p:.1} ms"))
            })
            .collect();
        if near.is_empty() {
            return Some((sim, url, v, run_s));
        }
        eprintln!(
            "run {attempt} of {TRIES}: the simulator's own record is off its rule ({}; slipped {:.0} ms behind its schedule over {run_s:.1} s): the machine stalled it",
            near.join(", "),
            truth.schedule_slip_ms
        );
    }
    eprintln!("SKIPPED: the machine kept the simulator off its rule in each of {TRIES} searches");
    None
}

/// The simulator's TPOT p90 of each turn of a level's sessions (turn from 1), its requests
/// matched to servetop's records by id; empty for a level without turns.
fn turn_p90s(dir: &Path, truth: &servetop::sim::SimTruth, level: u32) -> Vec<(u32, f64)> {
    let ids = sim_truth::by_id(truth);
    let mut by_turn: std::collections::BTreeMap<u32, Vec<f64>> = std::collections::BTreeMap::new();
    for r in run_files::request_records(dir)
        .iter()
        .filter(|r| !r.warmup && r.is_ok() && r.level == level)
    {
        let Some(turn) = r.turn else { continue };
        let s = ids[sim_truth::id_of(r).as_str()];
        if let Some(ms) = sim_truth::server_tpot_ms(s) {
            by_turn.entry(turn).or_default().push(ms);
        }
    }
    by_turn
        .into_iter()
        .map(|(t, v)| (t, sim_truth::nearest_rank(&v, 90.0)))
        .collect()
}

/// The search converged on the simulator's capacity, each probe's verdict is what the server
/// did at it, and each probe is a level of its concurrency with its requests; returns the
/// probes' levels as results.json lists them under `levels_key`.
fn found_the_capacity(v: &Value, url: &str, run_s: f64, levels_key: &str, dir: &Path) {
    let truth = sim_truth::fetch(url);
    sim_truth::guard(&truth, run_s);
    let s = &v["search"];
    eprintln!("{}", serde_json::to_string_pretty(&s["probes"]).unwrap());
    assert_eq!(s["target"], "concurrency");
    assert_eq!(s["status"], "converged", "{s}");
    let levels = v[levels_key].as_array().unwrap();
    let probes = s["probes"].as_array().unwrap();
    assert_eq!(levels.len(), probes.len(), "a level a probe");
    // The search starts at a quarter of --max-concurrency, and halves it from there.
    assert_eq!(probes[0]["concurrency"], 8);
    for p in probes {
        let c = p["concurrency"].as_u64().unwrap();
        assert!(p.get("request_rate").is_none(), "{p}");
        let level = levels
            .iter()
            .find(|l| l["index"] == p["level"])
            .unwrap_or_else(|| panic!("probe {p} has no level"));
        assert_eq!(level["concurrency"].as_u64(), Some(c));
        let server: Vec<f64> = sim_truth::of_level(&truth, p["level"].as_u64().unwrap() as u32)
            .into_iter()
            .filter_map(sim_truth::server_tpot_ms)
            .collect();
        assert_eq!(
            server.len() as u64,
            p["check"]["requests"].as_u64().unwrap(),
            "C={c}: the server completed every request the check counted"
        );
        let p90 = sim_truth::nearest_rank(&server, 90.0);
        let meets = p["check"]["meets"].as_bool().unwrap();
        // Sessions meet the SLO only on every turn: each turn's p90 too, by the same record.
        let turns = turn_p90s(dir, &truth, p["level"].as_u64().unwrap() as u32);
        if levels_key == "sessions" {
            assert_eq!(turns.len(), 3, "C={c}: three turns");
            let judged = p["check"]["turns"].as_array().unwrap();
            for ((turn, server), judged) in turns.iter().zip(judged) {
                assert_eq!(judged["turn"], *turn);
                assert!(
                    (server - TPOT_LIMIT_MS).abs() > 0.05 * TPOT_LIMIT_MS,
                    "C={c} turn {turn}: the server's TPOT p90 {server:.1} ms is too near the limit"
                );
                assert_eq!(
                    judged["meets"],
                    *server <= TPOT_LIMIT_MS,
                    "C={c} turn {turn}: the server's TPOT p90 {server:.1} ms"
                );
            }
        }
        let every_turn = turns.iter().all(|(_, t)| *t <= TPOT_LIMIT_MS);
        // The server's own p90 sits clearly on one side of the limit (at least 8 % here): the
        // verdict must say which.
        assert_eq!(
            meets,
            p90 <= TPOT_LIMIT_MS && every_turn,
            "C={c}: the server's TPOT p90 was {p90:.1} ms against {TPOT_LIMIT_MS} ms (by turn {turns:.1?}), the verdict {meets}"
        );
        assert!(
            (p90 - TPOT_LIMIT_MS).abs() > 0.05 * TPOT_LIMIT_MS,
            "C={c}: the server's TPOT p90 {p90:.1} ms is not where the simulator's rule puts it"
        );
        // Whole probes: at least the fewest requests and two a stream.
        assert!(p["requests"].as_u64().unwrap() >= 20.max(2 * c), "{p}");
    }
    let want = capacity();
    assert_eq!(want, 4);
    assert_eq!(s["pass_concurrency"].as_u64(), Some(u64::from(want)), "{s}");
    assert_eq!(
        s["fail_concurrency"].as_u64(),
        Some(u64::from(want) + 1),
        "{s}"
    );
    assert!(s.get("pass_rate").is_none_or(Value::is_null), "{s}");
}

#[test]
fn the_concurrency_search_finds_the_most_streams_that_meet_the_slo() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = scratch("streams");
    let Some((_sim, url, v, run_s)) = search_on_rule(&dir, &[], "sweep") else {
        return;
    };
    found_the_capacity(&v, &url, run_s, "sweep", &dir);
    assert!(v["search"].get("sessions").is_none(), "{}", v["search"]);
    // summary.md says the answer and lists the probes as the search's own levels.
    let md = run_files::read(&dir, "summary.md");
    assert!(
        md.contains("4 concurrent requests meet tpot:110 at p90"),
        "{md}"
    );
    assert!(
        md.contains("## Concurrency levels: the search probes, in the order they ran"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_session_search_finds_the_most_users_that_meet_the_slo() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = scratch("users");
    let flags = [
        "--sessions",
        "8",
        "--turns",
        "3",
        "--tool-wait",
        "0",
        "--tool-result-len",
        "20",
    ];
    let Some((_sim, url, v, run_s)) = search_on_rule(&dir, &flags, "sessions") else {
        return;
    };
    found_the_capacity(&v, &url, run_s, "sessions", &dir);
    assert_eq!(v["search"]["sessions"], true);
    // Every probe ran whole sessions of three turns: its requests are a multiple of them.
    for l in v["sessions"].as_array().unwrap() {
        assert_eq!(l["kind"], "sessions");
        assert_eq!(l["requests"].as_u64().unwrap() % 3, 0, "{l}");
        assert_eq!(
            l["sessions_completed"].as_u64().unwrap() * 3,
            l["requests"].as_u64().unwrap(),
            "{l}"
        );
    }
    let md = run_files::read(&dir, "summary.md");
    assert!(
        md.contains("4 users meet, on every turn, tpot:110 at p90"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the flags refuse, each in one line.
#[test]
fn the_concurrency_search_refuses_what_it_cannot_do() {
    let refuse = |extra: &[&str], says: &str| {
        let out = Command::new(bin())
            .args(["run", "--base-url", "http://127.0.0.1:9", "--headless"])
            .args(["--slo", "tpot:50", "--search", "concurrency"])
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} ran");
        assert!(err.contains(says), "{extra:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    };
    refuse(&["--sessions", "2,4"], "give --sessions one number");
    refuse(
        &["--sessions", "8", "--search-probe-concurrency", "4"],
        "leave out --search-probe-concurrency",
    );
    refuse(
        &["--sessions", "64", "--max-concurrency", "32"],
        "above --max-concurrency 32",
    );
    refuse(
        &[
            "--search-probe-concurrency",
            "64",
            "--max-concurrency",
            "32",
        ],
        "above --max-concurrency 32",
    );
    refuse(&["--request-rate", "2"], "leave out --request-rate");
    // A rate search does not run sessions: their capacity is in users.
    let out = Command::new(bin())
        .args(["run", "--base-url", "http://127.0.0.1:9", "--headless"])
        .args(["--slo", "tpot:50", "--search", "rate", "--sessions", "4"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("use --search concurrency"),
        "{err}"
    );
}
