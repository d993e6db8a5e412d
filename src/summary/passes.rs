//! Passes of one plan: which levels are the same plan run again, and which of them every output
//! shows first (docs/outputs.md "Passes").
//!
//! `--content A,B` runs each sweep, rate and long-context level once per kind of prompt,
//! `--response-format` each twice (plain, then its constrained twin), `--thinking-budget A,B`
//! the whole plan once per budget, `--repeat N` the whole plan N times. A *pass* is one of each:
//! one content kind (or none), one response format (or none), one budget, one run. A *series* is a pass with its repeats together: the levels of one format and one budget,
//! one curve on a chart, where a level's runs are one point ([`points`]). The *headline* is the
//! plain series of the first content kind and the first budget: the findings are about it, and every chart and table shows
//! it first. This module is the one place that rule lives, so the findings, the PNG charts, the
//! dashboard and the tables cannot each pick passes their own way.

use std::collections::BTreeMap;

use super::{LevelSummary, RunSummary};
use crate::workload::shapes::Shape;

/// One pass of the plan, or (with `repeat: None`) a series: the levels run with one content
/// kind, one response format and one thinking budget (and, for a pass of a repeated plan, one
/// run number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pass {
    /// Its input/output pair (`--shapes`); `None` in a run without shapes. The first shape's
    /// series also holds the levels that run once (the ladder, chats, sessions, traces).
    pub shape: Option<Shape>,
    /// The run's first shape: what a level without one counts as.
    first_shape: Option<Shape>,
    /// The kind of its prompts: a `--content` kind's name or a `--categories` category
    /// ([`LevelSummary::content_name`]); `None` in a run without either. The first kind's
    /// series also holds the levels that run once with prompts of their own (chats, sessions,
    /// traces, the ladder of a dataset run).
    pub content: Option<String>,
    /// The run's first kind: what a level without one counts as.
    first_content: Option<String>,
    /// The constraint its requests carried (`json`, `json-schema`, `regex`); `None`: plain.
    pub response_format: Option<String>,
    /// The thinking budget its requests carried; `None` without `--thinking-budget`.
    pub thinking_budget: Option<u32>,
    /// Which run of `--repeat` (from 1); `None` for a series, which holds every run.
    pub repeat: Option<u32>,
    /// What tells it from the run's other passes, in the order of the level labels:
    /// `plain`, `json`, `code`, `think 16`, `repeat 2`, `json · think 64 · repeat 2`; empty in a run of
    /// one pass (a series of a run whose passes are only repeats is unnamed too).
    pub label: String,
    /// It is the headline series, or one of the headline's runs.
    pub headline: bool,
}

impl Pass {
    /// Whether level `l` belongs to this pass (to this series: any of its runs).
    pub fn holds(&self, l: &LevelSummary) -> bool {
        l.shape.or(self.first_shape) == self.shape
            && l.content_name().or(self.first_content.as_deref()) == self.content.as_deref()
            && l.response_format == self.response_format
            && l.thinking_budget == self.thinking_budget
            && (self.repeat.is_none() || l.repeat.map(|r| r.n) == self.repeat)
    }
}

/// What identifies a level's pass.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    shape: Option<Shape>,
    content: Option<String>,
    format: Option<String>,
    budget: Option<u32>,
    repeat: Option<u32>,
}

impl Key {
    fn of(l: &LevelSummary, (first_shape, first_content): (Option<Shape>, Option<&str>)) -> Self {
        Self {
            shape: l.shape.or(first_shape),
            content: l.content_name().or(first_content).map(str::to_string),
            format: l.response_format.clone(),
            budget: l.thinking_budget,
            repeat: l.repeat.map(|r| r.n),
        }
    }
}

/// The passes of a set of levels (a run's, or one table's), which of them vary, and which
/// series is the headline.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::struct_excessive_bools)]
pub struct Passes {
    /// Every pass, in plan order (by the index of its first level).
    all: Vec<Pass>,
    /// Every series: the headline first, then the others in plan order. Never empty.
    series: Vec<Pass>,
    shapes: bool,
    contents: bool,
    formats: bool,
    budgets: bool,
    repeats: bool,
    headline_format: Option<String>,
    headline_budget: Option<u32>,
    /// The kind of the first level that has one: the headline's, and what levels without a
    /// kind count as.
    first_content: Option<String>,
    /// The shape of the first level that has one.
    first_shape: Option<Shape>,
}

impl Passes {
    /// The passes of `levels`. The headline is the plain series (the constrained twins' format
    /// when no level is plain) of the first content kind and the first thinking budget (those
    /// of the level that ran first in the plan).
    pub fn of<'a>(levels: impl IntoIterator<Item = &'a LevelSummary>) -> Self {
        let levels: Vec<&LevelSummary> = levels.into_iter().collect();
        let first_content = levels
            .iter()
            .filter(|l| l.content_name().is_some())
            .min_by_key(|l| l.index)
            .and_then(|l| l.content_name())
            .map(str::to_string);
        let first_shape = levels
            .iter()
            .filter(|l| l.shape.is_some())
            .min_by_key(|l| l.index)
            .and_then(|l| l.shape);
        let mut first: BTreeMap<Key, u32> = BTreeMap::new();
        for l in levels {
            let at = first
                .entry(Key::of(l, (first_shape, first_content.as_deref())))
                .or_insert(l.index);
            *at = (*at).min(l.index);
        }
        let mut keys: Vec<(u32, Key)> = first.into_iter().map(|(k, i)| (i, k)).collect();
        keys.sort();
        let varies = |f: &dyn Fn(&Key) -> String| {
            let mut v: Vec<String> = keys.iter().map(|(_, k)| f(k)).collect();
            v.sort();
            v.dedup();
            v.len() > 1
        };
        let shapes = varies(&|k| format!("{:?}", k.shape));
        let contents = varies(&|k| format!("{:?}", k.content));
        let formats = varies(&|k| format!("{:?}", k.format));
        let budgets = varies(&|k| format!("{:?}", k.budget));
        let repeats = varies(&|k| format!("{:?}", k.repeat));
        let headline_format = if keys.iter().any(|(_, k)| k.format.is_none()) {
            None
        } else {
            keys.first().and_then(|(_, k)| k.format.clone())
        };
        let headline_budget = keys.first().and_then(|(_, k)| k.budget);
        let mut p = Self {
            all: Vec::new(),
            series: Vec::new(),
            shapes,
            contents,
            formats,
            budgets,
            repeats,
            headline_format,
            headline_budget,
            first_content,
            first_shape,
        };
        p.all = keys.iter().map(|(_, k)| p.pass(k)).collect();
        for (_, k) in &keys {
            let s = p.pass(&Key {
                repeat: None,
                ..k.clone()
            });
            if !p.series.contains(&s) {
                p.series.push(s);
            }
        }
        let headline = p.pass(&Key {
            shape: p.first_shape,
            content: p.first_content.clone(),
            format: p.headline_format.clone(),
            budget: p.headline_budget,
            repeat: None,
        });
        p.series.retain(|s| *s != headline);
        p.series.insert(0, headline);
        p
    }

    /// The pass of `k` (a series when `k.repeat` is `None`), labelled by what varies.
    fn pass(&self, k: &Key) -> Pass {
        let mut parts = Vec::new();
        if self.shapes {
            parts.push(k.shape.map_or_else(|| "-".into(), Shape::label));
        }
        if self.contents {
            parts.push(k.content.clone().unwrap_or_else(|| "random".into()));
        }
        if self.formats {
            parts.push(k.format.clone().unwrap_or_else(|| "plain".into()));
        }
        if self.budgets {
            parts.push(
                k.budget
                    .map_or_else(|| "no budget".into(), |b| format!("think {b}")),
            );
        }
        if self.repeats
            && let Some(n) = k.repeat
        {
            parts.push(format!("repeat {n}"));
        }
        Pass {
            shape: k.shape,
            first_shape: self.first_shape,
            content: k.content.clone(),
            first_content: self.first_content.clone(),
            response_format: k.format.clone(),
            thinking_budget: k.budget,
            repeat: k.repeat,
            label: parts.join(" · "),
            headline: k.shape == self.first_shape
                && k.content == self.first_content
                && k.format == self.headline_format
                && k.budget == self.headline_budget,
        }
    }

    /// The series every output shows first.
    pub fn headline(&self) -> &Pass {
        &self.series[0]
    }

    /// Every series, the headline first, then the others in plan order.
    pub fn series(&self) -> &[Pass] {
        &self.series
    }

    /// Whether the levels came in more than one pass.
    pub fn several(&self) -> bool {
        self.all.len() > 1
    }

    /// Whether the levels came in more than one series (passes other than repeats).
    pub fn several_series(&self) -> bool {
        self.series.len() > 1
    }

    /// The pass level `l` ran in.
    pub fn of_level(&self, l: &LevelSummary) -> Pass {
        self.pass(&Key::of(
            l,
            (self.first_shape, self.first_content.as_deref()),
        ))
    }

    /// The series level `l` is a point of.
    pub fn series_of(&self, l: &LevelSummary) -> Pass {
        self.pass(&Key {
            repeat: None,
            ..Key::of(l, (self.first_shape, self.first_content.as_deref()))
        })
    }

    /// `levels` as the tables list them: the headline series' first, then each other
    /// series', each in the order of `levels` (plan order).
    pub fn in_order<'a>(&self, levels: &'a [LevelSummary]) -> Vec<&'a LevelSummary> {
        self.sorted(levels.iter().collect())
    }

    /// [`Passes::in_order`] of levels already gathered (a level of none of the series last).
    pub fn sorted<'a>(&self, mut levels: Vec<&'a LevelSummary>) -> Vec<&'a LevelSummary> {
        levels.sort_by_key(|l| {
            self.series
                .iter()
                .position(|s| s.holds(l))
                .unwrap_or(usize::MAX)
        });
        levels
    }

    /// The label of level `l`'s pass where an output names it in a column of its own: empty
    /// in a run of one pass.
    pub fn column(&self, l: &LevelSummary) -> String {
        if self.several() {
            self.of_level(l).label
        } else {
            String::new()
        }
    }
}

impl std::ops::Deref for Passes {
    type Target = [Pass];

    /// Every pass, in plan order.
    fn deref(&self) -> &[Pass] {
        &self.all
    }
}

/// What follows a level's number where a table names it (` · json`, ` (think 16)`, ` #2`):
/// its pass, as its label ends.
pub fn suffix(l: &LevelSummary) -> String {
    crate::workload::levels::shape_suffix(l.shape)
        + &crate::workload::levels::content_suffix(l.content_name())
        + &crate::workload::format_suffix(l.response_format.as_deref())
        + &crate::workload::budget_suffix(l.thinking_budget)
        + &crate::workload::repeat_suffix(l.repeat)
}

/// A level's point on its series' curve: the values of its runs that have one.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub values: Vec<f64>,
    /// The indices of the runs the values are of.
    pub levels: Vec<u32>,
}

impl Point {
    /// The mean of the runs' values (one run: its value).
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.values.len().max(1) as f64
    }

    /// The 95 % interval across the runs, from two runs on ([`super::repeats::interval`]).
    pub fn interval(&self) -> Option<[f64; 2]> {
        super::repeats::interval(&self.values).map(|(_, ci)| ci)
    }
}

/// One point per level of `levels` that has a value `y`, at its `x`, in the order of their
/// first runs: a level's `--repeat` runs (its levels of one `repeat.first`) together.
pub fn points<'a>(
    levels: impl IntoIterator<Item = &'a LevelSummary>,
    x: impl Fn(&LevelSummary) -> f64,
    y: impl Fn(&LevelSummary) -> Option<f64>,
) -> Vec<Point> {
    let mut out: Vec<(u32, Point)> = Vec::new();
    for l in levels {
        let key = l.repeat.map_or(l.index, |r| r.first);
        let Some(v) = y(l) else { continue };
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, p)) => {
                p.values.push(v);
                p.levels.push(l.index);
            }
            None => out.push((
                key,
                Point {
                    x: x(l),
                    values: vec![v],
                    levels: vec![l.index],
                },
            )),
        }
    }
    out.into_iter().map(|(_, p)| p).collect()
}

impl RunSummary {
    /// The run's passes ([`Passes`]): every pass in plan order, its series, the headline.
    pub fn passes(&self) -> Passes {
        Passes::of(self.levels())
    }

    /// The run as if only pass (or series) `p` had been planned: its levels alone, and its
    /// thinking budget alone in the configuration.
    #[must_use]
    pub fn only(&self, p: &Pass) -> RunSummary {
        let mut s = self.keep(|l| p.holds(l));
        if let Some(b) = p.thinking_budget {
            s.config.thinking_budgets = vec![b];
        }
        s
    }

    /// The run as if only its headline series had been planned (what the findings are about).
    #[must_use]
    pub fn headline_run(&self) -> RunSummary {
        self.only(self.passes().headline())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::structured::ResponseFormat;
    use crate::config::RunConfig;
    use crate::workload::LevelKind;

    /// A summary of the plan `cfg` makes, every level waiting.
    fn planned(cfg: RunConfig) -> RunSummary {
        let levels = cfg.levels();
        let mut s = RunSummary::new(cfg, None);
        for spec in &levels {
            let l = LevelSummary::planned(spec);
            match spec.kind {
                LevelKind::Sweep => s.sweep.push(l),
                LevelKind::Rate => s.rates.push(l),
                LevelKind::LongContext => s.long_context.push(l),
                LevelKind::MultiTurn => s.multi_turn.push(l),
                LevelKind::Trace => s.traces.push(l),
                LevelKind::Sessions => s.sessions.push(l),
            }
        }
        s
    }

    fn cfg(edit: impl FnOnce(&mut RunConfig)) -> RunConfig {
        let mut c = RunConfig::demo();
        c.concurrency = vec![1, 8];
        c.long_context = vec![30_000];
        edit(&mut c);
        c
    }

    fn labels(p: &[Pass]) -> Vec<&str> {
        p.iter().map(|p| p.label.as_str()).collect()
    }

    /// The sweep's levels of series `p`, as `C=1 · json (think 64) #2`.
    fn sweep_of(s: &RunSummary, p: &Pass) -> Vec<String> {
        s.sweep
            .iter()
            .filter(|l| p.holds(l))
            .map(LevelSummary::label)
            .collect()
    }

    #[test]
    fn a_run_of_one_pass_has_one_unnamed_series() {
        let s = planned(cfg(|_| {}));
        let p = s.passes();
        assert_eq!(p.len(), 1);
        assert!(!p.several() && !p.several_series());
        assert_eq!(p.headline().label, "");
        assert!(p.headline().headline);
        assert_eq!(sweep_of(&s, p.headline()), ["C=1", "C=8"]);
        assert_eq!(s.headline_run(), s);
    }

    #[test]
    fn twins_are_two_series_the_plain_one_the_headline() {
        let s = planned(cfg(|c| c.response_format = Some(ResponseFormat::Json)));
        let p = s.passes();
        assert_eq!(labels(&p), ["plain", "json"]);
        assert_eq!(labels(p.series()), ["plain", "json"]);
        let (plain, json) = (&p.series()[0], &p.series()[1]);
        assert!(plain.headline && !json.headline);
        assert_eq!(plain.response_format, None);
        assert_eq!(json.response_format.as_deref(), Some("json"));
        // The twins interleave in the plan; each series holds its own, never the other's.
        assert_eq!(sweep_of(&s, plain), ["C=1", "C=8"]);
        assert_eq!(sweep_of(&s, json), ["C=1 · json", "C=8 · json"]);
        let order: Vec<String> = p.in_order(&s.sweep).iter().map(|l| l.label()).collect();
        assert_eq!(order, ["C=1", "C=8", "C=1 · json", "C=8 · json"]);
        // The headline run: the plain levels of every part, the twins' format still configured.
        let h = s.headline_run();
        assert!(h.levels().all(|l| l.response_format.is_none()));
        assert_eq!(h.long_context.len(), 1);
        assert_eq!(h.headline_run(), h);
        assert_eq!(h.passes().headline().label, "");
        assert_eq!(p.of_level(&s.sweep[1]).label, "json");
    }

    #[test]
    fn content_kinds_are_series_the_first_kind_the_headline() {
        use crate::workload::content::ContentKind::{Chat, Code};
        let s = planned(cfg(|c| {
            c.content = vec![Code, Chat];
            c.multi_turn = Some(crate::config::MultiTurn {
                turns: 2,
                conversations: 2,
                concurrency: 1,
                followup_len: 10,
            });
            c.response_format = Some(ResponseFormat::Json);
        }));
        let p = s.passes();
        assert_eq!(
            labels(&p),
            ["code · plain", "code · json", "chat · plain", "chat · json"]
        );
        let h = p.headline();
        assert_eq!(
            (h.content.as_deref(), h.response_format.as_ref()),
            (Some("code"), None)
        );
        // Each kind's twin follows it, level by level.
        let order: Vec<String> = s.sweep.iter().map(LevelSummary::label).collect();
        assert_eq!(
            order,
            [
                "C=1 · code",
                "C=1 · code · json",
                "C=1 · chat",
                "C=1 · chat · json",
                "C=8 · code",
                "C=8 · code · json",
                "C=8 · chat",
                "C=8 · chat · json"
            ]
        );
        assert_eq!(sweep_of(&s, &p.series()[2]), ["C=1 · chat", "C=8 · chat"]);
        // The chats run once, with prompts of their own: no kind, in the headline series.
        let chats = &s.multi_turn[0];
        assert_eq!(chats.content, None);
        assert!(h.holds(chats));
        assert_eq!(p.series().iter().filter(|x| x.holds(chats)).count(), 1);
        let hr = s.headline_run();
        assert_eq!(hr.multi_turn.len(), 1);
        assert!(hr.sweep.iter().all(|l| l.content == Some(Code)));
        assert_eq!(hr.long_context.len(), 1);
        // The constrained twin of each kind is the level before it.
        for l in s.sweep.iter().filter(|l| l.response_format.is_some()) {
            let before = s.sweep.iter().find(|b| b.index + 1 == l.index).unwrap();
            assert_eq!(
                (before.content, before.concurrency),
                (l.content, l.concurrency)
            );
        }
    }

    #[test]
    fn budgets_are_series_the_first_budget_the_headline() {
        let s = planned(cfg(|c| c.thinking_budgets = vec![64, 16]));
        let p = s.passes();
        // In the order given, not sorted: the first budget is the one given first.
        assert_eq!(labels(&p), ["think 64", "think 16"]);
        assert_eq!(p.headline().thinking_budget, Some(64));
        assert_eq!(
            sweep_of(&s, &p.series()[1]),
            ["C=1 (think 16)", "C=8 (think 16)"]
        );
        let h = s.headline_run();
        assert_eq!(h.config.thinking_budgets, [64]);
        assert!(h.levels().all(|l| l.thinking_budget == Some(64)));
        // As the findings had it: the first budget's plan.
        assert_eq!(h, s.only_budget(64));
    }

    #[test]
    fn repeats_are_passes_of_one_series() {
        let s = planned(cfg(|c| c.repeat = 3));
        let p = s.passes();
        assert_eq!(labels(&p), ["repeat 1", "repeat 2", "repeat 3"]);
        assert!(p.iter().all(|p| p.headline));
        // One series, every run of every level in it: a level's runs are one point.
        assert_eq!(labels(p.series()), [""]);
        assert!(p.several() && !p.several_series());
        assert_eq!(s.headline_run(), s);
        assert_eq!(
            sweep_of(&s, &p[1]),
            ["C=1 #2", "C=8 #2"],
            "a pass of a repeated plan is one run"
        );
        let ys = |l: &LevelSummary| Some(f64::from(l.concurrency) + f64::from(l.index % 3));
        let pts = points(&s.sweep, |l| f64::from(l.concurrency), ys);
        assert_eq!(pts.len(), 2);
        assert_eq!(pts[0].levels.len(), 3);
        assert!((pts[0].x - 1.0).abs() < 1e-12);
    }

    #[test]
    fn twins_budgets_and_repeats_together() {
        let s = planned(cfg(|c| {
            c.response_format = Some(ResponseFormat::Json);
            c.thinking_budgets = vec![16, 64];
            c.repeat = 2;
        }));
        let p = s.passes();
        assert_eq!(p.len(), 8);
        assert_eq!(p[0].label, "plain · think 16 · repeat 1");
        assert_eq!(p[1].label, "json · think 16 · repeat 1");
        assert_eq!(p[7].label, "json · think 64 · repeat 2");
        assert_eq!(
            labels(p.series()),
            [
                "plain · think 16",
                "json · think 16",
                "plain · think 64",
                "json · think 64"
            ]
        );
        let h = p.headline();
        assert_eq!(
            (h.response_format.as_ref(), h.thinking_budget),
            (None, Some(16))
        );
        assert_eq!(
            sweep_of(&s, h),
            [
                "C=1 (think 16) #1",
                "C=8 (think 16) #1",
                "C=1 (think 16) #2",
                "C=8 (think 16) #2"
            ]
        );
        // Every level is in exactly one series and one pass.
        for l in s.levels() {
            assert_eq!(p.series().iter().filter(|x| x.holds(l)).count(), 1);
            assert_eq!(p.iter().filter(|x| x.holds(l)).count(), 1);
            assert!(p.series_of(l).holds(l) && p.of_level(l).holds(l));
        }
        let order = p.in_order(&s.sweep);
        assert_eq!(order.len(), s.sweep.len());
        assert!(order[..4].iter().all(|l| h.holds(l)));
        // The headline run: the findings' levels, as only_plain then only_budget gave them.
        assert_eq!(s.headline_run(), s.only_plain().only_budget(16));
    }

    #[test]
    fn a_points_runs_give_its_mean_and_interval() {
        let s = planned(cfg(|c| c.repeat = 3));
        // C=1's runs: 10, 11, 12; C=8's: 80 each.
        let y = |l: &LevelSummary| {
            Some(match l.concurrency {
                1 => 10.0 + f64::from(l.repeat.map_or(0, |r| r.n - 1)),
                _ => 80.0,
            })
        };
        let pts = points(&s.sweep, |l| f64::from(l.concurrency), y);
        assert_eq!(pts[0].values, [10.0, 11.0, 12.0]);
        assert!((pts[0].mean() - 11.0).abs() < 1e-12);
        let half = 4.303 / 3f64.sqrt();
        let ci = pts[0].interval().unwrap();
        assert!((ci[0] - (11.0 - half)).abs() < 1e-9 && (ci[1] - (11.0 + half)).abs() < 1e-9);
        // A level with one run: its value, no interval; a run without a value: no point.
        let first = points(
            s.sweep
                .iter()
                .filter(|l| l.repeat.is_some_and(|r| r.n == 1)),
            |l| f64::from(l.concurrency),
            y,
        );
        assert!((first[0].mean() - 10.0).abs() < 1e-12);
        assert!(first[0].interval().is_none());
        assert!(points(&s.sweep, |_| 0.0, |_| None).is_empty());
    }
}
