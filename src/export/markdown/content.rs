//! Accept length by content (`--content`): each load's levels of every kind side by side.

use std::fmt::Write;

use crate::fmt::num;
use crate::metrics::curves::{DECODE_TOK_S, OUTPUT_TOK_S, TPOT_MS, TTFT_MS, at};
use crate::summary::LevelSummary;

/// One row per level of a content kind (or dataset category), grouped by load (its label without the kind) in plan
/// order, each load's kinds in the order they ran: completed requests, accept length (client /
/// server), per-stream decode speed, output throughput, TTFT and TPOT p50. Empty in a run
/// without `--content`.
pub fn content_section(levels: &[LevelSummary]) -> String {
    let kinded: Vec<&LevelSummary> = levels
        .iter()
        .filter(|l| l.content_name().is_some())
        .collect();
    if kinded.is_empty() {
        return String::new();
    }
    let load = |l: &LevelSummary| {
        crate::workload::Place {
            content: None,
            category: None,
            ..l.place()
        }
        .label()
    };
    let mut loads: Vec<String> = Vec::new();
    for l in &kinded {
        let k = load(l);
        if !loads.contains(&k) {
            loads.push(k);
        }
    }
    let mut rows = String::new();
    for at_load in &loads {
        for l in kinded.iter().filter(|l| load(l) == *at_load) {
            let st = l.stats.as_ref();
            let accept = match (l.accept_length_client(), l.accept_length_server) {
                (None, None) => "-".to_string(),
                (c, None) => num(c),
                (c, s) => format!("{} / {}", num(c), num(s)),
            };
            let per_position = l
                .spec_server
                .as_ref()
                .filter(|s| !s.per_position.is_empty())
                .map_or_else(
                    || "-".to_string(),
                    |s| {
                        s.per_position
                            .iter()
                            .map(|p| format!("{p:.2}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    },
                );
            let _ = writeln!(
                rows,
                "| {at_load} | {} | {} | {accept} | {per_position} | {} | {} | {} | {} |",
                l.content_name().unwrap_or(""),
                st.map_or(0, |s| s.scalars.completed),
                num(at(st, DECODE_TOK_S)),
                num(at(st, OUTPUT_TOK_S)),
                num(at(st, TTFT_MS.p50)),
                num(at(st, TPOT_MS.p50)),
            );
        }
    }
    format!(
        "\n## Accept length by content\n\n| load | content | done | accept len (client / server) | accepted per draft position | per-stream tok/s | out tok/s | TTFT p50 (ms) | TPOT p50 (ms) |\n|---|---|---:|---:|---|---:|---:|---:|---:|\n{rows}\nEach level ran once per kind of prompt (--content, or dataset category with --categories), so the server's counters over a level are that kind's alone. accept len: output tokens per chunk after the first as servetop saw them / the server's: 1 + accepted ÷ drafts by its counters over the level (vLLM, llama.cpp), or SGLang's recent-window gauge, which carries steps of the level before; accepted per draft position: the share of drafts whose token at each position was accepted, by the server's counters (vLLM's per-position counter); per-stream tok/s: mean decode speed of one request.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;
    use crate::workload::content::ContentKind;

    #[test]
    fn a_row_per_kind_grouped_by_load() {
        let mut c = RunConfig::demo();
        c.concurrency = vec![1, 8];
        c.long_context = vec![];
        c.content = vec![ContentKind::Code, ContentKind::Chat];
        let levels: Vec<LevelSummary> = c.levels().iter().map(LevelSummary::planned).collect();
        let t = content_section(&levels);
        let rows: Vec<&str> = t.lines().filter(|l| l.starts_with("| C=")).collect();
        assert_eq!(rows.len(), 4, "{t}");
        assert!(
            rows[0].starts_with("| C=1 | code | 0 | - | - |"),
            "{}",
            rows[0]
        );
        assert!(rows[1].starts_with("| C=1 | chat |"), "{}", rows[1]);
        assert!(rows[3].starts_with("| C=8 | chat |"), "{}", rows[3]);
        c.content.clear();
        let plain: Vec<LevelSummary> = c.levels().iter().map(LevelSummary::planned).collect();
        assert_eq!(content_section(&plain), "");
    }
}
