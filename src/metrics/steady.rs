//! Steady state: the requests a level ran at its full load — sent after its first completion
//! (the ramp-up is over: every worker, or the schedule, has had its first request out) and
//! done by its last send (the drain has not begun) — and their latency (docs/metrics.md "Per
//! level", steady state).

use super::dist::{Dist, DistStats};
use super::record::RequestRecord;

/// One completed request, as much of it as the window needs (times in µs).
#[derive(Clone, Copy, Debug)]
struct Sample {
    send: u64,
    end: u64,
    ttft: Option<u64>,
    tpot: Option<f64>,
    e2e: Option<u64>,
}

/// The latency of a level's requests inside its steady window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SteadyStats {
    /// Requests wholly inside the window.
    pub requests: u64,
    /// The window, in seconds from the level's origin: its first completion, its last send.
    pub from_s: f64,
    pub to_s: f64,
    pub ttft_ms: Option<DistStats>,
    pub tpot_ms: Option<DistStats>,
    pub e2el_ms: Option<DistStats>,
}

/// Completed requests kept for the window, which is known only at the end (40 bytes each).
#[derive(Clone, Debug, Default)]
pub struct SteadyFold {
    samples: Vec<Sample>,
}

impl SteadyFold {
    /// Keeps a completed request.
    pub fn add(&mut self, r: &RequestRecord, end_us: u64) {
        self.samples.push(Sample {
            send: r.send_at_us,
            end: end_us,
            ttft: r.ttft_us,
            tpot: r.tpot_us(),
            e2e: r.e2e_us,
        });
    }

    /// The requests sent at or after `first_end_us` that ended by `last_send_us`, and whose
    /// span from send to end overlaps none of `outages` (µs `[from, to)`), and their TTFT, TPOT
    /// and E2E (None when the window is empty).
    pub fn stats(
        &self,
        first_end_us: u64,
        last_send_us: u64,
        outages: &[(u64, u64)],
    ) -> Option<SteadyStats> {
        if last_send_us <= first_end_us {
            return None;
        }
        let (mut ttft, mut tpot, mut e2e) = (Dist::new(), Dist::new(), Dist::new());
        let mut n = 0;
        for s in self
            .samples
            .iter()
            .filter(|s| s.send >= first_end_us && s.end <= last_send_us)
            .filter(|s| !outages.iter().any(|&(f, t)| f < s.end && t > s.send))
        {
            n += 1;
            if let Some(v) = s.ttft {
                ttft.record(v);
            }
            if let Some(v) = s.tpot {
                tpot.record(v.round() as u64);
            }
            if let Some(v) = s.e2e {
                e2e.record(v);
            }
        }
        let ms = 1e-3;
        Some(SteadyStats {
            requests: n,
            from_s: first_end_us as f64 * 1e-6,
            to_s: last_send_us as f64 * 1e-6,
            ttft_ms: ttft.stats(ms),
            tpot_ms: tpot.stats(ms),
            e2el_ms: e2e.stats(ms),
        })
    }
}

/// The run's one warning about levels too short to reach steady state starts so.
pub const SHORT_LEVELS: &str = "levels too short for steady state";

/// `C=8 (0 of 8)`: a finished concurrency or rate level too short to reach steady state.
pub fn short_level(label: &str, s: &super::LevelStats) -> Option<String> {
    let (completed, steady) = (s.scalars.completed, s.scalars.steady_requests.unwrap_or(0));
    too_short(steady, completed).then(|| format!("{label} ({steady} of {completed})"))
}

/// The warning naming every short level so far (`levels`: [`short_level`]'s); `timed`: the
/// levels are time-bounded (`--level-seconds`), which is then what to lengthen.
pub fn short_levels_warning(levels: &[String], timed: bool) -> String {
    format!(
        "{SHORT_LEVELS} (requests sent after the first completion and done by the last send, of all): {}; ramp-up and drain dominate their latency: run more requests a level ({})",
        levels.join(", "),
        if timed {
            "a longer --level-seconds"
        } else {
            "--requests-per-level 5x"
        }
    )
}

/// Whether `steady` of `completed` requests is too few for steady-state percentiles: under 5,
/// or under a fifth of the level.
pub fn too_short(steady: u64, completed: u64) -> bool {
    completed > 0 && (steady < 5 || steady * 5 < completed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(send_s: u64, end_s: u64, ttft_ms: u64) -> Sample {
        Sample {
            send: send_s * 1_000_000,
            end: end_s * 1_000_000,
            ttft: Some(ttft_ms * 1000),
            tpot: Some(10_000.0),
            e2e: Some((end_s - send_s) * 1_000_000),
        }
    }

    #[test]
    fn the_window_keeps_requests_sent_after_the_ramp_and_done_before_the_drain() {
        // A closed loop of two workers, 1 s requests: waves at 0, 1 and 2 s. The first
        // completion is at 1 s, the last send at 2 s: only the second wave ran at full load.
        let f = SteadyFold {
            samples: vec![
                sample(0, 1, 100),
                sample(0, 1, 110),
                sample(1, 2, 300),
                sample(1, 2, 320),
                sample(2, 3, 50),
                sample(2, 3, 60),
            ],
        };
        let s = f.stats(1_000_000, 2_000_000, &[]).unwrap();
        assert_eq!(s.requests, 2);
        assert!((s.from_s - 1.0).abs() < 1e-12 && (s.to_s - 2.0).abs() < 1e-12);
        let ttft = s.ttft_ms.unwrap();
        assert_eq!(ttft.count, 2);
        assert!((ttft.mean - 310.0).abs() < 1e-9, "{}", ttft.mean);
        assert!((s.e2el_ms.unwrap().mean - 1000.0).abs() < 1e-9);
        // No span between the first completion and the last send: no window.
        assert!(f.stats(2_000_000, 2_000_000, &[]).is_none());
        assert!(too_short(2, 6) && too_short(4, 10) && !too_short(5, 20) && !too_short(8, 10));
        assert!(!too_short(0, 0));
    }
}
