//! summary.md's "Findings": each finding's sentence, its caveats beneath it.

use std::fmt::Write;

use crate::summary::findings::Finding;

/// The findings as a Markdown list (nothing when there are none yet).
pub fn findings_section(out: &mut String, findings: &[Finding]) {
    if findings.is_empty() {
        return;
    }
    out.push_str("\n## Findings\n\n");
    out.push_str(&findings_list(findings));
}

/// One line a finding, each caveat indented beneath it: what the headless end prints too.
pub fn findings_list(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let _ = writeln!(out, "- {}", f.text);
        for c in &f.caveats {
            let _ = writeln!(out, "  - caveat: {c}");
        }
    }
    out
}
