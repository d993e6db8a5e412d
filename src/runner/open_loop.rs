//! Open-loop levels: requests sent on a schedule (a rate level's seeded one, a trace's
//! recorded times), each in its own task, under an optional cap in flight.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::client::{self, Client, RequestSpec, RequestTag};
use crate::event::{Event, EventTx};
use crate::workload::LevelSpec;

use super::{Queue, Runner, ServerWatch, deliver};

/// When an open-loop level's requests are due, in seconds from its origin, in order.
pub(super) type Times = Box<dyn Iterator<Item = f64> + Send>;

impl Runner {
    /// Sends an open-loop level's requests at their `times`, each in its own task, and waits
    /// for the last one. Slots come from a pool (the one freed longest ago first; a new one only when
    /// none is free), so one slot's requests never overlap and the peak-in-flight fold stays
    /// exact with memory that follows the slots in use (`metrics::level::InFlight`).
    pub(super) async fn open_loop(
        &self,
        spec: &LevelSpec,
        mut schedule: Times,
        queue: Queue,
        ctx: Arc<OpenLoopCtx>,
    ) {
        let cap = spec.max_in_flight().map_or(usize::MAX, |c| c as usize);
        let mut tasks = Tasks::default();
        // Time spent paused or waiting for the server: the rest of the schedule moves by it.
        let mut held = Duration::ZERO;
        let mut control = self.control.clone();
        let cancel = ctx.cancel.clone();
        'requests: for _ in 0..spec.requests {
            let Some(t) = schedule.next() else { break };
            let offset = Duration::from_secs_f64(t);
            // Until it is due: hand back the slots of requests that end meanwhile.
            loop {
                if cancel.is_cancelled() || ctx.stop.load(Ordering::Relaxed) {
                    break 'requests;
                }
                if control.borrow().paused || ctx.watch.down.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    tokio::select! {
                        _ = control.changed() => {}
                        () = tokio::time::sleep(Duration::from_millis(100)) => {}
                        () = cancel.cancelled() => {}
                        Some(r) = tasks.running.join_next() => tasks.pool.give_back(r),
                    }
                    held += start.elapsed();
                    continue;
                }
                let due = origin_plus(ctx.origin, offset + held);
                // A time-bounded level sends nothing due after its time.
                if ctx.send_until.is_some_and(|t| due >= t) {
                    break 'requests;
                }
                if Instant::now() >= due {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(due.into()) => {}
                    Some(r) = tasks.running.join_next() => tasks.pool.give_back(r),
                    _ = control.changed() => {}
                    () = cancel.cancelled() => {}
                }
            }
            let sched = origin_plus(ctx.origin, offset + held);
            // A time-bounded level's end, for the waits below: nothing is sent after it.
            let until = ctx.send_until;
            let time_up = || async move {
                match until {
                    Some(t) => tokio::time::sleep_until(t.into()).await,
                    None => std::future::pending().await,
                }
            };
            // Over the cap it waits for a slot: that wait is client queue time.
            while tasks.running.len() >= cap {
                tokio::select! {
                    Some(r) = tasks.running.join_next() => tasks.pool.give_back(r),
                    () = cancel.cancelled() => break 'requests,
                    () = time_up() => break 'requests,
                }
            }
            while let Some(r) = tasks.running.try_join_next() {
                tasks.pool.give_back(r);
            }
            let next = tokio::select! {
                n = queue.recv() => n.ok(),
                () = cancel.cancelled() => None,
                () = time_up() => None,
            };
            let Some(job) = next else { break };
            if until.is_some_and(|t| Instant::now() >= t) {
                break;
            }
            if !self.start_job(spec, job, &mut tasks, &queue, &ctx, sched) {
                break;
            }
        }
        while tasks.running.join_next().await.is_some() {}
    }
}

/// An open-loop level's tasks in flight, and the slots they hold: each task hands back its
/// slot, and a session's sub-agents' slots, when it ends.
#[derive(Default)]
struct Tasks {
    running: tokio::task::JoinSet<(u32, Vec<u32>)>,
    pool: SlotPool,
}

/// An open-loop level's slots: the one freed longest ago first, a new one only when none is
/// free.
#[derive(Default)]
struct SlotPool {
    free: VecDeque<u32>,
    next: u32,
}

impl SlotPool {
    fn take(&mut self) -> u32 {
        self.free.pop_front().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }

    fn give_back(&mut self, ended: Result<(u32, Vec<u32>), tokio::task::JoinError>) {
        if let Ok((slot, more)) = ended {
            self.free.push_back(slot);
            self.free.extend(more);
        }
    }
}

impl Runner {
    /// Starts `job` in a task of its own on slots from the pool: a session (started at a rate, or
    /// an agent trace's) runs its turns one after another on its slot and its sub-agents' each
    /// on a slot of their own; otherwise the job is one request. False when it held nothing.
    fn start_job(
        &self,
        spec: &LevelSpec,
        mut job: crate::workload::requests::Job,
        tasks: &mut Tasks,
        queue: &Queue,
        ctx: &Arc<OpenLoopCtx>,
        sched: Instant,
    ) -> bool {
        let slot = tasks.pool.take();
        if let Some(c) = spec.conversation {
            // Its sub-agents: `--fan-out`'s, or as many as an agent trace's session starts.
            let k = job
                .iter()
                .filter_map(|(_, r)| r.session_turn?.sub_agent)
                .max()
                .map_or(0, |k| k + 1)
                .max(c.fan_out);
            let sub_agent_slots: Vec<u32> = (0..k).map(|_| tasks.pool.take()).collect();
            let worker = super::chat::ChatWorker {
                lane: self.lane_of(spec, slot, queue, ctx),
                template_tokens: self.template_tokens,
                sub_agent_slots: sub_agent_slots.clone(),
            };
            tasks.running.spawn(async move {
                worker.conversation(job).await;
                (slot, sub_agent_slots)
            });
            return true;
        }
        let Some((i, req)) = job.pop() else {
            tasks.pool.give_back(Ok((slot, Vec::new())));
            return false;
        };
        // Announced before the request goes out (the peak-in-flight fold relies on it).
        let _ = ctx.tx.send(Event::Sent {
            level: ctx.level,
            slot,
        });
        let ctx = ctx.clone();
        tasks.running.spawn(async move {
            (
                open_loop_request(ctx, slot, i, req, sched).await,
                Vec::new(),
            )
        });
        true
    }

    /// A lane on `slot` of an open-loop level, for a session's turns.
    fn lane_of(
        &self,
        spec: &LevelSpec,
        slot: u32,
        queue: &Queue,
        ctx: &OpenLoopCtx,
    ) -> super::worker::Lane {
        super::worker::Lane {
            slot,
            client: ctx.client.clone(),
            queue: queue.clone(),
            stop: ctx.stop.clone(),
            watch: ctx.watch.clone(),
            level: spec.index,
            origin: ctx.origin,
            tx: ctx.tx.clone(),
            cancel: ctx.cancel.clone(),
            control: self.control.clone(),
            grace: ctx.grace,
            send_until: ctx.send_until,
        }
    }
}

/// `origin + d`, saturating far in the future instead of panicking.
pub(super) fn origin_plus(origin: Instant, d: Duration) -> Instant {
    origin
        .checked_add(d)
        .unwrap_or_else(|| origin + Duration::from_secs(86_400 * 365))
}

/// What every request task of an open-loop level shares.
pub(super) struct OpenLoopCtx {
    pub(super) client: Arc<Client>,
    pub(super) watch: Arc<ServerWatch>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) level: u32,
    pub(super) origin: Instant,
    pub(super) tx: EventTx,
    pub(super) cancel: CancellationToken,
    pub(super) grace: Duration,
    /// A time-bounded level sends nothing due from here on.
    pub(super) send_until: Option<Instant>,
}

/// One open-loop request: sends it, records it, and gives its slot back. A request that cannot
/// connect holds the dispatcher until the server is back, or gives up on the level.
pub(super) async fn open_loop_request(
    ctx: Arc<OpenLoopCtx>,
    slot: u32,
    index: u32,
    spec: RequestSpec,
    sched: Instant,
) -> u32 {
    let tag = RequestTag {
        level: ctx.level,
        index,
        warmup: false,
        origin: ctx.origin,
        sched,
    };
    let grace = ctx.grace;
    let cancel = ctx.cancel.clone();
    let mut rec = tokio::select! {
        r = ctx.client.send(&spec, tag) => r,
        () = super::grace_after(cancel, grace) => {
            client::cancelled_record(&spec, tag, Instant::now())
        }
    };
    rec.slot = Some(slot);
    deliver(rec, &ctx.tx, &ctx.watch, &ctx.stop, &ctx.cancel).await;
    slot
}
