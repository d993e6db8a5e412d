//! Sub-agents (`--fan-out`) against servetop's simulator: each session's sub-agents start together
//! once its first turn is answered, and its next turn waits for the slowest of them, by the
//! simulator's own clock and record.
//!
//! The answers, from the simulator's record (not servetop's arithmetic):
//! - A sub-agent's first turn reaches the simulator after its parent's first answer was written,
//!   and before any of its siblings' first answers ended (each takes about 120 ms of decode
//!   steps): they run at once, not one after another.
//! - The parent's second turn reaches the simulator after the last token of every sub-agent's
//!   last turn. Their tool waits are exponential, so the slowest sub-agent is not the first one,
//!   nor always the same: the test checks that their ends are far apart for some session.
//! - A sub-agent's chat opens with the shared system message, as its parent's: its first turn's
//!   ceiling is 3 + 4 + `PREFIX` + 4, and turn k + 1's is turn k's prompt + 4 + its output, as
//!   the simulator recorded them and equal to its `finished_prefix_tokens`.
//! - No two requests on one slot were in flight at once.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::process::Command;

use servetop::metrics::RequestRecord;
use servetop::sim::SimRequestTrace;

mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, request_records, results};

const PREFIX: u64 = 120;
const TURNS: u32 = 3;
const FAN_OUT: u32 = 3;
const SUB_TURNS: u32 = 2;
const SESSIONS: u32 = 4;
const OUTPUT: u64 = 12;
/// Requests a session sends: its own turns and its sub-agents'.
const PER_SESSION: u32 = TURNS + FAN_OUT * SUB_TURNS;

/// Who sent a request: (session, sub-agent (0: the session itself), turn from 1).
type Key = (u32, u32, u32);

/// Each turn's record with the simulator's record of it.
type Turns<'a> = HashMap<Key, (&'a RequestRecord, &'a SimRequestTrace)>;

#[test]
fn sub_agents_start_together_and_the_next_turn_waits_for_the_slowest() {
    // Two users: a slot each, and one a sub-agent of each.
    held_to_the_record(&["--sessions", "2"], "users", Some(2 + 2 * FAN_OUT));
}

/// The same sessions started at a rate (`--session-rate`): every sub-agent takes a slot of its
/// own from the level's pool, so no slot has two requests in flight however the sessions overlap.
#[test]
fn sub_agents_of_sessions_started_at_a_rate_join_the_same_way() {
    held_to_the_record(&["--session-rate", "4"], "rate", None);
}

/// The plan with `load` (how sessions are started) against a simulator, held to its record;
/// `slots`: how many slots the run must have used, where that is known.
fn held_to_the_record(load: &[&str], name: &str, slots: Option<u32>) {
    // 10 ms decode steps: a request takes about 120 ms, far longer than sending three at once.
    let (child, url) = sim_child::spawn(&["--decode-step-ms", "10", "--batch-growth", "0"], &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir =
        std::env::temp_dir().join(format!("servetop-sub-agents-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(bin())
        .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
        .args(["--concurrency", "none", "--long-context", "none"])
        .args(load)
        .args(["--sessions-per-level", &SESSIONS.to_string()])
        .args(["--turns", &TURNS.to_string(), "--tool-wait", "exp:0.15"])
        .args(["--fan-out", &FAN_OUT.to_string()])
        .args(["--sub-agent-turns", &SUB_TURNS.to_string()])
        .args(["--tool-result-len", "40", "--input-len", "300"])
        .args(["--shared-prefix-len", &PREFIX.to_string()])
        .args(["--output-len", &OUTPUT.to_string()])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("3 sub-agents of 2 turns at once, the next turn waiting for the last"),
        "the plan line says the sub-agents: {stdout}"
    );
    let truth = sim_truth::fetch(&url);
    let ids = sim_truth::by_id(&truth);
    let recs = request_records(&dir);
    let mut all: Turns<'_> = HashMap::new();
    for r in recs.iter().filter(|r| !r.warmup) {
        let s = ids[sim_truth::id_of(r).as_str()];
        let key = (
            r.index / PER_SESSION,
            r.sub_agent.unwrap_or(0),
            r.turn.unwrap(),
        );
        assert!(all.insert(key, (r, s)).is_none(), "{key:?} twice");
    }
    assert_eq!(
        all.len() as u32,
        SESSIONS * PER_SESSION,
        "every turn of every session and sub-agent ran"
    );
    joins_wait_for_the_slowest(&all);
    ceilings_by_hand(&all);
    no_slot_overlaps(&all, slots);
    results_apart(&dir, &all);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sub-agents start together after their parent's first answer, and its next turn follows
/// the last of them.
fn joins_wait_for_the_slowest(all: &Turns<'_>) {
    let mut spread_us = 0u64;
    for session in 0..SESSIONS {
        let at = |agent: u32, turn: u32| all[&(session, agent, turn)].1;
        let parent_answered = at(0, 1).last_write_unix_us().unwrap();
        let firsts: Vec<&SimRequestTrace> = (1..=FAN_OUT).map(|a| at(a, 1)).collect();
        let earliest_end = firsts
            .iter()
            .map(|s| s.last_write_unix_us().unwrap())
            .min()
            .unwrap();
        for (a, s) in (1..).zip(&firsts) {
            assert!(
                s.received_unix_us >= parent_answered,
                "session {session} sub-agent {a} sent before its parent's answer ended"
            );
            assert!(
                s.received_unix_us < earliest_end,
                "session {session} sub-agent {a} reached the server {} µs after a sibling's answer ended: not at once",
                s.received_unix_us - earliest_end
            );
        }
        let ends: Vec<u64> = (1..=FAN_OUT)
            .map(|a| at(a, SUB_TURNS).last_write_unix_us().unwrap())
            .collect();
        let (first_end, last_end) = (*ends.iter().min().unwrap(), *ends.iter().max().unwrap());
        spread_us = spread_us.max(last_end - first_end);
        let next = at(0, 2).received_unix_us;
        assert!(
            next >= last_end,
            "session {session}: its second turn reached the server {} µs before its slowest sub-agent ended",
            last_end - next
        );
        // The join is the turn's wait: no tool wait of its own.
        assert_eq!(all[&(session, 0, 2)].0.tool_wait_ms, None);
    }
    assert!(
        spread_us >= 50_000,
        "the sub-agents all ended within {spread_us} µs of each other: waiting for the first would pass too"
    );
}

/// Each sub-agent's ceiling and cache, by the simulator's rules and record.
fn ceilings_by_hand(all: &Turns<'_>) {
    for (&(session, agent, turn), &(r, s)) in all {
        let want = if turn == 1 {
            3 + 4 + PREFIX + 4
        } else {
            let (_, before) = all[&(session, agent, turn - 1)];
            before.prompt_tokens + 4 + before.tokens()
        };
        if agent > 0 || turn == 1 {
            assert_eq!(
                r.cache_ceiling_tokens,
                Some(want),
                "{session} {agent} {turn}"
            );
        }
        assert_eq!(r.cache_ceiling_tokens, s.finished_prefix_tokens);
        assert_eq!(r.cached_tokens, s.cached_tokens);
    }
}

/// No slot had two requests in flight; `slots` were used, where known.
fn no_slot_overlaps(all: &Turns<'_>, slots: Option<u32>) {
    let mut by_slot: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    for (r, _) in all.values() {
        by_slot
            .entry(r.slot.unwrap())
            .or_default()
            .push((r.send_at_us, r.send_at_us + r.e2e_us.unwrap()));
    }
    if let Some(n) = slots {
        assert_eq!(by_slot.len() as u32, n, "a slot per user and sub-agent");
    }
    // At least the session and its sub-agents at once.
    assert!(by_slot.len() as u32 > FAN_OUT, "{} slots", by_slot.len());
    for (slot, mut v) in by_slot {
        v.sort_unstable();
        for w in v.windows(2) {
            assert!(
                w[1].0 >= w[0].1,
                "slot {slot}: {:?} overlaps {:?}",
                w[1],
                w[0]
            );
        }
    }
}

/// results.json and sessions.csv: the sub-agents' turns apart from the sessions' own.
fn results_apart(dir: &std::path::Path, all: &Turns<'_>) {
    let v = results(dir);
    let level = &v["sessions"][0];
    assert_eq!(level["sessions_completed"], SESSIONS);
    assert_eq!(level["fan_out"], serde_json::Value::Null);
    assert_eq!(level["conversation"]["fan_out"], FAN_OUT);
    let own = level["turns"].as_array().unwrap();
    assert_eq!(own.len() as u32, TURNS);
    assert!(own.iter().all(|t| t["completed"] == SESSIONS));
    let sub = level["sub_agent_turns"].as_array().unwrap();
    assert_eq!(sub.len() as u32, SUB_TURNS);
    for t in sub {
        assert_eq!(t["completed"], SESSIONS * FAN_OUT, "{t}");
        let turn = t["turn"].as_u64().unwrap() as u32;
        let ceiling: u64 = all
            .iter()
            .filter(|(k, _)| k.1 > 0 && k.2 == turn)
            .map(|(_, (r, _))| r.cache_ceiling_tokens.unwrap())
            .sum();
        assert_eq!(t["cache_ceiling_tokens"], ceiling, "{t}");
    }
    let rows = run_files::csv(dir, "sessions.csv");
    assert_eq!(
        rows.iter().filter(|r| r["of"] == "sub_agent").count() as u32,
        SUB_TURNS
    );
}
