//! The run directory's side of a run: what the [`Session`] fold hands back as a [`Persist`] goes
//! to disk here, and a failed write goes back into the session as data (a warning; the run
//! goes on). The fold never touches a file; this never computes a number.

use std::path::Path;

use crate::event::Event;
use crate::export::RunFiles;

use super::session::{Persist, Session};

/// Where a run's files go: a run directory, or nowhere (tests, `report`'s rebuilt dashboard).
pub struct Sink {
    files: Option<RunFiles>,
}

impl Sink {
    /// A sink writing into `files` (None: in memory only).
    pub fn new(files: Option<RunFiles>) -> Self {
        Self { files }
    }

    /// A sink that writes nothing.
    pub fn none() -> Self {
        Self { files: None }
    }

    /// The run directory, if writing.
    pub fn dir(&self) -> Option<&Path> {
        self.files.as_ref().map(RunFiles::dir)
    }

    /// Folds `ev` into `session`, then writes what the fold changed.
    pub fn apply(&mut self, session: &mut Session, ev: Event) {
        let w = session.apply(ev);
        self.write(session, &w);
    }

    /// Rewrites results.json and summary.md now.
    pub fn save(&mut self, session: &mut Session) {
        let w = session.stamp();
        self.write(session, &w);
    }

    /// Pushes buffered request and telemetry lines to disk (the loops call it a few times a
    /// second; saving the summary flushes first, so results.json never counts a request the
    /// file lacks).
    pub fn flush(&mut self, session: &mut Session) {
        if let Some(f) = self.files.as_mut()
            && let Err(e) = f.flush()
        {
            session.io_failed(&e);
        }
        if let Some(page) = self.files.as_ref().and_then(RunFiles::metrics_page) {
            let text = crate::export::prometheus::render(&session.prometheus());
            if let Ok(mut p) = page.lock() {
                *p = text;
            }
        }
    }

    fn write(&mut self, session: &mut Session, w: &Persist) {
        let Some(f) = self.files.as_mut() else {
            return;
        };
        let r = match w {
            Persist::Nothing => Ok(()),
            Persist::Summary => f.write_summary(&session.summary),
            Persist::Request(r) => f.append(r),
            Persist::Telemetry(t) => f.append_telemetry(t),
        };
        if let Err(e) = r {
            session.io_failed(&e);
        }
    }
}
