//! The long-context tab's request in flight: prefill progress against the time the run's
//! prefill speed so far predicts, then the decode's tokens and live rate. Before the ladder
//! starts, the plan and each length's expected TTFT. Live figures here are the screen's (a
//! frame's precision); the request's record has the measured TTFT.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Gauge, Paragraph, Widget, Wrap};

use crate::fmt::{fmt_tokens, num};
use crate::summary::LevelSummary;
use crate::tui::app::App;
use crate::tui::text::fit;
use crate::tui::theme::Theme;
use crate::workload::LevelKind;

/// Draws the panel into `area` (four rows or more).
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let level = app
        .session
        .current
        .and_then(|i| app.session.summary.level(i))
        .filter(|l| l.kind == LevelKind::LongContext);
    match (level, app.clocked.last_sent_at) {
        (Some(l), Some(sent)) => render_request(app, l, sent, area, buf, th),
        _ => render_plan(app, area, buf, th),
    }
}

fn render_request(
    app: &App,
    l: &LevelSummary,
    sent: std::time::Duration,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let done = app.session.progress.get(&l.index).map_or(0, |p| p.finished);
    let block = th.panel(title(app, l, done));
    let inner = block.inner(area);
    block.render(area, buf);
    let [prefill, decode, _] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(inner);
    let expected = app.expected_prefill_s(l.index);
    let how = app
        .views
        .long
        .prefill_estimate
        .as_ref()
        .map_or(String::new(), |(r, at)| {
            format!(" at {} tok/s (seen {at})", num(Some(*r)))
        });
    let first = app
        .clocked
        .first_token_seen_at
        .map(|t| t.saturating_sub(sent));
    let elapsed = app.clocked.now.saturating_sub(sent).as_secs_f64();
    let line = |how: &str| match (first, expected) {
        (Some(t), Some(e)) => (
            1.0,
            format!(
                "prefill {}: first token after {:.1} s · expected ~{:.1} s{how}",
                fmt_tokens(l.input_len),
                t.as_secs_f64(),
                e
            ),
        ),
        (Some(t), None) => (
            1.0,
            format!(
                "prefill {}: first token after {:.1} s",
                fmt_tokens(l.input_len),
                t.as_secs_f64()
            ),
        ),
        (None, Some(e)) => (
            (elapsed / e).clamp(0.0, 1.0),
            format!(
                "prefilling {}: {elapsed:.1} s of ~{e:.1} s expected{how}",
                fmt_tokens(l.input_len)
            ),
        ),
        (None, None) => (
            0.0,
            format!(
                "prefilling {}: {elapsed:.1} s so far (no earlier length to predict from)",
                fmt_tokens(l.input_len)
            ),
        ),
    };
    // The estimate's source goes first when the line is too long for the panel.
    let (ratio, text) = match line(&how) {
        (_, t) if t.chars().count() > inner.width as usize => line(""),
        full => full,
    };
    gauge(ratio, &text, th.series[1], prefill, buf);
    let tokens = app.clocked.tokens_since_send;
    let (ratio, text) = match app.clocked.first_token_seen_at {
        Some(t) if tokens > 0 => {
            let secs = app.clocked.now.saturating_sub(t).as_secs_f64();
            let rate = if secs > 0.0 {
                format!(" · {} tok/s live", num(Some((tokens - 1) as f64 / secs)))
            } else {
                String::new()
            };
            (
                (tokens as f64 / f64::from(l.output_len.max(1))).clamp(0.0, 1.0),
                format!("decoding: {tokens} of {} tokens{rate}", l.output_len),
            )
        }
        _ => (0.0, "decode: waiting for the first token".to_string()),
    };
    gauge(ratio, &text, th.series[2], decode, buf);
    if let Some(line) = expected_line(app, |o| o.index != l.index)
        && inner.height > 2
    {
        let row = Rect::new(inner.x, inner.y + 2, inner.width, 1);
        Line::styled(fit(&format!("next: {line}"), row.width as usize), th.dim).render(row, buf);
    }
    // The restarts so far below, the newest first: it is why this length can run.
    let below = inner.height.saturating_sub(3);
    let rows = Rect::new(inner.x, inner.y + 3, inner.width, below);
    let lines: Vec<Line> = restarts(&app.session.summary)
        .into_iter()
        .rev()
        .map(|r| Line::styled(r, th.warn))
        .collect();
    if below > 0 && !lines.is_empty() {
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .render(rows, buf);
    }
}

/// ` 60K ctx in flight · request 1 of 1 · server restarted with context 65536 `: the server
/// that measures it is said even where the panel has no row for the restarts.
fn title(app: &App, l: &LevelSummary, done: u64) -> String {
    let on = l
        .server_index
        .filter(|&i| i > 0)
        .and_then(|i| app.session.summary.servers.get(i as usize))
        .map_or(String::new(), |sv| {
            sv.context_len
                .map_or(" · restarted server".to_string(), |c| {
                    format!(" · server restarted with context {c}")
                })
        });
    format!(
        " {} in flight · request {} of {}{on} ",
        l.label(),
        (done + 1).min(u64::from(l.requests)),
        l.requests
    )
}

/// `16K ~2.4 s · 30K ~4.5 s`: the expected TTFT of the waiting lengths `keep` admits.
fn expected_line(app: &App, keep: impl Fn(&LevelSummary) -> bool) -> Option<String> {
    let parts: Vec<String> = app
        .session
        .summary
        .long_context
        .iter()
        .filter(|l| l.status == crate::summary::LevelStatus::Waiting && keep(l))
        .filter_map(|l| {
            let e = app.expected_prefill_s(l.index)?;
            Some(format!("{} ~{e:.1} s", fmt_tokens(l.input_len)))
        })
        .collect();
    (!parts.is_empty()).then(|| format!("expected TTFT {}", parts.join(" · ")))
}

fn gauge(ratio: f64, text: &str, color: ratatui::style::Color, area: Rect, buf: &mut Buffer) {
    Gauge::default()
        .ratio(ratio)
        .label(fit(text, area.width as usize))
        .gauge_style(Style::default().fg(color))
        .render(area, buf);
}

/// Before (or between) the lengths: what is planned and what each should take.
fn render_plan(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let s = &app.session.summary;
    let lengths: Vec<String> = s
        .long_context
        .iter()
        .filter(|l| l.status == crate::summary::LevelStatus::Waiting)
        .map(|l| fmt_tokens(l.input_len))
        .collect();
    let mut lines = Vec::new();
    if lengths.is_empty() {
        lines.push(Line::styled(
            format!("every length has ended · {}", app.session.phase),
            th.dim,
        ));
    } else {
        lines.push(Line::raw(format!(
            "to run: {} · {} output tokens · one request at a time · now: {}",
            lengths.join(", "),
            s.config.long_context_output_len,
            app.session.phase
        )));
        match (
            &app.views.long.prefill_estimate,
            expected_line(app, |_| true),
        ) {
            (Some((r, at)), Some(line)) => lines.push(Line::styled(
                format!("{line} (prefill {} tok/s, seen {at})", num(Some(*r))),
                th.accent,
            )),
            _ => lines.push(Line::styled(
                "expected TTFT: once a single stream has been measured",
                th.dim,
            )),
        }
    }
    for r in restarts(s) {
        lines.push(Line::styled(r, th.warn));
    }
    Paragraph::new(lines)
        .block(th.panel(" long-context ladder "))
        .wrap(Wrap { trim: true })
        .render(area, buf);
}

/// `server restarted with context 60416 for 60K ctx (ready after 1.2 s)`: each restart of the
/// server servetop started, and the first level it measured.
pub(super) fn restarts(s: &crate::summary::RunSummary) -> Vec<String> {
    let firsts = s.first_after_restarts();
    s.servers
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, sv)| {
            let first = firsts
                .iter()
                .find(|(l, _)| l.server_index == u32::try_from(i).ok())
                .map_or(String::new(), |(l, _)| format!(" for {}", l.label()));
            format!(
                "server restarted{}{first}{}",
                sv.context_len
                    .map_or(String::new(), |c| format!(" with context {c}")),
                sv.ready_s
                    .map_or(String::new(), |r| format!(" (ready after {r:.1} s)"))
            )
        })
        .collect()
}

#[cfg(test)]
mod restart_tests {
    use crate::serve::ServerLaunch;

    /// A restart names its context, the first length it measured and how long it took; the
    /// first launch is no restart.
    #[test]
    fn each_restart_is_named_with_its_context_and_first_length() {
        let app = crate::tui::fixtures::finished_run();
        let mut s = app.session.summary.clone();
        let launch = |ctx: u64, ready: f64| ServerLaunch {
            command: "servetop sim".into(),
            context_len: Some(ctx),
            port: 1,
            ready_s: Some(ready),
        };
        s.servers = vec![launch(32_768, 3.0), launch(60_416, 1.25)];
        assert!(s.long_context.len() >= 2);
        let at = s.long_context.len() - 1;
        for (i, l) in s.long_context.iter_mut().enumerate() {
            l.server_index = Some(u32::from(i == at));
            l.started_at_unix_ms = Some(1_000 * i as i64);
        }
        let label = s.long_context[at].label();
        assert_eq!(
            super::restarts(&s),
            vec![format!(
                "server restarted with context 60416 for {label} (ready after 1.2 s)"
            )]
        );
    }
}
