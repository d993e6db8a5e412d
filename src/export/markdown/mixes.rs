//! The tables of what levels mixed into their requests: spread lengths (`--range-ratio`), LoRA
//! adapters (`--lora-modules`), images (`--images`), and structured output's twins
//! (`--response-format`) side by side. Each is empty when the run mixed in none.

use std::fmt::Write;

use crate::fmt::num;
use crate::metrics::DistStats;
use crate::summary::LevelSummary;

/// What the levels with spread lengths (`--range-ratio`) really sent, one level a line: the
/// mean and extremes of their requests' input and output tokens. Empty when none spread.
pub fn spread_note(levels: &[LevelSummary]) -> String {
    let lines: Vec<String> = levels
        .iter()
        .filter(|l| l.range_ratio.is_some())
        .filter_map(|l| {
            let d = &l.stats.as_ref()?.dists;
            let (i, o) = (
                d.input_tokens_per_request.as_ref()?,
                d.output_tokens_per_request.as_ref()?,
            );
            Some(format!(
                "{}: input mean {} ({}-{}), output mean {} ({}-{})",
                l.label(),
                num(Some(i.mean)),
                i.min,
                i.max,
                num(Some(o.mean)),
                o.min,
                o.max
            ))
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(
        "
Lengths each request was sent with (tokens as counted for it, over the completed requests): {}.
",
        lines.join("; ")
    )
}

/// Each level's figures per LoRA adapter (`--lora-modules`), one row an adapter; empty when
/// no level named one.
pub fn lora_table(levels: &[LevelSummary]) -> String {
    let mut rows = String::new();
    for l in levels {
        let Some(s) = &l.stats else { continue };
        for (name, a) in &s.scalars.lora {
            let _ = writeln!(
                rows,
                "| {} | {name} | {} % | {} | {} / {} | {} | {} | {} / {} | {} / {} | {} |",
                l.label(),
                num(Some(a.share * 100.0)),
                if a.failed > 0 {
                    format!("{} ({} failed)", a.completed, a.failed)
                } else {
                    a.completed.to_string()
                },
                num(a.mean_input_tokens),
                num(a.mean_output_tokens),
                num(Some(a.request_throughput)),
                num(Some(a.output_throughput)),
                num(a.median_ttft_ms),
                num(a.p99_ttft_ms),
                num(a.median_tpot_ms),
                num(a.p99_tpot_ms),
                num(a.median_e2el_ms),
            );
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "| level | adapter | share | done | mean in / out tokens | req/s | out tok/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | E2E p50 (ms) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n{rows}"
    )
}

/// Each level's requests by the images they carried (`--images`): image tokens and TTFT;
/// empty when no request carried one.
pub fn images_table(levels: &[LevelSummary]) -> String {
    let mut rows = String::new();
    for l in levels {
        let Some(s) = &l.stats else { continue };
        for (label, st) in &s.scalars.images {
            let _ = writeln!(
                rows,
                "| {} | {label} | {} | {} | {} | {} / {} |",
                l.label(),
                st.completed,
                num(st.mean_input_tokens),
                num(st.mean_image_tokens),
                num(st.median_ttft_ms),
                num(st.p99_ttft_ms),
            );
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "| level | images a request | done | prompt tokens a request | image tokens a request | TTFT p50 / p99 (ms) |\n|---|---|---:|---:|---:|---:|\n{rows}"
    )
}

/// Each constrained level side by side with its plain twin (`--response-format`); empty
/// when the run has none.
pub fn structured_table(levels: &[LevelSummary]) -> String {
    let pct = |v: Option<f64>| match v {
        Some(v) if v >= 0.0 => format!(" (+{} %)", num(Some(v))),
        Some(v) => format!(" ({} %)", num(Some(v))),
        None => String::new(),
    };
    let mut rows = String::new();
    for l in levels {
        let (Some(o), Some(c)) = (&l.structured_overhead, &l.stats) else {
            continue;
        };
        let Some(p) = levels
            .iter()
            .find(|p| p.index == o.plain_level)
            .and_then(|p| p.stats.as_ref())
        else {
            continue;
        };
        let p50 = |s: &crate::metrics::LevelStats,
                   f: fn(&crate::metrics::LevelDists) -> Option<&DistStats>| {
            num(f(&s.dists).map(|d| d.p50))
        };
        let _ = writeln!(
            rows,
            "| {} | {} → {}{} | {} → {}{} | {} → {}{} | {} / {} | {} |",
            l.label(),
            p50(p, |d| d.ttft_ms.as_ref()),
            p50(c, |d| d.ttft_ms.as_ref()),
            pct(o.ttft_p50_pct),
            p50(p, |d| d.tpot_ms.as_ref()),
            p50(c, |d| d.tpot_ms.as_ref()),
            pct(o.tpot_p50_pct),
            num(Some(p.scalars.output_throughput)),
            num(Some(c.scalars.output_throughput)),
            pct(o.output_throughput_pct),
            num(o.mean_output_tokens_plain),
            num(o.mean_output_tokens_constrained),
            c.scalars.schema_valid_share.map_or_else(
                || "-".into(),
                |s| format!("{} % of {}", num(Some(s * 100.0)), c.scalars.schema_checked)
            ),
        );
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "| level | TTFT p50 (ms) | TPOT p50 (ms) | out tok/s | output tokens, plain / constrained | answers that comply |\n|---|---:|---:|---:|---:|---:|\n{rows}"
    )
}
