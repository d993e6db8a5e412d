//! Sweep tab: throughput versus concurrency, the live output rate, the percentile table and the
//! progress of the level in progress. Request-rate levels get their own table below the
//! concurrency sweep (offered and achieved rate, latency, and the client queue that builds up
//! when `--max-concurrency` holds requests back), and the charts when there is no sweep.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Gauge, Row, Sparkline, Table, Widget};

use super::{Series, line_chart};
use crate::export::markdown::num;
use crate::metrics::DistStats;
use crate::summary::{LevelStatus, LevelSummary};
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Draws the tab: charts on top (when there is room), the level table sized to its rows, the
/// progress line at the bottom.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let avail = area.height.saturating_sub(3);
    let (n_sweep, n_rates) = (
        app.session.summary.sweep.len() as u16,
        app.session.summary.rates.len() as u16,
    );
    let wanted_table = match (n_sweep, n_rates) {
        (_, 0) => n_sweep + 3,
        (0, _) => n_rates + 3,
        _ => n_sweep + n_rates + 6,
    };
    let min_chart = if area.height >= 30 { 12 } else { 7 };
    let chart_h = if area.width < 60 {
        0
    } else if avail >= wanted_table + min_chart {
        avail - wanted_table
    } else if avail >= 8 + min_chart {
        min_chart
    } else {
        0
    };
    let [top, table, bottom] = Layout::vertical([
        Constraint::Length(chart_h),
        Constraint::Min(3),
        Constraint::Length(3),
    ])
    .areas(area);
    if chart_h > 0 {
        render_charts(app, top, buf, th);
    }
    // The wide table (p90s, TPOT, E2E, server accept, KV%) needs about 145 columns.
    let wide = area.width >= 148;
    match (n_sweep, n_rates) {
        (_, 0) => render_table(app, table, buf, th, wide),
        (0, _) => render_rate_table(app, table, buf, th, wide),
        _ => {
            // Each table gets room in proportion to its rows, at least a header and one row.
            let [a, b] =
                Layout::vertical([Constraint::Fill(n_sweep + 3), Constraint::Fill(n_rates + 3)])
                    .areas(table);
            render_table(app, a, buf, th, wide);
            render_rate_table(app, b, buf, th, wide);
        }
    }
    render_progress(app, bottom, buf, th);
}

/// Client queue p50 from which the cell is marked: requests typically waited in servetop
/// (dispatch itself takes well under a millisecond).
const QUEUE_MARK_MS: f64 = 10.0;

fn rate_row<'a>(app: &App, l: &LevelSummary, wide: bool, th: &Theme) -> Row<'a> {
    let RowBasics {
        stats,
        running,
        done,
        status_text,
        failed,
    } = row_basics(app, l);
    let d = stats.map(|s| &s.dists);
    let queue = d.and_then(|d| d.client_queue_ms.as_ref());
    let search = app.session.summary.search.as_ref();
    // A search probe reads `#step rate` (the rate's unit is in the header).
    let label = search.and_then(|s| s.probe_of(l.index)).map_or_else(
        || l.label(),
        |p| format!("#{} {}", p.step, num(Some(p.request_rate))),
    );
    let mut cells = vec![
        Cell::from(label),
        Cell::from(status_text),
        Cell::from(done),
        Cell::from(num(stats.and_then(|s| s.scalars.achieved_request_rate))),
    ];
    if wide {
        cells.push(Cell::from(num(stats.map(|s| s.scalars.request_throughput))));
    }
    cells.extend([
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
            ratatui::style::Style::default()
        },
    ));
    if wide {
        cells.push(Cell::from(stats.map_or("-".into(), |s| {
            s.scalars.max_concurrent_requests.to_string()
        })));
        cells.push(kv_cell(l));
    }
    if app.session.summary.config.slo.is_some() {
        cells.push(slo_cell(l, running, th));
    }
    finish_row(cells, l, stats.is_some(), failed, running, th)
}

/// The level's verdict against the SLO: pass, fail, `?` when its interval straddles a limit.
fn slo_cell(l: &LevelSummary, running: bool, th: &Theme) -> Cell<'static> {
    match &l.slo {
        Some(c) => Cell::from(c.verdict()).style(match (c.meets, c.certain) {
            (true, true) => th.ok,
            (false, true) => th.bad,
            _ => th.warn,
        }),
        None if running => Cell::from("…"),
        None => Cell::from("-").style(th.dim),
    }
}

fn render_rate_table(app: &App, area: Rect, buf: &mut Buffer, th: &Theme, wide: bool) {
    let mut header = vec!["rate", "status", "done", "sent/s"];
    let mut widths = vec![
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(7),
        Constraint::Length(6),
    ];
    if wide {
        header.extend(["done/s", "out tok/s", "TTFT p50/90/99"]);
        widths.extend([
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(19),
        ]);
        header.extend(["TPOT p50/90/99", "E2E p50/90/99", "queue p50/90/99"]);
        widths.extend([
            Constraint::Length(16),
            Constraint::Length(19),
            Constraint::Length(17),
        ]);
        header.extend(["peak", "KV%"]);
        widths.extend([Constraint::Length(5), Constraint::Length(4)]);
    } else {
        header.extend(["tok/s", "TTFT p50/99", "queue p50/99"]);
        widths.extend([
            Constraint::Length(6),
            Constraint::Length(12),
            Constraint::Length(12),
        ]);
    }
    if app.session.summary.config.slo.is_some() {
        header.push("SLO");
        widths.push(Constraint::Length(5));
    }
    header.push("fail");
    widths.push(Constraint::Length(4));
    let levels = &app.session.summary.rates;
    let visible = area.height.saturating_sub(3) as usize;
    let current_pos = levels
        .iter()
        .position(|l| app.session.current == Some(l.index))
        .unwrap_or(0);
    let skip = (current_pos + 1).saturating_sub(visible);
    let ol = &app.session.summary.config.open_loop;
    let mut how = vec![if (ol.burstiness - 1.0).abs() < 1e-12 {
        "Poisson".to_string()
    } else {
        format!("gamma B={}", num(Some(ol.burstiness)))
    }];
    if ol.ramp_up_s > 0.0 {
        how.push(format!("ramp {} s", num(Some(ol.ramp_up_s))));
    }
    if let Some(c) = ol.max_concurrency {
        how.push(format!("cap {c}"));
    }
    let title = match &app.session.summary.search {
        Some(s) => format!(
            " SLO search · {} · {} · ms ",
            search_title(s),
            how.join(" · ")
        ),
        None => format!(
            " request-rate sweep · {} · queue = client queue · ms ",
            how.join(" · ")
        ),
    };
    let rows: Vec<Row> = levels
        .iter()
        .skip(skip)
        .take(visible)
        .map(|l| rate_row(app, l, wide, th))
        .collect();
    Table::new(rows, widths)
        .header(Row::new(header).style(th.title))
        .column_spacing(1)
        .block(th.panel(title))
        .render(area, buf);
}

fn c_labels(x_max: f64) -> ([f64; 2], Vec<String>) {
    let top = x_max.max(1.0);
    let mid = (top / 2.0).round();
    (
        [0.0, top],
        vec![
            "C=1".into(),
            format!("{}", 2f64.powf(mid).round()),
            format!("{}", 2f64.powf(top).round()),
        ],
    )
}

fn render_charts(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    // Three charts when wide; when narrow, aggregate vs C and the live rate.
    let (a, b, c) = if area.width >= 120 {
        let [a, b, c] = Layout::horizontal([
            Constraint::Ratio(1, 3),
            Constraint::Ratio(1, 3),
            Constraint::Ratio(1, 3),
        ])
        .areas(area);
        (a, Some(b), c)
    } else {
        let [a, c] =
            Layout::horizontal([Constraint::Ratio(1, 2), Constraint::Ratio(1, 2)]).areas(area);
        (a, None, c)
    };
    let v = &app.sweep_view;
    // An SLO search's one closed-loop level is its throughput probe: its rate probes are the
    // curve worth drawing.
    let rates_first = app.session.summary.sweep.is_empty() || app.session.summary.search.is_some();
    if rates_first && !app.session.summary.rates.is_empty() {
        render_rate_charts(app, (a, b, c), buf, th);
        return;
    }
    line_chart(
        "aggregate out tok/s vs C (log2)",
        &[Series {
            name: "out tok/s",
            points: &v.aggregate,
            style: ratatui::style::Style::default().fg(th.series[0]),
        }],
        c_labels(v.x_max),
        "waiting for the first level…",
        a,
        buf,
        th,
    );
    if let Some(b) = b {
        line_chart(
            "per-stream tok/s vs C (log2)",
            &[Series {
                name: "per-stream",
                points: &v.per_stream,
                style: ratatui::style::Style::default().fg(th.series[1]),
            }],
            c_labels(v.x_max),
            "waiting for the first level…",
            b,
            buf,
            th,
        );
    }
    let series = &app.live.series;
    let t_max = series.last().map_or(1.0, |p| p.0.max(1.0));
    let title = match app
        .session
        .current
        .and_then(|i| app.session.summary.level(i))
    {
        Some(l) => format!(
            "out tok/s now, {} ({} tok/s)",
            l.label(),
            num(Some(app.live.current))
        ),
        None => "out tok/s over the level".into(),
    };
    line_chart(
        &title,
        &[Series {
            name: "tok/s",
            points: series,
            style: ratatui::style::Style::default().fg(th.series[2]),
        }],
        ([0.0, t_max], vec!["0 s".into(), format!("{t_max:.0} s")]),
        "sampled once a second while a level runs",
        c,
        buf,
        th,
    );
}

/// A run of rate levels only: completions against the offered rate, TTFT and client queue p99.
fn render_rate_charts(
    app: &App,
    (a, b, c): (Rect, Option<Rect>, Rect),
    buf: &mut Buffer,
    th: &Theme,
) {
    let v = &app.sweep_view;
    let top = v.rate_max.max(1e-9);
    let x = || {
        (
            [0.0, top],
            vec![
                "0".into(),
                num(Some(top / 2.0)),
                format!("{} req/s", num(Some(top))),
            ],
        )
    };
    let waiting = "waiting for the first rate level…";
    line_chart(
        "done req/s vs offered (dim: offered)",
        &[
            Series {
                name: "offered",
                points: &v.rate_offered,
                style: th.dim,
            },
            Series {
                name: "done req/s",
                points: &v.rate_done,
                style: ratatui::style::Style::default().fg(th.series[0]),
            },
        ],
        x(),
        waiting,
        a,
        buf,
        th,
    );
    if let Some(b) = b {
        line_chart(
            "client queue p99 ms vs offered req/s",
            &[Series {
                name: "queue p99",
                points: &v.rate_queue_p99,
                style: ratatui::style::Style::default().fg(th.series[1]),
            }],
            x(),
            waiting,
            b,
            buf,
            th,
        );
    }
    line_chart(
        "TTFT p99 ms vs offered req/s",
        &[Series {
            name: "TTFT p99",
            points: &v.rate_ttft_p99,
            style: ratatui::style::Style::default().fg(th.series[2]),
        }],
        x(),
        waiting,
        c,
        buf,
        th,
    );
}

fn ppp(d: Option<&DistStats>, wide: bool) -> String {
    match d {
        None => "-".into(),
        Some(d) if wide => format!(
            "{}/{}/{}",
            num(Some(d.p50)),
            num(Some(d.p90)),
            num(Some(d.p99))
        ),
        Some(d) => format!("{}/{}", num(Some(d.p50)), num(Some(d.p99))),
    }
}

fn row<'a>(app: &App, l: &LevelSummary, wide: bool, th: &Theme) -> Row<'a> {
    let RowBasics {
        stats,
        running,
        done,
        status_text,
        failed,
    } = row_basics(app, l);
    let mut cells = vec![
        Cell::from(format!("C={}", l.concurrency)),
        Cell::from(status_text),
        Cell::from(done),
    ];
    let s = stats;
    let d = s.map(|s| &s.dists);
    if wide {
        cells.push(Cell::from(num(s.map(|s| s.scalars.request_throughput))));
    }
    cells.extend([
        Cell::from(num(s.map(|s| s.scalars.output_throughput))),
        Cell::from(num(d
            .and_then(|d| d.decode_tokens_per_s.as_ref())
            .map(|x| x.mean))),
        Cell::from(ppp(d.and_then(|d| d.ttft_ms.as_ref()), wide)),
        Cell::from(ppp(d.and_then(|d| d.itl_ms.as_ref()), wide)),
    ]);
    if wide {
        cells.push(Cell::from(ppp(d.and_then(|d| d.tpot_ms.as_ref()), true)));
        cells.push(Cell::from(ppp(d.and_then(|d| d.e2el_ms.as_ref()), true)));
    }
    // Tokens per chunk that are delivery bursts are no accept length (see `chunk_verdict`).
    cells.push(Cell::from(num(s
        .filter(|_| !l.delivery_bursts)
        .and_then(|s| s.scalars.accept_length_client))));
    if wide {
        cells.push(Cell::from(num(l.accept_length_server)));
        cells.push(kv_cell(l));
    }
    finish_row(cells, l, stats.is_some(), failed, running, th)
}

fn render_table(app: &App, area: Rect, buf: &mut Buffer, th: &Theme, wide: bool) {
    // Narrow terminals get shorter headers and two percentiles, so nothing is cut mid-word.
    let mut header = vec!["C", "status", "done"];
    let mut widths = vec![
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(7),
    ];
    if wide {
        header.push("req/s");
        widths.push(Constraint::Length(6));
    }
    header.extend(if wide {
        ["out tok/s", "stream", "TTFT p50/90/99", "ITL p50/90/99"]
    } else {
        ["tok/s", "stream", "TTFT p50/99", "ITL p50/99"]
    });
    widths.extend([
        Constraint::Length(if wide { 9 } else { 6 }),
        Constraint::Length(6),
        Constraint::Length(if wide { 19 } else { 12 }),
        Constraint::Length(if wide { 17 } else { 11 }),
    ]);
    if wide {
        header.extend(["TPOT p50/90/99", "E2E p50/90/99"]);
        widths.extend([Constraint::Length(16), Constraint::Length(19)]);
    }
    header.push("acc");
    widths.push(Constraint::Length(5));
    if wide {
        header.extend(["srv", "KV%"]);
        widths.extend([Constraint::Length(5), Constraint::Length(4)]);
    }
    header.push("fail");
    widths.push(Constraint::Length(4));
    // Keep the level in progress in view when there are more levels than rows, and format only
    // the rows that fit.
    let visible = area.height.saturating_sub(3) as usize;
    let current_pos = app
        .session
        .summary
        .sweep
        .iter()
        .position(|l| app.session.current == Some(l.index))
        .unwrap_or(0);
    let skip = (current_pos + 1).saturating_sub(visible);
    let title = format!(
        " {} · {} · ms unless noted ",
        if app.session.summary.search.is_some() {
            "SLO search: closed-loop throughput probe"
        } else {
            "concurrency sweep"
        },
        app.session.summary.config.lengths_label()
    );
    let rows: Vec<Row> = app
        .session
        .summary
        .sweep
        .iter()
        .skip(skip)
        .take(visible)
        .map(|l| row(app, l, wide, th))
        .collect();
    Table::new(rows, widths)
        .header(Row::new(header).style(th.title))
        .column_spacing(1)
        .block(th.panel(title))
        .render(area, buf);
}

fn render_progress(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let block = th.panel(" progress ");
    let inner = block.inner(area);
    block.render(area, buf);
    let spark_w = if inner.width >= 90 { 30 } else { 0 };
    let [gauge_area, spark_area] =
        Layout::horizontal([Constraint::Min(10), Constraint::Length(spark_w)]).areas(inner);
    let level = app
        .session
        .current
        .and_then(|i| app.session.summary.level(i));
    match level {
        Some(l) => {
            let p = app
                .session
                .progress
                .get(&l.index)
                .cloned()
                .unwrap_or_default();
            let ratio = if l.requests > 0 {
                (p.finished as f64 / f64::from(l.requests)).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let eta = app.eta_s().map_or(String::new(), |e| {
                format!(
                    " · ETA {}",
                    crate::tui::ui::clock(std::time::Duration::from_secs_f64(e))
                )
            });
            let paused = if app.paused { " · PAUSED" } else { "" };
            // At a rate level, the client queue says whether servetop is holding requests back.
            let queue = if l.kind == crate::workload::LevelKind::Rate {
                app.level_stats(l.index)
                    .and_then(|s| s.dists.client_queue_ms.as_ref())
                    .map_or(String::new(), |q| {
                        format!(" · client queue p99 {} ms", num(Some(q.p99)))
                    })
            } else {
                String::new()
            };
            let label = format!(
                "{} · {}/{} done · {} in flight{queue} · {} tok/s now{eta}{paused}",
                l.label(),
                p.finished,
                l.requests,
                app.session.in_flight(l.index),
                num(Some(app.live.current))
            );
            Gauge::default()
                .ratio(ratio)
                .label(crate::tui::ui::fit(&label, gauge_area.width as usize))
                .gauge_style(ratatui::style::Style::default().fg(th.series[0]))
                .render(gauge_area, buf);
        }
        None => Line::from(Span::styled(
            crate::tui::ui::fit(&app.session.phase, gauge_area.width as usize),
            th.accent,
        ))
        .render(gauge_area, buf),
    }
    if spark_w > 0 {
        let [label, spark] =
            Layout::horizontal([Constraint::Length(12), Constraint::Min(1)]).areas(spark_area);
        let last = app.accept_history.last().map(|v| *v as f64 / 100.0);
        Line::from(Span::styled(format!(" acc {} ", num(last)), th.accent)).render(label, buf);
        Sparkline::default()
            .data(&app.accept_history)
            .style(ratatui::style::Style::default().fg(th.series[1]))
            .render(spark, buf);
    }
}

/// The engine's mean KV-cache use over the level, in %.
/// `tpot:80 at p90 · [21.97, 22.75] req/s · converged`: the SLO, the bracket, where it stands.
fn search_title(s: &crate::workload::search::SearchSummary) -> String {
    let r = |x: Option<f64>| x.map_or("-".to_string(), crate::workload::fmt_rate);
    let state = match (s.status, s.pass_rate) {
        (crate::workload::search::SearchStatus::Converged, Some(p)) => {
            format!("answer {} req/s", crate::workload::fmt_rate(p))
        }
        (st, _) => st.describe().to_string(),
    };
    format!(
        "{} · [{}, {}] req/s · {state}",
        s.slo.describe(),
        r(s.pass_rate),
        r(s.fail_rate)
    )
}

fn kv_cell(l: &LevelSummary) -> Cell<'static> {
    let kv = l.server_metrics.as_ref().and_then(|m| m.mean_kv_usage);
    Cell::from(kv.map_or("-".into(), |k| format!("{:.0}", k * 100.0)))
}

/// The failures cell and the row's style (running, waiting or done), shared by both tables.
fn finish_row(
    mut cells: Vec<Cell<'static>>,
    l: &LevelSummary,
    has_stats: bool,
    failed: u64,
    running: bool,
    th: &Theme,
) -> Row<'static> {
    let fail_text = if has_stats {
        failed.to_string()
    } else {
        "-".into()
    };
    cells.push(Cell::from(fail_text).style(if failed > 0 { th.bad } else { th.dim }));
    let style = if running {
        th.current
    } else if l.status == LevelStatus::Waiting {
        th.dim
    } else {
        ratatui::style::Style::default()
    };
    Row::new(cells).style(style)
}

/// What every level row starts from: its statistics (live for the running one), whether it is
/// running, the done cell (finished/planned while running), its status word and failures.
struct RowBasics<'a> {
    stats: Option<&'a crate::metrics::LevelStats>,
    running: bool,
    done: String,
    status_text: &'static str,
    failed: u64,
}

fn row_basics<'a>(app: &'a App, l: &LevelSummary) -> RowBasics<'a> {
    let stats = app.level_stats(l.index);
    let running = app.session.current == Some(l.index);
    let progress = app.session.progress.get(&l.index);
    let done = match (stats, progress) {
        (_, Some(p)) if running => format!("{}/{}", p.finished, l.requests),
        (Some(s), _) => s.scalars.completed.to_string(),
        _ => "-".into(),
    };
    RowBasics {
        stats,
        running,
        done,
        status_text: if running { "running" } else { l.status.name() },
        failed: stats.map_or(0, |s| s.scalars.failed),
    }
}
