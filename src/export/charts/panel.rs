//! A panel of a figure: its axes, lines, marks and legend, and how it is drawn into its area
//! of a PNG.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;

/// Colour-blind-friendly series colours (Okabe–Ito), one per run.
pub(super) const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

pub(super) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One line on a panel.
pub(super) struct Line {
    pub(super) name: String,
    pub(super) points: Vec<(f64, f64)>,
    pub(super) color: RGBColor,
    pub(super) dashed: bool,
    /// Error bars: `(x, low, high)`, a 95 % interval across `--repeat` runs.
    pub(super) errors: Vec<(f64, f64, f64)>,
}

impl Line {
    /// A grey dashed reference line (`y = x`: where measured points should lie).
    pub(super) fn reference(name: &str, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            points,
            color: RGBColor(130, 130, 130),
            dashed: true,
            errors: Vec::new(),
        }
    }
}

/// What the x axis means.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum XKind {
    /// Concurrency, drawn at log2(C).
    Concurrency,
    /// Context length in K tokens.
    ContextK,
    /// Seconds since the run started.
    Seconds,
    /// Seconds into a replayed trace (when its requests were due), linear.
    TraceSeconds,
    /// Offered request rate (requests/s), linear.
    Rate,
    /// Turn of a conversation (1, 2, …).
    Turn,
    /// Per-user output tokens/s (a request's median decode speed), linear.
    PerUser,
    /// The tool wait before a session's turn, in seconds, linear.
    Wait,
}

pub(super) struct Panel {
    pub(super) title: String,
    pub(super) x: XKind,
    pub(super) y_desc: String,
    /// Allow a log10 y axis when the values span more than 30×.
    pub(super) y_log_ok: bool,
    /// Fixed y top (percentages).
    pub(super) y_top: Option<f64>,
    pub(super) lines: Vec<Line>,
    /// Vertical marks: `(x, label)`.
    pub(super) marks: Vec<(f64, String)>,
    /// Horizontal marks (an SLO limit): `(y, label)`.
    pub(super) limits: Vec<(f64, String)>,
    /// On a time axis, moments across the whole panel (a server restart): `(x, label)`.
    pub(super) events: Vec<(f64, String)>,
    /// Said in the panel when there is nothing to draw.
    pub(super) empty: String,
}

pub(super) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

pub(super) fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

pub(super) fn fmt_num(v: f64) -> String {
    crate::fmt::num(Some(v))
}

/// The plotting area of one panel, in transformed coordinates.
type Chart<'a, 'b> =
    ChartContext<'a, BitMapBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel's axis ranges and scales: concurrency at log2, latency at log10 when it spans more
/// than 30×.
#[derive(Clone, Copy)]
struct Scale {
    x: XKind,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    log_y: bool,
}

impl Scale {
    fn of(p: &Panel, all: &[(f64, f64)]) -> Self {
        let (mut x_lo, mut x_hi) = all
            .iter()
            .fold((f64::MAX, f64::MIN), |a, (x, _)| (a.0.min(*x), a.1.max(*x)));
        for (m, _) in &p.marks {
            x_lo = x_lo.min(*m);
            x_hi = x_hi.max(*m);
        }
        let (x0, x1) = match p.x {
            XKind::Concurrency => (0.0, x_hi.max(1.0).log2().max(1.0) + 0.25),
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
        let (y0, y1) = if log_y {
            (y_min.log10().floor(), y_max.log10().ceil())
        } else {
            (0.0, p.y_top.unwrap_or((y_max * 1.12).max(1e-9)))
        };
        Self {
            x: p.x,
            x0,
            x1,
            y0,
            y1,
            log_y,
        }
    }

    fn tx(self, x: f64) -> f64 {
        match self.x {
            XKind::Concurrency => x.max(1.0).log2(),
            _ => x,
        }
    }

    fn ty(self, y: f64) -> f64 {
        if self.log_y { y.max(1e-9).log10() } else { y }
    }
}

/// What the x axis says under it.
pub(super) fn x_desc(x: XKind) -> &'static str {
    match x {
        XKind::Concurrency => "concurrency (log2 scale)",
        XKind::ContextK => "input tokens (K)",
        XKind::Seconds => "seconds since the run started",
        XKind::TraceSeconds => "seconds into the trace (when requests were due)",
        XKind::Rate => "offered request rate (req/s)",
        XKind::Turn => "turn of the conversation",
        XKind::PerUser => "per-user output tokens/s (median decode speed of a request)",
        XKind::Wait => "tool wait before the turn (s; the median of each bin of turns)",
    }
}

/// An x tick's label (none between whole concurrencies or turns).
fn x_label(x: XKind, v: f64) -> String {
    match x {
        XKind::Concurrency => {
            let c = 2f64.powf(v);
            if (c - c.round()).abs() < 0.01 {
                format!("{}", c.round())
            } else {
                String::new()
            }
        }
        // Below 10K, halves and tenths are ticks worth naming (0.5K, not 0K).
        XKind::ContextK if v.abs() < 10.0 && (v - v.round()).abs() > 0.01 => format!("{v:.1}K"),
        XKind::ContextK => format!("{v:.0}K"),
        XKind::Seconds => format!("{v:.0}"),
        XKind::TraceSeconds | XKind::Rate | XKind::PerUser | XKind::Wait => fmt_num(v),
        XKind::Turn if (v - v.round()).abs() < 0.01 && v >= 0.5 => format!("{}", v.round()),
        XKind::Turn => String::new(),
    }
}

/// A panel with nothing to draw: its frame, its title and why.
fn draw_empty(area: &Area<'_>, p: &Panel) -> Result<(), String> {
    let title_style = ("sans-serif", 24).into_font().style(FontStyle::Bold);
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
    Ok(())
}

/// What a panel's axes must hold: every point drawn and its error bars (a low end below zero
/// stays off a linear axis's floor); empty when it has no point to draw.
fn extent(p: &Panel) -> Vec<(f64, f64)> {
    let mut all: Vec<(f64, f64)> = p
        .lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if all.is_empty() {
        return all;
    }
    all.extend(p.lines.iter().flat_map(|l| {
        l.errors
            .iter()
            .flat_map(|&(x, lo, hi)| [(x, lo.max(0.0)), (x, hi)])
            .filter(|(x, y)| x.is_finite() && y.is_finite())
    }));
    all
}

/// Whether the panel's y axis is drawn log10 (its values span more than 30×, where allowed).
pub(super) fn log_y(p: &Panel) -> bool {
    let all = extent(p);
    !all.is_empty() && Scale::of(p, &all).log_y
}

pub(super) fn draw_panel(area: &Area<'_>, p: &Panel) -> Result<(), String> {
    let all = extent(p);
    if all.is_empty() {
        return draw_empty(area, p);
    }
    let title_style = ("sans-serif", 24).into_font().style(FontStyle::Bold);
    let sc = Scale::of(p, &all);
    let (x0, x1, y0, y1, log_y) = (sc.x0, sc.x1, sc.y0, sc.y1, sc.log_y);
    let mut chart = ChartBuilder::on(area)
        .caption(&p.title, title_style)
        .margin(12)
        .x_label_area_size(55)
        .y_label_area_size(85)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    let xk = p.x;
    let x_fmt = move |v: &f64| x_label(xk, *v);
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
        .x_desc(x_desc(p.x))
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
    draw_marks(&mut chart, p, sc)?;
    for l in &p.lines {
        draw_line(&mut chart, l, sc)?;
    }
    if !legend(p).is_empty() {
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

/// Whether a line has a point to draw.
fn drawn(l: &Line) -> bool {
    l.points.iter().any(|(x, y)| x.is_finite() && y.is_finite())
}

/// The panel's legend: the names of its named lines that have a point to draw (a run with
/// nothing in this panel is not listed), in drawing order; none for an empty panel.
pub(super) fn legend(p: &Panel) -> Vec<String> {
    p.lines
        .iter()
        .filter(|l| !l.name.is_empty() && drawn(l))
        .map(|l| l.name.clone())
        .collect()
}

/// The panel's vertical marks (level starts, skipped lengths) and horizontal limits (an SLO).
/// On a time axis each mark starts a level: level spans are drawn as bands instead.
fn draw_marks<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, p: &Panel, sc: Scale) -> Result<(), String> {
    let (x0, x1, y0, y1) = (sc.x0, sc.x1, sc.y0, sc.y1);
    if p.x == XKind::Seconds {
        draw_bands(chart, p, sc)?;
    }
    let per_px = (x1 - x0) / f64::from(chart.plotting_area().dim_in_pixel().0.max(1));
    for (m, label) in p.marks.iter().filter(|_| p.x != XKind::Seconds) {
        let grey = BLACK.mix(0.35).stroke_width(1);
        vertical(
            chart,
            (sc.tx(*m), 0.0),
            (y0, y1),
            label,
            (grey, 6),
            BLACK.mix(0.6),
        )?;
    }
    let red = RGBColor(170, 30, 30);
    for (m, label) in p.events.iter().filter(|_| p.x == XKind::Seconds) {
        // Beside the line, not across it: the text's top is on the right once turned.
        let at = (sc.tx(*m), 20.0 * per_px);
        vertical(
            chart,
            at,
            (y0, y1),
            label,
            (red.mix(0.8).stroke_width(2), 8),
            red.into(),
        )?;
    }
    for (y, label) in &p.limits {
        let y = sc.ty(*y);
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
    Ok(())
}

/// A dashed vertical line across the panel at `x`, its label turned along it, `dx` to its right.
fn vertical<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    (x, dx): (f64, f64),
    (y0, y1): (f64, f64),
    label: &str,
    (line, dash): (ShapeStyle, u32),
    text: RGBAColor,
) -> Result<(), String> {
    chart
        .draw_series(DashedLineSeries::new(
            vec![(x, y0), (x, y1)],
            dash,
            dash.min(6),
            line,
        ))
        .map_err(err)?;
    chart
        .draw_series(std::iter::once(Text::new(
            label.to_string(),
            (x + dx, y1),
            ("sans-serif", 15)
                .into_font()
                .color(&text)
                .transform(FontTransform::Rotate90),
        )))
        .map_err(err)?;
    Ok(())
}

/// Each level's span on a time axis as a faint band behind the data (every other one shaded),
/// its label along the bottom where the band is wide enough and a tick where it starts: the
/// boundaries read without lines across the series.
fn draw_bands<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, p: &Panel, sc: Scale) -> Result<(), String> {
    let (x0, x1, y0, y1) = (sc.x0, sc.x1, sc.y0, sc.y1);
    let px_w = f64::from(chart.plotting_area().dim_in_pixel().0.max(1));
    let per_px = (x1 - x0) / px_w;
    let tick = (y1 - y0) * 0.03;
    for (i, (m, label)) in p.marks.iter().enumerate() {
        let start = sc.tx(*m);
        let end = p.marks.get(i + 1).map_or(x1, |n| sc.tx(n.0));
        if i % 2 == 0 {
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(start, y0), (end, y1)],
                    BLACK.mix(0.06).filled(),
                )))
                .map_err(err)?;
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(start, y0), (start, y0 + tick)],
                BLACK.mix(0.6).stroke_width(2),
            )))
            .map_err(err)?;
        // About 8 px a character at 15 px.
        let needs = (label.chars().count() as f64 * 8.0 + 8.0) * per_px;
        if end - start >= needs {
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (start + 4.0 * per_px, y0 + tick * 1.3),
                    ("sans-serif", 15).into_font().color(&BLACK.mix(0.7)).pos(
                        plotters::style::text_anchor::Pos::new(
                            plotters::style::text_anchor::HPos::Left,
                            plotters::style::text_anchor::VPos::Bottom,
                        ),
                    ),
                )))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// One line, its legend key, and markers when it is sparse.
fn draw_line<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>, l: &Line, sc: Scale) -> Result<(), String> {
    let pts: Vec<(f64, f64)> = l
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|&(x, y)| (sc.tx(x), sc.ty(y)))
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
    // In the legend only with a point drawn ([`legend`]).
    if !l.name.is_empty() && !pts.is_empty() {
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
    // Each interval as a vertical bar with caps.
    let bar = l.color.stroke_width(2);
    for &(x, lo, hi) in l
        .errors
        .iter()
        .filter(|e| e.1.is_finite() && e.2.is_finite())
    {
        let (x, lo, hi) = (sc.tx(x), sc.ty(lo), sc.ty(hi));
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x, lo), (x, hi)],
                bar,
            )))
            .map_err(err)?;
        for y in [lo, hi] {
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x, y)) + PathElement::new(vec![(-7, 0), (7, 0)], bar),
                ))
                .map_err(err)?;
        }
    }
    // Markers on sparse series (levels); dense time series read better as plain lines.
    if pts.len() <= 40 {
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 5, l.color.filled())))
            .map_err(err)?;
    }
    Ok(())
}

/// Splits `s` into lines of at most `width` characters at spaces.
pub(super) fn wrap(s: &str, width: usize) -> Vec<String> {
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
