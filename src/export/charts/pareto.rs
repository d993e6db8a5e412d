//! `pareto.png` of a tune: every configuration at every load it was measured at, per-user
//! output tokens/s against aggregate output tokens/s, one line per configuration (its loads
//! joined), and the Pareto front across all of them.

use super::ChartRun;
use super::figure::{Figure, figure_of};
use super::panel::{Line, Panel, XKind, color};
use super::title::Settings;
use crate::summary::tune::TuneSummary;
use crate::summary::tune::pareto::front;

/// The tune's Pareto chart (none without a run); `runs` are the configurations' runs (for the
/// title band: model, engine, SIMULATED).
pub fn pareto_figure(runs: &[ChartRun<'_>], tune: &TuneSummary) -> Option<Figure> {
    if runs.is_empty() {
        return None;
    }
    let mut lines: Vec<Line> = tune
        .configs
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.points.is_empty())
        .map(|(i, c)| {
            let mut points: Vec<(f64, f64)> = c
                .points
                .iter()
                .map(|p| (p.per_user_tokens_per_s, p.aggregate_tokens_per_s))
                .collect();
            // From the lightest load to the heaviest: the configuration's trade, point by point.
            points.sort_by(|a, b| a.1.total_cmp(&b.1));
            Line {
                name: format!("{} · {}", c.label, c.capacity_text()),
                points,
                color: color(i),
                dashed: false,
                errors: Vec::new(),
            }
        })
        .collect();
    let f: Vec<(f64, f64)> = front(&tune.pareto)
        .iter()
        .map(|p| (p.per_user_tokens_per_s, p.aggregate_tokens_per_s))
        .collect();
    if f.len() > 1 {
        lines.push(Line::reference("Pareto front", f));
    }
    let panel = Panel {
        title: "Aggregate vs per-user speed, each configuration at each load".into(),
        x: XKind::PerUser,
        y_desc: "aggregate output tokens/s".into(),
        y_log_ok: false,
        y_top: None,
        lines,
        marks: vec![],
        limits: vec![],
        events: vec![],
        empty: "no configuration finished a level".into(),
    };
    let on_front: Vec<String> = front(&tune.pareto)
        .iter()
        .rev()
        .map(|p| {
            let label = tune.configs.get(p.config).map_or("?", |c| c.label.as_str());
            format!("{label} at {}", p.level)
        })
        .collect();
    let footer = vec![
        tune.headline(),
        format!(
            "On the front (fastest per user first): {}",
            on_front.join("; ")
        ),
    ];
    Some(figure_of(
        (
            "servetop tune: the Pareto front",
            Settings::Text(&format!("SLO {}", tune.slo)),
        ),
        runs,
        vec![panel],
        1,
        footer,
    ))
}
