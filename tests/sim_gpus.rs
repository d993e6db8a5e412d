//! A run against servetop's own simulator finds its simulated GPUs at `/dcgm/metrics` without
//! `--dcgm-url` (the simulator says how many it serves: `--gpus N`), says so, and records them
//! as simulated; `--no-gpu` still turns GPU telemetry off.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;

mod run_files;
mod sim_child;

/// The GPU samples in a run's telemetry.jsonl: each sample's source and number of GPUs.
fn gpu_samples(dir: &std::path::Path) -> Vec<(String, usize)> {
    run_files::read(dir, "telemetry.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "gpu")
        .map(|v| {
            (
                v["source"].as_str().unwrap().to_string(),
                v["gpus"].as_array().unwrap().len(),
            )
        })
        .collect()
}

#[test]
fn the_simulators_gpus_are_found_without_a_dcgm_url() {
    let (child, url) = sim_child::spawn(&["--gpus", "3"], &[]);
    let _child = sim_child::KillOnDrop(child);
    let base = std::env::temp_dir().join(format!("servetop-simgpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let run = |name: &str, extra: &[&str]| {
        let dir = base.join(name);
        let out = run_files::succeed(
            Command::new(run_files::bin())
                .args(["run", "--base-url", &url, "--headless"])
                .args(["--concurrency", "1", "--requests-per-level", "2"])
                .args(["--output-len", "20", "--long-context", "none"])
                .args(extra)
                .arg("--out")
                .arg(&dir),
        );
        (dir, String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (dir, said) = run("found", &[]);
    assert!(
        said.contains(&format!(
            "[gpu] the simulator's 3 SIMULATED GPUs at {url}/dcgm/metrics"
        )),
        "{said}"
    );
    let samples = gpu_samples(&dir);
    assert!(!samples.is_empty(), "no GPU samples");
    assert!(
        samples
            .iter()
            .all(|(src, n)| src == "simulated_dcgm" && *n == 3),
        "{samples:?}"
    );
    let results = run_files::results(&dir);
    assert_eq!(
        results["config"]["dcgm_url"],
        format!("{url}/dcgm/metrics"),
        "the run records where its GPUs were read"
    );
    let (dir, said) = run("off", &["--no-gpu"]);
    assert!(!said.contains("[gpu]"), "{said}");
    assert!(gpu_samples(&dir).is_empty(), "--no-gpu read GPUs");
    let _ = std::fs::remove_dir_all(&base);
}
