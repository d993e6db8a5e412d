//! The steady-state window in Markdown: each concurrency and rate level's requests that ran at
//! full load, and their latency beside the level's output rate over the same span.

use std::fmt::Write;

use super::tables::pair;
use crate::fmt::num;
use crate::summary::{LevelSummary, RunSummary};

/// One row per level with a steady window.
pub fn steady_table(levels: &[&LevelSummary]) -> String {
    let mut out = String::from(
        "| level | steady requests | window (s) | steady out tok/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | E2E p50 / p99 (ms) |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for l in levels {
        let Some(s) = &l.stats else { continue };
        let (sc, d) = (&s.scalars, &s.dists);
        let (Some(n), Some(from), Some(to)) =
            (sc.steady_requests, sc.steady_from_s, sc.steady_to_s)
        else {
            // Every request went out before the first one ended: no window at all.
            let _ = writeln!(
                out,
                "| {} | 0 of {} (too few) | - | - | - | - | - |",
                l.label(),
                sc.completed
            );
            continue;
        };
        let short = if crate::metrics::steady::too_short(n, sc.completed) {
            " (too few)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "| {} | {n} of {}{short} | {}–{} | {} | {} | {} | {} |",
            l.label(),
            sc.completed,
            num(Some(from)),
            num(Some(to)),
            num(sc.steady_output_throughput),
            pair(d.steady_ttft_ms.as_ref(), |d| d.p50, |d| d.p99),
            pair(d.steady_tpot_ms.as_ref(), |d| d.p50, |d| d.p99),
            pair(d.steady_e2el_ms.as_ref(), |d| d.p50, |d| d.p99),
        );
    }
    out
}

/// summary.md's "Steady state" section, for the concurrency and rate levels.
pub(super) fn steady_section(out: &mut String, s: &RunSummary) {
    let levels: Vec<&LevelSummary> = s
        .sweep
        .iter()
        .chain(&s.rates)
        .filter(|l| l.stats.as_ref().is_some_and(|s| s.scalars.completed > 0))
        .collect();
    if levels.is_empty() {
        return;
    }
    out.push_str("\n## Steady state\n\n");
    let windowless = |l: &&LevelSummary| {
        l.stats
            .as_ref()
            .is_none_or(|s| s.scalars.steady_requests.unwrap_or(0) == 0)
    };
    if levels.iter().all(windowless) {
        // A table of dashes says nothing: say why once.
        out.push_str("No level ran long enough for a steady state: each sent its last request before its first one finished (as many requests as workers is one wave), so all of its latency is ramp-up and drain. Run more requests a level (`--requests-per-level 5x`) to see the latency at full load.\n");
        return;
    }
    out.push_str(&steady_table(&levels));
    out.push_str("\nThe steady window runs from a level's first completion (ramp-up over) to its last send (drain begun); its requests are those sent in it and done by its end. steady out tok/s: output tokens in the whole seconds of the window. (too few): under 5 requests, or under a fifth of the level: its percentiles above are mostly ramp-up and drain; run more requests a level.\n");
}
