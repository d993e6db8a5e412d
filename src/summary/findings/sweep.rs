//! The concurrency sweep's findings: single stream, peak, saturation, latency and its knee,
//! per-stream decode.

use std::fmt::Write;

use super::{
    Finding, KNEE_FACTOR, KNEE_MIN_MS, SATURATION_SHARE, STILL_RISING, TPOT_FACTOR, TTFT_GOOD_MS,
    decode_mean, measured, ms_text, num, output_tput, tpot_p50, ttft_p50,
};
use crate::summary::{LevelSummary, RunSummary};

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
    let mut out = Vec::new();
    out.extend(single_stream(&levels));
    out.push(peak_throughput(peak));
    out.extend(saturation(&levels, peak));
    out.push(latency(&levels));
    out.extend(knee(s, &levels));
    out.extend(per_stream(&levels, peak));
    out
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
                "; accept length {} as servetop saw it, {} by the server's counters",
                num(c),
                num(sv)
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
            let _ = write!(text, "; accept length {} by the server's counters", num(sv));
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

fn saturation(levels: &[&LevelSummary], peak: &LevelSummary) -> Option<Finding> {
    if levels.len() < 2 {
        return None;
    }
    let best = output_tput(peak)?;
    let (last, below) = (levels[levels.len() - 1], levels[levels.len() - 2]);
    let rise = output_tput(last)? / output_tput(below)? - 1.0;
    if last.concurrency == peak.concurrency && rise > STILL_RISING {
        return Some(
            Finding::new(
                "saturation",
                format!(
                    "Not saturated at the largest C: C={} added {:.0} % over C={} ({} output tok/s): try more concurrency.",
                    last.concurrency,
                    rise * 100.0,
                    below.concurrency,
                    num(output_tput(last)?)
                ),
                &[below, last],
            )
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
    let mut text = format!(
        "Saturates at C={}: {} output tok/s, within {:.0} % of the peak",
        at.concurrency,
        num(tput),
        (1.0 - SATURATION_SHARE) * 100.0
    );
    if let Some(top) = above.last() {
        let gain = output_tput(top)? / tput - 1.0;
        let _ = write!(
            text,
            "; the levels above it, up to C={}, added {:+.0} %",
            top.concurrency,
            gain * 100.0
        );
    }
    text.push('.');
    let mut rest: Vec<&LevelSummary> = vec![at];
    rest.extend(above.iter().map(|l| **l));
    Some(
        Finding::new("saturation", text, &rest)
            .value("concurrency", Some(f64::from(at.concurrency)))
            .value("output_throughput", Some(tput)),
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
        let _ = write!(text, ", {} at C={}", ms_text(t), last.concurrency);
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
}

fn knee(s: &RunSummary, levels: &[&LevelSummary]) -> Option<Finding> {
    let (below, at) = levels.windows(2).find_map(|w| {
        let (a, b) = (ttft_p50(w[0])?, ttft_p50(w[1])?);
        (b > KNEE_FACTOR * a && b > KNEE_MIN_MS).then_some((w[0], w[1]))
    })?;
    let (a, b) = (ttft_p50(below)?, ttft_p50(at)?);
    let mut text = format!(
        "TTFT jumps between C={} and C={}: {} → {} (p50)",
        below.concurrency,
        at.concurrency,
        ms_text(a),
        ms_text(b)
    );
    let gauges = at
        .server_metrics
        .as_ref()
        .filter(|m| m.max_running.is_some());
    let mut running = None;
    match gauges {
        Some(m) => {
            let run = m.max_running.unwrap_or(0.0);
            let queued = m.max_queued.unwrap_or(0.0);
            if queued >= 1.0 && run < f64::from(at.concurrency) {
                running = Some(run);
                let _ = write!(
                    text,
                    ": the server runs at most {run:.0} requests at once (its running gauge's peak at C={}) and held up to {queued:.0} in its queue; the wait is there",
                    at.concurrency,
                );
            } else {
                let _ = write!(
                    text,
                    ": the server's gauges show no queue (up to {run:.0} running): the time is the batch's own prefill and decode work"
                );
            }
        }
        None => {
            text += if s.telemetry.server_flavor.is_some() {
                ": the server's metrics have no running or queued gauge, so servetop cannot tell whether requests waited in its queue"
            } else {
                ": without the server's metrics servetop cannot tell whether requests waited in its queue"
            };
        }
    }
    text.push('.');
    Some(
        Finding::new("latency_knee", text, &[below, at])
            .value("concurrency", Some(f64::from(at.concurrency)))
            .value("ttft_p50_ms_before", Some(a))
            .value("ttft_p50_ms", Some(b))
            .value("server_max_running", running),
    )
}

fn per_stream(levels: &[&LevelSummary], peak: &LevelSummary) -> Option<Finding> {
    let one = *levels.iter().find(|l| l.concurrency == 1)?;
    if peak.concurrency <= 1 {
        return None;
    }
    let (a, b) = (decode_mean(one)?, decode_mean(peak)?);
    let change = (b / a - 1.0) * 100.0;
    Some(
        Finding::new(
            "per_stream_decode",
            format!(
                "Per-stream decode: {} tok/s at C=1, {} at the peak's C={} ({:+.0} %).",
                num(a),
                num(b),
                peak.concurrency,
                change
            ),
            &[one, peak],
        )
        .value("decode_tokens_per_s_c1", Some(a))
        .value("decode_tokens_per_s_at_peak", Some(b))
        .value("change_pct", Some(change)),
    )
}
