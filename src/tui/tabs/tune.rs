//! The tune table of the sweep tab: when the run is one configuration of a `servetop tune`,
//! every configuration of the tune as a row (those done with their capacity, this one with its
//! search's bracket as it narrows), above the level tables.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row};

use crate::fmt::{fmt_rate, num};
use crate::summary::tune::progress::TuneProgress;
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// The tune table's height with this configuration's row alone (no header).
pub(super) const COMPACT: u16 = 3;

/// Rows the tune table wants (its configurations, a header and borders); 0 outside a tune.
pub(super) fn height(app: &App) -> u16 {
    app.session
        .summary
        .tune_progress
        .as_ref()
        .map_or(0, |t| t.rows.len().min(12) as u16 + 3)
}

/// This configuration's status and capacity so far: where its search stands, its bracket as
/// it narrows, its answer once it has one.
fn live_row(app: &App) -> (String, String) {
    use crate::workload::search::SearchStatus;
    let Some(s) = app.session.summary.search.as_ref() else {
        return ("running".into(), "levels before the search".into());
    };
    let r = |x: Option<f64>| x.map_or("-".to_string(), fmt_rate);
    match (s.status, s.pass_rate) {
        (SearchStatus::Probing, _) => ("running".into(), "throughput probe".into()),
        (SearchStatus::Searching, _) => (
            "running".into(),
            format!("searching [{}, {}] req/s", r(s.pass_rate), r(s.fail_rate)),
        ),
        (SearchStatus::StoppedEarly, _) => (
            "stopped early".into(),
            format!("below {} req/s", r(s.fail_rate)),
        ),
        (SearchStatus::Stopped, _) => ("stopped".into(), r(s.pass_rate)),
        (_, Some(p)) => ("measured".into(), format!("{} req/s", fmt_rate(p))),
        (_, None) => ("measured".into(), "none meets it".into()),
    }
}

/// Draws the tune table into `area`.
pub(super) fn render(app: &App, t: &TuneProgress, area: Rect, buf: &mut Buffer, th: &Theme) {
    let header = Row::new(vec![
        "#",
        "configuration",
        "status",
        "capacity",
        "peak tok/s",
        "single tok/s",
    ]);
    let widths = vec![
        Constraint::Length(3),
        Constraint::Min(20),
        Constraint::Length(13),
        Constraint::Min(24),
        Constraint::Length(10),
        Constraint::Length(12),
    ];
    // Too low for the header and every row: this configuration's row alone.
    let compact = area.height < height(app);
    let visible = area.height.saturating_sub(if compact { 2 } else { 3 }) as usize;
    let skip = (t.config + 1).saturating_sub(visible);
    let rows: Vec<Row> = t
        .rows
        .iter()
        .enumerate()
        .skip(skip)
        .take(visible)
        .map(|(i, r)| {
            let current = i == t.config;
            let (status, capacity) = if current {
                live_row(app)
            } else {
                (r.status.clone(), r.capacity.clone())
            };
            let style = match status.as_str() {
                _ if current => th.current,
                "failed" => th.bad,
                "pending" => th.dim,
                _ => ratatui::style::Style::default(),
            };
            Row::new(vec![
                Cell::from((i + 1).to_string()),
                Cell::from(r.label.clone()),
                Cell::from(status),
                Cell::from(capacity),
                Cell::from(num(r.peak_output_tokens_per_s)),
                Cell::from(num(r.single_stream_tokens_per_s)),
            ])
            .style(style)
        })
        .collect();
    let beat = t.beat.map_or(String::new(), |b| {
        format!(" · to beat: {} req/s", fmt_rate(b))
    });
    let title = format!(
        " tune · configuration {} of {} · {}{beat} ",
        t.config + 1,
        t.rows.len(),
        t.slo
    );
    if compact {
        ratatui::widgets::Widget::render(
            ratatui::widgets::Table::new(rows, widths)
                .column_spacing(1)
                .block(th.panel(title)),
            area,
            buf,
        );
    } else {
        super::cells::level_table(rows, widths, header, title, th, area, buf);
    }
}
