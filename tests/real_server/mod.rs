//! What the real-engine suites (`llama_server.rs`, `vllm_server.rs`) share: a free loopback
//! port, a bare `GET` that needs no runtime, and the engines' Prometheus counters read with a
//! few lines of their own (not servetop's parser, which these suites check).

// Each suite uses its own share of these.
#![allow(dead_code)]

pub mod llama;
pub mod vllm;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A bare `GET` on loopback with the standard library (servers start outside any runtime):
/// the status and the body.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(1),
    )
    .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.get(9..12)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|x| x.1.to_string())?;
    Some((status, body))
}

/// A `/metrics` page as text.
pub struct Prom(pub String);

impl Prom {
    /// Every series of `name` (exactly: `name{...} v` or `name v`) with its label text.
    pub fn series(&self, name: &str) -> Vec<(String, f64)> {
        self.0
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (key, value) = l.rsplit_once(' ')?;
                let (n, labels) = key.split_once('{').unwrap_or((key, ""));
                (n == name).then(|| (labels.to_string(), value.parse().unwrap()))
            })
            .collect()
    }

    /// The sum over every series of `name`; the name must be on the page.
    pub fn sum(&self, name: &str) -> f64 {
        let s = self.series(name);
        assert!(!s.is_empty(), "{name} missing from /metrics");
        s.iter().map(|x| x.1).sum()
    }

    /// `name{position="i"}` by position, in position order.
    pub fn per_position(&self, name: &str) -> Vec<(usize, f64)> {
        let mut v: Vec<(usize, f64)> = self
            .series(name)
            .into_iter()
            .map(|(labels, v)| {
                let p = labels
                    .split(',')
                    .find_map(|kv| kv.trim().strip_prefix("position=\""))
                    .and_then(|p| p.trim_end_matches(['"', '}']).parse().ok())
                    .unwrap_or_else(|| panic!("{name}{{{labels}}}: no position"));
                (p, v)
            })
            .collect();
        v.sort_by_key(|x| x.0);
        v
    }

    /// The growth of each position's counter since `before`, in position order.
    pub fn per_position_delta(&self, before: &Self, name: &str) -> Vec<f64> {
        let a = before.per_position(name);
        self.per_position(name)
            .iter()
            .map(|(p, v)| v - a.iter().find(|x| x.0 == *p).map_or(0.0, |x| x.1))
            .collect()
    }
}

/// A suite whose engine is not installed: fails under `require_var=1` (CI), else says once,
/// straight to stderr past the harness's capture, that the suite skipped and why.
pub fn skip(suite: &str, require_var: &str, why: &str) {
    assert!(
        std::env::var(require_var).as_deref() != Ok("1"),
        "{why} — {require_var}=1 makes this a failure"
    );
    static SAID: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    SAID.get_or_init(|| {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED the {suite} tests: {}",
            why.split_once(": ").map_or(why, |x| x.1)
        );
    });
}

/// The machine's busy CPU time and this process's with its descendants' (a server it
/// started), in clock ticks.
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let all: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
    let busy =
        all.iter().take(8).sum::<u64>() - all.get(3).unwrap_or(&0) - all.get(4).unwrap_or(&0);
    // Every process: (pid, parent, utime + stime), read after the `)` that ends its name.
    let procs: Vec<(u32, u32, u64)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let s = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
            let t = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some((pid, f.get(1)?.parse().ok()?, t))
        })
        .collect();
    let mut ours = vec![std::process::id()];
    let mut i = 0;
    while i < ours.len() {
        let parent = ours[i];
        ours.extend(procs.iter().filter(|p| p.1 == parent).map(|p| p.0));
        i += 1;
    }
    let own = procs
        .iter()
        .filter(|p| ours.contains(&p.0))
        .map(|p| p.2)
        .sum();
    (busy, own)
}

/// Cores other processes than this one and its descendants kept busy over `over`.
fn others_busy_cores(over: Duration) -> f64 {
    let (b0, o0) = cpu_ticks();
    std::thread::sleep(over);
    let (b1, o1) = cpu_ticks();
    // Clock ticks are 1/100 s on Linux (USER_HZ).
    b1.saturating_sub(b0).saturating_sub(o1.saturating_sub(o0)) as f64 / 100.0 / over.as_secs_f64()
}

/// Why a real engine's timings could not be the engine's now, if so: other processes (a compile
/// beside the tests) kept half a core or more busy in each of five one-second looks. An engine
/// that shares a core with a compile runs at its pace, so a suite checking its timings skips
/// (failing under its `SERVETOP_REQUIRE_*`) instead of judging either.
pub fn machine_busy() -> Option<String> {
    let mut least = f64::MAX;
    for _ in 0..5 {
        let busy = others_busy_cores(Duration::from_secs(1));
        if busy < 0.5 {
            return None;
        }
        least = least.min(busy);
    }
    Some(format!(
        "other processes kept at least {least:.1} of this machine's {} cores busy in each of five one-second looks (a compile beside the tests?): a server or proxy sharing a core with them is not timed at its own pace",
        cores()
    ))
}

/// Whether `suite`'s test `test` can time its engine now: when the machine is busy it says
/// why and skips (a failure under `require_var=1`).
pub fn quiet_enough(suite: &str, require_var: &str, test: &str) -> bool {
    let Some(why) = machine_busy() else {
        return true;
    };
    assert!(
        std::env::var(require_var).as_deref() != Ok("1"),
        "{test}: {why} — {require_var}=1 makes this a failure"
    );
    let _ = writeln!(std::io::stderr(), "SKIPPED {suite} {test}: {why}");
    false
}

/// Cores of this machine.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Keeps this process (the client) on `cpus` (a taskset list), once, so client and server do
/// not fight for one core.
pub fn pin_client(cpus: &str) {
    static PINNED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    PINNED.get_or_init(|| {
        let _ = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", cpus])
            .arg(std::process::id().to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    });
}

/// A fresh run directory for `suite`'s test `name` in the temporary folder.
pub fn temp_run_dir(suite: &str, name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-{suite}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Every record of a run directory's requests.jsonl (none while it does not exist yet).
pub fn records(dir: &std::path::Path) -> Vec<servetop::metrics::RequestRecord> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A run directory's results.json.
pub fn results(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

/// The process ids whose command line holds `needle` (read from /proc).
pub fn pids_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(needle)
            })
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Waits (for the state, up to 20 s) until no process started with `--port {port}` runs.
pub fn server_gone(port: u64) -> bool {
    let needle = format!("--port {port} ");
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if pids_with(&needle).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Waits until the first level of the run writing `dir` is under way (read from
/// results.json); the port of the server servetop started for it.
pub fn first_level_running(dir: &std::path::Path) -> u64 {
    let t = std::time::Instant::now();
    loop {
        let r = std::fs::read(dir.join("results.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        if let Some(r) = r
            && r["sweep"][0]["status"] == "running"
        {
            return r["servers"][0]["port"].as_u64().unwrap();
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the level never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The context each server servetop started was given, in order (results.json `servers`).
pub fn server_contexts(r: &serde_json::Value) -> Vec<u64> {
    r["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["context_len"].as_u64().unwrap())
        .collect()
}

/// Each long-context length's status and the index of the server that measured it.
pub fn measured_by(r: &serde_json::Value) -> Vec<(String, u64)> {
    r["long_context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["status"].as_str().unwrap().to_string(),
                l["server_index"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// A run whose server was killed (SIGKILL) during its first sweep level and restarted with
/// `--restart-on-crash`: that level says how the server died (with its last log lines) and kept
/// fewer than its `requests`; the second was measured whole by the new server.
pub fn assert_crash_recorded_and_restarted(r: &serde_json::Value, requests: u64) {
    let first = &r["sweep"][0];
    let crash = first["server_crash"].as_str().unwrap_or_default();
    assert!(
        crash.contains("killed by signal 9") || crash.contains("exited with code 137"),
        "{crash}"
    );
    assert!(crash.contains("last log lines: "), "{crash}");
    assert!(first["completed"].as_u64().unwrap() < requests, "{first}");
    assert_eq!(first["server_index"].as_u64(), Some(0));
    let second = &r["sweep"][1];
    assert_eq!(second["status"], "done", "{second}");
    assert_eq!(second["completed"].as_u64(), Some(requests), "{second}");
    assert_eq!(second["server_index"].as_u64(), Some(1));
    assert_eq!(r["servers"].as_array().unwrap().len(), 2);
}

/// The sweep levels of a `--thinking-budget` run against a real engine: every measured request
/// of `records` thought exactly its level's budget (one more only where its last thinking chunk
/// holds an event of more than one token, which may hold the forced `</think>`) and produced
/// `output` tokens, and TTFC − TTFT spans the thinking's steps — the budget's tokens and
/// `closing(r)` more (the forced `</think>`) — at the request's own time per output token: the
/// level's median at least 70 % of that, and at C=1 at most 130 % (at C=2 the other request's
/// prefill may land inside the thinking, which only lengthens it). A median of at least 8 requests, as one request's stall
/// (a level's first may start cold; on 2 cores a 25 ms pause of the engine is 30 % of a
/// 12-token thinking) moves its own ratio either way: a CI run with 4 a level once saw two of
/// them stalled ([0.91, 1.02, 1.31, 1.33]). Each level's ratios are printed.
pub fn thinking_took_its_budget(
    s: &servetop::run::session::Session,
    records: &[servetop::metrics::RequestRecord],
    output: u32,
    closing: impl Fn(&servetop::metrics::RequestRecord) -> f64,
) {
    println!(
        "| level | TTFT p50 (ms) | TTFC p50 (ms) | thinking p50 (ms) | reasoning / answer tokens | thinking / (steps × TPOT) |"
    );
    for l in &s.summary.sweep {
        let st = l.stats.as_ref().unwrap();
        let d = &st.dists;
        let budget = l.thinking_budget.unwrap();
        assert_eq!(st.scalars.unanswered_requests, 0, "{}", l.label());
        let mine: Vec<_> = records
            .iter()
            .filter(|r| r.level == l.index && !r.warmup)
            .collect();
        assert_eq!(mine.len() as u64, st.scalars.completed, "{}", l.label());
        assert!(mine.len() >= 8, "{}: {} requests", l.label(), mine.len());
        let mut ratios = Vec::new();
        for r in &mine {
            assert_eq!(r.output_tokens, u64::from(output), "{r:?}");
            // The forced `</think>` in the last thinking event is counted as thinking: an engine
            // that merges it with the token before (vLLM, when its API server lags its engine)
            // sends one event of two tokens, which no count per event can split.
            let ttfc = r.ttfc_us.unwrap();
            let last_thinking = r.chunks.iter().rfind(|c| c.t_us < ttfc);
            let merged_tag = last_thinking.is_some_and(|c| c.tokens > c.events);
            let thought = r.reasoning_tokens.unwrap_or(0);
            assert!(
                thought == u64::from(budget) || merged_tag && thought == u64::from(budget) + 1,
                "{}: a request of budget {budget} thought {:?} tokens (the last thinking chunk {last_thinking:?})",
                l.label(),
                r.reasoning_tokens,
            );
            assert!(!r.think_tags, "{r:?}");
            let steps = f64::from(budget) + closing(r);
            let per_token = r.tpot_us().unwrap();
            let thinking = r.thinking_us().unwrap() as f64;
            assert!(
                thinking > 0.0,
                "{}: the answer began with the first token",
                l.label()
            );
            ratios.push(thinking / (steps * per_token));
        }
        ratios.sort_by(f64::total_cmp);
        let n = ratios.len();
        let median = f64::midpoint(ratios[(n - 1) / 2], ratios[n / 2]);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:?} / {:?} | {ratios:.2?} |",
            l.label(),
            d.ttft_ms.as_ref().unwrap().p50,
            d.ttfc_ms.as_ref().unwrap().p50,
            d.thinking_ms.as_ref().unwrap().p50,
            st.scalars.mean_reasoning_tokens,
            st.scalars.mean_content_tokens
        );
        let ceiling = if l.concurrency == 1 {
            1.3
        } else {
            f64::INFINITY
        };
        assert!(
            (0.7..=ceiling).contains(&median),
            "{}: TTFC − TTFT over the thinking's steps at the request's time per token: median {median:.2}× ({ratios:.2?})",
            l.label()
        );
    }
}

/// The warnings of `s` that begin with `label: ` and say `what`.
pub fn warnings_of<'a>(
    s: &'a servetop::run::session::Session,
    label: &str,
    what: &str,
) -> Vec<&'a String> {
    s.summary
        .warnings
        .iter()
        .filter(|w| w.starts_with(&format!("{label}: ")) && w.contains(what))
        .collect()
}

/// The one warning of `s` about `label` that says every one of `says` (a panic, listing the
/// run's warnings, when there is none or more than one), printed under `name`.
pub fn the_warning<'a>(
    s: &'a servetop::run::session::Session,
    name: &str,
    label: &str,
    says: &[&str],
) -> &'a String {
    let found: Vec<&String> = s
        .summary
        .warnings
        .iter()
        .filter(|w| w.starts_with(&format!("{label}: ")) && says.iter().all(|x| w.contains(x)))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{label}: {says:?} in {:?}",
        s.summary.warnings
    );
    println!("{name}: {}", found[0]);
    found[0]
}

/// The Messages-API check both suites run (`--backend anthropic`): a sweep level of 6 requests
/// at C=2, then 4 agent sessions of 3 turns for 2 users, no tool wait, the 128-token shared
/// prefix going as the `system` prompt; over `base` (the suite's own settings and server).
pub fn messages_plan(base: servetop::config::RunConfig) -> servetop::config::RunConfig {
    use servetop::workload::sessions::{Sessions, ToolWait, ToolWaitDist};
    servetop::config::RunConfig {
        backend: servetop::config::BackendChoice::Anthropic,
        concurrency: vec![2],
        requests_per_level: servetop::workload::RequestCount::Fixed(6),
        input_len: 200,
        output_len: 24,
        shared_prefix_len: 128,
        sessions: Some(Sessions {
            levels: vec![2],
            per_level: servetop::workload::RequestCount::Fixed(4),
            turns: 3,
            tool_wait: ToolWait {
                dist: ToolWaitDist::Fixed { s: 0.0 },
                cap_s: None,
            },
            tool_result_len: 100,
            fan_out: 0,
            sub_agent_turns: 0,
            think_time: None,
            rates: Vec::new(),
        }),
        ..base
    }
}

/// The Messages check's records: every one completed, and the sweep's 6 and the sessions' 12
/// turns measured.
pub fn messages_records(dir: &std::path::Path) -> Vec<servetop::metrics::RequestRecord> {
    let recs = records(dir);
    let failed: Vec<String> = recs
        .iter()
        .filter(|r| !r.is_ok())
        .map(|r| format!("{:?}", r.outcome))
        .collect();
    assert!(failed.is_empty(), "every request completed: {failed:?}");
    assert_eq!(
        recs.iter().filter(|r| !r.warmup).count(),
        6 + 4 * 3,
        "the sweep's requests and the sessions' turns"
    );
    recs
}
