//! A run where servetop itself was the limit, made on purpose, and one where it was not
//! (docs/metrics.md "Findings", client validity).
//!
//! The firehose (`servetop sim --firehose`) streams tokens as fast as the socket takes them from
//! its own core; servetop, pinned to the other core with `taskset`, reads 64 such streams at
//! once: its core is full, so what it measured is its own speed, not the server's. The run must
//! say so: a client-bound caveat naming the level, on the findings that rest on it. The test
//! reads servetop's CPU itself (`/proc/PID/stat` of the child, beside the run) to know the core
//! really was full. Then the same pinning against a firehose paced at one write every 20 ms a
//! stream (200 writes a second in all): servetop idles, and no finding may call it the limit.
//!
//! Needs two CPUs and `taskset` (util-linux); skips, saying so, without them.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod run_files;
mod sim_child;

/// A firehose child on CPU 1 (killed when the test ends) and its URL.
struct Firehose {
    _child: sim_child::KillOnDrop,
    url: String,
}

fn firehose(extra: &[&str]) -> Firehose {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "1", env!("CARGO_BIN_EXE_servetop")])
        .args(["sim", "--firehose", "--port", "0"])
        .args(extra);
    let (child, url) = sim_child::start(cmd);
    Firehose {
        _child: sim_child::KillOnDrop(child),
        url,
    }
}

/// User + system CPU seconds of a live process, from `/proc/PID/stat` (100 ticks a second).
fn cpu_s(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
    Some((f[11].parse::<f64>().ok()? + f[12].parse::<f64>().ok()?) / 100.0)
}

/// `servetop run` pinned to CPU 0 against `url` at concurrency `c`, into `dir`: its results and
/// the CPU seconds it used per wall second over its life, read here while it ran.
fn run_pinned(url: &str, c: u32, output_len: u32, dir: &Path) -> (Value, f64) {
    let _ = std::fs::remove_dir_all(dir);
    let (c, requests, out) = (c.to_string(), c.to_string(), output_len.to_string());
    let mut child = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_servetop")])
        .args(["run", "--base-url", url, "--headless", "--no-gpu"])
        .args(["--concurrency", &c, "--requests-per-level", &requests])
        .args([
            "--input-len",
            "16",
            "--output-len",
            &out,
            "--long-context",
            "none",
        ])
        .args(["--warmup", "0", "--out"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let (mut cpu, mut wall) = (0.0, 0.0);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if let Some(s) = cpu_s(child.id()) {
            (cpu, wall) = (s, began.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "servetop run failed: {err}");
    (run_files::results(dir), cpu / wall)
}

fn client_bound_caveats(results: &Value) -> Vec<String> {
    results["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["caveats"].as_array().unwrap().iter())
        .filter_map(|c| c.as_str())
        .filter(|c| c.contains("servetop may have been the limit"))
        .map(str::to_string)
        .collect()
}

fn can_pin() -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let taskset = Command::new("taskset")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if cpus < 2 || !taskset {
        eprintln!("needs two CPUs and taskset ({cpus} CPUs, taskset {taskset}): skipping");
    }
    cpus >= 2 && taskset
}

/// One test, so the two runs never share CPU 0 with each other.
#[test]
fn a_full_core_is_named_as_the_limit_and_an_idle_one_is_not() {
    if !can_pin() {
        return;
    }
    let tmp = std::env::temp_dir().join(format!("servetop-client-bound-{}", std::process::id()));

    // Flooded: 64 streams of 4000 tokens, each as fast as the firehose can write.
    let fast = firehose(&[]);
    let (r, used) = run_pinned(&fast.url, 64, 4000, &tmp.join("flooded"));
    drop(fast);
    let level = &r["sweep"][0];
    eprintln!(
        "flooded: servetop used {used:.2} of its core over its life (read here); results.json: client_cpu_share {}, timer lag p99 {} ms",
        level["client_cpu_share"], level["client_timer_lag_p99_ms"]
    );
    assert!(
        used > 0.7,
        "servetop did not fill its core ({used:.2}): the firehose did not flood it"
    );
    let caveats = client_bound_caveats(&r);
    assert!(
        caveats
            .iter()
            .any(|c| c.contains("servetop may have been the limit at C=64")),
        "no client-bound caveat on a flooded run: {:#}",
        r["findings"]
    );
    // Said as the level ended too, with what to do.
    assert!(
        r["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("C=64: servetop may have been the limit")),
        "{:#}",
        r["warnings"]
    );
    let validity = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "client_validity")
        .unwrap();
    assert!(
        validity["caveats"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().contains("limit at C=64")),
        "{validity:#}"
    );

    // Paced: one write every 20 ms a stream, 4 streams.
    let paced = firehose(&["--decode-step-ms", "20"]);
    let (r, used) = run_pinned(&paced.url, 4, 100, &tmp.join("paced"));
    drop(paced);
    let level = &r["sweep"][0];
    eprintln!(
        "paced: servetop used {used:.2} of its core (read here); results.json: client_cpu_share {}, timer lag p99 {} ms",
        level["client_cpu_share"], level["client_timer_lag_p99_ms"]
    );
    let caveats = client_bound_caveats(&r);
    assert!(
        caveats.is_empty(),
        "an idle servetop ({used:.2} of a core) called the limit: {caveats:?}"
    );
    assert!(
        !r["warnings"]
            .to_string()
            .contains("may have been the limit"),
        "{:#}",
        r["warnings"]
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
