//! The live feed: how a viewer (`servetop attach`) follows a run going on in another process.
//!
//! The run serves its journal (`events.jsonl`, see [`journal`]) on a Unix socket
//! named [`SOCKET`] in its run directory, and with `--live-listen ADDR` on TCP too. Each
//! viewer gets the journal from its first line, then every line as it is written: it catches
//! up from the run directory and follows the run through one stream, and folds it with the
//! same session fold the run uses.
//!
//! **Never in the run's way.** The feed reads the journal file the run has already written;
//! the run never hands a viewer anything, never waits for one and keeps no buffer for one. Each
//! viewer has a thread of its own at the follower's low priority, a fixed read buffer, and the
//! socket's send buffer: a viewer that stops reading stops only its own thread, which resumes
//! where it was when the viewer reads again (drop nothing, resync from the file).
//!
//! **Local by default.** The socket is created in a private directory, made readable and
//! writable by its owner only, then moved into the run directory, and every connection's peer
//! must be the run's user (`SO_PEERCRED`). Only a viewer on the socket may send commands
//! (stop, pause, resume, skip); a TCP viewer only reads. The journal holds no API key and masks
//! the server command's credentials.

pub mod journal;
pub mod registry;
pub mod source;

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::runner::Control;

/// The live feed's socket in the run directory.
pub const SOCKET: &str = "live.sock";

/// How often a feed thread looks for new journal lines (and the listeners for connections).
const POLL: Duration = Duration::from_millis(50);

/// How long the end of a run waits for its viewers to be sent the journal's last lines.
const LAST_LINES: Duration = Duration::from_secs(3);

/// The feed threads' nice value: the follower's (they never take the core from the streams).
const NICE: i32 = 10;

/// What a viewer on the socket may ask of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Stop the run (as a confirmed quit in its own dashboard).
    Stop,
    Pause,
    Resume,
    /// Skip the rest of the level in progress.
    Skip,
}

impl Command {
    /// The command's line on the socket.
    pub fn word(self) -> &'static str {
        match self {
            Command::Stop => "stop",
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::Skip => "skip",
        }
    }

    /// The command a line names.
    pub fn parse(line: &str) -> Option<Self> {
        [Self::Stop, Self::Pause, Self::Resume, Self::Skip]
            .into_iter()
            .find(|c| c.word() == line.trim())
    }
}

/// Where a viewer's commands go: the run's pause/skip control and its cancel token.
#[derive(Clone)]
pub struct Remote {
    pub control: Arc<watch::Sender<Control>>,
    pub cancel: CancellationToken,
}

impl Remote {
    fn obey(&self, c: Command) {
        match c {
            Command::Stop => self.cancel.cancel(),
            Command::Pause => self.control.send_modify(|c| c.paused = true),
            Command::Resume => self.control.send_modify(|c| c.paused = false),
            Command::Skip => self.control.send_modify(|c| c.skip += 1),
        }
    }
}

struct Shared {
    journal: PathBuf,
    /// The run has written its last line: feeds send to the end and close.
    done: AtomicBool,
    /// Feeds still sending.
    active: AtomicUsize,
    remote: Mutex<Steering>,
}

/// Who obeys the viewers' commands: nobody yet — the run is still getting ready, and what
/// viewers ask waits, in order — then the run.
enum Steering {
    Waiting(Vec<Command>),
    To(Remote),
}

/// A run's live feed, serving until it is dropped (after the run's last save): then every
/// viewer is sent the journal's last lines (for up to a few seconds) and the socket goes.
pub struct Feed {
    shared: Arc<Shared>,
    socket: PathBuf,
    tcp: Option<std::net::SocketAddr>,
    /// Its place among the runs going on (`servetop attach --list`); none when the runtime
    /// directory could not be written (the feed works; a bare `attach` does not find it).
    _registered: Option<registry::Registered>,
}

impl Feed {
    /// Serves the journal of the run in `dir` on `dir/live.sock`, and on TCP at `tcp` when
    /// given (`HOST:PORT`, or a port on loopback).
    pub fn start(dir: &Path, tcp: Option<&str>) -> Result<Self, String> {
        let socket = dir.join(SOCKET);
        if UnixStream::connect(&socket).is_ok() {
            return Err(format!(
                "a run in {} is still going on (its {SOCKET} answers)",
                dir.display()
            ));
        }
        let shared = Arc::new(Shared {
            journal: dir.join(crate::live::journal::FILE),
            done: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            remote: Mutex::new(Steering::Waiting(Vec::new())),
        });
        // Listed before anyone can connect: a viewer that reaches the socket finds the run in
        // `attach --list` too (registered after, a loaded machine showed the gap).
        let registered = registry::register(dir).ok();
        let listener = bind_private(dir, &socket)?;
        let tcp_listener = tcp.map(listen_tcp).transpose()?;
        let tcp_addr = tcp_listener.as_ref().and_then(|l| l.local_addr().ok());
        let s = shared.clone();
        std::thread::Builder::new()
            .name("servetop-live".into())
            .spawn(move || accept_loop(&listener, tcp_listener.as_ref(), &s))
            .map_err(|e| format!("cannot start the live feed: {e}"))?;
        Ok(Self {
            shared,
            socket,
            tcp: tcp_addr,
            _registered: registered,
        })
    }

    /// The TCP address the feed listens on (`--live-listen`), once bound.
    pub fn tcp_addr(&self) -> Option<std::net::SocketAddr> {
        self.tcp
    }

    /// The socket's path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// From now on, commands from viewers on the socket go to `remote`; those that came before
    /// (a `stop` sent as soon as the socket appeared) go to it now.
    pub fn obey(&self, remote: Remote) {
        if let Ok(mut r) = self.shared.remote.lock()
            && let Steering::Waiting(early) = std::mem::replace(&mut *r, Steering::To(remote))
            && let Steering::To(remote) = &*r
        {
            for c in early {
                remote.obey(c);
            }
        }
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        // New viewers read the file itself from now on.
        let _ = std::fs::remove_file(&self.socket);
        self.shared.done.store(true, Ordering::SeqCst);
        let until = Instant::now() + LAST_LINES;
        while self.shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < until {
            std::thread::sleep(POLL);
        }
    }
}

/// Binds the socket in a directory only this user can enter, makes it owner-only, then moves
/// it to `socket`: nobody can connect in between.
fn bind_private(dir: &Path, socket: &Path) -> Result<UnixListener, String> {
    use std::os::unix::fs::DirBuilderExt;
    let private = dir.join(format!(".live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    let fail = |e: std::io::Error| format!("cannot create the live feed {}: {e}", socket.display());
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(fail)?;
    let inner = private.join(SOCKET);
    let bound = UnixListener::bind(&inner)
        .and_then(|l| {
            std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&inner, socket)?;
            Ok(l)
        })
        .map_err(fail);
    let _ = std::fs::remove_dir_all(&private);
    let l = bound?;
    l.set_nonblocking(true).map_err(fail)?;
    Ok(l)
}

fn listen_tcp(addr: &str) -> Result<std::net::TcpListener, String> {
    let full = if addr.contains(':') {
        addr.to_string()
    } else {
        format!("127.0.0.1:{addr}")
    };
    let l = std::net::TcpListener::bind(&full)
        .map_err(|e| format!("--live-listen {addr}: cannot listen there: {e}"))?;
    l.set_nonblocking(true)
        .map_err(|e| format!("--live-listen {addr}: {e}"))?;
    Ok(l)
}

fn lower_priority() {
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE);
}

/// Whether the peer on `s` is this process's user.
fn same_user(s: &UnixStream) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    getsockopt(s, PeerCredentials).is_ok_and(|c| c.uid() == rustix::process::getuid().as_raw())
}

fn accept_loop(unix: &UnixListener, tcp: Option<&std::net::TcpListener>, shared: &Arc<Shared>) {
    lower_priority();
    while !shared.done.load(Ordering::SeqCst) {
        let mut idle = true;
        if let Ok((s, _)) = unix.accept() {
            idle = false;
            if same_user(&s)
                && s.set_nonblocking(false).is_ok()
                && let (Ok(commands), Ok(closer)) = (s.try_clone(), s.try_clone())
            {
                spawn_commands(commands, shared.clone());
                // The commands' reader holds the socket open: the feed's end shuts it.
                spawn_feed(s, shared, move || {
                    let _ = closer.shutdown(std::net::Shutdown::Both);
                });
            }
        }
        if let Some(Ok((s, _))) = tcp.map(std::net::TcpListener::accept) {
            idle = false;
            if s.set_nonblocking(false).is_ok() {
                spawn_feed(s, shared, || {});
            }
        }
        if idle {
            std::thread::sleep(POLL);
        }
    }
}

/// Feeds `out` on a thread of its own; `close` runs when it is done.
fn spawn_feed<W: Write + Send + 'static>(
    out: W,
    shared: &Arc<Shared>,
    close: impl FnOnce() + Send + 'static,
) {
    shared.active.fetch_add(1, Ordering::SeqCst);
    let s = shared.clone();
    let spawned = std::thread::Builder::new()
        .name("servetop-feed".into())
        .spawn(move || {
            lower_priority();
            let _ = feed(out, &s);
            close();
            s.active.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        shared.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Sends the journal's complete lines to `out` from its first, following it until the run is
/// done and every line is sent.
fn feed(mut out: impl Write, shared: &Shared) -> std::io::Result<()> {
    let mut file = loop {
        let done = shared.done.load(Ordering::SeqCst);
        match std::fs::File::open(&shared.journal) {
            Ok(f) => break f,
            Err(e) if done => return Err(e),
            Err(_) => std::thread::sleep(POLL),
        }
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        // Read after looking: a run done before this read has all its lines in the file.
        let done = shared.done.load(Ordering::SeqCst);
        let n = file.read(&mut buf)?;
        if n == 0 {
            if done {
                return out.flush();
            }
            out.flush()?;
            std::thread::sleep(POLL);
            continue;
        }
        pending.extend_from_slice(&buf[..n]);
        if let Some(end) = memchr::memrchr(b'\n', &pending) {
            out.write_all(&pending[..=end])?;
            pending.drain(..=end);
        }
    }
}

fn spawn_commands(s: UnixStream, shared: Arc<Shared>) {
    let _ = std::thread::Builder::new()
        .name("servetop-commands".into())
        .spawn(move || {
            lower_priority();
            for line in BufReader::new(s).lines() {
                let Ok(line) = line else { return };
                let Some(c) = Command::parse(&line) else {
                    continue;
                };
                if let Ok(mut r) = shared.remote.lock() {
                    match &mut *r {
                        Steering::Waiting(early) => early.push(c),
                        Steering::To(remote) => remote.obey(c),
                    }
                }
            }
        });
}

#[cfg(test)]
mod tests;
