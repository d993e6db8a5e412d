//! summary.md as HTML for report.html: the same headings, notes, lists and tables, readable with
//! scripts off. The Markdown is servetop's own (summary.md's subset: headings, quotes, lists,
//! paragraphs, pipe tables, `**bold**` and `` `code` ``). A table row that is a level's carries
//! `data-level` with the level's label, so a finding can point at it.

use std::fmt::Write as _;

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A line's inline Markdown as HTML: `` `code` `` and `**bold**`, the rest escaped.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", esc(part));
            continue;
        }
        for (j, bit) in part.split("**").enumerate() {
            if j % 2 == 1 {
                let _ = write!(out, "<strong>{}</strong>", esc(bit));
            } else {
                out.push_str(&esc(bit));
            }
        }
    }
    out
}

/// The levels a table's rows may be: each row as a level table writes it (before the caveats
/// column summary.md adds) and the level's label; and every level's label, for tables whose
/// first cell is the label.
#[derive(Default)]
pub struct LevelRows {
    /// `(row as written, label)`, for the tables that start a row with the level's number.
    pub rows: Vec<(String, String)>,
    /// Every level's label.
    pub labels: Vec<String>,
}

impl LevelRows {
    /// The label of the level a table row is (none for a row that is not a level's).
    fn of(&self, line: &str, first_cell: &str) -> Option<&str> {
        self.rows
            .iter()
            .find(|(row, _)| line.starts_with(row.as_str()))
            .map(|(_, label)| label.as_str())
            .or_else(|| {
                self.labels
                    .iter()
                    .find(|l| l.as_str() == first_cell)
                    .map(String::as_str)
            })
    }
}

/// A pipe table's cells, trimmed.
fn cells(line: &str) -> Vec<&str> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(str::trim).collect()
}

/// One pipe table (`lines`: header, rule, rows) as a sortable HTML table.
fn table(out: &mut String, lines: &[&str], levels: &LevelRows) {
    let Some((head, rest)) = lines.split_first() else {
        return;
    };
    let (rule, rows) = match rest.split_first() {
        Some((r, rows)) if r.contains("---") => (cells(r), rows),
        _ => (Vec::new(), rest),
    };
    let right: Vec<bool> = rule.iter().map(|c| c.ends_with(':')).collect();
    let align = |i: usize| {
        if right.get(i).copied().unwrap_or(false) {
            " class=\"num\""
        } else {
            ""
        }
    };
    out.push_str("<div class=\"table-wrap\"><table class=\"sortable\">\n<thead><tr>");
    for (i, c) in cells(head).iter().enumerate() {
        let _ = write!(out, "<th{}>{}</th>", align(i), inline(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        let cs = cells(row);
        match levels.of(row, cs.first().copied().unwrap_or_default()) {
            Some(label) => {
                let _ = write!(out, "<tr data-level=\"{}\">", esc(label));
            }
            None => out.push_str("<tr>"),
        }
        for (i, c) in cs.iter().enumerate() {
            let _ = write!(out, "<td{}>{}</td>", align(i), inline(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
}

/// A heading's anchor: its words in lower case, joined by `-`.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for w in s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&w.to_ascii_lowercase());
    }
    out
}

/// A list item's depth (two spaces a level) and text, when `line` is one.
fn list_item(line: &str) -> Option<(usize, bool, &str)> {
    let depth = (line.len() - line.trim_start().len()) / 2;
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix("- ") {
        return Some((depth, false, rest));
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0
        && let Some(rest) = t[digits..].strip_prefix(". ")
    {
        return Some((depth, true, rest));
    }
    None
}

/// summary.md as HTML, but its title (the page has its own) and the section headed `skip`.
pub fn to_html(md: &str, levels: &LevelRows, skip: &str) -> String {
    let mut out = String::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    let mut skipping = false;
    // Open lists, innermost last: whether each is ordered.
    let mut lists: Vec<bool> = Vec::new();
    let close_lists = |out: &mut String, lists: &mut Vec<bool>, to: usize| {
        while lists.len() > to {
            let ordered = lists.pop().unwrap_or(false);
            out.push_str(if ordered {
                "</li></ol>\n"
            } else {
                "</li></ul>\n"
            });
        }
    };
    while i < lines.len() {
        let line = lines[i];
        if let Some(h) = line.strip_prefix("## ") {
            close_lists(&mut out, &mut lists, 0);
            skipping = h.trim() == skip;
            if !skipping {
                let _ = writeln!(out, "<h3 id=\"md-{}\">{}</h3>", slug(h), inline(h));
            }
            i += 1;
            continue;
        }
        if skipping || line.starts_with("# ") {
            i += 1;
            continue;
        }
        if line.trim().is_empty() {
            close_lists(&mut out, &mut lists, 0);
            i += 1;
            continue;
        }
        if let Some(h) = line.strip_prefix("### ") {
            close_lists(&mut out, &mut lists, 0);
            let _ = writeln!(out, "<h4>{}</h4>", inline(h));
            i += 1;
            continue;
        }
        if line.starts_with('|') {
            close_lists(&mut out, &mut lists, 0);
            let start = i;
            while i < lines.len() && lines[i].starts_with('|') {
                i += 1;
            }
            table(&mut out, &lines[start..i], levels);
            continue;
        }
        if let Some(q) = line.strip_prefix("> ") {
            close_lists(&mut out, &mut lists, 0);
            let _ = writeln!(out, "<blockquote>{}</blockquote>", inline(q));
            i += 1;
            continue;
        }
        if let Some((depth, ordered, text)) = list_item(line) {
            if depth + 1 > lists.len() {
                while lists.len() < depth + 1 {
                    lists.push(ordered);
                    out.push_str(if ordered { "<ol>\n<li>" } else { "<ul>\n<li>" });
                }
            } else {
                close_lists(&mut out, &mut lists, depth + 1);
                out.push_str("</li>\n<li>");
            }
            out.push_str(&inline(text));
            i += 1;
            continue;
        }
        close_lists(&mut out, &mut lists, 0);
        let _ = writeln!(out, "<p>{}</p>", inline(line));
        i += 1;
    }
    close_lists(&mut out, &mut lists, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_lists_and_inline_marks_become_html_and_level_rows_are_tagged() {
        let md = "# title\n\n## Findings\n\n- skipped\n\n## Concurrency sweep (1000 in)\n\n\
                  | C | out tok/s | caveats |\n|---:|---:|---|\n| 1 | 63.9 | 1 |\n| 4 | 129 | |\n\n\
                  note with `code <x>` and **bold**\n\n\
                  | level | energy |\n|---|---:|\n| 8K ctx | 3235 |\n\n\
                  - a\n  - b & c\n- d\n\n1. one\n2. two\n";
        let levels = LevelRows {
            rows: vec![("| 1 | 63.9 |".into(), "C=1".into())],
            labels: vec!["C=1".into(), "8K ctx".into()],
        };
        let html = to_html(md, &levels, "Findings");
        assert!(
            !html.contains("skipped") && !html.contains("title"),
            "{html}"
        );
        assert!(
            html.contains("<h3 id=\"md-concurrency-sweep-1000-in\">"),
            "{html}"
        );
        assert!(
            html.contains("<tr data-level=\"C=1\"><td class=\"num\">1</td><td class=\"num\">63.9</td><td>1</td></tr>"),
            "{html}"
        );
        assert!(html.contains("<tr><td class=\"num\">4</td>"), "{html}");
        assert!(
            html.contains("<tr data-level=\"8K ctx\"><td>8K ctx</td>"),
            "{html}"
        );
        assert!(
            html.contains("<p>note with <code>code &lt;x&gt;</code> and <strong>bold</strong></p>"),
            "{html}"
        );
        assert!(
            html.contains("<ul>\n<li>a<ul>\n<li>b &amp; c</li></ul>\n</li>\n<li>d</li></ul>"),
            "{html}"
        );
        assert!(
            html.contains("<ol>\n<li>one</li>\n<li>two</li></ol>"),
            "{html}"
        );
    }
}
