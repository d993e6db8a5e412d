//! The comparison's side-by-side table (`report A B …`): each concurrency any run measured, each
//! run's output tok/s and TTFT p50 there, and each later run's change against the first.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::fmt::num;
use crate::summary::{LevelStatus, LevelSummary, RunSummary};

/// A run's finished sweep level at concurrency `c` (its first run, with `--repeat`).
fn at(s: &RunSummary, c: u32) -> Option<&LevelSummary> {
    s.sweep.iter().find(|l| {
        l.concurrency == c
            && l.status == LevelStatus::Done
            && l.repeat.is_none_or(|r| r.n == 1)
            && l.stats.is_some()
    })
}

fn tput(l: Option<&LevelSummary>) -> Option<f64> {
    Some(l?.stats.as_ref()?.scalars.output_throughput)
}

fn ttft(l: Option<&LevelSummary>) -> Option<f64> {
    Some(l?.stats.as_ref()?.dists.ttft_ms.as_ref()?.p50)
}

/// `+12.3 %`, or `-` without both figures.
fn delta(now: Option<f64>, base: Option<f64>) -> String {
    match (now, base) {
        (Some(n), Some(b)) if b > 0.0 => format!("{:+.1} %", (n / b - 1.0) * 100.0),
        _ => "-".into(),
    }
}

/// The table, or nothing when no run has a sweep level.
pub fn side_by_side(runs: &[(String, &RunSummary)]) -> String {
    let cs: BTreeSet<u32> = runs
        .iter()
        .flat_map(|(_, s)| s.sweep.iter().map(|l| l.concurrency))
        .collect();
    let Some(((_, first), rest)) = runs.split_first().filter(|_| !cs.is_empty()) else {
        return String::new();
    };
    // Each figure: its column name and how to read it from a level.
    type Figure = (&'static str, fn(Option<&LevelSummary>) -> Option<f64>);
    let figures: [Figure; 2] = [("out tok/s", tput), ("TTFT p50 (ms)", ttft)];
    let mut head = String::from("| C |");
    let mut rule = String::from("|---:|");
    for (what, _) in figures {
        for (i, (name, _)) in runs.iter().enumerate() {
            let _ = write!(head, " {name} {what} |");
            rule.push_str("---:|");
            if i > 0 {
                head.push_str(" Δ |");
                rule.push_str("---:|");
            }
        }
    }
    let mut out = format!(
        "## Side by side (Δ against {})\n\n{head}\n{rule}\n",
        runs[0].0
    );
    for c in cs {
        let _ = write!(out, "| {c} |");
        for (_, read) in figures {
            let base = read(at(first, c));
            let _ = write!(out, " {} |", num(base));
            for (_, s) in rest {
                let v = read(at(s, c));
                let _ = write!(out, " {} | {} |", num(v), delta(v, base));
            }
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_concurrency_with_each_runs_figures_and_the_change() {
        let a = crate::tui::fixtures::finished_run().session.summary;
        let mut b = a.clone();
        for l in &mut b.sweep {
            if let Some(st) = l.stats.as_mut() {
                st.scalars.output_throughput *= 1.5;
            }
        }
        b.sweep.retain(|l| l.concurrency != 100);
        let t = side_by_side(&[("A".into(), &a), ("B".into(), &b)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "## Side by side (Δ against A)");
        assert_eq!(
            lines[2],
            "| C | A out tok/s | B out tok/s | Δ | A TTFT p50 (ms) | B TTFT p50 (ms) | Δ |"
        );
        let c1 = lines.iter().find(|l| l.starts_with("| 1 |")).unwrap();
        assert!(c1.contains("| +50.0 % |"), "{c1}");
        assert!(c1.ends_with("| +0.0 % |"), "{c1}");
        // A level only one run measured: the other's cells are dashes.
        let c100 = lines.iter().find(|l| l.starts_with("| 100 |")).unwrap();
        assert!(c100.contains("| - | - |"), "{c100}");
        // Every row as wide as the header.
        let cols = |l: &str| l.matches('|').count();
        assert!(
            lines[2..]
                .iter()
                .filter(|l| !l.is_empty())
                .all(|l| cols(l) == cols(lines[2])),
            "{t}"
        );
    }
}
