//! One module per tab; each draws its body from `&App`.

pub mod log;
pub mod long_context;
pub mod sweep;
pub mod telemetry;
pub mod turns;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph, Widget};

use super::theme::Theme;

/// One line series of a chart.
pub struct Series<'a> {
    pub name: &'a str,
    pub points: &'a [(f64, f64)],
    pub style: Style,
}

/// A titled line chart with `x_labels` under the axis; says so when there is nothing to draw.
pub fn line_chart(
    title: &str,
    series: &[Series<'_>],
    x: ([f64; 2], Vec<String>),
    empty: &str,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    line_chart_marked(title, series, x, &[], None, empty, area, buf, th);
}

/// [`line_chart`] with faint vertical marks at `marks` (level starts on a time axis) and an
/// optional fixed top for the y axis (100 for percentages).
#[allow(clippy::too_many_arguments)]
pub fn line_chart_marked(
    title: &str,
    series: &[Series<'_>],
    x: ([f64; 2], Vec<String>),
    marks: &[f64],
    y_fixed: Option<f64>,
    empty: &str,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let block = th.panel(format!(" {title} "));
    if series.iter().all(|s| s.points.is_empty()) {
        Paragraph::new(Span::styled(empty, th.dim))
            .block(block)
            .render(area, buf);
        return;
    }
    let y_top = y_fixed.unwrap_or_else(|| {
        series
            .iter()
            .map(|s| super::app::y_max(s.points))
            .fold(0.0, f64::max)
            .max(1e-9)
            * 1.15
    });
    let mark_points: Vec<[(f64, f64); 2]> = marks.iter().map(|&m| [(m, 0.0), (m, y_top)]).collect();
    let mut datasets: Vec<Dataset> = mark_points
        .iter()
        .map(|p| {
            Dataset::default()
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(th.dim)
                .data(p)
        })
        .collect();
    datasets.extend(series.iter().map(|s| {
        Dataset::default()
            .name(s.name.to_string())
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(s.style)
            .data(s.points)
    }));
    let fmt = |v: f64| crate::export::markdown::num(Some(v));
    Chart::new(datasets)
        .block(block)
        // The title names the series; a legend box would cover the newest points.
        .legend_position(None)
        .x_axis(
            Axis::default()
                .bounds(x.0)
                .labels(x.1.into_iter().map(Span::raw).collect::<Vec<_>>())
                .style(th.dim),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, y_top])
                .labels(vec![
                    Span::raw("0"),
                    Span::raw(fmt(y_top / 2.0)),
                    Span::raw(fmt(y_top)),
                ])
                .style(th.dim),
        )
        .render(area, buf);
}
