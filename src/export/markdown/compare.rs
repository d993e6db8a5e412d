//! The comparison's side-by-side table (`report A B …`): each place any run measured (a sweep
//! level's concurrency, a rate level's rate, a long-context length; in each series of passes),
//! each run's output tok/s and TTFT p50 there, and each later run's change (Δ) against the
//! first only where the two levels measured the same thing. Where they did not (another input
//! or output length, another response format, …: [`level_differences`]), the table gives no
//! change and says which keys differ.

use std::fmt::Write;

use crate::fmt::num;
use crate::summary::baseline::{level_differences, same_rate};
use crate::summary::{LevelStatus, LevelSummary, RunSummary};
use crate::workload::LevelKind;

/// A run's levels the table can place: finished sweep, rate and long-context levels with
/// results (a `--repeat` level's first run), each with the index of its series among the
/// run's (`plain` 0, `json` 1; the first thinking budget 0, …).
fn placed(s: &RunSummary) -> Vec<(usize, &LevelSummary)> {
    let passes = s.passes();
    s.sweep
        .iter()
        .chain(&s.rates)
        .chain(&s.long_context)
        .filter(|l| {
            l.status == LevelStatus::Done && l.repeat.is_none_or(|r| r.n == 1) && l.stats.is_some()
        })
        .map(|l| {
            let series = passes.series().iter().position(|p| p.holds(l));
            (series.unwrap_or(0), l)
        })
        .collect()
}

/// Whether two levels stand at one place of the table: the same kind and concurrency (sweep),
/// offered rate (rate) or input length (long context), in the same series of their runs.
fn same_place(a: (usize, &LevelSummary), b: (usize, &LevelSummary)) -> bool {
    a.0 == b.0
        && a.1.kind == b.1.kind
        && match a.1.kind {
            LevelKind::Sweep => a.1.concurrency == b.1.concurrency,
            LevelKind::LongContext => a.1.input_len == b.1.input_len,
            LevelKind::Rate => same_rate(a.1.request_rate(), b.1.request_rate()),
            LevelKind::MultiTurn | LevelKind::Trace | LevelKind::Sessions => false,
        }
}

/// The order of the rows: sweep, then rates, then long context; by place; by series.
fn row_order(series: usize, l: &LevelSummary) -> (u8, f64, usize) {
    match l.kind {
        LevelKind::Sweep => (0, f64::from(l.concurrency), series),
        LevelKind::Rate => (1, l.request_rate().unwrap_or(0.0), series),
        _ => (2, l.input_len as f64, series),
    }
}

/// One place of the table: each run's level there (none where it measured nothing there).
struct Row<'a> {
    order: (u8, f64, usize),
    levels: Vec<Option<&'a LevelSummary>>,
}

impl Row<'_> {
    /// The row's name: the label of the first run's level there that has one.
    fn label(&self) -> String {
        self.levels
            .iter()
            .flatten()
            .next()
            .map_or_else(String::new, |l| l.label())
    }
}

fn rows<'a>(runs: &[(String, &'a RunSummary)]) -> Vec<Row<'a>> {
    let mut rows: Vec<(usize, Row<'a>)> = Vec::new();
    for (i, (_, s)) in runs.iter().enumerate() {
        for (series, l) in placed(s) {
            let at = rows.iter().position(|(sr, r)| {
                let first = r.levels.iter().flatten().next();
                first.is_some_and(|f| same_place((*sr, f), (series, l)))
            });
            if let Some(at) = at {
                rows[at].1.levels[i].get_or_insert(l);
            } else {
                let mut levels = vec![None; runs.len()];
                levels[i] = Some(l);
                let order = row_order(series, l);
                rows.push((series, Row { order, levels }));
            }
        }
    }
    let mut rows: Vec<Row<'a>> = rows.into_iter().map(|(_, r)| r).collect();
    rows.sort_by(|a, b| {
        a.order
            .0
            .cmp(&b.order.0)
            .then(a.order.1.total_cmp(&b.order.1))
            .then(a.order.2.cmp(&b.order.2))
    });
    rows
}

fn tput(l: &LevelSummary) -> Option<f64> {
    Some(l.stats.as_ref()?.scalars.output_throughput)
}

fn ttft(l: &LevelSummary) -> Option<f64> {
    Some(l.stats.as_ref()?.dists.ttft_ms.as_ref()?.p50)
}

/// `+12.3 %`, or `-` without both figures.
fn delta(now: Option<f64>, base: Option<f64>) -> String {
    match (now, base) {
        (Some(n), Some(b)) if b > 0.0 => format!("{:+.1} %", (n / b - 1.0) * 100.0),
        _ => "-".into(),
    }
}

/// How a later run's levels stand against the first run's at the places both measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Against {
    /// The first run's name and the later run's.
    pub runs: (String, String),
    /// The places with a change: both levels measured the same thing.
    pub compared: Vec<String>,
    /// The places without one, grouped by what differs: their labels, and the keys that
    /// differ with the first run's value and the later run's (`input_len 200 vs 2000`).
    pub not_compared: Vec<(Vec<String>, String)>,
    /// Each run's places when they have none in common (then nothing is compared).
    pub apart: Option<(Vec<String>, Vec<String>)>,
}

impl Against {
    /// What keeps this pair from being compared, in one line each (none when everything the
    /// two measured at one place was compared): `A vs B at C=1, C=4: not compared: input_len
    /// 200 vs 2000`.
    pub fn lines(&self) -> Vec<String> {
        let (a, b) = &self.runs;
        let mut out: Vec<String> = self
            .not_compared
            .iter()
            .map(|(at, why)| format!("{a} vs {b} at {}: not compared: {why}", at.join(", ")))
            .collect();
        if let Some((pa, pb)) = &self.apart {
            out.push(format!(
                "{a} vs {b}: no level at the same place, nothing compared ({a}: {}; {b}: {})",
                or_none(pa),
                or_none(pb)
            ));
        }
        out
    }
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Each later run against the first: where a change is given and where it is not, and why.
pub fn against_first(runs: &[(String, &RunSummary)]) -> Vec<Against> {
    let Some(((first, a), rest)) = runs.split_first() else {
        return Vec::new();
    };
    let rows = rows(runs);
    rest.iter()
        .enumerate()
        .map(|(k, (name, b))| {
            let mut out = Against {
                runs: (first.clone(), name.clone()),
                compared: Vec::new(),
                not_compared: Vec::new(),
                apart: None,
            };
            for r in &rows {
                let (Some(la), Some(lb)) = (r.levels[0], r.levels[k + 1]) else {
                    continue;
                };
                let why = level_differences((a, la), (b, lb));
                if why.is_empty() {
                    out.compared.push(r.label());
                    continue;
                }
                let why: Vec<String> = why.iter().map(ToString::to_string).collect();
                let why = why.join(", ");
                match out.not_compared.iter_mut().find(|(_, w)| *w == why) {
                    Some((at, _)) => at.push(r.label()),
                    None => out.not_compared.push((vec![r.label()], why)),
                }
            }
            if out.compared.is_empty() && out.not_compared.is_empty() {
                let labels = |s: &RunSummary| placed(s).iter().map(|(_, l)| l.label()).collect();
                out.apart = Some((labels(a), labels(b)));
            }
            out
        })
        .collect()
}

/// The table, or nothing when no run has a level to place; under it, what was not compared
/// and why.
pub fn side_by_side(runs: &[(String, &RunSummary)]) -> String {
    let rows = rows(runs);
    if rows.is_empty() || runs.is_empty() {
        return String::new();
    }
    let first = runs[0].1;
    // Each figure: its column name and how to read it from a level.
    type Figure = (&'static str, fn(&LevelSummary) -> Option<f64>);
    let figures: [Figure; 2] = [("out tok/s", tput), ("TTFT p50 (ms)", ttft)];
    let mut head = String::from("| level |");
    let mut rule = String::from("|---|");
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
        "## Side by side (Δ against {}, where the levels sent the same requests)\n\n{head}\n{rule}\n",
        runs[0].0
    );
    for r in &rows {
        let _ = write!(out, "| {} |", r.label());
        for (_, read) in figures {
            let base = r.levels[0].and_then(read);
            let _ = write!(out, " {} |", num(base));
            for (k, (_, s)) in runs.iter().enumerate().skip(1) {
                let now = r.levels[k].and_then(read);
                let change = match (r.levels[0], r.levels[k]) {
                    (Some(a), Some(b)) if !level_differences((first, a), (s, b)).is_empty() => {
                        "not compared".to_string()
                    }
                    _ => delta(now, base),
                };
                let _ = write!(out, " {} | {change} |", num(now));
            }
        }
        out.push('\n');
    }
    out.push('\n');
    let notes: Vec<String> = against_first(runs)
        .iter()
        .flat_map(Against::lines)
        .collect();
    if !notes.is_empty() {
        out.push_str(
            "Not compared (a change only between levels that sent the same requests; each key with the first run's value, then the other's):\n\n",
        );
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_place_with_each_runs_figures_and_the_change() {
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
        assert_eq!(
            lines[0],
            "## Side by side (Δ against A, where the levels sent the same requests)"
        );
        assert_eq!(
            lines[2],
            "| level | A out tok/s | B out tok/s | Δ | A TTFT p50 (ms) | B TTFT p50 (ms) | Δ |"
        );
        let c1 = lines.iter().find(|l| l.starts_with("| C=1 |")).unwrap();
        assert!(c1.contains("| +50.0 % |"), "{c1}");
        assert!(c1.ends_with("| +0.0 % |"), "{c1}");
        // A level only one run measured: the other's cells are dashes.
        let c100 = lines.iter().find(|l| l.starts_with("| C=100 |")).unwrap();
        assert!(c100.contains("| - | - |"), "{c100}");
        // Every row as wide as the header; nothing said not compared.
        let cols = |l: &str| l.matches('|').count();
        assert!(
            lines[2..]
                .iter()
                .take_while(|l| !l.is_empty())
                .all(|l| cols(l) == cols(lines[2])),
            "{t}"
        );
        assert!(!t.contains("not compared"), "{t}");
    }

    /// Levels at one place that sent other requests get no change, and the keys that differ
    /// are named, the first run's value first.
    #[test]
    fn levels_that_sent_other_requests_are_not_compared() {
        let a = crate::tui::fixtures::finished_run().session.summary;
        let mut b = a.clone();
        for l in &mut b.sweep {
            l.input_len = 2000;
            l.output_len = 500;
        }
        let runs = [("A".to_string(), &a), ("B".to_string(), &b)];
        let t = side_by_side(&runs);
        let c1 = t.lines().find(|l| l.starts_with("| C=1 |")).unwrap();
        assert_eq!(c1.matches("not compared").count(), 2, "{c1}");
        assert!(!c1.contains('%'), "{c1}");
        let against = against_first(&runs);
        assert_eq!(against.len(), 1);
        assert_eq!(
            against[0].not_compared[0].1,
            "input_len 1000 vs 2000, output_len 100 vs 500"
        );
        // The long-context lengths sent the same: compared.
        assert!(
            against[0].compared.iter().all(|l| l.ends_with("ctx"))
                && !against[0].compared.is_empty(),
            "{against:?}"
        );
        assert!(
            t.contains("- A vs B at C=1, C=4, C=8, C=16, C=64, C=100: not compared: input_len 1000 vs 2000, output_len 100 vs 500"),
            "{t}"
        );
    }
}
