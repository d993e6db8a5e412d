//! Long-context tab: each length's status (with the reason and the flag when skipped), TTFT and
//! prefill speed versus context, decode speed versus context, and a live timer for the request
//! in flight.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Widget, Wrap};

use super::{LineChart, Series};
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
    let has_points = app.views.long.ttft_s.iter().any(|c| !c.points.is_empty());
    // Before any length has a point, the TTFT each should take at the prefill speed seen so
    // far stands in for the charts.
    let expected = !app.views.long.expected_ttft_s.is_empty();
    let plot = charts && (has_points || expected);
    // The request in flight (or the plan, before the ladder starts): a panel of its own when
    // there is room, else one line at the bottom.
    let rest = area.height.saturating_sub(table_h + reasons_h + turns_h);
    let flight_h = if !plot {
        rest
    } else if rest >= 13 {
        5
    } else {
        1
    };
    let [table, why, turns, chart_area, timer] = Layout::vertical([
        Constraint::Length(table_h),
        Constraint::Length(reasons_h),
        Constraint::Length(turns_h),
        Constraint::Min(if plot { 8 } else { 0 }),
        Constraint::Length(flight_h),
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
    if charts && has_points {
        render_charts(app, chart_area, buf, th);
    } else if plot {
        render_expected(app, chart_area, buf, th);
    }
    if timer.height >= 4 {
        super::in_flight::render(app, timer, buf, th);
    } else {
        render_timer(app, timer, buf, th);
    }
}

/// One length's row: the Δ columns with a baseline (narrow: TTFT and TPOT in place of input
/// and done).
fn row(
    app: &App,
    l: &crate::summary::LevelSummary,
    base: bool,
    narrow: bool,
    th: &Theme,
) -> Row<'static> {
    let running = app.session.current == Some(l.index);
    let s = app.level_stats(l.index).filter(|s| s.scalars.completed > 0);
    let limit = app
        .session
        .summary
        .server
        .as_ref()
        .and_then(|s| s.context_limit);
    let wont_fit = limit.is_some_and(|n| l.input_len + u64::from(l.output_len) > n);
    // A server servetop started is restarted with a larger context for such a length.
    let restarts = app.session.summary.config.serve.is_some();
    let status = if running {
        "running"
    } else if l.status == LevelStatus::Waiting && wont_fit && restarts {
        "restarts"
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
    let mut cells = vec![
        Cell::from(fmt_tokens(l.input_len) + &crate::summary::passes::suffix(l)),
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
    ];
    if base {
        let [tok, ttft, tpot] = super::cells::delta_cells(app, l, th);
        if narrow {
            // Room for the two that matter most here: input and done make way.
            cells.remove(6);
            cells.remove(2);
            cells.extend([ttft, tpot]);
        } else {
            cells.extend([tok, ttft, tpot]);
        }
    }
    cells.push(
        Cell::from(if app.level_stats(l.index).is_some() {
            failed.to_string()
        } else {
            "-".into()
        })
        .style(if failed > 0 { th.bad } else { th.dim }),
    );
    let style = if running {
        th.current
    } else {
        Style::default()
    };
    Row::new(cells).style(if app.ui.selected == Some(l.index) {
        style.patch(th.selected)
    } else {
        style
    })
}

fn render_table(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let base = app.session.summary.baseline.is_some();
    let narrow = area.width < 100;
    // The headline series' lengths first, then each other series' (docs/outputs.md "Passes").
    let rows: Vec<Row> =
        crate::tui::views::in_rows(&app.views.long.rows, &app.session.summary.long_context)
            .into_iter()
            .map(|l| row(app, l, base, narrow, th))
            .collect();
    let title = format!(
        " long context · {} output tokens · one request at a time ",
        app.session.summary.config.long_context_output_len
    );
    let mut header = vec![
        "context",
        "status",
        "input",
        "TTFT s",
        "prefill tok/s",
        "decode tok/s",
        "done",
    ];
    // As wide as the longest length with its pass (`30K · json (think 64) #2`).
    let label_w = app
        .session
        .summary
        .long_context
        .iter()
        .map(|l| {
            fmt_tokens(l.input_len).chars().count()
                + crate::summary::passes::suffix(l).chars().count()
        })
        .max()
        .unwrap_or(0)
        .clamp(8, 24);
    let label_w = u16::try_from(label_w).unwrap_or(24);
    // A label that names a pass takes its room at 80 columns from status, input and TTFT,
    // which need less than they are given.
    let mut widths = if narrow && label_w > 8 {
        vec![label_w, 8, 7, 7, 13, 12, 6]
    } else {
        vec![label_w, 9, 9, 9, 13, 12, 6]
    };
    if base {
        let [tok, ttft, tpot] = super::cells::DELTA_HEADERS;
        if narrow {
            header.remove(6);
            header.remove(2);
            widths.remove(6);
            widths.remove(2);
            header.extend([ttft, tpot]);
            widths.extend([super::cells::DELTA_WIDTH; 2]);
        } else {
            header.extend([tok, ttft, tpot]);
            widths.extend([super::cells::DELTA_WIDTH; 3]);
        }
    }
    header.push("fail");
    widths.push(5);
    Table::new(rows, widths.into_iter().map(Constraint::Length))
        .header(Row::new(header).style(th.title))
        .column_spacing(1)
        .block(th.panel(title))
        .render(area, buf);
}

fn render_charts(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let v = &app.views.long;
    let top = v.x_max.max(1.0);
    let x = || {
        (
            [0.0, top],
            ["0".to_string(), format!("{}K", top.round())],
            v.ticks.as_slice(),
        )
    };
    let [a, b, c] = Layout::horizontal([Constraint::Ratio(1, 3); 3]).areas(area);
    let base = if app.session.summary.baseline.is_some() {
        " · ··· baseline"
    } else {
        ""
    };
    let empty = "no length finished yet";
    for (title, name, curves, color, cell) in [
        ("TTFT (s) vs context", "TTFT s", &v.ttft_s, 0, a),
        ("prefill tok/s vs context", "prefill", &v.prefill, 1, b),
        ("decode tok/s vs context", "decode", &v.decode, 2, c),
    ] {
        super::curve_chart(
            &format!("{title}{base}"),
            name,
            curves,
            color,
            x(),
            empty,
            cell,
            buf,
            th,
        );
    }
}

/// The TTFT each length should take at the prefill speed seen so far, dotted, with the
/// request in flight's time so far written at its length.
fn render_expected(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let v = &app.views.long;
    let top = v.x_max.max(1.0);
    let now = app
        .session
        .current
        .and_then(|i| app.session.summary.level(i))
        .filter(|l| l.kind == crate::workload::LevelKind::LongContext)
        .zip(app.clocked.last_sent_at)
        .filter(|_| app.clocked.first_token_seen_at.is_none())
        .map(|(l, sent)| {
            (
                l.input_len as f64 / 1000.0,
                app.clocked.now.saturating_sub(sent).as_secs_f64(),
            )
        });
    let title = v.prefill_estimate.as_ref().map_or(String::new(), |(r, at)| {
        format!(
            "TTFT (s) vs context: ··· expected at {} tok/s prefill (seen {at}); the number: this prefill so far",
            num(Some(*r))
        )
    });
    let series = [Series::dotted(
        "expected",
        &v.expected_ttft_s,
        Style::default().fg(th.series[0]),
    )];
    LineChart {
        title: &title,
        series: &series,
        x: [0.0, top],
        x_ends: ["0".into(), format!("{}K", top.round())],
        ticks: &v.ticks,
        y_fixed: None,
        highlight: now,
        highlight_pending: false,
        empty: "",
    }
    .render(area, buf, th);
}

fn render_timer(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let level = app
        .session
        .current
        .and_then(|i| app.session.summary.level(i))
        .filter(|l| l.kind == crate::workload::LevelKind::LongContext);
    let text = match (level, app.clocked.last_sent_at) {
        (Some(l), Some(sent)) => {
            let secs = app.clocked.now.saturating_sub(sent).as_secs_f64();
            if app.clocked.tokens_since_send == 0 {
                format!(
                    " prefilling {} tokens: {secs:.1} s so far",
                    fmt_tokens(l.input_len)
                )
            } else {
                format!(
                    " decoding: {} tokens in {secs:.1} s since the request was sent",
                    app.clocked.tokens_since_send
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
