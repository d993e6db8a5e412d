//! `trace.png`: a replayed trace's latency over its timeline (requests binned by when they were
//! due), its arrivals, and the client's lateness.

use super::figure::{Figure, figure};
use super::panel::{Line, Panel, XKind, color};
use super::{ChartRun, run_lines};
use crate::metrics::timeline::TimelineBin;
use crate::summary::RunSummary;

/// The bins of each run's trace level (the first one), with a value each.
fn bin_points(s: &RunSummary, f: impl Fn(&TimelineBin) -> Option<f64>) -> Vec<(f64, f64)> {
    s.traces
        .first()
        .and_then(|l| l.stats.as_ref())
        .map(|st| {
            st.scalars
                .timeline
                .iter()
                .filter_map(|b| Some((b.start_s, f(b)?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Seconds per bin of a run's timeline.
fn bin_width(s: &RunSummary) -> f64 {
    let t = s.traces.first().and_then(|l| l.stats.as_ref());
    t.and_then(|st| st.scalars.timeline.get(1).map(|b| b.start_s))
        .filter(|w| *w > 0.0)
        .unwrap_or(1.0)
}

fn panel(title: &str, y_desc: &str, lines: Vec<Line>, log: bool) -> Panel {
    Panel {
        title: title.into(),
        x: XKind::TraceSeconds,
        y_desc: y_desc.into(),
        y_log_ok: log,
        y_top: None,
        lines,
        marks: vec![],
        limits: vec![],
        events: vec![],
        empty: "no request of the trace finished".into(),
    }
}

/// Latency over the trace's timeline: TTFT p50/p99, E2E p50, arrivals, client queue.
pub(super) fn trace_figure(runs: &[ChartRun<'_>]) -> Figure {
    let mut ttft = run_lines(runs, "p50", |s| bin_points(s, |b| b.ttft_p50_ms), false, 0);
    ttft.extend(run_lines(
        runs,
        "p99",
        |s| bin_points(s, |b| b.ttft_p99_ms),
        true,
        0,
    ));
    let e2e = run_lines(runs, "p50", |s| bin_points(s, |b| b.e2el_p50_ms), false, 0);
    let mut arrivals = run_lines(
        runs,
        "due (the trace)",
        |s| {
            let w = bin_width(s);
            bin_points(s, |b| Some(b.sent as f64 / w))
        },
        false,
        0,
    );
    arrivals.extend(runs.iter().enumerate().map(|(i, r)| {
        let w = bin_width(r.summary);
        Line {
            name: if runs.len() > 1 {
                format!("{} failed", r.label)
            } else {
                "failed".into()
            },
            points: bin_points(r.summary, |b| Some(b.failed as f64 / w)),
            color: color(i + 3),
            dashed: true,
            errors: Vec::new(),
        }
    }));
    let queue = run_lines(
        runs,
        "p99",
        |s| bin_points(s, |b| b.client_queue_p99_ms),
        false,
        0,
    );
    let panels = [
        panel("Time to first token", "ms", ttft, true),
        panel("End-to-end latency", "ms", e2e, true),
        panel("Requests due per second", "req/s", arrivals, false),
        panel("Client queue (t_send − t_sched)", "ms", queue, true),
    ];
    let s = runs[0].summary;
    let footer = vec![match s.traces.first().and_then(|l| l.trace.as_ref()) {
        Some(t) => format!(
            "Replay of {} ({} format{}): requests binned by when the trace had them due, {} s a bin. Client queue: how late servetop sent them (a full --max-concurrency, or a client that fell behind); the server's own queueing shows in TTFT.",
            t.source,
            t.format.name(),
            if (t.speedup - 1.0).abs() > 1e-9 {
                format!(", {}× faster", crate::fmt::fmt_rate(t.speedup))
            } else {
                String::new()
            },
            crate::fmt::fmt_rate(bin_width(s)),
        ),
        None => String::new(),
    }];
    figure(
        "Trace replay over time (p50 solid, p99 dashed)",
        runs,
        panels.into(),
        2,
        footer,
    )
}
