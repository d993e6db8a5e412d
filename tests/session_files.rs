//! Agent-session runs through servetop's files, as the other workloads go: split over shards and
//! merged (`--shard`, `report --merge`), stopped and resumed (`--resume`), and drawn again from
//! the files (`report`). Against servetop's simulator, run as a user runs them (the binary, a
//! simulator child).
//!
//! The answers:
//! - Each shard sends sessions of its own: every turn's cache ceiling (what servetop says the
//!   server had finished of its prompt) equals the simulator's own record of the longest prefix
//!   it had finished, and its cached tokens the simulator's; a session sent by both shards would
//!   find the other's turns finished, beyond the ceiling servetop works out.
//! - The merge holds the union of the shards' turns: a level's users and completed sessions are
//!   the shards' added up, its cached and ceiling tokens the sums over all their turns, and its
//!   TTFT p50 of each turn the nearest-rank median over both shards' records of that turn
//!   (within HDR's three significant digits).
//! - A run stopped during its second level of users and resumed finishes both, every session of
//!   each complete; `report` then draws the same sessions table, sessions.csv and `session_list.csv`
//!   from its files.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use servetop::metrics::RequestRecord;

mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, finished, request_records, results, start_in};

const TURNS: u32 = 3;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "servetop-session-files-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The sessions every run here sends, with `extra` flags.
fn session_run(url: &str, dir: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(["run", "--base-url", url, "--headless", "--no-gpu"])
        .args(["--concurrency", "none", "--long-context", "none"])
        .args(["--turns", &TURNS.to_string(), "--tool-result-len", "40"])
        .args(["--input-len", "200", "--shared-prefix-len", "64"])
        .args(["--output-len", "12", "--seed", "5"])
        .args(extra)
        .arg("--out")
        .arg(dir)
        .env_remove("SERVETOP_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// The measured, completed turns of a run's level.
fn turns_of(recs: &[RequestRecord], level: u32) -> Vec<&RequestRecord> {
    recs.iter()
        .filter(|r| !r.warmup && r.is_ok() && r.level == level)
        .collect()
}

#[test]
fn sharded_sessions_merge_into_one_run_of_their_turns() {
    let (child, url) = sim_child::spawn(&[], &[]);
    let _sim = sim_child::KillOnDrop(child);
    let tmp = scratch("shards");
    let at = start_in(5);
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.join(format!("shard{i}"))).collect();
    let children: Vec<Child> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            session_run(&url, d, &["--sessions", "2,4", "--tool-wait", "0.1"])
                .args(["--shard", &format!("{i}/2"), "--start-at", &at])
                .args(["--level-seconds", "3", "--drain-seconds", "3"])
                .spawn()
                .unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        finished(c, &format!("shard {i}"));
    }
    let truth = sim_truth::fetch(&url);
    let ids = sim_truth::by_id(&truth);
    let shard_recs: Vec<Vec<RequestRecord>> = dirs.iter().map(|d| request_records(d)).collect();
    for (i, recs) in shard_recs.iter().enumerate() {
        let prefix = format!("servetop-shard{i}of2");
        let measured: Vec<&RequestRecord> =
            recs.iter().filter(|r| !r.warmup && r.is_ok()).collect();
        assert!(measured.len() >= 8, "shard {i}: {} turns", measured.len());
        for r in measured {
            let id = sim_truth::id_with(&prefix, r);
            let s = ids
                .get(id.as_str())
                .unwrap_or_else(|| panic!("{id} not in the simulator's record"));
            assert_eq!(
                r.cache_ceiling_tokens, s.finished_prefix_tokens,
                "{id} (turn {:?}): the ceiling against what the simulator had finished",
                r.turn
            );
            assert_eq!(r.cached_tokens, s.cached_tokens, "{id}");
        }
    }

    let merged = tmp.join("merged");
    let out = Command::new(bin())
        .args(["report", "--merge"])
        .args(&dirs)
        .arg("--out")
        .arg(&merged)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = results(&merged);
    let shard_levels: Vec<Value> = dirs
        .iter()
        .map(|d| results(d)["sessions"].clone())
        .collect();
    let levels = m["sessions"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for (li, (l, users)) in levels.iter().zip([2u64, 4]).enumerate() {
        let level = u32::try_from(li).unwrap();
        assert_eq!(l["concurrency"], users, "{l}");
        let completed: u64 = shard_levels
            .iter()
            .map(|s| s[li]["sessions_completed"].as_u64().unwrap())
            .sum();
        assert_eq!(l["sessions_completed"], completed);
        // Each merged session's turns are its own shard's: the plan's two waits of 0.1 s.
        run_files::close(
            "mean_session_tool_s",
            l["mean_session_tool_s"].as_f64().unwrap(),
            0.2,
            1e-9,
            1e-9,
        );
        let all: Vec<&RequestRecord> = shard_recs
            .iter()
            .flat_map(|recs| turns_of(recs, level))
            .collect();
        let sum =
            |f: fn(&RequestRecord) -> Option<u64>| all.iter().filter_map(|r| f(r)).sum::<u64>();
        assert_eq!(l["cached_tokens"], sum(|r| r.cached_tokens));
        assert_eq!(l["cache_ceiling_tokens"], sum(|r| r.cache_ceiling_tokens));
        let by_turn = l["ttft_by_turn_ms"].as_array().unwrap();
        assert_eq!(by_turn.len(), TURNS as usize);
        for (t, got) in by_turn.iter().enumerate() {
            let ttfts: Vec<f64> = all
                .iter()
                .filter(|r| r.turn == Some(u32::try_from(t).unwrap() + 1))
                .map(|r| r.ttft_us.unwrap() as f64 / 1e3)
                .collect();
            run_files::hdr_close(
                &format!("level {level} turn {} TTFT p50", t + 1),
                got.as_f64().unwrap(),
                run_files::nearest_rank(&ttfts, 0.5),
            );
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The "Agent sessions" section of a summary.md.
fn sessions_section(dir: &Path) -> String {
    let md = run_files::read(dir, "summary.md");
    let from = md.find("## Agent sessions").unwrap();
    let rest = &md[from..];
    let to = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..to].to_string()
}

#[test]
fn a_resumed_session_run_finishes_and_report_draws_it_again() {
    let (child, url) = sim_child::spawn(&[], &[]);
    let _sim = sim_child::KillOnDrop(child);
    let dir = scratch("resume");
    let plan = [
        "--sessions",
        "1,2",
        "--sessions-per-level",
        "4",
        "--tool-wait",
        "0.3",
    ];
    let mut first = session_run(&url, &dir, &plan).spawn().unwrap();
    // Stop it once its second level of users runs.
    let t = std::time::Instant::now();
    loop {
        let status = std::fs::read(dir.join("results.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .map(|v| v["sessions"][1]["status"].clone());
        if status.as_ref().and_then(Value::as_str) == Some("running") {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "the second level never ran: {status:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let killed = Command::new("kill")
        .args(["-TERM", &first.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(first.wait().unwrap().code(), Some(130));
    let stopped = results(&dir);
    assert_eq!(stopped["sessions"][0]["status"], "done");
    assert_ne!(stopped["sessions"][1]["status"], "done");

    let resumed = Command::new(bin())
        .args(["run", "--resume"])
        .arg(&dir)
        .args(["--headless", "--no-gpu"])
        .env_remove("SERVETOP_API_KEY")
        .output()
        .unwrap();
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let v = results(&dir);
    assert_eq!(v["state"], "finished");
    for (l, users) in v["sessions"].as_array().unwrap().iter().zip([1u64, 2]) {
        assert_eq!(l["status"], "done", "{l}");
        assert_eq!(l["concurrency"], users);
        assert_eq!(l["sessions_completed"], 4, "{l}");
        let turns = l["turns"].as_array().unwrap();
        assert_eq!(turns.len(), TURNS as usize);
        assert!(turns.iter().all(|t| t["completed"] == 4), "{turns:?}");
    }

    let (section, csv) = (
        sessions_section(&dir),
        run_files::read(&dir, "sessions.csv"),
    );
    assert!(section.contains("| 2 | 4 | 12 / 0 |"), "{section}");
    // A row a session, each level's four completed whole; `report` writes the file again.
    let rows = run_files::csv(&dir, "session_list.csv");
    assert_eq!(rows.len(), 8, "{rows:?}");
    assert!(
        rows.iter()
            .all(|r| r["outcome"] == "completed" && r["turns"] == TURNS.to_string()),
        "{rows:?}"
    );
    let list = run_files::read(&dir, "session_list.csv");
    std::fs::remove_file(dir.join("session_list.csv")).unwrap();
    let report = Command::new(bin())
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert_eq!(sessions_section(&dir), section);
    assert_eq!(run_files::read(&dir, "sessions.csv"), csv);
    assert_eq!(run_files::read(&dir, "session_list.csv"), list);
    let _ = std::fs::remove_dir_all(&dir);
}
