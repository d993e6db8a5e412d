//! PNG charts drawn with plotters from `RunSummary` (and `telemetry.jsonl`): the same summaries
//! the dashboard shows, so a picture and a table cannot disagree. Text uses `DejaVu Sans`, embedded
//! in the binary, so charts render on a machine with no fonts installed.
//!
//! Concurrency axes are log2 (1, 2, 4, … 100 spread evenly); latency axes switch to log10 when the
//! values span more than 30×. Several runs overlay with one colour each (`servetop report A B`).

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::summary::{LevelStatus, LevelSummary, RunSummary};
use crate::telemetry::{GpuSource, TelemetryRecord};

const SANS: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
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

/// Colour-blind-friendly series colours (Okabe–Ito), one per run.
const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One line on a panel.
struct Line {
    name: String,
    points: Vec<(f64, f64)>,
    color: RGBColor,
    dashed: bool,
}

/// What the x axis means.
#[derive(Clone, Copy)]
enum XKind {
    /// Concurrency, drawn at log2(C).
    Concurrency,
    /// Context length in K tokens.
    ContextK,
    /// Seconds since the run started.
    Seconds,
    /// Offered request rate (requests/s), linear.
    Rate,
    /// Turn of a conversation (1, 2, …).
    Turn,
}

struct Panel {
    title: String,
    x: XKind,
    y_desc: String,
    /// Allow a log10 y axis when the values span more than 30×.
    y_log_ok: bool,
    /// Fixed y top (percentages).
    y_top: Option<f64>,
    lines: Vec<Line>,
    /// Vertical marks: `(x, label)`.
    marks: Vec<(f64, String)>,
    /// Horizontal marks (an SLO limit): `(y, label)`.
    limits: Vec<(f64, String)>,
    /// Said in the panel when there is nothing to draw.
    empty: String,
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

fn fmt_num(v: f64) -> String {
    crate::export::markdown::num(Some(v))
}

fn draw_panel(area: &Area<'_>, p: &Panel) -> Result<(), String> {
    let all: Vec<(f64, f64)> = p
        .lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let title_style = ("sans-serif", 24).into_font().style(FontStyle::Bold);
    if all.is_empty() {
        area.draw(&Rectangle::new(
            [
                (0, 0),
                (
                    area.dim_in_pixel().0 as i32 - 1,
                    area.dim_in_pixel().1 as i32 - 1,
                ),
            ],
            BLACK.mix(0.3),
        ))
        .map_err(err)?;
        area.draw(&Text::new(p.title.clone(), (20, 15), title_style))
            .map_err(err)?;
        area.draw(&Text::new(
            p.empty.clone(),
            (20, 60),
            ("sans-serif", 20).into_font().color(&BLACK.mix(0.7)),
        ))
        .map_err(err)?;
        return Ok(());
    }
    let (mut x_lo, mut x_hi) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |a, (x, _)| (a.0.min(*x), a.1.max(*x)));
    for (m, _) in &p.marks {
        x_lo = x_lo.min(*m);
        x_hi = x_hi.max(*m);
    }
    let tx = |x: f64| match p.x {
        XKind::Concurrency => x.max(1.0).log2(),
        _ => x,
    };
    let (x0, x1) = match p.x {
        XKind::Concurrency => (0.0, tx(x_hi).max(1.0) + 0.25),
        _ => ((x_lo.min(0.0)), (x_hi * 1.05).max(x_lo + 1.0)),
    };
    let ys: Vec<f64> = all
        .iter()
        .map(|p| p.1)
        .chain(p.limits.iter().map(|l| l.0))
        .collect();
    let (y_min, y_max) = ys
        .iter()
        .fold((f64::MAX, f64::MIN), |a, y| (a.0.min(*y), a.1.max(*y)));
    let log_y = p.y_log_ok && y_min > 0.0 && y_max / y_min > 30.0;
    let ty = |y: f64| if log_y { y.max(1e-9).log10() } else { y };
    let (y0, y1) = if log_y {
        (y_min.log10().floor(), y_max.log10().ceil())
    } else {
        (0.0, p.y_top.unwrap_or((y_max * 1.12).max(1e-9)))
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, title_style)
        .margin(12)
        .x_label_area_size(55)
        .y_label_area_size(85)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    let x_desc = match p.x {
        XKind::Concurrency => "concurrency (log2 scale)",
        XKind::ContextK => "input tokens (K)",
        XKind::Seconds => "seconds since the run started",
        XKind::Rate => "offered request rate (req/s)",
        XKind::Turn => "turn of the conversation",
    };
    let xk = p.x;
    let x_fmt = move |v: &f64| match xk {
        XKind::Concurrency => {
            let c = 2f64.powf(*v);
            if (c - c.round()).abs() < 0.01 {
                format!("{}", c.round())
            } else {
                String::new()
            }
        }
        XKind::ContextK => format!("{v:.0}K"),
        XKind::Seconds => format!("{v:.0}"),
        XKind::Rate => fmt_num(*v),
        XKind::Turn if (v - v.round()).abs() < 0.01 && *v >= 0.5 => format!("{}", v.round()),
        XKind::Turn => String::new(),
    };
    let y_fmt = move |v: &f64| {
        if log_y {
            fmt_num(10f64.powf(*v))
        } else {
            fmt_num(*v)
        }
    };
    let x_labels = match p.x {
        XKind::Concurrency => ((x1.floor()) as usize + 1).max(2),
        XKind::Turn => (x1.floor() as usize + 1).clamp(2, 21),
        _ => 8,
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(if log_y {
            format!("{} (log scale)", p.y_desc)
        } else {
            p.y_desc.clone()
        })
        .x_labels(x_labels)
        .y_labels(if log_y { (y1 - y0) as usize + 1 } else { 8 })
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 19))
        .light_line_style(BLACK.mix(0.06))
        .bold_line_style(BLACK.mix(0.15))
        .draw()
        .map_err(err)?;
    for (m, label) in &p.marks {
        let x = tx(*m);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x, y0), (x, y1)],
                6,
                6,
                BLACK.mix(0.35).stroke_width(1),
            ))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                label.clone(),
                (x, y1),
                ("sans-serif", 15)
                    .into_font()
                    .color(&BLACK.mix(0.6))
                    .transform(FontTransform::Rotate90),
            )))
            .map_err(err)?;
    }
    for (y, label) in &p.limits {
        let y = ty(*y);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(x0, y), (x1, y)],
                12,
                6,
                RGBColor(200, 40, 40).mix(0.8).stroke_width(2),
            ))
            .map_err(err)?;
        chart
            .draw_series(std::iter::once(Text::new(
                label.clone(),
                (x0 + (x1 - x0) * 0.55, y),
                ("sans-serif", 17).into_font().color(&RGBColor(170, 30, 30)),
            )))
            .map_err(err)?;
    }
    for l in &p.lines {
        let pts: Vec<(f64, f64)> = l
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| (tx(x), ty(y)))
            .collect();
        let style = l.color.stroke_width(3);
        let legend_color = l.color;
        let dashed = l.dashed;
        let anno = if dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 10, 6, style))
                .map_err(err)?
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(err)?
        };
        if !l.name.is_empty() {
            anno.label(l.name.clone()).legend(move |(x, y)| {
                let s = legend_color.stroke_width(3);
                // A dashed series gets a dashed key.
                let second = if dashed {
                    (x + 15, x + 24)
                } else {
                    (x + 9, x + 24)
                };
                EmptyElement::at((0, 0))
                    + PathElement::new(vec![(x, y), (x + 9, y)], s)
                    + PathElement::new(vec![(second.0, y), (second.1, y)], s)
            });
        }
        // Markers on sparse series (levels); dense time series read better as plain lines.
        if pts.len() <= 40 {
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 5, l.color.filled())))
                .map_err(err)?;
        }
    }
    if p.lines
        .iter()
        .any(|l| !l.name.is_empty() && !l.points.is_empty())
    {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 17))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// `model · engine · date · settings`, and SIMULATED when it was.
fn subtitle(runs: &[ChartRun<'_>]) -> String {
    let s = runs[0].summary;
    let (engine, model) = s
        .server
        .as_ref()
        .map_or(("?", "?"), |v| (v.engine.name(), v.model.as_str()));
    let date = s.started_at.get(..10).unwrap_or(&s.started_at);
    let sim = if runs.iter().any(|r| r.summary.simulated) {
        " · SIMULATED SERVER (servetop-sim), not real hardware"
    } else {
        ""
    };
    let more = if runs.len() > 1 {
        format!(" · {} runs overlaid", runs.len())
    } else {
        String::new()
    };
    format!(
        "{model} · {engine} · {date} · {} · host {}{more}{sim}",
        s.config.lengths_label(),
        s.host
    )
}

/// Splits `s` into lines of at most `width` characters at spaces.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    for word in s.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut line));
            line.push_str("    ");
        }
        if !line.is_empty() && !line.ends_with("    ") {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.trim().is_empty() {
        out.push(line);
    }
    out
}

/// Draws a figure: a title band, then `panels` side by side (or in a grid of `cols`).
fn figure(
    path: &Path,
    size: (u32, u32),
    title: &str,
    runs: &[ChartRun<'_>],
    panels: &[Panel],
    cols: usize,
    footer: &[String],
) -> Result<(), String> {
    register_fonts();
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    // Wrap footer notes to the figure width (about 10 px per character at 18 px).
    let max_chars = (size.0 as usize / 10).max(40);
    let footer: Vec<String> = footer.iter().flat_map(|l| wrap(l, max_chars)).collect();
    let footer_h = if footer.is_empty() {
        0
    } else {
        14 + 26 * footer.len() as u32
    };
    let (head, rest) = root.split_vertically(80);
    let (body, foot) = rest.split_vertically(size.1.saturating_sub(80 + footer_h));
    head.draw(&Text::new(
        title.to_string(),
        (20, 10),
        ("sans-serif", 32).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    head.draw(&Text::new(
        subtitle(runs),
        (20, 50),
        ("sans-serif", 20).into_font().color(&BLACK.mix(0.75)),
    ))
    .map_err(err)?;
    let rows = panels.len().div_ceil(cols.max(1));
    let areas = body.split_evenly((rows, cols.max(1)));
    for (a, p) in areas.iter().zip(panels) {
        draw_panel(a, p)?;
    }
    for (i, line) in footer.iter().enumerate() {
        foot.draw(&Text::new(
            line.clone(),
            (20, 8 + 26 * i as i32),
            ("sans-serif", 18).into_font().color(&BLACK.mix(0.8)),
        ))
        .map_err(err)?;
    }
    root.present().map_err(err)
}

fn sweep_points(l: &[LevelSummary], f: impl Fn(&LevelSummary) -> Option<f64>) -> Vec<(f64, f64)> {
    l.iter()
        .filter_map(|lv| Some((f64::from(lv.concurrency), f(lv)?)))
        .collect()
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
    run_lines(runs, name, |s| sweep_points(&s.sweep, f), dashed, 0)
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
        let mut pts: Vec<(f64, f64)> = s
            .rates
            .iter()
            .filter_map(|l| Some((l.request_rate()?, f(l)?)))
            .collect();
        // Search probes run in bisection order; a line goes in rate order.
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts
    };
    run_lines(runs, name, points, dashed, color_offset)
}

fn stat(l: &LevelSummary, f: impl Fn(&crate::metrics::LevelStats) -> Option<f64>) -> Option<f64> {
    l.stats
        .as_ref()
        .filter(|s| s.scalars.completed > 0)
        .and_then(f)
}

/// Every chart for `runs` into `dir` (created if missing); returns the files written.
pub fn render_all(
    runs: &[ChartRun<'_>],
    dir: &Path,
    size: (u32, u32),
) -> Result<Vec<PathBuf>, String> {
    if runs.is_empty() {
        return Err("no run to draw".into());
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut written = Vec::new();
    let no_sweep = "no concurrency sweep in this run".to_string();
    let mut out = |name: &str, f: &dyn Fn(&Path) -> Result<(), String>| -> Result<(), String> {
        let p = dir.join(name);
        f(&p)?;
        written.push(p);
        Ok(())
    };

    out("throughput.png", &|p| {
        let panel = |title: &str, y: &str, f: fn(&LevelSummary) -> Option<f64>| Panel {
            title: title.into(),
            x: XKind::Concurrency,
            y_desc: y.into(),
            y_log_ok: false,
            y_top: None,
            lines: lines_per_run(runs, "", f, false),
            marks: vec![],
            limits: vec![],
            empty: no_sweep.clone(),
        };
        figure(
            p,
            size,
            "Throughput vs concurrency",
            runs,
            &[
                panel("Aggregate output tokens/s", "output tok/s", |l| {
                    stat(l, |s| Some(s.scalars.output_throughput))
                }),
                panel("Per-stream decode tokens/s", "tok/s per request", |l| {
                    stat(l, |s| s.dists.decode_tokens_per_s.as_ref().map(|d| d.mean))
                }),
                panel("Requests/s", "req/s", |l| {
                    stat(l, |s| Some(s.scalars.request_throughput))
                }),
            ],
            3,
            &[],
        )
    })?;

    out("latency.png", &|p| {
        let panel = |title: &str,
                     p50: fn(&LevelSummary) -> Option<f64>,
                     p99: fn(&LevelSummary) -> Option<f64>| {
            let mut lines = lines_per_run(runs, "p50", p50, false);
            lines.extend(lines_per_run(runs, "p99", p99, true));
            Panel {
                title: title.into(),
                x: XKind::Concurrency,
                y_desc: "ms".into(),
                y_log_ok: true,
                y_top: None,
                lines,
                marks: vec![],
                limits: vec![],
                empty: no_sweep.clone(),
            }
        };
        figure(
            p,
            size,
            "Latency vs concurrency (p50 solid, p99 dashed)",
            runs,
            &[
                panel(
                    "Time to first token",
                    |l| stat(l, |s| s.dists.ttft_ms.as_ref().map(|d| d.p50)),
                    |l| stat(l, |s| s.dists.ttft_ms.as_ref().map(|d| d.p99)),
                ),
                panel(
                    "Inter-token latency (per token)",
                    |l| stat(l, |s| s.dists.itl_ms.as_ref().map(|d| d.p50)),
                    |l| stat(l, |s| s.dists.itl_ms.as_ref().map(|d| d.p99)),
                ),
                panel(
                    "Time per output token",
                    |l| stat(l, |s| s.dists.tpot_ms.as_ref().map(|d| d.p50)),
                    |l| stat(l, |s| s.dists.tpot_ms.as_ref().map(|d| d.p99)),
                ),
            ],
            3,
            &[],
        )
    })?;

    out("long_context.png", &|p| {
        let ctx_lines = |name: &str, f: fn(&LevelSummary) -> Option<f64>| -> Vec<Line> {
            let points = |s: &RunSummary| {
                s.long_context
                    .iter()
                    .filter_map(|l| Some((l.input_len as f64 / 1000.0, f(l)?)))
                    .collect()
            };
            run_lines(runs, name, points, false, 0)
        };
        let skipped: Vec<&LevelSummary> = runs
            .iter()
            .flat_map(|r| r.summary.long_context.iter())
            .filter(|l| l.status == LevelStatus::Skipped)
            .collect();
        let marks: Vec<(f64, String)> = skipped
            .iter()
            .map(|l| {
                (
                    l.input_len as f64 / 1000.0,
                    format!("{}K skipped", l.input_len / 1000),
                )
            })
            .collect();
        let footer: Vec<String> = skipped
            .iter()
            .map(|l| {
                format!(
                    "{}K skipped: {}",
                    l.input_len / 1000,
                    l.reason.as_deref().unwrap_or("")
                )
            })
            .collect();
        let empty = "no long-context length finished in this run".to_string();
        let panel = |title: &str, y: &str, name: &str, f: fn(&LevelSummary) -> Option<f64>| Panel {
            title: title.into(),
            x: XKind::ContextK,
            y_desc: y.into(),
            y_log_ok: false,
            y_top: None,
            lines: ctx_lines(name, f),
            marks: marks.clone(),
            limits: vec![],
            empty: empty.clone(),
        };
        figure(
            p,
            size,
            "Long context: prefill and decode vs input length",
            runs,
            &[
                panel("Time to first token", "seconds", "TTFT", |l| {
                    stat(l, |s| s.dists.ttft_ms.as_ref().map(|d| d.mean / 1000.0))
                }),
                panel("Prefill speed", "input tok/s", "prefill", |l| {
                    stat(l, |s| s.scalars.prefill_tokens_per_s)
                }),
                panel("Decode speed", "tok/s per request", "decode", |l| {
                    stat(l, |s| s.dists.decode_tokens_per_s.as_ref().map(|d| d.mean))
                }),
            ],
            3,
            &footer,
        )
    })?;

    out("spec_decoding.png", &|p| {
        let mut lines = lines_per_run(
            runs,
            "client (tokens per chunk)",
            crate::summary::LevelSummary::accept_length_client,
            false,
        );
        let server = lines_per_run(
            runs,
            "server (engine metrics)",
            |l| l.accept_length_server,
            true,
        );
        let any_server = server.iter().any(|l| !l.points.is_empty());
        lines.extend(server.into_iter().filter(|l| !l.points.is_empty()));
        let footer = if any_server {
            vec![]
        } else {
            vec!["The server reported no accept length (no speculative-decoding metrics on its /metrics)".to_string()]
        };
        figure(
            p,
            size,
            "Speculative decoding: accept length per level",
            runs,
            &[Panel {
                title: "Mean accept length (tokens per step)".into(),
                x: XKind::Concurrency,
                y_desc: "tokens".into(),
                y_log_ok: false,
                y_top: None,
                lines,
                marks: vec![],
                limits: vec![],
                empty: no_sweep.clone(),
            }],
            1,
            &footer,
        )
    })?;

    if runs.iter().any(|r| !r.summary.rates.is_empty()) {
        out("rates.png", &|p| rates_figure(p, size, runs))?;
    }
    if runs.iter().any(|r| r.summary.search.is_some()) {
        out("slo_search.png", &|p| slo_search_figure(p, size, runs))?;
    }
    if runs.iter().any(|r| !r.summary.multi_turn.is_empty()) {
        out("turns.png", &|p| turns_figure(p, size, runs))?;
    }

    out("gpu_timeline.png", &|p| {
        let (panels, footer) = timeline_panels(runs);
        figure(
            p,
            size,
            "GPU and server over the run",
            runs,
            &panels,
            2,
            &footer,
        )
    })?;
    Ok(written)
}

/// The request-rate sweep: latency percentiles, achieved against offered rate, client queue.
fn rates_figure(path: &Path, size: (u32, u32), runs: &[ChartRun<'_>]) -> Result<(), String> {
    let empty = "no request-rate level finished in this run".to_string();
    let pct_panel = |title: &str,
                     p50: fn(&LevelSummary) -> Option<f64>,
                     p99: fn(&LevelSummary) -> Option<f64>| {
        let mut lines = rate_lines(runs, "p50", p50, false, 0);
        lines.extend(rate_lines(runs, "p99", p99, true, 0));
        Panel {
            title: title.into(),
            x: XKind::Rate,
            y_desc: "ms".into(),
            y_log_ok: true,
            y_top: None,
            lines,
            marks: vec![],
            limits: vec![],
            empty: empty.clone(),
        }
    };
    let mut rate_lines_all = rate_lines(
        runs,
        "sent",
        |l| stat(l, |s| s.scalars.achieved_request_rate),
        false,
        0,
    );
    rate_lines_all.extend(rate_lines(
        runs,
        "completed",
        |l| stat(l, |s| Some(s.scalars.request_throughput)),
        true,
        0,
    ));
    // The offered rate itself (y = x): where the sent and completed lines should lie.
    let offered: Vec<(f64, f64)> = runs
        .iter()
        .flat_map(|r| {
            r.summary
                .rates
                .iter()
                .filter_map(LevelSummary::request_rate)
        })
        .map(|r| (r, r))
        .collect();
    if rate_lines_all.iter().any(|l| !l.points.is_empty()) {
        rate_lines_all.push(Line {
            name: "offered (y = x)".into(),
            points: offered,
            color: RGBColor(130, 130, 130),
            dashed: true,
        });
    }
    let panels = [
        pct_panel(
            "Time to first token",
            |l| stat(l, |s| s.dists.ttft_ms.as_ref().map(|d| d.p50)),
            |l| stat(l, |s| s.dists.ttft_ms.as_ref().map(|d| d.p99)),
        ),
        pct_panel(
            "Time per output token",
            |l| stat(l, |s| s.dists.tpot_ms.as_ref().map(|d| d.p50)),
            |l| stat(l, |s| s.dists.tpot_ms.as_ref().map(|d| d.p99)),
        ),
        Panel {
            title: "Achieved vs offered request rate".into(),
            x: XKind::Rate,
            y_desc: "req/s".into(),
            y_log_ok: false,
            y_top: None,
            lines: rate_lines_all,
            marks: vec![],
            limits: vec![],
            empty: empty.clone(),
        },
        pct_panel(
            "Client queue (t_send − t_sched)",
            |l| stat(l, |s| s.dists.client_queue_ms.as_ref().map(|d| d.p50)),
            |l| stat(l, |s| s.dists.client_queue_ms.as_ref().map(|d| d.p99)),
        ),
    ];
    let s = runs[0].summary;
    let footer = vec![format!(
        "Arrivals: {}. sent: the rate requests went out at; completed: completions over the level's window. Client queue: time a request waited in servetop past its scheduled send (a full --max-concurrency); the server's own queueing shows up in TTFT.",
        crate::export::markdown::arrival_description(&s.config.open_loop)
    )];
    figure(
        path,
        size,
        "Request-rate sweep (p50 solid, p99 dashed)",
        runs,
        &panels,
        2,
        &footer,
    )
}

/// A judged search probe: its rate, its check, its goodput.
type Judged = (f64, crate::metrics::SloCheck, Option<f64>);

/// The judged probes of a search, in rate order (probes run in bisection order).
fn judged(s: &crate::workload::search::SearchSummary) -> Vec<Judged> {
    let mut v: Vec<Judged> = s
        .probes
        .iter()
        .filter(|p| !p.interrupted)
        .filter_map(|p| Some((p.request_rate, p.check.clone()?, p.goodput)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// `(rate, f(probe))` of a run's judged search probes.
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

/// The SLO search: goodput against the offered rate beside the line where every request is
/// good, and each SLO metric's percentile (with its 95 % interval) against its limit; the
/// answer and the lowest failing rate marked on every panel.
fn slo_search_figure(path: &Path, size: (u32, u32), runs: &[ChartRun<'_>]) -> Result<(), String> {
    let Some(first) = runs.iter().find_map(|r| r.summary.search.as_ref()) else {
        return Ok(());
    };
    let mut marks = Vec::new();
    if let Some(p) = first.pass_rate {
        marks.push((p, format!("answer {} req/s", crate::workload::fmt_rate(p))));
    }
    if let Some(f) = first.fail_rate {
        marks.push((f, format!("fails at {}", crate::workload::fmt_rate(f))));
    }
    let empty = "no search probe finished in this run".to_string();
    let mut good = run_lines(runs, "goodput", |s| probe_points(s, |j| j.2), false, 0);
    let all_good: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| r.summary.search.as_ref())
        .flat_map(|s| judged(s).into_iter().map(|j| (j.0, j.0)))
        .collect();
    if good.iter().any(|l| !l.points.is_empty()) {
        good.push(Line {
            name: "all requests good (y = x)".into(),
            points: all_good,
            color: RGBColor(130, 130, 130),
            dashed: true,
        });
    }
    let mut panels = vec![Panel {
        title: "Goodput vs offered rate".into(),
        x: XKind::Rate,
        y_desc: "requests/s meeting every per-request objective".into(),
        y_log_ok: false,
        y_top: None,
        lines: good,
        marks: marks.clone(),
        limits: vec![],
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
            title: format!("{} p{pct} vs offered rate", metric.to_uppercase()),
            x: XKind::Rate,
            y_desc: "ms".into(),
            y_log_ok: true,
            y_top: None,
            lines,
            marks: marks.clone(),
            limits: vec![(limit, format!("SLO limit {} ms", fmt_num(limit)))],
            empty: empty.clone(),
        });
    }
    let mut footer = vec![format!(
        "{}. Each point is one search probe (an open-loop level); the percentile counts failed requests as misses. Dashed: the distribution-free 95 % interval of the percentile from order statistics (missing where too few requests lie above it).",
        first.headline()
    )];
    let unsure: Vec<String> = first
        .uncertain()
        .map(|p| crate::workload::fmt_rate(p.request_rate))
        .collect();
    if !unsure.is_empty() {
        footer.push(format!(
            "Uncertain verdicts (interval straddles a limit) at {} req/s.",
            unsure.join(", ")
        ));
    }
    let cols = if panels.len() <= 2 {
        2
    } else {
        2.min(panels.len())
    };
    figure(
        path,
        size,
        &format!("SLO capacity search: {}", first.slo.describe()),
        runs,
        &panels,
        cols,
        &footer,
    )
}

/// A multi-turn level by turn: TTFT, and prompt tokens against those the server's prefix cache
/// served.
fn turns_figure(path: &Path, size: (u32, u32), runs: &[ChartRun<'_>]) -> Result<(), String> {
    let empty = "no multi-turn level finished in this run".to_string();
    let by_turn = |f: fn(&crate::metrics::TurnStats) -> Option<f64>| {
        move |s: &RunSummary| -> Vec<(f64, f64)> {
            s.multi_turn
                .iter()
                .filter_map(|l| l.stats.as_ref())
                .flat_map(|st| st.scalars.turns.iter())
                .filter_map(|t| Some((f64::from(t.turn), f(t)?)))
                .collect()
        }
    };
    let mut ttft = run_lines(runs, "p50", by_turn(|t| t.median_ttft_ms), false, 0);
    ttft.extend(run_lines(runs, "p90", by_turn(|t| t.p90_ttft_ms), true, 0));
    let mut tokens = run_lines(runs, "prompt", by_turn(|t| t.mean_input_tokens), false, 0);
    tokens.extend(run_lines(
        runs,
        "served from the cache",
        by_turn(|t| t.mean_cached_tokens),
        true,
        0,
    ));
    let panels = [
        Panel {
            title: "Time to first token by turn".into(),
            x: XKind::Turn,
            y_desc: "ms".into(),
            y_log_ok: true,
            y_top: None,
            lines: ttft,
            marks: vec![],
            limits: vec![],
            empty: empty.clone(),
        },
        Panel {
            title: "Prompt tokens by turn (mean)".into(),
            x: XKind::Turn,
            y_desc: "tokens".into(),
            y_log_ok: false,
            y_top: None,
            lines: tokens,
            marks: vec![],
            limits: vec![],
            empty,
        },
    ];
    let s = runs[0].summary;
    let footer: Vec<String> = s
        .multi_turn
        .iter()
        .map(|l| {
            let c = l.conversation.map_or((0, 0), |c| (c.turns, c.followup_tokens));
            format!(
                "{} conversations of {} turns, {} at a time: turn 1 sends {} tokens{}, each later turn the whole history (earlier messages and the real replies of {} tokens) plus a {}-token message. Cached tokens are the server's own per-request count (usage.prompt_tokens_details.cached_tokens).",
                l.requests / c.0.max(1),
                c.0,
                l.concurrency,
                l.input_len,
                if l.shared_prefix_tokens > 0 {
                    format!(" ({} of them a system prompt shared by all)", l.shared_prefix_tokens)
                } else {
                    String::new()
                },
                l.output_len,
                c.1
            )
        })
        .collect();
    figure(
        path,
        size,
        "Multi-turn chats (p50 solid, p90 dashed)",
        runs,
        &panels,
        2,
        &footer,
    )
}

/// GPU memory and utilization per GPU, server KV use and queue, over time with level starts.
fn timeline_panels(runs: &[ChartRun<'_>]) -> (Vec<Panel>, Vec<String>) {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    // The first run sets the timeline (overlaying clocks of different runs would mislead).
    let r = &runs[0];
    let t0 = r
        .telemetry
        .iter()
        .filter_map(|t| match t {
            TelemetryRecord::Gpu(g) => Some(g.at_unix_ms),
            TelemetryRecord::Server(s) => Some(s.at_unix_ms),
            _ => None,
        })
        .chain(
            r.summary
                .sweep
                .iter()
                .chain(&r.summary.long_context)
                .filter_map(|l| l.started_at_unix_ms),
        )
        .min()
        .unwrap_or(0);
    let secs = |ms: i64| (ms - t0) as f64 / 1000.0;
    let mut mem: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut util: Vec<Vec<(f64, f64)>> = Vec::new();
    let (mut kv, mut running, mut queued) = (vec![], vec![], vec![]);
    let mut simulated = false;
    let mut total_gib: f64 = 0.0;
    for t in r.telemetry {
        match t {
            TelemetryRecord::Gpu(g) => {
                simulated |= g.source == GpuSource::SimulatedDcgm;
                for (i, x) in g.gpus.iter().enumerate() {
                    if mem.len() <= i {
                        mem.resize(i + 1, vec![]);
                        util.resize(i + 1, vec![]);
                    }
                    if let Some(m) = x.mem_used_bytes {
                        mem[i].push((secs(g.at_unix_ms), m as f64 / GIB));
                    }
                    if let Some(u) = x.util_gpu_pct {
                        util[i].push((secs(g.at_unix_ms), u));
                    }
                    total_gib = total_gib.max(x.mem_total_bytes.map_or(0.0, |b| b as f64 / GIB));
                }
            }
            TelemetryRecord::Server(s) => {
                let t = secs(s.at_unix_ms);
                if let Some(v) = s.kv_usage {
                    kv.push((t, v * 100.0));
                }
                if let Some(v) = s.running {
                    running.push((t, v));
                }
                if let Some(v) = s.queued {
                    queued.push((t, v));
                }
            }
            _ => {}
        }
    }
    let marks: Vec<(f64, String)> = r
        .summary
        .sweep
        .iter()
        .chain(&r.summary.long_context)
        .filter_map(|l| Some((secs(l.started_at_unix_ms?), l.label())))
        .collect();
    let gpu_lines = |sets: &[Vec<(f64, f64)>]| -> Vec<Line> {
        sets.iter()
            .enumerate()
            .map(|(i, p)| Line {
                name: format!("GPU {i}"),
                points: p.clone(),
                color: color(i),
                dashed: false,
            })
            .collect()
    };
    let why_gpu = r.summary.telemetry.gpu_reason.clone().map_or_else(
        || "no GPU samples in this run".to_string(),
        |w| format!("no GPU samples: {w}"),
    );
    let why_srv = r.summary.telemetry.server_reason.clone().map_or_else(
        || "no engine metrics in this run".to_string(),
        |w| format!("no engine metrics: {w}"),
    );
    let sim = if simulated { " (simulated)" } else { "" };
    let panels = vec![
        Panel {
            title: format!("GPU memory used{sim}"),
            x: XKind::Seconds,
            y_desc: "GiB".into(),
            y_log_ok: false,
            y_top: (total_gib > 0.0).then_some(total_gib),
            lines: gpu_lines(&mem),
            marks: marks.clone(),
            limits: vec![],
            empty: why_gpu.clone(),
        },
        Panel {
            title: format!("GPU utilization{sim}"),
            x: XKind::Seconds,
            y_desc: "%".into(),
            y_log_ok: false,
            y_top: Some(100.0),
            lines: gpu_lines(&util),
            marks: marks.clone(),
            limits: vec![],
            empty: why_gpu,
        },
        Panel {
            title: "Server KV-cache usage".into(),
            x: XKind::Seconds,
            y_desc: "%".into(),
            y_log_ok: false,
            y_top: Some(100.0),
            lines: vec![Line {
                name: "KV cache".into(),
                points: kv,
                color: color(2),
                dashed: false,
            }],
            marks: marks.clone(),
            limits: vec![],
            empty: why_srv.clone(),
        },
        Panel {
            title: "Server requests running and queued".into(),
            x: XKind::Seconds,
            y_desc: "requests".into(),
            y_log_ok: false,
            y_top: None,
            lines: vec![
                Line {
                    name: "running".into(),
                    points: running,
                    color: color(0),
                    dashed: false,
                },
                Line {
                    name: "queued".into(),
                    points: queued,
                    color: color(1),
                    dashed: true,
                },
            ],
            marks,
            limits: vec![],
            empty: why_srv,
        },
    ];
    let footer = if runs.len() > 1 {
        vec![format!(
            "Timeline of {} only: runs have different clocks.",
            r.label
        )]
    } else {
        vec![]
    };
    (panels, footer)
}
