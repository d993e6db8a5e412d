//! A rough time for the levels still waiting, from the levels measured so far (the plan says
//! "time: after the first level" until one has), as a range. A sweep or multi-turn level takes
//! at least as many waves of its concurrency as its requests need, each as long as a request
//! took at the nearest measured concurrency at or below it (as if the server scaled perfectly),
//! and at most its output tokens at that level's output tok/s (as if it did not scale at all);
//! a rate level its requests over its rate; a long-context length its prompt at the prefill
//! speed and its output at the decode speed measured last. A replayed trace and server restarts
//! are not estimated.

use super::{LevelStatus, LevelSummary, RunSummary};
use crate::workload::LevelKind;

/// The estimate for the waiting levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Eta {
    /// The range: the server scaling perfectly with concurrency, and not at all.
    pub low_s: f64,
    pub high_s: f64,
    /// Waiting levels it covers, and those it cannot (a trace, or nothing measured to go by).
    pub levels: usize,
    pub unknown: usize,
}

fn done(l: &LevelSummary) -> bool {
    l.status == LevelStatus::Done && l.stats.as_ref().is_some_and(|s| s.scalars.completed > 0)
}

fn mean_e2e_s(l: &LevelSummary) -> Option<f64> {
    Some(l.stats.as_ref()?.dists.e2el_ms.as_ref()?.mean / 1000.0)
}

/// The measured sweep level to go by for concurrency `c`: the largest at or below it, else the
/// smallest above it.
fn nearest(s: &RunSummary, c: u32) -> Option<&LevelSummary> {
    let measured: Vec<&LevelSummary> = s.sweep.iter().filter(|l| done(l)).collect();
    measured
        .iter()
        .filter(|l| l.concurrency <= c)
        .max_by_key(|l| l.concurrency)
        .or_else(|| measured.iter().min_by_key(|l| l.concurrency))
        .copied()
}

/// Prefill and decode speeds (tokens/s): the last long-context length measured, else the
/// sweep's C=1 (its prompt over its TTFT).
fn speeds(s: &RunSummary) -> Option<(f64, f64)> {
    let from_long = s
        .long_context
        .iter()
        .rev()
        .filter(|l| done(l))
        .find_map(|l| {
            let d = &l.stats.as_ref()?.dists;
            Some((
                d.prefill_tokens_per_s.as_ref()?.mean,
                d.decode_tokens_per_s.as_ref()?.mean,
            ))
        });
    from_long.or_else(|| {
        let l = s.sweep.iter().find(|l| l.concurrency == 1 && done(l))?;
        let d = &l.stats.as_ref()?.dists;
        let ttft_s = d.ttft_ms.as_ref()?.mean / 1000.0;
        Some((
            l.input_len as f64 / ttft_s,
            d.decode_tokens_per_s.as_ref()?.mean,
        ))
    })
}

/// `(low, high)` seconds for waiting level `l`.
fn level_s(s: &RunSummary, l: &LevelSummary) -> Option<(f64, f64)> {
    let requests = f64::from(l.requests);
    let exact = |t: f64| Some((t, t));
    match l.kind {
        LevelKind::Sweep | LevelKind::MultiTurn => {
            if let Some(secs) = l.seconds {
                return exact(secs);
            }
            let r = nearest(s, l.concurrency)?;
            let waves = (requests / f64::from(l.concurrency.max(1))).ceil();
            let low = waves * mean_e2e_s(r)?;
            let tput = r.stats.as_ref()?.scalars.output_throughput;
            let tokens = requests * f64::from(l.output_len);
            let high = if tput > 0.0 { tokens / tput } else { low };
            Some((low, high.max(low)))
        }
        LevelKind::Rate => {
            if let Some(secs) = l.seconds {
                return exact(secs);
            }
            let rate = l.request_rate().filter(|r| *r > 0.0)?;
            let tail = nearest(s, l.concurrency.max(1))
                .and_then(mean_e2e_s)
                .unwrap_or(0.0);
            exact(requests / rate + tail)
        }
        LevelKind::LongContext => {
            let (prefill, decode) = speeds(s).filter(|(p, d)| *p > 0.0 && *d > 0.0)?;
            exact(requests * (l.input_len as f64 / prefill + f64::from(l.output_len) / decode))
        }
        LevelKind::Trace => None,
    }
}

/// The levels still waiting, estimated; `None` until a level has been measured.
pub fn waiting(s: &RunSummary) -> Option<Eta> {
    if !s.levels().any(done) {
        return None;
    }
    let mut eta = Eta {
        low_s: 0.0,
        high_s: 0.0,
        levels: 0,
        unknown: 0,
    };
    for l in s.levels().filter(|l| l.status == LevelStatus::Waiting) {
        match level_s(s, l) {
            Some((lo, hi)) => {
                eta.low_s += lo;
                eta.high_s += hi;
                eta.levels += 1;
            }
            None => eta.unknown += 1,
        }
    }
    Some(eta)
}

/// The range as a person says it: `about 40 s` when its ends are close, else `1 to 5 min`.
pub fn range_text(eta: &Eta) -> String {
    if eta.high_s <= eta.low_s * 1.25 {
        return text(f64::midpoint(eta.low_s, eta.high_s));
    }
    let (lo, hi) = (text(eta.low_s), text(eta.high_s));
    format!(
        "{} to {}",
        lo.trim_start_matches("about "),
        hi.trim_start_matches("about ")
    )
}

/// `about 12 min` / `about 40 s` / `about 1 h 5 min`.
pub fn text(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s < 90 {
        format!("about {s} s")
    } else if s < 3600 {
        format!("about {} min", (s + 30) / 60)
    } else {
        format!("about {} h {} min", s / 3600, (s % 3600 + 30) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waves_of_the_nearest_measured_level_and_the_ladder_at_its_speeds() {
        let mut s = crate::tui::fixtures::finished_run().session.summary;
        // Measured: the sweep's first level only; the rest waits.
        for l in s.sweep.iter_mut().skip(1) {
            l.status = LevelStatus::Waiting;
        }
        for l in &mut s.long_context {
            l.status = LevelStatus::Waiting;
        }
        let c1 = &s.sweep[0];
        let e2e = mean_e2e_s(c1).unwrap();
        let d = &c1.stats.as_ref().unwrap().dists;
        let (prefill, decode) = (
            c1.input_len as f64 / (d.ttft_ms.as_ref().unwrap().mean / 1000.0),
            d.decode_tokens_per_s.as_ref().unwrap().mean,
        );
        // Each waiting sweep level: ⌈requests / C⌉ waves of C=1's mean E2E.
        let sweep: f64 = s
            .sweep
            .iter()
            .skip(1)
            .map(|l| (f64::from(l.requests) / f64::from(l.concurrency)).ceil() * e2e)
            .sum();
        let long: f64 = s
            .long_context
            .iter()
            .map(|l| {
                f64::from(l.requests)
                    * (l.input_len as f64 / prefill + f64::from(l.output_len) / decode)
            })
            .sum();
        // At most: each waiting sweep level's output tokens at C=1's output tok/s.
        let tput = c1.stats.as_ref().unwrap().scalars.output_throughput;
        let sweep_high: f64 = s
            .sweep
            .iter()
            .skip(1)
            .map(|l| f64::from(l.requests) * f64::from(l.output_len) / tput)
            .sum();
        let eta = waiting(&s).unwrap();
        assert!((eta.low_s - (sweep + long)).abs() < 1e-6, "{eta:?}");
        assert!((eta.high_s - (sweep_high + long)).abs() < 1e-6, "{eta:?}");
        assert_eq!(eta.levels, s.sweep.len() - 1 + s.long_context.len());
        assert_eq!(eta.unknown, 0);
        // Nothing measured: no estimate.
        s.sweep[0].status = LevelStatus::Waiting;
        assert!(waiting(&s).is_none());
    }

    #[test]
    fn times_as_a_person_says_them() {
        assert_eq!(text(40.0), "about 40 s");
        assert_eq!(text(725.0), "about 12 min");
        assert_eq!(text(3900.0), "about 1 h 5 min");
        let e = |low_s, high_s| Eta {
            low_s,
            high_s,
            levels: 1,
            unknown: 0,
        };
        assert_eq!(range_text(&e(60.0, 300.0)), "60 s to 5 min");
        assert_eq!(range_text(&e(570.0, 630.0)), "about 10 min");
    }
}
