//! `gpu_timeline.png`: GPUs and the server over the run, with level starts marked.

use super::ChartRun;
use super::panel::{Line, Panel, XKind, color};
use crate::telemetry::{GpuSource, TelemetryRecord};
use std::path::Path;

/// GPU memory and utilization per GPU, server KV use and queue, over time with level starts.
pub(super) fn timeline_panels(runs: &[ChartRun<'_>]) -> (Vec<Panel>, Vec<String>) {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    // The first run sets the timeline (overlaying clocks of different runs would mislead).
    let r = &runs[0];
    let t0 = r
        .telemetry
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
        .unwrap_or(0);
    let secs = |ms: i64| (ms - t0) as f64 / 1000.0;
    let mut mem: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut util: Vec<Vec<(f64, f64)>> = Vec::new();
    let (mut kv, mut running, mut queued) = (vec![], vec![], vec![]);
    let mut simulated = false;
    let mut total_gib: f64 = 0.0;
    for t in r.telemetry {
        match t {
            TelemetryRecord::Gpu(g) => {
                simulated |= g.source == GpuSource::SimulatedDcgm;
                for (i, x) in g.gpus.iter().enumerate() {
                    if mem.len() <= i {
                        mem.resize(i + 1, vec![]);
                        util.resize(i + 1, vec![]);
                    }
                    if let Some(m) = x.mem_used_bytes {
                        mem[i].push((secs(g.at_unix_ms), m as f64 / GIB));
                    }
                    if let Some(u) = x.util_gpu_pct {
                        util[i].push((secs(g.at_unix_ms), u));
                    }
                    total_gib = total_gib.max(x.mem_total_bytes.map_or(0.0, |b| b as f64 / GIB));
                }
            }
            TelemetryRecord::Server(s) => {
                let t = secs(s.at_unix_ms);
                if let Some(v) = s.kv_usage {
                    kv.push((t, v * 100.0));
                }
                if let Some(v) = s.running {
                    running.push((t, v));
                }
                if let Some(v) = s.queued {
                    queued.push((t, v));
                }
            }
            _ => {}
        }
    }
    let marks: Vec<(f64, String)> = r
        .summary
        .sweep
        .iter()
        .chain(&r.summary.long_context)
        .filter_map(|l| Some((secs(l.started_at_unix_ms?), l.label())))
        .collect();
    let gpu_lines = |sets: &[Vec<(f64, f64)>]| -> Vec<Line> {
        sets.iter()
            .enumerate()
            .map(|(i, p)| Line {
                name: format!("GPU {i}"),
                points: p.clone(),
                color: color(i),
                dashed: false,
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
        Panel {
            title: format!("GPU memory used{sim}"),
            x: XKind::Seconds,
            y_desc: "GiB".into(),
            y_log_ok: false,
            y_top: (total_gib > 0.0).then_some(total_gib),
            lines: gpu_lines(&mem),
            marks: marks.clone(),
            limits: vec![],
            empty: why_gpu.clone(),
        },
        Panel {
            title: format!("GPU utilization{sim}"),
            x: XKind::Seconds,
            y_desc: "%".into(),
            y_log_ok: false,
            y_top: Some(100.0),
            lines: gpu_lines(&util),
            marks: marks.clone(),
            limits: vec![],
            empty: why_gpu,
        },
        Panel {
            title: "Server KV-cache usage".into(),
            x: XKind::Seconds,
            y_desc: "%".into(),
            y_log_ok: false,
            y_top: Some(100.0),
            lines: vec![Line {
                name: "KV cache".into(),
                points: kv,
                color: color(2),
                dashed: false,
            }],
            marks: marks.clone(),
            limits: vec![],
            empty: why_srv.clone(),
        },
        Panel {
            title: "Server requests running and queued".into(),
            x: XKind::Seconds,
            y_desc: "requests".into(),
            y_log_ok: false,
            y_top: None,
            lines: vec![
                Line {
                    name: "running".into(),
                    points: running,
                    color: color(0),
                    dashed: false,
                },
                Line {
                    name: "queued".into(),
                    points: queued,
                    color: color(1),
                    dashed: true,
                },
            ],
            marks,
            limits: vec![],
            empty: why_srv,
        },
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
pub(super) fn figure(path: &Path, size: (u32, u32), runs: &[ChartRun<'_>]) -> Result<(), String> {
    let (panels, footer) = timeline_panels(runs);
    super::panel::figure(
        path,
        size,
        "GPU and server over the run",
        runs,
        &panels,
        2,
        &footer,
    )
}
