//! `--serve`: servetop starts the server itself (here its own simulator, through the real
//! binary), measures it, records how it was started, and stops it however the run ends.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_servetop")
}

fn results(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
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
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .contains(needle)
        })
    })
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
    let mut child = Command::new(bin())
        .args(run_args(&cmd, &dir, "400", &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait for the first level to be under way (a state, read from results.json).
    let t = Instant::now();
    let port = loop {
        let r = std::fs::read(dir.join("results.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        if let Some(r) = r
            && r["sweep"][0]["status"] == "running"
        {
            break r["servers"][0]["port"].as_u64().unwrap();
        }
        assert!(t.elapsed() < Duration::from_secs(60), "the level never ran");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(listening(port));
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(
        wait_gone(port),
        "the server on port {port} outlived servetop"
    );
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
    let contexts: Vec<u64> = r["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["context_len"].as_u64().unwrap())
        .collect();
    assert_eq!(contexts, [4096, 8192, 16384], "{stderr}");
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
