//! The dashboard's own state, none of it the run's: what the person at it asked for (the tab,
//! its scroll, the level picked, help open, the quit question, pause) and what it tells them (a
//! short message in the footer).

use std::time::Duration;

use super::Tab;

/// How long a message stays in the footer.
const FLASH: Duration = Duration::from_secs(4);

/// What the person at the dashboard asked for, and what it tells them.
// Independent flags (help open, quit question, paused, quitting, exit, no colour), not a hidden
// state machine.
#[allow(clippy::struct_excessive_bools)]
#[derive(Clone, Debug)]
pub struct UiState {
    pub tab: Tab,
    pub show_help: bool,
    pub confirm_quit: bool,
    pub paused: bool,
    /// Quit was confirmed: waiting for in-flight requests and the final save.
    pub quitting: bool,
    /// Leave the event loop.
    pub exit: bool,
    /// A short message shown in the footer until the given time.
    pub flash: Option<(String, Duration)>,
    pub no_color: bool,
    /// Lines scrolled down, per tab (in `Tab::ALL` order); drawing keeps it within the text.
    pub scroll: [u16; Tab::ALL.len()],
    /// The level picked in the tab's tables (↑↓), if any.
    pub selected: Option<u32>,
}

impl UiState {
    /// The first tab, nothing asked yet.
    pub fn new(no_color: bool) -> Self {
        Self {
            tab: Tab::Sweep,
            show_help: false,
            confirm_quit: false,
            paused: false,
            quitting: false,
            exit: false,
            flash: None,
            no_color,
            scroll: [0; Tab::ALL.len()],
            selected: None,
        }
    }

    /// Lines `tab` is scrolled down.
    pub fn scrolled(&self, tab: Tab) -> u16 {
        self.scroll[tab.index()]
    }

    /// Scrolls the current tab `d` lines down (up when negative).
    pub fn scroll_by(&mut self, d: i32) {
        let i = self.tab.index();
        let now = i64::from(self.scroll[i]);
        self.scroll[i] = (now + i64::from(d)).clamp(0, i64::from(u16::MAX)) as u16;
    }

    /// Shows `msg` in the footer for a few seconds from `now`.
    pub fn say(&mut self, msg: String, now: Duration) {
        self.flash = Some((msg, now + FLASH));
    }

    /// Takes the footer's message down once its time is up.
    pub fn tick(&mut self, now: Duration) {
        if self.flash.as_ref().is_some_and(|(_, until)| now >= *until) {
            self.flash = None;
        }
    }
}
