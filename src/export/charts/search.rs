//! `slo_search.png`: the SLO capacity search, probe by probe.

use super::figure::{Figure, figure};
use super::panel::{Line, Panel, XKind, fmt_num};
use super::{ChartRun, run_lines};
use crate::summary::RunSummary;
use crate::workload::search::SearchTarget;

/// A judged search probe: its rate (or concurrency), its check, its goodput.
type Judged = (f64, crate::metrics::SloCheck, Option<f64>);

/// The judged probes of a search, in rate (or concurrency) order (probes run in bisection
/// order).
fn judged(s: &crate::workload::search::SearchSummary) -> Vec<Judged> {
    let mut v: Vec<Judged> = s
        .probes
        .iter()
        .filter(|p| !p.interrupted)
        .filter_map(|p| Some((p.at.value(), p.check.clone()?, p.goodput)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// `(rate or concurrency, f(probe))` of a run's judged search probes.
fn probe_points(s: &RunSummary, f: impl Fn(&Judged) -> Option<f64>) -> Vec<(f64, f64)> {
    s.search
        .as_ref()
        .map(|s| {
            judged(s)
                .iter()
                .filter_map(|j| Some((j.0, f(j)?)))
                .collect()
        })
        .unwrap_or_default()
}

/// The answer and the lowest failing rate (or concurrency), where the search found them.
fn answer_marks(s: &crate::workload::search::SearchSummary) -> Vec<(f64, String)> {
    let (pass, fail) = match s.target {
        SearchTarget::Rate => (s.pass_rate, s.fail_rate),
        SearchTarget::Concurrency => (
            s.pass_concurrency.map(f64::from),
            s.fail_concurrency.map(f64::from),
        ),
    };
    let mut marks = Vec::new();
    if let (Some(p), Some(a)) = (pass, s.answer()) {
        marks.push((p, format!("answer {a}")));
    }
    if let Some(f) = fail {
        marks.push((f, format!("fails at {}", crate::fmt::fmt_rate(f))));
    }
    marks
}

/// The SLO search: goodput against the offered rate beside the line where every request is
/// good (the concurrency search: goodput against the concurrency), and each SLO metric's
/// percentile (with its 95 % interval) against its limit; the answer and the lowest failing
/// rate (or concurrency) marked on every panel.
pub(super) fn slo_search_figure(runs: &[ChartRun<'_>]) -> Option<Figure> {
    let first = runs.iter().find_map(|r| r.summary.search.as_ref())?;
    let by_rate = first.target == SearchTarget::Rate;
    let (x, against) = if by_rate {
        (XKind::Rate, "offered rate")
    } else {
        (XKind::Concurrency, "concurrency")
    };
    let marks = answer_marks(first);
    let empty = "no search probe finished in this run".to_string();
    let mut good = run_lines(runs, "goodput", |s| probe_points(s, |j| j.2), false, 0);
    // Every request good is y = x only where x is the offered rate.
    let all_good: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| r.summary.search.as_ref())
        .flat_map(|s| judged(s).into_iter().map(|j| (j.0, j.0)))
        .collect();
    if by_rate && good.iter().any(|l| !l.points.is_empty()) {
        good.push(Line::reference("all requests good (y = x)", all_good));
    }
    let mut panels = vec![Panel {
        title: format!("Goodput vs {against}"),
        x,
        y_desc: "requests/s meeting every per-request objective".into(),
        y_log_ok: false,
        y_top: None,
        lines: good,
        marks: marks.clone(),
        limits: vec![],
        events: vec![],
        empty: empty.clone(),
    }];
    let pct = crate::metrics::slo::fmt_pct(first.slo.percentile);
    for (metric, limit) in first.slo.limits() {
        let m = |j: &Judged| j.1.metrics.iter().find(|c| c.metric == metric).cloned();
        let mut lines = run_lines(
            runs,
            &format!("p{pct}"),
            |s| probe_points(s, |j| m(j).and_then(|c| c.value_ms)),
            false,
            0,
        );
        lines.extend(run_lines(
            runs,
            "95 % interval",
            |s| probe_points(s, |j| m(j).and_then(|c| c.ci_low_ms)),
            true,
            2,
        ));
        lines.extend(run_lines(
            runs,
            "",
            |s| probe_points(s, |j| m(j).and_then(|c| c.ci_high_ms)),
            true,
            2,
        ));
        panels.push(Panel {
            title: format!("{} p{pct} vs {against}", metric.to_uppercase()),
            x,
            y_desc: "ms".into(),
            y_log_ok: true,
            y_top: None,
            lines,
            marks: marks.clone(),
            limits: vec![(limit, format!("SLO limit {} ms", fmt_num(limit)))],
            events: vec![],
            empty: empty.clone(),
        });
    }
    let mut footer = vec![format!(
        "{}. Each point is one search probe ({}); the percentile counts failed requests as misses. Dashed: the distribution-free 95 % interval of the percentile from order statistics (missing where too few requests lie above it).",
        first.headline(),
        match (by_rate, first.sessions) {
            (true, _) => "an open-loop level",
            (false, false) => "a closed-loop level",
            (false, true) => "a session level of that many users",
        }
    )];
    let unsure: Vec<String> = first.uncertain().map(|p| p.at.describe()).collect();
    if !unsure.is_empty() {
        footer.push(format!(
            "Uncertain verdicts (interval straddles a limit) at {}.",
            unsure.join(", ")
        ));
    }
    let cols = if panels.len() <= 2 {
        2
    } else {
        2.min(panels.len())
    };
    Some(figure(
        &format!("SLO capacity search: {}", first.slo.describe()),
        runs,
        panels,
        cols,
        footer,
    ))
}
