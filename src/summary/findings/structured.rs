//! What structured output cost (`--response-format`): the constrained twins against the plain
//! levels, and how many answers complied.

use std::fmt::Write;

use super::{Finding, measured, ms_text, num};
use crate::summary::{LevelSummary, RunSummary};

/// `+12 %` or `-3.4 %`.
fn signed_pct(v: f64) -> String {
    if v >= 0.0 {
        format!("+{} %", num(v))
    } else {
        format!("{} %", num(v))
    }
}

/// One finding for the run's constrained levels: the TPOT and TTFT overhead at the first and
/// at the most costly, and the share of answers that complied.
pub(super) fn finding(s: &RunSummary) -> Option<Finding> {
    let format = s.config.response_format.as_ref()?.label();
    let levels: Vec<&LevelSummary> = s
        .levels()
        .filter(|l| l.response_format.is_some() && measured(l))
        .filter(|l| l.structured_overhead.is_some())
        .collect();
    let first = levels.first()?;
    let o = first.structured_overhead.as_ref()?;
    let worst = levels
        .iter()
        .filter_map(|l| Some((*l, l.structured_overhead.as_ref()?.tpot_p50_pct?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let mut text = format!("Structured output ({format}) at {}:", first.label());
    let mut f = Finding::new("structured_output", String::new(), &levels);
    if let (Some(p), Some(ms)) = (o.tpot_p50_pct, o.tpot_p50_added_ms) {
        let _ = write!(
            text,
            " TPOT p50 {} ({} a token)",
            signed_pct(p),
            ms_text(ms)
        );
    }
    if let Some(p) = o.ttft_p50_pct {
        let _ = write!(text, ", TTFT p50 {}", signed_pct(p));
    }
    if let Some(p) = o.output_throughput_pct {
        let _ = write!(text, ", output tok/s {}", signed_pct(p));
    }
    f = f
        .value("tpot_p50_pct", o.tpot_p50_pct)
        .value("ttft_p50_pct", o.ttft_p50_pct)
        .value("output_throughput_pct", o.output_throughput_pct);
    if let Some((l, p)) = worst.filter(|(l, _)| l.index != first.index) {
        let _ = write!(
            text,
            "; the most at {}: TPOT p50 {}",
            l.label(),
            signed_pct(p)
        );
        f = f.value("worst_tpot_p50_pct", Some(p));
    }
    let (checked, valid) = levels
        .iter()
        .filter_map(|l| {
            let sc = &l.stats.as_ref()?.scalars;
            Some((
                sc.schema_checked,
                sc.schema_valid_share? * sc.schema_checked as f64,
            ))
        })
        .fold((0u64, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    if checked > 0 {
        let share = valid / checked as f64;
        let _ = write!(
            text,
            ". {} % of {checked} answers comply",
            num(share * 100.0)
        );
        if share < 1.0 {
            text += " (an answer cut by its output limit does not; nor does one from a server that ignored the constraint)";
        }
        f = f.value("schema_valid_share", Some(share));
    }
    f.text = text + ".";
    Some(f)
}
