//! The concurrency sweep's findings: single stream, peak, saturation, latency and its knee,
//! per-stream decode.

use std::fmt::Write;

use super::words::{change, measurable, ms_text, num, pct_text, queued_mean, times};
use super::{
    Finding, KNEE_LOAD_FACTOR, KNEE_MIN_MS, PREFILL_ACCOUNTS, QUEUED_MIN, SATURATION_SHARE,
    STILL_RISING, TPOT_FACTOR, TTFT_GOOD_MS, decode_mean, measured, output_tput, tpot_p50,
    ttft_p50,
};
use crate::summary::{LevelSummary, RunSummary};
use crate::telemetry::per_level::ServerLevelStats;

pub(super) fn findings(s: &RunSummary) -> Vec<Finding> {
    let mut levels: Vec<&LevelSummary> = s
        .sweep
        .iter()
        .filter(|l| measured(l) && output_tput(l).is_some())
        .collect();
    levels.sort_by_key(|l| l.concurrency);
    if levels.is_empty() {
        return Vec::new();
    }
    let peak = *levels
        .iter()
        .max_by(|a, b| {
            let t = |l: &LevelSummary| output_tput(l).unwrap_or(0.0);
            t(a).total_cmp(&t(b))
        })
        .expect("a level");
    let queue = Queue::of(&levels);
    let probing = s.search.is_some();
    let mut out = Vec::new();
    out.extend(single_stream(&levels));
    out.push(peak_throughput(peak));
    out.extend(saturation(&levels, peak, queue.as_ref(), probing));
    out.push(latency(&levels));
    out.extend(knee(s, &levels));
    out.extend(queue.map(Queue::finding));
    out.extend(per_stream(&levels, peak));
    out
}

/// A queue in the server, as its gauges saw it (docs/metrics.md, `server_queue`).
struct Queue<'a> {
    /// The levels whose queued gauge reached [`QUEUED_MIN`], by C.
    levels: Vec<(&'a LevelSummary, &'a ServerLevelStats)>,
    /// The level below the first that queued, if one was measured.
    before: Option<&'a LevelSummary>,
    /// The running gauge's peak over the levels that queued.
    max_running: Option<f64>,
}

/// The server's gauges at `l`, when they saw a queue.
fn queued(l: &LevelSummary) -> Option<&ServerLevelStats> {
    let m = l.server_metrics.as_ref()?;
    (m.max_queued? >= QUEUED_MIN).then_some(m)
}

impl<'a> Queue<'a> {
    fn of(levels: &[&'a LevelSummary]) -> Option<Self> {
        let with: Vec<(&LevelSummary, &ServerLevelStats)> = levels
            .iter()
            .filter_map(|l| Some((*l, queued(l)?)))
            .collect();
        let first = with.first()?.0;
        let before = levels
            .iter()
            .take_while(|l| l.concurrency < first.concurrency)
            .last()
            .copied();
        let max_running = with
            .iter()
            .filter_map(|(_, m)| m.max_running)
            .reduce(f64::max);
        Some(Self {
            levels: with,
            before,
            max_running,
        })
    }

    /// The cap on running requests, where it binds: the running peak below the largest C that
    /// queued.
    fn cap(&self) -> Option<f64> {
        let last = self.levels.last()?.0;
        self.max_running
            .filter(|r| *r >= 1.0 && *r < f64::from(last.concurrency))
    }

    fn finding(self) -> Finding {
        let (first, _) = self.levels[0];
        let (last, m) = self.levels[self.levels.len() - 1];
        let mean = m.mean_queued.unwrap_or(0.0);
        let max = m.max_queued.unwrap_or(0.0);
        let mut text = match self.cap() {
            Some(cap) => format!("The server runs at most {cap:.0} requests at once: requests"),
            None => "Requests".to_string(),
        };
        if first.index == last.index {
            let _ = write!(text, " waited in its queue at C={}", last.concurrency);
        } else {
            let _ = write!(
                text,
                " waited in its queue from C={} on; at C={}",
                first.concurrency, last.concurrency
            );
        }
        let _ = write!(
            text,
            ", {} on average ({max:.0} at most)",
            queued_mean(mean)
        );
        if self.cap().is_none()
            && let Some(r) = self.max_running
        {
            let _ = write!(text, ", with up to {r:.0} running");
        }
        if let Some(b) = self.before {
            let _ = write!(text, "; none at C={}", b.concurrency);
        }
        text.push('.');
        let mut on: Vec<&LevelSummary> = self.before.into_iter().collect();
        on.extend(self.levels.iter().map(|(l, _)| *l));
        Finding::new("server_queue", text, &on)
            .value("server_max_running", self.max_running)
            .value("mean_queued", Some(mean))
            .value("max_queued", Some(max))
            .value("concurrency", Some(f64::from(first.concurrency)))
    }
}

fn single_stream(levels: &[&LevelSummary]) -> Option<Finding> {
    let l = *levels.iter().find(|l| l.concurrency == 1)?;
    let tput = output_tput(l)?;
    let decode = decode_mean(l);
    let client = l.accept_length_client();
    let server = l.accept_length_server;
    let mut text = format!("Single stream (C=1): {} output tok/s", num(tput));
    if let Some(d) = decode {
        let _ = write!(text, ", {} tok/s per-stream decode", num(d));
    }
    if let Some(t) = ttft_p50(l) {
        let _ = write!(text, ", TTFT p50 {}", ms_text(t));
    }
    match (client, server) {
        (Some(c), Some(sv)) => {
            let _ = write!(
                text,
                "; accept length {} as servetop saw it, {} {}",
                num(c),
                num(sv),
                server_source(l)
            );
        }
        (Some(c), None) if c > 1.05 => {
            let _ = write!(
                text,
                "; {} tokens a delivery (accept length as servetop saw it)",
                num(c)
            );
        }
        (None, Some(sv)) => {
            let _ = write!(text, "; accept length {} {}", num(sv), server_source(l));
        }
        _ => {}
    }
    text.push('.');
    Some(
        Finding::new("single_stream", text, &[l])
            .value("output_throughput", Some(tput))
            .value("decode_tokens_per_s", decode)
            .value("ttft_p50_ms", ttft_p50(l))
            .value("accept_length_client", client)
            .value("accept_length_server", server),
    )
}

fn peak_throughput(peak: &LevelSummary) -> Finding {
    let tput = output_tput(peak).unwrap_or(0.0);
    Finding::new(
        "peak_throughput",
        format!(
            "Peak aggregate: {} output tok/s at C={}.",
            num(tput),
            peak.concurrency
        ),
        &[peak],
    )
    .value("output_throughput", Some(tput))
    .value("concurrency", Some(f64::from(peak.concurrency)))
}

fn saturation(
    levels: &[&LevelSummary],
    peak: &LevelSummary,
    queue: Option<&Queue>,
    probing: bool,
) -> Option<Finding> {
    if levels.len() < 2 {
        return None;
    }
    let best = output_tput(peak)?;
    let (last, below) = (levels[levels.len() - 1], levels[levels.len() - 2]);
    let rise = output_tput(last)? / output_tput(below)? - 1.0;
    if last.concurrency == peak.concurrency && rise > STILL_RISING {
        let mut text = format!(
            "Not saturated at the largest C: C={} added {} over C={} ({} output tok/s)",
            last.concurrency,
            pct_text(rise * 100.0),
            below.concurrency,
            num(output_tput(last)?)
        );
        // A search chose its own levels; asking for more is its business, not the reader's.
        if !probing {
            text += ": try more concurrency";
        }
        text.push('.');
        return Some(
            Finding::new("saturation", text, &[below, last])
                .value("output_throughput", output_tput(last))
                .value("still_rising_pct", Some(rise * 100.0)),
        );
    }
    let at = *levels
        .iter()
        .find(|l| output_tput(l).is_some_and(|t| t >= SATURATION_SHARE * best))?;
    let tput = output_tput(at)?;
    let above: Vec<&&LevelSummary> = levels
        .iter()
        .filter(|l| l.concurrency > at.concurrency)
        .collect();
    let cap = queue
        .and_then(Queue::cap)
        .filter(|c| *c <= f64::from(at.concurrency));
    let mut text = format!("Saturates at C={}", at.concurrency);
    if let Some(c) = cap {
        let _ = write!(
            text,
            ", where the server's cap of {c:.0} running requests binds"
        );
    }
    if at.index == peak.index {
        let _ = write!(text, ": {} output tok/s, the peak", num(tput));
    } else {
        let _ = write!(
            text,
            ": {} output tok/s, within {:.0} % of the peak (C={}'s {})",
            num(tput),
            (1.0 - SATURATION_SHARE) * 100.0,
            peak.concurrency,
            num(best)
        );
    }
    if let Some(top) = above.last() {
        let gain = (output_tput(top)? / tput - 1.0) * 100.0;
        let _ = write!(
            text,
            "; above it, up to C={}, output tok/s {}",
            top.concurrency,
            change(gain, 0.0)
        );
    }
    text.push('.');
    let mut rest: Vec<&LevelSummary> = vec![at];
    rest.extend(above.iter().map(|l| **l));
    Some(
        Finding::new("saturation", text, &rest)
            .value("concurrency", Some(f64::from(at.concurrency)))
            .value("output_throughput", Some(tput))
            .value("server_max_running", cap),
    )
}

/// The largest C up to which every level from the smallest keeps `ok`.
fn up_to<'a>(
    levels: &[&'a LevelSummary],
    ok: impl Fn(&LevelSummary) -> bool,
) -> Option<&'a LevelSummary> {
    levels.iter().take_while(|l| ok(l)).last().copied()
}

fn latency(levels: &[&LevelSummary]) -> Finding {
    let last = levels[levels.len() - 1];
    let mut text;
    let mut f_levels = vec![levels[0]];
    let slo_given = levels.iter().any(|l| l.slo.is_some());
    let good = if slo_given {
        up_to(levels, |l| l.slo.as_ref().is_some_and(|c| c.meets))
    } else {
        up_to(levels, |l| ttft_p50(l).is_some_and(|t| t < TTFT_GOOD_MS))
    };
    match (good, slo_given) {
        (Some(g), true) => {
            text = format!("Meets the SLO up to C={}", g.concurrency);
            if let Some(gp) = g.stats.as_ref().and_then(|st| st.scalars.goodput) {
                let _ = write!(text, " ({} req/s goodput)", num(gp));
            }
            f_levels.push(g);
        }
        (None, true) => text = format!("No level meets the SLO (from C={})", levels[0].concurrency),
        (Some(g), false) => {
            text = format!(
                "TTFT p50 under {} up to C={}",
                ms_text(TTFT_GOOD_MS),
                g.concurrency
            );
            f_levels.push(g);
        }
        (None, false) => {
            text = format!(
                "TTFT p50 is over {} already at C={}",
                ms_text(TTFT_GOOD_MS),
                levels[0].concurrency
            );
        }
    }
    if let Some(t) =
        ttft_p50(last).filter(|_| good.is_none_or(|g| g.concurrency != last.concurrency))
    {
        // After the SLO the metric is not named yet.
        let metric = if slo_given { "TTFT p50 " } else { "" };
        let _ = write!(text, ", {metric}{} at C={}", ms_text(t), last.concurrency);
        f_levels.push(last);
    }
    let base = tpot_p50(levels[0]);
    let tpot_ok = base.and_then(|b| {
        up_to(levels, |l| {
            tpot_p50(l).is_some_and(|t| t <= TPOT_FACTOR * b)
        })
    });
    if let (Some(b), Some(t)) = (base, tpot_ok) {
        let _ = write!(
            text,
            "; TPOT p50 within {}× of C={}'s {} up to C={}",
            crate::fmt::fmt_rate(TPOT_FACTOR),
            levels[0].concurrency,
            ms_text(b),
            t.concurrency
        );
    }
    let prefills = batch_prefill(levels);
    if let Some((l, want, got)) = prefills {
        let _ = write!(
            text,
            "; at C={} TTFT grows with the load: each request waits for the batch's prefills, C/2 of C=1's TTFT ({}) against its p50 of {}",
            l.concurrency,
            ms_text(want),
            ms_text(got)
        );
        f_levels.push(l);
    }
    text.push('.');
    f_levels.dedup_by_key(|l| l.index);
    Finding::new("latency", text, &f_levels)
        .value(
            "ttft_good_up_to_concurrency",
            good.map(|g| f64::from(g.concurrency)),
        )
        .value(
            "tpot_good_up_to_concurrency",
            tpot_ok.map(|g| f64::from(g.concurrency)),
        )
        .value("ttft_p50_ms_at_largest", ttft_p50(last))
        .value("batch_prefill_ms", prefills.map(|p| p.1))
}

/// The largest level whose TTFT p50 the batch's own prefills account for (docs/metrics.md,
/// `latency`): no queue in the server there, its TTFT over C=1's by [`KNEE_MIN_MS`], and within
/// [`PREFILL_ACCOUNTS`] of C/2 times C=1's TTFT p50 (a request waits, on average, for half the
/// batch's prefills before its own first token). `(level, C/2 × C=1's TTFT, its TTFT p50)`.
fn batch_prefill<'a>(levels: &[&'a LevelSummary]) -> Option<(&'a LevelSummary, f64, f64)> {
    let one = ttft_p50(levels.iter().find(|l| l.concurrency == 1)?)?;
    levels.iter().rev().find_map(|l| {
        let got = ttft_p50(l)?;
        let want = f64::from(l.concurrency) / 2.0 * one;
        (l.concurrency > 1
            && queued(l).is_none()
            && got - one > KNEE_MIN_MS
            && (got / want - 1.0).abs() <= PREFILL_ACCOUNTS)
            .then_some((*l, want, got))
    })
}

/// The first pair of adjacent levels whose TTFT p50 grew clearly faster than the load, and
/// why (docs/metrics.md, `latency_knee`).
fn knee(s: &RunSummary, levels: &[&LevelSummary]) -> Option<Finding> {
    let (below, at, a, b, load) = levels.windows(2).find_map(|w| {
        let (a, b) = (ttft_p50(w[0])?, ttft_p50(w[1])?);
        let load = f64::from(w[1].concurrency) / f64::from(w[0].concurrency.max(1));
        (a > 0.0 && b / a > KNEE_LOAD_FACTOR * load && b - a > KNEE_MIN_MS)
            .then_some((w[0], w[1], a, b, load))
    })?;
    let growth = b / a;
    let mut text = format!(
        "TTFT p50 grows faster than the load between C={} and C={}: {} → {} ({}, the load {})",
        below.concurrency,
        at.concurrency,
        ms_text(a),
        ms_text(b),
        times(growth),
        times(load)
    );
    let gauges = at
        .server_metrics
        .as_ref()
        .filter(|m| m.max_running.is_some() || m.max_queued.is_some());
    let mut f = Finding::new("latency_knee", String::new(), &[below, at]);
    match (gauges, queued(at)) {
        (Some(_), Some(m)) => {
            let (mean, max) = (m.mean_queued.unwrap_or(0.0), m.max_queued.unwrap_or(0.0));
            match m.max_running.filter(|r| *r < f64::from(at.concurrency)) {
                Some(run) => {
                    let _ = write!(
                        text,
                        ": the server runs at most {run:.0} requests at once, and at C={} {} waited in its queue on average ({max:.0} at most); the wait is there",
                        at.concurrency,
                        queued_mean(mean),
                    );
                }
                None => {
                    let _ = write!(
                        text,
                        ": at C={} {} requests waited in the server's queue on average ({max:.0} at most); the wait is there",
                        at.concurrency,
                        queued_mean(mean),
                    );
                }
            }
            f = f
                .value("server_max_running", m.max_running)
                .value("mean_queued", Some(mean))
                .value("max_queued", Some(max));
        }
        // A gauge the server does not report is not a gauge that read 0: no queued gauge says
        // nothing of a queue, and no running gauge nothing of how many ran.
        (Some(m), None) => {
            let running = m
                .max_running
                .map(|r| format!(" (up to {r:.0} running)"))
                .unwrap_or_default();
            if m.max_queued.is_some() {
                let _ = write!(
                    text,
                    ": the server's gauges show no queue{running}: the time is the batch's own prefill and decode work"
                );
            } else {
                let _ = write!(
                    text,
                    ": the server's metrics have no queued gauge{running}, so servetop cannot tell whether requests waited in its queue"
                );
            }
        }
        (None, _) => {
            text += if s.telemetry.server_flavor.is_some() {
                ": the server's metrics have no running or queued gauge, so servetop cannot tell whether requests waited in its queue"
            } else {
                ": without the server's metrics servetop cannot tell whether requests waited in its queue"
            };
        }
    }
    text.push('.');
    f.text = text;
    Some(
        f.value("concurrency", Some(f64::from(at.concurrency)))
            .value("ttft_p50_ms_before", Some(a))
            .value("ttft_p50_ms", Some(b))
            .value("ttft_growth", Some(growth))
            .value("load_growth", Some(load)),
    )
}

fn per_stream(levels: &[&LevelSummary], peak: &LevelSummary) -> Option<Finding> {
    let one = *levels.iter().find(|l| l.concurrency == 1)?;
    if peak.concurrency <= 1 {
        return None;
    }
    let (a, b) = (decode_mean(one)?, decode_mean(peak)?);
    let pct = (b / a - 1.0) * 100.0;
    let text = if measurable(pct, 0.0) {
        format!(
            "Per-stream decode: {} tok/s at C=1, {} at the peak's C={} ({} {}).",
            num(a),
            num(b),
            peak.concurrency,
            if pct > 0.0 { "up" } else { "down" },
            pct_text(pct.abs())
        )
    } else {
        format!(
            "Per-stream decode: {} tok/s at C=1, {} at the peak's C={} (no measurable change).",
            num(a),
            num(b),
            peak.concurrency
        )
    };
    Some(
        Finding::new("per_stream_decode", text, &[one, peak])
            .value("decode_tokens_per_s_c1", Some(a))
            .value("decode_tokens_per_s_at_peak", Some(b))
            .value("change_pct", Some(pct)),
    )
}

/// Where a level's server accept length came from, as a sentence says it: the engine's counters
/// over the level (vLLM, llama.cpp), or SGLang's recent-window gauge or running average, which
/// carry steps from before the level.
fn server_source(l: &LevelSummary) -> &'static str {
    match l.spec_server.as_ref().map(|s| s.source.as_str()) {
        Some("gauge") => "by the server's recent-window gauge",
        Some("server_info") => "by the server's running average",
        _ => "by the server's counters",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The knee between C=8 and C=16 (TTFT p50 10 → 500 ms) with the server's gauges at C=16
    /// as given.
    fn knee_with(gauges: &ServerLevelStats) -> String {
        let mut s = crate::tui::fixtures::finished_run().session.summary;
        for l in &mut s.sweep {
            let p50 = if l.concurrency >= 16 { 500.0 } else { 10.0 };
            if let Some(d) = l.stats.as_mut().and_then(|st| st.dists.ttft_ms.as_mut()) {
                d.p50 = p50;
            }
            l.server_metrics = (l.concurrency == 16).then(|| gauges.clone());
        }
        let levels: Vec<&LevelSummary> = s.sweep.iter().collect();
        knee(&s, &levels).expect("a knee").text
    }

    /// A gauge the server lacks is told apart from one that read 0: no queued gauge is no
    /// claim about a queue, and no running gauge no count of running requests.
    #[test]
    fn a_missing_gauge_is_not_a_gauge_at_zero() {
        let both = knee_with(&ServerLevelStats {
            max_running: Some(16.0),
            max_queued: Some(0.0),
            mean_queued: Some(0.0),
            ..ServerLevelStats::default()
        });
        assert!(
            both.contains("gauges show no queue (up to 16 running)"),
            "{both}"
        );
        let no_queued = knee_with(&ServerLevelStats {
            max_running: Some(16.0),
            ..ServerLevelStats::default()
        });
        assert!(
            no_queued.contains("no queued gauge (up to 16 running), so servetop cannot tell")
                && !no_queued.contains("show no queue"),
            "{no_queued}"
        );
        let no_running = knee_with(&ServerLevelStats {
            max_queued: Some(0.0),
            mean_queued: Some(0.0),
            ..ServerLevelStats::default()
        });
        assert!(
            no_running.contains("gauges show no queue: the time")
                && !no_running.contains("running"),
            "{no_running}"
        );
    }

    /// A search's levels are its own probes: its findings ask for no more of them.
    #[test]
    fn a_probing_run_asks_for_no_more_concurrency() {
        let s = crate::tui::fixtures::mid_sweep(vec![1, 4, 8])
            .session
            .summary;
        let levels: Vec<&LevelSummary> = s
            .sweep
            .iter()
            .filter(|l| super::super::measured(l))
            .collect();
        let peak = levels[levels.len() - 1];
        let plain = saturation(&levels, peak, None, false).unwrap();
        assert!(
            plain.text.ends_with(": try more concurrency."),
            "{}",
            plain.text
        );
        let probing = saturation(&levels, peak, None, true).unwrap();
        assert!(
            probing.text.starts_with("Not saturated at the largest C")
                && !probing.text.contains("try more"),
            "{}",
            probing.text
        );
    }
}
