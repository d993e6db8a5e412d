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
/// spread over more than a second narrows it to about the probes' spacing; probes sent back to
/// back across one of the server's second boundaries narrow it to about a round trip
/// ([`fine_window_us`]).
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

/// One probe: this machine's clock when the request was sent and when the reply arrived, and
/// the reply's `Date` header, all in Unix µs (the header's second as µs).
pub type Probe = (i64, i64, i64);

/// The offset interval `[lo, hi]` (µs) every probe allows; None without a probe, or when they
/// contradict each other (a clock that jumped, or a server whose `Date` lags its clock).
fn interval(probes: &[Probe]) -> Option<(i64, i64)> {
    let (mut lo, mut hi) = (i64::MIN, i64::MAX);
    for &(s, d, r) in probes {
        lo = lo.max(d - r);
        hi = hi.min(d + 1_000_000 - s);
    }
    (!probes.is_empty() && lo <= hi).then_some((lo, hi))
}

impl ClockOffset {
    /// The offset from `probes`; None without one, or when they contradict each other.
    pub fn from_probes(probes: &[Probe]) -> Option<Self> {
        let (lo, hi) = interval(probes)?;
        Some(Self {
            offset_ms: (lo + hi) as f64 / 2000.0,
            uncertainty_ms: (hi - lo) as f64 / 2000.0,
            probes: probes.len() as u32,
        })
    }

    /// Whether this machine's clock is off the server's by more than [`SKEW_WARN_MS`] for sure.
    pub fn skewed(&self) -> bool {
        self.offset_ms.abs() - self.uncertainty_ms > SKEW_WARN_MS
    }

    /// The offset in whole µs, to add to this machine's clock for the server's.
    pub fn offset_us(&self) -> i64 {
        (self.offset_ms * 1000.0).round() as i64
    }
}

/// Where to probe back to back, in this machine's Unix µs, so the probes cross the server's
/// next second boundary that is at least `lead_us` away from `now_us`, given the `coarse`
/// probes: the boundary `B` (server time) falls between local `B − hi` and `B − lo`; the window
/// is that, `margin_us` wider each side. None when the coarse probes give no interval.
pub fn fine_window_us(
    coarse: &[Probe],
    now_us: i64,
    lead_us: i64,
    margin_us: i64,
) -> Option<(i64, i64)> {
    let (lo, hi) = interval(coarse)?;
    // The server's clock is at most now + hi: the first whole second past now + hi + lead.
    let b = (now_us + hi + lead_us).div_euclid(1_000_000) * 1_000_000 + 1_000_000;
    Some((b - hi - margin_us, b - lo + margin_us))
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
        // The server runs 2.3 s ahead: probes every 250 ms, 10 ms round trips (in µs).
        let probe = |s: i64| {
            let server = s + 5_000 + 2_300_000;
            (s, server.div_euclid(1_000_000) * 1_000_000, s + 10_000)
        };
        let probes: Vec<Probe> = (0..6).map(|k| probe(100_000_000 + k * 250_000)).collect();
        let o = ClockOffset::from_probes(&probes).unwrap();
        assert!((o.offset_ms - 2300.0).abs() <= o.uncertainty_ms, "{o:?}");
        assert!(o.uncertainty_ms <= 130.0, "{o:?}");
        assert!(o.skewed());
        // Back to back across the server's next second boundary (0.3 ms round trips, one
        // after the other), the interval is about a round trip wide, and holds the truth.
        let now = 101_600_000;
        let (from, to) = fine_window_us(&probes, now, 50_000, 3_000).unwrap();
        assert!(
            from > now && to - from <= 2 * 130_000 + 6_000,
            "{from} {to}"
        );
        let fine_probe = |s: i64| {
            let server = s + 150 + 2_300_000;
            (s, server.div_euclid(1_000_000) * 1_000_000, s + 300)
        };
        let mut all = probes.clone();
        all.extend(
            (0..)
                .map(|k| from + k * 300)
                .take_while(|s| *s < to)
                .map(fine_probe),
        );
        let fine = ClockOffset::from_probes(&all).unwrap();
        assert!(
            (fine.offset_ms - 2300.0).abs() <= fine.uncertainty_ms,
            "{fine:?}"
        );
        assert!(fine.uncertainty_ms <= 0.5, "{fine:?}");
        // Probes that cannot all be true give nothing rather than a wrong offset.
        assert_eq!(
            ClockOffset::from_probes(&[(0, 5_000_000, 10_000), (20_000, 1_000_000, 30_000)]),
            None
        );
        assert_eq!(ClockOffset::from_probes(&[]), None);
    }
}
