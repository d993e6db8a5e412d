//! A running benchmark: [`start`] is the one place where the runner, its telemetry and the
//! event channel are put together, for the headless loop and the dashboard alike. What follows
//! the events differs: [`headless::drive`] prints progress lines, the dashboard draws.

pub mod estimate;
pub mod follower;
pub mod headless;
pub mod metrics_page;
pub mod session;
pub mod sink;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::RunConfig;
use crate::event::{self, EventRx, RunState};
use crate::export::RunFiles;
use crate::runner::{self, Control, Prepared, Runner};
use crate::sim::SimConfig;
use crate::summary::{LevelStatus, RunSummary};

use self::session::Session;
use self::sink::Sink;

/// A benchmark under way: its events, its pause/skip control and the live token counter.
pub struct Started {
    /// The runner; it ends with the run's state.
    pub task: tokio::task::JoinHandle<RunState>,
    /// Everything the run tells, in order.
    pub events: EventRx,
    /// Pause and skip (the dashboard's keys, and viewers on the live feed).
    pub control: Arc<watch::Sender<Control>>,
    /// Output tokens streamed so far, counted as they arrive (the dashboard's live rate).
    pub live_tokens: Arc<AtomicU64>,
    /// Stops the GPU and engine samplers; cancel it once the events are drained.
    pub telemetry_stop: CancellationToken,
}

/// Starts `prepared` under `cfg`: the samplers beside it, the runner on its own task.
pub fn start(cfg: &RunConfig, prepared: Prepared, cancel: &CancellationToken) -> Started {
    let live_tokens = prepared.client.live_tokens();
    let (tx, events) = event::channel();
    let telemetry_stop = cancel.child_token();
    let to_run = tx.clone();
    let reports =
        crate::telemetry::Reports::new(move |r| to_run.send(event::Event::Telemetry(r)).is_ok());
    let probe = crate::telemetry::spawn_all(
        cfg,
        &prepared.client.http(),
        prepared.client.stalls(),
        &reports,
        &telemetry_stop,
    );
    let (control, control_rx) = watch::channel(Control::default());
    let runner =
        Runner::new(cfg, prepared, tx, cancel.clone(), control_rx).with_client_probe(probe);
    Started {
        task: tokio::spawn(runner.run()),
        events,
        control: Arc::new(control),
        live_tokens,
        telemetry_stop,
    }
}

/// From now on, viewers on the live feed of `sink` (if it serves one) may pause, skip and stop
/// the run `run` is.
pub fn let_viewers_steer(sink: &Sink, run: &Started, cancel: &CancellationToken) {
    if let Some(feed) = sink.feed() {
        feed.obey(crate::live::Remote {
            control: run.control.clone(),
            cancel: cancel.clone(),
        });
    }
}

/// Runs a prepared plan headless, folding every event into a `Session` and handing what it
/// writes to `sink` (`Sink::none()`: nothing written). `quiet` silences the progress lines
/// (tests).
pub async fn run_prepared(
    cfg: &RunConfig,
    prepared: Prepared,
    summary: RunSummary,
    sink: Sink,
    quiet: bool,
    cancel: CancellationToken,
) -> (RunState, Session) {
    let run = start(cfg, prepared, &cancel);
    let_viewers_steer(&sink, &run, &cancel);
    let events = run.events;
    let tokens = run.live_tokens.clone();
    // Folding, file writes and progress lines on the follower thread: the streams' reads never
    // wait for them (a terminal that blocks included).
    let (state, mut session, mut sink) = follower::follow("servetop-follow", move || async move {
        let mut session = Session::new(summary);
        let mut sink = sink.with_tokens(tokens);
        let state = headless::drive(events, &mut session, &mut sink, quiet).await;
        (state, session, sink)
    })
    .await;
    let _ = run.task.await;
    run.telemetry_stop.cancel();
    sink.save(&mut session);
    (state, session)
}

/// The summary a run starts from: new, or (resuming) the saved one; when resuming, levels that
/// are done or skipped are taken out of `prepared`'s plan and keep their results.
pub fn initial_summary(
    cfg: &RunConfig,
    simulator: Option<SimConfig>,
    previous: Option<RunSummary>,
    prepared: &mut Prepared,
    basis: &crate::summary::eta::basis::Basis,
) -> RunSummary {
    let mut s = match previous {
        None => {
            let mut s = RunSummary::new(cfg.clone(), simulator);
            if prepared.backend == crate::client::Backend::Anthropic {
                s.warnings.push(
                    "--backend anthropic: the Messages API has no ignore_eos, so answers end where the model stops: an output may be shorter than asked for, and each request's rates use its own count"
                        .into(),
                );
            }
            s
        }
        Some(mut s) => {
            let settled = |i: u32| {
                s.level(i)
                    .is_some_and(|l| matches!(l.status, LevelStatus::Done | LevelStatus::Skipped))
            };
            prepared.levels.retain(|l| !settled(l.index));
            s.state = RunState::Running;
            s.error = None;
            // The configuration it resumes with (a resumed run leaves the shared clock).
            s.config.clock = cfg.clock;
            let fresh = if cfg.seed == s.config.seed {
                String::new()
            } else {
                // New prompts: the ones sent before are in the server's prefix cache.
                s.resumed_with_seed = Some(cfg.seed);
                format!(
                    ", with new prompts (seed {}; the first run's was {}) the server's prefix cache has not seen",
                    cfg.seed, s.config.seed
                )
            };
            s.warnings.push(format!(
                "resumed at {} with {} levels left{fresh}",
                crate::summary::now_rfc3339(),
                prepared.levels.len()
            ));
            s
        }
    };
    // What is left to run: the plan line with its time, and the lengths the server cannot
    // hold.
    let time = estimate::time_part(
        &s.config,
        &prepared.levels,
        basis,
        prepared.server.context_limit,
        prepared.serve.is_some(),
    );
    s.plan = prepared.plan(&time);
    s
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
    let sink = match &out_dir {
        Some(d) => {
            cfg.out_dir.clone_from(d);
            Sink::new(Some(RunFiles::create(d)?))
        }
        None => Sink::none(),
    };
    let summary = RunSummary::new(cfg.clone(), None);
    Ok(run_prepared(
        &cfg,
        prepared,
        summary,
        sink,
        true,
        CancellationToken::new(),
    )
    .await)
}
