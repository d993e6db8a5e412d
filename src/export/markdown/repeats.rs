//! `--repeat` in Markdown: one row per level, each figure as its mean ± the half width of its
//! 95 % interval across the level's runs.

use std::fmt::Write;

use crate::summary::RunSummary;
use crate::summary::repeats::plus_minus;

/// Whether the run repeated its levels.
pub fn any_repeats(s: &RunSummary) -> bool {
    s.repeated_levels().next().is_some()
}

/// Each repeated level: its finished runs, then out tok/s, TTFT, TPOT, ITL and E2E as mean ±
/// half width, and the figures its runs disagree on.
pub fn repeats_table(s: &RunSummary) -> String {
    let mut out = String::from(
        "| level | runs done | out tok/s | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | ITL p50 (ms) | E2E p50 (ms) | runs disagree on |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    // The headline series' levels first (docs/outputs.md "Passes").
    for l in s.passes().sorted(s.repeated_levels().collect()) {
        let of = l.repeat.map_or(1, |r| r.of);
        let done = s.runs_done(l.index);
        let cell = |k: &str| plus_minus(l.repeat_mean.get(k).copied(), l.ci95.get(k));
        let disagree = if l.repeats_disagree.is_empty() {
            "-".to_string()
        } else {
            l.repeats_disagree.join(", ")
        };
        let _ = writeln!(
            out,
            "| {} | {done} of {of} | {} | {} | {} | {} | {} | {} | {disagree} |",
            l.base_label(),
            cell("output_throughput"),
            cell("median_ttft_ms"),
            cell("p99_ttft_ms"),
            cell("median_tpot_ms"),
            cell("median_itl_ms"),
            cell("median_e2el_ms"),
        );
    }
    out
}

/// summary.md's "Across repeats" section (nothing without `--repeat`).
pub(super) fn repeats_section(out: &mut String, s: &RunSummary) {
    if !any_repeats(s) {
        return;
    }
    out.push_str("\n## Across repeats\n\n");
    out.push_str(&repeats_table(s));
    out.push_str("\nEach level ran once per pass of the plan (the passes one after another, so drift over the run shows between them). A figure is the mean of the runs' values ± the half width of its 95 % interval, mean ± t(n − 1) · s / √n over the n finished runs (`repeat_mean` and `ci95` in results.json). runs disagree on: a mean (TTFT, TPOT) whose runs' own 95 % intervals, mean ± 1.96 · std / √requests, do not all overlap: the runs differ by more than their requests' spread explains.\n");
}
