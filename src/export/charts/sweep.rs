//! The concurrency sweep's figures: `throughput.png`, `latency.png`, `spec_decoding.png`,
//! `energy.png`.

use super::figure::{Figure, figure};
use super::panel::{Panel, XKind};
use super::{ChartRun, NO_SWEEP, lines_per_run, stat};
use crate::metrics::curves::{self, Percentiles};
use crate::summary::LevelSummary;

/// `throughput.png`: aggregate and per-stream tokens/s and requests/s against concurrency.
pub(super) fn throughput(runs: &[ChartRun<'_>]) -> Figure {
    let panel = |title: &str, y: &str, f: fn(&LevelSummary) -> Option<f64>| {
        per_level_panel(runs, title, y, f, NO_SWEEP)
    };
    figure(
        "Throughput vs concurrency",
        runs,
        vec![
            panel("Aggregate output tokens/s", "output tok/s", |l| {
                stat(l, curves::OUTPUT_TOK_S)
            }),
            panel("Per-stream decode tokens/s", "tok/s per request", |l| {
                stat(l, curves::DECODE_TOK_S)
            }),
            panel("Requests/s", "req/s", |l| stat(l, curves::REQUESTS_S)),
        ],
        3,
        vec![],
    )
}

/// `latency.png`: TTFT, ITL and TPOT p50 and p99 against concurrency.
pub(super) fn latency(runs: &[ChartRun<'_>]) -> Figure {
    let panel = |title: &str, y: Percentiles| {
        let mut lines = lines_per_run(runs, "p50", move |l| stat(l, y.p50), false);
        lines.extend(lines_per_run(runs, "p99", move |l| stat(l, y.p99), true));
        Panel {
            title: title.into(),
            x: XKind::Concurrency,
            y_desc: "ms".into(),
            y_log_ok: true,
            y_top: None,
            lines,
            marks: vec![],
            limits: vec![],
            events: vec![],
            empty: NO_SWEEP.to_string(),
        }
    };
    // A model that thinks: when its answer begins, beside its first token.
    let reasoned = runs.iter().any(|r| {
        r.summary.sweep.iter().any(|l| {
            l.stats
                .as_ref()
                .and_then(|s| s.scalars.reasoning_share)
                .is_some_and(|x| x > 0.0)
        })
    });
    let mut panels = vec![panel("Time to first token", curves::TTFT_MS)];
    if reasoned {
        panels.push(panel(
            "Time to first answer token (TTFC, after thinking)",
            curves::TTFC_MS,
        ));
    }
    panels.push(panel("Inter-token latency (per token)", curves::ITL_MS));
    panels.push(panel("Time per output token", curves::TPOT_MS));
    let columns = if reasoned { 2 } else { 3 };
    figure(
        "Latency vs concurrency (p50 solid, p99 dashed)",
        runs,
        panels,
        columns,
        vec![],
    )
}

/// `spec_decoding.png`: the accept length per level, as the client and the engine see it.
pub(super) fn spec_decoding(runs: &[ChartRun<'_>]) -> Figure {
    let mut lines = lines_per_run(
        runs,
        "client (tokens per chunk)",
        crate::summary::LevelSummary::accept_length_client,
        false,
    );
    let server = lines_per_run(
        runs,
        "server (engine metrics)",
        |l| l.accept_length_server,
        true,
    );
    let any_server = server.iter().any(|l| !l.points.is_empty());
    lines.extend(server.into_iter().filter(|l| !l.points.is_empty()));
    let footer = if any_server {
        vec![]
    } else {
        vec!["The server reported no accept length (no speculative-decoding metrics on its /metrics)".to_string()]
    };
    figure(
        "Speculative decoding: accept length per level",
        runs,
        vec![Panel {
            title: "Mean accept length (tokens per step)".into(),
            x: XKind::Concurrency,
            y_desc: "tokens".into(),
            y_log_ok: false,
            y_top: None,
            lines,
            marks: vec![],
            limits: vec![],
            events: vec![],
            empty: NO_SWEEP.to_string(),
        }],
        1,
        footer,
    )
}

/// `energy.png`: output tokens per joule and the cost per million output tokens against
/// concurrency (drawn when some level has either). Without a price the cost panel is left out
/// and a line under the figure says how to give one.
pub(super) fn energy(runs: &[ChartRun<'_>]) -> Figure {
    let why = runs
        .iter()
        .flat_map(|r| r.summary.sweep.iter())
        .find_map(|l| l.energy.energy_source.clone())
        .unwrap_or_else(|| NO_SWEEP.to_string());
    let cost = |l: &LevelSummary| l.energy.cost_per_million_output_tokens;
    let priced = runs
        .iter()
        .flat_map(|r| r.summary.sweep.iter())
        .any(|l| cost(l).is_some());
    let mut panels = vec![per_level_panel(
        runs,
        "Output tokens per joule (all GPUs)",
        "tokens / J",
        |l| l.energy.output_tokens_per_joule,
        &why,
    )];
    let footer = if priced {
        panels.push(per_level_panel(
            runs,
            "Cost per million output tokens",
            "USD / M tokens",
            cost,
            "no price given for this run",
        ));
        vec![]
    } else {
        vec!["No cost per token: no price was given (--gpu-hour-cost USD per GPU-hour, or --cost-per-hour for the machine)".to_string()]
    };
    let title = if priced {
        "Energy and cost per token vs concurrency"
    } else {
        "Energy per token vs concurrency"
    };
    let cols = panels.len();
    figure(title, runs, panels, cols, footer)
}

/// One figure of every run's sweep levels against concurrency, on a linear axis; `empty` says
/// why a run without any value has no line.
fn per_level_panel(
    runs: &[ChartRun<'_>],
    title: &str,
    y: &str,
    f: fn(&LevelSummary) -> Option<f64>,
    empty: &str,
) -> Panel {
    Panel {
        title: title.into(),
        x: XKind::Concurrency,
        y_desc: y.into(),
        y_log_ok: false,
        y_top: None,
        lines: lines_per_run(runs, "", f, false),
        marks: vec![],
        limits: vec![],
        events: vec![],
        empty: empty.to_string(),
    }
}
