//! The long-context ladder's findings: decode speed across lengths, prefill scaling, the
//! servers that measured it and the lengths it skipped.

use std::fmt::Write;

use super::words::{change, measurable, ms_text, num, pct_text};
use super::{
    DECODE_SPREAD_Z, FIT_MIN_POINTS, Finding, LINEAR_SLOPE_RATIO, MEASURABLE_PCT, Strength,
    decode_mean, measured,
};
use crate::summary::{LevelStatus, LevelSummary, RunSummary};

pub(super) fn findings(s: &RunSummary) -> Vec<Finding> {
    let mut done: Vec<&LevelSummary> = s.long_context.iter().filter(|l| measured(l)).collect();
    done.sort_by_key(|l| l.input_len);
    let mut out = Vec::new();
    if done.len() >= 2 {
        out.extend(decode(&done));
        out.extend(prefill(&done));
    }
    out.extend(servers(s));
    out.extend(skipped(s));
    out
}

/// Decode across lengths: the change from the shortest to the longest, unless the series
/// says it cannot be read so (docs/metrics.md, `long_context_decode`).
fn decode(done: &[&LevelSummary]) -> Option<Finding> {
    let series: Vec<(&LevelSummary, f64)> = done
        .iter()
        .filter_map(|l| Some((*l, decode_mean(l)?)))
        .collect();
    if series.len() < 2 {
        return None;
    }
    let ((short, a), (long, b)) = (series[0], series[series.len() - 1]);
    let pct = (b / a - 1.0) * 100.0;
    // How far a longer length decoded faster than the one before it: the spread the series
    // itself shows (decode only slows with context).
    let reversal = series
        .windows(2)
        .map(|w| (w[1].1 / w[0].1 - 1.0) * 100.0)
        .fold(0.0, f64::max);
    let levels: Vec<&LevelSummary> = series.iter().map(|(l, _)| *l).collect();
    // How finely the two ends' speeds are known: twice the standard error their own chunk
    // gaps give (docs/metrics.md, `long_context_decode`).
    let noise = match (decode_se(short), decode_se(long)) {
        (Some(x), Some(y)) => DECODE_SPREAD_Z * x.hypot(y) * 100.0,
        _ => 0.0,
    };
    let mut f = Finding::new("long_context_decode", String::new(), &levels)
        .value("decode_tokens_per_s_shortest", Some(a))
        .value("decode_tokens_per_s_longest", Some(b))
        .value("change_pct", Some(pct))
        .value("noise_pct", Some(noise));
    let floor = reversal.max(MEASURABLE_PCT).max(noise);
    f.text = if reversal > MEASURABLE_PCT {
        let list: Vec<String> = series
            .iter()
            .map(|(l, v)| format!("{} {}", l.label(), num(*v)))
            .collect();
        f.weaken(
            Strength::Thin,
            format!(
                "the decode speeds across lengths are not monotone: a longer length decoded {} faster than a shorter one",
                pct_text(reversal)
            ),
        );
        let overall = if measurable(pct, floor) {
            format!(
                "from the shortest to the longest it {}, more than the {} they scatter",
                change(pct, floor),
                pct_text(floor)
            )
        } else {
            format!(
                "no measurable change from the shortest to the longest, within the {} they scatter",
                pct_text(floor)
            )
        };
        format!(
            "Decode across lengths, as measured, is not monotone ({} tok/s per stream): {overall}.",
            list.join(", ")
        )
    } else if measurable(pct, floor) {
        format!(
            "Decode from {} to {}: {} → {} tok/s per stream ({}).",
            short.label(),
            long.label(),
            num(a),
            num(b),
            if pct > 0.0 {
                format!("up {}", pct_text(pct))
            } else {
                format!("down {}", pct_text(-pct))
            }
        )
    } else {
        f.weaken(
            Strength::Thin,
            format!(
                "the change, {}, is within the {} its lengths' own spread allows",
                pct_text(pct),
                pct_text(floor)
            ),
        );
        format!(
            "Decode from {} to {}: {} → {} tok/s per stream, no measurable change.",
            short.label(),
            long.label(),
            num(a),
            num(b)
        )
    };
    Some(f)
}

/// A length's decode speed's relative standard error, from its chunk gaps: their coefficient
/// of variation over the root of their count (the decode time is their sum).
fn decode_se(l: &LevelSummary) -> Option<f64> {
    let g = l.stats.as_ref()?.dists.chunk_gap_ms.as_ref()?;
    (g.count > 0 && g.mean > 0.0).then(|| g.std / g.mean / (g.count as f64).sqrt())
}

/// Least squares `y = a + b·x`: (a, b, R²).
pub fn fit(points: &[(f64, f64)]) -> Option<(f64, f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let b = sxy / sxx;
    let r2 = if syy > 0.0 {
        sxy * sxy / (sxx * syy)
    } else {
        1.0
    };
    Some((my - b * mx, b, r2))
}

fn prefill(done: &[&LevelSummary]) -> Option<Finding> {
    // (input tokens, TTFT s) of each length.
    let points: Vec<(f64, f64)> = done
        .iter()
        .filter_map(|l| {
            let st = l.stats.as_ref()?;
            Some((
                st.scalars.mean_input_tokens?,
                st.dists.ttft_ms.as_ref()?.mean / 1000.0,
            ))
        })
        .collect();
    if points.len() < 2 {
        return None;
    }
    let (_, slope, r2) = fit(&points)?;
    if slope <= 0.0 {
        // TTFT that does not grow with the prompt is not a prefill's: said, with no speed, where
        // saying nothing would leave the reader to guess why the lengths have no prefill line.
        let each: Vec<String> = done
            .iter()
            .zip(&points)
            .map(|(l, p)| format!("{} {}", l.label(), ms_text(p.1 * 1000.0)))
            .collect();
        let text = format!(
            "Prefill: no speed fitted: TTFT did not grow with input ({}), so it is not the prefill's time alone (a prefix cache, a queue, or a disturbed measurement).",
            each.join(", ")
        );
        return Some(Finding::new("prefill_scaling", text, done).weakened(
            Strength::Thin,
            "TTFT did not grow with input: no prefill speed".into(),
        ));
    }
    let speed = 1.0 / slope;
    let last = points[points.len() - 1];
    let fitted = points.len() >= FIT_MIN_POINTS;
    let mut text = if fitted {
        format!(
            "Prefill: {} tok/s (the slope of TTFT against input, least squares over {} lengths, R² {:.3}); TTFT {} at {}",
            num(speed),
            points.len(),
            r2,
            ms_text(last.1 * 1000.0),
            done[done.len() - 1].label()
        )
    } else {
        format!(
            "Prefill: {} tok/s (the slope of TTFT against input through two lengths); TTFT {} at {}",
            num(speed),
            ms_text(last.1 * 1000.0),
            done[done.len() - 1].label()
        )
    };
    let verdict = if points.len() >= 3 {
        let s = |a: (f64, f64), b: (f64, f64)| (b.1 - a.1) / (b.0 - a.0);
        let low = s(points[0], points[1]);
        let high = s(points[points.len() - 2], points[points.len() - 1]);
        let ratio = high / low;
        if low > 0.0 && ratio > LINEAR_SLOPE_RATIO {
            let _ = write!(
                text,
                "; it grows faster than linear: {ratio:.2}× the slope between the two longest lengths as between the two shortest"
            );
            Some(ratio)
        } else {
            text += "; linear";
            Some(ratio)
        }
    } else {
        text += "; two lengths: no test of linearity";
        None
    };
    text.push('.');
    let f = Finding::new("prefill_scaling", text, done)
        .value("tokens_per_s", Some(speed))
        .value("r2", Some(r2).filter(|_| fitted))
        .value("slope_ratio", verdict);
    Some(if fitted {
        f
    } else {
        f.weakened(
            Strength::Thin,
            "a line through two lengths fits them exactly: nothing tests it".into(),
        )
    })
}

/// The lengths each restarted server measured.
fn servers(s: &RunSummary) -> Option<Finding> {
    if s.servers.len() < 2 {
        return None;
    }
    let mut parts = Vec::new();
    let mut levels: Vec<&LevelSummary> = Vec::new();
    for (i, sv) in s.servers.iter().enumerate().skip(1) {
        let measured: Vec<&LevelSummary> = s
            .long_context
            .iter()
            .filter(|l| l.server_index == Some(i as u32) && l.status == LevelStatus::Done)
            .collect();
        if measured.is_empty() {
            continue;
        }
        parts.push(format!(
            "{} on a server restarted with context {}",
            measured
                .iter()
                .map(|l| l.label())
                .collect::<Vec<_>>()
                .join(", "),
            sv.context_len.map_or("?".into(), |c| c.to_string())
        ));
        levels.extend(measured);
    }
    if parts.is_empty() {
        return None;
    }
    let first = s.servers[0]
        .context_len
        .map_or("?".into(), |c| c.to_string());
    Some(
        Finding::new(
            "long_context_servers",
            format!(
                "The first server (context {first}) was restarted for longer lengths: {}.",
                parts.join("; ")
            ),
            &levels,
        )
        .value("restarts", Some((s.servers.len() - 1) as f64)),
    )
}

fn skipped(s: &RunSummary) -> Option<Finding> {
    let skipped: Vec<&LevelSummary> = s
        .long_context
        .iter()
        .filter(|l| l.status == LevelStatus::Skipped)
        .collect();
    if skipped.is_empty() {
        return None;
    }
    let parts: Vec<String> = skipped
        .iter()
        // Each reason already names the flag that would let the length run.
        .map(|l| {
            format!(
                "{} ({})",
                l.label(),
                l.reason.as_deref().unwrap_or("skipped")
            )
        })
        .collect();
    Some(
        Finding::new(
            "long_context_skipped",
            format!("Not run: {}.", parts.join("; ")),
            &skipped,
        )
        .value("skipped", Some(skipped.len() as f64)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{DistStats, LevelStats};
    use crate::summary::LevelStatus;
    use crate::workload::{LevelKind, LevelSpec};

    /// A measured long-context length of `input` tokens whose TTFT mean was `ttft_ms`.
    fn length(index: u32, input: u64, ttft_ms: f64) -> LevelSummary {
        let spec = LevelSpec::new(index, LevelKind::LongContext, 1, (input, 10), 3);
        let mut l = LevelSummary::planned(&spec);
        l.status = LevelStatus::Done;
        let mut st = LevelStats::default();
        st.scalars.completed = 3;
        st.scalars.mean_input_tokens = Some(input as f64);
        st.dists.ttft_ms = Some(DistStats {
            count: 3,
            mean: ttft_ms,
            ..DistStats::default()
        });
        l.stats = Some(st);
        l
    }

    /// TTFT that grows with input gives the slope's speed; TTFT that falls gives no speed, and
    /// says so with each length's TTFT, thin.
    #[test]
    fn prefill_fits_a_speed_only_where_ttft_grows_with_input() {
        let (a, b) = (length(0, 1000, 100.0), length(1, 3000, 300.0));
        let f = prefill(&[&a, &b]).unwrap();
        assert!((f.values["tokens_per_s"] - 10_000.0).abs() < 1e-6, "{f:?}");
        let (a, b) = (length(0, 1000, 120.0), length(1, 2000, 95.0));
        let f = prefill(&[&a, &b]).unwrap();
        assert!(!f.values.contains_key("tokens_per_s"), "{f:?}");
        assert_eq!(f.strength, Strength::Thin);
        assert!(
            f.text
                .starts_with("Prefill: no speed fitted: TTFT did not grow with input (")
                && f.text.contains(&format!("{} 120 ms", a.label()))
                && f.text.contains(&format!("{} 95.0 ms", b.label())),
            "{}",
            f.text
        );
    }
}
