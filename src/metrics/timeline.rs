//! Latency over a level's timeline (a replayed trace): requests binned by when they were due,
//! each bin with its own TTFT, E2E and client-queue distributions (docs/metrics.md "Trace
//! replay").

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::record::RequestRecord;

/// Most bins a timeline keeps; later requests fall into the last one.
const MAX_BINS: usize = 10_000;

/// One bin of a level's timeline in results.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelineBin {
    /// Seconds from the level's origin to the bin's start (scheduled time, `t_sched`).
    pub start_s: f64,
    /// Requests due in the bin that were sent, and those of them that failed.
    pub sent: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_queue_p99_ms: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Bin {
    sent: u64,
    failed: u64,
    ttft: Dist,
    e2el: Dist,
    queue: Dist,
}

/// Folds records into bins of `bin_us` by their scheduled time.
#[derive(Clone, Debug)]
pub struct TimelineFold {
    bin_us: u64,
    bins: Vec<Bin>,
}

impl TimelineFold {
    /// Bins of `bin_s` seconds (at least 1 ms).
    pub fn new(bin_s: f64) -> Self {
        Self {
            bin_us: ((bin_s * 1e6).round() as u64).max(1000),
            bins: Vec::new(),
        }
    }

    /// A bin width for a level `duration_s` long: about 60 bins, rounded up to 1, 2 or 5 times
    /// a power of ten seconds (at least 0.1 s).
    pub fn width_for(duration_s: f64) -> f64 {
        let raw = (duration_s / 60.0).max(0.1);
        let p = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * p)
            .find(|w| *w >= raw * (1.0 - 1e-9))
            .unwrap_or(10.0 * p)
    }

    /// Folds one sent request (cancelled ones are not passed in).
    pub fn add(&mut self, r: &RequestRecord) {
        let i = ((r.sched_at_us / self.bin_us) as usize).min(MAX_BINS - 1);
        if self.bins.len() <= i {
            self.bins.resize_with(i + 1, Bin::default);
        }
        let b = &mut self.bins[i];
        b.sent += 1;
        b.queue.record(r.client_queue_us());
        if !r.is_ok() {
            b.failed += 1;
            return;
        }
        if let Some(v) = r.ttft_us {
            b.ttft.record(v);
        }
        if let Some(v) = r.e2e_us {
            b.e2el.record(v);
        }
    }

    /// The bins so far, from the level's origin (empty ones included, so time stays linear).
    pub fn bins(&self) -> Vec<TimelineBin> {
        let ms = 1e-3;
        self.bins
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let (ttft, e2el, queue) = (b.ttft.stats(ms), b.e2el.stats(ms), b.queue.stats(ms));
                TimelineBin {
                    start_s: (i as u64 * self.bin_us) as f64 / 1e6,
                    sent: b.sent,
                    failed: b.failed,
                    ttft_p50_ms: ttft.as_ref().map(|d| d.p50),
                    ttft_p99_ms: ttft.as_ref().map(|d| d.p99),
                    e2el_p50_ms: e2el.map(|d| d.p50),
                    client_queue_p99_ms: queue.map(|d| d.p99),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{FailureKind, Outcome};

    fn rec(sched_ms: u64, ttft_ms: u64, ok: bool) -> RequestRecord {
        let mut r = crate::metrics::record::tests::record(ttft_ms * 1000, ttft_ms * 2000, 10);
        r.sched_at_us = sched_ms * 1000;
        r.send_at_us = sched_ms * 1000 + 500;
        if !ok {
            r.outcome = Outcome::Failed {
                kind: FailureKind::HttpStatus,
                message: "boom".into(),
                http_status: Some(500),
            };
            (r.ttft_us, r.e2e_us) = (None, None);
        }
        r
    }

    #[test]
    fn requests_fall_into_the_bin_of_their_scheduled_time() {
        let mut t = TimelineFold::new(1.0);
        for (at, ttft, ok) in [
            (100, 10, true),
            (900, 30, true),
            (2500, 50, true),
            (2600, 0, false),
        ] {
            t.add(&rec(at, ttft, ok));
        }
        let b = t.bins();
        assert_eq!(b.len(), 3);
        assert_eq!((b[0].start_s, b[0].sent, b[0].failed), (0.0, 2, 0));
        // An empty second keeps its place on the time axis.
        assert_eq!((b[1].sent, b[1].ttft_p50_ms), (0, None));
        assert_eq!((b[2].start_s, b[2].sent, b[2].failed), (2.0, 2, 1));
        // Only the request that succeeded has a TTFT: 50 ms (HDR: within 0.1 %).
        let p50 = b[2].ttft_p50_ms.unwrap();
        assert!((p50 - 50.0).abs() < 0.05, "{p50}");
        assert!((b[0].ttft_p99_ms.unwrap() - 30.0).abs() < 0.03);
        assert!((b[0].e2el_p50_ms.unwrap() - 20.0).abs() < 0.02);
        assert!((b[0].client_queue_p99_ms.unwrap() - 0.5).abs() < 1e-3);
    }

    #[test]
    fn bin_widths_give_about_sixty_bins_of_round_seconds() {
        for (span, want) in [
            (4.0, 0.1),
            (60.0, 1.0),
            (61.0, 2.0),
            (3600.0, 100.0),
            (200.0, 5.0),
        ] {
            let got = TimelineFold::width_for(span);
            assert!((got - want).abs() < 1e-12, "{span} s: {got}, want {want}");
        }
    }
}
