//! What summary.md says of a time-bounded or sharded run: the clock it ran on, the shard it
//! was, or the shards a merged run was made of.

use std::fmt::Write;

use crate::fmt::num;
use crate::summary::RunSummary;

/// The header's lines: the levels' clock, this shard, or the merge.
pub fn clock_lines(out: &mut String, s: &RunSummary) {
    let c = &s.config.clock;
    if let Some(secs) = c.level_seconds {
        let start = c.start_at_unix_ms.map_or(String::new(), |ms| {
            jiff::Timestamp::from_millisecond(ms)
                .map(|t| format!(", level k starting at {t} + k × {} s", secs + c.drain_s))
                .unwrap_or_default()
        });
        let _ = writeln!(
            out,
            "- levels: {secs} s of requests each (`--level-seconds`), then {} s for those in flight to finish (`--drain-seconds`){start}",
            c.drain_s
        );
    }
    if let Some(sh) = s.config.shard {
        let _ = writeln!(
            out,
            "- shard {} of a run split over {} machines (`--shard`): each level here is this shard's share; `servetop report --merge` makes one run of the shards",
            sh.label(),
            sh.count
        );
    }
    if let Some(o) = s.clock_offset {
        let _ = writeln!(
            out,
            "- clock: the server's is {:+.0} ms from this machine's (± {:.0} ms, from {} Date headers)",
            o.offset_ms, o.uncertainty_ms, o.probes
        );
    }
    if let Some(m) = &s.merged {
        let _ = writeln!(
            out,
            "- merged from {} of {} shards (`report --merge`): percentiles from the union of their request records, throughput over the window they spanned together{}",
            m.merged.len(),
            m.shards,
            if m.missing.is_empty() {
                String::new()
            } else {
                format!("; **missing: shard {}**", m.missing_labels())
            }
        );
    }
}

/// The merged run's shards, one row each.
pub fn shards_section(out: &mut String, s: &RunSummary) {
    let Some(m) = &s.merged else { return };
    out.push_str("\n## Shards\n\n");
    out.push_str(
        "| shard | run directory | host | requests | clock vs server (ms) | latest start (ms late) | state |\n|---:|---|---|---:|---:|---:|---|\n",
    );
    for sh in &m.merged {
        let _ = writeln!(
            out,
            "| {}/{} | {} | {} | {} | {} | {} | {} |",
            sh.shard,
            m.shards,
            sh.source,
            sh.host,
            sh.requests,
            sh.clock_offset_ms.map_or("-".into(), |o| num(Some(-o))),
            sh.max_start_late_ms.map_or("-".into(), |v| v.to_string()),
            sh.state
        );
    }
    for i in &m.missing {
        let _ = writeln!(
            out,
            "| {i}/{} | **missing** | - | - | - | - | - |",
            m.shards
        );
    }
    if let Some(t) = m.telemetry_from {
        let _ = writeln!(
            out,
            "\nEngine metrics, GPU readings and energy are shard {t}/{}'s (every shard watches the same server and GPUs); latency, throughput and failures are all the shards'.",
            m.shards
        );
    }
    for n in &m.notes {
        let _ = writeln!(out, "\n- {n}");
    }
}
