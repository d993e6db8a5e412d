//! A level's details, in place of the tab's body while open (Enter on a picked level; Esc
//! closes): its figures, its TTFT and ITL histograms, its output tokens over time and its
//! failures. Everything drawn was computed in update (`App::refresh_detail`).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Sparkline, Widget, Wrap};

use crate::tui::app::App;
use crate::tui::text::{first_fitting, fit};
use crate::tui::theme::Theme;
use crate::tui::views::{DetailView, LatencyView};

/// Draws the details of `v` into the tab's body.
pub fn render(app: &App, v: &DetailView, area: Rect, buf: &mut Buffer, th: &Theme) {
    let levels = app.tab_levels();
    let at = levels
        .iter()
        .position(|&i| i == v.index)
        .map_or(0, |p| p + 1);
    let room = usize::from(area.width.saturating_sub(2));
    let title = first_fitting(
        &[
            format!(
                " {} · level {at} of {} · ↑↓ other levels · Esc closes ",
                v.title,
                levels.len()
            ),
            format!(" {} · ↑↓ · Esc closes ", v.title),
            format!(" {} ", v.title),
        ],
        room,
    );
    let mut lines: Vec<Line> = pack(&v.facts, room).into_iter().map(Line::raw).collect();
    if let Some(n) = &v.note {
        lines.push(Line::styled(fit(n, room), th.dim));
    }
    let figures = lines.len().max(1) as u16 + 2;
    let [top, middle, bottom] = Layout::vertical([
        Constraint::Length(figures),
        Constraint::Min(6),
        Constraint::Percentage(30),
    ])
    .areas(area);
    Paragraph::new(lines)
        .block(th.panel(title))
        .render(top, buf);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(middle);
    histogram_or_nothing("TTFT", "requests", v.ttft.as_ref(), left, buf, th);
    histogram_or_nothing("ITL", "gaps", v.itl.as_ref(), right, buf, th);
    let [tokens, ends, failures] = Layout::horizontal([
        Constraint::Percentage(40),
        Constraint::Percentage(30),
        Constraint::Percentage(30),
    ])
    .areas(bottom);
    render_over_time(Over::Rate("output tok/s"), &v.tokens_per_s, tokens, buf, th);
    render_over_time(Over::Count("requests ended"), &v.ends_per_s, ends, buf, th);
    let failed: Vec<Line> = if v.failures.is_empty() {
        vec![Line::styled("none", th.dim)]
    } else {
        v.failures
            .iter()
            .map(|f| Line::styled(f.clone(), th.bad))
            .collect()
    };
    Paragraph::new(failed)
        .block(th.panel(" failures "))
        .wrap(Wrap { trim: true })
        .render(failures, buf);
}

/// `facts` joined by ` · `, as many to a line of `width` as fit (one too long is cut).
fn pack(facts: &[String], width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for f in facts {
        match lines.last_mut() {
            Some(l) if l.chars().count() + 3 + f.chars().count() <= width => {
                l.push_str(" · ");
                l.push_str(f);
            }
            _ => lines.push(fit(f, width)),
        }
    }
    lines
}

fn histogram_or_nothing(
    name: &str,
    what: &str,
    v: Option<&LatencyView>,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    match v {
        Some(v) => {
            let title = first_fitting(
                &[
                    format!(" {name} ms · {} {what} ", v.count),
                    format!(" {name} ms "),
                ],
                usize::from(area.width.saturating_sub(2)),
            );
            super::latency::histogram(title, v, area, buf, th);
        }
        None => Paragraph::new(Line::styled("no values", th.dim))
            .block(th.panel(format!(" {name} ms ")))
            .render(area, buf),
    }
}

/// What a bar over time shows.
#[derive(Clone, Copy)]
enum Over<'a> {
    /// A rate a second: a bar of several seconds is their mean.
    Rate(&'a str),
    /// A count: a bar of several seconds is their sum.
    Count(&'a str),
}

/// Per-second values over the level, a bar a second (several seconds a bar when the level is
/// longer than the panel is wide).
fn render_over_time(over: Over, per_s: &[u64], area: Rect, buf: &mut Buffer, th: &Theme) {
    let width = usize::from(area.width.saturating_sub(2)).max(1);
    let per_bar = per_s.len().div_ceil(width).max(1);
    let (what, mean) = match over {
        Over::Rate(w) => (w, true),
        Over::Count(w) => (w, false),
    };
    let bars: Vec<u64> = per_s
        .chunks(per_bar)
        .map(|c| {
            let sum = c.iter().sum::<u64>();
            if mean { sum / c.len() as u64 } else { sum }
        })
        .collect();
    let peak = bars.iter().copied().max().unwrap_or(0);
    let unit = if per_bar == 1 {
        "a bar a second".to_string()
    } else {
        format!("a bar per {per_bar} s")
    };
    let title = first_fitting(
        &[
            format!(" {what} over {} s · {unit} · peak {peak} ", per_s.len()),
            format!(" {what} · peak {peak} "),
            format!(" {what} "),
        ],
        usize::from(area.width.saturating_sub(2)),
    );
    Sparkline::default()
        .block(th.panel(title))
        .data(&bars)
        .style(ratatui::style::Style::default().fg(th.series[0]))
        .render(area, buf);
}

#[cfg(test)]
mod tests {
    #[test]
    fn facts_fill_lines_and_never_split() {
        let f: Vec<String> = [
            "8 done",
            "0 failed",
            "out 249 tok/s",
            "TTFT p50/90/99 1/2/3 ms",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            super::pack(&f, 30),
            [
                "8 done · 0 failed",
                "out 249 tok/s",
                "TTFT p50/90/99 1/2/3 ms"
            ]
        );
        assert_eq!(super::pack(&f, 200).len(), 1);
        assert_eq!(super::pack(&f, 10)[3], "TTFT p50/…");
    }
}
