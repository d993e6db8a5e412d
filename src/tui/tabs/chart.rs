//! The tabs' line chart: ratatui's `Chart`, plus what it cannot draw itself: ticks on the x axis
//! at given positions (each measured level, or each level's start on a time axis) with labels
//! where they fit, and the value of one highlighted point written beside it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph, Widget};

use crate::tui::theme::Theme;

/// One line series of a chart.
pub struct Series<'a> {
    pub name: &'a str,
    pub points: &'a [(f64, f64)],
    pub style: Style,
    /// How its points are drawn: braille lines, cell-sized dots (a baseline: it reads apart
    /// without colour), a pass's own marker ([`PASS_MARKERS`]).
    marker: Marker,
    /// Points alone, not joined (the level in progress).
    scatter: bool,
    /// Named in the legend under the chart (a pass's curve), with `glyph`.
    legend: Option<&'static str>,
    /// Drawn over the series of lower `z` (the headline's curve over the other passes', the
    /// level in progress over every line).
    z: i16,
}

/// How the curve of each series of the run's passes is drawn, the headline's first, and the
/// glyph that stands for it in the legend: they read apart without colour (`NO_COLOR`).
pub const PASS_MARKERS: [(Marker, &str); 4] = [
    (Marker::Braille, "⠤"),
    (Marker::Dot, "•"),
    (Marker::Bar, "▄"),
    (Marker::HalfBlock, "▀"),
];

impl<'a> Series<'a> {
    /// A braille line.
    pub fn line(name: &'a str, points: &'a [(f64, f64)], style: Style) -> Self {
        Self {
            name,
            points,
            style,
            marker: Marker::Braille,
            scatter: false,
            legend: None,
            z: 0,
        }
    }

    /// A dotted line (the baseline's curve).
    pub fn dotted(name: &'a str, points: &'a [(f64, f64)], style: Style) -> Self {
        Self {
            marker: Marker::Dot,
            ..Self::line(name, points, style)
        }
    }

    /// Points drawn alone as whole cells (the level in progress).
    pub fn pending(name: &'a str, points: &'a [(f64, f64)], style: Style) -> Self {
        Self {
            marker: Marker::Block,
            scatter: true,
            z: 1,
            ..Self::line(name, points, style)
        }
    }

    /// The curve of the `k`th series of the run's passes (the headline's is the 0th), drawn with
    /// its own marker and named `name` in the legend when the chart has several.
    pub fn pass(name: &'a str, points: &'a [(f64, f64)], style: Style, k: usize) -> Self {
        let (marker, glyph) = PASS_MARKERS[k % PASS_MARKERS.len()];
        Self {
            marker,
            legend: Some(glyph),
            z: -i16::try_from(k).unwrap_or(i16::MAX),
            ..Self::line(name, points, style)
        }
    }
}

/// The style of the `k`th series of the run's passes on a chart whose first is `th.series[c]`.
pub fn pass_style(th: &Theme, c: usize, k: usize) -> Style {
    Style::default().fg(th.series[(c + k) % th.series.len()])
}

/// The series of `curves` (one per series of the passes, the headline's first), each named by
/// its pass, or `name` in a run of one.
pub fn pass_series<'a>(
    curves: &'a [crate::tui::views::Curve],
    name: &'a str,
    th: &Theme,
    c: usize,
) -> Vec<Series<'a>> {
    curves
        .iter()
        .enumerate()
        .map(|(k, cv)| {
            let label = if cv.label.is_empty() {
                name
            } else {
                cv.label.as_str()
            };
            Series::pass(label, &cv.points, pass_style(th, c, k), k)
        })
        .collect()
}

/// What a chart draws; `LineChart::render` draws it.
pub struct LineChart<'a> {
    pub title: &'a str,
    pub series: &'a [Series<'a>],
    /// The x range.
    pub x: [f64; 2],
    /// The labels at the two ends of the x axis.
    pub x_ends: [String; 2],
    /// Ticks on the x axis, with their labels (written where they fit, left to right).
    pub ticks: &'a [(f64, String)],
    /// A fixed top for the y axis (100 for percentages); else the data's top plus 15 %.
    pub y_fixed: Option<f64>,
    /// A point whose value is written beside it (the highlighted level's).
    pub highlight: Option<(f64, f64)>,
    /// The highlighted point is the level in progress: its value is written with an ellipsis.
    pub highlight_pending: bool,
    /// What the panel says when no series has a point.
    pub empty: &'a str,
}

/// A titled line chart with `x.1[0]` and the last of `x.1` under the axis ends.
pub fn line_chart(
    title: &str,
    series: &[Series<'_>],
    x: ([f64; 2], Vec<String>),
    empty: &str,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let mut labels = x.1;
    let last = labels.pop().unwrap_or_default();
    let first = labels.into_iter().next().unwrap_or_default();
    LineChart {
        title,
        series,
        x: x.0,
        x_ends: [first, last],
        ticks: &[],
        y_fixed: None,
        highlight: None,
        highlight_pending: false,
        empty,
    }
    .render(area, buf, th);
}

/// One curve over the levels a series of the run's passes (`curves`, the headline's first,
/// each its own marker and colour from `th.series[color]`, named in a legend under the chart
/// when there are several): the baseline's points dotted and dim behind the headline, a tick
/// at every level, one value written by its point: the level in progress's (apart from its
/// line, with an ellipsis), else the headline's highlighted level's.
#[allow(clippy::too_many_arguments)]
pub fn curve_chart(
    title: &str,
    name: &str,
    curves: &[crate::tui::views::Curve],
    color: usize,
    (x, x_ends, ticks): ([f64; 2], [String; 2], &[(f64, String)]),
    empty: &str,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let mut series = Vec::with_capacity(2 * curves.len() + 1);
    if let Some(c) = curves.first().filter(|c| !c.base.is_empty()) {
        series.push(Series::dotted("baseline", &c.base, th.dim));
    }
    series.extend(pass_series(curves, name, th, color));
    let running: Vec<(usize, [(f64, f64); 1])> = curves
        .iter()
        .enumerate()
        .filter_map(|(k, c)| Some((k, [c.running?])))
        .collect();
    for (k, p) in &running {
        series.push(Series::pending("so far", p, pass_style(th, color, *k)));
    }
    // The value written: the level in progress's, else the headline's highlighted level's.
    let highlight = curves
        .iter()
        .find_map(|c| c.running)
        .map(|p| (p, true))
        .or_else(|| curves.iter().find_map(|c| c.highlight).map(|p| (p, false)));
    LineChart {
        title,
        series: &series,
        x,
        x_ends,
        ticks,
        y_fixed: None,
        highlight: highlight.map(|h| h.0),
        highlight_pending: highlight.is_some_and(|h| h.1),
        empty,
    }
    .render(area, buf, th);
}

/// The legend of `series` that are passes' curves, to stand in the chart's bottom border:
/// `⠤ plain  • json`, closer (`⠤plain •json`) or cut where `room` is short; none for fewer
/// than two.
fn legend(series: &[Series<'_>], room: usize) -> Option<ratatui::text::Line<'static>> {
    let entries: Vec<(&str, &str, Style)> = series
        .iter()
        .filter_map(|s| Some((s.legend?, s.name, s.style)))
        .collect();
    if entries.len() < 2 {
        return None;
    }
    let width = |gap: &str, sep: &str| {
        entries
            .iter()
            .map(|(g, n, _)| g.chars().count() + gap.len() + n.chars().count())
            .sum::<usize>()
            + sep.len() * (entries.len() - 1)
            + 2
    };
    let (gap, sep) = [(" ", "  "), ("", " ")]
        .into_iter()
        .find(|(g, s)| width(g, s) <= room)
        .unwrap_or(("", " "));
    let mut spans = vec![Span::raw(" ")];
    let mut used = 1;
    for (i, (glyph, name, style)) in entries.iter().enumerate() {
        let lead = if i == 0 { "" } else { sep };
        let w = lead.len() + glyph.chars().count() + gap.len() + name.chars().count();
        // Room kept for the closing space, and for `…` where the rest is cut.
        if used + w + 2 > room && i > 0 {
            spans.push(Span::raw(" …"));
            break;
        }
        spans.push(Span::raw(lead));
        spans.push(Span::styled(*glyph, *style));
        spans.push(Span::raw(format!("{gap}{name}")));
        used += w;
    }
    spans.push(Span::raw(" "));
    Some(ratatui::text::Line::from(spans))
}

impl LineChart<'_> {
    /// The top of the y axis.
    fn y_top(&self) -> f64 {
        self.y_fixed.unwrap_or_else(|| {
            self.series
                .iter()
                .map(|s| crate::tui::app::y_max(s.points))
                .fold(0.0, f64::max)
                .max(1e-9)
                * 1.15
        })
    }

    /// Draws the chart into `area`.
    pub fn render(&self, area: Rect, buf: &mut Buffer, th: &Theme) {
        let mut block = th.panel(format!(" {} ", self.title));
        if let Some(l) = legend(self.series, usize::from(area.width.saturating_sub(4))) {
            block = block.title_bottom(l);
        }
        if self.series.iter().all(|s| s.points.is_empty()) {
            Paragraph::new(Span::styled(self.empty, th.dim))
                .block(block)
                .render(area, buf);
            return;
        }
        let y_top = self.y_top();
        // Drawn lowest `z` first (a stable sort: else in the order given); the legend keeps
        // the order given, the headline first.
        let mut drawn: Vec<&Series> = self.series.iter().collect();
        drawn.sort_by_key(|s| s.z);
        let datasets: Vec<Dataset> = drawn
            .into_iter()
            .map(|s| {
                Dataset::default()
                    .name(s.name.to_string())
                    .marker(s.marker)
                    .graph_type(if s.scatter {
                        GraphType::Scatter
                    } else {
                        GraphType::Line
                    })
                    .style(s.style)
                    .data(s.points)
            })
            .collect();
        Chart::new(datasets)
            .block(block)
            // The title names the series; a legend box would cover the newest points.
            .legend_position(None)
            .x_axis(
                Axis::default()
                    .bounds(self.x)
                    .labels(self.x_ends.iter().map(|l| Span::raw(l.clone())))
                    .style(th.dim),
            )
            .y_axis(
                Axis::default()
                    .bounds([0.0, y_top])
                    .labels(y_labels(area.height, y_top))
                    .style(th.dim),
            )
            .render(area, buf);
        if let Some(plot) = plot_area(area, buf) {
            self.draw_ticks(area, plot, buf, th);
            if let Some(p) = self.highlight {
                self.draw_value(plot, p, y_top, buf, th);
            }
        }
    }

    /// The column of `x` in `plot`.
    fn col(&self, plot: Rect, x: f64) -> Option<u16> {
        let span = self.x[1] - self.x[0];
        if span.is_nan() || span <= 0.0 || x < self.x[0] || x > self.x[1] || plot.width == 0 {
            return None;
        }
        let f = (x - self.x[0]) / span;
        Some(plot.x + (f * f64::from(plot.width - 1)).round() as u16)
    }

    /// Ticks on the axis row under `plot`, and their labels on the row below where they fit
    /// beside each other and the right end's label (`area`: the whole chart, borders included).
    fn draw_ticks(&self, area: Rect, plot: Rect, buf: &mut Buffer, th: &Theme) {
        if self.ticks.is_empty() {
            return;
        }
        let (axis_y, label_y) = (plot.bottom(), plot.bottom() + 1);
        let (left, right) = (area.x + 1, area.right().saturating_sub(1));
        if axis_y + 1 >= area.bottom() {
            return;
        }
        for (x, _) in self.ticks {
            if let Some(c) = self.col(plot, *x) {
                buf[(c, axis_y)].set_symbol("┴").set_style(th.dim);
            }
        }
        if label_y + 1 >= area.bottom() {
            return;
        }
        // The row is the ticks' labels, then the right end's label, right-aligned.
        for c in left..right {
            buf[(c, label_y)].set_symbol(" ");
        }
        let end = &self.x_ends[1];
        let end_x = right.saturating_sub(end.chars().count() as u16);
        buf.set_string(end_x, label_y, end, th.dim);
        let mut free_from = left;
        for (x, label) in self.ticks {
            let Some(c) = self.col(plot, *x) else {
                continue;
            };
            let w = label.chars().count() as u16;
            // Centred on the tick where there is room, never into the end label.
            let start = c.saturating_sub(w / 2).max(free_from);
            if start + w >= end_x || start > c {
                continue;
            }
            buf.set_string(start, label_y, label, th.dim);
            free_from = start + w + 1;
        }
    }

    /// The value of `p` written just above its point (left of it near the right edge).
    fn draw_value(&self, plot: Rect, p: (f64, f64), y_top: f64, buf: &mut Buffer, th: &Theme) {
        let Some(c) = self.col(plot, p.0) else {
            return;
        };
        if plot.height < 2 || y_top.is_nan() || y_top <= 0.0 {
            return;
        }
        let f = (p.1 / y_top).clamp(0.0, 1.0);
        let row = plot.bottom() - 1 - (f * f64::from(plot.height - 1)).round() as u16;
        let mut text = crate::fmt::num(Some(p.1));
        if self.highlight_pending {
            text.push('…');
        }
        let w = text.chars().count() as u16;
        let y = if row > plot.y { row - 1 } else { row + 1 };
        let x = if c + w < plot.right() {
            c
        } else {
            c.saturating_sub(w).max(plot.x)
        };
        buf.set_string(x, y, &text, th.accent);
    }
}

/// The y labels for a chart `height` rows tall: one a row at most. The plot's rows: inside the
/// borders, less the x-axis labels and the axis line (which ratatui leaves out when only two
/// rows are inside). On a one-row plot "100" and "0" would otherwise print as "1000"; it shows
/// the scale's top alone (ratatui draws labels only in pairs, so the pair is the top twice).
fn y_labels(height: u16, y_top: f64) -> Vec<Span<'static>> {
    let fmt = |v: f64| crate::fmt::num(Some(v));
    let inner = height.saturating_sub(2);
    let rows = if inner >= 3 {
        inner - 2
    } else {
        inner.saturating_sub(1)
    };
    match rows {
        0 | 1 => vec![Span::raw(fmt(y_top)), Span::raw(fmt(y_top))],
        2 => vec![Span::raw("0"), Span::raw(fmt(y_top))],
        _ => vec![
            Span::raw("0"),
            Span::raw(fmt(y_top / 2.0)),
            Span::raw(fmt(y_top)),
        ],
    }
}

/// Where ratatui drew the plot inside the chart in `area`: right of the y axis, above the x
/// axis, read off the buffer by the axis corner `└` (ratatui keeps its layout to itself).
fn plot_area(area: Rect, buf: &Buffer) -> Option<Rect> {
    let inner = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
    for y in (inner.y..inner.bottom()).rev() {
        for x in inner.x..inner.right() {
            if buf[(x, y)].symbol() == "└" {
                let plot = Rect::new(
                    x + 1,
                    inner.y,
                    inner.right().saturating_sub(x + 1),
                    y - inner.y,
                );
                return (plot.width > 0 && plot.height > 0).then_some(plot);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(buf: &Buffer) -> Vec<String> {
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect()
            })
            .collect()
    }

    /// The y labels of a chart `height` rows tall with a fixed top of 100, read off the
    /// buffer: the text between the left border and the axis on each row.
    fn y_labels_drawn(height: u16) -> Vec<String> {
        let area = Rect::new(0, 0, 40, height);
        let mut buf = Buffer::empty(area);
        let points = [(0.0, 20.0), (1.0, 100.0)];
        let series = [Series::line("u", &points, Style::default())];
        let th = Theme::new(true);
        LineChart {
            title: "t",
            series: &series,
            x: [0.0, 1.0],
            x_ends: ["0 s".into(), "1 s".into()],
            ticks: &[],
            y_fixed: Some(100.0),
            highlight: None,
            highlight_pending: false,
            empty: "",
        }
        .render(area, &mut buf, &th);
        rows(&buf)[1..height.saturating_sub(2) as usize]
            .iter()
            .map(|row| {
                row[3..]
                    .split(['│', '└'])
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_string()
            })
            .filter(|l| !l.is_empty())
            .collect()
    }

    #[test]
    fn y_labels_never_run_together() {
        // One plot row: the top alone, not "100" over "0" and "50.0" (read as "1000").
        assert_eq!(y_labels_drawn(4), ["100"]);
        assert_eq!(y_labels_drawn(5), ["100"]);
        assert_eq!(y_labels_drawn(6), ["100", "0"]);
        assert_eq!(y_labels_drawn(7), ["100", "50.0", "0"]);
        for h in 4..30 {
            for l in y_labels_drawn(h) {
                assert!(
                    ["0", "50.0", "100"].contains(&l.as_str()),
                    "height {h}: {l:?}"
                );
            }
        }
    }

    /// Ticks sit on the axis at their x, labels under them where they fit, and the
    /// highlighted point's value is written next to it.
    #[test]
    fn ticks_and_the_highlighted_value_are_where_the_data_is() {
        let area = Rect::new(0, 0, 42, 10);
        let mut buf = Buffer::empty(area);
        let points = [(0.0, 10.0), (5.0, 50.0), (10.0, 100.0)];
        let series = [Series::line("v", &points, Style::default())];
        let ticks: Vec<(f64, String)> = [0.0, 1.0, 5.0, 10.0]
            .iter()
            .map(|x| (*x, format!("{x}")))
            .collect();
        LineChart {
            title: "t",
            series: &series,
            x: [0.0, 10.0],
            x_ends: ["0".into(), "end".into()],
            ticks: &ticks,
            y_fixed: None,
            highlight: Some((5.0, 50.0)),
            highlight_pending: false,
            empty: "",
        }
        .render(area, &mut buf, &Theme::new(true));
        let r = rows(&buf);
        let plot = plot_area(area, &buf).unwrap();
        let axis = &r[plot.bottom() as usize];
        let tick_cols: Vec<usize> = axis
            .chars()
            .enumerate()
            .filter(|(_, c)| *c == '┴')
            .map(|(i, _)| i)
            .collect();
        // Four ticks: x = 0, 1, 5 and 10 over a plot `plot.width` wide.
        let want: Vec<usize> = [0.0, 1.0, 5.0, 10.0]
            .iter()
            .map(|x| plot.x as usize + (x / 10.0 * f64::from(plot.width - 1)).round() as usize)
            .collect();
        assert_eq!(tick_cols, want, "{axis}");
        let labels = &r[plot.bottom() as usize + 1];
        // "0" and "5" fit; "1" would touch "0"; "10" would run into the end label.
        assert!(labels.contains(" 5 "), "{labels}");
        assert!(labels.trim_end().ends_with("end│"), "{labels}");
        assert!(!labels.contains("10"), "{labels}");
        // The value of the point at x = 5: "50.0", in the plot just above the middle.
        assert!(r.iter().any(|row| row.contains("50.0")), "{r:?}");
    }
}
