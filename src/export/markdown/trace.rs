//! A replayed trace in Markdown: the level's row, and its latency over the trace's timeline.

use std::fmt::Write;

use super::tables::{done_cell, failures_cell, pair, telemetry_table};
use crate::fmt::{fmt_rate, num};
use crate::summary::{LevelSummary, RunSummary};

/// One row per trace level: what was replayed, the rates offered and achieved, latency, the
/// client's lateness, and the prefix-cache hit rate measured against the one the trace implies.
pub fn trace_table(levels: &[LevelSummary]) -> String {
    let mut out = String::from(
        "| trace | requests | over (s) | offered req/s | sent req/s | done | out tok/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | E2E p50 / p99 (ms) | client queue p50 / p99 (ms) | peak in flight | prefix cache: measured / trace implies | failures |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for l in levels {
        let Some(t) = &l.trace else { continue };
        let name = if (t.speedup - 1.0).abs() > 1e-9 {
            format!("{} ×{}", t.source, fmt_rate(t.speedup))
        } else {
            t.source.clone()
        };
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0));
        let head = format!(
            "| {name} | {} | {} | {}",
            l.requests,
            num(Some(t.duration_s)),
            num(t.offered_rate)
        );
        let Some(s) = &l.stats else {
            let _ = writeln!(
                out,
                "{head} | - | {} | - | - | - | - | - | - | - | - / {} | - |",
                l.status.name(),
                pct(t.expected_prefix_cache_hit_rate)
            );
            continue;
        };
        let (sc, d) = (&s.scalars, &s.dists);
        let _ = writeln!(
            out,
            "{head} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
            num(sc.achieved_request_rate),
            done_cell(l, sc.completed),
            num(Some(sc.output_throughput)),
            pair(d.ttft_ms.as_ref(), |d| d.p50, |d| d.p99),
            pair(d.tpot_ms.as_ref(), |d| d.p50, |d| d.p99),
            pair(d.e2el_ms.as_ref(), |d| d.p50, |d| d.p99),
            pair(d.client_queue_ms.as_ref(), |d| d.p50, |d| d.p99),
            sc.max_concurrent_requests,
            pct(sc.prefix_cache_hit_rate),
            pct(t.expected_prefix_cache_hit_rate),
            failures_cell(l),
        );
    }
    out
}

/// The trace's latency over its timeline, at most `rows` rows (bins merged evenly past it):
/// when each span's requests were due, how many, and their TTFT and client queue.
pub fn timeline_table(l: &LevelSummary, rows: usize) -> String {
    let Some(st) = &l.stats else {
        return String::new();
    };
    let bins = &st.scalars.timeline;
    if bins.is_empty() {
        return String::new();
    }
    let width = bins.get(1).map_or(1.0, |b| b.start_s);
    let per_row = bins.len().div_ceil(rows.max(1));
    let mut out = String::from(
        "| due from (s) | requests | failed | TTFT p50 (ms) | TTFT p99 (ms) | E2E p50 (ms) | client queue p99 (ms) |\n|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for chunk in bins.chunks(per_row) {
        let sent: u64 = chunk.iter().map(|b| b.sent).sum();
        let failed: u64 = chunk.iter().map(|b| b.failed).sum();
        // Merged bins: the busiest bin's figures (percentiles do not average).
        let worst = |f: fn(&crate::metrics::timeline::TimelineBin) -> Option<f64>| {
            chunk.iter().filter_map(f).reduce(f64::max)
        };
        let _ = writeln!(
            out,
            "| {}–{} | {sent} | {failed} | {} | {} | {} | {} |",
            num(Some(chunk[0].start_s)),
            num(Some(chunk[0].start_s + width * chunk.len() as f64)),
            num(worst(|b| b.ttft_p50_ms)),
            num(worst(|b| b.ttft_p99_ms)),
            num(worst(|b| b.e2el_p50_ms)),
            num(worst(|b| b.client_queue_p99_ms)),
        );
    }
    if per_row > 1 {
        let _ = writeln!(
            out,
            "\n{per_row} bins of {} s a row: each figure is the highest of the row's bins.",
            num(Some(width))
        );
    }
    out
}

/// summary.md's "Trace replay" section: the table, the timeline, the engine's load.
pub(super) fn trace_section(out: &mut String, s: &RunSummary) {
    if s.traces.is_empty() {
        return;
    }
    out.push_str("\n## Trace replay\n\n");
    out.push_str(&trace_table(&s.traces));
    out.push_str("\noffered req/s: the trace's requests over its span, (n − 1) / span after --trace-speedup; sent req/s: the rate they went out at, measured the same way. client queue: how late servetop sent a request past its recorded time (a full --max-concurrency, or a client that fell behind). prefix cache: prompt tokens the server says it served from its cache, against the share the trace's hash_ids imply for a cache that keeps every block.\n");
    for l in &s.traces {
        let t = timeline_table(l, 20);
        if !t.is_empty() {
            out.push_str("\n### Over the trace's timeline (charts/trace.png)\n\n");
            out.push_str(&t);
        }
    }
    out.push_str(&telemetry_table(&s.traces));
}
