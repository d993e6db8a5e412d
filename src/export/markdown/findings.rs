//! summary.md's "Findings": each finding's sentence with the numbers of its caveats, then the
//! caveats once each (a caveat on several findings is written once).

use std::fmt::Write;

use crate::summary::findings::Finding;

/// The findings as a Markdown section (nothing when there are none yet).
pub fn findings_section(out: &mut String, findings: &[Finding]) {
    if findings.is_empty() {
        return;
    }
    out.push_str("\n## Findings\n\n");
    out.push_str(&findings_list(findings));
}

/// One line a finding, followed by its caveats' numbers, then the numbered caveats: what the
/// headless end prints too.
pub fn findings_list(findings: &[Finding]) -> String {
    let mut caveats: Vec<&str> = Vec::new();
    let mut out = String::new();
    for f in findings {
        let _ = write!(out, "- {}", f.text);
        let numbers: Vec<String> = f
            .caveats
            .iter()
            .map(|c| {
                let i = caveats.iter().position(|k| k == c).unwrap_or_else(|| {
                    caveats.push(c);
                    caveats.len() - 1
                });
                (i + 1).to_string()
            })
            .collect();
        if !numbers.is_empty() {
            let _ = write!(
                out,
                " (caveat{} {})",
                if numbers.len() > 1 { "s" } else { "" },
                numbers.join(", ")
            );
        }
        out.push('\n');
    }
    if !caveats.is_empty() {
        out.push_str("\nCaveats:\n\n");
        for (i, c) in caveats.iter().enumerate() {
            let _ = writeln!(out, "{}. {c}", i + 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(text: &str, caveats: &[&str]) -> Finding {
        let mut f = Finding::default();
        f.text = text.into();
        f.caveats = caveats.iter().map(|c| (*c).to_string()).collect();
        f
    }

    #[test]
    fn a_caveat_on_several_findings_is_written_once() {
        let list = findings_list(&[
            f("One.", &["short"]),
            f("Two.", &[]),
            f("Three.", &["bursts", "short"]),
        ]);
        assert_eq!(
            list,
            "- One. (caveat 1)\n- Two.\n- Three. (caveats 2, 1)\n\nCaveats:\n\n1. short\n2. bursts\n"
        );
    }
}
