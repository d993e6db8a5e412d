//! The dashboard as a viewer (`servetop attach`): the same `App`, fed the journal's lines of a
//! run going on (its live feed) or finished (its file) instead of a runner's channel. It folds
//! them through the same session fold, with the run's own clock (each line's time since the
//! run started), and writes nothing. Leaving it never stops the run.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ratatui::crossterm::event::{Event as TermEvent, EventStream};

use super::action::map_key;
use super::app::{App, Effect, Role};
use crate::event::RunState;
use crate::live::Command;
use crate::live::journal::Entry;
use crate::live::source::{Attached, Read};
use crate::run::session::Session;

/// How a viewer ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Viewed {
    /// The run's state as last seen.
    pub state: RunState,
    /// The feed ended (the run is over, or its process is gone); else the viewer left.
    pub feed_ended: bool,
    /// A line that could not be read, if any (the first).
    pub bad_line: Option<String>,
}

/// The run's clock as the viewer knows it: the newest line's time, running on from when it
/// came.
struct Clock {
    base: Duration,
    at: Instant,
}

impl Clock {
    fn now(&self) -> Duration {
        self.base + self.at.elapsed()
    }

    fn saw(&mut self, t: Duration) {
        if t > self.now() {
            self.base = t;
            self.at = Instant::now();
        }
    }
}

/// Lines folded between two looks at the keys and the frame clock (a long journal is caught
/// up with the screen still answering).
const BATCH: usize = 4000;

/// A viewer over one attached run.
pub struct Viewer {
    attached: Attached,
    app: App,
    tokens: Arc<AtomicU64>,
    clock: Clock,
    bad_line: Option<String>,
    no_color: bool,
}

impl Viewer {
    /// Waits for the run's first line (the summary it started from) and builds the viewer.
    pub async fn open(mut attached: Attached, no_color: bool) -> Result<Self, String> {
        let first = attached
            .lines
            .recv()
            .await
            .ok_or("the run's journal is empty (it has not started its first level yet?)")??;
        let Entry::Start { start } = first.entry else {
            return Err("the run's journal does not begin with its summary".into());
        };
        let tokens = Arc::new(AtomicU64::new(0));
        let steers = attached.commands.is_some();
        let mut v = Self {
            app: App::new(Session::new(*start), tokens.clone(), no_color),
            attached,
            tokens,
            clock: Clock {
                base: Duration::from_millis(first.t_ms),
                at: Instant::now(),
            },
            bad_line: None,
            no_color,
        };
        v.app.role = Role::Viewer {
            steers,
            ended: false,
        };
        Ok(v)
    }

    /// The dashboard as it stands.
    pub fn app(&self) -> &App {
        &self.app
    }

    /// Folds one line read; `false` once the feed has ended.
    fn take(&mut self, read: Option<Read>) -> bool {
        let line = match read {
            None => {
                if let Role::Viewer { steers, .. } = self.app.role {
                    self.app.role = Role::Viewer {
                        steers,
                        ended: true,
                    };
                }
                if self.app.session.summary.state == RunState::Running {
                    // Ended without its end: killed, or its machine went down.
                    "the run stopped without saying so: its process is gone"
                        .clone_into(&mut self.app.session.phase);
                }
                return false;
            }
            Some(Err(e)) => {
                self.bad_line.get_or_insert(e);
                return true;
            }
            Some(Ok(l)) => l,
        };
        let t = Duration::from_millis(line.t_ms);
        self.clock.saw(t);
        self.app.clocked.now = t;
        match line.entry {
            Entry::Start { start } => {
                // A resumed run starts over from its saved summary.
                let (tab, role) = (self.app.ui.tab, self.app.role);
                self.app = App::new(Session::new(*start), self.tokens.clone(), self.no_color);
                self.app.ui.tab = tab;
                self.app.role = role;
                self.app.clocked.now = t;
            }
            Entry::Tokens { live_tokens } => self.tokens.store(live_tokens, Ordering::Relaxed),
            Entry::Event(ev) => self.app.apply(*ev),
        }
        true
    }

    /// Folds every line already read (a few thousand at most); `false` once the feed has ended.
    pub fn catch_up(&mut self) -> bool {
        for _ in 0..BATCH {
            match self.attached.lines.try_recv() {
                Ok(r) => {
                    if !self.take(Some(r)) {
                        return false;
                    }
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => {
                    return self.take(None);
                }
            }
        }
        self.app.end_batch();
        true
    }

    /// Folds the whole feed to its end (a finished run's file; tests).
    pub async fn read_to_end(&mut self) {
        while let Some(r) = self.attached.lines.recv().await {
            self.take(Some(r));
        }
        self.take(None);
        self.app.end_batch();
    }

    fn obey(&mut self, effect: Effect) {
        let command = match effect {
            Effect::Pause(true) => Command::Pause,
            Effect::Pause(false) => Command::Resume,
            Effect::Skip => Command::Skip,
            Effect::Cancel => Command::Stop,
            // A viewer stops a run through its question only, never twice.
            Effect::Detach | Effect::Charts | Effect::Screenshots | Effect::Hurry => return,
        };
        if let Some(Err(e)) = self.attached.commands.as_mut().map(|c| c.send(command)) {
            self.app.ui.say(e, self.app.clocked.now);
        }
    }

    /// Runs the viewer on `terminal` until the user leaves.
    pub async fn run<B: ratatui::backend::Backend<Error = std::io::Error>>(
        mut self,
        terminal: &mut ratatui::Terminal<B>,
        fps: f64,
        mut input: Option<EventStream>,
    ) -> std::io::Result<Viewed> {
        self.app.clocked.frames = super::frames::FrameRate::new(fps);
        let period = Duration::from_secs_f64(1.0 / fps.clamp(0.5, 60.0));
        let mut frames = tokio::time::interval(period);
        frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut open = true;
        while !self.app.ui.exit {
            let key = async {
                match input.as_mut() {
                    Some(i) => i.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = self.attached.lines.recv(), if open => {
                    open = self.take(r) && self.catch_up();
                }
                Some(term) = key => {
                    if term.is_err() {
                        // The viewer's terminal is gone: leave (the run goes on).
                        self.app.ui.exit = true;
                    } else if let Ok(TermEvent::Key(k)) = term
                        && let Some(action) = map_key(k, self.app.ui.confirm_quit)
                        && let Some(effect) = self.app.handle(action)
                    {
                        self.obey(effect);
                    }
                }
                _ = frames.tick() => {
                    self.app.end_batch();
                    let now = self.clock.now();
                    self.app.tick(now);
                    terminal.draw(|f| f.render_widget(&self.app, f.area()))?;
                    self.app.clocked.frames.drew(now);
                }
            }
        }
        Ok(Viewed {
            state: self.app.session.summary.state,
            feed_ended: !open,
            bad_line: self.bad_line,
        })
    }
}
