//! Watching a run from elsewhere (docs/outputs.md "events.jsonl and live.sock"), through the
//! real binary against the in-process simulator:
//!
//! 1. A finished run browsed: its journal folded by a viewer gives results.json exactly (every
//!    key but the time it was written), and `servetop attach DIR` off a terminal prints the
//!    tables the run printed, byte for byte.
//! 2. A run going on, followed on its live.sock by two viewers (one from the start, one
//!    mid-run) while a third connection never reads: both viewers end on the run's own
//!    results.json; `attach --list` names the run while it goes and not after; the socket is
//!    gone at the end.
//! 3. A viewer stops the run: `stop` on the socket ends it as a confirmed quit does (exit
//!    130, `interrupted`).
//! 4. At instants while a run goes on, a viewer shows what the simulator has served by then
//!    (its own record, read just before and after) and the level those requests place it in.
//! 5. `run --detach` returns once the run goes on in a process of its own, which a SIGHUP does
//!    not stop; it finishes with its output in `<run dir>/run.log`.
//!
//! Every expected value is the run's own file: machine load cannot move a check.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use servetop::live::source::{self, Origin};
use servetop::sim::{self, AcceptLength, SimConfig};
use servetop::tui::viewer::Viewer;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_servetop")
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-attach-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// results.json as a value, without the time it was written.
fn results(dir: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("updated_at");
    v
}

/// What a viewer folded, as results.json would have it.
fn folded(v: &Viewer) -> serde_json::Value {
    let mut s = serde_json::to_value(&v.app().session.summary).unwrap();
    s.as_object_mut().unwrap().remove("updated_at");
    s
}

/// The paths where `a` and `b` differ, with both values.
fn diff(path: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let null = Value::Null;
                diff(
                    &format!("{path}/{k}"),
                    x.get(k).unwrap_or(&null),
                    y.get(k).unwrap_or(&null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}/{i}"), p, q, out);
            }
        }
        _ if a != b => out.push(format!("{path}: {a} ≠ {b}")),
        _ => {}
    }
}

/// `a` and `b` are equal; else the paths where they differ.
fn assert_same(a: &serde_json::Value, b: &serde_json::Value) {
    let mut d = Vec::new();
    diff("", a, b, &mut d);
    assert!(d.is_empty(), "viewer ≠ results.json:\n{}", d.join("\n"));
}

fn run_args<'a>(url: &'a str, dir: &'a Path, concurrency: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--base-url",
        url,
        "--concurrency",
        concurrency,
        "--requests-per-level",
        "8",
        "--output-len",
        "30",
        "--long-context",
        "none",
        "--headless",
        "--no-gpu",
        "--grace",
        "0.3",
        "--out",
        dir.to_str().unwrap(),
    ]
}

/// What `servetop attach --list` prints with `registry` as the runtime directory.
fn list_runs(registry: &Path) -> String {
    let out = Command::new(bin())
        .args(["attach", "--list"])
        .env("SERVETOP_RUNTIME_DIR", registry)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(120), "waited for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sim_at_20ms(rt: &tokio::runtime::Runtime) -> sim::SimHandle {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 20.0;
    c.accept_length = AcceptLength::Fixed(1);
    rt.block_on(sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0))))
        .unwrap()
}

fn view_to_end(rt: &tokio::runtime::Runtime, origin: &Origin) -> Viewer {
    rt.block_on(async {
        let mut v = Viewer::open(source::open(origin).unwrap(), true)
            .await
            .unwrap();
        v.read_to_end().await;
        v
    })
}

#[test]
fn a_finished_run_browsed_is_the_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let h = sim_at_20ms(&rt);
    let dir = scratch("finished");
    let url = h.url();
    let run = Command::new(bin())
        .args(run_args(&url, &dir, "1,4"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        !dir.join("live.sock").exists(),
        "the socket goes with the run"
    );

    let origin = Origin::of_dir(&dir).unwrap();
    assert_eq!(origin, Origin::File(dir.join("events.jsonl")));
    let v = view_to_end(&rt, &origin);
    assert_same(&folded(&v), &results(&dir));

    let attach = Command::new(bin())
        .args(["attach", dir.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(attach.status.success());
    let printed = String::from_utf8(attach.stdout).unwrap();
    let ran = String::from_utf8(run.stdout).unwrap();
    assert!(printed.len() > 200, "{printed}");
    assert!(
        ran.contains(&printed),
        "run printed:\n{ran}\nattach printed:\n{printed}"
    );

    // A journal that stops before the run's end (its process was killed): browsed, it says so.
    let cut = scratch("killed");
    std::fs::create_dir_all(&cut).unwrap();
    let journal = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let upto: String = journal
        .lines()
        .take_while(|l| !l.contains("\"run_finished\""))
        .flat_map(|l| [l, "\n"])
        .collect();
    std::fs::write(cut.join("events.jsonl"), upto).unwrap();
    let v = view_to_end(&rt, &Origin::of_dir(&cut).unwrap());
    assert_eq!(
        v.app().session.summary.state,
        servetop::event::RunState::Running
    );
    assert!(
        v.app().session.phase.contains("process is gone"),
        "{}",
        v.app().session.phase
    );
    std::fs::remove_dir_all(&cut).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn viewers_follow_a_run_going_on_and_a_stalled_one_changes_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let h = sim_at_20ms(&rt);
    let dir = scratch("live");
    let registry = scratch("live-registry");
    let url = h.url();
    let mut child = Command::new(bin())
        .args(run_args(&url, &dir, "1,2,4"))
        .env("SERVETOP_RUNTIME_DIR", &registry)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.join("live.sock");
    wait_for("live.sock", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    // A viewer that connects and never reads.
    let stalled = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    let listed = list_runs(&registry);
    assert!(
        listed.contains(&format!("{}", child.id())) && listed.contains("servetop-attach-live-"),
        "{listed}"
    );
    let origin = Origin::of_dir(&dir).unwrap();
    assert_eq!(origin, Origin::Socket(socket.clone()));
    let first = std::thread::spawn({
        let origin = origin.clone();
        move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            folded(&view_to_end(&rt, &origin))
        }
    });
    // The second viewer comes once the run is past its first level.
    wait_for("the second level", || {
        std::fs::read_to_string(dir.join("events.jsonl"))
            .is_ok_and(|j| j.matches("\"level_finished\"").count() >= 1)
    });
    let second = folded(&view_to_end(&rt, &origin));
    let status = child.wait().unwrap();
    assert!(status.success());
    let want = results(&dir);
    assert_same(&second, &want);
    assert_same(&first.join().unwrap(), &want);
    assert!(!socket.exists());
    assert!(
        !list_runs(&registry).contains("servetop-attach-live-"),
        "an ended run is not listed"
    );
    drop(stalled);
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&registry).unwrap();
}

#[test]
fn a_viewer_on_the_socket_stops_the_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let h = sim_at_20ms(&rt);
    let dir = scratch("stop");
    let url = h.url();
    let mut child = Command::new(bin())
        .args(run_args(&url, &dir, "1,2,4,8"))
        .env("SERVETOP_RUNTIME_DIR", scratch("stop-registry"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.join("live.sock");
    let mut s = loop {
        if let Ok(s) = std::os::unix::net::UnixStream::connect(&socket) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    s.write_all(b"stop\n").unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert_eq!(results(&dir)["state"], "interrupted");
    std::fs::remove_dir_all(&dir).unwrap();
    let _ = std::fs::remove_dir_all(scratch("stop-registry"));
}

#[test]
fn a_detached_run_goes_on_alone_and_a_hangup_does_not_stop_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let h = sim_at_20ms(&rt);
    let dir = scratch("detached");
    let registry = scratch("detached-registry");
    let url = h.url();
    let mut args = run_args(&url, &dir, "1,2,4");
    args.push("--detach");
    let parent = Command::new(bin())
        .args(&args)
        .env("SERVETOP_RUNTIME_DIR", &registry)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&parent.stderr);
    assert!(parent.status.success(), "{said}");
    assert!(
        said.contains(&format!("servetop attach {}", dir.display())),
        "{said}"
    );
    let listed = list_runs(&registry);
    let pid = listed
        .lines()
        .find(|l| l.contains("servetop-attach-detached-"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("the detached run is listed: {listed}"))
        .to_string();
    let hup = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    assert!(hup.success());
    wait_for("the detached run's end", || {
        std::fs::read(dir.join("results.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v["state"] != "running")
    });
    assert_eq!(results(&dir)["state"], "finished", "SIGHUP did not stop it");
    // Its last line: where its results are.
    wait_for("the detached run's last line", || {
        std::fs::read_to_string(dir.join("run.log")).is_ok_and(|l| l.contains("results: "))
    });
    let log = std::fs::read_to_string(dir.join("run.log")).unwrap();
    assert!(log.contains("C=4"), "its tables are in run.log: {log}");
    std::fs::remove_dir_all(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&registry);
}

/// Requests the simulator has finished serving, completed, so far.
fn served(h: &sim::SimHandle) -> u64 {
    h.log
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.completed)
        .count() as u64
}

/// The viewer's count of finished requests over all levels, and the level it says runs.
fn viewed(v: &Viewer) -> (u64, Option<u32>) {
    let s = &v.app().session;
    (s.progress.values().map(|p| p.finished).sum(), s.current)
}

/// At instants while a run goes on, a viewer on its live.sock shows what the simulator has
/// served by then: once the simulator has finished `before` requests, the viewer catches up to
/// at least that many while the run still has requests to serve (a feed that holds its lines
/// back until the end shows them too late), never more than the simulator has finished at that
/// moment (`after`), and it names as running the level those requests place the run in (levels
/// of `PER_LEVEL` requests each, one after the other).
#[test]
fn a_viewer_shows_what_the_simulator_has_served_while_the_run_goes_on() {
    const PER_LEVEL: u64 = 12;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let h = sim_at_20ms(&rt);
    let dir = scratch("instants");
    let url = h.url();
    let per_level = PER_LEVEL.to_string();
    let mut args = run_args(&url, &dir, "1,4");
    let n = args
        .iter()
        .position(|a| *a == "--requests-per-level")
        .unwrap();
    args[n + 1] = &per_level;
    args.extend(["--warmup", "0"]);
    let mut child = Command::new(bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.join("live.sock");
    wait_for("live.sock", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    let origin = Origin::of_dir(&dir).unwrap();
    let total = 2 * PER_LEVEL;
    let looks = rt.block_on(async {
        let mut v = Viewer::open(source::open(&origin).unwrap(), true)
            .await
            .unwrap();
        let (mut looks, mut levels_compared) = (Vec::new(), 0);
        // Two instants in the first level (C=1, 0.6 s a request), one in the second.
        for at in [3, 8, PER_LEVEL + 2] {
            while served(&h) < at {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let before = served(&h);
            let seen = loop {
                v.catch_up();
                let (seen, level) = viewed(&v);
                let after = served(&h);
                assert!(seen <= after, "the viewer shows {seen} finished, the simulator {after}");
                if seen >= before {
                    break (seen, level, after);
                }
                assert!(
                    after < total,
                    "the viewer showed {seen} of the {before} requests served at {at} only once the run had served them all"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            };
            looks.push((before, seen));
            let (seen, level, after) = seen;
            // The level the simulator is serving, by the requests it has finished (when
            // `before` and `after` place it in the same one, and not on its last request).
            if before / PER_LEVEL == after / PER_LEVEL && after % PER_LEVEL != 0 {
                assert_eq!(
                    level,
                    Some(u32::try_from(after / PER_LEVEL).unwrap()),
                    "at {seen} finished (simulator {before}..{after})"
                );
                levels_compared += 1;
            }
        }
        assert!(levels_compared >= 2, "{looks:?}");
        v.read_to_end().await;
        looks
    });
    assert!(child.wait().unwrap().success());
    assert_eq!(served(&h), total);
    assert_eq!(looks.len(), 3, "{looks:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
