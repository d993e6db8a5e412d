//! Levels bounded by time, on a wall-clock schedule every machine of a sharded run can follow
//! alone (`--level-seconds`, `--drain-seconds`, `--start-at`): level `k` of the plan owns the
//! slot `[T0 + k·(S + D), T0 + (k + 1)·(S + D))`, sends for its first `S` seconds and lets the
//! requests in flight finish in the `D` after; what still runs at the slot's end is cancelled.
//! No shard waits for another, and none needs a coordinator.

use serde::{Deserialize, Serialize};

/// How long levels last and when they start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelClock {
    /// Seconds each level sends requests for (None: each level sends its request count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level_seconds: Option<f64>,
    /// Seconds after sending stops that the requests in flight get to finish.
    #[serde(default = "default_drain")]
    pub drain_s: f64,
    /// When the first level starts, in Unix milliseconds (None: as soon as the run is ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ms: Option<i64>,
}

/// The drain when `--drain-seconds` is not given.
pub const DEFAULT_DRAIN_S: f64 = 60.0;

fn default_drain() -> f64 {
    DEFAULT_DRAIN_S
}

impl LevelClock {
    /// Neither time-bounded nor scheduled: today's count-bounded levels.
    pub fn is_off(&self) -> bool {
        self.level_seconds.is_none() && self.start_at_unix_ms.is_none()
    }

    /// The length of one level's slot, `S + D` (with a start time and time-bounded levels).
    pub fn slot_s(&self) -> Option<f64> {
        Some(self.level_seconds? + self.drain_s)
    }

    /// When the level at plan position `k` starts, in Unix ms (None: not scheduled).
    pub fn slot_start_unix_ms(&self, k: u32) -> Option<i64> {
        let t0 = self.start_at_unix_ms?;
        let slot_ms = (self.slot_s()? * 1000.0).round() as i64;
        Some(t0.saturating_add(slot_ms.saturating_mul(i64::from(k))))
    }
}

/// The server's clock against this machine's, from HTTP `Date` headers (1 s resolution): a
/// reply stamped `d` was written at a server time in `[d, d + 1 s)`, while the local clock
/// read between the request's send `s` and the reply's arrival `r`; so the offset
/// `server − local` lies in `[d − r, d + 1 s − s]`. Intersecting the intervals of probes
/// spread over more than a second narrows it to about the probes' spacing.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// The middle of the interval: server clock minus this machine's, ms.
    pub offset_ms: f64,
    /// Half the interval's width, ms.
    pub uncertainty_ms: f64,
    /// Probes that carried a Date header.
    pub probes: u32,
}

/// A clock this far off the server's (beyond the uncertainty) is flagged.
pub const SKEW_WARN_MS: f64 = 1000.0;

impl ClockOffset {
    /// The offset from probes `(send_ms, date_ms, arrive_ms)`, all Unix ms (the Date header's
    /// second as ms); None without one, or when they contradict each other (a clock that
    /// jumped during probing).
    pub fn from_probes(probes: &[(i64, i64, i64)]) -> Option<Self> {
        let (mut lo, mut hi) = (i64::MIN, i64::MAX);
        for &(s, d, r) in probes {
            lo = lo.max(d - r);
            hi = hi.min(d + 1000 - s);
        }
        (!probes.is_empty() && lo <= hi).then(|| Self {
            offset_ms: (lo + hi) as f64 / 2.0,
            uncertainty_ms: (hi - lo) as f64 / 2.0,
            probes: probes.len() as u32,
        })
    }

    /// Whether this machine's clock is off the server's by more than [`SKEW_WARN_MS`] for sure.
    pub fn skewed(&self) -> bool {
        self.offset_ms.abs() - self.uncertainty_ms > SKEW_WARN_MS
    }
}

/// An HTTP `Date` header (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`) in Unix ms.
pub fn parse_http_date(s: &str) -> Option<i64> {
    let ts = jiff::fmt::rfc2822::parse(s.trim()).ok()?;
    Some(ts.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_the_plan() {
        let c = LevelClock {
            level_seconds: Some(20.0),
            drain_s: 5.0,
            start_at_unix_ms: Some(1_000_000),
        };
        assert_eq!(c.slot_start_unix_ms(0), Some(1_000_000));
        assert_eq!(c.slot_start_unix_ms(3), Some(1_075_000));
        let unscheduled = LevelClock {
            start_at_unix_ms: None,
            ..c
        };
        assert_eq!(unscheduled.slot_start_unix_ms(1), None);
    }

    #[test]
    fn offset_from_date_headers() {
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777_000)
        );
        // The server runs 2.3 s ahead: probes every 250 ms, 10 ms round trips.
        let probes: Vec<(i64, i64, i64)> = (0..6)
            .map(|k| {
                let s = 100_000 + k * 250;
                let server = s + 5 + 2300;
                (s, server / 1000 * 1000, s + 10)
            })
            .collect();
        let o = ClockOffset::from_probes(&probes).unwrap();
        assert!((o.offset_ms - 2300.0).abs() <= o.uncertainty_ms, "{o:?}");
        assert!(o.uncertainty_ms <= 130.0, "{o:?}");
        assert!(o.skewed());
        // Probes that cannot all be true give nothing rather than a wrong offset.
        assert_eq!(
            ClockOffset::from_probes(&[(0, 5000, 10), (20, 1000, 30)]),
            None
        );
        assert_eq!(ClockOffset::from_probes(&[]), None);
    }
}
