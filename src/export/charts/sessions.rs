//! `sessions.png`: agent sessions, turn by turn — TTFT by turn, against the context the turn
//! carried and against the tool wait before it, and the prefix cache's served tokens against
//! the ceiling it could have served.

use super::ChartRun;
use super::figure::{Figure, figure};
use super::panel::{Line, Panel, XKind, color};
use crate::metrics::TurnStats;
use crate::summary::LevelSummary;

/// One line per session level of every run (`8 users`, `run · 8 users` when several), of
/// `(x, y)` from each of its turns.
fn per_level(
    runs: &[ChartRun<'_>],
    name: &str,
    point: impl Fn(&TurnStats) -> Option<(f64, f64)>,
    dashed: bool,
) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut k = 0;
    for r in runs {
        for l in &r.summary.sessions {
            let points: Vec<(f64, f64)> = turns(l).iter().filter_map(&point).collect();
            let users = format!(
                "{} user{}",
                l.concurrency,
                if l.concurrency == 1 { "" } else { "s" }
            );
            let who = if runs.len() > 1 {
                format!("{} · {users}", r.label)
            } else {
                users
            };
            lines.push(Line {
                name: if name.is_empty() {
                    who
                } else {
                    format!("{who} {name}")
                },
                points,
                color: color(k),
                dashed,
                errors: Vec::new(),
            });
            k += 1;
        }
    }
    lines
}

/// A line per session level: its turns after a tool wait, binned by the wait (`ttft_by_wait`),
/// each bin's median wait (s) against its TTFT p50.
fn by_wait(runs: &[ChartRun<'_>]) -> Vec<Line> {
    let mut lines = per_level(runs, "", |_| None, false);
    let levels = runs.iter().flat_map(|r| r.summary.sessions.iter());
    for (line, l) in lines.iter_mut().zip(levels) {
        let bins = l
            .stats
            .as_ref()
            .and_then(|s| s.scalars.session.as_ref())
            .map_or(&[][..], |x| x.ttft_by_wait.as_slice());
        line.points = bins
            .iter()
            .map(|b| (b.median_wait_ms / 1e3, b.median_ttft_ms))
            .collect();
    }
    lines
}

fn turns(l: &LevelSummary) -> &[TurnStats] {
    l.stats.as_ref().map_or(&[], |s| s.scalars.turns.as_slice())
}

/// The session levels by turn: TTFT p50 by turn, TTFT p50 against the turn's mean prompt (its
/// context), and per turn the tokens the prefix cache served beside the ceiling.
pub(super) fn sessions_figure(runs: &[ChartRun<'_>]) -> Figure {
    let empty = "no session level finished in this run".to_string();
    let turn = |t: &TurnStats| f64::from(t.turn);
    let ttft = per_level(runs, "", |t| Some((turn(t), t.median_ttft_ms?)), false);
    let context = per_level(
        runs,
        "",
        |t| Some((t.mean_input_tokens? / 1000.0, t.median_ttft_ms?)),
        false,
    );
    let mut cache = per_level(
        runs,
        "served",
        |t| Some((turn(t), t.cached_tokens? as f64)),
        false,
    );
    cache.extend(per_level(
        runs,
        "ceiling",
        |t| Some((turn(t), t.cache_ceiling_tokens? as f64)),
        true,
    ));
    let by_wait = by_wait(runs);
    let panel = |title: &str, x: XKind, y_desc: &str, y_log_ok: bool, lines: Vec<Line>| Panel {
        title: title.into(),
        x,
        y_desc: y_desc.into(),
        y_log_ok,
        y_top: None,
        lines,
        marks: vec![],
        limits: vec![],
        events: vec![],
        empty: empty.clone(),
    };
    let panels = [
        panel("TTFT p50 by turn", XKind::Turn, "ms", true, ttft),
        panel(
            "TTFT p50 against the context",
            XKind::ContextK,
            "ms",
            true,
            context,
        ),
        panel(
            "TTFT p50 against the tool wait before the turn",
            XKind::Wait,
            "ms",
            true,
            by_wait,
        ),
        panel(
            "Prefix cache: served and ceiling",
            XKind::Turn,
            "prompt tokens, Σ over sessions",
            false,
            cache,
        ),
    ];
    let s = runs[0].summary;
    let mut footer: Vec<String> = s
        .sessions
        .iter()
        .take(1)
        .map(|l| {
            let c = l.conversation.map_or((0, 0), |c| (c.turns, c.followup_tokens));
            format!(
                "Sessions of {} turns: turn 1 sends {} tokens{}, each later turn the whole context so far plus a {}-token tool result after a tool wait of {}. A line per level of users.",
                c.0,
                l.input_len,
                if l.shared_prefix_tokens > 0 {
                    format!(" ({} of them a system prompt every session shares)", l.shared_prefix_tokens)
                } else {
                    String::new()
                },
                c.1,
                l.tool_wait.map_or_else(|| "none".into(), |w| w.describe())
            )
        })
        .collect();
    footer.push("Served: the prompt tokens the server's prefix cache served, by its own count. Ceiling: the tokens of each prompt the server had finished for the session or the shared prefix before the turn was sent (docs/metrics.md, Agent sessions); the gap is what eviction cost.".into());
    figure("Agent sessions by turn", runs, panels.into(), 2, footer)
}
