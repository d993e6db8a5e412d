//! How a run ends, through the real binary, on a real pseudo-terminal:
//!
//! 1. Five endings leave the same files: a headless run's end; the dashboard's `q` after the
//!    end; the dashboard's terminal hung up mid-run (the pty's master closed: the kernel sends
//!    the session's leader SIGHUP, and every write to it fails), which goes on and exits at the
//!    end by itself; `d` mid-run, likewise; and `run --detach`. Each leaves `results.json`
//!    finished, `sweep.csv` and `charts/`, and the same set of files (the detached run adds its
//!    output, `run.log`).
//! 2. A second Ctrl-C ends a run at once, whatever `--grace` says: with `--grace 60` and
//!    requests of 40 s in flight, two SIGINTs end the run long before one grace period, the
//!    in-flight requests cancelled, counted in results.json and written to requests.jsonl. Under
//!    the dashboard too.
//!
//! 3. A plan of more than 20 levels declined at its question exits 4 (nothing ran, no run
//!    directory), not 1, which says the server stopped answering.
//!
//! The dashboard runs under `setsid -c` (util-linux) so the pty is its controlling terminal,
//! as in an SSH session.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod run_files;
mod sim_child;

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn state(dir: &Path) -> Option<serde_json::Value> {
    let b = std::fs::read(dir.join("results.json")).ok()?;
    serde_json::from_slice(&b).ok()
}

fn level_running(dir: &Path, i: usize) -> bool {
    state(dir).is_some_and(|v| v["sweep"][i]["status"] == "running")
}

fn finished(dir: &Path) -> bool {
    state(dir).is_some_and(|v| v["state"] == "finished")
}

/// Every file under `dir`, relative (`charts/latency.png`).
fn files(dir: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// The run's arguments: two short levels against the simulator at `url`, into `dir`.
fn plan(url: &str, dir: &Path, output_len: &str) -> Vec<String> {
    [
        "run",
        "--base-url",
        url,
        "--concurrency",
        "1,2",
        "--requests-per-level",
        "4",
        "--output-len",
        output_len,
        "--input-len",
        "50",
        "--long-context",
        "none",
        "--no-gpu",
        "--chart-size",
        "400x225",
        "--out",
        dir.to_str().unwrap(),
    ]
    .iter()
    .map(ToString::to_string)
    .collect()
}

/// servetop's dashboard on a pseudo-terminal of 160x48 that is its controlling terminal; what
/// it draws is read (and dropped) so its writes never block.
struct OnTerminal {
    child: sim_child::KillOnDrop,
    master: Option<std::fs::File>,
    /// Tells the reader to close its copy of the master.
    hung_up: Arc<AtomicBool>,
}

impl OnTerminal {
    fn start(args: &[String]) -> Self {
        let size = nix::pty::Winsize {
            ws_row: 48,
            ws_col: 160,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).unwrap();
        // The master as a copy the child does not inherit (Rust's copies are close-on-exec;
        // openpty's are not): the terminal hangs up when this process closes it.
        let master = std::fs::File::from(pty.master).try_clone().unwrap();
        let slave = std::fs::File::from(pty.slave);
        let child = Command::new("setsid")
            .arg("-c")
            .arg(run_files::bin())
            .args(args)
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .spawn()
            .unwrap();
        let mut m = master.try_clone().unwrap();
        let hung_up = Arc::new(AtomicBool::new(false));
        let gone = hung_up.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // EIO once the terminal is gone. The dashboard redraws at least once a second (its
            // clock), so a hang-up is seen within one; then this copy of the master is closed.
            while let Ok(n) = m.read(&mut buf) {
                if n == 0 || gone.load(Ordering::SeqCst) {
                    break;
                }
            }
        });
        Self {
            child: sim_child::KillOnDrop(child),
            master: Some(master),
            hung_up,
        }
    }

    fn key(&mut self, k: &[u8]) {
        self.master.as_mut().unwrap().write_all(k).unwrap();
    }

    /// Closes the terminal, as a dropped SSH session does: every copy of its master.
    fn hang_up(&mut self) {
        self.master = None;
        self.hung_up.store(true, Ordering::SeqCst);
    }

    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(s) = self.child.0.try_wait().unwrap() {
                return s;
            }
            assert!(
                start.elapsed() < limit,
                "servetop did not exit in {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

fn have_setsid() -> bool {
    Command::new("setsid")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sim() -> (sim_child::KillOnDrop, String) {
    // 20 ms a step, one token a step: a 40-token answer takes 0.8 s, so a level lasts seconds.
    let (child, url) = sim_child::spawn(&["--decode-step-ms", "20", "--accept-length", "1"], &[]);
    (sim_child::KillOnDrop(child), url)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-endings-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// What a finished run's directory must hold, whatever ended it.
fn check_finished(how: &str, dir: &Path) -> BTreeSet<String> {
    let v = state(dir).unwrap_or_else(|| panic!("{how}: no results.json"));
    assert_eq!(v["state"], "finished", "{how}");
    let f = files(dir);
    for must in [
        "results.json",
        "requests.jsonl",
        "summary.md",
        "sweep.csv",
        "report.html",
    ] {
        assert!(f.contains(must), "{how}: no {must} in {f:?}");
    }
    assert!(
        f.iter()
            .any(|n| n.starts_with("charts/")
                && Path::new(n).extension().is_some_and(|e| e == "png")),
        "{how}: no charts in {f:?}"
    );
    assert!(
        !f.contains("live.sock"),
        "{how}: the live socket was left: {f:?}"
    );
    f
}

#[test]
fn five_endings_leave_the_same_files() {
    assert!(
        have_setsid(),
        "setsid (util-linux) is needed to give servetop a terminal"
    );
    let (_sim, url) = sim();
    // 1. Headless, to its end.
    let headless = tmp("headless");
    let mut args = plan(&url, &headless, "40");
    args.push("--headless".into());
    run_files::succeed(Command::new(run_files::bin()).args(&args));
    let want = check_finished("headless", &headless);

    // 2. The dashboard, `q` once the run is over.
    let quit = tmp("q");
    let mut t = OnTerminal::start(&plan(&url, &quit, "40"));
    wait_for("the q run to finish", Duration::from_secs(120), || {
        finished(&quit)
    });
    // The dashboard waits for `q` once the run is over.
    std::thread::sleep(Duration::from_millis(300));
    assert!(t.child.0.try_wait().unwrap().is_none(), "left before q");
    t.key(b"q");
    assert!(t.wait(Duration::from_secs(60)).success());
    assert_eq!(check_finished("q", &quit), want, "q");

    // 3. The terminal hangs up mid-run: the run goes on and exits at its end.
    let hup = tmp("hup");
    let mut t = OnTerminal::start(&plan(&url, &hup, "40"));
    wait_for("the hang-up run's C=1", Duration::from_secs(120), || {
        level_running(&hup, 0)
    });
    t.hang_up();
    assert!(
        t.wait(Duration::from_secs(120)).success(),
        "a hung-up dashboard run ends by itself, exit 0"
    );
    assert_eq!(check_finished("hang-up", &hup), want, "hang-up");

    // 4. `d` mid-run: the same.
    let det = tmp("d");
    let mut t = OnTerminal::start(&plan(&url, &det, "40"));
    wait_for("the d run's C=1", Duration::from_secs(120), || {
        level_running(&det, 0)
    });
    t.key(b"d");
    assert!(t.wait(Duration::from_secs(120)).success(), "d");
    assert_eq!(check_finished("d", &det), want, "d");

    // 5. `--detach`: returns at once; the run goes on in a process of its own.
    let bg = tmp("detach");
    let mut args = plan(&url, &bg, "40");
    args.push("--detach".into());
    let out = run_files::succeed(Command::new(run_files::bin()).args(&args));
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    let pid: i32 = said
        .split("(pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {said}"));
    wait_for("the detached run to exit", Duration::from_secs(120), || {
        // Gone, or a zombie no one has reaped yet.
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
            s.split(") ").nth(1).is_some_and(|r| r.starts_with('Z'))
        })
    });
    let mut with_log = want.clone();
    with_log.insert("run.log".into());
    assert_eq!(check_finished("--detach", &bg), with_log, "--detach");

    for d in [headless, quit, hup, det, bg] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Two SIGINTs `gap` apart once the first level runs; how long the run took to end after the
/// second, and its results.
fn two_sigints(mut stop: impl FnMut(), wait: impl FnOnce() -> i32, dir: &Path) -> Duration {
    wait_for("the first level", Duration::from_secs(120), || {
        level_running(dir, 0)
    });
    // Requests in flight.
    std::thread::sleep(Duration::from_millis(500));
    stop();
    std::thread::sleep(Duration::from_millis(300));
    stop();
    let second = Instant::now();
    let code = wait();
    let took = second.elapsed();
    assert_eq!(code, 130, "interrupted");
    let v = state(dir).unwrap();
    assert_eq!(v["state"], "interrupted");
    let level = &v["sweep"][0];
    let cancelled = level["cancelled"].as_u64().unwrap();
    assert!(
        cancelled >= 1,
        "the in-flight request was cancelled and counted: {level}"
    );
    let written = run_files::read(dir, "requests.jsonl")
        .lines()
        .filter(|l| l.contains("\"status\":\"cancelled\"") && l.contains("\"warmup\":false"))
        .count() as u64;
    assert_eq!(
        written, cancelled,
        "every cancelled request is in requests.jsonl"
    );
    assert!(
        dir.join("report.html").is_file(),
        "an interrupted run ends with its report.html too"
    );
    took
}

fn sigint(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

#[test]
fn a_second_ctrl_c_ends_the_run_at_once_whatever_the_grace() {
    assert!(
        have_setsid(),
        "setsid (util-linux) is needed to give servetop a terminal"
    );
    let (_sim, url) = sim();
    // Answers of 2000 tokens at 20 ms a token: 40 s in flight, against a grace of 60 s.
    let grace = Duration::from_secs(60);
    let extra = ["--grace", "60", "--warmup", "0"].map(String::from);

    let dir = tmp("twice-headless");
    let mut args = plan(&url, &dir, "2000");
    args.extend(extra.iter().cloned());
    args.push("--headless".into());
    let mut child = sim_child::KillOnDrop(
        Command::new(run_files::bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let took = two_sigints(
        || sigint(pid),
        || child.0.wait().unwrap().code().unwrap_or(-1),
        &dir,
    );
    eprintln!("headless: ended {took:?} after the second SIGINT (grace {grace:?})");
    assert!(
        took < grace / 4,
        "headless: {took:?} after the second SIGINT"
    );

    let dash = tmp("twice-dashboard");
    let mut args = plan(&url, &dash, "2000");
    args.extend(extra.iter().cloned());
    let mut t = OnTerminal::start(&args);
    let pid = t.child.0.id();
    let took = two_sigints(
        || sigint(pid),
        || t.wait(grace * 2).code().unwrap_or(-1),
        &dash,
    );
    eprintln!("dashboard: ended {took:?} after the second SIGINT (grace {grace:?})");
    assert!(
        took < grace / 4,
        "dashboard: {took:?} after the second SIGINT"
    );
    for d in [dir, dash] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn a_declined_plan_exits_with_its_own_code_and_runs_nothing() {
    assert!(
        have_setsid(),
        "setsid (util-linux) is needed to give servetop a terminal"
    );
    let (_sim, url) = sim();
    let dir = tmp("declined");
    let mut args = plan(&url, &dir, "40");
    // 21 levels: more than 20, so servetop asks first on a terminal.
    args[4] = "1-21".into();
    let mut t = OnTerminal::start(&args);
    // Answered before it is asked: the answer waits in the terminal's input.
    t.key(b"n\n");
    let status = t.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(4), "declined");
    assert!(!dir.exists(), "a declined plan made {}", dir.display());
}
