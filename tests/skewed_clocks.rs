//! Shards whose clocks disagree (`SERVETOP_TEST_CLOCK_SKEW_MS`: one 1.7 s ahead, one 2.3 s
//! behind, on one machine) against one simulator on the true clock, on a shared `--start-at`
//! schedule, then merged. Each shard measures its offset against the server's `Date` header to
//! within a few ms (the uncertainty it records, at most 5 ms on loopback), and holds the truth
//! within it; each starts its level at the slot on the server's clock, not its own; and the
//! merged timeline puts every request where the simulator read it, within the uncertainty —
//! checked against the simulator's own record of when it read each request.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod run_files;
mod sim_child;
mod sim_truth;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use run_files::{finished, start_in};

/// The shards' clocks against the true one, ms.
const SKEWS_MS: [f64; 2] = [1700.0, -2300.0];

fn results(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

/// Server read − client send of each measured request, ms, the send on the server's clock by
/// `origins` (level → origin, Unix µs); ids begin with `prefix`.
fn read_minus_send(
    dir: &Path,
    origins: &HashMap<u32, f64>,
    truth: &servetop::sim::SimTruth,
    prefix: &str,
) -> Vec<f64> {
    let (records, _) = sim_truth::run_records(dir);
    let ids = sim_truth::by_id(truth);
    records
        .iter()
        .filter(|r| r.is_ok() && !r.warmup)
        .map(|r| {
            let id = sim_truth::id_with(prefix, r);
            let s = ids
                .get(id.as_str())
                .unwrap_or_else(|| panic!("{id} is not in the server's record"));
            (s.received_unix_us as f64 - (origins[&r.level] + r.send_at_us as f64)) / 1e3
        })
        .collect()
}

/// Shard `i` of two, its clock skewed by `SKEWS_MS[i]`, on the slot `at`, into `dir`.
fn spawn_shard(i: usize, url: &str, at: &str, dir: &Path) -> std::process::Child {
    let label = format!("{i}/2");
    let skew = SKEWS_MS[i].to_string();
    let dir = dir.display().to_string();
    Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args([
            "run",
            "--base-url",
            url,
            "--concurrency",
            "8",
            "--long-context",
            "none",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--level-seconds",
            "3",
            "--drain-seconds",
            "3",
            "--start-at",
            at,
            "--shard",
            &label,
            "--no-gpu",
            "--headless",
            "--out",
            &dir,
        ])
        .env(servetop::metrics::TEST_CLOCK_SKEW_ENV, &skew)
        .env_remove("SERVETOP_API_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Shard `i`'s offset against the truth, its requests on the server's clock where the server
/// read them, and its level's start at the slot `t0_us`; returns its uncertainty, ms.
fn check_shard(i: usize, dir: &Path, truth: &servetop::sim::SimTruth, t0_us: f64) -> f64 {
    let r = results(dir);
    let c = &r["clock_offset"];
    let (offset, unc) = (
        c["offset_ms"].as_f64().unwrap(),
        c["uncertainty_ms"].as_f64().unwrap(),
    );
    eprintln!(
        "shard {i}: clock {} ms off, measured offset {offset:.3} ± {unc:.3} ms from {} probes",
        SKEWS_MS[i], c["probes"]
    );
    // The offset, server − this shard's clock, is minus its skew, within the uncertainty.
    assert!(
        (offset + SKEWS_MS[i]).abs() <= unc + 0.01,
        "shard {i}: offset {offset} ± {unc} against the true {}",
        -SKEWS_MS[i]
    );
    assert!(unc <= 5.0, "shard {i}: uncertainty {unc} ms on loopback");
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("shifted")),
        "shard {i} says its clock was shifted on purpose"
    );
    // Each request where the server read it, its send on the server's clock.
    let level = &r["sweep"][0];
    let origin = level["origin_unix_us"].as_f64().unwrap() + offset * 1e3;
    let origins = HashMap::from([(0u32, origin)]);
    let d = read_minus_send(dir, &origins, truth, &format!("servetop-shard{i}of2"));
    assert!(d.len() > 10, "shard {i}: {} requests", d.len());
    let earliest = d.iter().copied().fold(f64::MAX, f64::min);
    let median = sim_truth::nearest_rank(&d, 50.0);
    eprintln!(
        "shard {i}: server read − send on the server's clock: earliest {earliest:.3} ms, median {median:.3} ms"
    );
    // Nothing is read before it was sent, but by the offset's uncertainty; and the quickest
    // read came within a millisecond of its send, but by the uncertainty. Each read − send is
    // the server's own latency plus the offset's error, so the two bracket the error. The
    // quickest, not the median: the median carries the server's queue on a busy machine
    // (CI: median 1.78 ms, quickest 0.44, with the offset within its 0.67 ms of the truth).
    assert!(earliest >= -(unc + 0.1), "shard {i}: {earliest} ms");
    assert!(
        earliest <= unc + sim_truth::MEDIAN_TOL_MS,
        "shard {i}: the quickest read came {earliest} ms after its send (median {median})"
    );
    // The level began at the slot on the server's clock (late by what it recorded).
    let late_ms = level["start_late_ms"].as_f64().unwrap_or(0.0);
    let start = (origin - t0_us) / 1e3;
    eprintln!("shard {i}: level origin {start:.3} ms after the slot (recorded late {late_ms} ms)");
    assert!(
        start >= -(unc + 1.0) && start <= late_ms + unc + 5.0,
        "shard {i}: began {start:.3} ms from the slot's start, late {late_ms} ms, ± {unc} ms"
    );
    unc
}

/// The merge puts both shards on the server's clock: every request of the merged run where
/// the server read it (the merged sends and the server's reads, each in time order).
fn check_merged(dirs: &[PathBuf], merged: &Path, truth: &servetop::sim::SimTruth, unc: f64) {
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["report", "--merge"])
        .args(dirs)
        .arg("--out")
        .arg(merged)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = results(merged);
    let origin = m["sweep"][0]["origin_unix_us"].as_f64().unwrap();
    let (records, _) = sim_truth::run_records(merged);
    let mut sends: Vec<f64> = records
        .iter()
        .filter(|r| r.is_ok() && !r.warmup)
        .map(|r| origin + r.send_at_us as f64)
        .collect();
    let mut reads: Vec<f64> = truth
        .requests
        .iter()
        .filter(|t| {
            t.request_id
                .as_deref()
                .is_some_and(|id| id.starts_with("servetop-shard") && !id.contains("warmup"))
        })
        .map(|t| t.received_unix_us as f64)
        .collect();
    sends.sort_by(f64::total_cmp);
    reads.sort_by(f64::total_cmp);
    assert_eq!(sends.len(), reads.len());
    let d: Vec<f64> = reads
        .iter()
        .zip(&sends)
        .map(|(r, s)| (r - s) / 1e3)
        .collect();
    let earliest = d.iter().copied().fold(f64::MAX, f64::min);
    let median = sim_truth::nearest_rank(&d, 50.0);
    eprintln!("merged: server read − send: earliest {earliest:.3} ms, median {median:.3} ms");
    assert!(earliest >= -(unc + 0.1), "merged: {earliest} ms");
    // As for each shard: the quickest read brackets the offsets' error from above.
    assert!(
        earliest <= unc + sim_truth::MEDIAN_TOL_MS,
        "merged: the quickest read came {earliest} ms after its send (median {median})"
    );
}

#[test]
fn shards_with_skewed_clocks_start_together_and_merge_on_the_servers_clock() {
    let (mut sim, url) = sim_child::spawn(&["--decode-step-ms", "5", "--accept-length", "1"], &[]);
    let tmp: PathBuf = std::env::temp_dir().join(format!("servetop-skew-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.join(format!("s{i}"))).collect();
    // The slot's start, on the true clock (the server's).
    let at = start_in(8);
    let t0_us = at[1..].parse::<f64>().unwrap() * 1e6;
    let began = std::time::Instant::now();
    let shards: Vec<_> = (0..2)
        .map(|i| spawn_shard(i, &url, &at, &dirs[i]))
        .collect();
    for (i, c) in shards.into_iter().enumerate() {
        finished(c, &format!("shard {i}"));
    }
    let run_s = began.elapsed().as_secs_f64();
    let truth = sim_truth::fetch(&url);
    let _ = sim.kill();
    sim_truth::guard(&truth, run_s);
    let unc = (0..2)
        .map(|i| check_shard(i, &dirs[i], &truth, t0_us))
        .fold(0.0, f64::max);
    check_merged(&dirs, &tmp.join("merged"), &truth, unc);
    let _ = std::fs::remove_dir_all(&tmp);
}
