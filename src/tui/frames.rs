//! The frames the dashboard drew lately against the rate it was asked for. It draws below the
//! streams' priority (`run::follower`): on a saturated core it draws fewer frames rather than
//! hold a read, and the footer says so.

use std::collections::VecDeque;
use std::time::Duration;

/// Frames are counted over this much time.
pub const WINDOW: Duration = Duration::from_secs(3);
/// Below this share of the asked rate, the footer says the frame rate was lowered.
pub const LOWERED: f64 = 0.75;

/// Frames drawn: when, over the last [`WINDOW`], and how many in all.
#[derive(Clone, Debug, Default)]
pub struct FrameRate {
    /// Frames a second asked for.
    pub target: f64,
    recent: VecDeque<Duration>,
    /// Frames drawn since the dashboard started.
    pub total: u64,
}

impl FrameRate {
    pub fn new(target: f64) -> Self {
        Self {
            target,
            ..Self::default()
        }
    }

    /// A frame was drawn at `at` (time since the dashboard started).
    pub fn drew(&mut self, at: Duration) {
        self.total += 1;
        self.recent.push_back(at);
        while self
            .recent
            .front()
            .is_some_and(|&t| at.saturating_sub(t) >= WINDOW)
        {
            self.recent.pop_front();
        }
    }

    /// Frames a second over the last [`WINDOW`] at `now`, when that is below [`LOWERED`] of the
    /// target; `None` while it is not, or before a whole window has passed.
    pub fn lowered(&self, now: Duration) -> Option<f64> {
        if now < WINDOW || self.target <= 0.0 {
            return None;
        }
        let n = self
            .recent
            .iter()
            .filter(|&&t| now.saturating_sub(t) < WINDOW)
            .count();
        let rate = n as f64 / WINDOW.as_secs_f64();
        (rate < LOWERED * self.target).then_some(rate)
    }
}

/// What a dashboard drew over a whole run: frames, and the seconds it ran.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Drawn {
    pub frames: u64,
    pub seconds: f64,
}

impl Drawn {
    /// Frames a second over the run (the first frame is drawn at its start, so the frames
    /// after it over the time they took).
    pub fn per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.frames.saturating_sub(1) as f64 / self.seconds
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_full_rate_is_not_lowered_and_a_slow_one_is() {
        let mut f = FrameRate::new(10.0);
        for i in 0..=50 {
            f.drew(ms(i * 100));
        }
        assert_eq!(f.lowered(ms(5_000)), None);
        assert_eq!(f.total, 51);
        // Then one frame a second for three seconds.
        for s in 6..=8 {
            f.drew(ms(s * 1000));
        }
        let r = f.lowered(ms(8_000)).unwrap();
        assert!((r - 1.0).abs() < 1e-9, "{r}");
    }

    #[test]
    fn nothing_is_said_before_a_whole_window() {
        let mut f = FrameRate::new(10.0);
        f.drew(ms(100));
        assert_eq!(f.lowered(ms(2_000)), None);
        assert!(f.lowered(ms(3_100)).is_some());
    }
}
