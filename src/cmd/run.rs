//! `servetop run` (and `--resume`): prepare against the server, run under the dashboard or
//! headless, then the final tables, charts and CSV.

use tokio_util::sync::CancellationToken;

use super::{EXIT_INTERRUPTED, EXIT_REGRESSION, fail};
use crate::cli::config::run_config;
use crate::cli::{OutputArgs, RunArgs};
use crate::config::RunConfig;
use crate::event::RunState;
use crate::export::{RunFiles, default_run_dir};
use crate::run::{headless, initial_summary, run_prepared};
use crate::runner;
use crate::serve::ManagedServer;
use crate::sim::SimConfig;
use crate::summary::RunSummary;

/// `servetop run`.
pub async fn run(a: RunArgs) -> i32 {
    if let Some(dir) = &a.plan.resume {
        if a.detach {
            return super::detach::detach(super::detach::args_without_detach(), Some(dir));
        }
        return Box::pin(resume(dir, &a.output)).await;
    }
    let combos = match crate::cli::config::serve_combinations(&a.server.serve_param) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let cfg = match run_config(&a) {
        Ok(cfg) => cfg,
        Err(e) => return fail(&e),
    };
    if a.plan.dry_run {
        return Box::pin(dry_run(&cfg, combos.len())).await;
    }
    if !confirmed(&cfg, combos.len().max(1), &a) {
        say!("servetop: not started");
        return 1;
    }
    if a.detach {
        return super::detach::detach(
            super::detach::args_without_detach(),
            a.output.out.as_deref(),
        );
    }
    if combos.is_empty() {
        Box::pin(execute(cfg, None, &a.output)).await
    } else if cfg.clock.start_at_unix_ms.is_some() {
        fail(
            "--start-at with --serve-param: every configuration would take the same slots; run one configuration per machine (or Job) on the shared clock instead",
        )
    } else {
        Box::pin(super::serve_sweep::serve_sweep(cfg, combos, &a.output)).await
    }
}

/// `servetop run --dry-run`: the plan, and what the server (when servetop does not start it)
/// says of it; nothing is sent but the server's identification and prompt sizing.
async fn dry_run(cfg: &RunConfig, configurations: usize) -> i32 {
    let levels = cfg.levels();
    if cfg.serve.is_some() {
        say!("{}", crate::workload::plan::plan_line(&levels));
        say!(
            "limits: checked against the server --serve starts, once it is up{}",
            if configurations > 1 {
                format!(" (the plan runs once for each of {configurations} configurations)")
            } else {
                String::new()
            }
        );
        return 0;
    }
    let api_key = std::env::var(&cfg.api_key_env)
        .ok()
        .filter(|k| !k.is_empty());
    match Box::pin(runner::prepare(cfg, api_key)).await {
        Ok(p) => {
            say!(
                "[server] {} · model {} · context {}",
                p.server.engine.name(),
                p.server.model,
                p.server
                    .context_limit
                    .map_or("not reported".into(), |n| format!("{n} tokens"))
            );
            for line in p.plan() {
                say!("{line}");
            }
            0
        }
        Err(e) => {
            say!("{}", crate::workload::plan::plan_line(&levels));
            say!("servetop: the server was not checked: {e}");
            2
        }
    }
}

/// A plan of more than [`crate::workload::plan::CONFIRM_LEVELS`] levels: asked on a terminal
/// (unless `--yes`), said headless. `false`: the user declined.
fn confirmed(cfg: &RunConfig, configurations: usize, a: &RunArgs) -> bool {
    use std::io::{BufRead, IsTerminal, Write};
    let levels = cfg.levels();
    if levels.len() <= crate::workload::plan::CONFIRM_LEVELS || a.plan.yes {
        return true;
    }
    let requests: u64 = levels.iter().map(|l| u64::from(l.requests)).sum();
    let what = format!(
        "{} levels and {} requests{}",
        levels.len() * configurations,
        requests * configurations as u64,
        if configurations > 1 {
            format!(" ({configurations} configurations)")
        } else {
            String::new()
        }
    );
    let asking =
        !a.output.headless && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if !asking {
        say!(
            "[warning] the plan has {what} (more than {}; --dry-run shows it)",
            crate::workload::plan::CONFIRM_LEVELS
        );
        return true;
    }
    print!(
        "{}\nThe plan has {what}. Run it? [y/N] (--yes skips this question) ",
        crate::workload::plan::plan_line(&levels)
    );
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
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
    let mut cfg = summary.config.clone();
    // The prompts the first run sent are in the server's prefix cache: the same seed again
    // would measure cache hits, not prefill. Each resume draws a new one.
    let used = [cfg.seed, summary.resumed_with_seed.unwrap_or(cfg.seed)];
    cfg.seed = std::iter::repeat_with(rand::random::<u64>)
        .find(|s| !used.contains(s))
        .unwrap_or_default();
    if cfg.clock.start_at_unix_ms.take().is_some() {
        // Its slots are past: the levels still to run start as soon as it is ready.
        say!(
            "servetop: resuming off the shared clock (--start-at): the remaining levels start one after another, each still {} s",
            cfg.clock.level_seconds.unwrap_or(0.0)
        );
    }
    if let Err(e) = cfg.validate() {
        return fail(&e);
    }
    Box::pin(execute_with(
        cfg,
        summary.simulator.clone(),
        &out,
        Some(summary),
        false,
    ))
    .await
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

/// Cancels `cancel` on Ctrl-C or SIGTERM. SIGHUP (a dropped SSH session) cancels `hangup`
/// when given (the dashboard detaches, the run goes on), else `cancel` too. `say` prints a
/// line (headless only: under the dashboard the screen says it).
fn spawn_signal_watch(cancel: CancellationToken, hangup: Option<CancellationToken>, say: bool) {
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
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => break,
                    _ = term.recv() => break,
                    _ = hup.recv() => match &hangup {
                        Some(h) => h.cancel(),
                        None => break,
                    },
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        if say {
            say!(
                "servetop: stopping — in-flight requests get their grace period, results are being saved"
            );
        }
        cancel.cancel();
    });
}

/// The run's cancel token and its hang-up token, both watched. Under the dashboard (which
/// detaches) and in a detached run, SIGHUP cancels only the latter; a headless run in a
/// terminal stops on it. A run that is one of several takes the series' tokens, which the
/// series watches ([`watch_series`]).
fn watch_signals(
    dashboard: bool,
    several: Option<&OneOfSeveral>,
) -> (CancellationToken, CancellationToken) {
    if let Some(s) = several {
        return (s.stop.child_token(), s.hangup.child_token());
    }
    let cancel = CancellationToken::new();
    let hangup = CancellationToken::new();
    let survive = dashboard || super::detach::is_detached();
    spawn_signal_watch(cancel.clone(), survive.then(|| hangup.clone()), !dashboard);
    (cancel, hangup)
}

/// The stop and hang-up tokens of a series of runs (a tune), watched from now to the end of
/// the process: Ctrl-C between two runs stops the series too.
pub(super) fn watch_series(out: &OutputArgs) -> (CancellationToken, CancellationToken) {
    let dashboard = !out.headless && crate::tui::available();
    watch_signals(dashboard, None)
}

/// The `--serve` server, ready: the server, the run directory its log went into, and how it
/// was asked for.
struct Served {
    server: ManagedServer,
    dir: std::path::PathBuf,
    config: crate::config::ServeConfig,
}

/// Starts the `--serve` server, if the configuration has one, and points `cfg` at it once it is
/// ready: the server, and the run directory its log went into.
async fn launch(cfg: &mut RunConfig, out: &OutputArgs) -> Result<Option<Served>, String> {
    let Some(serve) = cfg.serve.clone() else {
        return Ok(None);
    };
    let dir = out
        .out
        .clone()
        .unwrap_or_else(|| default_run_dir(&crate::serve::model_hint(&serve.command)));
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))?;
    let mut m = ManagedServer::start(&serve.command, serve.context_len, &dir.join("server.log"))?;
    say!("[server] starting: {}", m.launch.command);
    let timeout = std::time::Duration::from_secs_f64(serve.timeout_s);
    let url = m.base_url();
    let ready = m
        .wait_ready(&reqwest::Client::new(), timeout, |s| {
            if (s as u64).is_multiple_of(5) {
                say!(
                    "[server] waiting for {url}/health · {s:.0} s of {:.0}",
                    serve.timeout_s
                );
            }
        })
        .await;
    match ready {
        Ok(s) => say!("[server] ready after {s:.1} s at {url}"),
        Err(e) => {
            m.stop(crate::serve::GRACE).await;
            return Err(e);
        }
    }
    cfg.base_url = url;
    Ok(Some(Served {
        server: m,
        dir,
        config: serve,
    }))
}

/// [`launch`], unless `cancel` fires first (Ctrl-C while the server loads): then the launch is
/// dropped, and the server with it. `Err` is how the run ends: its exit code and why.
async fn launch_unless_stopped(
    cfg: &mut RunConfig,
    out: &OutputArgs,
    cancel: &CancellationToken,
) -> Result<Option<Served>, (i32, Option<String>)> {
    let launched = tokio::select! {
        r = Box::pin(launch(cfg, out)) => Some(r),
        () = cancel.cancelled() => None,
    };
    match launched {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => {
            // Not bad input: the server it was asked to start did not come up.
            say!("servetop: {e}");
            Err((1, Some(e)))
        }
        None => {
            say!("servetop: stopped while the server was starting; it was stopped too");
            Err((EXIT_INTERRUPTED, None))
        }
    }
}

/// A server servetop started, handed to its supervisor (which the runner may ask for a
/// restart), with how it was launched, and the run directory its log went into.
fn hand_over(
    served: Option<Served>,
) -> (
    Option<(crate::serve::ServeHandle, crate::serve::ServerLaunch)>,
    Option<std::path::PathBuf>,
) {
    let Some(s) = served else {
        return (None, None);
    };
    let launch = s.server.launch.clone();
    let handle = crate::serve::supervise(
        s.server,
        s.config.command,
        std::time::Duration::from_secs_f64(s.config.timeout_s),
        s.config.context_steps,
        s.config.restart_on_crash,
    );
    (Some((handle, launch)), Some(s.dir))
}

/// Runs a configuration against its server, headless, and writes the run directory.
pub async fn execute(cfg: RunConfig, simulator: Option<SimConfig>, out: &OutputArgs) -> i32 {
    Box::pin(execute_with(cfg, simulator, out, None, false)).await
}

/// [`execute`] for one of several runs in a row: with `more_follow` the dashboard leaves when
/// the run is over instead of waiting for `q`.
pub async fn execute_one_of_several(cfg: RunConfig, out: &OutputArgs, more_follow: bool) -> i32 {
    Box::pin(execute_with(cfg, None, out, None, more_follow)).await
}

/// [`execute`], continuing `previous` (a resumed run) when given.
async fn execute_with(
    cfg: RunConfig,
    simulator: Option<SimConfig>,
    out: &OutputArgs,
    previous: Option<RunSummary>,
    exit_when_done: bool,
) -> i32 {
    let several = exit_when_done.then(|| {
        let (stop, hangup) = watch_series(out);
        OneOfSeveral {
            more_follow: true,
            quiet: false,
            stop,
            hangup,
            tune: None,
        }
    });
    Box::pin(execute_outcome(
        cfg,
        simulator,
        out,
        previous,
        several.as_ref(),
    ))
    .await
    .0
}

/// How a run that is one of several (a `servetop tune`) differs from a run alone.
pub(super) struct OneOfSeveral {
    /// The dashboard leaves when the run is over instead of waiting for `q`.
    pub more_follow: bool,
    /// The run's final tables are not printed (its summary.md has them).
    pub quiet: bool,
    /// Cancelled when the whole series is stopped.
    pub stop: CancellationToken,
    /// Cancelled when the terminal hangs up (the dashboard detaches, the series goes on).
    pub hangup: CancellationToken,
    /// The tune this run is a configuration of, as its dashboard shows it.
    pub tune: Option<crate::summary::tune::progress::TuneProgress>,
}

/// [`execute_with`], with why it ended early when it did (bad input, a server that did not
/// come up, a dashboard that failed): what `servetop tune` records of a configuration.
pub(super) async fn execute_outcome(
    mut cfg: RunConfig,
    simulator: Option<SimConfig>,
    out: &OutputArgs,
    previous: Option<RunSummary>,
    several: Option<&OneOfSeveral>,
) -> (i32, Option<String>) {
    let exit_when_done = several.is_some_and(|s| s.more_follow);
    // A baseline that cannot be read is bad input, found before any server is started; so is
    // an address servetop cannot serve its metrics on.
    let (baseline, page) = match read_baseline(out).and_then(|b| {
        let page = out
            .metrics_listen
            .as_deref()
            .map(serve_metrics)
            .transpose()?;
        Ok((b, page))
    }) {
        Ok(x) => x,
        Err(e) => return (fail(&e), Some(e)),
    };
    // Signals are watched from before the server starts: Ctrl-C while it loads drops the
    // launch, and the server with it (its Drop kills its process group).
    let dashboard = !out.headless && crate::tui::available();
    let (cancel, hangup) = watch_signals(dashboard, several);
    let mut served = match Box::pin(launch_unless_stopped(&mut cfg, out, &cancel)).await {
        Ok(s) => s,
        Err(ended) => return ended,
    };
    let api_key = std::env::var(&cfg.api_key_env)
        .ok()
        .filter(|k| !k.is_empty());
    let mut prepared = match Box::pin(runner::prepare(&cfg, api_key)).await {
        Ok(p) => p,
        Err(e) => return (fail(&e), Some(e)),
    };
    let baseline_warning = match baseline.as_ref().map(|b| check_baseline(b, &prepared, out)) {
        Some(Err(e)) => return (fail(&e), Some(e)),
        Some(Ok(w)) => w,
        None => None,
    };
    // From here the server belongs to its supervisor, which the runner may ask for a restart.
    let (serve, served_dir) = hand_over(served.take());
    prepared.serve = serve.as_ref().map(|(h, _)| h.clone());
    let dir = served_dir.unwrap_or_else(|| {
        out.out
            .clone()
            .unwrap_or_else(|| default_run_dir(&prepared.server.model))
    });
    let files = match open_run_files(&dir, page, out) {
        Ok(f) => f,
        Err(e) => return (fail(&e), Some(e)),
    };
    super::detach::adopt_log(&dir);
    cfg.out_dir = dir.clone();
    let mut initial = with_server_and_baseline(
        initial_summary(&cfg, simulator, previous, &mut prepared),
        serve.as_ref().map(|(_, l)| l),
        baseline.map(|b| (b, baseline_warning)),
    );
    initial.tune_progress = several.and_then(|s| s.tune.clone());
    init_file_log(&dir);
    let ran = if dashboard {
        // Boxed: the dashboard's and the headless loop's futures are large, and every command
        // that runs one would otherwise carry them inline.
        Box::pin(crate::tui::run(
            &cfg,
            prepared,
            initial,
            Some(files),
            crate::tui::Screen {
                fps: out.fps,
                chart_size: out.chart_size,
                exit_when_done,
                hangup,
            },
            cancel,
        ))
        .await
    } else {
        Ok(Box::pin(run_prepared(
            &cfg,
            prepared,
            initial,
            Some(files),
            false,
            cancel,
        ))
        .await)
    };
    if let Some((handle, _)) = &serve {
        // However the run ended (even with the dashboard failed), its GPU memory is given back
        // first, before anything else can go wrong.
        handle.stop().await;
    }
    let (state, session) = match ran {
        Ok(r) => r,
        Err(e) => {
            say!(
                "servetop: the dashboard failed ({e}); results so far are in {}",
                dir.display()
            );
            return (1, Some(format!("the dashboard failed: {e}")));
        }
    };
    if !several.is_some_and(|s| s.quiet) {
        print_out!("{}", terminal_fit(&headless::final_tables(&session)));
    }
    write_charts(&dir, session.summary.clone(), out.chart_size).await;
    say!("results: {}", dir.display());
    (exit_code(state, &session.summary), None)
}

/// The summary a run starts from, with the server servetop started for it and the baseline it
/// is compared with (and the warning that comparison carries).
fn with_server_and_baseline(
    mut initial: RunSummary,
    launch: Option<&crate::serve::ServerLaunch>,
    baseline: Option<(crate::summary::baseline::Baseline, Option<String>)>,
) -> RunSummary {
    if let Some(l) = launch {
        initial.servers.push(l.clone());
    }
    if let Some((b, warning)) = baseline {
        initial.warnings.extend(warning);
        initial.baseline = Some(b);
    }
    initial
}

/// The run directory's files, serving the metrics page (`--metrics-listen`) and the run's
/// live feed (`live.sock`, and `--live-listen`; said on stderr).
fn open_run_files(
    dir: &std::path::Path,
    page: Option<crate::export::prometheus::Page>,
    out: &OutputArgs,
) -> Result<RunFiles, String> {
    let mut files = RunFiles::create(dir)?;
    if let Some(p) = page {
        files = files.with_metrics_page(p);
    }
    let feed = crate::live::Feed::start(dir, out.live_listen.as_deref())?;
    say!(
        "[live] watch it from any terminal: servetop attach {}",
        dir.display()
    );
    if let Some(a) = feed.tcp_addr() {
        say!("[live] its feed on TCP at {a}: servetop attach --connect {a}");
    }
    Ok(files.with_live(feed))
}

/// The end-of-run tables as printed: on a terminal, aligned and narrowed to its width (a table
/// wider than the terminal wraps mid-cell); elsewhere (a file, a pipe) as they are.
fn terminal_fit(tables: &str) -> String {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return tables.to_string();
    }
    match crossterm::terminal::size() {
        Ok((w, _)) if w > 0 => crate::export::fit::fit_tables(tables, usize::from(w)),
        _ => tables.to_string(),
    }
}

/// The process exit code of a run that ended in `state`: a finished run worse than its
/// baseline (`--fail-on-regression`) gets its own, each regression named on stderr.
fn exit_code(state: RunState, summary: &RunSummary) -> i32 {
    let regressions = summary.regressions();
    for r in &regressions {
        say!("servetop: worse than the baseline: {r}");
    }
    match state {
        RunState::Finished | RunState::Running if !regressions.is_empty() => EXIT_REGRESSION,
        RunState::Finished | RunState::Running => 0,
        RunState::Interrupted => EXIT_INTERRUPTED,
        RunState::Aborted => 1,
    }
}

/// `--metrics-listen ADDR` (`HOST:PORT`, or a port on every interface): listening, with the
/// page it serves.
fn serve_metrics(addr: &str) -> Result<crate::export::prometheus::Page, String> {
    let full = if addr.contains(':') {
        addr.to_string()
    } else {
        format!("0.0.0.0:{addr}")
    };
    let listener = std::net::TcpListener::bind(&full)
        .map_err(|e| format!("--metrics-listen {addr}: cannot listen there: {e}"))?;
    let bound = listener.local_addr().map_or(full, |a| a.to_string());
    let page = crate::export::prometheus::Page::default();
    crate::export::prometheus::serve(listener, page.clone())?;
    say!("[metrics] servetop's own Prometheus metrics at http://{bound}/metrics");
    Ok(page)
}

/// `--baseline`, read (with `--fail-on-regression`'s limit), or none.
fn read_baseline(out: &OutputArgs) -> Result<Option<crate::summary::baseline::Baseline>, String> {
    let Some(p) = out.baseline.as_deref() else {
        return Ok(None);
    };
    let mut b = crate::export::report::load_baseline(p)?;
    b.fail_on_regression_pct = out.fail_on_regression;
    Ok(Some(b))
}

/// Whether `b` can be compared with the plan: a baseline that shares no level with it
/// compares nothing, which is bad input for a gate (`--fail-on-regression`) and a warning
/// otherwise (returned, and said on stderr); so is a simulated run against a real one.
fn check_baseline(
    b: &crate::summary::baseline::Baseline,
    prepared: &runner::Prepared,
    out: &OutputArgs,
) -> Result<Option<String>, String> {
    let planned: Vec<(String, crate::summary::baseline::LevelKey)> = prepared
        .levels
        .iter()
        .map(|spec| {
            let l = crate::summary::LevelSummary::planned(spec);
            (l.label(), l.key())
        })
        .collect();
    let shared = planned
        .iter()
        .filter(|(_, key)| b.levels.iter().any(|l| l.matches(key)))
        .count();
    let counts = crate::summary::baseline::other_request_counts(&b.levels, &planned);
    let warning = if shared == 0 {
        let msg = no_match(b, &counts);
        if out.fail_on_regression.is_some() {
            return Err(msg);
        }
        msg
    } else if !counts.is_empty() {
        format!(
            "--baseline {}: not compared, other request counts ({}); a throughput over another number of requests is not the same measurement",
            b.source,
            counts.join("; ")
        )
    } else if b.simulated != prepared.server.simulated {
        format!(
            "--baseline {}: one run is against servetop's simulator and the other is not",
            b.source
        )
    } else {
        return Ok(None);
    };
    say!("servetop: {warning}");
    Ok(Some(warning))
}

/// Why no level of the plan can be compared with the baseline's, in one line.
pub(super) fn no_match(b: &crate::summary::baseline::Baseline, counts: &[String]) -> String {
    if counts.is_empty() {
        let theirs: Vec<&str> = b.levels.iter().map(|l| l.label.as_str()).collect();
        format!(
            "--baseline {}: no level of this plan matches one of the baseline's ({}; levels match by kind, concurrency, context or rate, input/output lengths and number of requests)",
            b.source,
            theirs.join(", ")
        )
    } else {
        format!(
            "--baseline {}: the baseline's levels sent other numbers of requests ({}); run with the same --requests-per-level and --min-requests",
            b.source,
            counts.join("; ")
        )
    }
}

/// The charts and CSV tables of a finished (or stopped) run, drawn off the async threads; one
/// line names what was written.
async fn write_charts(dir: &std::path::Path, summary: RunSummary, size: (u32, u32)) {
    let chart_dir = dir.to_path_buf();
    let charts = tokio::task::spawn_blocking(move || {
        crate::export::report::write_charts(&chart_dir, &summary, size)
    })
    .await;
    match charts {
        Ok(Ok(files)) => {
            let names = |ext: &str| {
                files
                    .iter()
                    .filter(|f| f.extension().is_some_and(|e| e == ext))
                    .filter_map(|f| f.file_name()?.to_str().map(String::from))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            say!(
                "charts: {} ({}); tables: {}",
                dir.join("charts").display(),
                names("png"),
                names("csv")
            );
        }
        Ok(Err(e)) => say!("servetop: charts not written: {e}"),
        Err(e) => say!("servetop: charts not written: {e}"),
    }
}
