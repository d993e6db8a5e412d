//! The run as it moves, on the dashboard's clock: the time, the request last sent (its prefill
//! and its first tokens), the output rate sampled each second with the finished levels' curves,
//! the GPU and engine history with the level starts marked, and the frames drawn. The session
//! has no clock of the screen's; this keeps it, so rendering never reads one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::telemetry::TelemetryRecord;

use crate::tui::frames::FrameRate;
use crate::tui::views::{LiveRate, Series, TelemetryView};

/// What moves with the dashboard's clock.
pub struct Clocked {
    /// Time since the dashboard started (set by `tick`, so rendering never reads a clock).
    pub now: Duration,
    /// When the last request of the level in progress was sent (for the live prefill timer).
    pub last_sent_at: Option<Duration>,
    /// Tokens received since the last request was sent (0: still prefilling).
    pub tokens_since_send: u64,
    /// When the first of them was seen (a frame's precision: the live panel's, not a
    /// measurement; the request's record has the TTFT).
    pub first_token_seen_at: Option<Duration>,
    /// Output tokens a second, sampled each second of the level in progress.
    pub rate: LiveRate,
    /// GPU and engine samples over the dashboard's clock, each level's start marked.
    pub telemetry: TelemetryView,
    /// Frames drawn lately (the event loop counts them).
    pub frames: FrameRate,
    /// Frames a second drawn lately, when below what was asked (set by `tick`).
    pub frames_lowered: Option<f64>,
    /// The client's running count of tokens received.
    tokens: Arc<AtomicU64>,
    /// The count when the last request was sent.
    tokens_at_send: u64,
}

impl Clocked {
    /// At time zero, over the client's running token count `tokens`.
    pub fn new(tokens: Arc<AtomicU64>) -> Self {
        Self {
            now: Duration::ZERO,
            last_sent_at: None,
            tokens_since_send: 0,
            first_token_seen_at: None,
            rate: LiveRate::default(),
            telemetry: TelemetryView::default(),
            frames: FrameRate::default(),
            frames_lowered: None,
            tokens,
            tokens_at_send: 0,
        }
    }

    /// A level started: a new rate curve from now, its start marked `label` on the telemetry
    /// charts.
    pub fn level_started(&mut self, label: String) {
        self.rate.series = Series::default();
        self.rate.current = 0.0;
        self.rate.level_start = Some(self.now);
        self.rate.last = Some((self.now, self.tokens.load(Ordering::Relaxed)));
        self.telemetry
            .level_marks
            .push((self.now.as_secs_f64(), label));
    }

    /// A request was sent: its prefill timer starts.
    pub fn sent(&mut self) {
        self.last_sent_at = Some(self.now);
        self.tokens_at_send = self.tokens.load(Ordering::Relaxed);
        self.tokens_since_send = 0;
        self.first_token_seen_at = None;
    }

    /// A GPU or engine sample, at the dashboard's time.
    pub fn telemetry(&mut self, rec: &TelemetryRecord) {
        self.telemetry.add(self.now.as_secs_f64(), rec);
    }

    /// Advances the clock to `now`: the tokens since the last send, and once a second while a
    /// level `runs`, the output rate.
    pub fn tick(&mut self, now: Duration, runs: bool) {
        self.now = now;
        let tokens = self.tokens.load(Ordering::Relaxed);
        self.tokens_since_send = tokens.saturating_sub(self.tokens_at_send);
        if self.tokens_since_send > 0 && self.first_token_seen_at.is_none() {
            self.first_token_seen_at = Some(now);
        }
        if let (Some(start), Some((t0, n0))) = (self.rate.level_start, self.rate.last) {
            let dt = now.saturating_sub(t0);
            if dt >= Duration::from_secs(1) && runs {
                let rate = tokens.saturating_sub(n0) as f64 / dt.as_secs_f64();
                self.rate.current = rate;
                self.rate
                    .series
                    .push((now.saturating_sub(start).as_secs_f64(), rate));
                self.rate.last = Some((now, tokens));
            }
        }
    }
}
