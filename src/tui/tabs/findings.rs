//! Findings tab: what the numbers mean so far (docs/metrics.md "Findings"), each finding's
//! sentence with the numbers of its caveats, then the caveats. It fills as levels end; the
//! same list opens summary.md.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::summary::findings::CaveatNumbers;
use crate::tui::app::App;
use crate::tui::theme::Theme;

/// Draws the tab.
pub fn render(app: &App, area: Rect, buf: &mut Buffer, th: &Theme) {
    let v = &app.views.findings;
    let mut lines: Vec<Line> = v
        .findings
        .iter()
        .map(|(text, weak, nums)| {
            let mut spans = vec![Span::raw("• "), Span::raw(text.as_str())];
            if let Some(w) = weak {
                spans.push(Span::styled(format!(" ({w})"), th.warn));
            }
            if !nums.is_empty() {
                spans.push(Span::styled(
                    format!(" [{}]", CaveatNumbers::text(nums)),
                    th.warn,
                ));
            }
            Line::from(spans)
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::styled(
            "findings appear here as levels end: what the numbers mean, and when not to trust them",
            th.dim,
        ));
    }
    if !v.caveats.is_empty() {
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            "Caveats: why a figure should not be taken at face value",
            th.warn,
        ));
        for (i, c) in v.caveats.iter().enumerate() {
            lines.push(Line::from(vec![
                Span::styled(format!("[{}] ", i + 1), th.warn),
                Span::raw(c.as_str()),
            ]));
        }
    }
    super::scrolled::render(
        "findings: what the numbers mean so far",
        lines,
        app.ui.scrolled(crate::tui::tab::Tab::Findings),
        area,
        buf,
        th,
    );
}
