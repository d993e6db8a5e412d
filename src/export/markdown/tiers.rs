//! The SLO tiers' table (`--slo-tier`): for each tier, the most users or concurrent requests
//! whose levels all met it, and each level's verdict.

use std::fmt::Write as _;

use crate::summary::RunSummary;

/// summary.md's "SLO tiers" section (nothing without tiers answered).
pub fn tiers_section(s: &RunSummary) -> String {
    if s.slo_tiers.is_empty() {
        return String::new();
    }
    format!(
        "\n## SLO tiers\n\n{}\nEach level is judged against each tier at the tier's percentile, failed requests counting as misses; `?` marks a verdict whose confidence interval straddles a limit. The most is the largest level at which it and every level below met the tier.\n",
        tiers_table(s)
    )
}

/// `| tier | SLO | most users | by users |`, a row a tier.
pub fn tiers_table(s: &RunSummary) -> String {
    let mut out = String::from("| tier | SLO | most | each level |\n|---|---|---|---|\n");
    for a in &s.slo_tiers {
        let levels: Vec<String> = a
            .levels
            .iter()
            .map(|l| format!("{} {}", l.concurrency, l.verdict))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            a.tier,
            a.slo.describe(),
            a.most_text(),
            levels.join(", ")
        );
    }
    out
}
