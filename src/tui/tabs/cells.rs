//! Cells and row pieces that the sweep table and the rate table share.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row, Table, Widget};

use crate::fmt::num;
use crate::metrics::DistStats;
use crate::summary::{LevelStatus, LevelSummary};
use crate::tui::app::App;
use crate::tui::theme::Theme;

pub(super) fn ppp(d: Option<&DistStats>, wide: bool) -> String {
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

pub(super) fn kv_cell(l: &LevelSummary) -> Cell<'static> {
    let kv = l.server_metrics.as_ref().and_then(|m| m.mean_kv_usage);
    Cell::from(kv.map_or("-".into(), |k| format!("{:.0}", k * 100.0)))
}

/// The failures cell and the row's style (running, waiting or done), shared by both tables.
pub(super) fn finish_row(
    mut cells: Vec<Cell<'static>>,
    l: &LevelSummary,
    has_stats: bool,
    failed: u64,
    running: bool,
    selected: bool,
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
    Row::new(cells).style(if selected {
        style.patch(th.selected)
    } else {
        style
    })
}

/// What every level row starts from: its statistics (live for the running one), whether it is
/// running, the done cell (finished/planned while running), its status word (`outage 12 s` for
/// a level the server was away from, done or running) and failures.
pub(super) struct RowBasics<'a> {
    pub(super) stats: Option<&'a crate::metrics::LevelStats>,
    pub(super) running: bool,
    pub(super) done: String,
    pub(super) status_text: String,
    pub(super) failed: u64,
}

/// The level's outage in seconds, when it had one (live for the running level).
fn outage_s(app: &App, l: &LevelSummary) -> Option<f64> {
    let s = app.level_stats(l.index)?.scalars.outage_s;
    (s > 0.0).then_some(s)
}

/// The status column's width: wide enough for `outage 12 s` only when a level has an outage.
pub(super) fn status_width(app: &App, levels: &[LevelSummary]) -> u16 {
    if levels.iter().any(|l| outage_s(app, l).is_some()) {
        11
    } else {
        7
    }
}

pub(super) fn row_basics<'a>(app: &'a App, l: &LevelSummary) -> RowBasics<'a> {
    let stats = app.level_stats(l.index);
    let running = app.session.current == Some(l.index);
    let progress = app.session.progress.get(&l.index);
    let done = match (stats, progress) {
        (_, Some(p)) if running => match l.seconds {
            // A time-bounded level has no count to reach: what finished (the progress bar
            // shows its time).
            Some(_) => p.finished.to_string(),
            None => format!("{}/{}", p.finished, l.requests),
        },
        (Some(s), _) => s.scalars.completed.to_string(),
        _ => "-".into(),
    };
    RowBasics {
        stats,
        running,
        done,
        status_text: match outage_s(app, l) {
            Some(s) if running || l.status == LevelStatus::Done => format!("outage {s:.0} s"),
            _ if running => "running".into(),
            _ => l.status.name().into(),
        },
        failed: stats.map_or(0, |s| s.scalars.failed),
    }
}

/// The rows a level table in `area` shows: `(skip, visible)`, so that the level `focus` names
/// (the one in progress, or the one picked) stays in view when there are more levels than rows.
pub(super) fn rows_in_view(
    indices: impl Iterator<Item = u32>,
    focus: Option<u32>,
    area: Rect,
) -> (usize, usize) {
    let visible = area.height.saturating_sub(3) as usize;
    let at = indices
        .into_iter()
        .position(|i| focus == Some(i))
        .unwrap_or(0);
    ((at + 1).saturating_sub(visible), visible)
}

/// Draws a table of level rows under `header` in a titled panel (the sweep and rate tables).
pub(super) fn level_table<'a>(
    rows: Vec<Row<'a>>,
    widths: Vec<Constraint>,
    header: Row<'a>,
    title: impl Into<ratatui::text::Line<'a>>,
    th: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    Table::new(rows, widths)
        .header(header.style(th.title))
        .column_spacing(1)
        .block(th.panel(title))
        .render(area, buf);
}

/// The three Δ% cells of a level against the baseline (`--baseline`): out tok/s, TTFT p50,
/// TPOT p50; a change for the worse beyond `--fail-on-regression` in the bad style, `-`
/// without a match.
pub(super) fn delta_cells(app: &App, l: &LevelSummary, th: &Theme) -> [Cell<'static>; 3] {
    let c = app.views.deltas.get(&l.index);
    let limit = app
        .session
        .summary
        .baseline
        .as_ref()
        .and_then(|b| b.fail_on_regression_pct);
    let cell = |d: Option<f64>, higher_is_worse: bool| {
        let Some(d) = d else {
            return Cell::from("-").style(th.dim);
        };
        let worse_by = if higher_is_worse { d } else { -d };
        let style = match limit {
            Some(lim) if worse_by > lim => th.bad,
            _ if worse_by < 0.0 => th.ok,
            _ => ratatui::style::Style::default(),
        };
        Cell::from(crate::summary::baseline::fmt_pct(d)).style(style)
    };
    [
        cell(c.and_then(|c| c.output_throughput_pct), false),
        cell(c.and_then(|c| c.ttft_p50_pct), true),
        cell(c.and_then(|c| c.tpot_p50_pct), true),
    ]
}

/// The Δ% columns' headers and widths.
pub(super) const DELTA_HEADERS: [&str; 3] = ["Δtok", "ΔTTFT", "ΔTPOT"];
pub(super) const DELTA_WIDTH: u16 = 6;
