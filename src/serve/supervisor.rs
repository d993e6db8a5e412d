//! The server a run owns, behind a task of its own: the runner asks it to restart with a larger
//! context, the command asks it to stop at the end. Nothing else holds the process, so a restart
//! and a stop can never race, and the task's end (or the runtime's) takes the server with it.
//! Between asks the task watches the process: an exit nobody asked for is published, classified
//! ("server exited with code 137; last log lines: …"), for the run to fail its level on.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use super::{ManagedServer, ServerLaunch};

/// How long a server servetop started gets to stop after SIGTERM before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(15);

enum Ask {
    Restart {
        /// None: the context it had (a restart after a crash).
        context_len: Option<u64>,
        reply: oneshot::Sender<Result<ServerLaunch, String>>,
    },
    Stop {
        reply: oneshot::Sender<()>,
    },
}

/// What the run holds of the server it owns (cheap to clone).
#[derive(Clone)]
pub struct ServeHandle {
    tx: mpsc::Sender<Ask>,
    /// The contexts a restart may pick from (`--context-steps`); empty: the smallest that fits.
    pub context_steps: Vec<u64>,
    /// Restart once after a crash (`--restart-on-crash`).
    pub restart_on_crash: bool,
    /// The server's output (the run directory's server.log).
    pub log: PathBuf,
    /// Set when the server exited without being asked to: how, with the end of its log.
    crashed: watch::Receiver<Option<String>>,
}

/// How often the supervisor looks whether its server still runs.
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// What a server that exited unasked left: `server exited with code N; last log lines: …`.
fn crash_message(server: &mut ManagedServer) -> Option<String> {
    let how = server.exited()?;
    Some(format!(
        "server {how}; last log lines: {}",
        server.log_tail(5)
    ))
}

/// Hands `server` to a task of its own; `template` and `timeout` start its successors.
pub fn supervise(
    server: ManagedServer,
    template: String,
    timeout: Duration,
    context_steps: Vec<u64>,
    restart_on_crash: bool,
) -> ServeHandle {
    let (tx, mut rx) = mpsc::channel::<Ask>(4);
    let (crash_tx, crashed) = watch::channel(None);
    let log = server.log.clone();
    tokio::spawn(async move {
        let mut server = Some(server);
        // Stopped on request: its exit is no crash.
        let mut stopped = false;
        loop {
            let ask = tokio::select! {
                ask = rx.recv() => ask,
                () = tokio::time::sleep(CHECK_EVERY) => {
                    if !stopped && crash_tx.borrow().is_none()
                        && let Some(msg) = server.as_mut().and_then(crash_message)
                    {
                        tracing::warn!(%msg, "the server servetop started exited");
                        let _ = crash_tx.send(Some(msg));
                    }
                    continue;
                }
            };
            let Some(ask) = ask else { break };
            match ask {
                Ask::Restart { context_len, reply } => {
                    let r = restart(&mut server, &template, context_len, timeout).await;
                    let _ = crash_tx.send(None);
                    let _ = reply.send(r);
                }
                Ask::Stop { reply } => {
                    stopped = true;
                    if let Some(s) = server.as_mut() {
                        s.stop(GRACE).await;
                    }
                    let _ = reply.send(());
                }
            }
        }
    });
    ServeHandle {
        tx,
        context_steps,
        restart_on_crash,
        log,
        crashed,
    }
}

/// Longest wait for a stopped server's port to be free again before its successor starts.
const PORT_WAIT: Duration = Duration::from_secs(10);

/// Waits until nothing listens on `port` of the loopback (at most `limit`). The server runs
/// under `sh -c` in a group of its own: the shell is reaped at once, but the engine beneath it
/// may close its socket a moment later on a busy machine, and a successor started before that
/// fails with "Address already in use". A bind test, not the group's processes: a killed engine
/// can stay a zombie, socket long closed, where nothing reaps orphans.
async fn port_freed(port: u16, limit: Duration) {
    let until = tokio::time::Instant::now() + limit;
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_err()
        && tokio::time::Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops the server (if it still runs) and starts its successor on the same port with
/// `context_len` (or its predecessor's), waiting until it is ready.
async fn restart(
    server: &mut Option<ManagedServer>,
    template: &str,
    context_len: Option<u64>,
    timeout: Duration,
) -> Result<ServerLaunch, String> {
    let Some(old) = server.as_mut() else {
        return Err("no server to restart".into());
    };
    let (port, log): (u16, PathBuf) = (old.launch.port, old.log.clone());
    let context_len = context_len.or(old.launch.context_len);
    old.stop(GRACE).await;
    port_freed(port, PORT_WAIT).await;
    let mut next = ManagedServer::start_on(template, port, context_len, &log)?;
    let ready = next
        .wait_ready(&reqwest::Client::new(), timeout, |_| {})
        .await;
    let launch = next.launch.clone();
    *server = Some(next);
    ready.map(|_| launch)
}

impl ServeHandle {
    /// Restarts the server with `context_len` (None: the one it had); the new server's launch
    /// once it is ready.
    pub async fn restart(&self, context_len: Option<u64>) -> Result<ServerLaunch, String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Ask::Restart { context_len, reply })
            .await
            .map_err(|_| "the server's supervisor is gone".to_string())?;
        answer
            .await
            .map_err(|_| "the server's supervisor is gone".to_string())?
    }

    /// How the server exited, if it did without being asked to (since its last start).
    pub fn crashed(&self) -> Option<String> {
        self.crashed.borrow().clone()
    }

    /// Stops the server (SIGTERM to its group, SIGKILL after [`GRACE`]).
    pub async fn stop(&self) {
        let (reply, done) = oneshot::channel();
        if self.tx.send(Ask::Stop { reply }).await.is_ok() {
            let _ = done.await;
        }
    }

    /// The context a restart should pick for `need` tokens: the first `--context-steps` value
    /// that holds it, or (without steps) `need` rounded up to a multiple of 1024. None: no step
    /// is large enough.
    pub fn context_for(&self, need: u64) -> Option<u64> {
        if self.context_steps.is_empty() {
            return Some(need.div_ceil(1024) * 1024);
        }
        self.context_steps.iter().copied().find(|&c| c >= need)
    }
}
