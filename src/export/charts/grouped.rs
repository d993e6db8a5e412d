//! A level's `--repeat` runs as one point: the mean of their values, with the 95 % interval
//! across them as an error bar (one run: its value, no bar), as every output draws a series
//! (docs/outputs.md "Passes").

use super::panel::Line;
use crate::summary::LevelSummary;

/// Each level's values, its runs together, at its `x`, in plan order (a series' points:
/// [`crate::summary::passes::points`]).
pub(super) fn by_level(
    levels: &[LevelSummary],
    x: impl Fn(&LevelSummary) -> f64,
    f: impl Fn(&LevelSummary) -> Option<f64>,
) -> Vec<(f64, Vec<f64>)> {
    crate::summary::passes::points(levels, x, f)
        .into_iter()
        .map(|p| (p.x, p.values))
        .collect()
}

/// The mean of each level's values.
pub(super) fn means(groups: &[(f64, Vec<f64>)]) -> Vec<(f64, f64)> {
    groups
        .iter()
        .map(|(x, v)| (*x, v.iter().sum::<f64>() / v.len() as f64))
        .collect()
}

/// The 95 % interval of each level with two runs or more.
pub(super) fn errors(groups: &[(f64, Vec<f64>)]) -> Vec<(f64, f64, f64)> {
    groups
        .iter()
        .filter_map(|(x, v)| {
            let (_, [lo, hi]) = crate::summary::repeats::interval(v)?;
            Some((*x, lo, hi))
        })
        .collect()
}

/// Sets each line's error bars from its run's levels (lines and runs in the same order).
pub(super) fn with_errors<'a>(
    mut lines: Vec<Line>,
    levels: impl Iterator<Item = &'a [LevelSummary]>,
    x: impl Fn(&LevelSummary) -> f64 + Copy,
    f: impl Fn(&LevelSummary) -> Option<f64> + Copy,
) -> Vec<Line> {
    for (line, l) in lines.iter_mut().zip(levels) {
        line.errors = errors(&by_level(l, x, f));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::levels::repeats as repeat_plan;
    use crate::workload::{LevelKind, LevelSpec, Repeat};

    #[test]
    fn a_levels_runs_are_one_point_with_their_interval() {
        let spec = |index, c| LevelSpec::new(index, LevelKind::Sweep, c, (100, 10), 4);
        let plan = repeat_plan(vec![spec(0, 1), spec(1, 8)], 3);
        assert_eq!(
            plan[3].repeat,
            Some(Repeat {
                n: 2,
                of: 3,
                first: 1
            })
        );
        let levels: Vec<LevelSummary> = plan.iter().map(LevelSummary::planned).collect();
        // C=1 runs give 10, 11, 12; C=8 runs 80, 80, 80.
        let value = |l: &LevelSummary| {
            Some(match l.concurrency {
                1 => 10.0 + f64::from(l.index / 2),
                _ => 80.0,
            })
        };
        let g = by_level(&levels, |l| f64::from(l.concurrency), value);
        assert_eq!(means(&g), [(1.0, 11.0), (8.0, 80.0)]);
        let e = errors(&g);
        // 11 ± 4.303 · 1 / √3; no spread at C=8.
        let half = 4.303 / 3f64.sqrt();
        assert!((e[0].1 - (11.0 - half)).abs() < 1e-9 && (e[0].2 - (11.0 + half)).abs() < 1e-9);
        assert_eq!((e[1].1, e[1].2), (80.0, 80.0));
        // Without repeats: one value a level, no bars.
        let single: Vec<LevelSummary> = [spec(0, 1), spec(1, 8)]
            .iter()
            .map(LevelSummary::planned)
            .collect();
        let g = by_level(&single, |l| f64::from(l.concurrency), value);
        assert_eq!(means(&g), [(1.0, 10.0), (8.0, 80.0)]);
        assert!(errors(&g).is_empty());
    }
}
