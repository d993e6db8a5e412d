//! `--reset-cache` against servetop's simulator, run as a user runs it (the binary, a simulator
//! child), held to the simulator's own record.
//!
//! The answers, from the simulator's rules: its prefix cache serves whole 16-token blocks of a
//! prompt that an earlier request put through prefill, and `/flush_cache` (SGLang's endpoint,
//! which it speaks) empties it and records when. Every prompt of these runs opens with the same
//! `PREFIX` tokens (`--shared-prefix-len`). So without a reset, the first request of the second
//! level finds the prefix the first level left (its `PREFIX / 16` blocks); with one, the flush
//! falls between the two levels and the first request of each level finds nothing.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

mod run_files;
mod sim_child;
mod sim_truth;

use run_files::{bin, request_records, results, succeed};

const PREFIX: u64 = 256;
const BLOCK: u64 = 16;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-reset-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Two levels (C=1, C=2) of four requests sharing a prefix, with `extra` flags, against the
/// simulator at `url`.
fn run(url: &str, dir: &Path, extra: &[&str]) {
    succeed(
        Command::new(bin())
            .args(["run", "--base-url", url, "--headless", "--no-gpu"])
            .args(["--concurrency", "1,2", "--requests-per-level", "4"])
            .args(["--long-context", "none", "--warmup", "1"])
            .args(["--input-len", "400", "--output-len", "8"])
            .args(["--shared-prefix-len", &PREFIX.to_string()])
            .args(extra)
            .arg("--out")
            .arg(dir),
    );
}

/// Each level's first measured request the server read: the simulator's record of the tokens its cache served,
/// with the level's time zero.
fn first_cached(dir: &Path, truth: &servetop::sim::SimTruth) -> Vec<(u64, u64)> {
    let v = results(dir);
    let ids = sim_truth::by_id(truth);
    let recs = request_records(dir);
    v["sweep"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let level = l["index"].as_u64().unwrap() as u32;
            // The first the server read.
            let s = recs
                .iter()
                .filter(|r| r.level == level && !r.warmup)
                .map(|r| ids[sim_truth::id_of(r).as_str()])
                .min_by_key(|s| s.received_unix_us)
                .unwrap();
            (
                l["origin_unix_us"].as_u64().unwrap(),
                s.cached_tokens.unwrap(),
            )
        })
        .collect()
}

#[test]
fn each_level_starts_with_the_cache_cleared() {
    // Without the flag: the second level finds the prefix the first left, and nothing flushed.
    let (child, url) = sim_child::spawn(&[], &[]);
    let _sim = sim_child::KillOnDrop(child);
    let dir = scratch("warm");
    run(&url, &dir, &[]);
    let truth = sim_truth::fetch(&url);
    let warm = first_cached(&dir, &truth);
    assert_eq!(warm.len(), 2);
    assert!(truth.cache_flushes_unix_us.is_empty());
    assert!(
        warm[1].1 >= PREFIX / BLOCK * BLOCK,
        "the second level's first request found {} cached tokens, the prefix is {PREFIX}",
        warm[1].1
    );
    let v = results(&dir);
    assert!(
        v["sweep"][0].get("cache_reset").is_none(),
        "{}",
        v["sweep"][0]
    );
    let _ = std::fs::remove_dir_all(&dir);

    // With it: one flush before each level, after what came before it ended; each level's
    // first request finds nothing cached.
    let (child, url) = sim_child::spawn(&[], &[]);
    let _sim = sim_child::KillOnDrop(child);
    let dir = scratch("cold");
    run(&url, &dir, &["--reset-cache"]);
    let truth = sim_truth::fetch(&url);
    let cold = first_cached(&dir, &truth);
    let flushes = &truth.cache_flushes_unix_us;
    assert_eq!(flushes.len(), 2, "{flushes:?}");
    let last_before = |origin: u64| {
        truth
            .requests
            .iter()
            .filter_map(servetop::sim::SimRequestTrace::last_write_unix_us)
            .filter(|&t| t < origin)
            .max()
            .unwrap()
    };
    for (k, (origin, cached)) in cold.iter().enumerate() {
        assert_eq!(
            *cached, 0,
            "level {k}'s first request found its prefix cached"
        );
        let f = flushes[k];
        assert!(
            f < *origin && f > last_before(*origin),
            "flush {k} at {f} µs: the level started at {origin}, the last answer before it at {}",
            last_before(*origin)
        );
    }
    let v = results(&dir);
    for l in v["sweep"].as_array().unwrap() {
        assert_eq!(l["cache_reset"]["outcome"], "cleared", "{l}");
        assert_eq!(
            l["cache_reset"]["detail"]["endpoint"], "/flush_cache",
            "{l}"
        );
    }
    assert_eq!(v["config"]["reset_cache"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server with no way to clear its cache: the run says so once, stops asking, and goes on.
#[test]
fn a_server_without_a_reset_says_so_and_the_run_goes_on() {
    let (child, url) = sim_child::spawn(&["--no-prefix-cache"], &[]);
    let _sim = sim_child::KillOnDrop(child);
    let dir = scratch("none");
    run(&url, &dir, &["--reset-cache"]);
    let v = results(&dir);
    let levels = v["sweep"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for l in levels {
        assert_eq!(l["completed"], 4, "{l}");
    }
    // The simulator without a cache has no /flush_cache: not offered, asked once.
    assert_eq!(
        levels[0]["cache_reset"]["outcome"], "not_offered",
        "{}",
        levels[0]
    );
    assert!(levels[1].get("cache_reset").is_none(), "{}", levels[1]);
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.starts_with("--reset-cache"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("has no POST /flush_cache (HTTP 404)"),
        "{warnings:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
