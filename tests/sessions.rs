//! Agent sessions (`--sessions`) against servetop's simulator, run as a user runs them (the
//! binary, a simulator child), each turn held to the simulator's own record of it.
//!
//! The answers, from the simulator's rules and record (not servetop's arithmetic):
//! - Its chat prompt counts 3 tokens for the conversation and 4 to open each message; an answer
//!   is re-sent as an assistant message. So turn k + 1 of a session resends turn k's prompt, the
//!   4 tokens opening the answer and the answer's tokens, then the tool result's message: its
//!   ceiling (what the server had finished of it) is turn k's prompt + 4 + turn k's output, as
//!   the simulator recorded them. A first turn's ceiling is the shared system message and the
//!   opening of the user message after it, 3 + 4 + `PREFIX` + 4: the primer chat, sent before
//!   the level, opened the same way, and its message begins with a digit no task begins with.
//! - Its prefix cache serves whole 16-token blocks only, and never the whole prompt: a turn's
//!   cached tokens are at most its ceiling rounded down to a block. With a cache large enough
//!   for every session, exactly that; with one too small for the sessions waiting on their
//!   tools, less.
//! - The simulator also records, per request, the longest prefix of its prompt it had finished
//!   when the request arrived and what its cache served (`finished_prefix_tokens`,
//!   `cached_tokens`, kept apart from the cache's capacity): each turn's ceiling and cached
//!   tokens equal them.
//! - A turn after the first is sent once its tool wait is over: the simulator reads it at least
//!   `WAIT` after it wrote the previous turn's last token.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use servetop::metrics::RequestRecord;
use servetop::sim::{SimRequestTrace, SimTruth};

mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, request_records, results};

const PREFIX: u64 = 120;
const INPUT: u64 = 300;
const OUTPUT: u64 = 20;
const TOOL: u64 = 40;
const TURNS: u64 = 3;
const SESSIONS: u64 = 6;
/// The fixed tool wait, in seconds.
const WAIT: f64 = 0.1;
/// The simulator's cache blocks.
const BLOCK: u64 = 16;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-sessions-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `servetop run --sessions 2,3` of the plan above against the simulator at `url`.
fn run(url: &str, dir: &Path) {
    let out = Command::new(bin())
        .args(["run", "--base-url", url, "--headless", "--no-gpu"])
        .args(["--concurrency", "none", "--long-context", "none"])
        .args([
            "--sessions",
            "2,3",
            "--sessions-per-level",
            &SESSIONS.to_string(),
        ])
        .args([
            "--turns",
            &TURNS.to_string(),
            "--tool-wait",
            &WAIT.to_string(),
        ])
        .args(["--tool-result-len", &TOOL.to_string()])
        .args(["--input-len", &INPUT.to_string()])
        .args(["--shared-prefix-len", &PREFIX.to_string()])
        .args(["--output-len", &OUTPUT.to_string()])
        .arg("--out")
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The plan run against a simulator started with `sim_args`: the run directory, the
/// simulator's record and servetop's records.
fn ran(sim_args: &[&str], name: &str) -> (PathBuf, SimTruth, Vec<RequestRecord>) {
    let (child, url) = sim_child::spawn(sim_args, &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = scratch(name);
    run(&url, &dir);
    let truth = sim_truth::fetch(&url);
    let recs = request_records(&dir);
    (dir, truth, recs)
}

/// Each measured record with the simulator's record of it, by session and turn (from 1).
fn turns<'a>(
    recs: &'a [RequestRecord],
    ids: &HashMap<&str, &'a SimRequestTrace>,
) -> HashMap<(u32, u32), (&'a RequestRecord, &'a SimRequestTrace)> {
    recs.iter()
        .filter(|r| !r.warmup)
        .map(|r| {
            let id = sim_truth::id_of(r);
            let s = ids
                .get(id.as_str())
                .unwrap_or_else(|| panic!("{id} not in the simulator's record"));
            let session = r.index / TURNS as u32;
            ((r.level * 1000 + session, r.turn.unwrap()), (r, *s))
        })
        .collect()
}

/// The ceiling of each turn by the simulator's rules and record.
fn ceiling_by_hand(
    all: &HashMap<(u32, u32), (&RequestRecord, &SimRequestTrace)>,
    key: (u32, u32),
) -> u64 {
    if key.1 == 1 {
        return 3 + 4 + PREFIX + 4;
    }
    let (_, before) = all[&(key.0, key.1 - 1)];
    before.prompt_tokens + 4 + before.tokens()
}

/// sessions.csv: a row per level and turn, its sums those of the turn's own records.
fn csv_sums_each_turn(dir: &Path, all: &HashMap<(u32, u32), (&RequestRecord, &SimRequestTrace)>) {
    let rows = run_files::csv(dir, "sessions.csv");
    assert_eq!(rows.len() as u64, 2 * TURNS);
    for row in &rows {
        let level: u32 = row["level"].parse().unwrap();
        let turn: u32 = row["turn"].parse().unwrap();
        let mine: Vec<&RequestRecord> = all
            .iter()
            .filter(|(k, _)| k.0 / 1000 == level && k.1 == turn)
            .map(|(_, (r, _))| *r)
            .collect();
        assert_eq!(mine.len() as u64, SESSIONS, "{row:?}");
        let sum = |f: &dyn Fn(&RequestRecord) -> u64| mine.iter().map(|r| f(r)).sum::<u64>();
        assert_eq!(row["completed"], SESSIONS.to_string(), "{row:?}");
        assert_eq!(
            row["cached_tokens"],
            sum(&|r| r.cached_tokens.unwrap()).to_string()
        );
        assert_eq!(
            row["cache_ceiling_tokens"],
            sum(&|r| r.cache_ceiling_tokens.unwrap()).to_string()
        );
        let mean_input = sum(&|r| r.input_tokens) as f64 / SESSIONS as f64;
        run_files::close(
            "mean input tokens",
            run_files::cell_f64(row, "mean_input_tokens"),
            mean_input,
            1e-9,
            1e-9,
        );
    }
}

#[test]
fn every_turn_is_held_to_the_simulators_record() {
    let (dir, truth, recs) = ran(&[], "large");
    let ids = sim_truth::by_id(&truth);
    let all = turns(&recs, &ids);
    assert_eq!(
        all.len() as u64,
        2 * SESSIONS * TURNS,
        "every turn of every session ran"
    );

    // The primer: two warmup chats after the warmup request, the second one message longer: a
    // digit and 16 tokens of words, opened by 4 tokens.
    let primers: Vec<&RequestRecord> = recs.iter().filter(|r| r.warmup && r.index >= 1).collect();
    assert_eq!(primers.len(), 2, "two primer chats");
    assert_eq!(
        primers[1].input_tokens - primers[0].input_tokens,
        4 + 1 + 16
    );

    for (&key, &(r, s)) in &all {
        let want = ceiling_by_hand(&all, key);
        assert_eq!(
            r.cache_ceiling_tokens,
            Some(want),
            "level {} session {} turn {}: ceiling",
            key.0 / 1000,
            key.0 % 1000,
            key.1
        );
        assert_eq!(r.cache_ceiling_tokens, s.finished_prefix_tokens, "{key:?}");
        assert_eq!(r.cached_tokens, s.cached_tokens, "{key:?}");
        // A cache that keeps everything serves the ceiling down to a block.
        assert_eq!(
            r.cached_tokens,
            Some((want / BLOCK * BLOCK).min(s.prompt_tokens - 1)),
            "{key:?}: cached"
        );
        // The tool wait held the turn back, by the simulator's clock.
        if key.1 > 1 {
            let (_, before) = all[&(key.0, key.1 - 1)];
            let gap_s = (s.received_unix_us - before.last_write_unix_us().unwrap()) as f64 / 1e6;
            assert!(
                gap_s >= WAIT,
                "{key:?}: sent {gap_s:.3} s after the last answer"
            );
            assert_eq!(r.tool_wait_ms, Some(WAIT * 1e3), "{key:?}");
        } else {
            assert_eq!(r.tool_wait_ms, None);
        }
    }

    // The levels: their sessions, and the sums of the same turns.
    let v = results(&dir);
    let levels = v["sessions"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for (l, users) in levels.iter().zip([2u64, 3]) {
        let level = l["index"].as_u64().unwrap() as u32;
        assert_eq!(l["concurrency"], users);
        assert_eq!(l["sessions_completed"], SESSIONS, "{l}");
        let mine: Vec<&(&RequestRecord, &SimRequestTrace)> = all
            .iter()
            .filter(|(k, _)| k.0 / 1000 == level)
            .map(|(_, v)| v)
            .collect();
        let sum = |f: &dyn Fn(&RequestRecord) -> u64| mine.iter().map(|(r, _)| f(r)).sum::<u64>();
        assert_eq!(
            l["cache_ceiling_tokens"],
            sum(&|r| r.cache_ceiling_tokens.unwrap())
        );
        assert_eq!(l["cached_tokens"], sum(&|r| r.cached_tokens.unwrap()));
        let by_turn = l["ttft_by_turn_ms"].as_array().unwrap();
        assert_eq!(by_turn.len() as u64, TURNS);
        assert!(
            by_turn.iter().all(serde_json::Value::is_number),
            "{by_turn:?}"
        );
    }

    csv_sums_each_turn(&dir, &all);
    let chart = std::fs::metadata(dir.join("charts/sessions.png")).unwrap();
    assert!(
        chart.len() > 10_000,
        "charts/sessions.png: {} bytes",
        chart.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cache_too_small_for_the_waiting_sessions_loses_what_they_had() {
    // Room for about one session's context: three users waiting on their tools evict each
    // other's, so later turns find less than their ceiling.
    let (dir, truth, recs) = ran(&["--kv-capacity-tokens", "600"], "small");
    let ids = sim_truth::by_id(&truth);
    let all = turns(&recs, &ids);
    let (mut lost, mut cached, mut ceiling) = (0, 0, 0);
    for (&key, &(r, s)) in &all {
        let want = ceiling_by_hand(&all, key);
        assert_eq!(
            r.cache_ceiling_tokens,
            Some(want),
            "{key:?}: the ceiling does not shrink"
        );
        assert_eq!(r.cache_ceiling_tokens, s.finished_prefix_tokens, "{key:?}");
        assert_eq!(r.cached_tokens, s.cached_tokens, "{key:?}");
        let c = r.cached_tokens.unwrap();
        assert!(
            c <= want / BLOCK * BLOCK,
            "{key:?}: cached {c} over its ceiling {want}"
        );
        lost += u64::from(c < want / BLOCK * BLOCK);
        cached += c;
        ceiling += want;
    }
    assert!(
        lost > 0,
        "no turn lost any of its ceiling: the cache held everything"
    );
    let v = results(&dir);
    let levels = v["sessions"].as_array().unwrap();
    let total = |k: &str| levels.iter().map(|l| l[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(total("cached_tokens"), cached);
    assert_eq!(total("cache_ceiling_tokens"), ceiling);
    assert!(cached < ceiling);
    // The finding says the same sums, level by level.
    for l in levels {
        let label = format!("3-turn sessions, C={}", l["concurrency"]);
        let f = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == "sessions_cache" && f["levels"][0] == label.as_str())
            .unwrap_or_else(|| panic!("no sessions_cache finding for {label}"));
        assert_eq!(
            f["values"]["cached_tokens"],
            l["cached_tokens"].as_f64().unwrap()
        );
        assert_eq!(
            f["values"]["cache_ceiling_tokens"],
            l["cache_ceiling_tokens"].as_f64().unwrap()
        );
        let text = f["text"].as_str().unwrap();
        assert!(
            text.contains(&format!(
                "served {} prompt tokens of the {}",
                l["cached_tokens"], l["cache_ceiling_tokens"]
            )),
            "{text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
