//! A rough time for a plan's levels, as a range: before the run from a basis ([`basis`]: an
//! earlier run against the same server and model, the server's own metrics, the warmup, or a
//! stated default), and while it runs from the levels measured so far. A sweep or multi-turn
//! level takes at least as many waves of its concurrency as its requests need, each as long as a
//! request took at the nearest measured concurrency at or below it, scaled to the level's input
//! and output lengths (as if the server scaled perfectly), and at most its output tokens at that
//! level's output tok/s (as if it did not scale at all); a rate level its requests over its
//! rate; a long-context length its prompt at the prefill speed and its output at the decode
//! speed measured last. A level the server's context cannot hold, which the run will skip, is
//! not counted; a replayed trace without an offered rate, and server restarts, are not
//! estimated.

pub mod basis;

use super::{LevelStatus, LevelSummary, RunSummary};
use crate::workload::LevelKind;

/// The estimate for the levels it covers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Eta {
    /// The range: the server scaling perfectly with concurrency, and not at all (or, from
    /// single-stream speeds, as [`basis`] says).
    pub low_s: f64,
    pub high_s: f64,
    /// Levels it covers, those it cannot (a trace, or nothing measured to go by), and those left
    /// out because the run will skip them (longer than the server's context).
    pub levels: usize,
    pub unknown: usize,
    pub skipped: usize,
}

impl Eta {
    fn add(&mut self, t: Option<(f64, f64)>) {
        match t {
            Some((lo, hi)) => {
                self.low_s += lo;
                self.high_s += hi;
                self.levels += 1;
            }
            None => self.unknown += 1,
        }
    }
}

fn done(l: &LevelSummary) -> bool {
    l.status == LevelStatus::Done && l.stats.as_ref().is_some_and(|s| s.scalars.completed > 0)
}

/// Whether the run will skip `l` rather than run it: its prompt and output do not fit the
/// server's `context_limit`, and the run cannot restart the server with a larger one (it
/// restarts a server it started, `restarts`, for a long-context length only).
#[must_use]
pub fn will_skip(l: &LevelSummary, context_limit: Option<u64>, restarts: bool) -> bool {
    let Some(limit) = context_limit else {
        return false;
    };
    let need = l.input_len + u64::from(l.output_len);
    need > limit && !(restarts && l.kind == LevelKind::LongContext)
}

/// [`will_skip`] for a level of run `s`.
fn skipped_in(s: &RunSummary, l: &LevelSummary) -> bool {
    will_skip(
        l,
        s.server.as_ref().and_then(|v| v.context_limit),
        s.config.serve.is_some(),
    )
}

/// Mean TTFT and E2E (seconds) of a measured level.
fn means_s(l: &LevelSummary) -> Option<(f64, f64)> {
    let d = &l.stats.as_ref()?.dists;
    Some((
        d.ttft_ms.as_ref()?.mean / 1000.0,
        d.e2el_ms.as_ref()?.mean / 1000.0,
    ))
}

/// A request of `l`'s lengths at the pace of measured level `r`: its TTFT scaled by the input
/// length, the rest of its E2E by the output length.
fn request_s(r: &LevelSummary, l: &LevelSummary) -> Option<f64> {
    let (ttft, e2e) = means_s(r)?;
    let scale = |new: f64, old: f64| if old > 0.0 { new / old } else { 1.0 };
    Some(
        ttft * scale(l.input_len as f64, r.input_len as f64)
            + (e2e - ttft).max(0.0) * scale(f64::from(l.output_len), f64::from(r.output_len)),
    )
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

/// The tool waits one worker of a session level sits through: its sessions' waits between
/// turns, each at most the capped mean (0 for other levels). With sub-agents, the turn after
/// them waits for them instead, and they wait on their own tools at once: one sub-agent's
/// waits count, the least the slowest of them waits on average.
pub fn tool_waits_s(l: &LevelSummary) -> f64 {
    let (Some(w), Some(c)) = (l.tool_wait, l.conversation) else {
        return 0.0;
    };
    let sessions = l.requests.div_ceil(c.requests());
    let per_worker = f64::from(sessions.div_ceil(l.concurrency.max(1)));
    let turns = c.turns.max(1);
    let waits = if c.fan_out > 0 {
        (turns - 1).saturating_sub(1) + c.sub_agent_turns.saturating_sub(1)
    } else {
        turns - 1
    };
    let think = l
        .think_time
        .map_or(0.0, |t| (per_worker - 1.0).max(0.0) * t.capped_mean_s());
    per_worker * f64::from(waits) * w.capped_mean_s() + think
}

/// A session level's time from the nearest session level measured (at or below its users):
/// that level's duration per wave of sessions, times this level's waves; at most slowed as
/// the users grow by [`basis::SLOWDOWN_EXPONENT`]. `None` before a session level is measured.
fn sessions_s(s: &RunSummary, l: &LevelSummary) -> Option<(f64, f64)> {
    let measured: Vec<&LevelSummary> = s.sessions.iter().filter(|l| done(l)).collect();
    let r = measured
        .iter()
        .filter(|m| m.concurrency <= l.concurrency)
        .max_by_key(|m| m.concurrency)
        .or_else(|| measured.iter().min_by_key(|m| m.concurrency))?;
    let took_s = (r.finished_at_unix_ms? - r.started_at_unix_ms?) as f64 / 1e3;
    let waves = |x: &LevelSummary| {
        let per_session = x.conversation.map_or(1, |c| c.requests());
        f64::from(
            x.requests
                .div_ceil(per_session)
                .div_ceil(x.concurrency.max(1)),
        )
    };
    let t = took_s * waves(l) / waves(r).max(1.0);
    let slower = (f64::from(l.concurrency) / f64::from(r.concurrency.max(1)))
        .max(1.0)
        .powf(basis::SLOWDOWN_EXPONENT);
    Some((t, t * slower))
}

/// `(low, high)` seconds for level `l`, at the pace of the levels `s` measured.
fn level_s(s: &RunSummary, l: &LevelSummary) -> Option<(f64, f64)> {
    let requests = f64::from(l.requests);
    let exact = |t: f64| Some((t, t));
    match l.kind {
        LevelKind::Sessions => {
            if let Some(secs) = l.seconds {
                return exact(secs);
            }
            sessions_s(s, l)
        }
        LevelKind::Sweep | LevelKind::MultiTurn => {
            if let Some(secs) = l.seconds {
                return exact(secs);
            }
            let r = nearest(s, l.concurrency)?;
            let waves = (requests / f64::from(l.concurrency.max(1))).ceil();
            let waits = tool_waits_s(l);
            let low = waves * request_s(r, l)? + waits;
            let tput = r.stats.as_ref()?.scalars.output_throughput;
            let tokens = requests * f64::from(l.output_len);
            let high = if tput > 0.0 {
                tokens / tput + waits
            } else {
                low
            };
            Some((low, high.max(low)))
        }
        LevelKind::Rate => {
            if let Some(secs) = l.seconds {
                return exact(secs);
            }
            let rate = l.request_rate().filter(|r| *r > 0.0)?;
            if rate.is_infinite() {
                // Every request at once: waves of them all, or of --max-concurrency, each as
                // long as a request at the nearest concurrency measured.
                let c = if l.concurrency > 0 {
                    l.concurrency
                } else {
                    l.requests.max(1)
                };
                let one = nearest(s, c).and_then(|r| request_s(r, l))?;
                return exact((requests / f64::from(c)).ceil() * one);
            }
            let tail = nearest(s, l.concurrency.max(1))
                .and_then(|r| request_s(r, l))
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
    let mut eta = Eta::default();
    for l in s.levels().filter(|l| l.status == LevelStatus::Waiting) {
        if skipped_in(s, l) {
            eta.skipped += 1;
        } else {
            eta.add(level_s(s, l));
        }
    }
    Some(eta)
}

/// A duration in one unit: seconds under 90 s, minutes under 90 min, else hours.
fn in_unit(seconds: f64) -> (String, &'static str) {
    let s = seconds.max(0.0);
    if s.round() < 90.0 {
        (format!("{}", s.round()), "s")
    } else if s < 90.0 * 60.0 {
        (format!("{}", (s / 60.0).round()), "min")
    } else if s < 10.0 * 3600.0 {
        (format!("{:.1}", s / 3600.0), "h")
    } else {
        (format!("{}", (s / 3600.0).round()), "h")
    }
}

/// The range as a person says it: `about 40 s` when its ends are close, else `about 3–5 min`
/// (`about 40 s–3 min` across units).
#[must_use]
pub fn range_text(eta: &Eta) -> String {
    if eta.high_s <= eta.low_s * 1.25 {
        return text(f64::midpoint(eta.low_s, eta.high_s));
    }
    let ((lo, lu), (hi, hu)) = (in_unit(eta.low_s), in_unit(eta.high_s));
    if lu == hu {
        if lo == hi {
            format!("about {lo} {lu}")
        } else {
            format!("about {lo}–{hi} {lu}")
        }
    } else {
        format!("about {lo} {lu}–{hi} {hu}")
    }
}

/// `about 12 min` / `about 40 s` / `about 1.5 h`.
#[must_use]
pub fn text(seconds: f64) -> String {
    let (v, u) = in_unit(seconds);
    format!("about {v} {u}")
}

/// What the levels an estimate leaves out are: `; 2 levels not estimated (a trace replay); 1
/// skipped (longer than the server's context)`, or nothing.
#[must_use]
pub fn left_out(eta: &Eta) -> String {
    let unknown = (eta.unknown > 0).then(|| {
        format!(
            "; {} level{} not estimated (a trace replay, or nothing to go by)",
            eta.unknown,
            if eta.unknown == 1 { "" } else { "s" }
        )
    });
    let skipped = (eta.skipped > 0).then(|| {
        format!(
            "; {} to be skipped, not counted (longer than the server's context)",
            eta.skipped
        )
    });
    unknown.unwrap_or_default() + &skipped.unwrap_or_default()
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
        let e2e = means_s(c1).unwrap().1;
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
        // The lengths the server's context cannot hold are skipped: not counted.
        let limit = s.server.as_ref().unwrap().context_limit.unwrap();
        let fits = |l: &&LevelSummary| l.input_len + u64::from(l.output_len) <= limit;
        let long: f64 = s
            .long_context
            .iter()
            .filter(fits)
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
        let held = s.long_context.iter().filter(fits).count();
        assert!(
            held > 0 && held < s.long_context.len(),
            "the fixture has both"
        );
        assert_eq!(eta.levels, s.sweep.len() - 1 + held);
        assert_eq!(eta.skipped, s.long_context.len() - held);
        assert_eq!(eta.unknown, 0);
        // Nothing measured: no estimate.
        s.sweep[0].status = LevelStatus::Waiting;
        assert!(waiting(&s).is_none());
    }

    #[test]
    fn times_as_a_person_says_them() {
        assert_eq!(text(40.0), "about 40 s");
        assert_eq!(text(725.0), "about 12 min");
        assert_eq!(text(3900.0), "about 65 min");
        assert_eq!(text(6000.0), "about 1.7 h");
        assert_eq!(text(40_000.0), "about 11 h");
        let e = |low_s, high_s| Eta {
            low_s,
            high_s,
            levels: 1,
            ..Eta::default()
        };
        assert_eq!(range_text(&e(60.0, 300.0)), "about 60 s–5 min");
        assert_eq!(range_text(&e(180.0, 300.0)), "about 3–5 min");
        assert_eq!(range_text(&e(20.0, 60.0)), "about 20–60 s");
        assert_eq!(range_text(&e(570.0, 630.0)), "about 10 min");
        // Ends that round to one figure are one figure.
        assert_eq!(range_text(&e(150.0, 200.0)), "about 3 min");
    }

    #[test]
    fn a_level_the_server_cannot_hold_is_skipped_unless_restarted_for() {
        let mut l = LevelSummary::planned(
            &crate::workload::levels::plain(
                &[],
                (0, 0),
                crate::workload::RequestCount::Fixed(1),
                &crate::workload::OpenLoop::default(),
                (&[30_000], 256, 1),
            )[0],
        );
        assert_eq!(l.kind, LevelKind::LongContext);
        assert!(!will_skip(&l, None, false), "no limit known");
        assert!(!will_skip(&l, Some(30_256), false), "fits exactly");
        assert!(will_skip(&l, Some(30_255), false));
        assert!(
            !will_skip(&l, Some(30_255), true),
            "a server it started is restarted"
        );
        l.kind = LevelKind::Sweep;
        assert!(
            will_skip(&l, Some(30_255), true),
            "only for a long-context length"
        );
    }

    #[test]
    fn a_request_of_other_lengths_scales_its_prefill_and_decode_apart() {
        let s = crate::tui::fixtures::finished_run().session.summary;
        let r = &s.sweep[0];
        let (ttft, e2e) = means_s(r).unwrap();
        let mut l = r.clone();
        l.input_len = r.input_len * 3;
        l.output_len = r.output_len * 2;
        let want = ttft * 3.0 + (e2e - ttft) * 2.0;
        assert!((request_s(r, &l).unwrap() - want).abs() < 1e-9);
        assert!(
            (request_s(r, r).unwrap() - e2e).abs() < 1e-9,
            "same lengths: its E2E"
        );
    }
}
