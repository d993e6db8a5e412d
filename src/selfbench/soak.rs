//! `servetop soak`: the long-run memory benchmark. It starts the simulator with mixed faults and a
//! headless run against it as two child processes of this very binary (so each one's memory is
//! its own), samples both processes' resident memory from `/proc` while the run goes on, stops the
//! run with SIGINT at the deadline (the interrupted path users take), and prints how memory moved.
//!
//! Memory must stay bounded: per-request data is written to `requests.jsonl` and folded into
//! histograms; nothing per request stays in memory. A drift that grows with the request count
//! shows up here as a slope.

use std::io::{BufRead, Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cli::SoakArgs;

/// One reading of both processes.
#[derive(Clone, Debug, Serialize)]
pub struct SoakSample {
    pub elapsed_s: f64,
    pub client_rss_mb: f64,
    pub client_peak_rss_mb: f64,
    pub sim_rss_mb: f64,
    /// Records written to requests.jsonl so far (finished, failed or cancelled; warmup too).
    pub requests: u64,
}

/// What the soak found.
#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    pub simulated: bool,
    pub minutes: f64,
    pub concurrency: u32,
    pub inject: String,
    pub samples: Vec<SoakSample>,
    /// The first reading after the first minute (start-up and the first prompts done).
    pub start_rss_mb: f64,
    pub end_rss_mb: f64,
    pub drift_mb: f64,
    /// Least-squares slope of the client's RSS after the first minute, in MB per hour.
    pub slope_mb_per_hour: f64,
    /// The same per million requests.
    pub slope_mb_per_million_requests: f64,
    pub client_peak_rss_mb: f64,
    pub sim_start_rss_mb: f64,
    pub sim_end_rss_mb: f64,
    pub requests: u64,
    pub warmup_requests: u64,
    pub run_exit_code: Option<i32>,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub failures: serde_json::Value,
    pub warnings: usize,
    pub run_dir: PathBuf,
}

/// `/proc/PID/status` fields `VmRSS` and `VmHWM`, in MB.
pub fn rss_mb(pid: u32) -> Option<(f64, f64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

const WARMUP: &[u8] = b"\"warmup\":true";

/// Counts newlines appended to a file since the last call.
struct LineCounter {
    path: PathBuf,
    offset: u64,
    lines: u64,
    warmup: u64,
}

impl LineCounter {
    fn update(&mut self) -> u64 {
        if let Ok(mut f) = std::fs::File::open(&self.path)
            && f.seek(std::io::SeekFrom::Start(self.offset)).is_ok()
        {
            let mut buf = Vec::new();
            if let Ok(n) = f.read_to_end(&mut buf) {
                self.offset += n as u64;
                // Once per sample: not worth a crate.
                #[allow(clippy::naive_bytecount)]
                let n = buf.iter().filter(|&&b| b == b'\n').count() as u64;
                self.lines += n;
                self.warmup += buf.windows(WARMUP.len()).filter(|w| *w == WARMUP).count() as u64;
            }
        }
        self.lines
    }
}

struct Children {
    sim: Child,
    run: Option<Child>,
}

impl Drop for Children {
    fn drop(&mut self) {
        if let Some(r) = self.run.as_mut() {
            let _ = r.kill();
            let _ = r.wait();
        }
        let _ = self.sim.kill();
        let _ = self.sim.wait();
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status();
}

/// Least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if den > 0.0 { num / den } else { 0.0 }
}

/// A file of the soak's directory as a child's output.
fn log_file(dir: &Path, name: &str) -> Result<Stdio, String> {
    std::fs::File::create(dir.join(name))
        .map(Stdio::from)
        .map_err(|e| format!("cannot write {}: {e}", dir.join(name).display()))
}

/// `servetop sim` as a child on a free port, and the URL it printed (empty if it printed none).
fn spawn_sim(exe: &Path, a: &SoakArgs, dir: &Path) -> Result<(Child, String), String> {
    let mut sim = Command::new(exe)
        .args([
            "sim",
            "--port",
            "0",
            "--preset",
            "fast",
            "--accept-length",
            "1",
        ])
        .args(["--decode-step-ms", &a.decode_step_ms.to_string()])
        .args(["--inject", &a.inject])
        .stdout(Stdio::piped())
        .stderr(log_file(dir, "sim.log")?)
        .spawn()
        .map_err(|e| format!("cannot start the simulator: {e}"))?;
    let mut url = String::new();
    if let Some(out) = sim.stdout.take() {
        let _ = std::io::BufReader::new(out).read_line(&mut url);
    }
    Ok((sim, url.trim().to_string()))
}

/// `servetop run` as a child against `url`, with more requests than the deadline allows (the
/// soak ends it with SIGINT).
fn spawn_run(
    exe: &Path,
    a: &SoakArgs,
    url: &str,
    dir: &Path,
    run_dir: &Path,
) -> Result<Child, String> {
    Command::new(exe)
        .args(["run", "--base-url", url, "--headless", "--no-gpu"])
        .args(["--concurrency", &a.concurrency.to_string()])
        .args(["--input-len", &a.input_len.to_string()])
        .args(["--output-len", &a.output_len.to_string()])
        .args([
            "--requests-per-level",
            "100000000",
            "--long-context",
            "none",
        ])
        .args(["--first-token-timeout", "2", "--idle-timeout", "2"])
        .args(["--server-wait", "120", "--grace", "1"])
        .arg("--out")
        .arg(run_dir)
        .stdout(log_file(dir, "run.log")?)
        .stderr(log_file(dir, "run.err")?)
        .spawn()
        .map_err(|e| format!("cannot start the run: {e}"))
}

/// Runs the soak; the report, or a one-line reason it could not run.
pub fn soak(a: &SoakArgs) -> Result<SoakReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let dir = a.out.clone().unwrap_or_else(|| {
        PathBuf::from("runs").join(format!(
            "{}-soak",
            jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S")
        ))
    });
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let (sim, url) = spawn_sim(&exe, a, &dir)?;
    let mut children = Children { sim, run: None };
    if !url.starts_with("http://") {
        return Err(format!(
            "the simulator did not start (see {})",
            dir.join("sim.log").display()
        ));
    }
    let run_dir = dir.join("run");
    let run = spawn_run(&exe, a, &url, &dir, &run_dir)?;
    let run_pid = run.id();
    let sim_pid = children.sim.id();
    children.run = Some(run);

    let start = Instant::now();
    let deadline = Duration::from_secs_f64(a.minutes * 60.0);
    let mut lines = LineCounter {
        path: run_dir.join("requests.jsonl"),
        offset: 0,
        lines: 0,
        warmup: 0,
    };
    let mut samples = Vec::new();
    println!(
        "SIMULATED server, soak for {} min at C={} with --inject {}; both processes sampled every {} s",
        a.minutes, a.concurrency, a.inject, a.sample_s
    );
    println!(
        "{:>8} {:>14} {:>14} {:>11} {:>11} {:>8}",
        "minutes", "client RSS MB", "client peak MB", "sim RSS MB", "requests", "req/s"
    );
    let mut last: Option<(f64, u64)> = None;
    loop {
        let elapsed = start.elapsed();
        if let Some(Ok(Some(st))) = children.run.as_mut().map(Child::try_wait) {
            return Err(format!(
                "the run ended early ({st}); see {}",
                dir.join("run.err").display()
            ));
        }
        let (client, peak) = rss_mb(run_pid).unwrap_or((0.0, 0.0));
        let sim_rss = rss_mb(sim_pid).map_or(0.0, |r| r.0);
        let n = lines.update();
        let t = elapsed.as_secs_f64();
        let rate = last.map_or(0.0, |(t0, n0)| (n - n0) as f64 / (t - t0).max(1e-9));
        last = Some((t, n));
        println!(
            "{:>8.1} {client:>14.1} {peak:>14.1} {sim_rss:>11.1} {n:>11} {rate:>8.1}",
            t / 60.0
        );
        samples.push(SoakSample {
            elapsed_s: t,
            client_rss_mb: client,
            client_peak_rss_mb: peak,
            sim_rss_mb: sim_rss,
            requests: n,
        });
        if elapsed >= deadline {
            break;
        }
        std::thread::sleep(
            Duration::from_secs_f64(a.sample_s).min(deadline.saturating_sub(elapsed)),
        );
    }
    let peak = rss_mb(run_pid).map_or(0.0, |r| r.1);
    signal(run_pid, "INT");
    let code = children
        .run
        .take()
        .and_then(|mut r| r.wait().ok())
        .and_then(|s| s.code());
    signal(sim_pid, "INT");
    let requests = lines.update();
    finish(
        a,
        &dir,
        &run_dir,
        samples,
        peak,
        (requests, lines.warmup),
        code,
    )
}

fn finish(
    a: &SoakArgs,
    dir: &Path,
    run_dir: &Path,
    samples: Vec<SoakSample>,
    peak: f64,
    (requests, warmup): (u64, u64),
    code: Option<i32>,
) -> Result<SoakReport, String> {
    let settled: Vec<&SoakSample> = samples.iter().filter(|s| s.elapsed_s >= 60.0).collect();
    let settled = if settled.is_empty() {
        samples.iter().filter(|s| s.client_rss_mb > 0.0).collect()
    } else {
        settled
    };
    let first = settled.first().ok_or("no samples")?;
    let last = settled.last().ok_or("no samples")?;
    let per_hour = slope(
        &settled
            .iter()
            .map(|s| (s.elapsed_s / 3600.0, s.client_rss_mb))
            .collect::<Vec<_>>(),
    );
    let per_million = slope(
        &settled
            .iter()
            .map(|s| (s.requests as f64 / 1e6, s.client_rss_mb))
            .collect::<Vec<_>>(),
    );
    let results: serde_json::Value = std::fs::read(run_dir.join("results.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let level = &results["sweep"][0];
    let report = SoakReport {
        simulated: true,
        minutes: a.minutes,
        concurrency: a.concurrency,
        inject: a.inject.clone(),
        start_rss_mb: first.client_rss_mb,
        end_rss_mb: last.client_rss_mb,
        drift_mb: last.client_rss_mb - first.client_rss_mb,
        slope_mb_per_hour: per_hour,
        slope_mb_per_million_requests: per_million,
        client_peak_rss_mb: peak,
        sim_start_rss_mb: first.sim_rss_mb,
        sim_end_rss_mb: last.sim_rss_mb,
        requests,
        warmup_requests: warmup,
        run_exit_code: code,
        completed: level["completed"].as_u64().unwrap_or(0),
        failed: level["failed"].as_u64().unwrap_or(0),
        cancelled: level["cancelled"].as_u64().unwrap_or(0),
        failures: level["failures"].clone(),
        warnings: results["warnings"].as_array().map_or(0, Vec::len),
        run_dir: run_dir.to_path_buf(),
        samples,
    };
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("soak.json"), json)
        .map_err(|e| format!("cannot write {}: {e}", dir.join("soak.json").display()))?;
    Ok(report)
}

/// Prints the report's conclusion.
pub fn print(r: &SoakReport) {
    println!();
    println!(
        "client RSS: {:.1} MB after the first minute, {:.1} MB at the end: drift {:+.1} MB ({:+.2} MB/hour, {:+.2} MB per million requests); peak {:.1} MB",
        r.start_rss_mb,
        r.end_rss_mb,
        r.drift_mb,
        r.slope_mb_per_hour,
        r.slope_mb_per_million_requests,
        r.client_peak_rss_mb
    );
    println!(
        "simulator RSS: {:.1} MB -> {:.1} MB",
        r.sim_start_rss_mb, r.sim_end_rss_mb
    );
    println!(
        "requests.jsonl: {} records ({} warmup); results.json: {} completed + {} failed + {} cancelled = {}; failures {}; {} warnings; run exit code {:?} (130: stopped by the soak's SIGINT, as planned)",
        r.requests,
        r.warmup_requests,
        r.completed,
        r.failed,
        r.cancelled,
        r.completed + r.failed + r.cancelled,
        r.failures,
        r.warnings,
        r.run_exit_code
    );
    println!(
        "report: {}",
        r.run_dir.with_file_name("soak.json").display()
    );
}
