//! Colours that read on dark and light terminals, or none at all under `NO_COLOR`.
//!
//! Only the terminal's own foreground/background plus a few mid-tone accents are used; emphasis
//! that matters (the level in progress, the quit question) is carried by bold and reverse video,
//! which survive `NO_COLOR` and any palette.

use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Borders};

/// Styles of the dashboard.
#[derive(Clone, Copy, Debug)]
pub struct Theme {
    pub title: Style,
    pub accent: Style,
    pub ok: Style,
    pub warn: Style,
    pub bad: Style,
    pub dim: Style,
    /// The row of the level in progress.
    pub current: Style,
    /// The row of the level picked (↑↓).
    pub selected: Style,
    /// The SIMULATED badge.
    pub badge: Style,
    pub series: [Color; 3],
}

impl Theme {
    /// Colour unless `no_color`.
    pub fn new(no_color: bool) -> Self {
        if no_color {
            let plain = Style::default();
            return Self {
                title: plain.add_modifier(Modifier::BOLD),
                accent: plain.add_modifier(Modifier::BOLD),
                ok: plain,
                warn: plain.add_modifier(Modifier::BOLD),
                bad: plain.add_modifier(Modifier::BOLD),
                dim: plain,
                current: plain.add_modifier(Modifier::REVERSED),
                selected: plain.add_modifier(Modifier::UNDERLINED | Modifier::BOLD),
                badge: plain.add_modifier(Modifier::REVERSED | Modifier::BOLD),
                series: [Color::Reset; 3],
            };
        }
        Self {
            title: Style::default().add_modifier(Modifier::BOLD),
            accent: Style::default().fg(Color::Cyan),
            ok: Style::default().fg(Color::Green),
            warn: Style::default().fg(Color::Yellow),
            bad: Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            dim: Style::default().add_modifier(Modifier::DIM),
            current: Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            selected: Style::default()
                .fg(Color::Cyan)
                .add_modifier(Modifier::UNDERLINED | Modifier::BOLD),
            badge: Style::default()
                .fg(Color::Black)
                .bg(Color::Magenta)
                .add_modifier(Modifier::BOLD),
            series: [Color::Cyan, Color::Magenta, Color::Yellow],
        }
    }

    /// A bordered panel with a title in the title style.
    pub fn panel<'a>(&self, title: impl Into<ratatui::text::Line<'a>>) -> Block<'a> {
        Block::default()
            .borders(Borders::ALL)
            .title(title)
            .title_style(self.title)
    }
}
