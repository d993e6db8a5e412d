//! The run's journal, `events.jsonl` in the run directory: every event the run folded, in
//! order, one JSON object a line, so a viewer (`servetop attach`) folds exactly what the run
//! folded, through the same `Session` as the run — from the file for a finished run, from the
//! live feed (which serves this file) for one going on. The run's sink writes it; it lives here,
//! beside the feed and the reader that serve and read it.
//!
//! A line is a [`Line`]: the time since the run started and an [`Entry`]: the summary the run
//! started from (first, and again where a resumed run starts), an event, or the client's
//! running token count (the dashboard's live rate, written as the files are flushed).
//!
//! Secrets stay out: the server command's credentials (`--api-key X`, `HF_TOKEN=X`, …) are
//! masked in every line written ([`crate::summary::redact::redact_command`]); the API key itself is never in an event.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::event::Event;
use crate::summary::RunSummary;
use crate::summary::redact::{redact_command, redact_summary};

/// The journal's file name in the run directory.
pub const FILE: &str = "events.jsonl";

/// What a journal line holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry {
    /// The summary a run starts from: a new one, or the saved one of a resumed run (a viewer
    /// starts its fold over from it).
    Start { start: Box<RunSummary> },
    /// Output tokens the client has read so far in this process (the live token rate).
    Tokens { live_tokens: u64 },
    /// One event, as the run folded it.
    Event(Box<Event>),
}

/// One journal line: milliseconds since the run (this process) started, and what happened.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Line {
    pub t_ms: u64,
    #[serde(flatten)]
    pub entry: Entry,
}

impl Line {
    /// Parses one line of the journal.
    pub fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| format!("not a journal line: {e}"))
    }
}

/// Appends the journal of one run (buffered; flushed with the run's other files).
pub struct Journal {
    out: BufWriter<File>,
    since: Instant,
    /// The token count last written (a count unchanged is not written again).
    tokens: u64,
}

impl Journal {
    /// Opens `dir/events.jsonl` for appending (a resumed run continues its journal).
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(FILE))?;
        Ok(Self {
            out: BufWriter::new(f),
            since: Instant::now(),
            tokens: 0,
        })
    }

    fn write(&mut self, entry: &Entry) -> std::io::Result<()> {
        let t_ms = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        let line = Line {
            t_ms,
            entry: entry.clone(),
        };
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }

    /// The summary the run starts from, its secrets masked.
    pub fn start(&mut self, summary: &RunSummary) -> std::io::Result<()> {
        let mut s = summary.clone();
        redact_summary(&mut s);
        self.write(&Entry::Start { start: Box::new(s) })
    }

    /// One event, its secrets masked.
    pub fn event(&mut self, ev: &Event) -> std::io::Result<()> {
        if let Event::ServerStarted { launch, .. } = ev {
            let mut ev = ev.clone();
            if let Event::ServerStarted { launch: l, .. } = &mut ev {
                l.command = redact_command(&launch.command);
            }
            return self.write(&Entry::Event(Box::new(ev)));
        }
        // Written from a borrowed event: no clone of a request's record.
        let t_ms = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        #[derive(Serialize)]
        struct Borrowed<'a> {
            t_ms: u64,
            #[serde(flatten)]
            event: &'a Event,
        }
        serde_json::to_writer(&mut self.out, &Borrowed { t_ms, event: ev })?;
        self.out.write_all(b"\n")
    }

    /// The client's token count, when it moved since the last one written.
    pub fn tokens(&mut self, n: u64) -> std::io::Result<()> {
        if n == self.tokens {
            return Ok(());
        }
        self.tokens = n;
        self.write(&Entry::Tokens { live_tokens: n })
    }

    /// Pushes the buffered lines to the file.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_written() {
        let dir = std::env::temp_dir().join(format!("servetop-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut j = Journal::open(&dir).unwrap();
        j.event(&Event::Phase("warming up".into())).unwrap();
        j.tokens(42).unwrap();
        j.tokens(42).unwrap();
        j.flush().unwrap();
        let text = std::fs::read_to_string(dir.join(FILE)).unwrap();
        let lines: Vec<Line> = text.lines().map(|l| Line::parse(l).unwrap()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            matches!(&lines[0].entry, Entry::Event(e) if matches!(&**e, Event::Phase(p) if p == "warming up"))
        );
        assert!(matches!(lines[1].entry, Entry::Tokens { live_tokens: 42 }));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
