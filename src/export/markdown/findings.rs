//! summary.md's "Findings": each finding's sentence with the numbers of its caveats, then the
//! caveats once each (a caveat on several findings is written once). The same numbers stand
//! beside the table rows of the levels a caveat is about.

use std::fmt::Write;

use crate::summary::findings::{CaveatNumbers, Strength};
use crate::summary::{LevelSummary, RunSummary};

/// The heading of summary.md's findings section (report.html shows the findings its own way).
pub const FINDINGS_HEADING: &str = "Findings";

/// The findings as a Markdown section (nothing when there are none yet).
pub fn findings_section(out: &mut String, s: &RunSummary) {
    if s.findings.is_empty() {
        return;
    }
    let _ = write!(out, "\n## {FINDINGS_HEADING}\n\n");
    out.push_str(&findings_list(s));
}

/// `table` (one row a level of `levels`, as the tables list them: the headline pass's first,
/// docs/outputs.md "Passes"; under its header and rule) with a last column of each row's
/// caveat numbers; `table` as it is when none of its levels has one. Lines after the rows
/// (notes) are kept as they are.
pub fn with_caveats(notes: &CaveatNumbers, table: &str, levels: &[LevelSummary]) -> String {
    if !levels.iter().any(|l| notes.of_level(l.index).is_some()) {
        return table.to_string();
    }
    let mut out = String::new();
    let mut rows = crate::summary::Passes::of(levels)
        .in_order(levels)
        .into_iter();
    let mut line_no = 0;
    for line in table.lines() {
        if line.starts_with('|') {
            let cell = match line_no {
                0 => " caveats |".to_string(),
                1 => "---|".to_string(),
                _ => format!(
                    " {} |",
                    rows.next()
                        .and_then(|l| notes.of_level(l.index))
                        .map_or_else(String::new, CaveatNumbers::text)
                ),
            };
            line_no += 1;
            let _ = writeln!(out, "{line}{cell}");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
/// A comparison's findings across its runs (`summary::findings::compare`), each with its
/// caveats beneath it; nothing when there are none.
pub fn across_section(findings: &[crate::summary::findings::Finding]) -> String {
    let mut out = String::new();
    if findings.is_empty() {
        return out;
    }
    out.push_str("## Findings across the runs\n\n");
    for f in findings {
        let _ = writeln!(out, "- {}", f.text);
        for c in &f.caveats {
            let _ = writeln!(out, "  - caveat: {c}");
        }
    }
    out.push('\n');
    out
}

/// One line a finding, followed by its caveats' numbers, then the numbered caveats: what the
/// headless end prints too.
pub fn findings_list(s: &RunSummary) -> String {
    let numbers = CaveatNumbers::of(s);
    let mut out = String::new();
    for f in &s.findings {
        let _ = write!(out, "- {}", f.text);
        let nums = numbers.of_finding(f);
        let mut notes = Vec::new();
        // A finding that is not solid says so where it is read (docs/metrics.md "Findings").
        if f.strength != Strength::Solid {
            notes.push(f.strength.name().to_string());
        }
        if !nums.is_empty() {
            notes.push(format!(
                "caveat{} {}",
                if nums.len() > 1 { "s" } else { "" },
                CaveatNumbers::text(&nums)
            ));
        }
        if !notes.is_empty() {
            let _ = write!(out, " ({})", notes.join("; "));
        }
        out.push('\n');
    }
    if !numbers.list().is_empty() {
        out.push_str(
            "\nCaveats (numbered beside the findings and the table rows they are about):\n\n",
        );
        for (i, c) in numbers.list().iter().enumerate() {
            let _ = writeln!(out, "{}. {c}", i + 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::findings::Finding;

    fn f(text: &str, caveats: &[&str]) -> Finding {
        let mut f = Finding::default();
        f.text = text.into();
        f.caveats = caveats.iter().map(|c| (*c).to_string()).collect();
        f
    }

    fn run(findings: Vec<Finding>) -> RunSummary {
        let mut s = crate::tui::fixtures::finished_run().session.summary;
        s.findings = findings;
        s
    }

    #[test]
    fn a_caveat_on_several_findings_is_written_once_and_numbers_go_in_order() {
        let s = run(vec![
            f("One.", &["short"]),
            f("Two.", &[]),
            f("Three.", &["bursts", "short"]),
        ]);
        let list = findings_list(&s);
        assert!(
            list.starts_with(
                "- One. (caveat 1)\n- Two.\n- Three. (caveats 1, 2)\n\nCaveats (numbered beside the findings and the table rows they are about):\n\n1. short\n2. bursts\n"
            ),
            "{list}"
        );
    }

    #[test]
    fn a_levels_caveats_stand_beside_its_row() {
        let mut s = crate::tui::fixtures::finished_run().session.summary;
        // The first level rests on too few requests, whatever else the fixture holds.
        s.sweep[0].stats.as_mut().unwrap().scalars.completed = 3;
        s.findings = crate::summary::findings::of(&s);
        let n = CaveatNumbers::of(&s);
        let few = format!("{} rests on 3 completed requests", s.sweep[0].label());
        let k = n.list().iter().position(|c| c.starts_with(&few)).unwrap() + 1;
        let table = with_caveats(&n, &super::super::sweep_table(&s.sweep, &[]), &s.sweep);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].ends_with("| caveats |"), "{table}");
        assert!(lines[1].ends_with("|---|"), "{table}");
        let cells: Vec<&str> = lines[2].trim_end_matches(" |").rsplit(" | ").collect();
        assert!(
            cells[0].split(", ").any(|c| c == k.to_string()),
            "row 1 does not carry caveat {k}: {table}"
        );
        // Every row has the column.
        let cols = |l: &str| l.matches('|').count();
        assert!(lines.iter().all(|l| cols(l) == cols(lines[0])), "{table}");
    }
}
