//! Findings across runs (`report A B …`, and the comparison a `--serve-param` sweep writes):
//! each run against the first, the reference — its peak output tok/s as a multiple of the
//! reference's and at what TTFT, its single stream, its prefill speed — each with the caveats
//! that make the comparison less than like for like.

use std::fmt::Write;

use super::{Finding, level_caveats, measured, num, output_tput, ttft_p50};
use crate::summary::{LevelSummary, RunSummary};

/// A run with the label the comparison gives it (`-np 4`, a directory name).
pub type Labelled<'a> = (String, &'a RunSummary);

/// The sweep level with the most output tok/s.
fn peak(s: &RunSummary) -> Option<&LevelSummary> {
    s.sweep
        .iter()
        .filter(|l| measured(l) && output_tput(l).is_some())
        .max_by(|a, b| {
            let t = |l: &LevelSummary| output_tput(l).unwrap_or(0.0);
            t(a).total_cmp(&t(b))
        })
}

fn single(s: &RunSummary) -> Option<&LevelSummary> {
    s.sweep
        .iter()
        .find(|l| l.concurrency == 1 && measured(l) && output_tput(l).is_some())
}

fn prefill_speed(s: &RunSummary) -> Option<f64> {
    s.findings
        .iter()
        .find(|f| f.id == "prefill_scaling")?
        .values
        .get("tokens_per_s")
        .copied()
}

/// `1.32×`.
fn times(r: f64) -> String {
    format!("{}×", num(r))
}

/// What keeps run `b` from comparing like for like with `a`, and the caveats of the levels
/// compared, each named by its run.
fn caveats(
    a: &Labelled<'_>,
    b: &Labelled<'_>,
    levels: &[(&Labelled<'_>, &LevelSummary)],
) -> Vec<String> {
    let mut out = Vec::new();
    let (la, lb) = (a.1.config.lengths_label(), b.1.config.lengths_label());
    if la != lb {
        out.push(format!(
            "{} ran {lb} and {} {la}: not like for like",
            b.0, a.0
        ));
    }
    if a.1.simulated != b.1.simulated {
        let sim = if a.1.simulated { &a.0 } else { &b.0 };
        out.push(format!("{sim} measured the simulator, not a real server"));
    }
    // A level caveat both runs share is said once, for both.
    let own = |run: &Labelled<'_>| -> Vec<String> {
        let by_level = level_caveats(run.1);
        levels
            .iter()
            .filter(|(r, _)| std::ptr::eq(r.1, run.1))
            .filter_map(|(_, l)| by_level.get(&l.index))
            .flatten()
            .cloned()
            .collect()
    };
    let (ca, cb) = (own(a), own(b));
    for c in &cb {
        let c = if ca.contains(c) {
            format!("both: {c}")
        } else {
            format!("{}: {c}", b.0)
        };
        if !out.contains(&c) {
            out.push(c);
        }
    }
    for c in ca.iter().filter(|c| !cb.contains(c)) {
        let c = format!("{}: {c}", a.0);
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// A change in percent, `+0 %` for a change that rounds to nothing.
fn pct(change: f64) -> String {
    let r = change.round();
    format!("{:+.0} %", if r == 0.0 { 0.0 } else { r })
}

/// Every comparison the runs support, the first run the reference.
pub fn across(runs: &[Labelled<'_>]) -> Vec<Finding> {
    let Some(reference) = runs.first() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for run in &runs[1..] {
        out.extend(peak_against(reference, run));
        out.extend(single_against(reference, run));
        out.extend(prefill_against(reference, run));
    }
    if runs.len() > 2 {
        out.extend(best(runs));
    }
    out
}

fn peak_against(r: &Labelled<'_>, b: &Labelled<'_>) -> Option<Finding> {
    let (pr, pb) = (peak(r.1)?, peak(b.1)?);
    let (tr, tb) = (output_tput(pr)?, output_tput(pb)?);
    if tr <= 0.0 {
        return None;
    }
    let ratio = tb / tr;
    let mut text = format!(
        "{}: {} the peak of {} ({} against {} output tok/s, at C={} against C={})",
        b.0,
        times(ratio),
        r.0,
        num(tb),
        num(tr),
        pb.concurrency,
        pr.concurrency
    );
    let ttft = match (ttft_p50(pb), ttft_p50(pr)) {
        (Some(x), Some(y)) if y > 0.0 => {
            let _ = write!(
                text,
                ", at {} the TTFT p50 ({} against {} ms)",
                times(x / y),
                num(x),
                num(y)
            );
            Some(x / y)
        }
        _ => None,
    };
    text.push('.');
    let mut f = Finding::new("compare_peak", text, &[])
        .value("peak_ratio", Some(ratio))
        .value("ttft_p50_ratio", ttft)
        .value("output_throughput", Some(tb))
        .value("reference_output_throughput", Some(tr))
        .value("concurrency", Some(f64::from(pb.concurrency)))
        .value("reference_concurrency", Some(f64::from(pr.concurrency)));
    f.levels = vec![
        format!("{} {}", b.0, pb.label()),
        format!("{} {}", r.0, pr.label()),
    ];
    f.caveats = caveats(r, b, &[(b, pb), (r, pr)]);
    Some(f)
}

fn single_against(r: &Labelled<'_>, b: &Labelled<'_>) -> Option<Finding> {
    let (sr, sb) = (single(r.1)?, single(b.1)?);
    let (tr, tb) = (output_tput(sr)?, output_tput(sb)?);
    if tr <= 0.0 {
        return None;
    }
    let change = (tb / tr - 1.0) * 100.0;
    let mut f = Finding::new(
        "compare_single_stream",
        format!(
            "{}: single stream {} against {}'s {} output tok/s ({}).",
            b.0,
            num(tb),
            r.0,
            num(tr),
            pct(change)
        ),
        &[],
    )
    .value("change_pct", Some(change))
    .value("output_throughput", Some(tb))
    .value("reference_output_throughput", Some(tr));
    f.levels = vec![format!("{} C=1", b.0), format!("{} C=1", r.0)];
    f.caveats = caveats(r, b, &[(b, sb), (r, sr)]);
    Some(f)
}

fn prefill_against(r: &Labelled<'_>, b: &Labelled<'_>) -> Option<Finding> {
    let (pr, pb) = (prefill_speed(r.1)?, prefill_speed(b.1)?);
    if pr <= 0.0 {
        return None;
    }
    let change = (pb / pr - 1.0) * 100.0;
    let mut f = Finding::new(
        "compare_prefill",
        format!(
            "{}: prefill {} tok/s against {}'s {} ({}).",
            b.0,
            num(pb),
            r.0,
            num(pr),
            pct(change)
        ),
        &[],
    )
    .value("change_pct", Some(change))
    .value("tokens_per_s", Some(pb))
    .value("reference_tokens_per_s", Some(pr));
    f.caveats = caveats(r, b, &[]);
    Some(f)
}

/// With three runs or more: the one with the highest peak.
fn best(runs: &[Labelled<'_>]) -> Option<Finding> {
    let (run, l, t) = runs
        .iter()
        .filter_map(|r| {
            let l = peak(r.1)?;
            Some((r, l, output_tput(l)?))
        })
        .max_by(|a, b| a.2.total_cmp(&b.2))?;
    let mut f = Finding::new(
        "compare_best",
        format!(
            "Highest peak of the {} runs: {} ({} output tok/s at C={}).",
            runs.len(),
            run.0,
            num(t),
            l.concurrency
        ),
        &[],
    )
    .value("output_throughput", Some(t))
    .value("concurrency", Some(f64::from(l.concurrency)));
    f.levels = vec![format!("{} {}", run.0, l.label())];
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> RunSummary {
        let mut s = crate::tui::fixtures::finished_run().session.summary;
        s.findings = super::super::of(&s);
        s
    }

    #[test]
    fn different_plans_and_a_simulator_against_a_server_are_said() {
        let a = fixture();
        let mut b = fixture();
        b.config.output_len += 100;
        b.simulated = false;
        let across = across(&[("A".into(), &a), ("B".into(), &b)]);
        let peak = across.iter().find(|f| f.id == "compare_peak").unwrap();
        assert!((peak.values["peak_ratio"] - 1.0).abs() < 1e-12);
        let c = &peak.caveats;
        assert!(c.iter().any(|c| c.contains("not like for like")), "{c:?}");
        assert!(
            c.iter()
                .any(|c| c == "A measured the simulator, not a real server"),
            "{c:?}"
        );
        // The same level caveat on both runs is said once, for both.
        assert!(c.iter().any(|c| c.starts_with("both: ")), "{c:?}");
        assert!(!c.iter().any(|c| c.starts_with("A: ")), "{c:?}");
    }

    #[test]
    fn one_run_compares_with_nothing_and_three_name_the_best() {
        let a = fixture();
        assert!(across(&[("A".into(), &a)]).is_empty());
        let mut b = fixture();
        for l in &mut b.sweep {
            if let Some(st) = l.stats.as_mut() {
                st.scalars.output_throughput *= 2.0;
            }
        }
        b.findings = super::super::of(&b);
        let f = across(&[("A".into(), &a), ("B".into(), &b), ("C".into(), &a)]);
        let best = f.iter().find(|f| f.id == "compare_best").unwrap();
        assert!(best.text.contains("runs: B ("), "{}", best.text);
    }
}
