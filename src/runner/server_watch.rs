//! A server that stopped accepting connections, watched for and waited for; records handed
//! on to the session.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::event::{Event, EventTx};
use crate::metrics::{FailureKind, Outcome};

/// Sends a finished request's record on. After a failure to connect, holds the caller until the
/// server accepts connections again, or stops the level when it does not come back in time.
pub(super) async fn deliver(
    rec: crate::metrics::RequestRecord,
    tx: &EventTx,
    watch: &ServerWatch,
    stop: &AtomicBool,
    cancel: &CancellationToken,
) {
    let connect = match &rec.outcome {
        Outcome::Failed {
            kind: FailureKind::Connect,
            message,
            ..
        } => Some((message.clone(), rec.end_at_us)),
        _ => None,
    };
    let _ = tx.send(Event::Request(Box::new(rec)));
    if let Some((why, failed_at_us)) = connect
        && !watch.wait_for_server(&why, failed_at_us).await
    {
        stop.store(true, Ordering::Relaxed);
        cancel.cancel();
    }
}

/// Watches for a server that stopped accepting connections: one worker probes (a TCP connect,
/// engine-agnostic), the others wait behind it, and the wait is bounded. Each outage it waits
/// out is sent as an [`Event::Outage`] of its level.
pub(super) struct ServerWatch {
    /// The level watched, and its origin (the outage's times count from it).
    pub(super) level: u32,
    pub(super) origin: Instant,
    pub(super) addr: String,
    pub(super) url: String,
    pub(super) wait: Duration,
    pub(super) tx: EventTx,
    pub(super) probe: tokio::sync::Mutex<()>,
    pub(super) gone: AtomicBool,
    /// The server is unreachable and being waited for (an open-loop level holds meanwhile).
    pub(super) down: AtomicBool,
    /// The server servetop started, if it did: when that process has exited, waiting for it
    /// is pointless and the level ends at once, with how it exited.
    pub(super) serve: Option<crate::serve::ServeHandle>,
    /// How the owned server exited, once the watch has seen it.
    pub(super) crash: std::sync::Mutex<Option<String>>,
}

impl ServerWatch {
    pub(super) fn new(
        level: u32,
        origin: Instant,
        base_url: &str,
        wait: Duration,
        tx: EventTx,
        serve: Option<crate::serve::ServeHandle>,
    ) -> Self {
        let addr = reqwest::Url::parse(base_url)
            .ok()
            .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
            .unwrap_or_default();
        Self {
            level,
            origin,
            addr,
            url: base_url.to_string(),
            wait,
            tx,
            probe: tokio::sync::Mutex::new(()),
            gone: AtomicBool::new(false),
            down: AtomicBool::new(false),
            serve,
            crash: std::sync::Mutex::new(None),
        }
    }

    /// Whether the server servetop started has exited (noted, and the watch marked gone).
    fn crashed(&self) -> bool {
        let Some(msg) = self
            .serve
            .as_ref()
            .and_then(crate::serve::ServeHandle::crashed)
        else {
            return false;
        };
        if let Ok(mut c) = self.crash.lock() {
            c.get_or_insert(msg);
        }
        self.gone.store(true, Ordering::Relaxed);
        true
    }

    /// How the owned server exited, if the watch saw it exit.
    pub(super) fn crash(&self) -> Option<String> {
        self.crash.lock().ok()?.clone()
    }

    pub(super) async fn reachable(&self) -> bool {
        matches!(
            tokio::time::timeout(
                Duration::from_secs(2),
                tokio::net::TcpStream::connect(&self.addr)
            )
            .await,
            Ok(Ok(_))
        )
    }

    /// `true` once the server accepts connections again; `false` if it stays away too long.
    /// `failed_at_us`: the end of the request that failed to connect, from the level's origin
    /// (where the outage starts, if the server is found unreachable).
    pub(super) async fn wait_for_server(&self, why: &str, failed_at_us: u64) -> bool {
        let _one_prober = self.probe.lock().await;
        if self.gone.load(Ordering::Relaxed) || self.crashed() {
            return false;
        }
        if self.reachable().await {
            return true;
        }
        self.down.store(true, Ordering::Relaxed);
        let back = self.wait_down(why).await;
        // Over, one way or the other: the server is back, or the level ends now.
        let to_us = u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX);
        let _ = self.tx.send(Event::Outage {
            level: self.level,
            from_us: failed_at_us.min(to_us),
            to_us,
        });
        self.down.store(false, Ordering::Relaxed);
        back
    }

    /// The countdown of [`ServerWatch::wait_for_server`] once the server did not answer.
    pub(super) async fn wait_down(&self, why: &str) -> bool {
        let _ = self.tx.send(Event::Warning(format!(
            "the server at {} stopped accepting connections ({why}); waiting up to {:.0} s for it to come back",
            self.url,
            self.wait.as_secs_f64()
        )));
        let start = Instant::now();
        loop {
            let left = self.wait.saturating_sub(start.elapsed());
            if self.crashed() {
                return false;
            }
            if left.is_zero() {
                self.gone.store(true, Ordering::Relaxed);
                return false;
            }
            let _ = self.tx.send(Event::Phase(format!(
                "server unreachable: waiting {:.0} s more for it to come back",
                left.as_secs_f64()
            )));
            tokio::time::sleep(Duration::from_secs(1).min(left)).await;
            if self.reachable().await {
                let _ = self.tx.send(Event::Warning(format!(
                    "the server at {} came back after {:.1} s; the run goes on",
                    self.url,
                    start.elapsed().as_secs_f64()
                )));
                return true;
            }
        }
    }
}
