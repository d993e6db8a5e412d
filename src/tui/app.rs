//! `App`: the dashboard's state. Events and key intents go in (`apply`, `handle`, `tick`);
//! everything the screen shows is computed here, so rendering only reads and formats.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::event::{Event, RunState};
use crate::metrics::LevelStats;
use crate::run::session::Session;
use crate::run::sink::Sink;
use crate::workload::LevelKind;

use super::action::Action;
pub use super::tab::Tab;
use super::views::config_lines;
pub use super::views::{
    Curve, LatencyView, LiveRate, LongView, Series, SweepView, TelemetryView, y_max,
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

/// The dashboard state.
// Independent UI flags (help open, quit question, paused, quitting, exit, no colour), not a
// hidden state machine.
#[allow(clippy::struct_excessive_bools)]
pub struct App {
    pub role: Role,
    pub session: Session,
    /// Where the session's changes are written (the run directory, or nowhere).
    pub sink: Sink,
    pub tab: Tab,
    pub show_help: bool,
    pub confirm_quit: bool,
    pub paused: bool,
    /// Quit was confirmed: waiting for in-flight requests and the final save.
    pub quitting: bool,
    /// Leave the event loop.
    pub exit: bool,
    /// Time since the dashboard started (set by `tick`, so rendering never reads a clock).
    pub now: Duration,
    /// When the last request of the level in progress was sent (for the live prefill timer).
    pub last_sent_at: Option<Duration>,
    /// Tokens received since the last request was sent (0: still prefilling).
    pub tokens_since_send: u64,
    /// When the first of them was seen (a frame's precision: the live panel's, not a
    /// measurement; the request's record has the TTFT).
    pub first_token_seen_at: Option<Duration>,
    pub live: LiveRate,
    live_tokens: Arc<AtomicU64>,
    tokens_at_send: u64,
    /// Statistics of the level in progress, refreshed as records arrive.
    pub current_stats: Option<LevelStats>,
    stats_dirty: bool,
    /// Client accept length of finished sweep levels (×100, for the sparkline).
    pub accept_history: Vec<u64>,
    pub sweep_view: SweepView,
    pub telemetry: TelemetryView,
    /// `(key, value)` lines of the run configuration (Log tab), built when the run starts.
    pub config_lines: Vec<(String, String)>,
    pub long_view: LongView,
    /// A replayed trace's latency over its timeline.
    pub trace_view: super::views::TraceView,
    pub findings_view: super::views::FindingsView,
    /// The levels still waiting, estimated from those measured (computed with the views).
    pub waiting_eta: Option<crate::summary::eta::Eta>,
    /// The TTFT histogram of the level in progress (kept when it ends, until the next has one).
    pub latency: Option<LatencyView>,
    /// Each level with a baseline match against it (`--baseline`), live for the one running.
    pub deltas: std::collections::BTreeMap<u32, crate::summary::baseline::LevelComparison>,
    /// A short message shown in the footer until the given time.
    pub flash: Option<(String, Duration)>,
    pub no_color: bool,
    /// Frames drawn lately (the event loop counts them).
    pub frames: super::frames::FrameRate,
    /// Lines scrolled down, per tab (in `Tab::ALL` order); drawing keeps it within the text.
    pub scroll: [u16; Tab::ALL.len()],
    /// The level picked in the tab's tables (↑↓), if any.
    pub selected: Option<u32>,
    /// The picked level's details (Enter), drawn in place of the tab until Esc.
    pub detail: Option<super::views::DetailView>,
    /// Frames a second drawn lately, when below what was asked (set by `tick`).
    pub frames_lowered: Option<f64>,
}

impl App {
    /// A dashboard over `session`; `live_tokens` is the client's running token count.
    pub fn new(session: Session, live_tokens: Arc<AtomicU64>, no_color: bool) -> Self {
        Self {
            role: Role::Run,
            session,
            sink: Sink::none(),
            tab: Tab::Sweep,
            show_help: false,
            confirm_quit: false,
            paused: false,
            quitting: false,
            exit: false,
            now: Duration::ZERO,
            last_sent_at: None,
            tokens_since_send: 0,
            first_token_seen_at: None,
            live: LiveRate::default(),
            live_tokens,
            tokens_at_send: 0,
            current_stats: None,
            stats_dirty: false,
            accept_history: Vec::new(),
            sweep_view: SweepView::default(),
            telemetry: TelemetryView::default(),
            config_lines: Vec::new(),
            long_view: LongView::default(),
            trace_view: super::views::TraceView::default(),
            findings_view: super::views::FindingsView::default(),
            waiting_eta: None,
            latency: None,
            deltas: std::collections::BTreeMap::new(),
            flash: None,
            no_color,
            frames: super::frames::FrameRate::default(),
            frames_lowered: None,
            scroll: [0; Tab::ALL.len()],
            selected: None,
            detail: None,
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
        for rec in telemetry {
            match rec {
                TelemetryRecord::Gpu(g) => {
                    app.telemetry.add(secs(g.at_unix_ms), rec);
                    app.session.latest_gpu = Some(g.clone());
                }
                TelemetryRecord::Server(s) => {
                    app.telemetry.add(secs(s.at_unix_ms), rec);
                    app.session.latest_server = Some((**s).clone());
                }
                _ => {}
            }
        }
        for l in &levels {
            if let Some(t) = l.started_at_unix_ms {
                app.telemetry.level_marks.push((secs(t), l.label()));
            }
        }
        let end = levels.iter().filter_map(|l| l.finished_at_unix_ms).max();
        app.now = Duration::from_secs_f64(end.map_or(0.0, secs));
        app.accept_history = app
            .session
            .summary
            .sweep
            .iter()
            .filter_map(crate::summary::LevelSummary::accept_length_client)
            .map(|a| (a * 100.0).round() as u64)
            .collect();
        app.config_lines = config_lines(&app.session.summary);
        app.refresh_views();
        app
    }

    /// Every tab drawn into a buffer of `width`×`height` cells.
    pub fn tab_buffers(&mut self, width: u16, height: u16) -> Vec<(Tab, ratatui::buffer::Buffer)> {
        let keep = (self.tab, self.show_help, self.confirm_quit);
        self.show_help = false;
        self.confirm_quit = false;
        let area = ratatui::layout::Rect::new(0, 0, width, height);
        let mut out = Vec::new();
        for tab in Tab::ALL {
            self.tab = tab;
            let mut buf = ratatui::buffer::Buffer::empty(area);
            ratatui::widgets::Widget::render(&*self, area, &mut buf);
            out.push((tab, buf));
        }
        (self.tab, self.show_help, self.confirm_quit) = keep;
        out
    }

    /// Whether the run has ended (finished, interrupted or aborted).
    /// Lines the current tab is scrolled down.
    pub fn scrolled(&self, tab: Tab) -> u16 {
        self.scroll[tab.index()]
    }

    pub fn run_over(&self) -> bool {
        self.session.summary.state != RunState::Running
    }

    /// Folds one event from the runner.
    pub fn apply(&mut self, ev: Event) {
        match &ev {
            Event::LevelStarted { .. } => {
                self.live.series = Series::default();
                self.live.current = 0.0;
                self.live.level_start = Some(self.now);
                self.live.last = Some((self.now, self.live_tokens.load(Ordering::Relaxed)));
                self.current_stats = None;
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
                self.live.level_ended(ended);
            }
            Event::Sent { .. } => {
                self.last_sent_at = Some(self.now);
                self.tokens_at_send = self.live_tokens.load(Ordering::Relaxed);
                self.tokens_since_send = 0;
                self.first_token_seen_at = None;
            }
            Event::Request(r) if !r.warmup => self.stats_dirty = true,
            Event::Outage { .. } => self.stats_dirty = true,
            Event::Telemetry(rec) => self.telemetry.add(self.now.as_secs_f64(), rec),
            _ => {}
        }
        if let Event::LevelStarted { index, .. } = &ev {
            let label = self
                .session
                .summary
                .level(*index)
                .map(crate::summary::LevelSummary::label)
                .unwrap_or_default();
            self.telemetry
                .level_marks
                .push((self.now.as_secs_f64(), label));
        }
        let finished = match &ev {
            Event::LevelFinished { index, .. } => Some(*index),
            _ => None,
        };
        let over = matches!(ev, Event::RunFinished { .. });
        let started = matches!(ev, Event::RunStarted { .. } | Event::Calibrated(_));
        self.sink.apply(&mut self.session, ev);
        if let Some(i) = finished {
            self.current_stats = None;
            self.last_sent_at = None;
            let accept = self
                .session
                .summary
                .level(i)
                .filter(|l| l.kind == LevelKind::Sweep)
                .and_then(crate::summary::LevelSummary::accept_length_client);
            if let Some(a) = accept {
                self.accept_history.push((a * 100.0).round() as u64);
            }
        }
        if over && self.quitting {
            self.exit = true;
        }
        if over {
            // The run's end: the panel turns to every level's percentiles.
            self.latency = None;
        } else if finished.is_some() {
            // The level's final figures, until the next level sends.
            self.refresh_latency();
        }
        if finished.is_some() || over {
            self.refresh_views();
        }
        if self.config_lines.is_empty() || started {
            self.config_lines = config_lines(&self.session.summary);
        }
    }

    /// The statistics to show for a level: live for the one in progress, final otherwise.
    pub fn level_stats(&self, index: u32) -> Option<&LevelStats> {
        if self.session.current == Some(index) {
            self.current_stats.as_ref()
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
        let start = self.live.level_start?;
        let elapsed = self.now.saturating_sub(start).as_secs_f64();
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
        if self.stats_dirty {
            self.current_stats = self
                .session
                .current
                .and_then(|i| self.session.live_stats(i));
            self.stats_dirty = false;
            self.refresh_latency();
            self.refresh_views();
        }
        self.sink.flush(&mut self.session);
    }

    /// Advances the clock: samples the live token rate once a second.
    pub fn tick(&mut self, now: Duration) {
        self.now = now;
        // A viewer's frames say nothing of the run's reads.
        self.frames_lowered = match self.role {
            Role::Run => self.frames.lowered(now),
            Role::Viewer { .. } => None,
        };
        let tokens = self.live_tokens.load(Ordering::Relaxed);
        self.tokens_since_send = tokens.saturating_sub(self.tokens_at_send);
        if self.tokens_since_send > 0 && self.first_token_seen_at.is_none() {
            self.first_token_seen_at = Some(now);
        }
        if let (Some(start), Some((t0, n0))) = (self.live.level_start, self.live.last) {
            let dt = now.saturating_sub(t0);
            if dt >= Duration::from_secs(1) && self.session.current.is_some() {
                let rate = tokens.saturating_sub(n0) as f64 / dt.as_secs_f64();
                self.live.current = rate;
                self.live
                    .series
                    .push((now.saturating_sub(start).as_secs_f64(), rate));
                self.live.last = Some((now, tokens));
            }
        }
        if self.flash.as_ref().is_some_and(|(_, until)| now >= *until) {
            self.flash = None;
        }
    }

    fn say(&mut self, msg: String) {
        self.flash = Some((msg, self.now + Duration::from_secs(4)));
    }

    /// Applies a user intent; returns what the loop must tell the runner.
    pub fn handle(&mut self, a: Action) -> Option<Effect> {
        if let Role::Viewer { steers, ended } = self.role {
            let steers = steers && !ended && !self.run_over();
            match a {
                // Leaving a viewer never stops the run.
                Action::Quit | Action::ForceQuit | Action::Detach => {
                    self.exit = true;
                    return None;
                }
                Action::StopRun if steers => {
                    self.confirm_quit = true;
                    return None;
                }
                Action::Confirm if self.confirm_quit => {
                    self.confirm_quit = false;
                    self.say(
                        "asked the run to stop: in-flight requests get their grace period".into(),
                    );
                    return Some(Effect::Cancel);
                }
                Action::TogglePause | Action::Skip | Action::StopRun if !steers => {
                    self.say(if self.run_over() || ended {
                        "the run is over".into()
                    } else {
                        "a viewer on TCP only watches: steer the run from its live.sock".into()
                    });
                    return None;
                }
                _ => {}
            }
        }
        if self.handle_levels(a) {
            return None;
        }
        match a {
            Action::NextTab => self.show_tab(self.tab.next()),
            Action::PrevTab => self.show_tab(self.tab.prev()),
            Action::Tab(t) => self.show_tab(t),
            Action::ToggleHelp => self.show_help = !self.show_help,
            Action::Scroll(d) => {
                let i = self.tab.index();
                let now = i64::from(self.scroll[i]);
                self.scroll[i] = (now + i64::from(d)).clamp(0, i64::from(u16::MAX)) as u16;
            }
            Action::TogglePause if !self.run_over() => {
                self.paused = !self.paused;
                self.say(if self.paused {
                    "paused: no new requests are sent; in-flight ones finish".into()
                } else {
                    "resumed".into()
                });
                return Some(Effect::Pause(self.paused));
            }
            Action::Skip if self.session.current.is_some() => {
                self.say("skipping the rest of this level".into());
                return Some(Effect::Skip);
            }
            Action::Screenshot => {
                self.say("writing screenshots of every tab…".into());
                return Some(Effect::Screenshots);
            }
            Action::Export => {
                self.sink.save(&mut self.session);
                let msg = match (&self.session.io_error, self.sink.dir()) {
                    (Some(e), _) => e.clone(),
                    (None, Some(d)) => format!(
                        "wrote results.json and summary.md; charts and CSV are being drawn in {}",
                        d.display()
                    ),
                    (None, None) => "nothing to write: no run directory".into(),
                };
                self.say(msg);
                return self.sink.dir().map(|_| Effect::Charts);
            }
            Action::Quit | Action::StopRun | Action::Detach if self.run_over() => {
                self.exit = true;
            }
            Action::Quit | Action::StopRun => self.confirm_quit = true,
            Action::Detach => return Some(Effect::Detach),
            Action::Confirm if self.confirm_quit => return self.quit(),
            Action::ForceQuit => {
                if self.run_over() {
                    self.exit = true;
                } else {
                    return self.quit();
                }
            }
            Action::Cancel => {
                if self.confirm_quit || self.show_help {
                    self.confirm_quit = false;
                    self.show_help = false;
                } else if self.detail.is_some() {
                    self.detail = None;
                } else {
                    self.selected = None;
                }
            }
            Action::TogglePause | Action::Skip | Action::Confirm | Action::Open => {}
        }
        None
    }

    /// Switches to `t`; a level picked in the tab left is let go.
    fn show_tab(&mut self, t: Tab) {
        if t != self.tab {
            self.selected = None;
            self.detail = None;
        }
        self.tab = t;
    }

    /// The levels the current tab's tables list, top to bottom (none: a tab without levels).
    pub fn tab_levels(&self) -> Vec<u32> {
        let s = &self.session.summary;
        let levels: Vec<&crate::summary::LevelSummary> = match self.tab {
            Tab::Sweep => s.sweep.iter().chain(&s.rates).chain(&s.traces).collect(),
            Tab::LongContext => s.long_context.iter().chain(&s.multi_turn).collect(),
            Tab::Telemetry | Tab::Log | Tab::Findings => Vec::new(),
        };
        levels.iter().map(|l| l.index).collect()
    }

    /// ↑↓ and Enter in a tab with level tables pick a level and open its details; whether
    /// `a` was such a key here.
    fn handle_levels(&mut self, a: Action) -> bool {
        let levels = self.tab_levels();
        if levels.is_empty() || self.show_help || self.confirm_quit {
            return false;
        }
        match a {
            Action::Scroll(d) => {
                let at = |i: u32| levels.iter().position(|&x| x == i).map(|p| p as i64);
                let picked = self
                    .selected
                    .or(self.detail.as_ref().map(|v| v.index))
                    .and_then(at);
                let last = levels.len() as i64 - 1;
                let to = match (picked, self.session.current.and_then(at)) {
                    (Some(p), _) => p.saturating_add(i64::from(d)).clamp(0, last),
                    // The first press picks the level running.
                    (None, Some(running)) => running,
                    (None, None) if d > 0 => 0,
                    (None, None) => last,
                };
                self.selected = Some(levels[to as usize]);
                if self.detail.is_some() {
                    self.refresh_detail();
                }
            }
            Action::Open => {
                if self.selected.is_none() {
                    self.selected = self
                        .session
                        .current
                        .filter(|c| levels.contains(c))
                        .or(levels.last().copied());
                }
                self.refresh_detail();
            }
            _ => return false,
        }
        true
    }

    fn quit(&mut self) -> Option<Effect> {
        self.confirm_quit = false;
        if self.quitting {
            return None;
        }
        self.quitting = true;
        self.say(
            "stopping: in-flight requests get their grace period, then results are saved".into(),
        );
        Some(Effect::Cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::RunSummary;

    fn app() -> App {
        let cfg = crate::config::RunConfig::demo();
        App::new(
            Session::new(RunSummary::new(cfg, None)),
            Arc::new(AtomicU64::new(0)),
            true,
        )
    }

    #[test]
    fn tabs_cycle_both_ways() {
        let mut a = app();
        assert_eq!(a.tab, Tab::Sweep);
        a.handle(Action::PrevTab);
        assert_eq!(a.tab, Tab::Findings);
        a.handle(Action::PrevTab);
        assert_eq!(a.tab, Tab::Log);
        a.handle(Action::NextTab);
        a.handle(Action::NextTab);
        a.handle(Action::NextTab);
        assert_eq!(a.tab, Tab::LongContext);
        a.handle(Action::Tab(Tab::Telemetry));
        assert_eq!(a.tab, Tab::Telemetry);
    }

    #[test]
    fn quit_needs_confirmation_while_running() {
        let mut a = app();
        assert_eq!(a.handle(Action::Quit), None);
        assert!(a.confirm_quit && !a.quitting);
        assert_eq!(a.handle(Action::Cancel), None);
        assert!(!a.confirm_quit);
        a.handle(Action::Quit);
        assert_eq!(a.handle(Action::Confirm), Some(Effect::Cancel));
        assert!(a.quitting && !a.exit);
        // The loop exits once the runner reports the end.
        a.apply(Event::RunFinished {
            state: RunState::Interrupted,
            error: None,
        });
        assert!(a.exit);
    }

    #[test]
    fn quit_after_the_run_needs_no_confirmation() {
        let mut a = app();
        a.apply(Event::RunFinished {
            state: RunState::Finished,
            error: None,
        });
        a.handle(Action::Quit);
        assert!(a.exit);
    }

    #[test]
    fn pause_toggles_and_skip_needs_a_level() {
        let mut a = app();
        assert_eq!(a.handle(Action::TogglePause), Some(Effect::Pause(true)));
        assert_eq!(a.handle(Action::TogglePause), Some(Effect::Pause(false)));
        assert_eq!(a.handle(Action::Skip), None);
        a.session.current = Some(0);
        assert_eq!(a.handle(Action::Skip), Some(Effect::Skip));
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
        assert!(a.live.series.is_empty());
        a.tick(Duration::from_millis(1500));
        assert_eq!(a.live.series.len(), 1);
        assert!((a.live.current - 200.0).abs() < 1e-9, "{}", a.live.current);
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
            assert!(a.live.series.is_empty(), "a new level starts a new curve");
            for s in 1..=3u64 {
                counter.fetch_add(100, Ordering::Relaxed);
                a.tick(a.now + Duration::from_secs(1));
                assert_eq!(a.live.series.len() as u64, s);
            }
            a.apply(Event::LevelFinished {
                index: level,
                interrupted: false,
                at_unix_ms: 0,
            });
            let (label, pts) = a.live.finished.last().unwrap();
            let want = a.session.summary.level(level).unwrap().label();
            assert_eq!((label, pts.len()), (&want, 3));
        }
        assert_eq!(a.live.finished.len(), super::super::views::FINISHED_CURVES);
    }
}
