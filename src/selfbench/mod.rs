//! `servetop bench-client`: how fast and how accurate the client is, measured against the
//! firehose simulator on this machine.
//!
//! Layout: the firehose runs as one child process pinned to CPU 0; every case is a fresh child
//! process (`servetop bench-case`) pinned to CPU 1 that runs one level through the product's own
//! code path (prepare, runner, client, session, requests.jsonl; and for `dashboard` the real
//! dashboard loop drawing at 10 fps into a terminal that goes nowhere). A fresh process per case
//! makes its peak RSS its own.
//!
//! - Capacity: output tokens/s and chunks/s over the level's window, and client CPU seconds per
//!   million tokens, with the firehose writing as fast as it can.
//! - Accuracy: the firehose paced (one write every `--pace-ms` per stream) records the wall-clock
//!   time of each write per `X-Request-Id`; the client's record of when each token event arrived,
//!   placed on the same clock through the level's `origin_unix_us`, minus the write time, is the
//!   timing error (the first event's is the TTFT error).
//! - Memory: each case's peak RSS, and a long-context case (C=100, 100K-token prompts).
//! - The ceiling: every capacity case also runs the [`mod@reference`] reader, the least a client can
//!   do to read the same streams, against the same firehose on the same core; servetop's tokens/s
//!   and CPU per token are reported as ratios to it, measured minutes apart at most, so they
//!   mean the same on a fast machine and a slow one.
//!
//! Each repeat's cases go under `DIR/repeat-N/`, with that repeat's rows in
//! `DIR/repeat-N/bench-client.json`; every row of every repeat is in `DIR/bench-client.json`.

mod agent;
mod case;
pub mod reference;
mod report;
mod sched;
pub mod soak;
mod timing;
pub mod wave;

use case::REFERENCE;
pub use case::case;
use report::print_case;
pub use report::{medians, print};
pub use timing::UNHELD_LATE_US;
use timing::add_timing_errors;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cli::BenchClientArgs;

/// What one case measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CaseResult {
    pub kind: String,
    pub concurrency: u32,
    pub ui: String,
    pub events_per_write: u32,
    pub input_len: u64,
    pub output_len: u32,
    pub requests: u32,
    pub completed: u64,
    pub failed: u64,
    pub tokens: u64,
    pub chunks: u64,
    pub duration_s: f64,
    pub tokens_per_s: f64,
    pub chunks_per_s: f64,
    /// Client CPU (user + system) during the level.
    pub cpu_s: f64,
    pub cpu_s_per_million_tokens: f64,
    pub peak_rss_mb: f64,
    /// The firehose's CPU over the level, in % of one core: near 100 means the server, not the
    /// client, was the limit.
    pub server_cpu_pct: f64,
    /// The level's time zero (µs since the Unix epoch), to place other readings in its window.
    pub origin_unix_us: u64,
    /// Accuracy cases: client arrival minus the firehose's write time, over every token event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_error_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing_error_p99_ms: Option<f64>,
    /// Paced cases: how late the firehose wrote, p99 over its writes, against when each was due
    /// (a step after the last; [`crate::sim::firehose::STEP_SLACK`]). Above
    /// [`SERVER_LATE_MS`] the firehose could not keep the asked pace on its core: the case ran
    /// at a lower event rate than asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_late_p99_ms: Option<f64>,
    /// servetop's cases: how long, over the level, the runtime's threads that read the streams
    /// were ready to run and waited for a CPU (their own process's other threads, another
    /// process on the core, the hypervisor), and the hypervisor's steal on the case's CPUs
    /// (`selfbench::sched`). A paced stream falls a step behind when its reader loses the core for
    /// about a step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader_wait_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ms: Option<f64>,
    /// The same for each request's first event (the TTFT error).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_error_p50_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_error_p99_ms: Option<f64>,
    /// servetop's cases: the level's held reads (docs/metrics.md "Held reads"); accuracy and
    /// wave cases: the token events stamped more than [`UNHELD_LATE_US`] after their write
    /// ended in requests that counted no held read (the flag's promise is that there are none).
    /// `--json`'s medians keep the most of any repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_reads: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_unheld_events: Option<u64>,
    /// Accuracy, wave and agent cases: the token events timed against the firehose's record,
    /// and those stamped more than [`UNHELD_LATE_US`] after their write ended, held or not
    /// (`--json` keeps the repeat with the most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_events: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_events: Option<u64>,
    /// Capacity cases: the reference reader's tokens/s against the same firehose, on the same
    /// core, in the same repeat, and servetop's as a ratio to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_tokens_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_reference: Option<f64>,
    /// The reference reader's CPU per million tokens, and servetop's as a multiple of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_cpu_s_per_million_tokens: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_ratio_to_reference: Option<f64>,
    /// Dashboard cases: frames drawn a second over the whole case (asked: 10); below it where
    /// the streams' reads left the dashboard's thread too little of the core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_per_s: Option<f64>,
    /// Agent cases: the sessions that completed every turn, and the share of a completed
    /// session's time its user spent waiting on tools (mean tool wait over mean session).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions_completed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_wait_share: Option<f64>,
    /// Wave cases: each wave's start, how long it kept the client's core saturated, and its
    /// first tokens' timing error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<wave::Wave>,
}

/// A paced case whose firehose wrote later than this at the p99 ran below its asked pace.
pub const SERVER_LATE_MS: f64 = 5.0;

/// User + system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    cpu_seconds_of("self")
}

use crate::telemetry::client_load::cpu_seconds_of;

/// Puts the reference reader's figures, and servetop's ratios to them, on a capacity row.
pub fn against_reference(r: &mut CaseResult, reference: &CaseResult) {
    let (tok, cpu) = (reference.tokens_per_s, reference.cpu_s_per_million_tokens);
    r.reference_tokens_per_s = Some(tok);
    r.ratio_to_reference = (tok > 0.0).then(|| r.tokens_per_s / tok);
    r.reference_cpu_s_per_million_tokens = Some(cpu);
    r.cpu_ratio_to_reference = (cpu > 0.0).then(|| r.cpu_s_per_million_tokens / cpu);
}

/// A firehose child process.
struct Firehose {
    child: Child,
    url: String,
}

impl Drop for Firehose {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pinned(cpu: Option<&str>) -> Command {
    match cpu {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", c]);
            cmd.arg(std::env::current_exe().unwrap_or_else(|_| "servetop".into()));
            cmd
        }
        None => Command::new(std::env::current_exe().unwrap_or_else(|_| "servetop".into())),
    }
}

fn firehose(
    cpu: Option<&str>,
    events_per_write: u32,
    pace_ms: Option<f64>,
) -> Result<Firehose, String> {
    let mut cmd = pinned(cpu);
    cmd.args(["sim", "--firehose", "--port", "0"])
        .args(["--events-per-write", &events_per_write.to_string()]);
    if let Some(p) = pace_ms {
        cmd.args(["--decode-step-ms", &p.to_string(), "--record-writes"]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the firehose: {e}"))?;
    let mut url = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufReader::new(out).read_line(&mut url);
    }
    let url = url.trim().to_string();
    if !url.starts_with("http://") {
        let _ = child.kill();
        return Err("the firehose did not start".into());
    }
    Ok(Firehose { child, url })
}

struct Case<'a> {
    kind: &'a str,
    concurrency: u32,
    ui: &'a str,
    events_per_write: u32,
    input_len: u64,
    output_len: u32,
    requests: u32,
    record_chunks: bool,
    /// Agent cases: turns a session (0: not one) and the tool wait before each after the first.
    turns: u32,
    tool_wait: Option<&'a str>,
}

fn run_case(
    cpu: Option<&str>,
    fh: &Firehose,
    c: &Case<'_>,
    dir: &Path,
) -> Result<CaseResult, String> {
    let url = fh.url.as_str();
    // The firehose's CPU every 20 ms, to take the level's window out of it afterwards.
    let pid = fh.child.id().to_string();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                v.push((crate::metrics::unix_us(), cpu_seconds_of(&pid)));
                std::thread::sleep(Duration::from_millis(20));
            }
            v
        })
    };
    let out = pinned(cpu)
        .args(["bench-case", "--url", url, "--kind", c.kind, "--ui", c.ui])
        .args(["--concurrency", &c.concurrency.to_string()])
        .args(["--events-per-write", &c.events_per_write.to_string()])
        .args(["--input-len", &c.input_len.to_string()])
        .args(["--output-len", &c.output_len.to_string()])
        .args(["--requests", &c.requests.to_string()])
        .args(if c.record_chunks {
            &["--record-chunks"][..]
        } else {
            &[][..]
        })
        .args(["--turns", &c.turns.to_string()])
        .args(
            c.tool_wait
                .map(|w| ["--tool-wait", w])
                .into_iter()
                .flatten(),
        )
        .arg("--out")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start a case: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .ok_or_else(|| {
            format!(
                "case C={} {} failed: {}",
                c.concurrency,
                c.ui,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
    let mut r: CaseResult = serde_json::from_str(line).map_err(|e| format!("case output: {e}"))?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let readings = sampler.join().unwrap_or_default();
    let end = r.origin_unix_us + (r.duration_s * 1e6) as u64;
    let at = |t: u64| {
        readings
            .iter()
            .find(|(ts, _)| *ts >= t)
            .or(readings.last())
            .map_or(0.0, |x| x.1)
    };
    if r.duration_s > 0.0 {
        r.server_cpu_pct = (at(end) - at(r.origin_unix_us)) / r.duration_s * 100.0;
    }
    Ok(r)
}

/// A case on a fresh firehose paced at `--pace-ms` (one event a write, every write recorded),
/// with its timing errors against the firehose's record; and what the waves are made of.
fn paced_case(
    a: &BenchClientArgs,
    (sim_cpu, client_cpu): (Option<&str>, Option<&str>),
    case: &Case<'_>,
    dir: &Path,
) -> Result<(CaseResult, Vec<wave::Sent>), String> {
    let fh = firehose(sim_cpu, 1, Some(a.pace_ms))?;
    let mut r = run_case(client_cpu, &fh, case, dir)?;
    let sent = add_timing_errors(&mut r, &fh.url, dir)?;
    Ok((r, sent))
}

/// The capacity cases of one repeat, each beside the reference reader on the same firehose.
fn capacity_cases(
    a: &BenchClientArgs,
    (sim_cpu, client_cpu): (Option<&str>, Option<&str>),
    next_dir: &mut impl FnMut() -> PathBuf,
) -> Result<Vec<CaseResult>, String> {
    let mut rows = Vec::new();
    if a.concurrency.0.is_empty() {
        return Ok(rows);
    }
    for &epw in &a.events_per_write.0 {
        let fh = firehose(sim_cpu, epw as u32, None)?;
        for &c in &a.concurrency.0 {
            let case = |kind, ui| Case {
                kind,
                concurrency: c as u32,
                ui,
                events_per_write: epw as u32,
                input_len: a.input_len,
                output_len: a.output_len,
                requests: capacity_requests(a, c as u32),
                record_chunks: false,
                turns: 0,
                tool_wait: None,
            };
            for ui in &a.ui {
                // The reference right before each case: the machine's speed drifts by more
                // than the difference being measured within a minute.
                let reference = run_case(client_cpu, &fh, &case(REFERENCE, "none"), &next_dir())?;
                eprintln!(
                    "  reference C={:<5} epw={:<2} {:>10.0} tok/s  cpu {:>5.2} s/Mtok",
                    c, epw, reference.tokens_per_s, reference.cpu_s_per_million_tokens
                );
                let mut r = run_case(client_cpu, &fh, &case("capacity", ui), &next_dir())?;
                against_reference(&mut r, &reference);
                print_case(&r);
                rows.push(r);
            }
        }
    }
    Ok(rows)
}

/// Requests of a capacity case at `c` streams: `--requests-per-stream` each, at least
/// `--min-requests`, and enough to read `--min-tokens`.
fn capacity_requests(a: &BenchClientArgs, c: u32) -> u32 {
    let for_tokens = a.min_tokens.div_ceil(u64::from(a.output_len.max(1)));
    (c.saturating_mul(a.requests_per_stream))
        .max(a.min_requests)
        .max(u32::try_from(for_tokens).unwrap_or(u32::MAX))
}

/// The agent cases' flags, refused before any case runs.
pub fn check_agent_args(a: &BenchClientArgs) -> Result<(), String> {
    agent::sessions(1, a.agent_turns, &a.agent_tool_wait).map(|_| ())
}

/// `--out` refused where it holds a bench-client run already: its cases' directories would be
/// written again, each case's records added to the earlier run's (and its timing errors read
/// against both), before any case runs.
pub fn check_out(a: &BenchClientArgs) -> Result<(), String> {
    let Some(d) = &a.out else { return Ok(()) };
    match ["bench-client.json", "repeat-1"]
        .into_iter()
        .find(|f| d.join(f).exists())
    {
        Some(f) => Err(format!(
            "--out {}: it holds a bench-client run already ({f}); give another directory",
            d.display()
        )),
        None => Ok(()),
    }
}

/// `servetop bench-client`.
pub fn bench_client(a: &BenchClientArgs) -> Result<Vec<CaseResult>, String> {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let taskset = Command::new("taskset")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let (sim_cpu, client_cpu) = if cpus >= 2 && taskset && !a.no_pin {
        (Some("0"), Some("1"))
    } else {
        (None, None)
    };
    let dir = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("runs").join(format!(
            "{}-bench-client",
            jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S")
        ))
    });
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    eprintln!(
        "SIMULATED firehose server. {}; cases under {}",
        match sim_cpu {
            Some(_) => "firehose pinned to CPU 0, client to CPU 1 (taskset)".to_string(),
            None => format!(
                "not pinned ({cpus} CPUs, taskset {})",
                if taskset { "found" } else { "missing" }
            ),
        },
        dir.display()
    );
    let mut out = Vec::new();
    let mut n = 0;
    for repeat in 1..=a.repeat.max(1) {
        let repeat_dir = dir.join(format!("repeat-{repeat}"));
        std::fs::create_dir_all(&repeat_dir)
            .map_err(|e| format!("cannot create {}: {e}", repeat_dir.display()))?;
        let mut next_dir = || {
            n += 1;
            repeat_dir.join(format!("case-{n:03}"))
        };
        let mut rows = capacity_cases(a, (sim_cpu, client_cpu), &mut next_dir)?;
        // Accuracy at a realistic pace.
        for &c in &a.accuracy_concurrency.0 {
            for ui in &a.ui {
                let case = Case {
                    kind: "accuracy",
                    concurrency: c as u32,
                    ui,
                    events_per_write: 1,
                    input_len: a.input_len,
                    output_len: a.accuracy_output_len,
                    requests: c as u32 * 2,
                    record_chunks: true,
                    turns: 0,
                    tool_wait: None,
                };
                let (r, _) = paced_case(a, (sim_cpu, client_cpu), &case, &next_dir())?;
                print_case(&r);
                rows.push(r);
            }
        }
        // Waves: a closed loop at a realistic pace, C streams ending and starting together.
        rows.extend(wave::cases(a, (sim_cpu, client_cpu), &mut next_dir)?);
        // Agents: users holding sessions, most of them waiting on a tool at any moment.
        rows.extend(agent::cases(a, (sim_cpu, client_cpu), &mut next_dir)?);
        // Memory with long prompts.
        if a.long_context_tokens > 0 {
            let fh = firehose(sim_cpu, 16, None)?;
            let case = Case {
                kind: "long-ctx",
                concurrency: 100,
                ui: "headless",
                events_per_write: 16,
                input_len: a.long_context_tokens,
                output_len: 64,
                requests: 200,
                record_chunks: false,
                turns: 0,
                tool_wait: None,
            };
            let r = run_case(client_cpu, &fh, &case, &next_dir())?;
            print_case(&r);
            rows.push(r);
        }
        write_rows(&repeat_dir.join("bench-client.json"), &rows)?;
        out.extend(rows);
    }
    write_rows(&dir.join("bench-client.json"), &out)?;
    Ok(out)
}

/// Rows as a JSON list.
fn write_rows(path: &Path, rows: &[CaseResult]) -> Result<(), String> {
    let json = serde_json::to_string_pretty(rows).map_err(|e| e.to_string())?;
    std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
