//! The dashboard's frame loop: it owns the `App` and waits on three things at once: runner
//! events (drained in batches, folded in update), terminal input (mapped to actions), and a
//! frame clock (draw at `--fps`). A hang-up or `d` detaches it: no more frames or keys, the run
//! goes on and the loop folds its events until it ends. The runner never waits on it
//! (docs/STYLE.md rule 1).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ratatui::crossterm::event::{Event as TermEvent, EventStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::event::{self, RunState};
use crate::run::session::Session;
use crate::runner::Control;

use super::action::map_key;
use super::app::{App, Effect};
use super::exports::{spawn_charts, spawn_screenshots};
use super::frames;

/// Tells the terminal the dashboard left it and the run goes on.
fn say_detached(dir: Option<&std::path::Path>) {
    use std::io::Write as _;
    let attach = dir.map_or_else(String::new, |d| format!(" {}", d.display()));
    let _ = writeln!(
        std::io::stderr(),
        "servetop: detached; the run goes on (pid {}). Watch it from any terminal: servetop attach{attach}\nClosing this terminal does not stop it; Ctrl-C here does. Its tables are printed here when it ends.",
        std::process::id()
    );
}

/// The dashboard's event loop, over any terminal.
pub(super) struct Loop {
    pub(super) fps: f64,
    /// The terminal hung up (never, off screen).
    pub(super) hangup: CancellationToken,
    pub(super) chart_size: (u32, u32),
    /// Keyboard input; none off screen.
    pub(super) input: Option<EventStream>,
    /// Leave as soon as the run is over (off screen) instead of when the user quits.
    pub(super) exit_when_done: bool,
}

impl Loop {
    /// Drives `app` over the started run's events until it ends, then stops the samplers.
    pub(super) async fn run<B: ratatui::backend::Backend<Error = std::io::Error>>(
        self,
        app: App,
        start: crate::run::Started,
        terminal: &mut ratatui::Terminal<B>,
        cancel: &CancellationToken,
    ) -> std::io::Result<(RunState, Session, frames::Drawn)> {
        // Boxed: the loop's state is large, and the callers' futures stay small.
        let r = Box::pin(self.drive(
            app,
            start.events,
            terminal,
            &start.control,
            cancel,
            start.task,
        ))
        .await;
        start.telemetry_stop.cancel();
        r
    }

    async fn drive<B: ratatui::backend::Backend<Error = std::io::Error>>(
        mut self,
        mut app: App,
        mut rx: event::EventRx,
        terminal: &mut ratatui::Terminal<B>,
        control_tx: &watch::Sender<Control>,
        cancel: &CancellationToken,
        task: tokio::task::JoinHandle<RunState>,
    ) -> std::io::Result<(RunState, Session, frames::Drawn)> {
        app.clocked.frames = frames::FrameRate::new(self.fps);
        let period = Duration::from_secs_f64(1.0 / self.fps.clamp(0.5, 60.0));
        let mut frames = tokio::time::interval(period);
        frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let start = Instant::now();
        // The runner drops its sender when it is done; the screen stays up until the user leaves.
        let mut runner_open = true;
        let mut take_events = crate::run::follower::drain_ticker();
        let mut batch = Vec::new();
        // Detached (`d`, or the terminal hung up): no more frames or keys; the run goes on and
        // the loop folds its events until it ends.
        let mut detached = false;
        while !app.ui.exit {
            let key = async {
                match self.input.as_mut() {
                    Some(i) => i.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = take_events.tick(), if runner_open => {
                    // Taken every few milliseconds, never waited for (`follower::DRAIN`).
                    let closed = crate::run::follower::take(&mut rx, &mut batch);
                    for ev in batch.drain(..) {
                        app.apply(ev);
                    }
                    if detached {
                        // No frames to end the batches: the files and the journal are
                        // flushed here (viewers read the journal).
                        app.end_batch();
                    }
                    // The runner's channel stays open while the samplers report, so the run's
                    // end is its last event, not the channel's.
                    if closed || app.run_over() {
                        runner_open = !closed;
                        if self.exit_when_done || detached { break; }
                    }
                }
                Some(term) = key => {
                    if term.is_err() {
                        // The terminal cannot be read: it is gone.
                        detached = true;
                        self.input = None;
                    } else if let Ok(TermEvent::Key(k)) = term
                        && let Some(action) = map_key(k, app.ui.confirm_quit)
                    {
                        match app.handle(action) {
                            Some(Effect::Pause(p)) => control_tx.send_modify(|c| c.paused = p),
                            Some(Effect::Skip) => control_tx.send_modify(|c| c.skip += 1),
                            Some(Effect::Cancel) => cancel.cancel(),
                            Some(Effect::Hurry) => crate::runner::hurry(),
                            Some(Effect::Detach) => {
                                detached = true;
                                self.input = None;
                                let _ = ratatui::try_restore();
                                say_detached(app.sink.dir());
                            }
                            Some(Effect::Charts) => spawn_charts(&app, self.chart_size),
                            Some(Effect::Screenshots) => {
                                let size = terminal.size().unwrap_or_default();
                                spawn_screenshots(&mut app, size.width, size.height);
                            }
                            None => {}
                        }
                    }
                }
                _ = frames.tick(), if !detached => {
                    app.end_batch();
                    app.tick(start.elapsed());
                    if let Err(e) = terminal.draw(|f| f.render_widget(&app, f.area())) {
                        // The terminal is gone (writes fail before its SIGHUP comes): the
                        // dashboard detaches, the run goes on.
                        tracing::warn!("the dashboard detached: drawing failed: {e}");
                        detached = true;
                        self.input = None;
                        continue;
                    }
                    app.clocked.frames.drew(start.elapsed());
                }
                () = self.hangup.cancelled(), if !detached => {
                    // The terminal is gone: nothing to restore or say there.
                    detached = true;
                    self.input = None;
                }
                () = cancel.cancelled(), if !app.ui.quitting => {
                    // SIGTERM or SIGHUP: stop like a confirmed quit.
                    app.ui.quitting = true;
                    if app.run_over() { app.ui.exit = true; }
                }
            }
        }
        let state = task.await.unwrap_or(RunState::Aborted);
        // Events sent after the loop stopped (the final RunFinished) still count.
        while let Ok(ev) = rx.try_recv() {
            app.apply(ev);
        }
        app.end_batch();
        app.sink.save(&mut app.session);
        let drawn = frames::Drawn {
            frames: app.clocked.frames.total,
            seconds: start.elapsed().as_secs_f64(),
        };
        Ok((state, app.session, drawn))
    }
}
