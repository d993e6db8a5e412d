//! What a key does to the dashboard: `handle` turns an [`Action`] into changes of the
//! dashboard's own state and, where the run must hear of it, an [`Effect`] for the event loop.

use crate::tui::action::Action;
use crate::tui::tab::Tab;

use super::{App, Effect, Role};

impl App {
    fn say(&mut self, msg: String) {
        self.ui.say(msg, self.clocked.now);
    }

    /// Applies a user intent; returns what the loop must tell the runner.
    pub fn handle(&mut self, a: Action) -> Option<Effect> {
        if let Role::Viewer { steers, ended } = self.role {
            let steers = steers && !ended && !self.run_over();
            match a {
                // Leaving a viewer never stops the run.
                Action::Quit | Action::ForceQuit | Action::Detach => {
                    self.ui.exit = true;
                    return None;
                }
                Action::StopRun if steers => {
                    self.ui.confirm_quit = true;
                    return None;
                }
                Action::Confirm if self.ui.confirm_quit => {
                    self.ui.confirm_quit = false;
                    self.say(
                        "asked the run to stop: in-flight requests get their grace period".into(),
                    );
                    return Some(Effect::Cancel);
                }
                Action::TogglePause | Action::Skip | Action::StopRun if !steers => {
                    self.say(if self.run_over() || ended {
                        "the run is over".into()
                    } else {
                        "a viewer on TCP only watches: steer the run from its live.sock".into()
                    });
                    return None;
                }
                _ => {}
            }
        }
        if self.handle_levels(a) {
            return None;
        }
        match a {
            Action::NextTab => self.show_tab(self.ui.tab.next()),
            Action::PrevTab => self.show_tab(self.ui.tab.prev()),
            Action::Tab(t) => self.show_tab(t),
            Action::ToggleHelp => self.ui.show_help = !self.ui.show_help,
            Action::Scroll(d) => self.ui.scroll_by(d),
            Action::TogglePause if !self.run_over() => {
                self.ui.paused = !self.ui.paused;
                self.say(if self.ui.paused {
                    "paused: no new requests are sent; in-flight ones finish".into()
                } else {
                    "resumed".into()
                });
                return Some(Effect::Pause(self.ui.paused));
            }
            Action::Skip if self.session.current.is_some() => {
                self.say("skipping the rest of this level".into());
                return Some(Effect::Skip);
            }
            Action::Screenshot => {
                self.say("writing screenshots of every tab…".into());
                return Some(Effect::Screenshots);
            }
            Action::Export => {
                self.sink.save(&mut self.session);
                let msg = match (&self.session.io_error, self.sink.dir()) {
                    (Some(e), _) => e.clone(),
                    (None, Some(d)) => format!(
                        "wrote results.json and summary.md; charts and CSV are being drawn in {}",
                        d.display()
                    ),
                    (None, None) => "nothing to write: no run directory".into(),
                };
                self.say(msg);
                return self.sink.dir().map(|_| Effect::Charts);
            }
            Action::Quit | Action::StopRun | Action::Detach if self.run_over() => {
                self.ui.exit = true;
            }
            Action::Quit | Action::StopRun => self.ui.confirm_quit = true,
            Action::Detach => return Some(Effect::Detach),
            Action::Confirm if self.ui.confirm_quit => return Some(self.quit()),
            Action::ForceQuit => {
                if self.run_over() {
                    self.ui.exit = true;
                } else {
                    return Some(self.quit());
                }
            }
            Action::Cancel => {
                if self.ui.confirm_quit || self.ui.show_help {
                    self.ui.confirm_quit = false;
                    self.ui.show_help = false;
                } else if self.views.detail.is_some() {
                    self.views.detail = None;
                } else {
                    self.ui.selected = None;
                }
            }
            Action::TogglePause | Action::Skip | Action::Confirm | Action::Open => {}
        }
        None
    }

    /// Switches to `t`; a level picked in the tab left is let go.
    fn show_tab(&mut self, t: Tab) {
        if t != self.ui.tab {
            self.ui.selected = None;
            self.views.detail = None;
        }
        self.ui.tab = t;
    }

    /// The levels the current tab's tables list, top to bottom (none: a tab without levels).
    pub fn tab_levels(&self) -> Vec<u32> {
        let s = &self.session.summary;
        let levels: Vec<&crate::summary::LevelSummary> = match self.ui.tab {
            Tab::Sweep => s.sweep.iter().chain(&s.rates).chain(&s.traces).collect(),
            Tab::LongContext => s.long_context.iter().chain(&s.multi_turn).collect(),
            Tab::Telemetry | Tab::Log | Tab::Findings => Vec::new(),
        };
        levels.iter().map(|l| l.index).collect()
    }

    /// ↑↓ and Enter in a tab with level tables pick a level and open its details; whether
    /// `a` was such a key here.
    fn handle_levels(&mut self, a: Action) -> bool {
        let levels = self.tab_levels();
        if levels.is_empty() || self.ui.show_help || self.ui.confirm_quit {
            return false;
        }
        match a {
            Action::Scroll(d) => {
                let at = |i: u32| levels.iter().position(|&x| x == i).map(|p| p as i64);
                let picked = self
                    .ui
                    .selected
                    .or(self.views.detail.as_ref().map(|v| v.index))
                    .and_then(at);
                let last = levels.len() as i64 - 1;
                let to = match (picked, self.session.current.and_then(at)) {
                    (Some(p), _) => p.saturating_add(i64::from(d)).clamp(0, last),
                    // The first press picks the level running.
                    (None, Some(running)) => running,
                    (None, None) if d > 0 => 0,
                    (None, None) => last,
                };
                self.ui.selected = Some(levels[to as usize]);
                if self.views.detail.is_some() {
                    self.refresh_detail();
                }
            }
            Action::Open => {
                if self.ui.selected.is_none() {
                    self.ui.selected = self
                        .session
                        .current
                        .filter(|c| levels.contains(c))
                        .or(levels.last().copied());
                }
                self.refresh_detail();
            }
            _ => return false,
        }
        true
    }

    fn quit(&mut self) -> Effect {
        self.ui.confirm_quit = false;
        if self.ui.quitting {
            // Asked again while stopping: no more grace.
            self.say(
                "stopping now: in-flight requests are cancelled, then results are saved".into(),
            );
            return Effect::Hurry;
        }
        self.ui.quitting = true;
        self.say(
            "stopping: in-flight requests get their grace period, then results are saved (Ctrl-C again: stop now)"
                .into(),
        );
        Effect::Cancel
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::app;
    use super::*;
    use crate::event::{Event, RunState};

    #[test]
    fn tabs_cycle_both_ways() {
        let mut a = app();
        assert_eq!(a.ui.tab, Tab::Sweep);
        a.handle(Action::PrevTab);
        assert_eq!(a.ui.tab, Tab::Findings);
        a.handle(Action::PrevTab);
        assert_eq!(a.ui.tab, Tab::Log);
        a.handle(Action::NextTab);
        a.handle(Action::NextTab);
        a.handle(Action::NextTab);
        assert_eq!(a.ui.tab, Tab::LongContext);
        a.handle(Action::Tab(Tab::Telemetry));
        assert_eq!(a.ui.tab, Tab::Telemetry);
    }

    #[test]
    fn quit_needs_confirmation_while_running() {
        let mut a = app();
        assert_eq!(a.handle(Action::Quit), None);
        assert!(a.ui.confirm_quit && !a.ui.quitting);
        assert_eq!(a.handle(Action::Cancel), None);
        assert!(!a.ui.confirm_quit);
        a.handle(Action::Quit);
        assert_eq!(a.handle(Action::Confirm), Some(Effect::Cancel));
        assert!(a.ui.quitting && !a.ui.exit);
        // The loop exits once the runner reports the end.
        a.apply(Event::RunFinished {
            state: RunState::Interrupted,
            error: None,
        });
        assert!(a.ui.exit);
    }

    #[test]
    fn quit_after_the_run_needs_no_confirmation() {
        let mut a = app();
        a.apply(Event::RunFinished {
            state: RunState::Finished,
            error: None,
        });
        a.handle(Action::Quit);
        assert!(a.ui.exit);
    }

    #[test]
    fn pause_toggles_and_skip_needs_a_level() {
        let mut a = app();
        assert_eq!(a.handle(Action::TogglePause), Some(Effect::Pause(true)));
        assert_eq!(a.handle(Action::TogglePause), Some(Effect::Pause(false)));
        assert_eq!(a.handle(Action::Skip), None);
        a.session.current = Some(0);
        assert_eq!(a.handle(Action::Skip), Some(Effect::Skip));
    }
}
