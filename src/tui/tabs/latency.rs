//! The latency panel: the TTFT histogram of the level in progress (the last level's after it
//! ends), its bars from the fold's HDR histogram in equal bins, with p50, p90 and p99 ticked on
//! the axis, as oha draws response times. A saved run, which keeps percentiles but no
//! histogram, lists each level's percentiles instead.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};

use crate::fmt::num;
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::tui::views::LatencyView;

/// Eighths of a cell, bottom up.
const BARS: [&str; 9] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

/// Draws the panel.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let Some(v) = &app.views.latency else {
        render_percentiles(app, area, buf, th);
        return;
    };
    // The level by its full label (its pass with it); the count goes first when it is narrow.
    let title = crate::tui::text::first_fitting(
        &[
            format!(
                " TTFT ms · {} · {} request{} ",
                v.label,
                v.count,
                if v.count == 1 { "" } else { "s" }
            ),
            format!(" TTFT ms · {} ", v.label),
        ],
        usize::from(area.width.saturating_sub(2)),
    );
    histogram(title, v, area, buf, th);
}

/// Draws `v` as a histogram in a panel titled `title`: p50 · p90 · p99 above, the bars, the
/// axis from its low to its high end with the percentiles ticked.
pub fn histogram(title: String, v: &LatencyView, area: Rect, buf: &mut Buffer, th: &Theme) {
    let block = th.panel(title);
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height < 4 || inner.width < 8 {
        return;
    }
    let summary = format!(
        "p50 {} · p90 {} · p99 {} ms",
        num(Some(v.p50)),
        num(Some(v.p90)),
        num(Some(v.p99))
    );
    buf.set_string(
        inner.x,
        inner.y,
        crate::tui::text::fit(&summary, inner.width as usize),
        th.accent,
    );
    let inner = Rect::new(inner.x, inner.y + 1, inner.width, inner.height - 1);
    let bar_rows = inner.height - 2;
    let cols = column_counts(v, inner.width as usize);
    let top = cols.iter().copied().max().unwrap_or(0).max(1);
    let style = Style::default().fg(th.series[0]);
    for (c, &n) in cols.iter().enumerate() {
        // Height in eighths of a row; any count at all shows at least one eighth.
        let eighths = if n == 0 {
            0
        } else {
            ((n as f64 / top as f64) * f64::from(bar_rows) * 8.0)
                .round()
                .max(1.0) as u32
        };
        for r in 0..bar_rows {
            let filled = eighths.saturating_sub(u32::from(r) * 8).min(8) as usize;
            let y = inner.y + bar_rows - 1 - r;
            buf[(inner.x + c as u16, y)]
                .set_symbol(BARS[filled])
                .set_style(style);
        }
    }
    let axis_y = inner.y + bar_rows;
    for c in 0..inner.width {
        buf[(inner.x + c, axis_y)].set_symbol("─").set_style(th.dim);
    }
    let label_y = axis_y + 1;
    let lo = num(Some(v.bins.lo));
    let hi = num(Some(v.bins.hi));
    buf.set_string(inner.x, label_y, &lo, th.dim);
    let hi_x = inner.right().saturating_sub(hi.chars().count() as u16);
    buf.set_string(hi_x, label_y, &hi, th.dim);
    let mut free_from = inner.x + lo.chars().count() as u16 + 1;
    for (name, at) in [("p50", v.p50), ("p90", v.p90), ("p99", v.p99)] {
        let Some(c) = column_of(v, at, inner.width) else {
            continue;
        };
        let x = inner.x + c;
        buf[(x, axis_y)].set_symbol("┴").set_style(th.accent);
        let start = x.saturating_sub(1).max(free_from);
        if start + 3 < hi_x && start <= x {
            buf.set_string(start, label_y, name, th.accent);
            free_from = start + 4;
        }
    }
}

/// The bins' counts over `width` columns: neighbouring bins summed when there are fewer
/// columns than bins, a bin repeated over several columns when there are more.
fn column_counts(v: &LatencyView, width: usize) -> Vec<u64> {
    let bins = &v.bins.counts;
    if bins.is_empty() || width == 0 {
        return Vec::new();
    }
    (0..width)
        .map(|c| {
            let from = c * bins.len() / width;
            let to = ((c + 1) * bins.len() / width).max(from + 1).min(bins.len());
            bins[from..to].iter().sum()
        })
        .collect()
}

/// The column of value `x` (ms) over `width` columns from the bins' low to high end.
fn column_of(v: &LatencyView, x: f64, width: u16) -> Option<u16> {
    let span = v.bins.hi - v.bins.lo;
    if width == 0 {
        return None;
    }
    if span <= 0.0 {
        return Some(0);
    }
    let f = ((x - v.bins.lo) / span).clamp(0.0, 1.0);
    Some((f * f64::from(width - 1)).round() as u16)
}

/// Without a histogram (a saved run): TTFT p50 / p90 / p99 of each sweep level (computed with
/// the views), the headline series' first.
fn render_percentiles(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let rows = &app.views.sweep.ttft_by_level;
    let w = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut lines = vec![Line::styled(
        format!("{:<w$} p50 / p90 / p99", "level"),
        th.title,
    )];
    for (label, [p50, p90, p99]) in rows {
        lines.push(Line::raw(format!(
            "{label:<w$} {} / {} / {}",
            num(Some(*p50)),
            num(Some(*p90)),
            num(Some(*p99))
        )));
    }
    if lines.len() == 1 {
        lines = vec![Line::styled(
            "the TTFT histogram of the level in progress appears with its first requests",
            th.dim,
        )];
    }
    Paragraph::new(lines)
        .block(th.panel(" TTFT ms by level "))
        .wrap(ratatui::widgets::Wrap { trim: true })
        .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::dist::Bins;

    fn view(counts: Vec<u64>) -> LatencyView {
        LatencyView {
            label: "C=8".into(),
            bins: Bins {
                lo: 100.0,
                hi: 200.0,
                counts,
            },
            p50: 150.0,
            p90: 190.0,
            p99: 200.0,
            count: 10,
        }
    }

    #[test]
    fn columns_sum_or_repeat_the_bins() {
        let v = view(vec![1, 2, 3, 4]);
        assert_eq!(column_counts(&v, 2), [3, 7]);
        assert_eq!(column_counts(&v, 8), [1, 1, 2, 2, 3, 3, 4, 4]);
        assert_eq!(column_counts(&v, 4), [1, 2, 3, 4]);
        // With no more columns than bins, every request is in exactly one column.
        for w in 1..=4 {
            assert_eq!(column_counts(&v, w).iter().sum::<u64>(), 10, "{w}");
        }
        assert_eq!(column_of(&v, 100.0, 11), Some(0));
        assert_eq!(column_of(&v, 150.0, 11), Some(5));
        assert_eq!(column_of(&v, 250.0, 11), Some(10));
    }
}
