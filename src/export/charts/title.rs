//! A figure's title band below its title: the model, engine, date and host of the runs drawn,
//! and each run's plan as the figure reads it (one plan when the runs share it), so runs of
//! different plans overlaid never pass for one another.

use std::fmt::Write as _;

use super::ChartRun;
use crate::summary::RunSummary;

/// What a figure's title band says of the runs' settings.
#[derive(Clone, Copy)]
pub(super) enum Settings<'a> {
    /// Each run's plan as this figure reads it (`None`: the run has nothing in the figure):
    /// one plan when the runs share it, else each run's, named ([`plans`]).
    Plan(fn(&RunSummary) -> Option<String>),
    /// Said as it is (a tune's SLO).
    Text(&'a str),
}

/// Each run's plan as `plan` reads it: the plan alone when the runs share it (or there is one
/// run), else `A: plan; B: plan`, in run order, runs of one plan together, a run drawn as
/// several series (`A · plain`, `A · json`) named once; a run with no plan for this figure is
/// left out.
pub(super) fn plans(runs: &[ChartRun<'_>], plan: fn(&RunSummary) -> Option<String>) -> String {
    let mut by_plan: Vec<(String, Vec<&ChartRun<'_>>)> = Vec::new();
    for r in runs {
        let Some(p) = plan(r.summary) else {
            continue;
        };
        match by_plan.iter_mut().find(|(q, _)| *q == p) {
            Some((_, rs)) => rs.push(r),
            None => by_plan.push((p, vec![r])),
        }
    }
    if by_plan.len() <= 1 {
        return by_plan.pop().map(|(p, _)| p).unwrap_or_default();
    }
    let each: Vec<String> = by_plan
        .iter()
        .map(|(p, rs)| format!("{}: {p}", run_names(rs)))
        .collect();
    each.join("; ")
}

/// Whether two of the runs drawn are series of one run (docs/outputs.md "Passes"): the same
/// start, host and configuration but for the thinking budget a series keeps (a start is to
/// the second: two short runs can share one).
fn one_run(a: &RunSummary, b: &RunSummary) -> bool {
    let plan = |s: &RunSummary| crate::config::RunConfig {
        thinking_budgets: Vec::new(),
        ..s.config.clone()
    };
    a.started_at == b.started_at && a.host == b.host && plan(a) == plan(b)
}

/// The names of `runs`, a run drawn as several series once.
fn run_names(runs: &[&ChartRun<'_>]) -> String {
    let mut groups: Vec<(&RunSummary, Vec<&str>)> = Vec::new();
    for r in runs {
        match groups.last_mut() {
            Some((g, labels)) if one_run(g, r.summary) => labels.push(&r.label),
            _ => groups.push((r.summary, vec![&r.label])),
        }
    }
    let names: Vec<String> = groups.iter().map(|(_, l)| shared_name(l)).collect();
    names.join(", ")
}

/// What the labels of one run's series share (`A` of `A · plain` and `A · json`); the labels
/// joined when they share nothing.
fn shared_name(labels: &[&str]) -> String {
    let [first, rest @ ..] = labels else {
        return String::new();
    };
    if rest.is_empty() {
        return (*first).to_string();
    }
    first
        .match_indices(" · ")
        .map(|(i, _)| &first[..i])
        .filter(|p| {
            rest.iter()
                .all(|l| l.strip_prefix(p).is_some_and(|t| t.starts_with(" · ")))
        })
        .last()
        .map_or_else(|| labels.join(", "), str::to_string)
}

/// `model · engine · date · settings`, and SIMULATED when it was; the model, engine, date and
/// host the first run's, the settings each run's ([`Settings`]).
pub(super) fn subtitle(runs: &[ChartRun<'_>], settings: Settings<'_>) -> String {
    let s = runs[0].summary;
    let (engine, model) = s
        .server
        .as_ref()
        .map_or(("?", "?"), |v| (v.engine.name(), v.model.as_str()));
    let date = s.started_at.get(..10).unwrap_or(&s.started_at);
    // First, so a long subtitle cut at the chart's edge never cuts it.
    let sim = if runs.iter().any(|r| r.summary.simulated) {
        "SIMULATED SERVER (servetop-sim), not real hardware · "
    } else {
        ""
    };
    // A run of several passes comes as one `ChartRun` per series (docs/outputs.md "Passes").
    let mut distinct: Vec<&RunSummary> = Vec::new();
    for r in runs {
        if !distinct.iter().any(|d| one_run(d, r.summary)) {
            distinct.push(r.summary);
        }
    }
    let mut more = if distinct.len() > 1 {
        format!(" · {} runs overlaid", distinct.len())
    } else {
        String::new()
    };
    if runs.len() > distinct.len() {
        more.push_str(" · a line per pass");
    }
    if s.config.repeat > 1 {
        let _ = write!(
            more,
            " · {} runs a level: means, 95 % bars",
            s.config.repeat
        );
    }
    let settings = match settings {
        Settings::Plan(plan) => plans(runs, plan),
        Settings::Text(t) => t.to_string(),
    };
    format!(
        "{sim}{model} · {engine} · {date} · {settings} · host {}{more}",
        s.host
    )
}

#[cfg(test)]
mod tests {
    use super::super::{as_runs, per_series};
    use super::*;

    /// The subtitle of `runs` drawn as `render_all` draws them (split into series).
    fn of(runs: &[ChartRun<'_>]) -> String {
        let split: Vec<_> = runs
            .iter()
            .flat_map(|r| per_series(r, runs.len() > 1))
            .collect();
        subtitle(
            &as_runs(&split),
            Settings::Plan(|s| Some(s.config.lengths_label())),
        )
    }

    fn run<'a>(label: &str, s: &'a RunSummary) -> ChartRun<'a> {
        ChartRun {
            label: label.into(),
            summary: s,
            telemetry: &[],
        }
    }

    /// A run's series (twins, thinking budgets) are one run with a line per pass; two runs
    /// that started within one second are two; each run's plan is named when they differ,
    /// a run of several series once.
    #[test]
    fn series_are_one_run_and_each_runs_plan_is_named() {
        let twins = crate::tui::fixtures::finished_twins().session.summary;
        let budgets = crate::tui::fixtures::mid_budgets().session.summary;
        for s in [&twins, &budgets] {
            let sub = of(&[run("r", s)]);
            assert!(sub.contains(" · a line per pass"), "{sub}");
            assert!(!sub.contains("overlaid"), "{sub}");
            assert!(sub.contains(&s.config.lengths_label()), "{sub}");
        }
        let a = crate::tui::fixtures::finished_run().session.summary;
        let mut b = a.clone();
        b.config.input_len = 2000;
        let sub = of(&[run("A", &twins), run("B", &b)]);
        assert!(
            sub.contains(" · 2 runs overlaid · a line per pass"),
            "{sub}"
        );
        assert!(
            sub.contains(&format!(
                "A: {}; B: {}",
                twins.config.lengths_label(),
                b.config.lengths_label()
            )),
            "{sub}"
        );
        // The same start to the second, another plan: two runs, each named.
        b.started_at.clone_from(&a.started_at);
        let sub = of(&[run("A", &a), run("B", &b)]);
        assert!(sub.contains(" · 2 runs overlaid"), "{sub}");
        assert!(!sub.contains("a line per pass"), "{sub}");
        // One plan: said once, unnamed.
        let sub = of(&[run("A", &a), run("C", &a)]);
        assert!(
            sub.contains(&format!(" · {} · ", a.config.lengths_label())),
            "{sub}"
        );
        assert!(!sub.contains("A:"), "{sub}");
    }
}
