//! `tradeoff.png`: the serving trade-off of a concurrency sweep, as the industry draws it —
//! output tokens/s per GPU against tokens/s per user (a request's median decode speed), a
//! point a level joined in load order, and the Pareto front across every line drawn.

use super::figure::{Figure, figure};
use std::fmt::Write as _;

use super::panel::{Line, Panel, XKind, color};
use super::{ChartRun, NO_SWEEP};
use crate::summary::{LevelStatus, LevelSummary};

/// A level's point: per-user decode speed (its requests' median) and output tokens/s over
/// `gpus`.
fn point(l: &LevelSummary, gpus: f64) -> Option<(f64, f64)> {
    if l.status != LevelStatus::Done {
        return None;
    }
    let s = l.stats.as_ref()?;
    let user = s.dists.decode_tokens_per_s.as_ref()?.p50;
    let out = s.scalars.output_throughput / gpus;
    (user.is_finite() && out.is_finite()).then_some((user, out))
}

/// The points no other point beats on both speeds, by per-user speed.
fn front(points: &[(f64, f64, String)]) -> Vec<&(f64, f64, String)> {
    let beats = |q: &(f64, f64, String), p: &(f64, f64, String)| {
        q.0 >= p.0 && q.1 >= p.1 && (q.0 > p.0 || q.1 > p.1)
    };
    let mut f: Vec<&(f64, f64, String)> = points
        .iter()
        .filter(|p| !points.iter().any(|q| beats(q, p)))
        .collect();
    f.sort_by(|a, b| a.0.total_cmp(&b.0));
    f
}

/// `tradeoff.png` (a run with sweep levels): per GPU when every run drawn has a GPU count
/// (seen, or `--gpus`), else the aggregate, said so.
pub(super) fn tradeoff_figure(runs: &[ChartRun<'_>]) -> Figure {
    let counts: Vec<Option<(u32, bool)>> = runs.iter().map(|r| r.summary.gpu_count()).collect();
    let per_gpu = counts.iter().all(Option::is_some);
    let mut all: Vec<(f64, f64, String)> = Vec::new();
    let mut lines: Vec<Line> = Vec::new();
    for (i, (r, n)) in runs.iter().zip(&counts).enumerate() {
        let gpus = if per_gpu {
            n.map_or(1.0, |(n, _)| f64::from(n))
        } else {
            1.0
        };
        let mut levels: Vec<&LevelSummary> = r.summary.sweep.iter().collect();
        levels.sort_by_key(|l| l.concurrency);
        let pts: Vec<(f64, f64, String)> = levels
            .iter()
            .filter_map(|l| point(l, gpus).map(|(x, y)| (x, y, l.label())))
            .collect();
        lines.push(Line {
            name: if runs.len() > 1 {
                r.label.clone()
            } else {
                "sweep levels".into()
            },
            points: pts.iter().map(|p| (p.0, p.1)).collect(),
            color: color(i),
            dashed: false,
            errors: Vec::new(),
        });
        all.extend(pts.into_iter().map(|(x, y, l)| {
            let name = if runs.len() > 1 {
                format!("{} {l}", r.label)
            } else {
                l
            };
            (x, y, name)
        }));
    }
    let f = front(&all);
    if f.len() > 1 {
        lines.push(Line::reference(
            "Pareto front",
            f.iter().map(|p| (p.0, p.1)).collect(),
        ));
    }
    let mut footer = vec![basis(runs, &counts, per_gpu)];
    if !f.is_empty() {
        let mut on = String::from("On the front (fastest per user first): ");
        let unit = if per_gpu { " per GPU" } else { "" };
        for (i, p) in f.iter().rev().enumerate() {
            let _ = write!(
                on,
                "{}{} ({} tok/s per user, {} tok/s{unit})",
                if i > 0 { "; " } else { "" },
                p.2,
                crate::fmt::num(Some(p.0)),
                crate::fmt::num(Some(p.1))
            );
        }
        footer.push(on);
    }
    let panel = Panel {
        title: if per_gpu {
            "Output tokens/s per GPU against tokens/s per user".into()
        } else {
            "Output tokens/s (all GPUs) against tokens/s per user".into()
        },
        x: XKind::PerUser,
        y_desc: if per_gpu {
            "output tok/s per GPU".into()
        } else {
            "output tok/s (all GPUs)".into()
        },
        y_log_ok: false,
        y_top: None,
        lines,
        marks: vec![],
        limits: vec![],
        events: vec![],
        empty: NO_SWEEP.to_string(),
    };
    figure(
        "Serving trade-off: throughput per GPU vs speed per user",
        runs,
        vec![panel],
        1,
        footer,
    )
}

/// What the y axis divides by, in a sentence.
fn basis(runs: &[ChartRun<'_>], counts: &[Option<(u32, bool)>], per_gpu: bool) -> String {
    if !per_gpu {
        return "Not per GPU: servetop saw no GPU and no --gpus N was given (on run or report), so the y axis is the whole deployment's output tokens/s.".into();
    }
    let each: Vec<String> = runs
        .iter()
        .zip(counts)
        .filter_map(|(r, c)| {
            let (n, seen) = (*c)?;
            let how = if seen {
                "seen by servetop"
            } else {
                "from --gpus"
            };
            Some(if runs.len() > 1 {
                format!("{}: {n} GPUs {how}", r.label)
            } else {
                format!("{n} GPUs {how}")
            })
        })
        .collect();
    format!(
        "Per GPU: the output tokens/s of each level over {}. Per user: the median of the level's requests' decode speeds.",
        each.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The front is the points no other beats on both speeds, fastest per user last; a point
    /// beaten on one speed and tied on the other is off it.
    #[test]
    fn the_front_holds_exactly_the_points_nothing_beats() {
        let p = |x: f64, y: f64, n: &str| (x, y, n.to_string());
        let pts = vec![
            p(70.0, 30.0, "C=1"),
            p(50.0, 60.0, "C=4"),
            p(45.0, 55.0, "C=6"),
            p(30.0, 100.0, "C=8"),
            p(30.0, 90.0, "C=12"),
            p(6.0, 150.0, "C=64"),
            p(5.0, 140.0, "C=100"),
        ];
        let names: Vec<&str> = front(&pts).iter().map(|p| p.2.as_str()).collect();
        assert_eq!(names, ["C=64", "C=8", "C=4", "C=1"]);
    }

    /// Per GPU divides each level's output tokens/s by the GPUs servetop saw, else by --gpus;
    /// with neither the axis is the whole deployment's and the footer says so.
    #[test]
    fn per_gpu_divides_by_the_gpus_seen_else_by_the_flag() {
        let app = crate::tui::fixtures::finished_run();
        let mut s = app.session.summary.clone();
        for l in s.levels_mut() {
            l.gpus.clear();
        }
        let out: Vec<f64> = s
            .sweep
            .iter()
            .filter_map(|l| Some(l.stats.as_ref()?.scalars.output_throughput))
            .collect();
        let ys = |s: &crate::summary::RunSummary| {
            let run = [ChartRun {
                label: "r".into(),
                summary: s,
                telemetry: &[],
            }];
            let f = tradeoff_figure(&run);
            let ys: Vec<f64> = f.panels[0].lines[0].points.iter().map(|p| p.1).collect();
            (ys, f.footer[0].clone())
        };
        let (none, said) = ys(&s);
        assert_eq!(none, out);
        assert!(said.starts_with("Not per GPU"), "{said}");
        s.config.gpus = Some(4);
        let (flag, said) = ys(&s);
        assert_eq!(flag, out.iter().map(|y| y / 4.0).collect::<Vec<_>>());
        assert!(said.contains("4 GPUs from --gpus"), "{said}");
        let gpu = crate::telemetry::per_level::GpuLevelStats {
            index: 0,
            name: "g".into(),
            peak_mem_used_bytes: None,
            mem_total_bytes: None,
            mean_util_pct: None,
            mean_power_w: None,
            max_temp_c: None,
        };
        s.sweep[0].gpus = vec![gpu.clone(), gpu];
        let (seen, said) = ys(&s);
        assert_eq!(seen, out.iter().map(|y| y / 2.0).collect::<Vec<_>>());
        assert!(said.contains("2 GPUs seen by servetop"), "{said}");
    }
}
