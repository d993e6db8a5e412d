//! `lora.png`: each LoRA adapter's TTFT and output throughput over the sweep (or, in a run
//! without one, over the rate levels), a line an adapter.

use super::ChartRun;
use super::figure::{Figure, figure};
use super::panel::{Line, Panel, XKind, color};
use crate::metrics::lora::LoraStats;
use crate::summary::{LevelSummary, RunSummary};

/// The levels the chart draws, and what x is: the sweep at its concurrency, else the rate
/// levels at their rate.
fn levels_of(s: &RunSummary) -> (&[LevelSummary], XKind) {
    if s.sweep.is_empty() {
        (&s.rates, XKind::Rate)
    } else {
        (&s.sweep, XKind::Concurrency)
    }
}

/// Every adapter named at any of `runs`' drawn levels, in name order.
fn adapters(runs: &[ChartRun<'_>]) -> Vec<String> {
    let mut names: Vec<String> = runs
        .iter()
        .flat_map(|r| levels_of(r.summary).0)
        .filter_map(|l| l.stats.as_ref())
        .flat_map(|st| st.scalars.lora.keys().cloned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A line per run and adapter of `f` over the drawn levels.
fn lines(runs: &[ChartRun<'_>], names: &[String], f: fn(&LoraStats) -> Option<f64>) -> Vec<Line> {
    let mut out = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let (levels, x) = levels_of(r.summary);
        for (k, name) in names.iter().enumerate() {
            let mut points: Vec<(f64, f64)> = levels
                .iter()
                .filter_map(|l| {
                    let at = match x {
                        XKind::Rate => l.request_rate().filter(|r| r.is_finite())?,
                        _ => f64::from(l.concurrency),
                    };
                    Some((at, f(l.stats.as_ref()?.scalars.lora.get(name)?)?))
                })
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            out.push(Line {
                name: if runs.len() > 1 {
                    format!("{} {name}", r.label)
                } else {
                    name.clone()
                },
                points,
                color: color(k),
                dashed: i > 0,
                errors: Vec::new(),
            });
        }
    }
    out
}

pub(super) fn lora_figure(runs: &[ChartRun<'_>]) -> Figure {
    let names = adapters(runs);
    let x = levels_of(runs[0].summary).1;
    let empty = "no level with LoRA adapters finished in this run".to_string();
    let per = if x == XKind::Rate {
        "by offered rate"
    } else {
        "by concurrency"
    };
    let panel = |title: String, y_desc: &str, lines: Vec<Line>| Panel {
        title,
        x,
        y_desc: y_desc.into(),
        y_log_ok: true,
        y_top: None,
        lines,
        marks: vec![],
        limits: vec![],
        events: vec![],
        empty: empty.clone(),
    };
    let panels = [
        panel(
            format!("TTFT p50 per adapter, {per}"),
            "ms",
            lines(runs, &names, |a| a.median_ttft_ms),
        ),
        panel(
            format!("Output tokens/s per adapter, {per}"),
            "tok/s",
            lines(runs, &names, |a| Some(a.output_throughput)),
        ),
    ];
    let s = runs[0].summary;
    let footer = vec![format!(
        "Adapters {} (--lora-dist {}); an adapter's tokens/s are its own output over the level's whole window (the adapters' add up to the level's).",
        s.config.lora_modules.join(", "),
        s.config.lora_dist.label()
    )];
    figure("LoRA adapters", runs, panels.into(), 2, footer)
}
