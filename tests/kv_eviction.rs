//! Agent sessions on a simulator whose KV cache is too small for them: the running requests'
//! KV and the cached prefixes share `--kv-capacity-tokens`, so while a session waits on its tool
//! the others' turns evict what it had. Held to the simulator's own record of each eviction.
//!
//! The answers, from the simulator's record (not servetop's arithmetic):
//! - Every turn's cached tokens equal what the simulator's cache served it, and its ceiling what
//!   the simulator had finished of its prompt.
//! - A turn that found less than its ceiling (down to a 16-token block) lost it to an eviction
//!   the simulator recorded, of the first block it missed, after the engine let go of the
//!   session's previous turn and before this turn's prefill began: in the tool wait (or its
//!   queueing), never while the session's own turn held the blocks.
//! - Some evictions made room for running requests: the running KV shares the budget.
//! - results.json's `cache_by_wait` splits the turns after a wait at their median wait as the
//!   records say. Whether the longer half lost a larger share of its ceiling is printed, not
//!   asserted: that is the workload's tendency, and one run's few dozen turns can go either way.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::process::Command;

use servetop::metrics::RequestRecord;
use servetop::sim::SimRequestTrace;

mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, request_records, results};

const TURNS: u32 = 5;
const BLOCK: u64 = 16;

#[test]
fn a_tool_wait_under_load_loses_what_the_simulator_evicted_during_it() {
    // Room for about two sessions' contexts (they grow to about 600 tokens) with a turn
    // running: three users keep evicting each other's while they wait.
    let (child, url) = sim_child::spawn(&["--kv-capacity-tokens", "1200"], &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = std::env::temp_dir().join(format!("servetop-kv-evict-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    run_files::succeed(
        Command::new(bin())
            .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
            .args(["--concurrency", "none", "--long-context", "none"])
            .args(["--sessions", "3", "--sessions-per-level", "9"])
            .args(["--turns", &TURNS.to_string()])
            .args(["--tool-wait", "lognormal:0.15,0.8", "--tool-wait-cap", "1"])
            .args(["--tool-result-len", "48", "--input-len", "300"])
            .args(["--shared-prefix-len", "120", "--output-len", "20"])
            .arg("--out")
            .arg(&dir),
    );
    let truth = sim_truth::fetch(&url);
    let ids = sim_truth::by_id(&truth);
    let recs = request_records(&dir);
    let all: HashMap<(u32, u32), (&RequestRecord, &SimRequestTrace)> = recs
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| {
            let s = ids[sim_truth::id_of(r).as_str()];
            ((r.index / TURNS, r.turn.unwrap()), (r, s))
        })
        .collect();
    assert_eq!(all.len() as u32, 9 * TURNS, "every turn ran");

    // (tool wait, cached share of the ceiling's blocks) of each turn after the first.
    let mut after_waits: Vec<(f64, f64)> = Vec::new();
    let mut lost_tokens = 0u64;
    for (&(session, turn), &(r, s)) in &all {
        assert_eq!(r.cached_tokens, s.cached_tokens, "{session} {turn}");
        assert_eq!(r.cache_ceiling_tokens, s.finished_prefix_tokens);
        let reachable = r.cache_ceiling_tokens.unwrap() / BLOCK * BLOCK;
        let cached = r.cached_tokens.unwrap();
        if turn == 1 {
            continue;
        }
        after_waits.push((
            r.tool_wait_ms.unwrap(),
            cached.min(reachable) as f64 / reachable as f64,
        ));
        if cached >= reachable {
            continue;
        }
        lost_tokens += reachable - cached;
        let (_, before) = all[&(session, turn - 1)];
        let released = before.released_unix_us.unwrap();
        let admitted = s.admitted_unix_us.unwrap();
        let evicted = s.prefix_evicted_unix_us.unwrap_or_else(|| {
            panic!(
                "{session} {turn}: lost {} tokens, but no eviction of them is on record",
                reachable - cached
            )
        });
        assert!(
            (released..=admitted).contains(&evicted),
            "{session} {turn}: its block was evicted at {evicted}, outside its wait [{released}, {admitted}]"
        );
    }
    assert!(
        lost_tokens > 0,
        "no turn lost anything: the cache was large enough"
    );
    let evicted: u64 = truth.evictions.iter().map(|e| e.tokens).sum();
    assert!(
        evicted >= lost_tokens,
        "the turns lost {lost_tokens} tokens, more than the {evicted} evicted"
    );
    assert!(
        truth
            .evictions
            .iter()
            .any(|e| e.evicted_for == servetop::sim::prefix_cache::EvictedFor::Running),
        "no eviction made room for a running request"
    );

    // The longer half of the waits lost more.
    after_waits.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = after_waits.len() / 2;
    let share = |v: &[(f64, f64)]| v.iter().map(|x| x.1).sum::<f64>() / v.len() as f64;
    let (short, long) = (share(&after_waits[..half]), share(&after_waits[half..]));
    eprintln!(
        "lost {lost_tokens} tokens, {evicted} evicted in {} evictions; kept after the shorter waits {short:.3}, after the longer {long:.3}",
        truth.evictions.len()
    );
    // Whether the longer half kept less is printed above, not asserted: it is the workload's
    // tendency, and 36 turns can go either way (a jittery machine once made it 0.89 against
    // 0.83). What is asserted is that results.json splits the turns as the records say.
    split_is_the_records(&results(&dir)["sessions"][0]["cache_by_wait"], &all);

    // The level's sums are the turns'.
    let v = results(&dir);
    let level = &v["sessions"][0];
    let sum = |f: &dyn Fn(&RequestRecord) -> u64| all.values().map(|(r, _)| f(r)).sum::<u64>();
    assert_eq!(level["cached_tokens"], sum(&|r| r.cached_tokens.unwrap()));
    assert_eq!(
        level["cache_ceiling_tokens"],
        sum(&|r| r.cache_ceiling_tokens.unwrap())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// results.json's `cache_by_wait` against the records: the turns after a wait with a ceiling,
/// split at their median wait, each half's turns, cached tokens and ceiling.
fn split_is_the_records(
    split: &serde_json::Value,
    all: &HashMap<(u32, u32), (&RequestRecord, &SimRequestTrace)>,
) {
    let split_ms = split["split_ms"].as_f64().unwrap();
    let waits: Vec<(f64, u64, u64)> = all
        .values()
        .filter_map(|(r, _)| {
            Some((
                r.tool_wait_ms?,
                r.cached_tokens.unwrap_or(0).min(r.input_tokens),
                r.cache_ceiling_tokens?,
            ))
        })
        .collect();
    let mut sorted: Vec<f64> = waits.iter().map(|t| t.0).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[(sorted.len() - 1) / 2];
    assert!(
        (split_ms - median).abs() < 1e-9,
        "median wait {median}, split at {split_ms}"
    );
    for (name, longer) in [("shorter", false), ("longer", true)] {
        let (turns, cached, ceiling) = waits
            .iter()
            .filter(|t| (t.0 > split_ms) == longer)
            .fold((0u64, 0u64, 0u64), |a, t| (a.0 + 1, a.1 + t.1, a.2 + t.2));
        assert_eq!(
            (
                split[name]["turns"].as_u64(),
                split[name]["cached_tokens"].as_u64(),
                split[name]["cache_ceiling_tokens"].as_u64()
            ),
            (Some(turns), Some(cached), Some(ceiling)),
            "the {name} waits' turns"
        );
    }
}
