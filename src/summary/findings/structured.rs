//! What structured output cost (`--response-format`): the constrained twins against the plain
//! levels, and how many answers complied.

use std::fmt::Write;

use super::words::{ms_text, num, pct_text, signed_pct};
use super::{ACCEPT_CONFOUND, Finding, Strength, measured};
use crate::summary::{LevelSummary, RunSummary};

/// The median of `v` (the lower middle of an even count).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len().checked_sub(1)? / 2).copied()
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
    let mut f = Finding::new("structured_output", String::new(), &levels);
    // The constraint's cost per server step, over every constrained level.
    let steps: Vec<f64> = levels
        .iter()
        .filter_map(|l| l.structured_overhead.as_ref()?.step_p50_pct)
        .collect();
    let mut text = format!("Structured output ({format})");
    if let Some(step) = median(steps.clone()) {
        let _ = write!(
            text,
            ": each server step {} (chunk gap p50, the median over {} constrained {}); at {}:",
            signed_pct(step),
            steps.len(),
            if steps.len() == 1 { "level" } else { "levels" },
            first.label()
        );
        f = f.value("step_overhead_pct", Some(step));
    } else {
        let _ = write!(text, " at {}:", first.label());
    }
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
    if let Some((said, why)) = accept_confound(&levels) {
        text += &said;
        f = f.weakened(Strength::Confounded, why);
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

/// With speculative decoding TPOT is the step over the accept length: twins whose accept
/// lengths differ by more than [`ACCEPT_CONFOUND`] do not compare by TPOT alone. What the
/// finding then says, and the reason it is confounded.
fn accept_confound(levels: &[&LevelSummary]) -> Option<(String, String)> {
    let (l, p, c, share) = levels
        .iter()
        .filter_map(|l| {
            let o = l.structured_overhead.as_ref()?;
            let (p, c) = (o.accept_length_plain?, o.accept_length_constrained?);
            (p > 0.0).then(|| (*l, p, c, (c / p - 1.0).abs()))
        })
        .max_by(|a, b| a.3.total_cmp(&b.3))
        .filter(|w| w.3 > ACCEPT_CONFOUND)?;
    Some((
        format!(
            "; TPOT moved with the accept length too ({}: {} plain, {} constrained, {} apart), so the step's change is the constraint's cost",
            l.label(),
            num(p),
            num(c),
            pct_text(share * 100.0)
        ),
        format!(
            "the twins' accept lengths differ by {} at {} ({} plain, {} constrained): their TPOT compares more than the constraint",
            pct_text(share * 100.0),
            l.label(),
            num(p),
            num(c)
        ),
    ))
}
