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

/// `servetop run --sessions 2,3` of the plan above against the simulator at `url`, with
/// `extra` flags.
fn run(url: &str, dir: &Path, extra: &[&str]) {
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
        .args(extra)
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
    ran_with(sim_args, name, &[])
}

/// [`ran`] with `extra` flags for servetop.
fn ran_with(
    sim_args: &[&str],
    name: &str,
    extra: &[&str],
) -> (PathBuf, SimTruth, Vec<RequestRecord>) {
    let (child, url) = sim_child::spawn(sim_args, &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = scratch(name);
    run(&url, &dir, extra);
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

/// A level's per-session times against the simulator's clock. Tool time is the plan's: every
/// session waited `WAIT` before each turn after its first. Server time (Σ its turns' E2E) and
/// duration (first send to last token) are the client's view of what the simulator records as
/// each turn's read to last write, and the first turn's read to the last turn's last write: a
/// turn's client E2E exceeds the simulator's by its read lag and its last token's delivery,
/// −2 to `READ_TOL_MS` + `TOL_MS` ms (the bounds every request is held to), so the means over
/// the sessions are too (a session's server time three times that).
fn per_session_times(
    l: &serde_json::Value,
    level: u32,
    all: &HashMap<(u32, u32), (&RequestRecord, &SimRequestTrace)>,
) {
    let sim = |session: u32, turn: u64| all[&(level * 1000 + session, turn as u32)].1;
    let (mut server_ms, mut duration_ms) = (0.0, 0.0);
    for session in 0..SESSIONS as u32 {
        for turn in 1..=TURNS {
            let s = sim(session, turn);
            server_ms += (s.last_write_unix_us().unwrap() - s.received_unix_us) as f64 / 1e3;
        }
        let (first, last) = (sim(session, 1), sim(session, TURNS));
        duration_ms += (last.last_write_unix_us().unwrap() - first.received_unix_us) as f64 / 1e3;
    }
    let n = SESSIONS as f64;
    let per_turn = sim_truth::READ_TOL_MS + sim_truth::TOL_MS;
    for (key, sim_ms, turns) in [
        ("mean_session_server_s", server_ms / n, TURNS as f64),
        ("mean_session_s", duration_ms / n, 1.0),
    ] {
        let got_ms = l[key].as_f64().unwrap() * 1e3;
        let d = got_ms - sim_ms;
        assert!(
            (-2.0 * turns..=per_turn * turns).contains(&d),
            "level {level} {key}: {got_ms:.1} ms against the simulator's {sim_ms:.1} ms"
        );
    }
    run_files::close(
        "mean_session_tool_s",
        l["mean_session_tool_s"].as_f64().unwrap(),
        WAIT * (TURNS - 1) as f64,
        1e-9,
        1e-9,
    );
    let minutes = l["duration_s"].as_f64().unwrap() / 60.0;
    run_files::close(
        "sessions_per_minute",
        l["sessions_per_minute"].as_f64().unwrap(),
        SESSIONS as f64 / minutes,
        1e-9,
        1e-9,
    );
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

/// `ttft_by_wait`: every turn after the first waited `WAIT`, so one bin holds them all, its TTFT
/// p50 the nearest-rank median of theirs, within the bounds of the simulator's own (each
/// client TTFT is the simulator's read to first write, plus −2 to `READ_TOL_MS` + `TOL_MS` ms,
/// and so is their median).
fn ttft_after_the_waits(
    l: &serde_json::Value,
    level: u32,
    all: &HashMap<(u32, u32), (&RequestRecord, &SimRequestTrace)>,
) {
    let bins = l["ttft_by_wait"].as_array().unwrap();
    assert_eq!(bins.len(), 1, "{bins:?}");
    let b = &bins[0];
    assert_eq!(b["turns"], SESSIONS * (TURNS - 1));
    assert_eq!(
        (b["up_to_ms"].as_f64(), b["median_wait_ms"].as_f64()),
        (Some(WAIT * 1e3), Some(WAIT * 1e3))
    );
    let sim: Vec<f64> = all
        .iter()
        .filter(|(k, _)| k.0 / 1000 == level && k.1 > 1)
        .map(|(_, (_, s))| sim_truth::server_ttft_ms(s).unwrap())
        .collect();
    let sim_ms = sim_truth::nearest_rank(&sim, 50.0);
    let got_ms = b["median_ttft_ms"].as_f64().unwrap();
    let d = got_ms - sim_ms;
    assert!(
        (-2.0..=sim_truth::READ_TOL_MS + sim_truth::TOL_MS).contains(&d),
        "level {level}: TTFT p50 after the waits {got_ms:.1} ms against the simulator's {sim_ms:.1} ms"
    );
}

/// `session_list.csv`: a row per session, each held to the simulator's record of its turns: its
/// tokens and cache exactly, its server time and duration within the bounds of
/// [`per_session_times`], its tool time the plan's.
fn each_session_is_the_simulators(
    dir: &Path,
    all: &HashMap<(u32, u32), (&RequestRecord, &SimRequestTrace)>,
) {
    let rows = run_files::csv(dir, "session_list.csv");
    assert_eq!(rows.len() as u64, 2 * SESSIONS, "a row per session");
    let per_turn = sim_truth::READ_TOL_MS + sim_truth::TOL_MS;
    for row in &rows {
        let level: u32 = row["level"].parse().unwrap();
        let session: u32 = row["session"].parse().unwrap();
        let sim = |turn: u64| all[&(level * 1000 + session, turn as u32)].1;
        let (mut input, mut output, mut cached, mut ceiling, mut server_ms) = (0, 0, 0, 0, 0.0);
        for turn in 1..=TURNS {
            let s = sim(turn);
            input += s.prompt_tokens;
            output += s.tokens();
            cached += s.cached_tokens.unwrap();
            ceiling += s.finished_prefix_tokens.unwrap();
            server_ms += (s.last_write_unix_us().unwrap() - s.received_unix_us) as f64 / 1e3;
        }
        let duration_ms =
            (sim(TURNS).last_write_unix_us().unwrap() - sim(1).received_unix_us) as f64 / 1e3;
        let at = format!("level {level} session {session}");
        assert_eq!(
            (row["outcome"].as_str(), row["turns"].as_str()),
            ("completed", TURNS.to_string().as_str()),
            "{at}"
        );
        for (key, want) in [
            ("input_tokens", input),
            ("output_tokens", output),
            ("cached_tokens", cached),
            ("cache_ceiling_tokens", ceiling),
        ] {
            assert_eq!(row[key], want.to_string(), "{at}: {key}");
        }
        for (key, sim_ms, turns) in [
            ("server_s", server_ms, TURNS as f64),
            ("duration_s", duration_ms, 1.0),
        ] {
            let got_ms = run_files::cell_f64(row, key) * 1e3;
            let d = got_ms - sim_ms;
            assert!(
                (-2.0 * turns..=per_turn * turns).contains(&d),
                "{at} {key}: {got_ms:.1} ms against the simulator's {sim_ms:.1} ms"
            );
        }
        run_files::close(
            "tool_s",
            run_files::cell_f64(row, "tool_s"),
            WAIT * (TURNS - 1) as f64,
            1e-9,
            1e-9,
        );
    }
}

#[test]
fn every_turn_is_held_to_the_simulators_record() {
    held_to_the_record("large", &[]);
}

/// The same sessions through the Anthropic Messages API (`/v1/messages`, which the simulator
/// serves as vLLM does, through its chat endpoint): the shared prefix goes as the `system`
/// prompt, and every ceiling, cached count and tool wait is the same as over chat.
#[test]
fn every_turn_over_the_messages_api_is_held_to_the_simulators_record() {
    held_to_the_record("messages", &["--backend", "anthropic"]);
}

/// Every turn of the plan, run with `extra` flags, against the simulator's record.
fn held_to_the_record(name: &str, extra: &[&str]) {
    let (dir, truth, recs) = ran_with(&[], name, extra);
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
        per_session_times(l, level, &all);
        ttft_after_the_waits(l, level, &all);
        let by_turn = l["ttft_by_turn_ms"].as_array().unwrap();
        assert_eq!(by_turn.len() as u64, TURNS);
        assert!(
            by_turn.iter().all(serde_json::Value::is_number),
            "{by_turn:?}"
        );
    }

    // A sentence a level on how long sessions took, its values the level's.
    let timed: Vec<&serde_json::Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "sessions_time")
        .collect();
    assert_eq!(timed.len(), 2, "{timed:?}");
    for (f, l) in timed.iter().zip(levels) {
        for key in [
            "mean_session_s",
            "mean_session_server_s",
            "mean_session_tool_s",
        ] {
            assert_eq!(f["values"][key], l[key], "{key}");
        }
    }
    csv_sums_each_turn(&dir, &all);
    each_session_is_the_simulators(&dir, &all);
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

/// `--think-time`: each user waits its think time after a session before its next one, and not
/// before its first, by the simulator's clock: per user (servetop's slot), the next session's
/// first turn reaches the simulator at least the think time after the simulator wrote the last
/// token of that user's session before; the first sessions start with the level.
#[test]
fn a_user_thinks_between_its_sessions() {
    const THINK: f64 = 0.3;
    let (child, url) = sim_child::spawn(&[], &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = scratch("think");
    run_files::succeed(
        Command::new(bin())
            .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
            .args(["--concurrency", "none", "--long-context", "none"])
            .args(["--sessions", "2", "--sessions-per-level", "6"])
            .args(["--turns", "2", "--tool-wait", "0.05"])
            .args(["--think-time", &THINK.to_string()])
            .args(["--input-len", "200", "--output-len", "8"])
            .arg("--out")
            .arg(&dir),
    );
    let truth = sim_truth::fetch(&url);
    let ids = sim_truth::by_id(&truth);
    let recs: Vec<RequestRecord> = request_records(&dir)
        .into_iter()
        .filter(|r| !r.warmup)
        .collect();
    assert_eq!(recs.len(), 12, "every turn ran");
    // Per user, its turns in the order the simulator read them.
    let mut by_user: HashMap<u32, Vec<(&RequestRecord, &SimRequestTrace)>> = HashMap::new();
    for r in &recs {
        let s = ids[sim_truth::id_of(r).as_str()];
        by_user.entry(r.slot.unwrap()).or_default().push((r, s));
    }
    assert_eq!(by_user.len(), 2);
    let mut thinks = 0;
    let start = recs
        .iter()
        .map(|r| ids[sim_truth::id_of(r).as_str()].received_unix_us)
        .min()
        .unwrap();
    for (user, mut turns) in by_user {
        turns.sort_by_key(|(_, s)| s.received_unix_us);
        assert!(
            turns[0].1.received_unix_us - start < 200_000,
            "user {user}: its first session waited"
        );
        for w in turns.windows(2) {
            let ((_, before), (r, s)) = (w[0], w[1]);
            let gap_s = (s.received_unix_us - before.last_write_unix_us().unwrap()) as f64 / 1e6;
            if r.turn == Some(1) {
                thinks += 1;
                assert!(gap_s >= THINK, "user {user}: thought {gap_s:.3} s");
            }
        }
    }
    assert_eq!(
        thinks, 4,
        "six sessions of two users: four came after another"
    );
    let v = results(&dir);
    assert_eq!(v["sessions"][0]["think_time"]["s"], THINK);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--session-rate`: sessions start on the level's seeded schedule whatever the earlier ones are
/// doing. Each session's first turn goes out at its due time (the schedule, drawn here from the
/// run's seed by the library's generator) or just after; the sessions, each held over half a
/// second by its tool wait, overlap as an open loop's do (by the simulator's record: from a
/// session's first turn read to its last token written); and each level runs its sessions
/// whole.
#[test]
fn sessions_start_at_their_rate_whatever_the_others_do() {
    const RATE: f64 = 10.0;
    let (child, url) = sim_child::spawn(&[], &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = scratch("rate");
    run_files::succeed(
        Command::new(bin())
            .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
            .args(["--concurrency", "none", "--long-context", "none"])
            .args(["--session-rate", &RATE.to_string()])
            .args(["--sessions-per-level", "16", "--turns", "2"])
            .args([
                "--tool-wait",
                "0.5",
                "--input-len",
                "200",
                "--output-len",
                "8",
            ])
            .args(["--seed", "7"])
            .arg("--out")
            .arg(&dir),
    );
    let truth = sim_truth::fetch(&url);
    let ids = sim_truth::by_id(&truth);
    let recs: Vec<RequestRecord> = request_records(&dir)
        .into_iter()
        .filter(|r| !r.warmup)
        .collect();
    assert_eq!(recs.len(), 32, "16 sessions of 2 turns");
    let v = results(&dir);
    let level = &v["sessions"][0];
    assert_eq!(level["sessions_completed"], 16);
    let index = level["index"].as_u64().unwrap() as u32;
    let arrival: servetop::workload::Arrival =
        serde_json::from_value(level["arrival"].clone()).unwrap();
    let mut due = servetop::workload::Schedule::new(
        &arrival,
        servetop::workload::Schedule::level_seed(7, index),
    );
    let mut firsts: Vec<&RequestRecord> = recs.iter().filter(|r| r.turn == Some(1)).collect();
    firsts.sort_by_key(|r| r.index);
    let mut late_ms = Vec::new();
    for r in &firsts {
        let at_ms = due.next().unwrap() * 1e3;
        let sent_ms = r.send_at_us as f64 / 1e3;
        assert!(
            sent_ms >= at_ms - 1.0,
            "session {} sent at {sent_ms:.1} ms, due at {at_ms:.1}",
            r.index / 2
        );
        late_ms.push(sent_ms - at_ms);
    }
    let mean_late = late_ms.iter().sum::<f64>() / late_ms.len() as f64;
    assert!(
        mean_late < 20.0,
        "first turns {mean_late:.1} ms late on average"
    );
    // Sessions running at once, by the simulator's clock.
    let mut spans: HashMap<u32, (u64, u64)> = HashMap::new();
    for r in &recs {
        let s = ids[sim_truth::id_of(r).as_str()];
        let e = spans.entry(r.index / 2).or_insert((u64::MAX, 0));
        e.0 = e.0.min(s.received_unix_us);
        e.1 = e.1.max(s.last_write_unix_us().unwrap());
    }
    let most = spans
        .values()
        .map(|&(from, _)| {
            spans
                .values()
                .filter(|&&(a, b)| a <= from && from < b)
                .count()
        })
        .max()
        .unwrap();
    assert!(
        most >= 3,
        "at most {most} sessions ran at once: not an open loop"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A session whose context will outgrow the server's is said before its level runs, with the
/// session flags that shorten it: 300 + 3 × (20 + 100 + 8) + 20 = 704 tokens by the last of
/// four turns, against a 700-token context.
#[test]
fn a_session_that_will_outgrow_the_context_is_said_with_its_flags() {
    let (child, url) = sim_child::spawn(&["--context-length", "700"], &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = scratch("outgrow");
    let out = Command::new(bin())
        .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
        .args(["--concurrency", "none", "--long-context", "none"])
        .args([
            "--sessions",
            "1",
            "--sessions-per-level",
            "1",
            "--turns",
            "4",
        ])
        .args(["--tool-wait", "0", "--tool-result-len", "100"])
        .args(["--input-len", "300", "--output-len", "20"])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "the run ended");
    let v = results(&dir);
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("will reach about 704 tokens")
                && w.contains("fewer turns (--turns), shorter tool results (--tool-result-len)")),
        "{warnings:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
