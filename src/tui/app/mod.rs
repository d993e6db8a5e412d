//! `App`: the dashboard's state. Events and key intents go in (`apply`, `handle`, `tick`);
//! everything the screen shows is computed here, so rendering only reads and formats.

mod clocked;
mod keys;
mod ui_state;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::event::{Event, RunState};
use crate::metrics::LevelStats;
use crate::run::session::Session;
use crate::run::sink::Sink;
use crate::workload::LevelKind;

pub use self::clocked::Clocked;
pub use self::ui_state::UiState;
pub use super::tab::Tab;
use super::views::config_lines;
pub use super::views::{
    Curve, LatencyView, LiveRate, LongView, Series, SweepView, TelemetryView, Views, y_max,
};

/// What the event loop must do after a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Tell the runner to pause (`true`) or resume.
    Pause(bool),
    /// Tell the runner to skip the level in progress.
    Skip,
    /// Cancel the run (in-flight requests get their grace period).
    Cancel,
    /// End the grace period now (asked to stop again while stopping).
    Hurry,
    /// Write PNG screenshots of every tab into the run directory.
    Screenshots,
    /// Draw the PNG charts and CSV tables into the run directory.
    Charts,
    /// Leave the dashboard and let the run go on without it.
    Detach,
}

/// Whose dashboard this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The run's own: `q` stops the run (asking first), Ctrl-C at once, `d` detaches.
    Run,
    /// A viewer (`servetop attach`): `q`, Ctrl-C and `d` leave it and never stop the run;
    /// `X` stops the run, asking first, when the viewer can steer it.
    Viewer {
        /// It can pause, skip and stop the run (a run going on, on its socket).
        steers: bool,
        /// The feed ended: the run is over, or its process is gone.
        ended: bool,
    },
}

/// The dashboard state: the session it folds events into, and beside it only what the session
/// has not: the person's own state, the clock's, and what is derived for drawing.
pub struct App {
    pub role: Role,
    pub session: Session,
    /// Where the session's changes are written (the run directory, or nowhere).
    pub sink: Sink,
    /// The tab, its scroll, the level picked, help, the quit question, pause, the footer.
    pub ui: UiState,
    /// The time, the request last sent, the output rate, telemetry history, frames.
    pub clocked: Clocked,
    /// What the tabs draw, computed from the session as events arrive.
    pub views: Views,
}

impl App {
    /// A dashboard over `session`; `live_tokens` is the client's running token count.
    pub fn new(session: Session, live_tokens: Arc<AtomicU64>, no_color: bool) -> Self {
        Self {
            role: Role::Run,
            session,
            sink: Sink::none(),
            ui: UiState::new(no_color),
            clocked: Clocked::new(live_tokens),
            views: Views::default(),
        }
    }

    /// The same dashboard, writing the session's changes through `sink`.
    #[must_use]
    pub fn with_sink(mut self, sink: Sink) -> Self {
        self.sink = sink;
        self
    }

    /// A finished run's dashboard rebuilt from its saved results and telemetry (for
    /// `servetop report --screenshots`).
    pub fn from_saved(
        summary: crate::summary::RunSummary,
        telemetry: &[crate::telemetry::TelemetryRecord],
    ) -> Self {
        use crate::telemetry::TelemetryRecord;
        let levels: Vec<crate::summary::LevelSummary> = summary.levels().cloned().collect();
        let t0 = telemetry
            .iter()
            .filter_map(|t| match t {
                TelemetryRecord::Gpu(g) => Some(g.at_unix_ms),
                TelemetryRecord::Server(s) => Some(s.at_unix_ms),
                _ => None,
            })
            .chain(levels.iter().filter_map(|l| l.started_at_unix_ms))
            .min()
            .unwrap_or(0);
        let secs = |ms: i64| (ms - t0).max(0) as f64 / 1000.0;
        let phase = format!("{:?}", summary.state).to_lowercase();
        let mut app = App::new(Session::new(summary), Arc::new(AtomicU64::new(0)), false);
        app.session.phase = phase;
        let history = &mut app.clocked.telemetry;
        for rec in telemetry {
            match rec {
                TelemetryRecord::Gpu(g) => {
                    history.add(secs(g.at_unix_ms), rec);
                    app.session.latest_gpu = Some(g.clone());
                }
                TelemetryRecord::Server(s) => {
                    history.add(secs(s.at_unix_ms), rec);
                    app.session.latest_server = Some((**s).clone());
                }
                _ => {}
            }
        }
        for l in &levels {
            if let Some(t) = l.started_at_unix_ms {
                history.level_marks.push((secs(t), l.label()));
            }
        }
        let end = levels.iter().filter_map(|l| l.finished_at_unix_ms).max();
        app.clocked.now = Duration::from_secs_f64(end.map_or(0.0, secs));
        app.views.config_lines = config_lines(&app.session.summary);
        app.refresh_views();
        app
    }

    /// Every tab drawn into a buffer of `width`×`height` cells.
    pub fn tab_buffers(&mut self, width: u16, height: u16) -> Vec<(Tab, ratatui::buffer::Buffer)> {
        let keep = self.ui.clone();
        self.ui.show_help = false;
        self.ui.confirm_quit = false;
        let area = ratatui::layout::Rect::new(0, 0, width, height);
        let mut out = Vec::new();
        for tab in Tab::ALL {
            self.ui.tab = tab;
            let mut buf = ratatui::buffer::Buffer::empty(area);
            ratatui::widgets::Widget::render(&*self, area, &mut buf);
            out.push((tab, buf));
        }
        self.ui = keep;
        out
    }

    /// Whether the run has ended (finished, interrupted or aborted).
    pub fn run_over(&self) -> bool {
        self.session.summary.state != RunState::Running
    }

    /// The label of level `index` (empty when the plan has no such level).
    fn label_of(&self, index: u32) -> Option<String> {
        self.session
            .summary
            .level(index)
            .map(crate::summary::LevelSummary::label)
    }

    /// Folds one event from the runner.
    pub fn apply(&mut self, ev: Event) {
        match &ev {
            Event::LevelStarted { index, .. } => {
                let label = self.label_of(*index).unwrap_or_default();
                self.clocked.level_started(label);
                self.views.current_stats = None;
            }
            Event::LevelFinished { index, .. } => {
                // The sweep tab's curves are its own levels' (concurrency, rate, trace).
                let ended = self
                    .session
                    .summary
                    .level(*index)
                    .filter(|l| {
                        matches!(
                            l.kind,
                            LevelKind::Sweep | LevelKind::Rate | LevelKind::Trace
                        )
                    })
                    .map(crate::summary::LevelSummary::label);
                self.clocked.rate.level_ended(ended);
            }
            Event::Sent { .. } => self.clocked.sent(),
            Event::Request(r) if !r.warmup => self.views.stats_dirty = true,
            Event::Outage { .. } => self.views.stats_dirty = true,
            Event::Telemetry(rec) => self.clocked.telemetry(rec),
            _ => {}
        }
        let finished = match &ev {
            Event::LevelFinished { index, .. } => Some(*index),
            _ => None,
        };
        let over = matches!(ev, Event::RunFinished { .. });
        let started = matches!(ev, Event::RunStarted { .. } | Event::Calibrated(_));
        self.sink.apply(&mut self.session, ev);
        if finished.is_some() {
            self.views.current_stats = None;
            self.clocked.last_sent_at = None;
        }
        if over && self.ui.quitting {
            self.ui.exit = true;
        }
        if over {
            // The run's end: the panel turns to every level's percentiles.
            self.views.latency = None;
        } else if finished.is_some() {
            // The level's final figures, until the next level sends.
            self.refresh_latency();
        }
        if finished.is_some() || over {
            self.refresh_views();
        }
        if self.views.config_lines.is_empty() || started {
            self.views.config_lines = config_lines(&self.session.summary);
        }
    }

    /// The statistics to show for a level: live for the one in progress, final otherwise.
    pub fn level_stats(&self, index: u32) -> Option<&LevelStats> {
        if self.session.current == Some(index) {
            self.views.current_stats.as_ref()
        } else {
            self.session
                .summary
                .level(index)
                .and_then(|l| l.stats.as_ref())
        }
    }

    /// Whether any sweep level so far has its energy measured (the sweep table then shows
    /// tokens per joule at wide sizes).
    pub fn sweep_energy(&self) -> bool {
        self.session
            .summary
            .sweep
            .iter()
            .any(|l| l.energy.output_tokens_per_joule.is_some())
    }

    /// Whether any sweep level so far streamed reasoning (the sweep table then shows TTFC).
    pub fn sweep_reasons(&self) -> bool {
        self.session.summary.sweep.iter().any(|l| {
            self.level_stats(l.index)
                .and_then(|s| s.scalars.reasoning_share)
                .is_some_and(|r| r > 0.0)
        })
    }

    /// Seconds left in the level in progress at its pace so far.
    pub fn eta_s(&self) -> Option<f64> {
        let i = self.session.current?;
        let l = self.session.summary.level(i)?;
        let p = self.session.progress.get(&i)?;
        let start = self.clocked.rate.level_start?;
        let elapsed = self.clocked.now.saturating_sub(start).as_secs_f64();
        if p.finished == 0 || elapsed <= 0.0 {
            return None;
        }
        if let Some(secs) = l.seconds {
            // A time-bounded level ends when its time is up (its drain aside).
            return Some((secs - elapsed).max(0.0));
        }
        let left = u64::from(l.requests).saturating_sub(p.finished) as f64;
        Some(left * elapsed / p.finished as f64)
    }

    /// Ends a batch of events: refresh the live statistics once, push request lines to disk.
    pub fn end_batch(&mut self) {
        if self.views.stats_dirty {
            self.views.current_stats = self
                .session
                .current
                .and_then(|i| self.session.live_stats(i));
            self.views.stats_dirty = false;
            self.refresh_latency();
            self.refresh_views();
        }
        self.sink.flush(&mut self.session);
    }

    /// Advances the clock: samples the live token rate once a second, takes the footer's
    /// message down when its time is up.
    pub fn tick(&mut self, now: Duration) {
        self.clocked.tick(now, self.session.current.is_some());
        // A viewer's frames say nothing of the run's reads.
        self.clocked.frames_lowered = match self.role {
            Role::Run => self.clocked.frames.lowered(now),
            Role::Viewer { .. } => None,
        };
        self.ui.tick(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    use crate::summary::RunSummary;

    /// A dashboard over the demo plan, nothing run yet.
    pub(super) fn app() -> App {
        let cfg = crate::config::RunConfig::demo();
        App::new(
            Session::new(RunSummary::new(cfg, None)),
            Arc::new(AtomicU64::new(0)),
            true,
        )
    }

    #[test]
    fn live_rate_is_sampled_each_second() {
        let counter = Arc::new(AtomicU64::new(0));
        let cfg = crate::config::RunConfig::demo();
        let mut a = App::new(
            Session::new(RunSummary::new(cfg, None)),
            counter.clone(),
            true,
        );
        a.session.current = Some(0);
        a.apply(Event::LevelStarted {
            index: 0,
            origin_unix_us: 0,
        });
        a.session.current = Some(0);
        counter.store(300, Ordering::Relaxed);
        a.tick(Duration::from_millis(500));
        assert!(a.clocked.rate.series.is_empty());
        a.tick(Duration::from_millis(1500));
        assert_eq!(a.clocked.rate.series.len(), 1);
        assert!(
            (a.clocked.rate.current - 200.0).abs() < 1e-9,
            "{}",
            a.clocked.rate.current
        );
    }

    /// A level's live curve outlives the level: kept, labelled, when the next one starts.
    #[test]
    fn finished_levels_keep_their_live_curves() {
        let counter = Arc::new(AtomicU64::new(0));
        let mut cfg = crate::config::RunConfig::demo();
        cfg.concurrency = (1..=8).collect();
        let mut a = App::new(
            Session::new(RunSummary::new(cfg.clone(), None)),
            counter.clone(),
            true,
        );
        a.session.summary.sweep = cfg
            .levels()
            .iter()
            .filter(|l| l.kind == LevelKind::Sweep)
            .map(crate::summary::LevelSummary::planned)
            .collect();
        let n = a.session.summary.sweep.len();
        assert!(n > super::super::views::FINISHED_CURVES, "{n} levels");
        for level in 0..n as u32 {
            a.apply(Event::LevelStarted {
                index: level,
                origin_unix_us: 0,
            });
            assert!(
                a.clocked.rate.series.is_empty(),
                "a new level starts a new curve"
            );
            for s in 1..=3u64 {
                counter.fetch_add(100, Ordering::Relaxed);
                a.tick(a.clocked.now + Duration::from_secs(1));
                assert_eq!(a.clocked.rate.series.len() as u64, s);
            }
            a.apply(Event::LevelFinished {
                index: level,
                interrupted: false,
                at_unix_ms: 0,
            });
            let (label, pts) = a.clocked.rate.finished.last().unwrap();
            let want = a.session.summary.level(level).unwrap().label();
            assert_eq!((label, pts.len()), (&want, 3));
        }
        assert_eq!(
            a.clocked.rate.finished.len(),
            super::super::views::FINISHED_CURVES
        );
    }

    /// The sparkline's accept lengths are the finished sweep levels', read from the session.
    #[test]
    fn the_accept_history_is_the_sweep_levels() {
        let app = crate::tui::fixtures::finished_run();
        let want: Vec<u64> = app
            .session
            .summary
            .sweep
            .iter()
            .filter_map(crate::summary::LevelSummary::accept_length_client)
            .map(|a| (a * 100.0).round() as u64)
            .collect();
        assert!(!want.is_empty());
        assert_eq!(app.views.accept_history, want);
    }
}
