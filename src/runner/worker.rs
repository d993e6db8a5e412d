//! Closed-loop workers: each takes the level's next prepared request, sends it, records it,
//! and sends the next. The requests are built in [`crate::workload::requests`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::client::{self, Client, RequestSpec, RequestTag};
use crate::event::{Event, EventTx};
use crate::metrics::{FailureKind, Outcome};
use crate::workload::LevelSpec;

use super::{Control, ServerWatch, deliver};

/// Prompts prepared before a level starts at least, where it has that many (or twice the
/// concurrency, if more).
pub(super) const PROMPTS_AHEAD: u32 = 1024;
/// Prompt text prepared before a level starts at most, estimated at [`BYTES_PER_TOKEN`]: short
/// prompts are all made before the level, so none is sized (a `/tokenize` call each) while
/// the streams are read (measured: at a thousand streams of 32-token prompts, sizing them
/// during the level took a fifth of the client's core).
pub(super) const PROMPT_BYTES_AHEAD: u64 = 64 << 20;
/// A prepared prompt's bytes per token: its text and what else it holds.
pub(super) const BYTES_PER_TOKEN: u64 = 8;

/// A level's prepared jobs, in order, shared by its workers: each clone takes the next job
/// without a lock.
pub(super) type Queue = async_channel::Receiver<crate::workload::requests::Job>;

/// What a level's lanes share, borrowed while its workers are spawned.
pub(super) struct LaneCtx<'a> {
    pub(super) queue: &'a Queue,
    pub(super) stop: &'a Arc<AtomicBool>,
    pub(super) watch: &'a Arc<ServerWatch>,
    pub(super) origin: Instant,
    pub(super) cancel: &'a CancellationToken,
    /// A time-bounded level sends nothing from here on.
    pub(super) send_until: Option<Instant>,
}

/// Connections to open before a level starts: its concurrency, or an open-loop level's
/// second's worth of arrivals (at most its cap); never more than its requests.
pub(super) fn prewarm_connections(spec: &LevelSpec) -> u32 {
    let n = match super::open_loop_rate(spec) {
        Some(rate) => (rate.ceil().min(f64::from(u32::MAX)) as u32)
            .max(1)
            .min(spec.max_in_flight().unwrap_or(u32::MAX)),
        None if spec.is_open_loop() => 1,
        None => spec.concurrency,
    };
    n.min(spec.requests)
}

/// What each closed-loop worker of a level holds: its slot, the client, the level's queue and
/// channel, and what stops or pauses it.
pub(super) struct Lane {
    /// Which of the level's workers this is (stamped on its records).
    pub(super) slot: u32,
    /// The level's one client, shared: a clone of it is a few hundred bytes and a dozen
    /// strings, once a stream at C=10,000.
    pub(super) client: Arc<Client>,
    pub(super) queue: Queue,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) watch: Arc<ServerWatch>,
    pub(super) level: u32,
    pub(super) origin: Instant,
    pub(super) tx: EventTx,
    pub(super) cancel: CancellationToken,
    pub(super) control: watch::Receiver<Control>,
    pub(super) grace: Duration,
    /// A time-bounded level sends nothing from here on.
    pub(super) send_until: Option<Instant>,
}

impl Lane {
    /// The level was cancelled or stopped, or its time is up: send nothing more.
    pub(super) fn halted(&self) -> bool {
        self.cancel.is_cancelled()
            || self.stop.load(Ordering::Relaxed)
            || self.send_until.is_some_and(|t| Instant::now() >= t)
    }

    /// The level's next job, unless the level is cancelled or its time is up first (a
    /// time-bounded level's prompts are made while it runs, so a worker can wait here).
    pub(super) async fn next_job(&self) -> Option<crate::workload::requests::Job> {
        let until = self.send_until;
        let job = tokio::select! {
            j = self.queue.recv() => j.ok(),
            () = self.cancel.cancelled() => None,
            () = async move {
                match until {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            } => None,
        };
        job.filter(|_| !self.halted())
    }

    /// Waits `wait` (a session's tool wait), unless the level is cancelled or its time is up
    /// first; `false` then: send nothing more.
    pub(super) async fn wait_for_tool(&self, wait: Duration) -> bool {
        let until = self.send_until;
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = self.cancel.cancelled() => {}
            () = async move {
                match until {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
        !self.halted()
    }

    pub(super) async fn wait_while_paused(&mut self) {
        pause_gate(&mut self.control, &self.cancel).await;
    }

    /// Announces request `index` on this lane's slot and sends it now: in a closed loop the slot
    /// freed just now, so this is `t_sched`. Once the level is cancelled it has the grace period
    /// to finish, then ends as cancelled. `reply` keeps the generated text when given.
    pub(super) async fn send(
        &self,
        index: u32,
        spec: &RequestSpec,
        reply: Option<&mut String>,
    ) -> crate::metrics::RequestRecord {
        self.send_on(self.slot, index, spec, reply).await
    }

    /// [`Lane::send`] on `slot`: a sub-agent's own slot beside its session's.
    pub(super) async fn send_on(
        &self,
        slot: u32,
        index: u32,
        spec: &RequestSpec,
        reply: Option<&mut String>,
    ) -> crate::metrics::RequestRecord {
        let sched = Instant::now();
        let tag = RequestTag {
            level: self.level,
            index,
            warmup: false,
            origin: self.origin,
            sched,
        };
        let _ = self.tx.send(Event::Sent {
            level: self.level,
            slot,
        });
        let grace = self.grace;
        let cancel = self.cancel.clone();
        let mut rec = tokio::select! {
            r = self.client.send_with(spec, tag, reply) => r,
            () = super::grace_after(cancel, grace) => {
                client::cancelled_record(spec, tag, sched)
            }
        };
        rec.slot = Some(slot);
        rec
    }

    /// [`deliver`] through this lane.
    pub(super) async fn deliver(&self, rec: crate::metrics::RequestRecord) {
        deliver(rec, &self.tx, &self.watch, &self.stop, &self.cancel).await;
    }
}

/// Holds while the run is paused, until it resumes or `cancel` fires.
pub(super) async fn pause_gate(control: &mut watch::Receiver<Control>, cancel: &CancellationToken) {
    while control.borrow().paused && !cancel.is_cancelled() {
        tokio::select! {
            r = control.changed() => if r.is_err() { break },
            () = cancel.cancelled() => break,
        }
    }
}

/// One closed-loop worker: takes the next request as soon as its previous one ends.
pub(super) struct Worker {
    pub(super) lane: Lane,
    pub(super) long_context: bool,
}

impl Worker {
    pub(super) async fn run(mut self) {
        loop {
            // Nothing left to send: end now, paused or not, so the level can finish.
            if self.lane.queue.is_closed() && self.lane.queue.is_empty() {
                return;
            }
            self.lane.wait_while_paused().await;
            if self.lane.halted() {
                return;
            }
            let Some(job) = self.lane.next_job().await else {
                return;
            };
            // One request a job outside multi-turn levels.
            let Some((i, spec)) = job.into_iter().next() else {
                continue;
            };
            let rec = self.lane.send(i, &spec, None).await;
            // A refused long prompt will be refused again: stop repeating it.
            let refused = self.long_context
                && matches!(
                    &rec.outcome,
                    Outcome::Failed {
                        kind: FailureKind::ContextTooLong,
                        ..
                    }
                );
            // After a failure to connect, this holds the worker until the server is back.
            self.lane.deliver(rec).await;
            if refused {
                self.lane.stop.store(true, Ordering::Relaxed);
            }
        }
    }
}
