//! One module per tab; each draws its body from `&App`.

mod cells;
pub mod log;
pub mod long_context;
mod rates;
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
    let fmt = |v: f64| crate::fmt::num(Some(v));
    // One label a row at most. The plot's rows: inside the borders, less the x-axis labels and
    // the axis line (which ratatui leaves out when only two rows are inside). On a one-row plot
    // "100" and "0" would otherwise print as "1000"; it shows the scale's top alone (ratatui
    // draws labels only in pairs, so the pair is the top twice).
    let inner = area.height.saturating_sub(2);
    let rows = if inner >= 3 {
        inner - 2
    } else {
        inner.saturating_sub(1)
    };
    let y_labels: Vec<Span> = match rows {
        0 | 1 => vec![Span::raw(fmt(y_top)), Span::raw(fmt(y_top))],
        2 => vec![Span::raw("0"), Span::raw(fmt(y_top))],
        _ => vec![
            Span::raw("0"),
            Span::raw(fmt(y_top / 2.0)),
            Span::raw(fmt(y_top)),
        ],
    };
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
                .labels(y_labels)
                .style(th.dim),
        )
        .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The y labels of a chart `height` rows tall with a fixed top of 100, read off the
    /// buffer: the text between the left border and the axis on each row.
    fn y_labels(height: u16) -> Vec<String> {
        let area = Rect::new(0, 0, 40, height);
        let mut buf = Buffer::empty(area);
        let points = [(0.0, 20.0), (1.0, 100.0)];
        let series = [Series {
            name: "u",
            points: &points,
            style: Style::default(),
        }];
        let x = ([0.0, 1.0], vec!["0 s".to_string(), "1 s".to_string()]);
        let th = Theme::new(true);
        line_chart_marked("t", &series, x, &[], Some(100.0), "", area, &mut buf, &th);
        (1..height.saturating_sub(2))
            .map(|y| {
                let row: String = (1..area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect();
                row.split(['│', '└'])
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
        assert_eq!(y_labels(4), ["100"]);
        assert_eq!(y_labels(5), ["100"]);
        assert_eq!(y_labels(6), ["100", "0"]);
        assert_eq!(y_labels(7), ["100", "50.0", "0"]);
        for h in 4..30 {
            for l in y_labels(h) {
                assert!(
                    ["0", "50.0", "100"].contains(&l.as_str()),
                    "height {h}: {l:?}"
                );
            }
        }
    }
}
