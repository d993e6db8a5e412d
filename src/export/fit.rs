//! Markdown tables fitted to a terminal: the end-of-run tables go to stdout as Markdown (ready
//! to paste), but a table wider than the terminal wraps mid-cell and cannot be read. On a
//! terminal, each table's columns are aligned and, where it is still too wide, the columns that
//! matter least are left out, named under the table (summary.md keeps them all).

use std::fmt::Write as _;

/// Columns left out first, least needed first; then any but the first, from the right.
const LEAST_NEEDED: &[&str] = &[
    "E2E p50 (ms)",
    "TPOT p50 (ms)",
    "req/s",
    "done",
    "accept len",
    "ITL p50 / p99 (ms)",
    "failures",
    "input tokens",
];

/// `text` with every Markdown table in it aligned and, where wider than `width`, narrowed to
/// fit by leaving columns out (named on a line under the table); other lines wider than
/// `width` broken at spaces, a list item's continuation lines indented under its text.
pub fn fit_tables(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut table: Vec<&str> = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with('|') {
            table.push(line.trim_end_matches('\n'));
            continue;
        }
        flush(&mut out, &mut table, width);
        let text = line.trim_end_matches('\n');
        if text.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        // Prose wider than the terminal: broken at spaces, a list item's lines under its text.
        let indent = list_indent(text);
        for (i, l) in wrap(&text[indent..], width - indent.min(width / 2))
            .into_iter()
            .enumerate()
        {
            out.push_str(if i == 0 { &text[..indent] } else { "" });
            if i > 0 {
                out.push_str(&" ".repeat(indent));
            }
            out.push_str(&l);
            out.push('\n');
        }
    }
    flush(&mut out, &mut table, width);
    out
}

fn flush(out: &mut String, table: &mut Vec<&str>, width: usize) {
    if !table.is_empty() {
        out.push_str(&fit_table(table, width));
        table.clear();
    }
}

/// A row's cells, without the outer pipes.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

/// Whether a row is the header's separator (`|---|---:|`).
fn is_separator(row: &[String]) -> bool {
    row.iter()
        .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')))
}

/// One table, aligned, and narrowed to `width` where it can be.
fn fit_table(lines: &[&str], width: usize) -> String {
    let mut rows: Vec<Vec<String>> = lines.iter().map(|l| cells(l)).collect();
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    for r in &mut rows {
        r.resize(n, String::new());
    }
    let header = rows.first().cloned().unwrap_or_default();
    // Each column's widest cell (the separator's dashes follow it).
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter(|r| !is_separator(r))
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                .max(3)
        })
        .collect();
    let mut keep: Vec<bool> = vec![true; n];
    // `| cell |` per kept column: the cell, a space each side and a bar, and the first bar.
    let line_width = |keep: &[bool]| -> usize {
        (0..n)
            .filter(|&i| keep[i])
            .map(|i| widths[i] + 3)
            .sum::<usize>()
            + 1
    };
    let mut left_out = Vec::new();
    let order: Vec<usize> = LEAST_NEEDED
        .iter()
        .filter_map(|name| header.iter().position(|h| h == name))
        .chain((1..n).rev())
        .collect();
    for i in order {
        if line_width(&keep) <= width {
            break;
        }
        if keep[i] && keep.iter().filter(|&&k| k).count() > 2 {
            keep[i] = false;
            left_out.push(header[i].clone());
        }
    }
    let mut s = String::new();
    for r in &rows {
        let sep = is_separator(r);
        s.push('|');
        for i in (0..n).filter(|&i| keep[i]) {
            let w = widths[i];
            if sep {
                let right = r[i].ends_with(':');
                s.push_str(&"-".repeat(w + 2 - usize::from(right)));
                if right {
                    s.push(':');
                }
            } else {
                let pad = w - r[i].chars().count();
                // Numbers to the right, as the separator asks for them.
                let right = rows
                    .get(1)
                    .is_some_and(|sepr| is_separator(sepr) && sepr[i].ends_with(':'));
                if right {
                    let _ = write!(s, " {}{} ", " ".repeat(pad), r[i]);
                } else {
                    let _ = write!(s, " {}{} ", r[i], " ".repeat(pad));
                }
            }
            s.push('|');
        }
        s.push('\n');
    }
    if !left_out.is_empty() {
        let note = format!(
            "(left out to fit {width} columns: {}; summary.md has every column)",
            left_out.join(", ")
        );
        for l in wrap(&note, width) {
            s.push_str(&l);
            s.push('\n');
        }
    }
    s
}

/// `text` as written to stderr: on a terminal, each line longer than its width broken at
/// spaces, the lines after the first indented two spaces (a progress line wrapped by the
/// terminal breaks mid-word, `tok` / `ens`); elsewhere as it is.
pub fn for_stderr(text: &str) -> String {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return text.to_string();
    }
    match crossterm::terminal::size() {
        Ok((w, _)) if w >= 20 => hanging(text, usize::from(w), 2),
        _ => text.to_string(),
    }
}

/// Each line of `text` longer than `width` broken at spaces, the lines after its first
/// indented `indent` spaces.
fn hanging(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        if line.chars().count() <= width {
            out.push_str(line);
            continue;
        }
        let lead = line.len() - line.trim_start().len();
        let mut parts = wrap(&line[lead..], width - lead).into_iter();
        out.push_str(&line[..lead]);
        out.push_str(&parts.next().unwrap_or_default());
        // Later lines: re-wrapped to the room left after the indent.
        let rest = parts.collect::<Vec<_>>().join(" ");
        for l in wrap(&rest, width - lead - indent) {
            if l.is_empty() {
                continue;
            }
            out.push('\n');
            out.push_str(&" ".repeat(lead + indent));
            out.push_str(&l);
        }
    }
    out
}

/// Bytes of a list item's marker (`- `, `12. `), 0 for other lines.
fn list_indent(text: &str) -> usize {
    if text.starts_with("- ") {
        return 2;
    }
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && text[digits..].starts_with(". ") {
        digits + 2
    } else {
        0
    }
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let Some(cur) = lines.last_mut() else { break };
        if cur.is_empty() {
            cur.push_str(word);
        } else if cur.chars().count() + 1 + word.chars().count() <= width {
            cur.push(' ');
            cur.push_str(word);
        } else {
            lines.push(word.to_string());
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWEEP: &str = "Concurrency sweep\n\n| C | done | req/s | out tok/s | per-stream tok/s | TTFT p50 / p99 (ms) | ITL p50 / p99 (ms) | TPOT p50 (ms) | E2E p50 (ms) | accept len | failures | caveats |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n| 1 | 4 | 1.12 | 55.9 | 67.4 | 153 / 155 | 13.5 / 55.4 | 14.6 | 866 | 3.63 / 3.90 | 0 | 1, 2 |\n| 100 | 300 | 11.9 | 4,512.3 | 45.1 | 7,313 / 9,120 | 21.0 / 80.2 | 22.2 | 18,400 | 3.84 / 3.83 | 2 timeout | 2, 3 |\n\nafter\n";

    #[test]
    fn a_wide_table_fits_and_names_what_it_left_out() {
        let out = fit_tables(SWEEP, 80);
        let lines: Vec<&str> = out.lines().collect();
        for l in &lines {
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        let header = lines.iter().find(|l| l.contains("out tok/s")).unwrap();
        for kept in [
            "out tok/s",
            "per-stream tok/s",
            "TTFT p50 / p99 (ms)",
            "caveats",
        ] {
            assert!(header.contains(kept), "{header}");
        }
        let at = lines
            .iter()
            .position(|l| l.starts_with("(left out"))
            .unwrap();
        let note = lines[at..].join(" ");
        assert!(
            note.contains("E2E p50 (ms)") && note.contains("TPOT p50 (ms)"),
            "{note}"
        );
        for dropped in ["E2E p50 (ms)", "TPOT p50 (ms)"] {
            assert!(!header.contains(dropped), "{header}");
        }
        // The text around the table is kept, and every cell of a kept column is whole.
        assert!(out.starts_with("Concurrency sweep\n\n") && out.ends_with("\nafter\n"));
        assert!(out.contains("7,313 / 9,120") && out.contains("4,512.3"));
    }

    #[test]
    fn stderr_lines_break_at_spaces_with_a_hanging_indent() {
        let line = "plan: 11 levels, 701 requests — sweep C=1, 2, 4 (1000 in / 500 out tokens)";
        let out = hanging(line, 30, 2);
        assert_eq!(
            out,
            "plan: 11 levels, 701 requests\n  — sweep C=1, 2, 4 (1000 in /\n  500 out tokens)"
        );
        assert!(out.lines().all(|l| l.chars().count() <= 30), "{out}");
        // Short lines and the line breaks already there are kept.
        assert_eq!(hanging("a\nb c", 30, 2), "a\nb c");
        // An indented line keeps its indent, and its continuation goes under it, further in.
        assert_eq!(
            hanging("    prefix cache: 0.0 % of prompt tokens", 24, 2),
            "    prefix cache: 0.0 %\n      of prompt tokens"
        );
    }

    #[test]
    fn prose_breaks_at_spaces_under_its_list_marker() {
        let text = "- one two three four five six seven eight nine ten\n12. alpha beta gamma delta epsilon zeta\nshort\n";
        let out = fit_tables(text, 20);
        assert_eq!(
            out,
            "- one two three four\n  five six seven\n  eight nine ten\n12. alpha beta gamma\n    delta epsilon\n    zeta\nshort\n"
        );
        assert!(out.lines().all(|l| l.chars().count() <= 20), "{out}");
    }

    #[test]
    fn a_table_that_fits_keeps_every_column_aligned() {
        let out = fit_tables(SWEEP, 400);
        assert!(!out.contains("left out"));
        let rows: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
        assert_eq!(rows.len(), 4);
        let w = rows[0].chars().count();
        assert!(rows.iter().all(|r| r.chars().count() == w), "{out}");
        assert!(rows[0].contains("E2E p50 (ms)"));
        // Still Markdown: the separator keeps its right alignment.
        assert!(
            rows[1].starts_with("|----:|")
                || rows[1].starts_with("|---:|")
                || rows[1].contains("-:|"),
            "{}",
            rows[1]
        );
    }
}
