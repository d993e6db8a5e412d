//! The sweep tab's request-rate part: the rate table (with the SLO search's verdicts) and the
//! rate charts.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row};

use super::chart::pass_series;
use super::{Series, line_chart};
use crate::fmt::num;
use crate::summary::LevelSummary;
use crate::tui::app::App;
use crate::tui::theme::Theme;

use super::cells::{RowBasics, finish_row, kv_cell, ppp, row_basics};

/// Client queue p50 from which the cell is marked: requests typically waited in servetop
/// (dispatch itself takes well under a millisecond).
pub(super) const QUEUE_MARK_MS: f64 = 10.0;

pub(super) fn rate_row<'a>(app: &App, l: &LevelSummary, wide: bool, th: &Theme) -> Row<'a> {
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
        |p| format!("#{} {}", p.step, num(Some(p.at.value()))),
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

/// The level's verdict against the SLO: pass, fail, `?` when its interval straddles a limit.
pub(super) fn slo_cell(l: &LevelSummary, running: bool, th: &Theme) -> Cell<'static> {
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

pub(super) fn render_rate_table(app: &App, area: Rect, buf: &mut Buffer, th: &Theme, wide: bool) {
    let mut header = vec!["rate", "status", "done", "sent/s"];
    let mut widths = vec![
        Constraint::Length(10),
        Constraint::Length(super::cells::status_width(app, &app.session.summary.rates)),
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
    // The headline series' levels first, then each other series' (docs/outputs.md "Passes").
    let levels = crate::tui::views::in_rows(&app.views.sweep.rate_rows, &app.session.summary.rates);
    let (skip, visible) =
        super::cells::rows_in_view(levels.iter().map(|l| l.index), app.session.current, area);
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
    super::cells::level_table(rows, widths, Row::new(header), title, th, area, buf);
}

/// A run of rate levels only: completions against the offered rate, TTFT and client queue p99.
pub(super) fn render_rate_charts(
    app: &App,
    (a, b, c): (Rect, Option<Rect>, Rect),
    buf: &mut Buffer,
    th: &Theme,
) {
    let v = &app.views.sweep;
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
    // A curve per series of the passes, the headline's first (docs/outputs.md "Passes").
    let mut done = vec![Series::line("offered", &v.rate_offered, th.dim)];
    done.extend(pass_series(&v.rate_done, "done req/s", th, 0));
    line_chart(
        "done req/s vs offered (dim: offered)",
        &done,
        x(),
        waiting,
        a,
        buf,
        th,
    );
    if let Some(b) = b {
        line_chart(
            "client queue p99 ms vs offered req/s",
            &pass_series(&v.rate_queue_p99, "queue p99", th, 1),
            x(),
            waiting,
            b,
            buf,
            th,
        );
    }
    line_chart(
        "TTFT p99 ms vs offered req/s",
        &pass_series(&v.rate_ttft_p99, "TTFT p99", th, 2),
        x(),
        waiting,
        c,
        buf,
        th,
    );
}

/// The engine's mean KV-cache use over the level, in %.
/// `tpot:80 at p90 · [21.97, 22.75] req/s · converged`: the SLO, the bracket, where it stands.
pub(super) fn search_title(s: &crate::workload::search::SearchSummary) -> String {
    let state = match (s.status, s.answer()) {
        (crate::workload::search::SearchStatus::Converged, Some(a)) => format!("answer {a}"),
        (st, _) => st.describe(s.target).to_string(),
    };
    format!("{} · {} · {state}", s.slo.describe(), s.bracket())
}
