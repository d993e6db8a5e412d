//! Long-context tab: each length's status (with the reason and the flag when skipped), TTFT and
//! prefill speed versus context, decode speed versus context, and a live timer for the request
//! in flight.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Widget, Wrap};

use super::{Series, line_chart};
use crate::fmt::fmt_tokens;
use crate::fmt::num;
use crate::summary::LevelStatus;
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Draws the tab.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let levels = &app.session.summary.long_context;
    let turns_h = super::turns::height(app);
    if levels.is_empty() {
        if turns_h > 0 {
            let [t, _] =
                Layout::vertical([Constraint::Length(turns_h), Constraint::Min(0)]).areas(area);
            super::turns::render(app, t, buf, th);
            return;
        }
        Paragraph::new("No long-context ladder in this run (--long-context none).")
            .block(Block::default().borders(Borders::ALL))
            .render(area, buf);
        return;
    }
    let reasons: Vec<Line> = levels
        .iter()
        .filter_map(|l| {
            l.reason.as_ref().map(|r| {
                Line::from(vec![
                    Span::styled(format!("{}: ", fmt_tokens(l.input_len)), th.warn),
                    Span::raw(r.clone()),
                ])
            })
        })
        .collect();
    let table_h = levels.len() as u16 + 3;
    let reasons_h = if reasons.is_empty() {
        0
    } else {
        // Each reason wraps onto about two lines at 80 columns.
        (reasons.len() as u16 * if area.width < 120 { 3 } else { 2 }) + 2
    };
    let charts = area.width >= 100 && area.height >= table_h + reasons_h + turns_h + 12;
    let [table, why, turns, chart_area, timer] = Layout::vertical([
        Constraint::Length(table_h),
        Constraint::Length(reasons_h),
        Constraint::Length(turns_h),
        Constraint::Min(if charts { 8 } else { 0 }),
        Constraint::Length(1),
    ])
    .areas(area);
    if turns_h > 0 {
        super::turns::render(app, turns, buf, th);
    }
    render_table(app, table, buf, th);
    if !reasons.is_empty() {
        Paragraph::new(reasons)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" skipped lengths: why, and the flag to raise ")
                    .title_style(th.warn),
            )
            .wrap(Wrap { trim: true })
            .render(why, buf);
    }
    if charts {
        render_charts(app, chart_area, buf, th);
    }
    render_timer(app, timer, buf, th);
}

fn render_table(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let rows: Vec<Row> = app
        .session
        .summary
        .long_context
        .iter()
        .map(|l| {
            let running = app.session.current == Some(l.index);
            let s = app.level_stats(l.index).filter(|s| s.scalars.completed > 0);
            let limit = app
                .session
                .summary
                .server
                .as_ref()
                .and_then(|s| s.context_limit);
            let wont_fit = limit.is_some_and(|n| l.input_len + u64::from(l.output_len) > n);
            let status = if running {
                "running"
            } else if l.status == LevelStatus::Waiting && wont_fit {
                "too long"
            } else {
                l.status.name()
            };
            let status_style = match l.status {
                LevelStatus::Skipped | LevelStatus::Failed => th.warn,
                LevelStatus::Done => th.ok,
                _ => Style::default(),
            };
            let failed = app.level_stats(l.index).map_or(0, |s| s.scalars.failed);
            Row::new(vec![
                Cell::from(fmt_tokens(l.input_len)),
                Cell::from(status).style(status_style),
                Cell::from(num(s.and_then(|s| s.scalars.mean_input_tokens))),
                Cell::from(num(s
                    .and_then(|s| s.dists.ttft_ms.as_ref())
                    .map(|d| d.mean / 1000.0))),
                Cell::from(num(s.and_then(|s| s.scalars.prefill_tokens_per_s))),
                Cell::from(num(s
                    .and_then(|s| s.dists.decode_tokens_per_s.as_ref())
                    .map(|d| d.mean))),
                Cell::from(format!(
                    "{}/{}",
                    s.map_or(0, |s| s.scalars.completed),
                    l.requests
                )),
                Cell::from(if app.level_stats(l.index).is_some() {
                    failed.to_string()
                } else {
                    "-".into()
                })
                .style(if failed > 0 { th.bad } else { th.dim }),
            ])
            .style(if running {
                th.current
            } else {
                Style::default()
            })
        })
        .collect();
    let title = format!(
        " long context · {} output tokens · one request at a time ",
        app.session.summary.config.long_context_output_len
    );
    Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(13),
            Constraint::Length(12),
            Constraint::Length(6),
            Constraint::Length(5),
        ],
    )
    .header(
        Row::new([
            "context",
            "status",
            "input",
            "TTFT s",
            "prefill tok/s",
            "decode tok/s",
            "done",
            "fail",
        ])
        .style(th.title),
    )
    .column_spacing(1)
    .block(th.panel(title))
    .render(area, buf);
}

fn render_charts(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let v = &app.long_view;
    let x = || {
        let top = v.x_max.max(1.0);
        (
            [0.0, top],
            vec![
                "0".into(),
                format!("{}K", (top / 2.0).round()),
                format!("{}K", top.round()),
            ],
        )
    };
    let [a, b, c] = Layout::horizontal([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .areas(area);
    let empty = "no length finished yet";
    line_chart(
        "TTFT (s) vs context",
        &[Series::line(
            "TTFT s",
            &v.ttft_s,
            Style::default().fg(th.series[0]),
        )],
        x(),
        empty,
        a,
        buf,
        th,
    );
    line_chart(
        "prefill tok/s vs context",
        &[Series::line(
            "prefill",
            &v.prefill,
            Style::default().fg(th.series[1]),
        )],
        x(),
        empty,
        b,
        buf,
        th,
    );
    line_chart(
        "decode tok/s vs context",
        &[Series::line(
            "decode",
            &v.decode,
            Style::default().fg(th.series[2]),
        )],
        x(),
        empty,
        c,
        buf,
        th,
    );
}

fn render_timer(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let level = app
        .session
        .current
        .and_then(|i| app.session.summary.level(i))
        .filter(|l| l.kind == crate::workload::LevelKind::LongContext);
    let text = match (level, app.last_sent_at) {
        (Some(l), Some(sent)) => {
            let secs = app.now.saturating_sub(sent).as_secs_f64();
            if app.tokens_since_send == 0 {
                format!(
                    " prefilling {} tokens: {secs:.1} s so far",
                    fmt_tokens(l.input_len)
                )
            } else {
                format!(
                    " decoding: {} tokens in {secs:.1} s since the request was sent",
                    app.tokens_since_send
                )
            }
        }
        _ => format!(" {}", app.session.phase),
    };
    Line::from(Span::styled(
        crate::tui::text::fit(&text, area.width as usize),
        th.accent,
    ))
    .render(area, buf);
}
