//! The run directory's side of a run: what the [`Session`] fold hands back as a [`Persist`] goes
//! to disk here, and a failed write goes back into the session as data (a warning; the run
//! goes on). The fold never touches a file; this never computes a number. Every event is
//! journalled (`events.jsonl`) before it is folded, so a viewer can fold the same.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::event::Event;
use crate::export::RunFiles;
use crate::live::Feed;

use super::metrics_page::Page;

use super::session::{Persist, Session};
use crate::live::journal::Journal;

/// Where a run's files go: a run directory, or nowhere (tests, `report`'s rebuilt dashboard);
/// and what is served from them while the run goes.
pub struct Sink {
    files: Option<RunFiles>,
    /// servetop's own Prometheus page (`--metrics-listen`), rewritten as the files are flushed.
    page: Option<Page>,
    /// The run's live feed (`live.sock`), served while the sink lives: dropped after the run's
    /// last save, it sends viewers the journal's last lines and goes.
    feed: Option<Feed>,
    /// The journal; `None` until the first event (its first line is the summary the run
    /// started from), and when not writing.
    journal: Option<Journal>,
    /// The client's running token count, journalled at each flush.
    tokens: Option<Arc<AtomicU64>>,
}

impl Sink {
    /// A sink writing into `files` (None: in memory only).
    pub fn new(files: Option<RunFiles>) -> Self {
        Self {
            files,
            page: None,
            feed: None,
            journal: None,
            tokens: None,
        }
    }

    /// A sink that writes nothing.
    pub fn none() -> Self {
        Self::new(None)
    }

    /// Also journals `tokens`, the client's running output-token count, at each flush.
    #[must_use]
    pub fn with_tokens(mut self, tokens: Arc<AtomicU64>) -> Self {
        self.tokens = Some(tokens);
        self
    }

    /// Also keeps `page` (served at `/metrics` with `--metrics-listen`) up to date.
    #[must_use]
    pub fn with_metrics_page(mut self, page: Page) -> Self {
        self.page = Some(page);
        self
    }

    /// Also serves the run's live feed while the sink lives.
    #[must_use]
    pub fn with_live(mut self, feed: Feed) -> Self {
        self.feed = Some(feed);
        self
    }

    /// The run's live feed, if one is served.
    pub fn feed(&self) -> Option<&Feed> {
        self.feed.as_ref()
    }

    /// Journals `ev` (opening the journal with the session's starting summary first).
    fn journal(&mut self, session: &mut Session, ev: &Event) {
        let Some(dir) = self.dir().map(Path::to_path_buf) else {
            return;
        };
        if self.journal.is_none() {
            let opened = Journal::open(&dir).and_then(|mut j| {
                j.start(&session.summary)?;
                Ok(j)
            });
            match opened {
                Ok(j) => self.journal = Some(j),
                Err(e) => {
                    session.io_failed(&e);
                    return;
                }
            }
        }
        if let Some(Err(e)) = self.journal.as_mut().map(|j| j.event(ev)) {
            session.io_failed(&e);
        }
    }

    /// The run directory, if writing.
    pub fn dir(&self) -> Option<&Path> {
        self.files.as_ref().map(RunFiles::dir)
    }

    /// Folds `ev` into `session`, then writes what the fold changed.
    pub fn apply(&mut self, session: &mut Session, ev: Event) {
        self.journal(session, &ev);
        let w = session.apply(ev);
        self.write(session, &w);
    }

    /// Rewrites results.json and summary.md now.
    pub fn save(&mut self, session: &mut Session) {
        let w = session.stamp();
        self.write(session, &w);
        if let Some(Err(e)) = self.journal.as_mut().map(Journal::flush) {
            session.io_failed(&e);
        }
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
        if let Some(j) = self.journal.as_mut() {
            let n = self.tokens.as_ref().map(|t| t.load(Ordering::Relaxed));
            let r = n.map_or(Ok(()), |n| j.tokens(n)).and_then(|()| j.flush());
            if let Err(e) = r {
                session.io_failed(&e);
            }
        }
        if let Some(page) = &self.page {
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
