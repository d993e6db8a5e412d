//! The sweep tab's trace part: a replayed trace's row (offered against sent rate, latency, the
//! client's lateness, the prefix cache against what the trace implies) and its latency over
//! the trace's timeline.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::widgets::{Cell, Row};

use super::cells::{RowBasics, finish_row, kv_cell, ppp, row_basics};
use super::rates::QUEUE_MARK_MS;
use super::{Series, line_chart};
use crate::fmt::num;
use crate::summary::LevelSummary;
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// `62 / 62 %`: the prefix cache's share of prompt tokens as the server reported it, over the
/// share the trace's `hash_ids` imply.
fn cache_cell(l: &LevelSummary, stats: Option<&crate::metrics::LevelStats>) -> String {
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.0}", v * 100.0));
    let implied = l
        .trace
        .as_ref()
        .and_then(|t| t.expected_prefix_cache_hit_rate);
    format!(
        "{}/{} %",
        pct(stats.and_then(|s| s.scalars.prefix_cache_hit_rate)),
        pct(implied)
    )
}

fn trace_row<'a>(app: &App, l: &LevelSummary, wide: bool, th: &Theme) -> Row<'a> {
    let RowBasics {
        stats,
        running,
        done,
        status_text,
        failed,
    } = row_basics(app, l);
    let d = stats.map(|s| &s.dists);
    let queue = d.and_then(|d| d.client_queue_ms.as_ref());
    let mut cells = vec![Cell::from(l.label())];
    if wide {
        cells.push(Cell::from(status_text));
    }
    cells.extend([
        Cell::from(done),
        Cell::from(num(l.request_rate())),
        Cell::from(num(stats.and_then(|s| s.scalars.achieved_request_rate))),
        Cell::from(num(stats.map(|s| s.scalars.output_throughput))),
        Cell::from(ppp(d.and_then(|d| d.ttft_ms.as_ref()), wide)),
    ]);
    if wide {
        cells.push(Cell::from(ppp(d.and_then(|d| d.tpot_ms.as_ref()), true)));
        cells.push(Cell::from(ppp(d.and_then(|d| d.e2el_ms.as_ref()), true)));
    }
    cells.push(Cell::from(ppp(queue, wide)).style(
        if queue.is_some_and(|q| q.p50 >= QUEUE_MARK_MS) {
            th.warn
        } else {
            Style::default()
        },
    ));
    if wide {
        cells.push(Cell::from(stats.map_or("-".into(), |s| {
            s.scalars.max_concurrent_requests.to_string()
        })));
        cells.push(kv_cell(l));
    }
    cells.push(Cell::from(cache_cell(l, stats)));
    finish_row(
        cells,
        l,
        stats.is_some(),
        failed,
        running,
        app.ui.selected == Some(l.index),
        th,
    )
}

/// The trace table: one row per replayed trace.
pub(super) fn render_trace_table(app: &App, area: Rect, buf: &mut Buffer, th: &Theme, wide: bool) {
    // At 80 columns: no status column (the row's style says it), shorter cells.
    let mut header = vec!["trace"];
    let mut widths = vec![Constraint::Length(if wide { 12 } else { 11 })];
    if wide {
        header.push("status");
        widths.push(Constraint::Length(super::cells::status_width(
            app,
            &app.session.summary.traces,
        )));
    }
    header.extend(["done", "due/s", "sent/s", "tok/s"]);
    widths.extend([
        Constraint::Length(if wide { 9 } else { 7 }),
        Constraint::Length(6),
        Constraint::Length(6),
        Constraint::Length(6),
    ]);
    if wide {
        header.extend(["TTFT p50/90/99", "TPOT p50/90/99", "E2E p50/90/99"]);
        widths.extend([
            Constraint::Length(19),
            Constraint::Length(16),
            Constraint::Length(19),
        ]);
        header.extend(["queue p50/90/99", "peak", "KV%"]);
        widths.extend([
            Constraint::Length(17),
            Constraint::Length(5),
            Constraint::Length(4),
        ]);
    } else {
        header.extend(["TTFT p50/99", "queue50/99"]);
        widths.extend([Constraint::Length(11), Constraint::Length(11)]);
    }
    header.extend([if wide { "cache/trace" } else { "cache" }, "fail"]);
    widths.extend([
        Constraint::Length(if wide { 11 } else { 8 }),
        Constraint::Length(4),
    ]);
    let levels = &app.session.summary.traces;
    let title = match levels.first().and_then(|l| l.trace.as_ref()) {
        Some(t) if !wide => format!(
            " trace {} · {} req over {} s · ms ",
            t.source,
            levels[0].requests,
            num(Some(t.duration_s))
        ),
        Some(t) => format!(
            " trace replay · {} · {} requests over {} s{} · queue = client queue · cache = prefix-cache hits / what the trace implies · ms ",
            t.source,
            levels[0].requests,
            num(Some(t.duration_s)),
            t.max_concurrency
                .map_or(String::new(), |c| format!(" · cap {c}"))
        ),
        None => " trace replay ".into(),
    };
    let rows: Vec<Row> = levels.iter().map(|l| trace_row(app, l, wide, th)).collect();
    super::cells::level_table(rows, widths, Row::new(header), title, th, area, buf);
}

/// The trace over its timeline: TTFT p50/p99 of the requests due in each bin, and requests due
/// per second (the trace, dim) against those finished.
pub(super) fn render_trace_charts(
    app: &App,
    a: Rect,
    b: Option<Rect>,
    buf: &mut Buffer,
    th: &Theme,
) {
    let v = &app.views.trace;
    let top = v.x_max.max(1e-9);
    let x = || {
        (
            [0.0, top],
            vec![
                "0 s".into(),
                num(Some(top / 2.0)),
                format!("{} s", num(Some(top))),
            ],
        )
    };
    let waiting = "waiting for the trace's first requests…";
    // Shorter forms before a cut word (a half-width panel at 80 columns).
    let ttft_title = crate::tui::text::first_fitting(
        &[
            "TTFT ms over the trace: p50 line, p99 dots".to_string(),
            "TTFT ms: p50 line, p99 dots".to_string(),
        ],
        usize::from(a.width.saturating_sub(4)),
    );
    let req_title = b.map(|b| {
        crate::tui::text::first_fitting(
            &[
                "req/s over the trace: done (dim: due)".to_string(),
                "req/s: done (dim: due)".to_string(),
            ],
            usize::from(b.width.saturating_sub(4)),
        )
    });
    line_chart(
        &ttft_title,
        &[
            Series::line("p50", &v.ttft_p50, Style::default().fg(th.series[2])),
            Series::dotted("p99", &v.ttft_p99, Style::default().fg(th.series[2])),
        ],
        x(),
        waiting,
        a,
        buf,
        th,
    );
    if let (Some(b), Some(req_title)) = (b, req_title) {
        line_chart(
            &req_title,
            &[
                Series::line("due", &v.due, th.dim),
                Series::line("done", &v.done, Style::default().fg(th.series[0])),
            ],
            x(),
            waiting,
            b,
            buf,
            th,
        );
    }
}
