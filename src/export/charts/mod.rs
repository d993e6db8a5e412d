//! PNG charts drawn with plotters from `RunSummary` (and `telemetry.jsonl`): the same summaries
//! the dashboard shows, so a picture and a table cannot disagree. Text uses `DejaVu Sans`, embedded
//! in the binary, so charts render on a machine with no fonts installed.
//!
//! Concurrency axes are log2 (1, 2, 4, … 100 spread evenly); latency axes switch to log10 when the
//! values span more than 30×. Several runs overlay with one colour each (`servetop report A B`).

mod figure;
mod grouped;
mod long_context;
mod lora;
mod panel;
mod pareto;
mod rates;
mod search;
mod sessions;
mod spec;
mod sweep;
mod timeline;
mod title;
mod trace;
mod tradeoff;
mod turns;

use std::path::{Path, PathBuf};
use std::sync::Once;

use crate::metrics::curves;
use crate::summary::{LevelSummary, RunSummary};
use crate::telemetry::TelemetryRecord;
pub use figure::Figure;
use panel::{Line, color};
pub use pareto::pareto_figure;
use plotters::style::{FontStyle, register_font};
pub use timeline::start_ms;

const SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

static FONTS: Once = Once::new();

/// Registers the embedded font under the family name the charts use.
pub fn register_fonts() {
    FONTS.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            if register_font("sans-serif", style, SANS).is_err() {
                tracing::warn!("the embedded DejaVu Sans font was rejected");
            }
        }
    });
}

/// A run to draw: its label (legend), summary and telemetry samples.
pub struct ChartRun<'a> {
    pub label: String,
    pub summary: &'a RunSummary,
    pub telemetry: &'a [TelemetryRecord],
}

/// A sweep level's concurrency, its x.
fn concurrency(l: &LevelSummary) -> f64 {
    f64::from(l.concurrency)
}

fn sweep_points(l: &[LevelSummary], f: impl Fn(&LevelSummary) -> Option<f64>) -> Vec<(f64, f64)> {
    grouped::means(&grouped::by_level(l, concurrency, f))
}

/// One line per run: its points, named by run when several are overlaid, coloured by run.
fn run_lines(
    runs: &[ChartRun<'_>],
    name: &str,
    points: impl Fn(&RunSummary) -> Vec<(f64, f64)>,
    dashed: bool,
    color_offset: usize,
) -> Vec<Line> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| Line {
            name: match (runs.len() > 1, name.is_empty()) {
                (true, true) => r.label.clone(),
                (true, false) => format!("{} {name}", r.label),
                (false, _) => name.to_string(),
            },
            points: points(r.summary),
            color: color(i + color_offset),
            dashed,
            errors: Vec::new(),
        })
        .collect()
}

/// One line per run over its sweep levels, at their concurrency.
fn lines_per_run(
    runs: &[ChartRun<'_>],
    name: &str,
    f: impl Fn(&LevelSummary) -> Option<f64> + Copy,
    dashed: bool,
) -> Vec<Line> {
    let lines = run_lines(runs, name, |s| sweep_points(&s.sweep, f), dashed, 0);
    let levels = runs.iter().map(|r| r.summary.sweep.as_slice());
    grouped::with_errors(lines, levels, concurrency, f)
}

/// One line per run over its rate levels, at their configured rate.
fn rate_lines(
    runs: &[ChartRun<'_>],
    name: &str,
    f: impl Fn(&LevelSummary) -> Option<f64> + Copy,
    dashed: bool,
    color_offset: usize,
) -> Vec<Line> {
    let points = |s: &RunSummary| {
        let mut pts = grouped::means(&grouped::by_level(&s.rates, rate, f));
        // Search probes run in bisection order; a line goes in rate order.
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    };
    let lines = run_lines(runs, name, points, dashed, color_offset);
    let levels = runs.iter().map(|r| r.summary.rates.as_slice());
    grouped::with_errors(lines, levels, rate, f)
}

/// A rate level's offered rate, its x (not a number for a level without one, or with every
/// request at once: not drawn).
fn rate(l: &LevelSummary) -> f64 {
    l.request_rate()
        .filter(|r| r.is_finite())
        .unwrap_or(f64::NAN)
}

/// A curve's value at a saved level (the dashboard reads the same curves live).
fn stat(l: &LevelSummary, y: curves::Y) -> Option<f64> {
    curves::at(l.stats.as_ref(), y)
}

/// Said in a sweep panel of a run without one.
const NO_SWEEP: &str = "no concurrency sweep in this run";

/// What a drawn figure's text says: its title band's subtitle and each panel's legend.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChartText {
    /// The line under the title: model, engine, date, each run's plan, host.
    pub subtitle: String,
    /// Each panel's legend entries, in panel order (empty: no legend).
    pub legends: Vec<Vec<String>>,
}

/// Builds one figure of `runs` (none when it has nothing to draw).
type Build = fn(&[ChartRun<'_>]) -> Option<Figure>;

/// Every chart for `runs` into `dir` (created if missing); returns the files written.
pub fn render_all(
    runs: &[ChartRun<'_>],
    dir: &Path,
    size: (u32, u32),
) -> Result<Vec<PathBuf>, String> {
    Ok(render_described(runs, dir, size)?
        .into_iter()
        .map(|(p, _)| p)
        .collect())
}

/// [`render_all`], each file with what its text says.
pub fn render_described(
    runs: &[ChartRun<'_>],
    dir: &Path,
    size: (u32, u32),
) -> Result<Vec<(PathBuf, ChartText)>, String> {
    if runs.is_empty() {
        return Err("no run to draw".into());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for (name, fig) in figures(runs) {
        let p = dir.join(format!("{name}.png"));
        let text = fig.draw_png(&p, size)?;
        written.push((p, text));
    }
    Ok(written)
}

/// Every figure the run has, by name (`throughput` for throughput.png), in the order the
/// files are written: what the PNGs and the report page both draw.
pub fn figures(runs: &[ChartRun<'_>]) -> Vec<(&'static str, Figure)> {
    // A run of several passes is drawn as one run per series (docs/outputs.md "Passes"): each
    // its own line, named by its pass, the headline first; but for the GPU timeline, which is
    // the whole run's.
    let split: Vec<(String, RunSummary, &[TelemetryRecord])> = runs
        .iter()
        .flat_map(|r| per_series(r, runs.len() > 1))
        .collect();
    let split_runs = as_runs(&split);
    let whole = runs;
    let runs: &[ChartRun<'_>] = if split_runs.len() > whole.len() {
        &split_runs
    } else {
        whole
    };
    let any = |f: fn(&RunSummary) -> bool| runs.iter().any(|r| f(r.summary));
    let figures: [(&str, Build, bool); 13] = [
        ("throughput", |r| Some(sweep::throughput(r)), true),
        (
            "tradeoff",
            |r| Some(tradeoff::tradeoff_figure(r)),
            any(|s| !s.sweep.is_empty()),
        ),
        ("latency", |r| Some(sweep::latency(r)), true),
        (
            "energy",
            |r| Some(sweep::energy(r)),
            any(|s| {
                s.sweep.iter().any(|l| {
                    l.energy.output_tokens_per_joule.is_some()
                        || l.energy.cost_per_million_output_tokens.is_some()
                })
            }),
        ),
        (
            "long_context",
            |r| Some(long_context::draw(r)),
            any(|s| !s.long_context.is_empty()),
        ),
        ("spec_decoding", |r| Some(sweep::spec_decoding(r)), true),
        (
            "rates",
            |r| Some(rates::rates_figure(r)),
            any(|s| !s.rates.is_empty()),
        ),
        (
            "slo_search",
            search::slo_search_figure,
            any(|s| s.search.is_some()),
        ),
        (
            "turns",
            |r| Some(turns::turns_figure(r)),
            any(|s| !s.multi_turn.is_empty()),
        ),
        (
            "sessions",
            |r| Some(sessions::sessions_figure(r)),
            any(|s| !s.sessions.is_empty()),
        ),
        (
            "trace",
            |r| Some(trace::trace_figure(r)),
            any(|s| !s.traces.is_empty()),
        ),
        (
            "lora",
            |r| Some(lora::lora_figure(r)),
            any(|s| !s.config.lora_modules.is_empty()),
        ),
        ("gpu_timeline", |r| Some(timeline::figure(r)), true),
    ];
    figures
        .into_iter()
        .filter(|(_, _, wanted)| *wanted)
        .filter_map(|(name, build, _)| {
            // The GPU timeline is the whole run's, not a series'.
            let runs = if name == "gpu_timeline" { whole } else { runs };
            build(runs).map(|f| (name, f))
        })
        .collect()
}

/// The series [`per_series`] split off, as runs to draw.
fn as_runs<'a>(split: &'a [(String, RunSummary, &'a [TelemetryRecord])]) -> Vec<ChartRun<'a>> {
    split
        .iter()
        .map(|(label, summary, telemetry)| ChartRun {
            label: label.clone(),
            summary,
            telemetry,
        })
        .collect()
}

/// `r` once per series when it ran several passes (`plain`, `json`, `think N`; `run · json`
/// when `overlaid` with other runs), the headline first; else as it is.
fn per_series<'a>(
    r: &ChartRun<'a>,
    overlaid: bool,
) -> Vec<(String, RunSummary, &'a [TelemetryRecord])> {
    let passes = r.summary.passes();
    if !passes.several_series() {
        return vec![(r.label.clone(), r.summary.clone(), r.telemetry)];
    }
    passes
        .series()
        .iter()
        .map(|p| {
            let label = if overlaid {
                format!("{} · {}", r.label, p.label)
            } else {
                p.label.clone()
            };
            (label, r.summary.only(p), r.telemetry)
        })
        .collect()
}

#[cfg(test)]
/// A finished run whose lengths above 16K ran on a server restarted with a 128K context.
pub(super) fn restarted_run() -> crate::summary::RunSummary {
    let mut s = crate::tui::fixtures::finished_run().session.summary;
    let launch = |ctx: u64| crate::serve::ServerLaunch {
        command: format!("serve --context-length {ctx}"),
        context_len: Some(ctx),
        port: 30000,
        ready_s: Some(60.0),
    };
    s.servers = vec![launch(16_384), launch(131_072)];
    let mut t = 1_000;
    for l in s
        .levels_mut()
        .filter(|l| l.status == crate::summary::LevelStatus::Done)
    {
        t += 1_000;
        l.started_at_unix_ms = Some(t);
        l.server_index = Some(u32::from(l.input_len > 16_384));
    }
    s
}

#[cfg(test)]
mod series_tests {
    use super::*;

    /// `s` split as `render_all` splits it, into the throughput panel's lines (out tok/s).
    fn throughput_lines(s: &RunSummary) -> Vec<Line> {
        let run = ChartRun {
            label: "r".into(),
            summary: s,
            telemetry: &[],
        };
        let split = per_series(&run, false);
        let runs = as_runs(&split);
        lines_per_run(&runs, "", |l| stat(l, curves::OUTPUT_TOK_S), false)
    }

    /// Twins and budgets are drawn the same way: a line per series named by its pass, the
    /// headline (plain; the first budget) first in the first colour, each with its own levels'
    /// points only (a twin never a point of the plain line).
    #[test]
    fn twins_and_budgets_are_lines_named_by_their_pass_the_headline_first() {
        let twins = crate::tui::fixtures::finished_twins();
        let budgets = crate::tui::fixtures::mid_budgets();
        for (app, names) in [
            (&twins, ["plain", "json"]),
            (&budgets, ["think 16", "think 64"]),
        ] {
            let s = &app.session.summary;
            let lines = throughput_lines(s);
            let got: Vec<&str> = lines.iter().map(|l| l.name.as_str()).collect();
            assert_eq!(got, names);
            assert_eq!(lines[0].color, color(0));
            assert_ne!(lines[1].color, lines[0].color);
            for (line, p) in lines.iter().zip(s.passes().series()) {
                let own: Vec<(f64, f64)> = s
                    .sweep
                    .iter()
                    .filter(|l| p.holds(l))
                    .filter_map(|l| Some((concurrency(l), stat(l, curves::OUTPUT_TOK_S)?)))
                    .collect();
                assert_eq!(line.points, own, "{}", line.name);
                assert!(!own.is_empty());
            }
            // The twins differ: two lines, not one line through both.
            assert_ne!(lines[0].points, lines[1].points);
        }
        // Overlaid with another run, a line is named by run and pass.
        let s = crate::tui::fixtures::finished_twins().session.summary;
        let run = ChartRun {
            label: "r".into(),
            summary: &s,
            telemetry: &[],
        };
        let names: Vec<String> = per_series(&run, true).into_iter().map(|p| p.0).collect();
        assert_eq!(names, ["r · plain", "r · json"]);
        // One pass: the run as it is.
        let one = crate::tui::fixtures::finished_run().session.summary;
        let run = ChartRun {
            label: "r".into(),
            summary: &one,
            telemetry: &[],
        };
        let split = per_series(&run, false);
        assert_eq!(split.len(), 1);
        assert_eq!((split[0].0.as_str(), &split[0].1), ("r", &one));
    }

    /// The PNG charts and the dashboard draw the same series with the same points: a curve
    /// per pass named alike, a repeated level the mean of its runs (the dashboard's x is
    /// log2 C; the level in progress is apart from its line there, and no point here).
    #[test]
    fn the_charts_and_the_dashboard_draw_the_same_series() {
        use crate::tui::fixtures;
        let fixtures: [fn() -> crate::tui::app::App; 4] = [
            fixtures::finished_twins,
            fixtures::mid_budgets,
            fixtures::finished_repeats,
            fixtures::finished_run,
        ];
        for make in fixtures {
            let app = make();
            let s = &app.session.summary;
            let lines = throughput_lines(s);
            let curves = &app.views.sweep.aggregate;
            assert_eq!(lines.len(), curves.len());
            for (line, curve) in lines.iter().zip(curves) {
                if curves.len() > 1 {
                    assert_eq!(line.name, curve.label);
                }
                let drawn: Vec<(f64, f64)> =
                    curve.points.iter().map(|p| (2f64.powf(p.0), p.1)).collect();
                assert_eq!(line.points.len(), drawn.len(), "{}", line.name);
                for (a, b) in line.points.iter().zip(&drawn) {
                    assert!(
                        (a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9,
                        "{a:?} {b:?}"
                    );
                }
            }
        }
        // Repeats: one line, each level's point the mean of its two runs, with their interval.
        let app = crate::tui::fixtures::finished_repeats();
        let s = &app.session.summary;
        let lines = throughput_lines(s);
        assert_eq!(lines.len(), 1);
        let runs: Vec<f64> = s
            .sweep
            .iter()
            .filter(|l| l.concurrency == 1)
            .map(|l| l.stats.as_ref().unwrap().scalars.output_throughput)
            .collect();
        assert!(runs.len() == 2 && runs[1] < runs[0], "{runs:?}");
        assert!((lines[0].points[0].1 - f64::midpoint(runs[0], runs[1])).abs() < 1e-9);
        assert_eq!(lines[0].errors.len(), 3, "an interval at each level");
    }
}
