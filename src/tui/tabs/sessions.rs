//! The session levels' table (`--sessions`), in the Sweep tab: per level of users, its sessions
//! and turns done, how many of its users have a request in flight and how many are waiting
//! (on a tool, or between turns), TTFT by turn, and the prefix cache's served tokens against
//! the ceiling — in all, and (wide) over time: the share kept in each 5-second stretch of the
//! level, newest at the right.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row};

use crate::fmt::num;
use crate::summary::LevelSummary;
use crate::tui::app::App;
use crate::tui::theme::Theme;

use super::cells::{finish_row, row_basics};

/// Rows the table wants: a header, a row per level, borders.
pub fn height(app: &App) -> u16 {
    match app.session.summary.sessions.len() {
        0 => 0,
        n => n.min(40) as u16 + 3,
    }
}

/// `sessions done/planned`, `turns done` of a level (live while it runs).
fn progress_cells(app: &App, l: &LevelSummary, done: String) -> [String; 2] {
    let planned = l.requests / l.conversation.map_or(1, |c| c.requests());
    let sessions = app
        .level_stats(l.index)
        .and_then(|s| s.scalars.session.as_ref())
        .map_or(0, |s| s.sessions_completed);
    [format!("{sessions}/{planned}"), done]
}

/// In flight and waiting: of the running level's users, those with a request out and the
/// rest (on a tool's wait, or between one turn's end and the next's send); `-` for the others.
/// With sub-agents, the requests in flight, theirs included.
fn live_cells(app: &App, l: &LevelSummary, running: bool) -> [String; 2] {
    if !running {
        return ["-".into(), "-".into()];
    }
    let out = app.session.in_flight(l.index);
    // With sub-agents the requests in flight are not one a user: how many users wait is not
    // known from them.
    if l.conversation.is_some_and(|c| c.fan_out > 0) {
        return [out.to_string(), "-".into()];
    }
    [
        out.to_string(),
        u64::from(l.concurrency).saturating_sub(out).to_string(),
    ]
}

/// Width of the "kept over time" column: its last bins.
const SPARK_BINS: usize = 14;

/// The share of the ceiling the cache served in each bin, as a bar from `▁` (none) to `█`
/// (all), blank for a bin without a turn; the last `width` bins.
fn kept_spark(bins: &[crate::metrics::sessions::CacheBin], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let from = bins.len().saturating_sub(width);
    bins[from..]
        .iter()
        .map(|b| {
            b.kept().map_or(' ', |k| {
                BARS[((k.clamp(0.0, 1.0) * 7.0).round() as usize).min(7)]
            })
        })
        .collect()
}

fn row(app: &App, l: &LevelSummary, wide: bool, th: &Theme) -> Row<'static> {
    let b = row_basics(app, l);
    let [sessions, turns] = progress_cells(app, l, b.done.clone());
    let [out, waiting] = live_cells(app, l, b.running);
    let s = b.stats.and_then(|s| s.scalars.session.as_ref());
    let by_turn = s.map_or_else(
        || "-".to_string(),
        |s| {
            s.ttft_by_turn_ms
                .iter()
                .map(|t| num(*t))
                .collect::<Vec<_>>()
                .join(" ")
        },
    );
    let cache = match s.map(|s| (s.cached_tokens, s.cache_ceiling_tokens)) {
        Some((Some(c), Some(x))) if x > 0 && wide => {
            format!("{c}/{x} ({:.0} %)", c as f64 / x as f64 * 100.0)
        }
        Some((Some(c), Some(x))) if x > 0 => format!("{:.0} %", c as f64 / x as f64 * 100.0),
        Some((Some(c), _)) if wide => format!("{c}/-"),
        _ => "-".into(),
    };
    let mut cells = vec![
        Cell::from(l.users_cell()),
        Cell::from(b.status_text),
        Cell::from(sessions),
        Cell::from(turns),
        Cell::from(out),
        Cell::from(waiting),
    ];
    if wide {
        cells.push(Cell::from(num(b
            .stats
            .map(|s| s.scalars.output_throughput))));
    }
    cells.extend([Cell::from(by_turn), Cell::from(cache)]);
    if wide {
        cells.push(Cell::from(s.map_or_else(
            || "-".to_string(),
            |s| kept_spark(&s.cache_by_time, SPARK_BINS),
        )));
    }
    let selected = app.ui.selected == Some(l.index);
    finish_row(
        cells,
        l,
        b.stats.is_some(),
        b.failed,
        b.running,
        selected,
        th,
    )
}

/// Draws the table into `area`.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let levels = &app.session.summary.sessions;
    let Some(first) = levels.first() else {
        return;
    };
    let c = first
        .conversation
        .map_or((0, 0), |c| (c.turns, c.followup_tokens));
    let sub = first
        .conversation
        .filter(|c| c.fan_out > 0)
        .map_or_else(String::new, |c| format!(" · {} sub-agents", c.fan_out));
    let wait = first
        .tool_wait
        .map_or_else(|| "none".into(), |w| w.describe());
    // Shorter forms before a cut word (80 columns).
    let title = crate::tui::text::first_fitting(
        &[
            format!(
                " agent sessions · {} turns{sub} · tool results {} tokens · tool waits {wait} · ms unless noted ",
                c.0, c.1
            ),
            format!(
                " agent sessions · {} turns{sub} · tool results {} tokens · tool waits {wait} ",
                c.0, c.1
            ),
            format!(" agent sessions · {} turns{sub} · tool waits {wait} ", c.0),
            " agent sessions ".to_string(),
        ],
        usize::from(area.width.saturating_sub(2)),
    );
    // Wide: every column at its full name; narrow (80 columns): short names, the cache as a share.
    let wide = area.width >= 120;
    let (header, widths) = if wide {
        (
            vec![
                "users",
                "status",
                "sessions",
                "turns",
                "sending",
                "waiting",
                "out tok/s",
                "TTFT p50 by turn",
                "cached/ceiling tok",
                "kept per 5 s",
                "fail",
            ],
            vec![6, 8, 9, 8, 8, 8, 10, 0, 20, SPARK_BINS as u16, 4],
        )
    } else {
        (
            vec![
                "users",
                "status",
                "sessions",
                "turns",
                "out",
                "wait",
                "TTFT p50 by turn",
                "cached",
                "fail",
            ],
            vec![5, 8, 8, 7, 4, 4, 0, 7, 4],
        )
    };
    let header = Row::new(header);
    // 0: the column that takes what is left.
    let widths: Vec<Constraint> = widths
        .into_iter()
        .map(|w| {
            if w == 0 {
                Constraint::Min(16)
            } else {
                Constraint::Length(w)
            }
        })
        .collect();
    let (skip, visible) =
        super::cells::rows_in_view(levels.iter().map(|l| l.index), app.session.current, area);
    let rows: Vec<Row> = levels
        .iter()
        .skip(skip)
        .take(visible)
        .map(|l| row(app, l, wide, th))
        .collect();
    super::cells::level_table(rows, widths, header, title, th, area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::sessions::CacheBin;

    #[test]
    fn the_spark_draws_each_bins_share_and_keeps_the_newest() {
        let bin = |cached, ceiling| CacheBin {
            from_s: 0,
            turns: u64::from(ceiling > 0),
            cached_tokens: cached,
            cache_ceiling_tokens: ceiling,
        };
        let bins = [
            bin(100, 100),
            bin(0, 100),
            bin(0, 0),
            bin(50, 100),
            bin(100, 100),
        ];
        assert_eq!(kept_spark(&bins, 14), "█▁ ▅█");
        assert_eq!(kept_spark(&bins, 2), "▅█");
        assert_eq!(kept_spark(&[], 14), "");
    }
}
