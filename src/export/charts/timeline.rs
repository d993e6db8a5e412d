//! `gpu_timeline.png`: GPUs and the server over the run, with level starts marked.

use super::ChartRun;
use super::figure::Figure;
use super::panel::{Line, Panel, XKind, color};
use crate::telemetry::{GpuSource, TelemetryRecord};

/// The run's first timestamp: its first sample or its first level's start (ms since the
/// epoch); the origin of every time axis of the run's charts.
pub fn start_ms(r: &ChartRun<'_>) -> i64 {
    r.telemetry
        .iter()
        .filter_map(|t| match t {
            TelemetryRecord::Gpu(g) => Some(g.at_unix_ms),
            TelemetryRecord::Server(s) => Some(s.at_unix_ms),
            _ => None,
        })
        .chain(
            r.summary
                .sweep
                .iter()
                .chain(&r.summary.long_context)
                .filter_map(|l| l.started_at_unix_ms),
        )
        .min()
        .unwrap_or(0)
}

/// A run's telemetry as time series, at seconds from its start.
#[derive(Default)]
struct Series {
    /// GiB used, per GPU.
    mem: Vec<Vec<(f64, f64)>>,
    /// Utilization %, per GPU.
    util: Vec<Vec<(f64, f64)>>,
    kv: Vec<(f64, f64)>,
    running: Vec<(f64, f64)>,
    queued: Vec<(f64, f64)>,
    /// The GPUs were the simulator's.
    simulated: bool,
    /// The largest GPU's memory (GiB).
    total_gib: f64,
}

impl Series {
    fn of(r: &ChartRun<'_>, secs: impl Fn(i64) -> f64) -> Self {
        const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
        let mut s = Self::default();
        for t in r.telemetry {
            match t {
                TelemetryRecord::Gpu(g) => {
                    s.simulated |= g.source == GpuSource::SimulatedDcgm;
                    for (i, x) in g.gpus.iter().enumerate() {
                        if s.mem.len() <= i {
                            s.mem.resize(i + 1, vec![]);
                            s.util.resize(i + 1, vec![]);
                        }
                        if let Some(m) = x.mem_used_bytes {
                            s.mem[i].push((secs(g.at_unix_ms), m as f64 / GIB));
                        }
                        if let Some(u) = x.util_gpu_pct {
                            s.util[i].push((secs(g.at_unix_ms), u));
                        }
                        s.total_gib = s
                            .total_gib
                            .max(x.mem_total_bytes.map_or(0.0, |b| b as f64 / GIB));
                    }
                }
                TelemetryRecord::Server(v) => {
                    let t = secs(v.at_unix_ms);
                    if let Some(k) = v.kv_usage {
                        s.kv.push((t, k * 100.0));
                    }
                    if let Some(n) = v.running {
                        s.running.push((t, n));
                    }
                    if let Some(n) = v.queued {
                        s.queued.push((t, n));
                    }
                }
                _ => {}
            }
        }
        s
    }
}

/// Each level's start (seconds on the timeline) and short label, in the order they ran.
fn level_starts(r: &ChartRun<'_>, secs: impl Fn(i64) -> f64) -> Vec<(f64, String)> {
    let mut marks: Vec<(f64, String)> = r
        .summary
        .levels()
        .filter_map(|l| Some((secs(l.started_at_unix_ms?), l.short_label())))
        .collect();
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    marks
}

/// Where servetop restarted the server it started with a larger context: the start of the
/// first level the new server measured (seconds on the timeline), labelled with its context.
fn restarts(r: &ChartRun<'_>, secs: impl Fn(i64) -> f64) -> Vec<(f64, String)> {
    r.summary
        .first_after_restarts()
        .into_iter()
        .filter_map(|(l, ctx)| {
            let ctx = ctx.map_or("?".to_string(), |c| c.to_string());
            Some((
                secs(l.started_at_unix_ms?),
                format!("server restarted: {ctx} ctx"),
            ))
        })
        .collect()
}

/// A moment on the timeline and its label.
type Mark = (f64, String);

/// A panel over the run's seconds, with the level starts and server restarts marked.
fn time_panel(
    title: String,
    y_desc: &str,
    y_top: Option<f64>,
    lines: Vec<Line>,
    (marks, events): (&[Mark], &[Mark]),
    empty: String,
) -> Panel {
    Panel {
        title,
        x: XKind::Seconds,
        y_desc: y_desc.into(),
        y_log_ok: false,
        y_top,
        lines,
        marks: marks.to_vec(),
        limits: vec![],
        events: events.to_vec(),
        empty,
    }
}

/// GPU memory and utilization per GPU, server KV use and queue, over time with level starts.
pub(super) fn timeline_panels(runs: &[ChartRun<'_>]) -> (Vec<Panel>, Vec<String>) {
    // The first run sets the timeline (overlaying clocks of different runs would mislead).
    let r = &runs[0];
    let t0 = start_ms(r);
    let secs = |ms: i64| (ms - t0) as f64 / 1000.0;
    let Series {
        mem,
        util,
        kv,
        running,
        queued,
        simulated,
        total_gib,
    } = Series::of(r, secs);
    let marks = level_starts(r, secs);
    let events = restarts(r, secs);
    let gpu_lines = |sets: &[Vec<(f64, f64)>]| -> Vec<Line> {
        sets.iter()
            .enumerate()
            .map(|(i, p)| Line {
                name: format!("GPU {i}"),
                points: p.clone(),
                color: color(i),
                dashed: false,
                errors: Vec::new(),
            })
            .collect()
    };
    let why_gpu = r.summary.telemetry.gpu_reason.clone().map_or_else(
        || "no GPU samples in this run".to_string(),
        |w| format!("no GPU samples: {w}"),
    );
    let why_srv = r.summary.telemetry.server_reason.clone().map_or_else(
        || "no engine metrics in this run".to_string(),
        |w| format!("no engine metrics: {w}"),
    );
    let sim = if simulated { " (simulated)" } else { "" };
    let panels = vec![
        time_panel(
            format!("GPU memory used{sim}"),
            "GiB",
            (total_gib > 0.0).then_some(total_gib),
            gpu_lines(&mem),
            (&marks, &events),
            why_gpu.clone(),
        ),
        time_panel(
            format!("GPU utilization{sim}"),
            "%",
            Some(100.0),
            gpu_lines(&util),
            (&marks, &events),
            why_gpu,
        ),
        time_panel(
            "Server KV-cache usage".into(),
            "%",
            Some(100.0),
            vec![Line {
                name: "KV cache".into(),
                points: kv,
                color: color(2),
                dashed: false,
                errors: Vec::new(),
            }],
            (&marks, &events),
            why_srv.clone(),
        ),
        time_panel(
            "Server requests running and queued".into(),
            "requests",
            None,
            vec![
                Line {
                    name: "running".into(),
                    points: running,
                    color: color(0),
                    dashed: false,
                    errors: Vec::new(),
                },
                Line {
                    name: "queued".into(),
                    points: queued,
                    color: color(1),
                    dashed: true,
                    errors: Vec::new(),
                },
            ],
            (&marks, &events),
            why_srv,
        ),
    ];
    let footer = if runs.len() > 1 {
        vec![format!(
            "Timeline of {} only: runs have different clocks.",
            r.label
        )]
    } else {
        vec![]
    };
    (panels, footer)
}

/// `gpu_timeline.png`.
pub(super) fn figure(runs: &[ChartRun<'_>]) -> Figure {
    let (panels, footer) = timeline_panels(runs);
    super::figure::figure("GPU and server over the run", runs, panels, 2, footer)
}

#[cfg(test)]
mod tests {
    /// The start of the first level on a restarted server is marked as a restart, with the new
    /// context.
    #[test]
    fn a_restart_is_marked_where_the_new_server_started_measuring() {
        let s = super::super::restarted_run();
        let run = super::ChartRun {
            label: "run".into(),
            summary: &s,
            telemetry: &[],
        };
        let secs = |ms: i64| ms as f64 / 1000.0;
        let first = s
            .long_context
            .iter()
            .find(|l| l.server_index == Some(1))
            .expect("a level on the restarted server");
        let at = secs(first.started_at_unix_ms.unwrap());
        assert_eq!(
            super::restarts(&run, secs),
            vec![(at, "server restarted: 131072 ctx".to_string())]
        );
    }
}
