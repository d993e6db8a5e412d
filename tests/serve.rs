//! `--serve`: servetop starts the server itself (here its own simulator, through the real
//! binary), measures it, records how it was started, and stops it however the run ends.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod real_server;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use real_server::{first_level_running, pids_with, results, server_contexts};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_servetop")
}

/// The simulator as the command a user would give `--serve`, `{port}` and `{context_len}` in it.
fn sim_command() -> String {
    format!(
        "{} sim --port {{port}} --preset fast --context-length {{context_len}}",
        bin()
    )
}

/// Whether anything still listens on `port` of this host.
fn listening(port: u64) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], u16::try_from(port).unwrap()));
    std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

/// Whether a process whose command line holds `needle` still runs (read from /proc, so a
/// server that accepts no connection counts too).
fn running(needle: &str) -> bool {
    !pids_with(needle).is_empty()
}

/// Waits (for a state, not a duration) until no process of the server started on `port` runs
/// and nothing listens there.
fn wait_gone(port: u64) -> bool {
    let needle = format!("{port}");
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if !listening(port)
            && !running(&format!("--port {needle}"))
            && !running(&format!(", {needle})"))
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn run_args<'a>(cmd: &'a str, dir: &'a Path, requests: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "run",
        "--serve",
        cmd,
        "--context-len",
        "8192",
        "--concurrency",
        "1,2",
        "--requests-per-level",
        requests,
        "--output-len",
        "16",
        "--long-context",
        "none",
        "--headless",
        "--no-gpu",
        "--out",
        dir.to_str().unwrap(),
    ];
    a.extend_from_slice(extra);
    a
}

#[test]
fn a_served_simulator_is_measured_recorded_and_stopped() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cmd = sim_command();
    let out = Command::new(bin())
        .args(run_args(&cmd, &dir, "4", &[]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = results(&dir);
    // The command as run: the port servetop picked and the context it was given.
    let server = &r["servers"][0];
    let port = server["port"].as_u64().unwrap();
    let ran = server["command"].as_str().unwrap();
    assert!(ran.contains(&format!("--port {port} ")), "{ran}");
    assert!(ran.ends_with("--context-length 8192"), "{ran}");
    assert_eq!(server["context_len"].as_u64(), Some(8192));
    assert!(server["ready_s"].as_f64().unwrap() > 0.0);
    assert_eq!(r["servers"].as_array().unwrap().len(), 1);
    assert_eq!(r["config"]["serve"]["command"].as_str(), Some(cmd.as_str()));
    // The server it measured: the one it started, every level.
    assert_eq!(r["config"]["base_url"], format!("http://127.0.0.1:{port}"));
    for l in r["sweep"].as_array().unwrap() {
        assert_eq!(l["status"], "done");
        assert_eq!(l["server_index"].as_u64(), Some(0));
    }
    assert!(r["simulated"].as_bool().unwrap());
    // Its output went to server.log; the server is gone.
    let log = std::fs::read_to_string(dir.join("server.log")).unwrap();
    assert!(!log.trim().is_empty(), "server.log is empty");
    assert!(wait_gone(port), "the server on port {port} still runs");
    assert!(stderr.contains("[server] ready after"), "{stderr}");
}

#[test]
fn a_server_that_dies_before_it_is_ready_is_one_line_and_exit_1() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-dead-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cmd = "echo loading weights; echo CUDA out of memory >&2; exit 3";
    let out = Command::new(bin())
        .args(run_args(cmd, &dir, "4", &[]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("servetop: "))
        .unwrap_or_default();
    assert!(line.contains("exited with code 3"), "{stderr}");
    assert!(line.contains("CUDA out of memory"), "{stderr}");
    assert!(dir.join("server.log").exists());
}

#[test]
fn a_server_that_never_answers_is_stopped_at_the_timeout() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-mute-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Listens on the port (so it is taken) but never answers HTTP.
    let cmd = "python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); time.sleep(600)'";
    let out = Command::new(bin())
        .args(run_args(cmd, &dir, "4", &["--serve-timeout", "3"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not ready after 3 s"), "{stderr}");
    let port: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("[server] starting: "))
        .and_then(|c| c.split("(\"127.0.0.1\", ").nth(1))
        .and_then(|p| p.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert!(wait_gone(port), "the mute server on port {port} still runs");
}

#[test]
fn an_interrupted_run_stops_the_server_it_started() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-int-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cmd = sim_command();
    // Each way a user stops servetop from outside: Ctrl-C, `kill`, a dropped SSH session.
    for signal in ["INT", "TERM", "HUP"] {
        let mut child = Command::new(bin())
            .args(run_args(&cmd, &dir, "400", &[]))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let port = first_level_running(&dir);
        assert!(listening(port));
        let killed = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        assert_eq!(child.wait().unwrap().code(), Some(130), "SIG{signal}");
        assert!(
            wait_gone(port),
            "SIG{signal}: the server on port {port} outlived servetop"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The dashboard's terminal disappears mid-level (an SSH session dropped: the pseudo-terminal
/// `script` gave it is closed, so servetop gets SIGHUP and every write to the screen fails).
/// The dashboard detaches: the run and its server go on (more requests end after the terminal
/// is gone, results.json still says `running`). Stopped from its live feed as a viewer would,
/// it stops its server and leaves nothing running.
#[test]
fn a_dashboard_whose_terminal_disappears_detaches_and_the_run_goes_on() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-hup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let inner = format!(
        "{} run --serve '{}' --context-len 8192 --concurrency 1 --requests-per-level 2000 --output-len 16 --long-context none --no-gpu --out {}",
        bin(),
        sim_command(),
        dir.display()
    );
    // `script` runs the dashboard on a pseudo-terminal of its own; its stdin stays open.
    let mut term = Command::new("script")
        .args(["-qfec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let port = first_level_running(&dir);
    assert!(listening(port));
    // SIGKILL: the terminal goes without a word, as when the network drops.
    term.kill().unwrap();
    let _ = term.wait();
    let out = format!("--out {}", dir.display());
    let ended =
        || std::fs::read_to_string(dir.join("requests.jsonl")).map_or(0, |t| t.lines().count());
    let flushes = || {
        std::fs::read_to_string(dir.join("events.jsonl"))
            .map_or(0, |t| t.matches("\"live_tokens\"").count())
    };
    let gone_at = ended();
    let flushed_at = flushes();
    let t = Instant::now();
    while ended() < gone_at + 20 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        ended() >= gone_at + 20,
        "requests go on ending after the terminal is gone ({gone_at}, then {})",
        ended()
    );
    // Detached, the run still flushes its files and journal as it goes (viewers read them).
    assert!(
        flushes() >= flushed_at + 3,
        "the journal is flushed after the terminal is gone ({flushed_at}, then {})",
        flushes()
    );
    assert!(running(&out), "servetop goes on");
    assert!(listening(port), "so does its server");
    assert_eq!(results(&dir)["state"], "running");
    let mut feed = std::os::unix::net::UnixStream::connect(dir.join("live.sock")).unwrap();
    std::io::Write::write_all(&mut feed, b"stop\n").unwrap();
    assert!(
        wait_gone(port),
        "the server on port {port} outlived the run stopped from its feed"
    );
    let t = Instant::now();
    while running(&out) && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!running(&out), "servetop itself still runs");
    assert_eq!(results(&dir)["state"], "interrupted");
}

/// Kills (SIGKILL, as the kernel's OOM killer does) every process of the simulator serving
/// `port`: a crash servetop did not ask for.
fn crash_server(port: u64) {
    let pids = pids_with(&format!("sim --port {port} "));
    assert!(!pids.is_empty(), "no process serves port {port}");
    for pid in pids {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
    }
}

/// Runs the sweep (300 requests a level) with `extra` flags against the simulator, crashes the
/// server once the first level is under way, and waits for servetop: what it printed, and the
/// crashed server's port.
fn crash_mid_level(dir: &Path, extra: &[&str]) -> (std::process::Output, u64) {
    let _ = std::fs::remove_dir_all(dir);
    let cmd = sim_command();
    let child = Command::new(bin())
        .args(run_args(&cmd, dir, "300", extra))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let port = first_level_running(dir);
    crash_server(port);
    (child.wait_with_output().unwrap(), port)
}

/// A crash mid-level: the level records how the server exited (with its last log lines) and
/// keeps its failed requests; `--restart-on-crash` restarts it once, on the same port, and the
/// next level is measured whole by the new server.
#[test]
fn a_crash_mid_level_is_recorded_and_restart_on_crash_goes_on() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-crash-{}", std::process::id()));
    let (out, port) = crash_mid_level(&dir, &["--restart-on-crash"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = results(&dir);
    real_server::assert_crash_recorded_and_restarted(&r, 300);
    assert_eq!(r["servers"][1]["port"].as_u64(), Some(port), "{stderr}");
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("## Server crashes"), "{md}");
    assert!(
        wait_gone(port),
        "the restarted server on port {port} still runs"
    );
}

/// Without `--restart-on-crash` a crash ends the run (exit 1), saying how the server exited
/// and naming the flag; what was measured is saved.
#[test]
fn without_restart_on_crash_a_crash_stops_the_run_saying_how() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-crash1-{}", std::process::id()));
    let (out, port) = crash_mid_level(&dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let r = results(&dir);
    assert_eq!(r["state"], "aborted");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.contains("during C=1: server "), "{error}");
    assert!(error.contains("--restart-on-crash"), "{error}");
    assert_eq!(r["servers"].as_array().unwrap().len(), 1);
    assert_eq!(r["sweep"][1]["status"], "waiting", "{}", r["sweep"][1]);
    assert!(wait_gone(port));
}

/// `--serve-param`: the plan runs once per value, each server started with it, each run in
/// its own directory, and the comparison lands in the run directory. The known answer: with
/// one request running at a time (`--max-running 1`) the simulator queues three of four
/// requests at C=4, so TTFT there is many times that with room for four.
#[test]
fn a_serve_param_sweep_runs_each_configuration_and_compares_them() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cmd = sim_command();
    let mut args = run_args(&cmd, &dir, "12", &["--serve-param=--max-running=1,4"]);
    let c = args.iter().position(|a| *a == "1,2").unwrap();
    args[c] = "4";
    let out = Command::new(bin()).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ttft = |sub: &str, running: &str| {
        let r = results(&dir.join(sub));
        let ran = r["servers"][0]["command"].as_str().unwrap().to_string();
        assert!(ran.ends_with(&format!("--max-running {running}")), "{ran}");
        assert_eq!(r["config"]["serve"]["params"][0][1], running);
        let l = &r["sweep"][0];
        assert_eq!(l["completed"].as_u64(), Some(12));
        l["median_ttft_ms"].as_f64().unwrap()
    };
    let (one, four) = (ttft("max-running-1", "1"), ttft("max-running-4", "4"));
    assert!(
        one > 5.0 * four,
        "TTFT p50 {one} ms with 1 running, {four} ms with 4"
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.starts_with("# servetop comparison"), "{md}");
    assert!(md.contains("## --max-running 1") && md.contains("## --max-running 4"));
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(dir.join("charts/throughput.png").is_file());
}

/// The story servetop exists for: a server started with too small a context for the ladder.
/// The 6K and 12K lengths do not fit 4096 tokens; servetop restarts its server at the first
/// `--context-steps` value that holds each, and every length is measured, each by the server
/// results.json says.
#[test]
fn lengths_that_do_not_fit_restart_the_server_with_a_larger_context() {
    let dir = std::env::temp_dir().join(format!("servetop-serve-ladder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cmd = sim_command();
    let out = Command::new(bin())
        .args([
            "run",
            "--serve",
            &cmd,
            "--context-len",
            "4096",
            "--context-steps",
            "8192,16384",
            "--concurrency",
            "none",
            "--long-context",
            "2k,6k,12k",
            "--long-context-output-len",
            "16",
            "--long-context-repeats",
            "1",
            "--headless",
            "--no-gpu",
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r = results(&dir);
    assert_eq!(server_contexts(&r), [4096, 8192, 16384], "{stderr}");
    let port = r["servers"][0]["port"].as_u64().unwrap();
    for s in r["servers"].as_array().unwrap() {
        // The same port each time: the run's URL stays the server's.
        assert_eq!(s["port"].as_u64(), Some(port));
        assert!(s["ready_s"].as_f64().unwrap() > 0.0);
    }
    let levels = r["long_context"].as_array().unwrap();
    let measured: Vec<(u64, &str, u64)> = levels
        .iter()
        .map(|l| {
            (
                l["input_len"].as_u64().unwrap(),
                l["status"].as_str().unwrap(),
                l["server_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        measured,
        [(2000, "done", 0), (6000, "done", 1), (12000, "done", 2)]
    );
    assert_eq!(r["server"]["context_limit"].as_u64(), Some(16384));
    assert_eq!(
        stderr.matches("[server] restarted with context").count(),
        2,
        "{stderr}"
    );
    assert!(wait_gone(port), "the last server on port {port} still runs");
}
