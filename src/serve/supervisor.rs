//! The server a run owns, behind a task of its own: the runner asks it to restart with a larger
//! context, the command asks it to stop at the end. Nothing else holds the process, so a restart
//! and a stop can never race, and the task's end (or the runtime's) takes the server with it.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::{ManagedServer, ServerLaunch};

/// How long a server servetop started gets to stop after SIGTERM before SIGKILL.
pub const GRACE: Duration = Duration::from_secs(15);

enum Ask {
    Restart {
        context_len: u64,
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
}

/// Hands `server` to a task of its own; `template` and `timeout` start its successors.
pub fn supervise(
    server: ManagedServer,
    template: String,
    timeout: Duration,
    context_steps: Vec<u64>,
) -> ServeHandle {
    let (tx, mut rx) = mpsc::channel::<Ask>(4);
    tokio::spawn(async move {
        let mut server = Some(server);
        while let Some(ask) = rx.recv().await {
            match ask {
                Ask::Restart { context_len, reply } => {
                    let r = restart(&mut server, &template, context_len, timeout).await;
                    let _ = reply.send(r);
                }
                Ask::Stop { reply } => {
                    if let Some(s) = server.as_mut() {
                        s.stop(GRACE).await;
                    }
                    let _ = reply.send(());
                }
            }
        }
    });
    ServeHandle { tx, context_steps }
}

/// Stops the server and starts its successor on the same port with `context_len`, waiting
/// until it is ready.
async fn restart(
    server: &mut Option<ManagedServer>,
    template: &str,
    context_len: u64,
    timeout: Duration,
) -> Result<ServerLaunch, String> {
    let Some(old) = server.as_mut() else {
        return Err("no server to restart".into());
    };
    let (port, log): (u16, PathBuf) = (old.launch.port, old.log.clone());
    old.stop(GRACE).await;
    let mut next = ManagedServer::start_on(template, port, Some(context_len), &log)?;
    let ready = next
        .wait_ready(&reqwest::Client::new(), timeout, |_| {})
        .await;
    let launch = next.launch.clone();
    *server = Some(next);
    ready.map(|_| launch)
}

impl ServeHandle {
    /// Restarts the server with `context_len`; the new server's launch once it is ready.
    pub async fn restart(&self, context_len: u64) -> Result<ServerLaunch, String> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Ask::Restart { context_len, reply })
            .await
            .map_err(|_| "the server's supervisor is gone".to_string())?;
        answer
            .await
            .map_err(|_| "the server's supervisor is gone".to_string())?
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
