//! A run, composed: the `--serve` server launched, the run directory, the live feed and the
//! metrics page opened, the run driven under the dashboard or headless, the server stopped,
//! then the final tables, charts and the exit code. `servetop run`, `--resume`, `demo`, `tune`
//! and the `--serve-param` sweep all come through here, a run alone ([`alone`]) or one of a
//! series ([`in_series`]); how a run ends comes back as an [`Outcome`].

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use super::signals::{self, Tokens};
use super::{EXIT_INTERRUPTED, EXIT_REGRESSION, fail};
use crate::cli::OutputArgs;
use crate::config::{RunConfig, ServeConfig};
use crate::event::RunState;
use crate::export::{RunFiles, default_run_dir};
use crate::run::metrics_page::{self, Page};
use crate::run::sink::Sink;
use crate::run::{headless, initial_summary, run_prepared};
use crate::runner;
use crate::serve::{ManagedServer, ServeHandle, ServerLaunch};
use crate::sim::SimConfig;
use crate::summary::RunSummary;
use crate::summary::baseline::{self, Baseline};

/// What to run: a configuration, the simulator servetop started for it (the demo), and the
/// run it continues (`--resume`).
pub struct Job {
    pub cfg: RunConfig,
    pub simulator: Option<SimConfig>,
    pub previous: Option<RunSummary>,
}

impl Job {
    /// A new run of `cfg` against a server servetop did not simulate.
    pub fn new(cfg: RunConfig) -> Self {
        Self {
            cfg,
            simulator: None,
            previous: None,
        }
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct Outcome {
    /// The process exit code (see `cmd`).
    pub code: i32,
    /// Why it ended before it ran, or without its results (bad input, a server that did not come
    /// up, a dashboard that failed): what `servetop tune` records of a configuration. None: it
    /// ran, however it ended.
    pub error: Option<String>,
}

impl Outcome {
    /// Bad input, said as servetop's one-line error.
    fn bad_input(e: String) -> Self {
        Self {
            code: fail(&e),
            error: Some(e),
        }
    }
}

/// A series of runs (a tune, a `--serve-param` sweep): how each of its runs differs from a run
/// alone.
pub struct Series {
    /// The series' signals, watched once for all its runs.
    tokens: Tokens,
    /// The dashboard leaves when the run is over instead of waiting for `q`.
    pub more_follow: bool,
    /// The run's final tables are not printed (its summary.md has them).
    pub quiet: bool,
    /// The tune this run is a configuration of, as its dashboard shows it.
    pub tune: Option<crate::summary::tune::progress::TuneProgress>,
}

impl Series {
    /// A series of runs written as `out` says, its signals watched from now to the end of the
    /// process: Ctrl-C between two runs stops the series too.
    pub fn watch(out: &OutputArgs) -> Self {
        Self {
            tokens: signals::watch(signals::dashboard(out)),
            more_follow: true,
            quiet: false,
            tune: None,
        }
    }

    /// Whether the series was stopped (Ctrl-C, SIGTERM).
    pub fn stopped(&self) -> bool {
        self.tokens.stop.is_cancelled()
    }
}

/// Runs `job` on its own, written as `out` says.
pub async fn alone(job: Job, out: &OutputArgs) -> Outcome {
    Box::pin(compose(job, out, None)).await
}

/// Runs `job` as one run of `series`.
pub async fn in_series(job: Job, out: &OutputArgs, series: &Series) -> Outcome {
    Box::pin(compose(job, out, Some(series))).await
}

/// The run, step by step (see the module's page).
async fn compose(job: Job, out: &OutputArgs, series: Option<&Series>) -> Outcome {
    let Job {
        mut cfg,
        simulator,
        previous,
    } = job;
    // A run directory that holds a run already is bad input, found before anything is
    // started or sent: the new run's records would be added to that run's.
    if series.is_none()
        && previous.is_none()
        && let Some(d) = &out.out
        && let Some(f) = RunFiles::held_in(d)
    {
        return Outcome::bad_input(format!(
            "--out {}: it holds a run already ({f}); give another directory, or --resume {} to finish that run",
            d.display(),
            d.display()
        ));
    }
    // A baseline that cannot be read is bad input, found before any server is started; so is
    // an address servetop cannot serve its metrics on.
    let (baseline, page) = match read_baseline(out).and_then(|b| Ok((b, listen_metrics(out)?))) {
        Ok(x) => x,
        Err(e) => return Outcome::bad_input(e),
    };
    // Signals are watched from before the server starts: Ctrl-C while it loads drops the
    // launch, and the server with it (its Drop kills its process group).
    let dashboard = signals::dashboard(out);
    let tokens = series.map_or_else(|| signals::watch(dashboard), |s| s.tokens.child());
    let served = match Box::pin(launch_unless_stopped(&mut cfg, out, &tokens.stop)).await {
        Ok(s) => s,
        Err(ended) => return ended,
    };
    let api_key = std::env::var(&cfg.api_key_env)
        .ok()
        .filter(|k| !k.is_empty());
    let mut prepared = match Box::pin(runner::prepare(&cfg, api_key)).await {
        Ok(p) => p,
        Err(e) => return Outcome::bad_input(e),
    };
    simulated_gpus(&mut cfg, &prepared.server).await;
    let baseline = match baseline.map(|b| check_baseline(b, &prepared)).transpose() {
        Ok(b) => b,
        Err(e) => return Outcome::bad_input(e),
    };
    // From here the server belongs to its supervisor, which the runner may ask for a restart.
    let (serve, served_dir) = hand_over(served);
    prepared.serve = serve.as_ref().map(|(h, _)| h.clone());
    let dir = served_dir.unwrap_or_else(|| {
        out.out
            .clone()
            .unwrap_or_else(|| default_run_dir(&prepared.server.model))
    });
    let sink = match open_sink(&dir, page, out) {
        Ok(s) => s,
        Err(e) => return Outcome::bad_input(e),
    };
    super::detach::adopt_log(&dir);
    cfg.out_dir.clone_from(&dir);
    let basis = plan_basis(&cfg, &prepared, previous.as_ref()).await;
    let mut initial = initial_summary(&cfg, simulator, previous, &mut prepared, &basis);
    initial
        .servers
        .extend(serve.as_ref().map(|(_, launch)| launch.clone()));
    if let Some((b, warning)) = baseline {
        initial.warnings.extend(warning);
        initial.baseline = Some(b);
    }
    initial.tune_progress = series.and_then(|s| s.tune.clone());
    init_file_log(&dir);
    let ran = if dashboard {
        // The plan stays on the terminal above the dashboard's screen, with the tables after.
        for line in &initial.plan {
            print_out!("{line}");
        }
        // Boxed: the dashboard's and the headless loop's futures are large, and every command
        // that runs one would otherwise carry them inline.
        Box::pin(crate::tui::run(
            &cfg,
            prepared,
            initial,
            sink,
            crate::tui::Screen {
                fps: out.fps,
                chart_size: out.chart_size,
                exit_when_done: series.is_some_and(|s| s.more_follow),
                hangup: tokens.hangup,
            },
            tokens.stop,
        ))
        .await
    } else {
        Ok(Box::pin(run_prepared(
            &cfg,
            prepared,
            initial,
            sink,
            false,
            tokens.stop,
        ))
        .await)
    };
    if let Some((handle, _)) = &serve {
        // However the run ended (even with the dashboard failed), its GPU memory is given back
        // first, before anything else can go wrong.
        handle.stop().await;
    }
    Box::pin(finish(ran, &dir, out, series)).await
}

/// What the plan's time is estimated from: a resumed run's own measured levels, else the best
/// basis without sending a request (`run::estimate::basis`).
pub(super) async fn plan_basis(
    cfg: &RunConfig,
    prepared: &runner::Prepared,
    previous: Option<&RunSummary>,
) -> crate::summary::eta::basis::Basis {
    use crate::summary::eta::basis::Basis;
    if let Some(p) = previous.filter(|p| crate::summary::eta::waiting(p).is_some()) {
        return Basis::Earlier {
            summary: Box::new(p.clone()),
            name: "from the levels this run measured before it stopped".into(),
        };
    }
    crate::run::estimate::basis(cfg, &prepared.server).await
}

/// The end of a run that was driven: the final tables (unless the series is quiet), the
/// charts, and the exit code; or what is said when the dashboard failed.
async fn finish(
    ran: std::io::Result<(RunState, crate::run::session::Session)>,
    dir: &Path,
    out: &OutputArgs,
    series: Option<&Series>,
) -> Outcome {
    let (state, session) = match ran {
        Ok(r) => r,
        Err(e) => {
            say!(
                "servetop: the dashboard failed ({e}); results so far are in {}",
                dir.display()
            );
            if series.is_none() {
                say_resume(dir);
            }
            return Outcome {
                code: 1,
                error: Some(format!("the dashboard failed: {e}")),
            };
        }
    };
    if !series.is_some_and(|s| s.quiet) {
        print_out!("{}", terminal_fit(&headless::final_tables(&session)));
    }
    write_charts(dir, session.summary.clone(), out.chart_size).await;
    say!("results: {}", dir.display());
    let resumable = matches!(state, RunState::Interrupted | RunState::Aborted)
        && session.summary.config.search.is_none()
        && series.is_none();
    if resumable {
        say_resume(dir);
    }
    Outcome {
        code: exit_code(state, &session.summary),
        error: None,
    }
}

/// How to finish a run that stopped early: its levels not done run again, the done ones kept.
fn say_resume(dir: &Path) {
    say!(
        "servetop: to finish this run (its levels not yet done): servetop run --resume {}",
        dir.display()
    );
}

/// The `--serve` server, ready: the server, the run directory its log went into, and how it
/// was asked for.
struct Served {
    server: ManagedServer,
    dir: PathBuf,
    config: ServeConfig,
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
/// dropped, and the server with it. `Err` is how the run ends.
async fn launch_unless_stopped(
    cfg: &mut RunConfig,
    out: &OutputArgs,
    cancel: &CancellationToken,
) -> Result<Option<Served>, Outcome> {
    let launched = tokio::select! {
        r = Box::pin(launch(cfg, out)) => Some(r),
        () = cancel.cancelled() => None,
    };
    match launched {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => {
            // Not bad input: the server it was asked to start did not come up.
            say!("servetop: {e}");
            Err(Outcome {
                code: 1,
                error: Some(e),
            })
        }
        None => {
            say!("servetop: stopped while the server was starting; it was stopped too");
            Err(Outcome {
                code: EXIT_INTERRUPTED,
                error: None,
            })
        }
    }
}

/// servetop's own simulator serves its simulated GPUs at `/dcgm/metrics`: a run against it reads
/// them there without `--dcgm-url` (unless `--no-gpu`, or another source was named).
async fn simulated_gpus(cfg: &mut RunConfig, server: &crate::client::ServerInfo) {
    if cfg.dcgm_url.is_some() || cfg.no_gpu || !server.simulated {
        return;
    }
    let url = format!("{}/dcgm/metrics", cfg.base_url.trim_end_matches('/'));
    let Ok(http) = crate::client::http_client(&cfg.header_pairs()) else {
        return;
    };
    if let Ok(sample) = crate::telemetry::scrape::dcgm_sample(&http, &url).await
        && !sample.gpus.is_empty()
    {
        say!(
            "[gpu] the simulator's {} SIMULATED GPU{} at {url}",
            sample.gpus.len(),
            if sample.gpus.len() == 1 { "" } else { "s" }
        );
        cfg.dcgm_url = Some(url);
    }
}

/// A server servetop started, handed to its supervisor (which the runner may ask for a
/// restart), with how it was launched, and the run directory its log went into.
fn hand_over(served: Option<Served>) -> (Option<(ServeHandle, ServerLaunch)>, Option<PathBuf>) {
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

/// The run directory's files, with the metrics page (`--metrics-listen`) and the run's live
/// feed (`live.sock`, and `--live-listen`; said on stderr) served beside them.
fn open_sink(dir: &Path, page: Option<Page>, out: &OutputArgs) -> Result<Sink, String> {
    let mut sink = Sink::new(Some(RunFiles::create(dir)?));
    if let Some(p) = page {
        sink = sink.with_metrics_page(p);
    }
    let feed = crate::live::Feed::start(dir, out.live_listen.as_deref())?;
    say!(
        "[live] watch it from any terminal: servetop attach {}",
        dir.display()
    );
    if let Some(a) = feed.tcp_addr() {
        say!("[live] its feed on TCP at {a}: servetop attach --connect {a}");
    }
    Ok(sink.with_live(feed))
}

/// `--metrics-listen ADDR`: listening, with the page it serves; none without the flag.
fn listen_metrics(out: &OutputArgs) -> Result<Option<Page>, String> {
    let Some(addr) = out.metrics_listen.as_deref() else {
        return Ok(None);
    };
    let (page, bound) = metrics_page::listen(addr)?;
    say!("[metrics] servetop's own Prometheus metrics at http://{bound}/metrics");
    Ok(Some(page))
}

/// `--baseline`, read (with `--fail-on-regression`'s limit), or none.
fn read_baseline(out: &OutputArgs) -> Result<Option<Baseline>, String> {
    let Some(p) = out.baseline.as_deref() else {
        return Ok(None);
    };
    let mut b = crate::export::report::load_baseline(p)?;
    b.fail_on_regression_pct = out.fail_on_regression;
    Ok(Some(b))
}

/// `b` held against the plan ([`baseline::check_plan`]): the baseline with the warning the
/// comparison carries (said on stderr), or why a gate cannot run.
fn check_baseline(
    b: Baseline,
    prepared: &runner::Prepared,
) -> Result<(Baseline, Option<String>), String> {
    let planned: Vec<(String, baseline::LevelKey)> = prepared
        .levels
        .iter()
        .map(|spec| {
            let l = crate::summary::LevelSummary::planned(spec);
            (l.label(), l.key())
        })
        .collect();
    let warning = baseline::check_plan(&b, &planned, prepared.server.simulated)?;
    if let Some(w) = &warning {
        say!("servetop: {w}");
    }
    Ok((b, warning))
}

/// Sends tracing output to `servetop.log` in the run directory (never onto the dashboard).
fn init_file_log(dir: &Path) {
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

/// The charts and CSV tables of a finished (or stopped) run, drawn off the async threads; one
/// line names what was written.
async fn write_charts(dir: &Path, summary: RunSummary, size: (u32, u32)) {
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
            if let Some(page) = files.iter().find(|f| f.ends_with("report.html")) {
                say!(
                    "report: {} (one file: open it in a browser)",
                    page.display()
                );
            }
        }
        Ok(Err(e)) => say!("servetop: charts not written: {e}"),
        Err(e) => say!("servetop: charts not written: {e}"),
    }
}
