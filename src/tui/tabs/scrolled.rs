//! A panel of wrapped text that scrolls (the Log and Findings tabs): the offset the user asked
//! for, kept within the text, and a title that says how to scroll when the text is taller than
//! the panel.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use crate::tui::theme::Theme;

/// Rows `lines` take wrapped at `width` columns, as the panel wraps them.
pub fn rows(lines: &[Line<'_>], width: u16) -> usize {
    Paragraph::new(lines.to_vec())
        .wrap(Wrap { trim: true })
        .line_count(width.max(1))
}

/// Draws `lines` wrapped in a panel titled `title`, scrolled down `offset` rows at most as far
/// as the last row can reach the panel's top; the title gains where it is and how to scroll
/// when the text does not fit.
pub fn render(
    title: &str,
    lines: Vec<Line<'_>>,
    offset: u16,
    area: Rect,
    buf: &mut Buffer,
    th: &Theme,
) {
    let inner = (area.width.saturating_sub(2), area.height.saturating_sub(2));
    let total = rows(&lines, inner.0);
    let room = usize::from(inner.1);
    let title = if total > room {
        let top = usize::from(offset).min(total.saturating_sub(room));
        format!(
            " {title} · rows {}-{} of {total} (↑↓ PgUp PgDn) ",
            top + 1,
            (top + room).min(total)
        )
    } else {
        format!(" {title} ")
    };
    let top = u16::try_from(usize::from(offset).min(total.saturating_sub(room))).unwrap_or(0);
    Paragraph::new(lines)
        .block(th.panel(title))
        .wrap(Wrap { trim: true })
        .scroll((top, 0))
        .render(area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn draw(lines: usize, offset: u16) -> String {
        let th = Theme::new(false);
        let mut t = Terminal::new(TestBackend::new(40, 6)).unwrap();
        t.draw(|f| {
            let text = (1..=lines)
                .map(|i| Line::raw(format!("line {i}")))
                .collect();
            render("log", text, offset, f.area(), f.buffer_mut(), &th);
        })
        .unwrap();
        t.backend().to_string()
    }

    #[test]
    fn rows_count_words_wrapped_as_drawn() {
        // Ten columns: "aaaa bbbb" fits one row; "aaaa bbbbbb" takes two (the word moves down
        // whole, where counting by length would say 11 columns, two rows, by luck); three
        // six-letter words take three rows where their 20 columns say two.
        let l = |s: &'static str| vec![Line::raw(s)];
        assert_eq!(rows(&l("aaaa bbbb"), 10), 1);
        assert_eq!(rows(&l("aaaa bbbbbb"), 10), 2);
        assert_eq!(rows(&l("aaaaaa bbbbbb cccccc"), 10), 3);
    }

    #[test]
    fn text_that_fits_does_not_scroll() {
        let s = draw(3, 5);
        assert!(s.contains("line 1") && s.contains("line 3"), "{s}");
        assert!(!s.contains("↑↓"), "{s}");
    }

    #[test]
    fn taller_text_scrolls_and_stops_at_its_end() {
        let s = draw(10, 0);
        assert!(s.contains("rows 1-4 of 10"), "{s}");
        assert!(s.contains("line 1") && !s.contains("line 5"), "{s}");
        let s = draw(10, 3);
        assert!(s.contains("rows 4-7 of 10"), "{s}");
        assert!(
            s.contains("line 4") && s.contains("line 7") && !s.contains("line 8"),
            "{s}"
        );
        // Past the end: the last row stays at the bottom.
        let s = draw(10, 500);
        assert!(s.contains("rows 7-10 of 10"), "{s}");
        assert!(s.contains("line 10") && !s.contains("line 6 "), "{s}");
    }
}
