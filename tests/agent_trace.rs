//! An agent trace replayed (`--trace` of AIPerf's multi-turn Mooncake lines: `session_id`, a
//! first turn's `timestamp`, later turns' `delay` after the turn before ended), held to the
//! simulator's record and to the file as this test reads it.
//!
//! The answers:
//! - every turn of every session ran, in order, each asking for its recorded output and
//!   appending its recorded input to the session's context (the simulator's prompt grows by the
//!   answer, the template's tokens and the new message);
//! - the sessions started at their recorded times: each first turn reached the simulator its
//!   recorded offset after the first session's, within [`START_SLACK_MS`];
//! - each later turn reached the simulator at least its recorded delay after the simulator
//!   wrote the turn before's last token, and at most [`WAIT_SLACK_MS`] more;
//! - the sessions' first turns share the block their `hash_ids` share: each after the first
//!   finds that block (512 tokens) in the simulator's cache.
//!
//! A machine that stops every process for tens of ms (a virtual machine's host) makes starts
//! and waits late whatever servetop does: an idle timer probe runs beside each replay, and a
//! replay during which it woke [`MACHINE_STALL_US`] late is made again (the slacks stay as
//! they are), up to three times, then the test says the machine stalled.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use servetop::metrics::RequestRecord;
use servetop::sim::SimRequestTrace;

mod idle_probe;
mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, request_records, results};

/// How far a session's start may lag its recorded offset, relative to the first session's.
const START_SLACK_MS: f64 = 100.0;
/// How far a later turn may lag its recorded delay.
const WAIT_SLACK_MS: f64 = 100.0;

/// A turn as the file records it.
#[derive(Clone, Debug)]
struct Turn {
    start_ms: f64,
    delay_ms: f64,
    input: u64,
    output: u64,
}

/// The fixture's sessions, in the order they start, each one's turns in order.
fn sessions(path: &Path) -> Vec<Vec<Turn>> {
    let mut order: Vec<String> = Vec::new();
    let mut by: HashMap<String, Vec<Turn>> = HashMap::new();
    for l in std::fs::read_to_string(path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let id = v["session_id"].as_str().unwrap().to_string();
        if !by.contains_key(&id) {
            order.push(id.clone());
        }
        let turns = by.entry(id).or_default();
        let start = turns
            .first()
            .map_or_else(|| v["timestamp"].as_f64().unwrap(), |t| t.start_ms);
        turns.push(Turn {
            start_ms: start,
            delay_ms: v["delay"].as_f64().unwrap_or(0.0),
            input: v["input_length"].as_u64().unwrap(),
            output: v["output_length"].as_u64().unwrap(),
        });
    }
    let mut out: Vec<Vec<Turn>> = order.into_iter().map(|k| by.remove(&k).unwrap()).collect();
    out.sort_by(|a, b| a[0].start_ms.total_cmp(&b[0].start_ms));
    out
}

#[test]
fn an_agent_trace_replays_its_sessions_starts_and_waits() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent-trace.jsonl");
    let want = sessions(&fixture);
    let dir = std::env::temp_dir().join(format!("servetop-agent-trace-{}", std::process::id()));
    let Some((_child, url, out)) = replay_unstalled(&fixture, &dir) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("5 sessions"),
        "the plan names the sessions: {stdout}"
    );
    let truth = sim_truth::fetch(&url);
    let recs = measured(&dir);
    let total: usize = want.iter().map(Vec::len).sum();
    assert_eq!(recs.len(), total, "every turn ran");
    // Request i is the i-th turn of the sessions in order.
    let mut flat = in_order(&recs, &truth).into_iter();
    let at: Vec<Vec<(&RequestRecord, &SimRequestTrace)>> = want
        .iter()
        .map(|turns| flat.by_ref().take(turns.len()).collect())
        .collect();

    let first_arrival = at[0][0].1.received_unix_us;
    for (s, turns) in want.iter().enumerate() {
        for (t, turn) in turns.iter().enumerate() {
            let (r, sim) = at[s][t];
            assert_eq!(r.turn, Some(t as u32 + 1), "session {s} turn {t}");
            assert!(r.is_ok(), "session {s} turn {t}: {:?}", r.outcome);
            assert_eq!(
                sim.max_tokens, turn.output,
                "session {s} turn {t}: its output"
            );
            assert_eq!(r.cache_ceiling_tokens, sim.finished_prefix_tokens);
            if t == 0 {
                let lag = (sim.received_unix_us - first_arrival) as f64 / 1e3
                    - (turn.start_ms - want[0][0].start_ms);
                assert!(
                    (-5.0..=START_SLACK_MS).contains(&lag),
                    "session {s} started {lag:.1} ms off its recorded time"
                );
                if s > 0 {
                    assert!(
                        sim.cached_tokens.unwrap() >= 512,
                        "session {s}: the shared block was not found ({:?} cached)",
                        sim.cached_tokens
                    );
                }
                continue;
            }
            let before = at[s][t - 1].1;
            // The context grows by the answer, the template's 4 + 4 and the new message.
            assert_eq!(
                sim.prompt_tokens,
                before.prompt_tokens + 4 + before.tokens() + 4 + turn.input,
                "session {s} turn {t}: the prompt"
            );
            let waited = (sim.received_unix_us - before.last_write_unix_us().unwrap()) as f64 / 1e3;
            assert!(
                waited >= turn.delay_ms && waited <= turn.delay_ms + WAIT_SLACK_MS,
                "session {s} turn {t}: sent {waited:.1} ms after the turn before, recorded {} ms",
                turn.delay_ms
            );
            assert_eq!(r.tool_wait_ms, Some(turn.delay_ms));
        }
    }
    let v = results(&dir);
    let level = &v["sessions"][0];
    assert_eq!(level["sessions_completed"], want.len());
    assert_eq!(level["trace"]["sessions"], want.len());
    let _ = std::fs::remove_dir_all(&dir);
}

/// An idle runtime's timer beside the run woke this late or later: the machine stopped every
/// process for a good part of the slacks, and a start or a wait may be late by it whatever
/// servetop does.
const MACHINE_STALL_US: u64 = 50_000;
/// Replays of a trace before the test says the machine stalled each.
const TRIES: u32 = 3;

/// [`replay`] on a fresh simulator, with an idle timer probe beside it (`tests/idle_probe`): the
/// simulator child, its URL and the run's output of the first replay the machine did not
/// stall; none, saying so, when it stalled each of [`TRIES`]. The checks keep their slacks.
fn replay_unstalled(
    fixture: &Path,
    dir: &Path,
) -> Option<(sim_child::KillOnDrop, String, std::process::Output)> {
    for attempt in 1..=TRIES {
        let (child, url) = sim_child::spawn(&[], &[]);
        let child = sim_child::KillOnDrop(child);
        let probe = idle_probe::start();
        let out = replay(&url, fixture, dir);
        let worst = probe.stop().into_iter().max().unwrap_or(0);
        if worst < MACHINE_STALL_US {
            return Some((child, url, out));
        }
        eprintln!(
            "run {attempt} of {TRIES}: an idle timer beside the replay woke {:.1} ms late: the machine stalled",
            worst as f64 / 1e3
        );
    }
    eprintln!("SKIPPED: the machine stalled each of {TRIES} replays");
    None
}

/// `servetop run --trace fixture` against the simulator at `url`, into `dir`.
fn replay(url: &str, fixture: &Path, dir: &Path) -> std::process::Output {
    let _ = std::fs::remove_dir_all(dir);
    run_files::succeed(
        Command::new(bin())
            .args(["run", "--base-url", url, "--headless", "--no-gpu"])
            .args(["--concurrency", "none", "--long-context", "none"])
            .arg("--trace")
            .arg(fixture)
            .arg("--out")
            .arg(dir),
    )
}

/// The run's measured records (no warmups).
fn measured(dir: &Path) -> Vec<RequestRecord> {
    request_records(dir)
        .into_iter()
        .filter(|r| !r.warmup)
        .collect()
}

/// `recs` by their index (request k is the trace's k-th row), each with the simulator's record
/// of it.
fn in_order<'a>(
    recs: &'a [RequestRecord],
    truth: &'a servetop::sim::SimTruth,
) -> Vec<(&'a RequestRecord, &'a SimRequestTrace)> {
    let ids = sim_truth::by_id(truth);
    let mut at: Vec<(&RequestRecord, &SimRequestTrace)> = recs
        .iter()
        .map(|r| (r, ids[sim_truth::id_of(r).as_str()]))
        .collect();
    at.sort_by_key(|(r, _)| r.index);
    assert!(
        at.iter().zip(0u32..).all(|((r, _), k)| r.index == k),
        "request indices are 0 to {} without a gap",
        at.len()
    );
    at
}

/// A line of the sub-agents fixture as this test reads it: its own session, its parent's where
/// it is a sub-agent, its delay, its output, and its turn in its own session (from 0).
#[derive(Clone, Debug)]
struct Line {
    session: String,
    parent: Option<String>,
    delay_ms: f64,
    output: u64,
    turn: usize,
}

/// The fixture's lines in the order servetop sends them: each top-level session's lines (its
/// sub-agents' with them) together in file order, the sessions by their start.
fn lines_in_order(path: &Path) -> Vec<Line> {
    let mut groups: Vec<(f64, String, Vec<Line>)> = Vec::new();
    let mut parent_of: HashMap<String, String> = HashMap::new();
    let mut turns: HashMap<String, usize> = HashMap::new();
    for l in std::fs::read_to_string(path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let session = v["session_id"].as_str().unwrap().to_string();
        if let Some(p) = v["parent_session_id"].as_str() {
            parent_of.insert(session.clone(), p.to_string());
        }
        let parent = parent_of.get(&session).cloned();
        let top = parent.clone().unwrap_or_else(|| session.clone());
        let n = turns.entry(session.clone()).or_insert(0);
        let line = Line {
            session,
            parent,
            delay_ms: v["delay"].as_f64().unwrap_or(0.0),
            output: v["output_length"].as_u64().unwrap(),
            turn: *n,
        };
        *n += 1;
        match groups.iter_mut().find(|g| g.1 == top) {
            Some(g) => g.2.push(line),
            None => groups.push((v["timestamp"].as_f64().unwrap(), top, vec![line])),
        }
    }
    groups.sort_by(|a, b| a.0.total_cmp(&b.0));
    groups.into_iter().flat_map(|g| g.2).collect()
}

/// Sub-agents in an agent trace (servetop's `parent_session_id`), held to the simulator's
/// record:
/// - a sub-agent's first turn reached the simulator at least its recorded delay after the
///   simulator wrote the last token of its parent's turn before its first line, and at most
///   [`WAIT_SLACK_MS`] more; its later turns, as any later turn, after its own turn before;
/// - the parent's turn after a sub-agent's first line reached the simulator at least its
///   recorded delay after the last token of the slowest of the sub-agents started before it
///   (the join), and at most [`WAIT_SLACK_MS`] more;
/// - each record names its sub-agent, and results.json counts the sessions (not the
///   sub-agents) and each session's sub-agents' turns.
#[test]
fn sub_agents_start_after_their_turn_and_their_parent_waits_for_the_slowest() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agent-trace-sub-agents.jsonl");
    let want = lines_in_order(&fixture);
    let dir =
        std::env::temp_dir().join(format!("servetop-agent-trace-subs-{}", std::process::id()));
    let Some((_child, url, _)) = replay_unstalled(&fixture, &dir) else {
        return;
    };
    let truth = sim_truth::fetch(&url);
    let recs = measured(&dir);
    assert_eq!(recs.len(), want.len(), "every line ran");
    // Line k of the order is request k: its record and the simulator's.
    let at = in_order(&recs, &truth);
    // The sessions started at their recorded times: lead-2's first turn 250 ms after lead-1's.
    let starts: Vec<usize> = (0..want.len())
        .filter(|&k| want[k].turn == 0 && want[k].parent.is_none())
        .collect();
    assert_eq!(starts.len(), 2);
    let lag =
        (at[starts[1]].1.received_unix_us - at[starts[0]].1.received_unix_us) as f64 / 1e3 - 250.0;
    assert!(
        (-5.0..=START_SLACK_MS).contains(&lag),
        "lead-2 started {lag:.1} ms off its recorded time"
    );
    let last_write = |k: usize| at[k].1.last_write_unix_us().unwrap();
    let waited = |k: usize, after_us: u64| (at[k].1.received_unix_us - after_us) as f64 / 1e3;
    let mut checked = (0, 0);
    for (k, line) in want.iter().enumerate() {
        let (r, sim) = at[k];
        assert!(r.is_ok(), "line {k}: {:?}", r.outcome);
        assert_eq!(sim.max_tokens, line.output, "line {k}: its output");
        assert_eq!(r.turn, Some(line.turn as u32 + 1), "line {k}");
        // Lines of its own session before it, and of its parent (or its sub-agents').
        let own_before = (0..k).rev().find(|&j| want[j].session == line.session);
        let top = line.parent.as_ref().unwrap_or(&line.session);
        let group_start = (0..=k)
            .rev()
            .take_while(|&j| want[j].parent.as_ref().unwrap_or(&want[j].session) == top)
            .last()
            .unwrap();
        let after_us = match (&line.parent, own_before) {
            (Some(p), None) => {
                // A sub-agent's first turn: after its parent's turn before its line.
                let parent_turn = (group_start..k).rev().find(|&j| &want[j].session == p);
                checked.0 += 1;
                last_write(parent_turn.unwrap())
            }
            (_, Some(j)) if line.parent.is_none() => {
                // A parent's later turn: after its turn before and every sub-agent whose first
                // line came before this one, whichever ended last.
                let subs = (group_start..k).filter(|&i| want[i].parent.is_some());
                let slowest = subs.map(last_write).max();
                if slowest.is_some_and(|s| s > last_write(j)) {
                    checked.1 += 1;
                }
                slowest.map_or(last_write(j), |s| s.max(last_write(j)))
            }
            (_, Some(j)) => last_write(j),
            (None, None) => continue,
        };
        let w = waited(k, after_us);
        assert!(
            w >= line.delay_ms && w <= line.delay_ms + WAIT_SLACK_MS,
            "line {k} ({} turn {}): sent {w:.1} ms after what it waits for, recorded {} ms",
            line.session,
            line.turn,
            line.delay_ms
        );
        let sub = line.parent.as_ref().map(|_| ());
        assert_eq!(r.sub_agent.is_some(), sub.is_some(), "line {k}");
    }
    assert_eq!(checked.0, 4, "every sub-agent's start was checked");
    assert!(
        checked.1 >= 2,
        "a parent turn waited on a sub-agent that ended after its own turn, at least twice: {checked:?}"
    );
    counts_sessions_and_their_sub_agents(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The sub-agents fixture's run in results.json: two sessions (not six), four sub-agents of
/// five turns, lead-1's four of them and lead-2's one.
fn counts_sessions_and_their_sub_agents(dir: &Path) {
    let v = results(dir);
    let level = &v["sessions"][0];
    assert_eq!(level["sessions_completed"], 2, "{level}");
    let t = &level["trace"];
    assert_eq!(
        (&t["sessions"], &t["sub_agents"], &t["sub_agent_turns"]),
        (&2.into(), &4.into(), &5.into())
    );
    let subs: Vec<u64> = level["session_list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sub_agent_turns"].as_u64().unwrap())
        .collect();
    assert_eq!(subs, [4, 1], "each session's sub-agents' turns");
}
