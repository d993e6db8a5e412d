//! The three commands: `run`, `sim`, `demo`. Each returns the process exit code:
//! 0 finished (even with failed requests), 1 aborted mid-run, 2 bad input, 130 interrupted.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cli::{DemoArgs, OutputArgs, RunArgs, SimArgs};
use crate::config::{BackendChoice, MultiTurn, RunConfig};
use crate::event::{self, RunState};
use crate::export::{RunFiles, default_run_dir};
use crate::metrics::Slo;
use crate::runner::{self, Control, Runner};
use crate::session::Session;
use crate::sim::{self, AcceptLength, SimConfig};
use crate::summary::RunSummary;
use crate::{headless, workload};

/// Exit code for bad input.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for a run stopped by the user.
pub const EXIT_INTERRUPTED: i32 = 130;

fn fail(msg: &str) -> i32 {
    eprintln!("servetop: {msg}");
    EXIT_BAD_INPUT
}

/// Builds the run configuration from `servetop run` flags.
pub fn run_config(a: &RunArgs) -> Result<RunConfig, String> {
    let mut slo = a.slo.as_deref().map(Slo::parse).transpose()?;
    let percentile =
        Slo::parse_percentile(&a.slo_percentile).map_err(|e| format!("--slo-percentile {e}"))?;
    if let Some(s) = slo.as_mut() {
        s.percentile = percentile;
    }
    let search = search_config(a)?;
    let cfg = RunConfig {
        base_url: a
            .base_url
            .as_deref()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_string(),
        backend: a.backend,
        model: a.model.clone(),
        concurrency: a.concurrency.0.clone(),
        input_len: a.input_len,
        output_len: a.output_len,
        shared_prefix_len: a.shared_prefix_len,
        dataset: a.dataset.clone(),
        multi_turn: a.multi_turn.map(|turns| MultiTurn {
            turns,
            conversations: a.conversations,
            concurrency: a.conversation_concurrency,
            followup_len: a.followup_len,
        }),
        requests_per_level: crate::workload::RequestCount::parse(
            &a.requests_per_level,
            a.min_requests,
        )
        .map_err(|e| format!("--requests-per-level {e}"))?,
        open_loop: crate::workload::OpenLoop {
            request_rates: a.request_rate.0.clone(),
            burstiness: a.burstiness,
            ramp_up_s: a.ramp_up,
            max_concurrency: a.max_concurrency,
        },
        warmup_requests: a.warmup,
        long_context: a.long_context.0.clone(),
        long_context_output_len: a.long_context_output_len,
        long_context_repeats: a.long_context_repeats,
        tokenizer: a.tokenizer.clone(),
        temperature: a.temperature,
        first_token_timeout_s: a.first_token_timeout,
        idle_timeout_s: a.idle_timeout,
        grace_s: a.grace,
        slo,
        // A new seed per run: the same prompts again would be prefix-cache hits on vLLM, SGLang
        // and llama.cpp, and prefill would measure nothing.
        seed: a.seed.unwrap_or_else(rand::random),
        out_dir: a.output.out.clone().unwrap_or_default(),
        api_key_env: a.api_key_env.clone(),
        record_chunks: a.record_chunks,
        metrics_url: a.metrics_url.clone(),
        no_metrics: a.no_metrics,
        dcgm_url: a.dcgm_url.clone(),
        no_gpu: a.no_gpu,
        gpu_interval_s: a.gpu_interval,
        server_wait_s: a.server_wait,
        search,
    };
    let cfg = if cfg.search.is_some() {
        // The search runs alone: its probes are the run's levels.
        RunConfig {
            concurrency: Vec::new(),
            long_context: Vec::new(),
            ..cfg
        }
    } else {
        cfg
    };
    cfg.validate()?;
    Ok(cfg)
}

/// The `--search` flags, checked.
fn search_config(a: &RunArgs) -> Result<Option<crate::search::SearchConfig>, String> {
    let Some(target) = a.search.as_deref() else {
        return Ok(None);
    };
    match target.trim() {
        "rate" => {}
        "concurrency" => {
            return Err(
                "--search concurrency is not implemented yet; use --search rate (with --max-concurrency to cap it)"
                    .into(),
            );
        }
        other => return Err(format!("--search '{other}': the only search is 'rate'")),
    }
    if !a.request_rate.0.is_empty() {
        return Err(
            "--search rate picks its own request rates; leave out --request-rate (or run the rate sweep separately)"
                .into(),
        );
    }
    Ok(Some(crate::search::SearchConfig {
        precision: crate::search::Precision::parse(&a.search_precision)?,
        probe_seconds: a.search_seconds,
        min_requests: a.search_min_requests,
        probe_concurrency: a
            .search_probe_concurrency
            .or(a.max_concurrency)
            .unwrap_or(64),
        ..crate::search::SearchConfig::rate()
    }))
}

/// `servetop run`.
pub async fn run(a: RunArgs) -> i32 {
    if let Some(dir) = &a.resume {
        return resume(dir, &a.output).await;
    }
    match run_config(&a) {
        Ok(cfg) => execute(cfg, None, &a.output).await,
        Err(e) => fail(&e),
    }
}

/// `servetop run --resume DIR`: the saved configuration, the levels not yet done.
async fn resume(dir: &std::path::Path, out: &OutputArgs) -> i32 {
    let (summary, _) = match crate::export::report::load_run(dir) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if summary.state == RunState::Finished {
        return fail(&format!(
            "the run in {} already finished; nothing to resume",
            dir.display()
        ));
    }
    if summary.config.search.is_some() {
        return fail(&format!(
            "the run in {} is an SLO search; a search starts over from its throughput probe, so run it again instead of resuming",
            dir.display()
        ));
    }
    let mut out = out.clone();
    out.out = Some(dir.to_path_buf());
    let cfg = summary.config.clone();
    if let Err(e) = cfg.validate() {
        return fail(&e);
    }
    execute_with(cfg, summary.simulator.clone(), &out, Some(summary)).await
}

/// Sends tracing output to `servetop.log` in the run directory (never onto the dashboard).
fn init_file_log(dir: &std::path::Path) {
    let Ok(file) = std::fs::File::create(dir.join("servetop.log")) else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SERVETOP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

/// Cancels `cancel` on Ctrl-C, SIGTERM or SIGHUP (a dropped SSH session). `say` prints a line
/// (headless only: under the dashboard the screen says it).
fn spawn_signal_watch(cancel: CancellationToken, say: bool) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                let _ = tokio::signal::ctrl_c().await;
                cancel.cancel();
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                _ = hup.recv() => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        if say {
            eprintln!(
                "servetop: stopping — in-flight requests get their grace period, results are being saved"
            );
        }
        cancel.cancel();
    });
}

/// Runs a configuration against its server, headless, and writes the run directory.
pub async fn execute(cfg: RunConfig, simulator: Option<SimConfig>, out: &OutputArgs) -> i32 {
    execute_with(cfg, simulator, out, None).await
}

/// [`execute`], continuing `previous` (a resumed run) when given.
async fn execute_with(
    mut cfg: RunConfig,
    simulator: Option<SimConfig>,
    out: &OutputArgs,
    previous: Option<RunSummary>,
) -> i32 {
    let api_key = std::env::var(&cfg.api_key_env)
        .ok()
        .filter(|k| !k.is_empty());
    let mut prepared = match runner::prepare(&cfg, api_key).await {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let dir = out
        .out
        .clone()
        .unwrap_or_else(|| default_run_dir(&prepared.server.model));
    let files = match RunFiles::create(&dir) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    cfg.out_dir = dir.clone();
    let initial = initial_summary(&cfg, simulator, previous, &mut prepared);
    let cancel = CancellationToken::new();
    let dashboard = !out.headless && crate::tui::available();
    spawn_signal_watch(cancel.clone(), !dashboard);
    init_file_log(&dir);
    let (state, session) = if dashboard {
        // Boxed: the dashboard's and the headless loop's futures are large, and every command
        // that runs one would otherwise carry them inline.
        match Box::pin(crate::tui::run(
            &cfg,
            prepared,
            initial,
            Some(files),
            out.fps,
            out.chart_size,
            cancel,
        ))
        .await
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!(
                    "servetop: the dashboard failed ({e}); results so far are in {}",
                    dir.display()
                );
                return 1;
            }
        }
    } else {
        Box::pin(run_prepared(
            &cfg,
            prepared,
            initial,
            Some(files),
            false,
            cancel,
        ))
        .await
    };
    println!("{}", headless::final_tables(&session));
    let summary = session.summary.clone();
    let has_rates = !summary.rates.is_empty();
    let has_search = summary.search.is_some();
    let has_turns = !summary.multi_turn.is_empty();
    let chart_dir = dir.clone();
    let size = out.chart_size;
    let charts =
        tokio::task::spawn_blocking(move || export_charts(&chart_dir, &summary, size)).await;
    match charts {
        Ok(Ok(_)) => eprintln!(
            "charts: {} (throughput, latency, long_context, spec_decoding, gpu_timeline{}{}{} .png); tables: sweep.csv, long_context.csv{}{}",
            dir.join("charts").display(),
            if has_rates { ", rates" } else { "" },
            if has_turns { ", turns" } else { "" },
            if has_search { ", slo_search" } else { "" },
            if has_rates { ", rates.csv" } else { "" },
            if has_turns { ", turns.csv" } else { "" },
        ),
        Ok(Err(e)) => eprintln!("servetop: charts not written: {e}"),
        Err(e) => eprintln!("servetop: charts not written: {e}"),
    }
    eprintln!("results: {}", dir.display());
    match state {
        RunState::Finished | RunState::Running => 0,
        RunState::Interrupted => EXIT_INTERRUPTED,
        RunState::Aborted => 1,
    }
}

/// Runs a prepared plan headless, folding every event into a `Session` (and its run directory
/// when `files` is given). `quiet` silences the progress lines (tests).
pub async fn run_prepared(
    cfg: &RunConfig,
    prepared: runner::Prepared,
    summary: RunSummary,
    files: Option<RunFiles>,
    quiet: bool,
    cancel: CancellationToken,
) -> (RunState, Session) {
    let warmup_input = warmup_input(cfg, &prepared);
    let mut session = Session::new(summary, files);
    let (tx, rx) = event::channel();
    let telemetry_stop = cancel.child_token();
    crate::telemetry::spawn_all(cfg, &prepared.client.http(), &tx, &telemetry_stop);
    // The dashboard will own the sender; headless nobody pauses or skips.
    let (_control_tx, control_rx) = watch::channel(Control::default());
    let runner = Runner {
        server_wait: Duration::from_secs_f64(cfg.server_wait_s),
        metrics: crate::telemetry::engine_urls(cfg),
        prepared,
        warmup_requests: cfg.warmup_requests,
        warmup_input_tokens: warmup_input,
        warmup_output_tokens: cfg.output_len.min(64),
        grace: Duration::from_secs_f64(cfg.grace_s),
        tx,
        cancel,
        control: control_rx,
    };
    let task = tokio::spawn(runner.run());
    let state = headless::drive(rx, &mut session, quiet).await;
    let _ = task.await;
    telemetry_stop.cancel();
    session.save();
    (state, session)
}

/// The summary a run starts from: new, or (resuming) the saved one; when resuming, levels that
/// are done or skipped are taken out of `prepared`'s plan and keep their results.
pub fn initial_summary(
    cfg: &RunConfig,
    simulator: Option<SimConfig>,
    previous: Option<RunSummary>,
    prepared: &mut runner::Prepared,
) -> RunSummary {
    match previous {
        None => RunSummary::new(cfg.clone(), simulator),
        Some(mut s) => {
            let settled = |i: u32| {
                s.level(i).is_some_and(|l| {
                    matches!(
                        l.status,
                        crate::summary::LevelStatus::Done | crate::summary::LevelStatus::Skipped
                    )
                })
            };
            prepared.levels.retain(|l| !settled(l.index));
            s.state = RunState::Running;
            s.error = None;
            s.warnings.push(format!(
                "resumed at {} with {} levels left",
                crate::summary::now_rfc3339(),
                prepared.levels.len()
            ));
            s
        }
    }
}

/// A quiet headless run as a library call: prepares against `cfg.base_url`, writes the run
/// directory when `out_dir` is given, and returns the final state and session. Tests and
/// embedding code use this instead of repeating the prepare / summary / run steps.
pub async fn run_headless(
    cfg: RunConfig,
    out_dir: Option<std::path::PathBuf>,
) -> Result<(RunState, Session), String> {
    let mut cfg = cfg;
    let prepared = runner::prepare(&cfg, None).await?;
    let files = match &out_dir {
        Some(d) => {
            cfg.out_dir.clone_from(d);
            Some(RunFiles::create(d)?)
        }
        None => None,
    };
    let summary = RunSummary::new(cfg.clone(), None);
    Ok(run_prepared(
        &cfg,
        prepared,
        summary,
        files,
        true,
        CancellationToken::new(),
    )
    .await)
}

/// Input tokens of the warmup request: the sweep's length, kept well inside the context.
pub fn warmup_input(cfg: &RunConfig, prepared: &runner::Prepared) -> u64 {
    match prepared.server.context_limit {
        Some(limit) => cfg.input_len.min(limit / 2).max(1),
        None => cfg.input_len.max(1),
    }
}

/// Applies `servetop sim` flags over the chosen preset.
pub fn sim_config(a: &SimArgs) -> Result<SimConfig, String> {
    let mut c = SimConfig::preset(&a.preset)?;
    if let Some(m) = &a.model {
        c.model.clone_from(m);
    }
    if let Some(v) = a.max_running {
        c.max_running = v;
    }
    if let Some(v) = a.prefill_tokens_per_s {
        c.prefill_tokens_per_s = v;
    }
    if let Some(v) = a.decode_step_ms {
        c.decode_step_ms = v;
    }
    if let Some(v) = a.batch_growth {
        c.batch_growth = v;
    }
    if let Some(v) = a.context_ms_per_1k {
        c.context_ms_per_1k = v;
    }
    if let Some(v) = &a.accept_length {
        c.accept_length = AcceptLength::parse(v)?;
    }
    if let Some(v) = a.context_length {
        c.context_length = v;
    }
    if a.no_continuous_usage {
        c.continuous_usage = false;
    }
    if a.no_prefix_cache {
        c.prefix_cache = false;
    }
    if let Some(k) = a.write_batch {
        c.write_batch = k;
    }
    if let Some(var) = &a.api_key_env {
        let key = std::env::var(var)
            .map_err(|_| format!("--api-key-env {var}: the variable is not set"))?;
        c.api_key = Some(key);
    }
    if let Some(ms) = a.trailer_delay_ms {
        if !(ms.is_finite() && (0.0..=3_600_000.0).contains(&ms)) {
            return Err(format!(
                "--trailer-delay-ms must be between 0 and 3600000, got {ms}"
            ));
        }
        c.trailer_delay_ms = ms;
    }
    if let Some(s) = a.seed {
        c.seed = s;
    }
    if let Some(f) = &a.flavor {
        c.metrics = match f.as_str() {
            "sglang" => Some(crate::sim::MetricsFlavor::Sglang),
            "vllm" => Some(crate::sim::MetricsFlavor::Vllm),
            "none" => None,
            other => return Err(format!("--flavor '{other}': use sglang, vllm or none")),
        };
    }
    if let Some(g) = a.gpus {
        c.gpus = g;
    }
    if let Some(g) = a.gpu_mem_gb {
        c.gpu_mem_gb = g;
    }
    if let Some(k) = a.kv_capacity_tokens {
        c.kv_capacity_tokens = k;
    }
    if let Some(i) = &a.inject {
        c.faults = crate::sim::faults::Faults::parse(i)?;
    }
    c.validate()?;
    Ok(c)
}

/// `servetop sim`.
pub async fn sim(a: SimArgs) -> i32 {
    if a.firehose {
        return firehose(&a).await;
    }
    let cfg = match sim_config(&a) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let addr: SocketAddr = match format!("{}:{}", a.host, a.port).parse() {
        Ok(a) => a,
        Err(e) => return fail(&format!("--host/--port: {e}")),
    };
    let handle = match sim::start(cfg.clone(), addr).await {
        Ok(h) => h,
        Err(e) => return fail(&format!("cannot serve on {addr}: {e}")),
    };
    println!("{}", handle.url());
    eprintln!(
        "SIMULATED server (preset {}) serving model {} at {} — context {} tokens, up to {} running, prefill {} tok/s, {} ms steps, accept length {}. Ctrl-C stops.",
        cfg.preset,
        cfg.model,
        handle.url(),
        cfg.context_length,
        cfg.max_running,
        cfg.prefill_tokens_per_s,
        cfg.decode_step_ms,
        cfg.accept_length.mean()
    );
    let Some(every) = cfg.faults.restart_every_s else {
        let _ = tokio::signal::ctrl_c().await;
        handle.stop();
        return 0;
    };
    // Outages: serve for `every` seconds, go away for `down_s`, come back with a fresh engine.
    // Come back on the port actually bound (`--port 0` picks one once).
    let addr = handle.addr;
    let mut handle = handle;
    let down = cfg.faults.down_s;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    for n in 1u64.. {
        tokio::select! {
            _ = &mut ctrl_c => { handle.stop(); return 0; }
            () = tokio::time::sleep(Duration::from_secs_f64(every)) => {}
        }
        handle.stop();
        eprintln!("SIMULATED outage {n}: not serving for {down} s");
        tokio::select! {
            _ = &mut ctrl_c => return 0,
            () = tokio::time::sleep(Duration::from_secs_f64(down)) => {}
        }
        handle = match sim::start(cfg.clone(), addr).await {
            Ok(h) => h,
            Err(e) => return fail(&format!("cannot serve again on {addr}: {e}")),
        };
        eprintln!("SIMULATED restart {n}: serving again at {}", handle.url());
    }
    0
}

/// `servetop sim --firehose`.
async fn firehose(a: &SimArgs) -> i32 {
    let addr: SocketAddr = match format!("{}:{}", a.host, a.port).parse() {
        Ok(a) => a,
        Err(e) => return fail(&format!("--host/--port: {e}")),
    };
    let cfg = sim::firehose::FirehoseConfig {
        model: a.model.clone().unwrap_or_else(|| "sim/firehose".into()),
        context_length: a.context_length.unwrap_or(1 << 20),
        events_per_write: a.events_per_write.max(1),
        pace: a
            .decode_step_ms
            .filter(|&ms| ms > 0.0)
            .map(|ms| Duration::from_secs_f64(ms / 1000.0)),
        record_writes: a.record_writes,
    };
    let handle = match sim::firehose::start(cfg.clone(), addr).await {
        Ok(h) => h,
        Err(e) => return fail(&format!("cannot serve on {addr}: {e}")),
    };
    println!("{}", handle.url());
    eprintln!(
        "SIMULATED firehose serving model {} at {}: {} event(s) per write, {}. Ctrl-C stops.",
        cfg.model,
        handle.url(),
        cfg.events_per_write,
        cfg.pace
            .map_or("as fast as the socket takes them".to_string(), |p| format!(
                "one write every {p:?} per stream"
            ))
    );
    let _ = tokio::signal::ctrl_c().await;
    0
}

/// The demo's plan: the brief's deployment, shortened so it finishes in under 3 minutes.
pub fn demo_config() -> RunConfig {
    RunConfig {
        base_url: String::new(),
        backend: BackendChoice::Auto,
        model: None,
        concurrency: vec![1, 4, 8, 16, 64, 100],
        input_len: 1000,
        output_len: 100,
        shared_prefix_len: 0,
        multi_turn: None,
        dataset: None,
        requests_per_level: crate::workload::RequestCount::PerConcurrency {
            factor: 1.0,
            min: 5,
        },
        open_loop: crate::workload::OpenLoop::default(),
        warmup_requests: 1,
        long_context: vec![8_000, 16_000, 30_000, 60_000, 100_000],
        long_context_output_len: 256,
        long_context_repeats: 1,
        tokenizer: None,
        temperature: 0.0,
        first_token_timeout_s: 600.0,
        idle_timeout_s: 60.0,
        grace_s: 3.0,
        slo: None,
        seed: 0,
        out_dir: std::path::PathBuf::new(),
        api_key_env: "SERVETOP_API_KEY".into(),
        record_chunks: false,
        metrics_url: None,
        no_metrics: false,
        dcgm_url: None,
        no_gpu: false,
        gpu_interval_s: 1.0,
        server_wait_s: 60.0,
        search: None,
    }
}

/// Charts and CSV for a run directory from its summary and telemetry.jsonl; returns how many
/// files were written.
pub fn export_charts(
    dir: &std::path::Path,
    summary: &RunSummary,
    size: (u32, u32),
) -> Result<usize, String> {
    let telemetry = crate::export::report::load_run(dir)
        .map(|r| r.1)
        .unwrap_or_default();
    crate::export::report::export_run(dir, summary, &telemetry, size).map(|f| f.len())
}

/// `servetop report`.
pub fn report(a: &crate::cli::ReportArgs) -> i32 {
    if a.screenshots && a.dirs.len() != 1 {
        return fail("--screenshots takes one run directory");
    }
    let result = crate::export::report::report(&a.dirs, &a.labels, a.out.as_deref(), a.chart_size)
        .and_then(|mut files| {
            if a.screenshots {
                let (summary, telemetry) = crate::export::report::load_run(&a.dirs[0])?;
                let mut app = crate::tui::app::App::from_saved(summary, &telemetry);
                let buffers = app.tab_buffers(a.screenshot_size.0, a.screenshot_size.1);
                files.extend(crate::tui::write_screenshots(
                    &a.dirs[0].join("screenshots"),
                    &buffers,
                )?);
            }
            Ok(files)
        });
    match result {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            0
        }
        Err(e) => fail(&e),
    }
}

/// `servetop gpu`: what the GPU sampler sees. Exits 0 with or without GPUs.
pub async fn gpu(a: &crate::cli::GpuArgs) -> i32 {
    loop {
        let reading = tokio::task::spawn_blocking(crate::telemetry::gpu::read_once)
            .await
            .unwrap_or_else(|e| Err(format!("sampler thread failed: {e}")));
        if a.json {
            let v = match &reading {
                Ok(g) => {
                    serde_json::json!({"available": true, "reason": null, "source": "nvml", "gpus": g})
                }
                Err(r) => {
                    serde_json::json!({"available": false, "reason": r, "source": "nvml", "gpus": []})
                }
            };
            println!("{v}");
        } else {
            match &reading {
                Ok(gpus) => {
                    for g in gpus {
                        println!("{}", crate::telemetry::gpu_line(g));
                    }
                }
                Err(r) => println!("no NVIDIA GPU: {r}"),
            }
        }
        if a.once || reading.is_err() {
            return 0;
        }
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_secs_f64(a.interval.max(0.1))) => {}
            _ = tokio::signal::ctrl_c() => return 0,
        }
    }
}

/// The demo's multi-turn level.
const DEMO_CHATS: MultiTurn = MultiTurn {
    turns: 4,
    conversations: 8,
    concurrency: 4,
    followup_len: 64,
};

/// `servetop demo`.
pub async fn demo(a: DemoArgs) -> i32 {
    let sim_cfg = match SimConfig::preset("hybrid-27b-2x48g-mtp") {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let handle = match sim::start(sim_cfg.clone(), SocketAddr::from(([127, 0, 0, 1], 0))).await {
        Ok(h) => h,
        Err(e) => return fail(&format!("cannot start the simulator: {e}")),
    };
    eprintln!(
        "servetop demo: SIMULATED server (preset {}) at {} — sweep C={} ({} in / {} out), long context {}, then {} chats of {} turns through the simulated prefix cache",
        sim_cfg.preset,
        handle.url(),
        demo_config()
            .concurrency
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
        demo_config().input_len,
        demo_config().output_len,
        demo_config()
            .long_context
            .iter()
            .map(|n| workload::fmt_tokens(*n))
            .collect::<Vec<_>>()
            .join(", "),
        DEMO_CHATS.conversations,
        DEMO_CHATS.turns
    );
    let mut cfg = demo_config();
    cfg.base_url = handle.url();
    // Last, a few chats: what the prefix cache saves turn by turn (the long-context tab's table,
    // charts/turns.png). Here rather than in `demo_config`, which tests and benchmarks reuse.
    cfg.multi_turn = Some(DEMO_CHATS);
    // The simulator's GPUs stand in for the host's: the demo shows every panel filled.
    cfg.dcgm_url = Some(format!("{}/dcgm/metrics", handle.url()));
    let mut out = a.output.clone();
    if out.out.is_none() {
        out.out = Some(default_run_dir("demo-simulated"));
    }
    execute(cfg, Some(sim_cfg), &out).await
}

/// `servetop soak`: the long-run memory benchmark (see [`crate::soak`]).
pub async fn soak(a: crate::cli::SoakArgs) -> i32 {
    if !(a.minutes > 0.0 && a.sample_s > 0.0 && a.concurrency > 0) {
        return fail("soak: --minutes, --sample-s and --concurrency must be more than 0");
    }
    if let Err(e) = crate::sim::faults::Faults::parse(&a.inject) {
        return fail(&e);
    }
    match tokio::task::spawn_blocking(move || crate::soak::soak(&a)).await {
        Ok(Ok(r)) => {
            crate::soak::print(&r);
            0
        }
        Ok(Err(e)) => {
            eprintln!("servetop: soak: {e}");
            1
        }
        Err(e) => {
            eprintln!("servetop: soak: {e}");
            1
        }
    }
}

/// `servetop bench-client` (see [`crate::bench`]).
pub async fn bench_client(a: crate::cli::BenchClientArgs) -> i32 {
    let json = a.json;
    match tokio::task::spawn_blocking(move || crate::bench::bench_client(&a)).await {
        Ok(Ok(rows)) => {
            crate::bench::print(&rows, json);
            0
        }
        Ok(Err(e)) => {
            eprintln!("servetop: bench-client: {e}");
            1
        }
        Err(e) => {
            eprintln!("servetop: bench-client: {e}");
            1
        }
    }
}

/// One bench-client case (a child process): prints its result as one JSON line.
pub async fn bench_case(a: crate::cli::BenchCaseArgs) -> i32 {
    match crate::bench::case(a).await {
        Ok(r) => {
            println!("{}", serde_json::to_string(&r).unwrap_or_default());
            0
        }
        Err(e) => {
            eprintln!("servetop: bench-case: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    fn cfg(extra: &[&str]) -> crate::config::RunConfig {
        let mut args = vec!["servetop", "run", "--base-url", "http://127.0.0.1:1"];
        args.extend_from_slice(extra);
        let crate::cli::Command::Run(a) = crate::cli::Cli::parse_from(args).command else {
            panic!("not a run");
        };
        super::run_config(&a).expect("valid flags")
    }

    #[test]
    fn each_run_draws_its_own_seed_unless_one_is_given() {
        // Two runs without --seed get different prompts (1 chance in 2^64 of a false failure).
        assert_ne!(cfg(&[]).seed, cfg(&[]).seed);
        assert_eq!(cfg(&["--seed", "7"]).seed, 7);
    }

    #[test]
    fn rate_flags_make_rate_levels_after_the_sweep() {
        let c = cfg(&[
            "--concurrency",
            "1,2",
            "--request-rate",
            "0.5,4",
            "--burstiness",
            "0.5",
            "--ramp-up",
            "3",
            "--max-concurrency",
            "16",
            "--long-context",
            "none",
        ]);
        let levels = c.levels();
        let labels: Vec<String> = levels
            .iter()
            .map(crate::workload::LevelSpec::label)
            .collect();
        assert_eq!(labels, ["C=1", "C=2", "0.5 req/s", "4 req/s"]);
        let a = levels[3].arrival.unwrap();
        assert_eq!(
            (a.request_rate, a.burstiness, a.ramp_up_s, a.max_concurrency),
            (4.0, 0.5, 3.0, Some(16))
        );
        // The default 3x is three seconds' worth at a rate level, at least --min-requests.
        assert_eq!((levels[2].requests, levels[3].requests), (10, 12));
        assert!(
            cfg(&[]).open_loop.request_rates.is_empty(),
            "no rate levels by default"
        );
        let only = cfg(&[
            "--concurrency",
            "none",
            "--long-context",
            "none",
            "--request-rate",
            "2",
        ]);
        assert_eq!(only.levels().len(), 1);
    }

    #[test]
    fn bad_rate_flags_say_what_to_fix() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["servetop", "run", "--base-url", "http://127.0.0.1:1"];
            args.extend_from_slice(extra);
            let crate::cli::Command::Run(a) = crate::cli::Cli::parse_from(args).command else {
                panic!("not a run");
            };
            super::run_config(&a)
        };
        for (flags, why) in [
            (
                &["--request-rate", "4", "--burstiness", "0"][..],
                "--burstiness",
            ),
            (
                &["--request-rate", "4", "--ramp-up", "inf"][..],
                "--ramp-up",
            ),
            (
                &["--request-rate", "4", "--max-concurrency", "0"][..],
                "--max-concurrency",
            ),
        ] {
            let e = parse(flags).unwrap_err();
            assert!(e.contains(why), "{flags:?}: {e}");
        }
        assert!(
            crate::cli::Cli::try_parse_from([
                "servetop",
                "run",
                "--base-url",
                "http://x",
                "--request-rate",
                "4,2"
            ])
            .is_err()
        );
    }
}
