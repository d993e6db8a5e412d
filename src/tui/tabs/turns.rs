//! The multi-turn level's table, one row per turn (in the long-context tab: both are about what
//! a long prompt costs, and what the prefix cache saves of it).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::widgets::{Cell, Row, Table, Widget};

use crate::fmt::num;
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Rows the table needs: a header and a row per planned turn of each level, plus borders.
pub fn height(app: &App) -> u16 {
    let rows: u32 = app
        .session
        .summary
        .multi_turn
        .iter()
        .map(|l| l.conversation.map_or(0, |c| c.turns))
        .sum();
    if rows == 0 {
        0
    } else {
        (rows.min(40) + 3) as u16
    }
}

/// Draws each turn's requests, prompt and cached tokens (the server's count) and TTFT.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let Some(l) = app.session.summary.multi_turn.first() else {
        return;
    };
    let running = app.session.current == Some(l.index);
    let stats = app.level_stats(l.index);
    let turns = stats.map_or(&[][..], |s| &s.scalars.turns[..]);
    let planned = l.conversation.map_or(0, |c| c.turns);
    let per_turn = l.requests / planned.max(1);
    let rows: Vec<Row> = (1..=planned)
        .map(|k| {
            let t = turns.iter().find(|t| t.turn == k);
            let done = t.map_or(0, |t| t.completed + t.failed);
            let failed = t.map_or(0, |t| t.failed);
            Row::new(vec![
                Cell::from(k.to_string()),
                Cell::from(format!("{done}/{per_turn}")),
                Cell::from(failed.to_string()).style(if failed > 0 { th.bad } else { th.dim }),
                Cell::from(num(t.and_then(|t| t.mean_input_tokens))),
                Cell::from(
                    match t.and_then(|t| t.cache_hit_rate.zip(t.mean_cached_tokens)) {
                        Some((r, c)) => format!("{c:.0} ({:.0}%)", r * 100.0),
                        None if done > 0 => "not reported".into(),
                        None => "-".into(),
                    },
                ),
                Cell::from(num(t.and_then(|t| t.median_ttft_ms))),
                Cell::from(num(t.and_then(|t| t.p90_ttft_ms))),
                Cell::from(num(t.and_then(|t| t.mean_tpot_ms))),
            ])
        })
        .collect();
    let hit = stats.and_then(|s| s.scalars.prefix_cache_hit_rate);
    let shown = if running { "running" } else { l.status.name() };
    let head = format!(" {} · {shown} · {per_turn} conversations", l.label());
    // Shorter forms before a cut word: the panel is 80 columns wide on a small terminal.
    let title = crate::tui::text::first_fitting(
        &[
            format!(
                "{head}{} · tokens, ms ",
                hit.map_or(String::new(), |r| format!(
                    " · {:.0}% of prompt tokens from the prefix cache",
                    r * 100.0
                ))
            ),
            format!(
                "{head}{} · tokens, ms ",
                hit.map_or(String::new(), |r| format!(
                    " · {:.0}% prefix-cached",
                    r * 100.0
                ))
            ),
            format!(
                "{head}{} ",
                hit.map_or(String::new(), |r| format!(" · {:.0}% cached", r * 100.0))
            ),
        ],
        usize::from(area.width.saturating_sub(2)),
    );
    Table::new(
        rows,
        [
            Constraint::Length(4),
            Constraint::Length(7),
            Constraint::Length(4),
            Constraint::Length(7),
            Constraint::Length(14),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
    )
    .header(
        Row::new([
            "turn",
            "done",
            "fail",
            "prompt",
            "cached",
            "TTFT p50",
            "TTFT p90",
            "TPOT mean",
        ])
        .style(th.title),
    )
    .column_spacing(1)
    .block(th.panel(title))
    .render(area, buf);
}
