//! `turns.png`: multi-turn chats, turn by turn.

use super::figure::{Figure, figure};
use super::panel::{Panel, XKind};
use super::{ChartRun, run_lines};
use crate::summary::RunSummary;

/// A multi-turn level by turn: TTFT, and prompt tokens against those the server's prefix cache
/// served.
pub(super) fn turns_figure(runs: &[ChartRun<'_>]) -> Figure {
    let empty = "no multi-turn level finished in this run".to_string();
    let by_turn = |f: fn(&crate::metrics::TurnStats) -> Option<f64>| {
        move |s: &RunSummary| -> Vec<(f64, f64)> {
            s.multi_turn
                .iter()
                .filter_map(|l| l.stats.as_ref())
                .flat_map(|st| st.scalars.turns.iter())
                .filter_map(|t| Some((f64::from(t.turn), f(t)?)))
                .collect()
        }
    };
    let mut ttft = run_lines(runs, "p50", by_turn(|t| t.median_ttft_ms), false, 0);
    ttft.extend(run_lines(runs, "p90", by_turn(|t| t.p90_ttft_ms), true, 0));
    let mut tokens = run_lines(runs, "prompt", by_turn(|t| t.mean_input_tokens), false, 0);
    tokens.extend(run_lines(
        runs,
        "served from the cache",
        by_turn(|t| t.mean_cached_tokens),
        true,
        0,
    ));
    let panels = [
        Panel {
            title: "Time to first token by turn".into(),
            x: XKind::Turn,
            y_desc: "ms".into(),
            y_log_ok: true,
            y_top: None,
            lines: ttft,
            marks: vec![],
            limits: vec![],
            events: vec![],
            empty: empty.clone(),
        },
        Panel {
            title: "Prompt tokens by turn (mean)".into(),
            x: XKind::Turn,
            y_desc: "tokens".into(),
            y_log_ok: false,
            y_top: None,
            lines: tokens,
            marks: vec![],
            limits: vec![],
            events: vec![],
            empty,
        },
    ];
    let s = runs[0].summary;
    let footer: Vec<String> = s
        .multi_turn
        .iter()
        .map(|l| {
            let c = l.conversation.map_or((0, 0), |c| (c.turns, c.followup_tokens));
            format!(
                "{} conversations of {} turns, {} at a time: turn 1 sends {} tokens{}, each later turn the whole history (earlier messages and the real replies of {} tokens) plus a {}-token message. Cached tokens are the server's own per-request count (usage.prompt_tokens_details.cached_tokens).",
                l.requests / c.0.max(1),
                c.0,
                l.concurrency,
                l.input_len,
                if l.shared_prefix_tokens > 0 {
                    format!(" ({} of them a system prompt shared by all)", l.shared_prefix_tokens)
                } else {
                    String::new()
                },
                l.output_len,
                c.1
            )
        })
        .collect();
    figure(
        "Multi-turn chats (p50 solid, p90 dashed)",
        runs,
        panels.into(),
        2,
        footer,
    )
}
