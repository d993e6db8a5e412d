//! The agent-session finding (`sessions_cache`) on random simulator shapes, each sentence held
//! to the simulator's own record: users, turns, tool-wait distributions, sub-agents and KV
//! pools from one that keeps everything to one a session barely fits, drawn from a fixed seed.
//!
//! The answers, from the simulator's record (not servetop's arithmetic):
//! - the level's cached tokens and ceiling are the sums of what the simulator's cache served
//!   each turn and of what it had finished of each turn's prompt;
//! - split at the median of the plan's tool waits, each side's kept share is the simulator's
//!   served tokens over its finished ones for those turns; with one fixed wait there is no
//!   split, and the finding says nothing of one; a side of fewer than 20 turns makes it thin;
//! - every turn that found less than its finished prefix (down to a 16-token block) lost it to
//!   an eviction the simulator recorded between the engine letting go of the turn before it (in
//!   its thread: the session's or the sub-agent's) and its own prefill.

// Integration tests may unwrap: a panic is the failure report. Token sums are whole numbers,
// exact as floats.
#![allow(clippy::unwrap_used, clippy::float_cmp)]

use std::collections::HashMap;
use std::process::Command;

use servetop::metrics::RequestRecord;
use servetop::sim::{SimRequestTrace, SimTruth};
use servetop::summary::RunSummary;

mod draw;
use draw::Draw;
mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, request_records};

const SHAPES: u64 = 8;
const BLOCK: u64 = 16;

#[derive(Debug)]
struct Shape {
    users: u32,
    turns: u32,
    sessions: u32,
    fan_out: u32,
    wait: &'static str,
    kv_tokens: u64,
    tool: u64,
}

impl Shape {
    fn draw(seed: u64) -> Self {
        let mut d = Draw(seed);
        let users = d.pick(&[2, 3, 4]);
        Self {
            users,
            turns: d.pick(&[3, 4, 6]),
            sessions: users * d.pick(&[2, 3]),
            fan_out: d.pick(&[0, 0, 2]),
            wait: if seed.is_multiple_of(4) {
                "0.05"
            } else {
                d.pick(&["exp:0.1", "lognormal:0.08,0.9", "lognormal:0.1,0.5"])
            },
            kv_tokens: d.pick(&[100_000, 2_000, 1_200, 900]),
            tool: d.pick(&[32, 64]),
        }
    }

    fn per_session(&self) -> u32 {
        self.turns + self.fan_out * 2
    }
}

/// Runs `shape` against a simulator of its own: servetop's summary and records, and the
/// simulator's record.
fn ran(shape: &Shape, seed: u64) -> (RunSummary, Vec<RequestRecord>, SimTruth) {
    let kv = shape.kv_tokens.to_string();
    let (child, url) = sim_child::spawn(&["--kv-capacity-tokens", &kv], &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = std::env::temp_dir().join(format!(
        "servetop-session-shapes-{seed}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    run_files::succeed(
        Command::new(bin())
            .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
            .args(["--concurrency", "none", "--long-context", "none"])
            .args(["--sessions", &shape.users.to_string()])
            .args(["--sessions-per-level", &shape.sessions.to_string()])
            .args([
                "--turns",
                &shape.turns.to_string(),
                "--tool-wait",
                shape.wait,
            ])
            .args([
                "--fan-out",
                &shape.fan_out.to_string(),
                "--sub-agent-turns",
                "2",
            ])
            .args(["--tool-result-len", &shape.tool.to_string()])
            .args(["--input-len", "260", "--shared-prefix-len", "100"])
            .args(["--output-len", "16", "--seed", &seed.to_string()])
            .arg("--out")
            .arg(&dir),
    );
    let truth = sim_truth::fetch(&url);
    let recs = request_records(&dir);
    let summary: RunSummary = serde_json::from_value(run_files::results(&dir)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (summary, recs, truth)
}

/// Σ (served, finished) of the simulator's record over `turns`.
fn sums(turns: &[(&RequestRecord, &SimRequestTrace)]) -> (u64, u64) {
    turns.iter().fold((0, 0), |(c, f), (_, s)| {
        (
            c + s.cached_tokens.unwrap(),
            f + s.finished_prefix_tokens.unwrap(),
        )
    })
}

/// Each loss was an eviction in its thread's wait, by the simulator's record.
fn losses_in_waits(seed: u64, shape: &Shape, turns: &[(&RequestRecord, &SimRequestTrace)]) {
    let by_key: HashMap<(u32, u32, u32), &SimRequestTrace> = turns
        .iter()
        .map(|(r, s)| {
            let key = (
                r.index / shape.per_session(),
                r.sub_agent.unwrap_or(0),
                r.turn.unwrap(),
            );
            (key, *s)
        })
        .collect();

    for (r, st) in turns {
        let reachable = st.finished_prefix_tokens.unwrap() / BLOCK * BLOCK;
        let cached = st.cached_tokens.unwrap();
        // A new message that begins as another finished one did can be served a block past
        // the ceiling (its first tokens complete a cached block): not a loss.
        if cached >= reachable || r.turn == Some(1) {
            continue;
        }
        let key = (
            r.index / shape.per_session(),
            r.sub_agent.unwrap_or(0),
            r.turn.unwrap() - 1,
        );
        let released = by_key[&key].released_unix_us.unwrap();
        let evicted = st.prefix_evicted_unix_us.unwrap_or_else(|| {
            panic!(
                "seed {seed} {key:?}: lost {} tokens, none evicted on record",
                reachable - cached
            )
        });
        assert!(
            (released..=st.admitted_unix_us.unwrap()).contains(&evicted),
            "seed {seed} {key:?}: evicted outside its wait"
        );
    }
}

fn check(seed: u64, shape: &Shape, s: &RunSummary, recs: &[RequestRecord], t: &SimTruth) {
    let ids = sim_truth::by_id(t);
    let turns: Vec<(&RequestRecord, &SimRequestTrace)> = recs
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| (r, ids[sim_truth::id_of(r).as_str()]))
        .collect();
    assert_eq!(
        turns.len() as u32,
        shape.sessions * shape.per_session(),
        "seed {seed}: every turn ran"
    );
    losses_in_waits(seed, shape, &turns);

    let f = s
        .findings
        .iter()
        .find(|f| f.id == "sessions_cache")
        .unwrap_or_else(|| panic!("seed {seed}: no sessions_cache finding"));
    let (served, finished) = sums(&turns);
    assert_eq!(f.values["cached_tokens"], served as f64, "seed {seed}");
    assert_eq!(
        f.values["cache_ceiling_tokens"], finished as f64,
        "seed {seed}"
    );

    // The split at the median of the plan's waits, by the simulator's tokens.
    let mut waited: Vec<(f64, &RequestRecord, &SimRequestTrace)> = turns
        .iter()
        .filter_map(|(r, st)| Some((r.tool_wait_ms?, *r, *st)))
        .collect();
    waited.sort_by(|a, b| a.0.total_cmp(&b.0));
    let split = waited[(waited.len() - 1) / 2].0;
    let side = |longer: bool| -> Vec<(&RequestRecord, &SimRequestTrace)> {
        waited
            .iter()
            .filter(|w| (w.0 > split) == longer)
            .map(|w| (w.1, w.2))
            .collect()
    };
    let (short, long) = (side(false), side(true));
    ttft_by_the_wait(seed, f, &waited);
    if long.is_empty() {
        assert!(
            !f.values.contains_key("wait_split_s") && !f.text.contains("Turns after tool waits"),
            "seed {seed}: one fixed wait, yet a split: {}",
            f.text
        );
        return;
    }
    let kept = |v: &[(&RequestRecord, &SimRequestTrace)]| {
        let (c, x) = sums(v);
        c as f64 / x as f64
    };
    assert!(
        (f.values["wait_split_s"] - split / 1e3).abs() < 1e-9,
        "seed {seed}"
    );
    assert!(
        (f.values["kept_after_longer_waits"] - kept(&long)).abs() < 1e-12,
        "seed {seed}: longer {} against the simulator's {}",
        f.values["kept_after_longer_waits"],
        kept(&long)
    );
    assert!(
        (f.values["kept_after_shorter_waits"] - kept(&short)).abs() < 1e-12,
        "seed {seed}"
    );
    let thin = short.len().min(long.len()) < 20;
    assert_eq!(
        f.strength_reasons
            .iter()
            .any(|r| r.contains("side of the median tool wait")),
        thin,
        "seed {seed}: {} and {} turns a side, reasons {:?}",
        short.len(),
        long.len(),
        f.strength_reasons
    );
    assert!(
        f.text
            .contains(&format!("({} turns), after shorter waits", long.len())),
        "seed {seed}: {}",
        f.text
    );
}

/// The turns after a wait (sorted by it) in the bins docs/metrics.md "TTFT by tool wait" says:
/// cut at k·n/5 for k = 1 … 5 (at most n bins), a cut moved on past turns of the same wait.
fn wait_bins<T: Copy>(waited: &[(f64, T)]) -> Vec<Vec<(f64, T)>> {
    let n = waited.len();
    let bins = n.min(5);
    let mut out = Vec::new();
    let mut from = 0;
    for k in 1..=bins {
        let mut to = (k * n / bins).max(from);
        while to > from && to < n && waited[to].0 == waited[to - 1].0 {
            to += 1;
        }
        if to > from {
            out.push(waited[from..to].to_vec());
            from = to;
        }
    }
    out
}

/// The TTFT of the turns after the shortest tool waits against after the longest: each the
/// nearest-rank median of the simulator's read-to-first-write times of that bin's turns, give or
/// take what a client's TTFT adds to it (−2 to `READ_TOL_MS` + `TOL_MS` ms); no sentence with
/// one bin (one fixed wait); thin with a bin of fewer than 10 turns.
fn ttft_by_the_wait(
    seed: u64,
    f: &servetop::summary::findings::Finding,
    waited: &[(f64, &RequestRecord, &SimRequestTrace)],
) {
    let pairs: Vec<(f64, &SimRequestTrace)> = waited.iter().map(|w| (w.0, w.2)).collect();
    let bins = wait_bins(&pairs);
    if bins.len() < 2 {
        assert!(
            !f.values.contains_key("ttft_after_longest_waits_ms")
                && !f.text.contains("TTFT p50 after the shortest"),
            "seed {seed}: one bin of waits, yet a comparison: {}",
            f.text
        );
        return;
    }
    let (first, last) = (&bins[0], &bins[bins.len() - 1]);
    let up_to = |b: &[(f64, &SimRequestTrace)]| b[b.len() - 1].0 / 1e3;
    assert_eq!(
        f.values["shortest_waits_up_to_s"],
        up_to(first),
        "seed {seed}"
    );
    assert_eq!(
        f.values["longest_waits_over_s"],
        up_to(&bins[bins.len() - 2]),
        "seed {seed}"
    );
    for (key, bin) in [
        ("ttft_after_shortest_waits_ms", first),
        ("ttft_after_longest_waits_ms", last),
    ] {
        let sim: Vec<f64> = bin
            .iter()
            .map(|w| sim_truth::server_ttft_ms(w.1).unwrap())
            .collect();
        let sim_ms = sim_truth::nearest_rank(&sim, 50.0);
        let d = f.values[key] - sim_ms;
        assert!(
            (-2.0..=sim_truth::READ_TOL_MS + sim_truth::TOL_MS).contains(&d),
            "seed {seed}: {key} {} ms against the simulator's {sim_ms:.1} ms",
            f.values[key]
        );
    }
    assert_eq!(
        f.strength_reasons
            .iter()
            .any(|r| r.contains("bin of tool waits")),
        first.len().min(last.len()) < 10,
        "seed {seed}: {} and {} turns in the end bins, reasons {:?}",
        first.len(),
        last.len(),
        f.strength_reasons
    );
    assert!(
        f.text.contains("TTFT p50 after the shortest tool waits"),
        "seed {seed}: {}",
        f.text
    );
}

#[test]
fn the_session_finding_holds_on_random_simulator_shapes() {
    let (mut split, mut lost, mut fixed) = (0, 0, 0);
    for seed in 1..=SHAPES {
        let shape = Shape::draw(seed);
        let (s, recs, t) = ran(&shape, seed);
        check(seed, &shape, &s, &recs, &t);
        let f = s
            .findings
            .iter()
            .find(|f| f.id == "sessions_cache")
            .unwrap();
        split += usize::from(f.values.contains_key("wait_split_s"));
        fixed += usize::from(shape.wait == "0.05");
        lost += usize::from(f.values["cached_tokens"] < f.values["cache_ceiling_tokens"] * 0.9);
        eprintln!("seed {seed}: {shape:?}: {}", f.text);
    }
    // The draw covers what it is for: splits, one fixed wait, and caches that lost much.
    assert!(split >= 3, "only {split} shapes had a split");
    assert!(fixed >= 1, "no shape had a fixed wait");
    assert!(
        lost >= 2,
        "only {lost} shapes lost a tenth of their ceiling"
    );
}
