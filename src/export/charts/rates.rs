//! `rates.png`: the request-rate sweep.

use super::figure::{Figure, figure};
use super::panel::{Line, Panel, XKind};
use super::{ChartRun, rate_lines, stat};
use crate::metrics::curves::{self, Percentiles};
use crate::summary::LevelSummary;

/// The request-rate sweep: latency percentiles, achieved against offered rate, client queue.
pub(super) fn rates_figure(runs: &[ChartRun<'_>]) -> Figure {
    let empty = "no request-rate level finished in this run".to_string();
    let pct_panel = |title: &str, y: Percentiles| {
        let mut lines = rate_lines(runs, "p50", move |l| stat(l, y.p50), false, 0);
        lines.extend(rate_lines(runs, "p99", move |l| stat(l, y.p99), true, 0));
        Panel {
            title: title.into(),
            x: XKind::Rate,
            y_desc: "ms".into(),
            y_log_ok: true,
            y_top: None,
            lines,
            marks: vec![],
            limits: vec![],
            events: vec![],
            empty: empty.clone(),
        }
    };
    let mut rate_lines_all =
        rate_lines(runs, "sent", |l| stat(l, curves::SENT_REQUESTS_S), false, 0);
    rate_lines_all.extend(rate_lines(
        runs,
        "completed",
        |l| stat(l, curves::REQUESTS_S),
        true,
        0,
    ));
    // The offered rate itself (y = x): where the sent and completed lines should lie.
    let offered: Vec<(f64, f64)> = runs
        .iter()
        .flat_map(|r| {
            r.summary
                .rates
                .iter()
                .filter_map(LevelSummary::request_rate)
        })
        .filter(|r| r.is_finite())
        .map(|r| (r, r))
        .collect();
    if rate_lines_all.iter().any(|l| !l.points.is_empty()) {
        rate_lines_all.push(Line::reference("offered (y = x)", offered));
    }
    let panels = [
        pct_panel("Time to first token", curves::TTFT_MS),
        pct_panel("Time per output token", curves::TPOT_MS),
        Panel {
            title: "Achieved vs offered request rate".into(),
            x: XKind::Rate,
            y_desc: "req/s".into(),
            y_log_ok: false,
            y_top: None,
            lines: rate_lines_all,
            marks: vec![],
            limits: vec![],
            events: vec![],
            empty: empty.clone(),
        },
        pct_panel("Client queue (t_send − t_sched)", curves::CLIENT_QUEUE_MS),
    ];
    let s = runs[0].summary;
    let mut footer = vec![format!(
        "Arrivals: {}. sent: the rate requests went out at; completed: completions over the level's window. Client queue: time a request waited in servetop past its scheduled send (a full --max-concurrency); the server's own queueing shows up in TTFT.",
        crate::export::markdown::arrival_description(&s.config.open_loop)
    )];
    let all_at_once = runs.iter().any(|r| {
        r.summary
            .rates
            .iter()
            .any(|l| l.request_rate().is_some_and(f64::is_infinite))
    });
    if all_at_once {
        footer.push("The inf req/s level (every request at once) has no place on a rate axis and is not drawn: its figures are in the rates table.".into());
    }
    figure(
        "Request-rate sweep (p50 solid, p99 dashed)",
        runs,
        panels.into(),
        2,
        footer,
    )
}
