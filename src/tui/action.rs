//! Keys to user intents: a pure mapping, tested without a terminal.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::tab::Tab;

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    NextTab,
    PrevTab,
    Tab(Tab),
    /// Stop or resume dispatching new requests (in-flight ones finish).
    TogglePause,
    /// Skip the rest of the level in progress.
    Skip,
    /// Write results.json, summary.md, charts and CSV now.
    Export,
    /// Write PNG screenshots of every tab.
    Screenshot,
    ToggleHelp,
    /// Ask to quit (confirmation needed while running).
    Quit,
    /// Yes to the quit question.
    Confirm,
    /// No to the quit question (or close help).
    Cancel,
    /// Ctrl-C: quit without asking.
    ForceQuit,
    /// Leave the dashboard, the run going on (`servetop attach` comes back to it).
    Detach,
    /// Stop the run (a viewer's way; asks first).
    StopRun,
    /// Open the details of the level picked in a table.
    Open,
    /// Scroll the tab's text by this many lines (negative: up; `i32::MIN`/`MAX`: to an end).
    Scroll(i32),
}

/// Lines a page key scrolls.
pub const PAGE: i32 = 10;

/// Maps a key press. While the quit question is open only its answers count.
pub fn map_key(key: KeyEvent, confirming: bool) -> Option<Action> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::ForceQuit);
    }
    if confirming {
        return match key.code {
            KeyCode::Char('y' | 'Y' | 'q') | KeyCode::Enter => Some(Action::Confirm),
            KeyCode::Char('n' | 'N') | KeyCode::Esc => Some(Action::Cancel),
            _ => None,
        };
    }
    Some(match key.code {
        KeyCode::Tab | KeyCode::Right => Action::NextTab,
        KeyCode::BackTab | KeyCode::Left => Action::PrevTab,
        KeyCode::Char('1') => Action::Tab(Tab::Sweep),
        KeyCode::Char('2') => Action::Tab(Tab::LongContext),
        KeyCode::Char('3') => Action::Tab(Tab::Telemetry),
        KeyCode::Char('4') => Action::Tab(Tab::Log),
        KeyCode::Char('5') => Action::Tab(Tab::Findings),
        KeyCode::Char('p') => Action::TogglePause,
        KeyCode::Char('s') => Action::Skip,
        KeyCode::Char('e') => Action::Export,
        KeyCode::Char('S') => Action::Screenshot,
        KeyCode::Char('?' | 'h') => Action::ToggleHelp,
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('d') => Action::Detach,
        KeyCode::Char('X') => Action::StopRun,
        KeyCode::Enter => Action::Open,
        KeyCode::Esc => Action::Cancel,
        KeyCode::Up | KeyCode::Char('k') => Action::Scroll(-1),
        KeyCode::Down | KeyCode::Char('j') => Action::Scroll(1),
        KeyCode::PageUp => Action::Scroll(-PAGE),
        KeyCode::PageDown | KeyCode::Char(' ') => Action::Scroll(PAGE),
        KeyCode::Home => Action::Scroll(i32::MIN),
        KeyCode::End => Action::Scroll(i32::MAX),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn tab_keys() {
        assert_eq!(map_key(key(KeyCode::Tab), false), Some(Action::NextTab));
        assert_eq!(map_key(key(KeyCode::Right), false), Some(Action::NextTab));
        assert_eq!(map_key(key(KeyCode::BackTab), false), Some(Action::PrevTab));
        assert_eq!(map_key(key(KeyCode::Left), false), Some(Action::PrevTab));
        assert_eq!(
            map_key(key(KeyCode::Char('2')), false),
            Some(Action::Tab(Tab::LongContext))
        );
        assert_eq!(
            map_key(key(KeyCode::Char('4')), false),
            Some(Action::Tab(Tab::Log))
        );
        assert_eq!(
            map_key(key(KeyCode::Char('5')), false),
            Some(Action::Tab(Tab::Findings))
        );
        assert_eq!(map_key(key(KeyCode::Char('x')), false), None);
    }

    #[test]
    fn control_keys() {
        assert_eq!(
            map_key(key(KeyCode::Char('p')), false),
            Some(Action::TogglePause)
        );
        assert_eq!(map_key(key(KeyCode::Char('s')), false), Some(Action::Skip));
        assert_eq!(
            map_key(key(KeyCode::Char('e')), false),
            Some(Action::Export)
        );
        assert_eq!(
            map_key(key(KeyCode::Char('S')), false),
            Some(Action::Screenshot)
        );
        assert_eq!(
            map_key(key(KeyCode::Char('?')), false),
            Some(Action::ToggleHelp)
        );
        assert_eq!(map_key(key(KeyCode::Char('q')), false), Some(Action::Quit));
        assert_eq!(
            map_key(key(KeyCode::Char('d')), false),
            Some(Action::Detach)
        );
        assert_eq!(
            map_key(key(KeyCode::Char('X')), false),
            Some(Action::StopRun)
        );
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(map_key(ctrl_c, false), Some(Action::ForceQuit));
        assert_eq!(map_key(ctrl_c, true), Some(Action::ForceQuit));
    }

    #[test]
    fn scroll_keys() {
        for (code, d) in [
            (KeyCode::Up, -1),
            (KeyCode::Down, 1),
            (KeyCode::Char('k'), -1),
            (KeyCode::Char('j'), 1),
            (KeyCode::PageUp, -PAGE),
            (KeyCode::PageDown, PAGE),
            (KeyCode::Home, i32::MIN),
            (KeyCode::End, i32::MAX),
        ] {
            assert_eq!(
                map_key(key(code), false),
                Some(Action::Scroll(d)),
                "{code:?}"
            );
        }
        assert_eq!(map_key(key(KeyCode::Down), true), None);
    }

    #[test]
    fn quit_question_takes_only_its_answers() {
        assert_eq!(
            map_key(key(KeyCode::Char('y')), true),
            Some(Action::Confirm)
        );
        assert_eq!(
            map_key(key(KeyCode::Char('q')), true),
            Some(Action::Confirm)
        );
        assert_eq!(map_key(key(KeyCode::Char('n')), true), Some(Action::Cancel));
        assert_eq!(map_key(key(KeyCode::Esc), true), Some(Action::Cancel));
        assert_eq!(map_key(key(KeyCode::Char('p')), true), None);
        assert_eq!(map_key(key(KeyCode::Tab), true), None);
    }

    #[test]
    fn releases_are_ignored() {
        let mut k = key(KeyCode::Char('q'));
        k.kind = KeyEventKind::Release;
        assert_eq!(map_key(k, false), None);
    }
}
