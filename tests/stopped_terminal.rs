//! A terminal that stops taking output — Ctrl-S in an SSH session, a link that stalls — must not
//! hold a single read: progress lines are printed on the follower thread, the streams are read on
//! theirs (src/run/follower.rs).
//!
//! servetop runs headless on a pseudo-terminal, pinned to one core with `taskset` (one runtime
//! worker: a print that blocked there would hold every stream). Once its first level has
//! started, the test stops the terminal as Ctrl-S does (XOFF): from then on every write to it
//! blocks. The simulator keeps its own count of the tokens it generated, so the test can see the
//! rest of the plan being served while nothing can be printed: at least every measured token of
//! both levels. Then output resumes (XON) and the run must end normally with both levels done.
//! Printing from a task beside the streams on their one-worker runtime, the second level would
//! not start until XON.
//!
//! Needs `taskset` (util-linux); skips, saying so, without it.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod run_files;
mod sim_child;

/// XOFF and XON: what Ctrl-S and Ctrl-Q send.
const STOP: u8 = 0x13;
const START: u8 = 0x11;

/// The simulator's generated-tokens counter (`vllm:` or `sglang:`), from its Prometheus page.
fn generated(url: &str) -> f64 {
    let text = String::from_utf8(sim_child::get(url, "/metrics")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(":generation_tokens_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_stopped_terminal_holds_no_stream() {
    if !Command::new("taskset")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        eprintln!("SKIPPED: taskset (util-linux) is not installed");
        return;
    }
    // The default simulator, not the fast one: a level lasts seconds, so the terminal is
    // stopped while the first is still running.
    let mut sim = Command::new(env!("CARGO_BIN_EXE_servetop"));
    sim.args(["sim", "--port", "0"]);
    let (sim, url) = sim_child::start(sim);
    let _sim = sim_child::KillOnDrop(sim);
    let before = generated(&url);
    let dir = std::env::temp_dir().join(format!("servetop-stopped-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut master = std::fs::File::from(pty.master);
    let slave = std::fs::File::from(pty.slave);
    let (levels, requests, output_len) = ("1,2", 4u32, 50u32);
    let child = Command::new("taskset")
        .args(["-c", "0", env!("CARGO_BIN_EXE_servetop")])
        .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
        .args(["--concurrency", levels, "--long-context", "none"])
        .args(["--requests-per-level", &requests.to_string()])
        .args(["--output-len", &output_len.to_string()])
        .arg("--out")
        .arg(&dir)
        .stdin(Stdio::null())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave)
        .spawn()
        .unwrap();
    let mut child = sim_child::KillOnDrop(child);
    // Everything servetop prints, read as it comes (nothing comes while the terminal is stopped).
    let seen = Arc::new(Mutex::new(String::new()));
    let reader = {
        let (mut m, seen) = (master.try_clone().unwrap(), seen.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // The read fails with EIO once servetop has closed the terminal.
            while let Ok(n) = m.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let printed = |s: &str| seen.lock().unwrap().contains(s);
    wait_for("the first level to start", Duration::from_secs(120), || {
        printed("[C=1] 4 requests")
    });
    master.write_all(&[STOP]).unwrap();
    let stopped_at = seen.lock().unwrap().len();
    // Both levels' measured tokens, served while nothing can be printed.
    let planned = f64::from(2 * requests * output_len);
    wait_for(
        "both levels to be served with the terminal stopped",
        Duration::from_secs(120),
        || generated(&url) - before >= planned,
    );
    let during = seen.lock().unwrap()[stopped_at..].to_string();
    assert!(
        !during.contains("[C=2] done"),
        "the terminal printed while stopped: {during}"
    );
    master.write_all(&[START]).unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no end after XON"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(master);
    let _ = reader.join();
    assert!(status.success(), "{}", seen.lock().unwrap());
    let results = run_files::results(&dir);
    assert_eq!(results["state"], "finished");
    for level in results["sweep"].as_array().unwrap() {
        assert_eq!(level["status"], "done", "{level}");
        assert_eq!(level["completed"].as_u64(), Some(u64::from(requests)));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
