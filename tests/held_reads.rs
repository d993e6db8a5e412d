//! Held reads (docs/metrics.md "Held reads"), against an independent record of the writes.
//!
//! The firehose streams one token event every 20 ms per stream and records the time just
//! before and just after each write (over loopback the bytes reach servetop's socket within the
//! write call). servetop reads ten such streams while the test stops the whole process with
//! SIGSTOP for 60 ms every 300 ms: every stream gets two or three writes during each stop, the
//! kernel merges them, and the read after it stamps them all with the last one's time. The
//! run must count those reads held, and no request may carry a token stamped more than 5 ms
//! after its write ended without counting a held read (the flag's promise: an unflagged read
//! was merged only across a stall too short for the probe to see, under about 4 ms).

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

mod sim_child;

/// Per request id: (µs before, token events, µs after) of each write.
type Writes = HashMap<String, Vec<(u64, u32, u64)>>;

fn fetch_writes(url: &str) -> Writes {
    serde_json::from_slice(&sim_child::get(url, "/firehose/writes")).unwrap()
}

/// Runs servetop against `url` into `dir`, stopping it for 60 ms every 300 ms; the stops made.
fn run_with_stops(url: &str, dir: &std::path::Path) -> u32 {
    let _ = std::fs::remove_dir_all(dir);
    let mut run = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["run", "--base-url", url, "--headless", "--no-gpu"])
        .args(["--concurrency", "10", "--requests-per-level", "30"])
        .args(["--input-len", "16", "--output-len", "50"])
        .args(["--long-context", "none", "--warmup", "0", "--record-chunks"])
        .arg("--out")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = Pid::from_raw(i32::try_from(run.id()).unwrap());
    let began = Instant::now();
    let mut stops = 0;
    let status = loop {
        if let Some(st) = run.try_wait().unwrap() {
            break st;
        }
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "the run did not end"
        );
        std::thread::sleep(Duration::from_millis(300));
        if kill(pid, Signal::SIGSTOP).is_ok() {
            std::thread::sleep(Duration::from_millis(60));
            kill(pid, Signal::SIGCONT).unwrap();
            stops += 1;
        }
    };
    assert!(status.success(), "{status}");
    stops
}

#[test]
fn reads_merged_across_a_stall_are_counted_held() {
    let mut fh = Command::new(env!("CARGO_BIN_EXE_servetop"));
    fh.args(["sim", "--firehose", "--port", "0"])
        .args(["--events-per-write", "1", "--decode-step-ms", "20"])
        .arg("--record-writes");
    let (child, url) = sim_child::start(fh);
    let _firehose = sim_child::KillOnDrop(child);
    let dir = std::env::temp_dir().join(format!("servetop-held-{}", std::process::id()));
    let stops = run_with_stops(&url, &dir);
    let writes = fetch_writes(&url);
    let results: Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let level = &results["sweep"][0];
    let origin = level["origin_unix_us"].as_u64().unwrap();
    let text = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let (mut late_requests, mut unflagged_late, mut worst_us) = (0, Vec::new(), 0u64);
    let mut matched = 0;
    for line in text.lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        if r["warmup"].as_bool() == Some(true) || r["status"] != "ok" {
            continue;
        }
        let id = format!("servetop-{}-{}", r["level"], r["index"]);
        let Some(w) = writes.get(&id) else { continue };
        matched += 1;
        let send = r["send_at_us"].as_u64().unwrap();
        let written_by = w
            .iter()
            .flat_map(|&(_, n, after)| std::iter::repeat_n(after, n as usize));
        let arrivals = r["chunks"].as_array().unwrap().iter().flat_map(|c| {
            let at = origin + send + c["t_us"].as_u64().unwrap();
            std::iter::repeat_n(at, c["tokens"].as_u64().unwrap() as usize)
        });
        let late = written_by
            .zip(arrivals)
            .map(|(after, at)| at.saturating_sub(after))
            .max()
            .unwrap_or(0);
        worst_us = worst_us.max(late);
        let held = r["held_reads"].as_u64().unwrap_or(0);
        if late > 5_000 {
            late_requests += 1;
            if held == 0 {
                unflagged_late.push((id, late));
            }
        }
    }
    assert!(
        matched >= 30,
        "{matched} requests matched the firehose's record"
    );
    // The stops did merge writes: some tokens were stamped a write interval late or more.
    assert!(
        late_requests > 0 && worst_us >= 15_000,
        "{stops} stops, {late_requests} late requests, worst {worst_us} µs"
    );
    assert!(
        unflagged_late.is_empty(),
        "late by more than 5 ms without a held read: {unflagged_late:?}"
    );
    let held = level["held_reads"].as_u64().unwrap_or(0);
    assert!(held > 0, "{level}");
    let caveats = results["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["caveats"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect::<Vec<_>>();
    let share = level["held_read_share"].as_f64().unwrap();
    if share > 0.01 {
        assert!(
            caveats.iter().any(|c| c.contains("were held")),
            "held share {share}, caveats {caveats:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
