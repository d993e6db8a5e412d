//! The viewer's side of the feed: the journal's lines of one run, from its live feed (a run
//! going on) or from its file (a finished run), read on a thread of their own.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

use super::journal::{self, Line};
use super::{Command, SOCKET};

/// Where a viewer reads a run from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A finished (or dead) run's journal file.
    File(PathBuf),
    /// A run going on: its `live.sock`.
    Socket(PathBuf),
    /// A run's feed on TCP (`--live-listen`, or a socket forwarded with `ssh -L`).
    Tcp(String),
}

impl Origin {
    /// The run in `dir`: its live feed when one answers, else its journal file.
    pub fn of_dir(dir: &Path) -> Result<Self, String> {
        let socket = dir.join(SOCKET);
        if UnixStream::connect(&socket).is_ok() {
            return Ok(Self::Socket(socket));
        }
        let file = dir.join(journal::FILE);
        if file.is_file() {
            return Ok(Self::File(file));
        }
        if dir.join("results.json").is_file() {
            return Err(format!(
                "{} has no {} (a run from an older servetop): `servetop report {}` redraws its charts and tables",
                dir.display(),
                journal::FILE,
                dir.display()
            ));
        }
        Err(format!("{} is not a run directory", dir.display()))
    }

    /// Whether the run is followed as it goes (not read from a file).
    pub fn live(&self) -> bool {
        !matches!(self, Self::File(_))
    }
}

/// What a reader sends: a line of the journal, or why one could not be read.
pub type Read = Result<Line, String>;

/// A run being read: its lines as they come (the channel closes at the feed's end), and where
/// to send commands (a live run on its socket only).
pub struct Attached {
    pub lines: mpsc::UnboundedReceiver<Read>,
    pub commands: Option<Commands>,
}

/// Commands to the run on its socket.
pub struct Commands(UnixStream);

impl Commands {
    /// Sends `c` to the run.
    pub fn send(&mut self, c: Command) -> Result<(), String> {
        writeln!(self.0, "{}", c.word()).map_err(|e| format!("the run did not take it: {e}"))
    }
}

/// Opens `origin` and starts reading it.
pub fn open(origin: &Origin) -> Result<Attached, String> {
    let (tx, lines) = mpsc::unbounded_channel();
    let (reader, commands): (Box<dyn std::io::Read + Send>, _) = match origin {
        Origin::File(p) => (
            Box::new(
                std::fs::File::open(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?,
            ),
            None,
        ),
        Origin::Socket(p) => {
            let s = UnixStream::connect(p)
                .map_err(|e| format!("cannot connect to {}: {e}", p.display()))?;
            let c = s
                .try_clone()
                .map_err(|e| format!("cannot use {}: {e}", p.display()))?;
            (Box::new(s), Some(Commands(c)))
        }
        Origin::Tcp(a) => (
            Box::new(
                std::net::TcpStream::connect(a)
                    .map_err(|e| format!("cannot connect to {a}: {e}"))?,
            ),
            None,
        ),
    };
    std::thread::Builder::new()
        .name("servetop-attach".into())
        .spawn(move || read_lines(reader, &tx))
        .map_err(|e| format!("cannot start reading: {e}"))?;
    Ok(Attached { lines, commands })
}

fn read_lines(reader: Box<dyn std::io::Read + Send>, tx: &mpsc::UnboundedSender<Read>) {
    let mut r = BufReader::with_capacity(256 * 1024, reader);
    let mut text = String::new();
    loop {
        text.clear();
        match r.read_line(&mut text) {
            Ok(0) => return,
            // A last line without its end is one the run was writing as it stopped.
            Ok(_) if !text.ends_with('\n') => return,
            Ok(_) => {
                if tx.send(Line::parse(text.trim_end())).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Err(format!("reading the run stopped: {e}")));
                return;
            }
        }
    }
}
