//! Sweep tab: throughput versus concurrency, the live output rate, the percentile table and the
//! progress of the level in progress. Request-rate levels get their own table below the
//! concurrency sweep (offered and achieved rate, latency, and the client queue that builds up
//! when `--max-concurrency` holds requests back), and the charts when there is no sweep.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Gauge, Row, Sparkline, Widget};

use ratatui::style::Style;

use super::{LineChart, Series};
use crate::fmt::num;
use crate::summary::LevelSummary;
use crate::tui::app::App;
use crate::tui::theme::Theme;

use super::cells::{
    DELTA_HEADERS, DELTA_WIDTH, RowBasics, delta_cells, finish_row, kv_cell, ppp, row_basics,
};
use super::rates::{render_rate_charts, render_rate_table};

/// Draws the tab: charts on top (when there is room), the level table sized to its rows, the
/// progress line at the bottom.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let avail = area.height.saturating_sub(3);
    let (n_sweep, n_rates) = (
        app.session.summary.sweep.len() as u16,
        app.session.summary.rates.len() as u16,
    );
    // A trace replays alone: its table stands in for the others.
    let n_traces = app.session.summary.traces.len() as u16;
    let (n_sweep, n_rates) = if n_traces > 0 {
        (0, n_traces)
    } else {
        (n_sweep, n_rates)
    };
    let tune_h = super::tune::height(app);
    // Session levels get their table below the others (alone, when there are no others).
    let sessions_h = if n_traces > 0 {
        0
    } else {
        super::sessions::height(app)
    };
    let wanted_table = tune_h
        + sessions_h
        + match (n_sweep, n_rates) {
            (0, 0) if sessions_h > 0 => 0,
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
    // A tune's configurations above the level tables: all of them where the level tables keep
    // room for their rows, else this one alone.
    let table = match app.session.summary.tune_progress.as_ref() {
        Some(t) if table.height >= super::tune::COMPACT + 8 => {
            let h = if table.height >= tune_h + 8 {
                tune_h
            } else {
                super::tune::COMPACT
            };
            let [a, rest] =
                Layout::vertical([Constraint::Length(h), Constraint::Min(8)]).areas(table);
            super::tune::render(app, t, a, buf, th);
            rest
        }
        _ => table,
    };
    let table = match (sessions_h, n_sweep + n_rates) {
        (0, _) => table,
        (_, 0) => {
            super::sessions::render(app, table, buf, th);
            render_progress(app, bottom, buf, th);
            return;
        }
        (h, n) => {
            let [rest, s] =
                Layout::vertical([Constraint::Fill(n + 3), Constraint::Fill(h)]).areas(table);
            super::sessions::render(app, s, buf, th);
            rest
        }
    };
    // The wide table (p90s, TPOT, E2E, server accept, KV%) needs about 145 columns.
    let wide = area.width >= 148;
    match (n_sweep, n_rates) {
        _ if n_traces > 0 => super::trace::render_trace_table(app, table, buf, th, wide),
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

fn render_charts(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    // Wide: throughput and per-stream speed vs C, the live rate, the latency histogram.
    // Narrow: throughput vs C and the latency histogram.
    let cells: Vec<Rect> = if area.width >= 120 {
        Layout::horizontal([Constraint::Ratio(1, 4); 4])
            .split(area)
            .to_vec()
    } else {
        Layout::horizontal([Constraint::Ratio(1, 2); 2])
            .split(area)
            .to_vec()
    };
    let v = &app.views.sweep;
    if !app.session.summary.traces.is_empty() {
        if let [a, b, c, d] = cells.as_slice() {
            super::trace::render_trace_charts(app, *a, Some(*b), buf, th);
            render_live_rate(app, *c, buf, th);
            super::latency::render(app, *d, buf, th);
        } else {
            super::trace::render_trace_charts(app, cells[0], None, buf, th);
            super::latency::render(app, cells[1], buf, th);
        }
        return;
    }
    // An SLO search's one closed-loop level is its throughput probe: its rate probes are the
    // curve worth drawing.
    let rates_first = app.session.summary.sweep.is_empty() || app.session.summary.search.is_some();
    if rates_first && !app.session.summary.rates.is_empty() {
        let (a, b, c) = match cells.as_slice() {
            [a, b, c, _] => (*a, Some(*b), *c),
            _ => (cells[0], None, cells[1]),
        };
        render_rate_charts(app, (a, b, c), buf, th);
        return;
    }
    let top = v.x_max.max(1.0);
    let x = || {
        (
            [0.0, top],
            ["C=1".to_string(), format!("C={}", 2f64.powf(top).round())],
            v.ticks.as_slice(),
        )
    };
    let base = if app.session.summary.baseline.is_some() {
        " · ··· baseline"
    } else {
        ""
    };
    let waiting = "waiting for the first level…";
    super::curve_chart(
        &format!("out tok/s vs C{base}"),
        "out tok/s",
        &v.aggregate,
        0,
        x(),
        waiting,
        cells[0],
        buf,
        th,
    );
    if let [_, b, c, d] = cells.as_slice() {
        super::curve_chart(
            &format!("per-stream tok/s vs C{base}"),
            "per-stream",
            &v.per_stream,
            1,
            x(),
            waiting,
            *b,
            buf,
            th,
        );
        render_live_rate(app, *c, buf, th);
        super::latency::render(app, *d, buf, th);
    } else {
        super::latency::render(app, cells[1], buf, th);
    }
}

/// The output rate sampled each second: the level in progress bright, the levels before it
/// dim. A saved run has no live rate: TTFT p50 and p99 against C take the place.
fn render_live_rate(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let live = &app.clocked.rate;
    let running = app
        .session
        .current
        .and_then(|i| app.session.summary.level(i));
    if live.series.is_empty() && live.finished.is_empty() && app.session.summary.sweep.is_empty() {
        LineChart {
            title: "out tok/s each second",
            series: &[],
            x: [0.0, 1.0],
            x_ends: [String::new(), String::new()],
            ticks: &[],
            y_fixed: None,
            highlight: None,
            highlight_pending: false,
            empty: "sampled once a second while a level runs",
        }
        .render(area, buf, th);
        return;
    }
    if live.series.is_empty() && live.finished.is_empty() {
        render_ttft_by_c(app, area, buf, th);
        return;
    }
    let newest = live.finished.len().saturating_sub(1);
    let mut series: Vec<Series> = live
        .finished
        .iter()
        .enumerate()
        .map(|(i, (label, pts))| {
            // Between levels the one just ended stays bright.
            let style = if running.is_none() && i == newest {
                Style::default().fg(th.series[2])
            } else {
                th.dim
            };
            Series::line(label, pts, style)
        })
        .collect();
    series.push(Series::line(
        "now",
        &live.series,
        Style::default().fg(th.series[2]),
    ));
    let t_max = live
        .finished
        .iter()
        .filter_map(|(_, p)| p.last().map(|p| p.0))
        .chain(live.series.last().map(|p| p.0))
        .fold(1.0, f64::max);
    // The level by its full label (its pass with it), in shorter words when the panel is narrow.
    let titles = if let Some(l) = running {
        let now = num(Some(live.current));
        vec![
            format!("out tok/s each second · {} now {now}", l.label()),
            format!("out tok/s · {} now {now}", l.label()),
            format!("out tok/s each second · {} now {now}", l.short_label()),
        ]
    } else {
        let last = live.finished.last().map_or("", |f| f.0.as_str());
        vec![
            format!("out tok/s each second · {last} bright"),
            format!("out tok/s · {last} bright"),
            "out tok/s each second".to_string(),
        ]
    };
    // Within the borders and the space before it (the one after may meet the corner).
    let title = crate::tui::text::first_fitting(&titles, usize::from(area.width.saturating_sub(3)));
    LineChart {
        title: &title,
        series: &series,
        x: [0.0, t_max],
        x_ends: ["0 s".into(), format!("{t_max:.0} s")],
        ticks: if running.is_some() {
            &live.steady_ticks
        } else {
            &[]
        },
        y_fixed: None,
        highlight: None,
        highlight_pending: false,
        empty: "",
    }
    .render(area, buf, th);
}

/// A saved run's stand-in for the live rate: TTFT against C (several passes: each series'
/// p50, named under the chart; one: its p50 and p99).
fn render_ttft_by_c(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let v = &app.views.sweep;
    let top = v.x_max.max(1.0);
    // Several passes: each series' p50, named under the chart; one: its p50 and p99.
    let (series, title) = if v.ttft_p50.len() > 1 {
        (
            super::chart::pass_series(&v.ttft_p50, "p50", th, 2),
            "TTFT p50 ms vs C",
        )
    } else {
        let mut series = super::chart::pass_series(&v.ttft_p50, "p50", th, 2);
        series.push(Series::dotted(
            "p99",
            &v.ttft_p99,
            Style::default().fg(th.series[2]),
        ));
        (series, "TTFT ms vs C: p50 line, p99 dots")
    };
    LineChart {
        title,
        series: &series,
        x: [0.0, top],
        x_ends: ["C=1".into(), format!("C={}", 2f64.powf(top).round())],
        ticks: &v.ticks,
        y_fixed: None,
        highlight: None,
        highlight_pending: false,
        empty: "sampled once a second while a level runs",
    }
    .render(area, buf, th);
}

fn row<'a>(app: &App, l: &LevelSummary, wide: bool, th: &Theme) -> Row<'a> {
    let RowBasics {
        stats,
        running,
        done,
        status_text,
        failed,
    } = row_basics(app, l);
    // A concurrency search's probe reads `#step C=N`.
    let search = app.session.summary.search.as_ref();
    let label = search
        .and_then(|s| s.probe_of(l.index))
        .map_or_else(|| l.label(), |p| format!("#{} {}", p.step, l.label()));
    let mut cells = vec![Cell::from(label), Cell::from(status_text), Cell::from(done)];
    let s = stats;
    let d = s.map(|s| &s.dists);
    // With a baseline the Δ columns take the place of req/s, server accept (wide), per-stream
    // speed and client accept (narrow).
    let base = app.session.summary.baseline.is_some();
    if wide && !base {
        cells.push(Cell::from(num(s.map(|s| s.scalars.request_throughput))));
    }
    cells.push(Cell::from(num(s.map(|s| s.scalars.output_throughput))));
    if wide || !base {
        cells.push(Cell::from(num(d
            .and_then(|d| d.decode_tokens_per_s.as_ref())
            .map(|x| x.mean))));
    }
    cells.extend([
        Cell::from(ppp(d.and_then(|d| d.ttft_ms.as_ref()), wide)),
        Cell::from(ppp(d.and_then(|d| d.itl_ms.as_ref()), wide)),
    ]);
    if wide {
        cells.push(Cell::from(ppp(d.and_then(|d| d.tpot_ms.as_ref()), true)));
        // A thinking model: when its answer began, in the place of E2E (in the files still).
        let cell = if app.sweep_reasons() {
            match d.and_then(|d| d.ttfc_ms.as_ref()) {
                // Every request still thinking: TTFC never happened (never 0, never "-").
                None if s.is_some_and(|s| s.scalars.unanswered_requests > 0) => "never".into(),
                t => ppp(t, true),
            }
        } else {
            ppp(d.and_then(|d| d.e2el_ms.as_ref()), true)
        };
        cells.push(Cell::from(cell));
    }
    // Tokens per chunk that are delivery bursts are no accept length (see `chunk_verdict`).
    if wide || !base {
        cells.push(Cell::from(num(s
            .filter(|_| !l.delivery_bursts)
            .and_then(|s| s.scalars.accept_length_client))));
    }
    if base {
        cells.extend(delta_cells(app, l, th));
    }
    if wide {
        if !base {
            cells.push(Cell::from(num(l.accept_length_server)));
        }
        cells.push(kv_cell(l));
        if app.sweep_energy() {
            cells.push(Cell::from(num(l.energy.output_tokens_per_joule)));
        }
    }
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

/// The level column as wide as the longest label: `C=100 #3` with --repeat, `C=64 (think
/// 1024)` with --thinking-budget.
fn label_width(app: &App) -> u16 {
    let longest = app
        .session
        .summary
        .sweep
        .iter()
        .map(|l| l.label().chars().count())
        .max()
        .unwrap_or(0);
    u16::try_from(longest.clamp(6, 24)).unwrap_or(24)
}

/// What the table holds, long and short: the sweep, the rate search's throughput probe, or the
/// concurrency search's probes with where the search stands.
fn table_title(app: &App) -> (String, &'static str) {
    match &app.session.summary.search {
        Some(s) if s.target == crate::workload::search::SearchTarget::Concurrency => (
            format!(
                "SLO search: concurrency probes · {}",
                super::rates::search_title(s)
            ),
            "SLO search",
        ),
        Some(_) => (
            "SLO search: closed-loop throughput probe".to_string(),
            "SLO search",
        ),
        None => ("concurrency sweep".to_string(), "sweep"),
    }
}

fn render_table(app: &App, area: Rect, buf: &mut Buffer, th: &Theme, wide: bool) {
    // Narrow terminals get shorter headers and two percentiles, so nothing is cut mid-word.
    let mut header = vec!["C", "status", "done"];
    // A label that names a pass (`C=16 (think 64)`) takes a column from done, TTFT and ITL at
    // 80 columns, which need no more than their values.
    let tight = !wide && label_width(app) > 12;
    let mut widths = vec![
        Constraint::Length(label_width(app)),
        Constraint::Length(super::cells::status_width(app, &app.session.summary.sweep)),
        Constraint::Length(if tight { 6 } else { 7 }),
    ];
    let base = app.session.summary.baseline.is_some();
    if wide && !base {
        header.push("req/s");
        widths.push(Constraint::Length(6));
    }
    header.push(if wide { "out tok/s" } else { "tok/s" });
    widths.push(Constraint::Length(if wide { 9 } else { 6 }));
    if wide || !base {
        header.push("stream");
        widths.push(Constraint::Length(6));
    }
    header.extend(if wide {
        ["TTFT p50/90/99", "ITL p50/90/99"]
    } else {
        ["TTFT p50/99", "ITL p50/99"]
    });
    widths.extend([
        Constraint::Length(if wide { 19 } else { 12 - u16::from(tight) }),
        Constraint::Length(if wide { 17 } else { 11 - u16::from(tight) }),
    ]);
    if wide {
        header.extend([
            "TPOT p50/90/99",
            if app.sweep_reasons() {
                "TTFC p50/90/99"
            } else {
                "E2E p50/90/99"
            },
        ]);
        widths.extend([Constraint::Length(16), Constraint::Length(19)]);
    }
    if wide || !base {
        header.push("acc");
        widths.push(Constraint::Length(5));
    }
    if base {
        header.extend(DELTA_HEADERS);
        widths.extend([Constraint::Length(DELTA_WIDTH); 3]);
    }
    if wide {
        if !base {
            header.push("srv");
            widths.push(Constraint::Length(5));
        }
        header.push("KV%");
        widths.push(Constraint::Length(4));
        if app.sweep_energy() {
            header.push("tok/J");
            widths.push(Constraint::Length(6));
        }
    }
    header.push("fail");
    widths.push(Constraint::Length(4));
    // Keep the level in progress in view when there are more levels than rows, and format only
    // the rows that fit.
    // The headline series' levels first, then each other series' (docs/outputs.md "Passes").
    let levels =
        crate::tui::views::in_rows(&app.views.sweep.sweep_rows, &app.session.summary.sweep);
    let (skip, visible) = super::cells::rows_in_view(
        levels.iter().map(|l| l.index),
        app.ui.selected.or(app.session.current),
        area,
    );
    let repeats = match app.session.summary.config.repeat {
        n if n > 1 => format!(" · each level {n} times, the plan over again (#2, #3…)"),
        _ => String::new(),
    };
    let (what, short) = table_title(app);
    let lengths = app.session.summary.config.lengths_label();
    // Shorter forms before a cut word (80 columns).
    let title = crate::tui::text::first_fitting(
        &[
            format!(" {what} · {lengths}{repeats} · ms unless noted "),
            format!(" {what} · {lengths}{repeats} "),
            format!(" {short} · {lengths}{repeats} "),
            format!(" {short} · {lengths} "),
        ],
        usize::from(area.width.saturating_sub(2)),
    );
    let rows: Vec<Row> = levels
        .iter()
        .skip(skip)
        .take(visible)
        .map(|l| row(app, l, wide, th))
        .collect();
    super::cells::level_table(rows, widths, Row::new(header), title, th, area, buf);
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
            let ratio = if let (Some(secs), Some(e)) = (l.seconds, app.eta_s()) {
                (1.0 - e / secs).clamp(0.0, 1.0)
            } else if l.requests > 0 {
                (p.finished as f64 / f64::from(l.requests)).clamp(0.0, 1.0)
            } else {
                0.0
            };
            // This level's rest at its pace ("level 00:12 left"), then the whole run's: that
            // plus the waiting levels' estimate ("run 00:16–01:04 left"); while this level has
            // no pace yet, the waiting levels' alone ("other levels 00:14–01:29").
            let clock = |s: f64| crate::tui::text::clock(std::time::Duration::from_secs_f64(s));
            let this = app.eta_s();
            let run = app
                .views
                .waiting_eta
                .filter(|w| w.levels > 0)
                .map_or(String::new(), |w| {
                    let e = this.unwrap_or(0.0);
                    let span = if w.high_s <= w.low_s * 1.25 {
                        format!("~{}", clock(e + w.high_s))
                    } else {
                        format!("{}–{}", clock(e + w.low_s), clock(e + w.high_s))
                    };
                    if this.is_some() {
                        format!(" · run {span} left")
                    } else {
                        format!(" · other levels {span}")
                    }
                });
            let eta = this.map_or(String::new(), |e| format!(" · level {} left", clock(e))) + &run;
            let paused = if app.ui.paused { " · PAUSED" } else { "" };
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
            // A thinking model: how much of the output is thinking, and when answers begin.
            let thinking = app
                .level_stats(l.index)
                .filter(|s| s.scalars.reasoning_share.is_some_and(|r| r > 0.0))
                .map_or(String::new(), |s| {
                    let ttfc = s.dists.ttfc_ms.as_ref().map_or_else(
                        || "never".to_string(),
                        |d| format!("{} ms", num(Some(d.p50))),
                    );
                    format!(
                        " · thinking {:.0} % · TTFC p50 {ttfc}",
                        s.scalars.reasoning_share.unwrap_or(0.0) * 100.0,
                    )
                });
            let done = match l.seconds {
                Some(secs) => format!("{} done · level of {secs} s", p.finished),
                None => format!("{}/{} done", p.finished, l.requests),
            };
            let label = format!(
                "{} · {done} · {} in flight{queue}{thinking} · {} tok/s now{eta}{paused}",
                l.label(),
                app.session.in_flight(l.index),
                num(Some(app.clocked.rate.current))
            );
            Gauge::default()
                .ratio(ratio)
                .label(crate::tui::text::fit(&label, gauge_area.width as usize))
                .gauge_style(ratatui::style::Style::default().fg(th.series[0]))
                .render(gauge_area, buf);
        }
        None => Line::from(Span::styled(
            crate::tui::text::fit(&app.session.phase, gauge_area.width as usize),
            th.accent,
        ))
        .render(gauge_area, buf),
    }
    if spark_w > 0 {
        let [label, spark] =
            Layout::horizontal([Constraint::Length(12), Constraint::Min(1)]).areas(spark_area);
        let last = app.views.accept_history.last().map(|v| *v as f64 / 100.0);
        Line::from(Span::styled(format!(" acc {} ", num(last)), th.accent)).render(label, buf);
        Sparkline::default()
            .data(&app.views.accept_history)
            .style(ratatui::style::Style::default().fg(th.series[1]))
            .render(spark, buf);
    }
}
