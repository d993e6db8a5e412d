//! `bench-client`'s agent case, end to end: users holding sessions on the firehose's chat
//! endpoint. Checked against the firehose's own record of what it wrote (`firehose-writes.json`,
//! per request id) and against the plan, not against another run of servetop:
//! - every user's session ran every turn: the row's `sessions_completed` is the users, its
//!   `completed` the users × turns, nothing failed;
//! - each request's token events, as servetop recorded them, are the firehose's, one for one;
//! - each session's context grew by its answer and a tool result every turn (the firehose
//!   counts the chat messages it was sent, so the prompt tokens it reports are what it got);
//! - a tool wait came before every turn after the first, so the row's `tool_wait_share` is more
//!   than zero, and the timing error was measured.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::process::Command;

use serde_json::Value;

const USERS: u64 = 40;
const TURNS: u64 = 3;
const OUTPUT: u64 = 20;

#[test]
fn agent_sessions_run_every_turn_and_match_the_firehoses_record() {
    let dir = std::env::temp_dir().join(format!("servetop-agent-case-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["bench-client", "--no-pin", "--json", "--ui", "headless"])
        .args(["--concurrency", "none", "--accuracy-concurrency", "none"])
        .args(["--wave-concurrency", "none", "--long-context-tokens", "0"])
        .args(["--agent-sessions", &USERS.to_string()])
        .args(["--agent-turns", &TURNS.to_string()])
        .args(["--agent-tool-wait", "0.3", "--pace-ms", "5"])
        .args(["--accuracy-output-len", &OUTPUT.to_string()])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["kind"], "agent");
    assert_eq!(row["concurrency"], USERS);
    assert_eq!(row["sessions_completed"], USERS, "{row}");
    assert_eq!(row["completed"], USERS * TURNS, "{row}");
    assert_eq!(row["failed"], 0, "{row}");
    assert_eq!(row["tokens"], USERS * TURNS * OUTPUT, "{row}");
    let share = row["tool_wait_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 1.0, "{share}");
    assert!(row["timing_error_p99_ms"].as_f64().is_some(), "{row}");

    let case = dir.join("repeat-1").join("case-001");
    let writes: HashMap<String, Vec<(u64, u64, u64)>> =
        serde_json::from_slice(&std::fs::read(case.join("firehose-writes.json")).unwrap()).unwrap();
    let text = std::fs::read_to_string(case.join("requests.jsonl")).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["warmup"].as_bool() != Some(true))
        .collect();
    assert_eq!(records.len() as u64, USERS * TURNS);
    // Per session, by turn: the prompt tokens the firehose counted.
    let mut contexts: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    for r in &records {
        assert_eq!(r["status"], "ok", "{r}");
        let id = format!("servetop-{}-{}", r["level"], r["index"]);
        let wrote: u64 = writes[&id].iter().map(|w| w.1).sum();
        let read: u64 = r["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["tokens"].as_u64().unwrap())
            .sum();
        assert_eq!((read, wrote), (OUTPUT, OUTPUT), "{id}");
        assert_eq!(r["output_tokens"], OUTPUT, "{id}");
        let turn = r["turn"].as_u64().unwrap();
        if turn > 1 {
            assert!(r["tool_wait_ms"].as_f64().unwrap() > 0.0, "{r}");
        }
        contexts
            .entry(r["session"].as_u64().unwrap())
            .or_default()
            .push((turn, r["input_tokens"].as_u64().unwrap()));
    }
    assert_eq!(contexts.len() as u64, USERS);
    for (session, mut turns) in contexts {
        turns.sort_unstable();
        assert_eq!(
            turns.iter().map(|t| t.0).collect::<Vec<_>>(),
            (1..=TURNS).collect::<Vec<_>>(),
            "session {session}"
        );
        // Each turn's context holds the last one's, its answer and a tool result.
        for w in turns.windows(2) {
            assert!(w[1].1 >= w[0].1 + OUTPUT, "session {session}: {turns:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
