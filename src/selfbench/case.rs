//! The `bench-case` child's side: one case's level run through the product's own code path in
//! this process, and its figures read over the level's window (CPU, run-queue wait, steal);
//! or the reference reader in its place.

use std::time::Duration;

use super::{CaseResult, agent, cpu_seconds, reference, sched, soak, wave};
use crate::cli::BenchCaseArgs;
use crate::config::BackendChoice;
use crate::workload::RequestCount;

/// A case's plan: the demo's with every measurement setting overridden (new settings keep the
/// demo's defaults); an agent case's, one level of sessions instead of the sweep's level.
fn case_config(a: &BenchCaseArgs) -> Result<crate::config::RunConfig, String> {
    let cfg = crate::config::RunConfig {
        base_url: a.url.clone(),
        backend: BackendChoice::Openai,
        concurrency: vec![u64::from(a.concurrency)],
        input_len: a.input_len,
        output_len: a.output_len,
        requests_per_level: RequestCount::Fixed(a.requests),
        warmup_requests: 1,
        long_context: vec![],
        first_token_timeout_s: 120.0,
        idle_timeout_s: 60.0,
        grace_s: 1.0,
        seed: 0,
        out_dir: a.out.clone(),
        api_key_env: "SERVETOP_BENCH_NO_KEY".into(),
        record_chunks: a.record_chunks,
        metrics_url: None,
        no_metrics: true,
        dcgm_url: None,
        no_gpu: true,
        server_wait_s: 5.0,
        ..crate::config::RunConfig::demo()
    };
    if a.turns == 0 {
        return Ok(cfg);
    }
    let wait = a.tool_wait.as_deref().unwrap_or("0");
    Ok(crate::config::RunConfig {
        concurrency: Vec::new(),
        sessions: Some(agent::sessions(a.concurrency, a.turns, wait)?),
        ..cfg
    })
}

/// One reading: µs since the Unix epoch, this process's CPU seconds, the reading threads'
/// run-queue wait and the steal on the case's CPUs, in seconds ([`sched`]).
type Reading = (u64, f64, Option<f64>, Option<f64>);

/// Readings every 20 ms until `stop`, to take the level's window out of the whole process's
/// time; the wait and steal with every fifth only, the last ones carried between: their reads
/// of /proc (two files a reading thread, and `/proc/stat`) run on the measured core, so they are
/// kept off most samples (not measured apart from the case's CPU).
fn sample(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (
    std::thread::JoinHandle<()>,
    std::sync::Arc<std::sync::Mutex<Vec<Reading>>>,
) {
    let readings = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Reading>::new()));
    let out = readings.clone();
    let sampler = std::thread::spawn(move || {
        let mut sched = sched::Readings::new();
        let (mut wait, mut steal) = (None, None);
        for tick in 0u64.. {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            if tick % 5 == 0 {
                (wait, steal) = (sched.reader_wait_s(), sched.steal_s());
            }
            let now = (crate::metrics::unix_us(), cpu_seconds(), wait, steal);
            if let Ok(mut r) = readings.lock() {
                r.push(now);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    (sampler, out)
}

/// Over the window from `start` to `end` (µs since the Unix epoch): CPU seconds, and the
/// reading threads' wait and the steal in ms (`None` where not read).
fn over_level(readings: &[Reading], start: u64, end: u64) -> (f64, Option<f64>, Option<f64>) {
    let at = |t: u64| {
        readings
            .iter()
            .find(|r| r.0 >= t)
            .or(readings.last())
            .copied()
    };
    let (first, last) = (at(start), at(end));
    let ms = |f: fn(&Reading) -> Option<f64>| Some((f(&last?)? - f(&first?)?).max(0.0) * 1e3);
    (
        last.map_or(0.0, |r| r.1) - first.map_or(0.0, |r| r.1),
        ms(|r| r.2),
        ms(|r| r.3),
    )
}

/// The hidden `bench-case` command: runs one level and prints its [`CaseResult`] as JSON.
pub async fn case(a: BenchCaseArgs) -> Result<CaseResult, String> {
    if a.kind == REFERENCE {
        return reference_case(&a);
    }
    let cfg = case_config(&a)?;
    let prepared = crate::runner::prepare(&cfg, None).await?;
    let files = crate::export::RunFiles::create(&a.out)?;
    let summary = crate::summary::RunSummary::new(cfg.clone(), None);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (sampler, readings) = sample(stop.clone());
    // Wave cases: this process's CPU clock every millisecond, for the parent to find how long
    // each wave kept the core saturated.
    let fine = (a.kind == "wave").then(|| wave::sample_cpu(stop.clone()));
    let cancel = tokio_util::sync::CancellationToken::new();
    let sink = crate::run::sink::Sink::new(Some(files));
    let (_, session, drawn) = if a.ui == "dashboard" {
        crate::tui::run_offscreen(&cfg, prepared, summary, sink, 10.0, (160, 48), cancel)
            .await
            .map_err(|e| format!("dashboard: {e}"))?
    } else {
        let (state, session) =
            crate::run::run_prepared(&cfg, prepared, summary, sink, true, cancel).await;
        (state, session, crate::tui::frames::Drawn::default())
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = sampler.join();
    if let Some(samples) = fine.and_then(|f| f.join().ok()) {
        let json = serde_json::to_vec(&samples).map_err(|e| e.to_string())?;
        std::fs::write(a.out.join("cpu-samples.json"), json)
            .map_err(|e| format!("cpu-samples.json: {e}"))?;
    }
    let levels = if a.turns > 0 {
        &session.summary.sessions
    } else {
        &session.summary.sweep
    };
    let level = levels.first().ok_or("the level did not run")?;
    let stats = level.stats.as_ref().ok_or("the level has no statistics")?;
    let sc = &stats.scalars;
    let origin = level.origin_unix_us.unwrap_or(0);
    let start = origin;
    let end = origin + (sc.duration_s * 1e6) as u64;
    let readings = readings.lock().map(|r| r.clone()).unwrap_or_default();
    let (cpu_s, reader_wait_ms, steal_ms) = over_level(&readings, start, end);
    // The deliveries (token-carrying reads) of the completed requests. Not the count of
    // tokens_per_chunk, which has one value a gap between two deliveries of a request: at
    // capacity the firehose outruns the reader, a request's whole answer often arrives in one
    // read, and that request adds no gap — a row once counted 46 "chunks" for 10.24 M tokens.
    let chunks = sc.deliveries;
    let tokens = sc.total_output_tokens;
    let duration = sc.duration_s.max(1e-9);
    Ok(CaseResult {
        kind: a.kind.clone(),
        concurrency: a.concurrency,
        ui: a.ui.clone(),
        events_per_write: a.events_per_write,
        input_len: a.input_len,
        output_len: a.output_len,
        requests: a.requests,
        completed: sc.completed,
        failed: sc.failed,
        tokens,
        chunks,
        duration_s: sc.duration_s,
        tokens_per_s: tokens as f64 / duration,
        chunks_per_s: chunks as f64 / duration,
        cpu_s,
        cpu_s_per_million_tokens: if tokens > 0 {
            cpu_s / tokens as f64 * 1e6
        } else {
            0.0
        },
        peak_rss_mb: soak::rss_mb(std::process::id()).map_or(0.0, |r| r.1),
        origin_unix_us: origin,
        frames_per_s: (a.ui == "dashboard").then(|| drawn.per_second()),
        held_reads: Some(sc.held_reads),
        reader_wait_ms,
        steal_ms,
        sessions_completed: sc.session.as_ref().map(|x| x.sessions_completed),
        tool_wait_share: sc.session.as_ref().and_then(|x| {
            let (tool, all) = (x.mean_session_tool_s?, x.mean_session_s?);
            (all > 0.0).then(|| tool / all)
        }),
        ..CaseResult::default()
    })
}

/// The `bench-case` kind that runs the reference reader instead of servetop.
pub(super) const REFERENCE: &str = "reference";

/// The reference reader as a case: its tokens/s and CPU in a [`CaseResult`].
fn reference_case(a: &BenchCaseArgs) -> Result<CaseResult, String> {
    let addr = a.url.trim_start_matches("http://").trim_end_matches('/');
    let origin = crate::metrics::unix_us();
    let r = reference::read(addr, a.concurrency, a.requests, a.input_len, a.output_len)?;
    Ok(CaseResult {
        kind: REFERENCE.into(),
        concurrency: a.concurrency,
        ui: "none".into(),
        events_per_write: a.events_per_write,
        input_len: a.input_len,
        output_len: a.output_len,
        requests: a.requests,
        completed: r.requests,
        tokens: r.tokens,
        duration_s: r.duration_s,
        tokens_per_s: r.tokens_per_s,
        cpu_s: r.cpu_s,
        cpu_s_per_million_tokens: r.cpu_s_per_million_tokens,
        peak_rss_mb: soak::rss_mb(std::process::id()).map_or(0.0, |r| r.1),
        origin_unix_us: origin,
        ..CaseResult::default()
    })
}
