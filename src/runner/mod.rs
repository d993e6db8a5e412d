//! Drives a plan against a server: warmup, then each level, as a closed loop of workers
//! (concurrency sweep, long context) or as an open-loop dispatcher (request-rate levels).
//!
//! The runner knows nothing of a terminal (docs/STYLE.md rule 5): it only sends `Event`s. It obeys a
//! cancellation token (quit) and a `watch` of `Control` (pause, skip) from whoever drives it.
//!
//! Open loop: the dispatcher sends request `i` at `origin + t_i` of a seeded schedule
//! ([`crate::workload::Schedule`]) whether or not earlier ones have finished; each request runs
//! in its own task. `t_sched` is the scheduled time, so any lateness of the client (a full
//! `--max-concurrency`, prompts not ready) is client queue time, never hidden in TTFT. Pausing
//! and waiting for a server that went away hold the dispatcher and shift the rest of the
//! schedule by the time held, so neither turns into a burst of overdue requests.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::RunConfig;
use crate::event::{Event, EventTx, RunState};
use crate::workload::{LevelKind, LevelSpec, Schedule};

mod ahead;
mod chat;
mod open_loop;
mod owned_server;
mod prepare;
mod search;
mod server_watch;
mod slot;
mod warmup;
mod worker;

use crate::workload::requests::Jobs;
pub use crate::workload::search::SearchPlan;
use ahead::make_request_patiently;
use open_loop::OpenLoopCtx;
pub use prepare::{Prepared, prepare, warmup_input};
use server_watch::{ServerWatch, deliver};
use worker::{
    BYTES_PER_TOKEN, Lane, LaneCtx, PROMPT_BYTES_AHEAD, PROMPTS_AHEAD, Queue, Worker,
    prewarm_connections,
};

/// Ended by a second stop (Ctrl-C or SIGTERM twice, Ctrl-C on a dashboard already stopping):
/// every run's grace period ends at once, so its in-flight requests are cancelled now, counted,
/// and its results saved. A signal is the whole process's, and so is this.
static HURRY: std::sync::LazyLock<CancellationToken> =
    std::sync::LazyLock::new(CancellationToken::new);

/// Ends the grace period of every run in this process now: a second stop (Ctrl-C or SIGTERM
/// twice) cancels the requests still in flight at once.
pub fn hurry() {
    HURRY.cancel();
}

/// The grace period of a request in flight: from `cancel`, `grace` long, or until [`hurry`].
async fn grace_after(cancel: CancellationToken, grace: Duration) {
    cancel.cancelled().await;
    tokio::select! {
        () = tokio::time::sleep(grace) => {}
        () = HURRY.cancelled() => {}
    }
}

/// User intents the runner obeys between requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Control {
    /// Dispatch no new requests (in-flight ones finish).
    pub paused: bool,
    /// Incremented to skip the rest of the current level.
    pub skip: u64,
}

/// Runs a prepared plan.
pub struct Runner {
    prepared: Prepared,
    /// The engine's metrics page and `/server_info`, scraped once more as each level starts and
    /// ends so its counters cover exactly its requests (the sampler runs once a second).
    metrics: Option<(String, String)>,
    /// How long to wait for a server that stopped accepting connections before giving up.
    server_wait: Duration,
    warmup_requests: u32,
    warmup_input_tokens: u64,
    warmup_output_tokens: u32,
    grace: Duration,
    tx: EventTx,
    cancel: CancellationToken,
    control: watch::Receiver<Control>,
    /// Restarts after a crash so far (`--restart-on-crash` allows one).
    crash_restarts: u32,
    /// The GPUs, read once more just before and at the end of each level (energy counters).
    gpus: Option<crate::telemetry::GpuProbe>,
    /// Time-bounded levels and their slots on the wall clock.
    clock: crate::workload::clock::LevelClock,
    /// The tokens a chat message costs beside its content on this server, measured before
    /// session levels (`warmup::prime_sessions`); None: not measured.
    template_tokens: Option<u64>,
    /// Clear the server's prefix cache before each level (`--reset-cache`); off once the server
    /// said it offers no way to.
    reset_cache: std::sync::atomic::AtomicBool,
    /// servetop's own load probe, stopped (its last part-second reported) before the run ends.
    client_probe: Option<crate::telemetry::client_load::ClientProbe>,
    /// The server's clock minus this machine's, µs, once probed (`--start-at`): the slots of
    /// the shared schedule are on the server's clock, so shards whose clocks disagree still
    /// start together.
    clock_offset_us: i64,
}

/// The offered request rate of an open-loop level: a rate level's, a trace's mean.
fn open_loop_rate(spec: &LevelSpec) -> Option<f64> {
    spec.arrival
        .map(|a| a.request_rate)
        .or_else(|| spec.trace.as_ref()?.offered_rate)
}

/// Prompts to prepare before a level starts. Prompts are prepared ahead of the level, so
/// sizing them (a /tokenize call each) never runs while it is measured: all of them where
/// their text fits in [`PROMPT_BYTES_AHEAD`], at least [`PROMPTS_AHEAD`] otherwise; a level
/// longer than the lookahead gets the rest from a producer that stays that far ahead, so
/// memory follows the concurrency (a rate or trace level: ten seconds of arrivals), not the
/// number of requests. A time-bounded level has no count to prepare: a few rounds of its
/// workers (or its ten seconds of arrivals) ahead, the rest made while it runs, so preparing
/// does not eat into its slot.
fn prompts_ahead(spec: &LevelSpec) -> u32 {
    let arrivals = open_loop_rate(spec).map_or(0, |rate| {
        (rate * 10.0).ceil().min(f64::from(u32::MAX)) as u32
    });
    let text = spec
        .longest_request()
        .0
        .max(1)
        .saturating_mul(BYTES_PER_TOKEN);
    let images = spec
        .mix
        .images
        .as_ref()
        .map_or(0, crate::workload::images::ImageMix::max_bytes);
    let fit = PROMPT_BYTES_AHEAD / text.saturating_add(images);
    // Images make a request megabytes: no floor of a thousand then (a thousand 512x512 images
    // are a gigabyte), the workers' next rounds only.
    let floor = if images > 0 { 8 } else { PROMPTS_AHEAD };
    let cap = u32::try_from(fit).unwrap_or(u32::MAX).max(floor);
    let most = match spec.seconds {
        Some(_) => spec
            .concurrency
            .saturating_mul(4)
            .max(arrivals)
            .clamp(64, PROMPTS_AHEAD),
        None => cap.max(spec.concurrency.saturating_mul(2)),
    };
    spec.requests.min(most).min(cap.max(arrivals))
}

/// Why a level ended.
enum LevelEnd {
    Done,
    Interrupted,
    /// Every request failed to connect: the server is gone.
    ServerGone(String),
    /// The server servetop started exited during the level: how, with its last log lines.
    Crashed(String),
}

impl Runner {
    /// The runner of `prepared` under `cfg`: it sends its events on `tx`, stops on `cancel`
    /// and follows `control` (pause, skip).
    #[must_use]
    pub fn new(
        cfg: &RunConfig,
        prepared: Prepared,
        tx: EventTx,
        cancel: CancellationToken,
        control: watch::Receiver<Control>,
    ) -> Self {
        Self {
            server_wait: Duration::from_secs_f64(cfg.server_wait_s),
            metrics: crate::telemetry::engine_urls(cfg),
            warmup_input_tokens: warmup_input(cfg, &prepared),
            warmup_output_tokens: cfg.output_len.min(64),
            warmup_requests: cfg.warmup_requests,
            grace: Duration::from_secs_f64(cfg.grace_s),
            prepared,
            tx,
            cancel,
            control,
            crash_restarts: 0,
            gpus: crate::telemetry::GpuProbe::of(cfg),
            clock: cfg.clock,
            template_tokens: None,
            reset_cache: cfg.reset_cache.into(),
            client_probe: None,
            clock_offset_us: 0,
        }
    }

    /// The load probe to stop before `RunFinished`, so its record reaches the run's end.
    #[must_use]
    pub fn with_client_probe(mut self, p: crate::telemetry::client_load::ClientProbe) -> Self {
        self.client_probe = Some(p);
        self
    }

    fn emit(&self, ev: Event) {
        // The consumer only goes away when the process is ending; nothing to do then.
        let _ = self.tx.send(ev);
    }

    /// Runs warmup and every level, then sends `RunFinished`.
    pub async fn run(mut self) -> RunState {
        let p = &self.prepared;
        self.emit(Event::RunStarted {
            server: p.server.clone(),
            backend: p.backend,
            prompts: p.factory.method(),
            levels: p.levels.clone(),
        });
        let tail = self
            .prepared
            .serve
            .as_ref()
            .map(|s| owned_server::spawn_log_tail(&s.log, self.tx.clone()));
        let result = self.run_inner().await;
        if let Some(t) = tail {
            t.abort();
        }
        let (state, error) = match result {
            Ok(()) if self.cancel.is_cancelled() => (RunState::Interrupted, None),
            Ok(()) => (RunState::Finished, None),
            Err(e) => (RunState::Aborted, Some(e)),
        };
        if let Some(p) = self.client_probe.take() {
            p.finish().await;
        }
        self.emit(Event::RunFinished { state, error });
        state
    }

    async fn run_inner(&mut self) -> Result<(), String> {
        if let Some(d) = self.prepared.factory.dataset().cloned() {
            // The most any one level draws from its pool (each level starts from its own point
            // in the order): the whole file, or a category's entries with --categories.
            let mut most: Vec<(Option<String>, u64)> = Vec::new();
            for l in self
                .prepared
                .levels
                .iter()
                .filter(|l| l.kind != LevelKind::LongContext)
            {
                let n = match l.conversation {
                    Some(c) => u64::from(l.requests / c.requests()),
                    None => u64::from(l.requests),
                };
                match most.iter_mut().find(|(c, _)| *c == l.category) {
                    Some((_, m)) => *m = (*m).max(n),
                    None => most.push((l.category.clone(), n)),
                }
            }
            for (category, requests) in most {
                if let Some(w) = d.repeats_warning_in(category.as_deref(), requests) {
                    self.emit(Event::Warning(w));
                }
            }
        }
        self.check_clock().await;
        // The GPUs before anything is asked of them: the run's idle power.
        self.read_gpus().await;
        self.warmup().await?;
        let levels = self.prepared.levels.clone();
        for spec in &levels {
            self.run_one(spec).await?;
            if self.cancel.is_cancelled() {
                break;
            }
        }
        if let Some(plan) = self.prepared.search.clone()
            && !self.cancel.is_cancelled()
        {
            self.run_search(&plan).await?;
        }
        Ok(())
    }

    /// Runs one level: waits out a pause, skips a length the server cannot hold, prepares its
    /// prompts and sends its requests. `Err` ends the run (prompts could not be made, the
    /// server went away).
    async fn run_one(&mut self, spec: &LevelSpec) -> Result<(), String> {
        self.wait_while_paused().await;
        if self.cancel.is_cancelled() {
            return Ok(());
        }
        if self.skipped_as_too_long(spec).await? {
            return Ok(());
        }
        if let Some(w) = self.chat_growth_warning(spec) {
            self.emit(Event::Warning(w));
        }
        let ahead = prompts_ahead(spec);
        self.emit(Event::Phase(format!(
            "preparing {ahead} prompts of {} tokens for {}{}",
            spec.input_span(),
            spec.label(),
            if ahead < spec.requests {
                " (the rest while it runs)"
            } else {
                ""
            }
        )));
        let mut jobs = Jobs::new(spec, self.prepared.factory.trace().map(AsRef::as_ref));
        // Capacity for every job of the prompts made ahead: sending them never waits.
        let (ptx, prx) = async_channel::bounded(jobs.count(ahead).max(1));
        let made = ahead::make_ahead(
            &mut self.prepared.factory,
            spec,
            (ahead, self.server_wait),
            &self.cancel,
            |i, req| {
                if let Some(job) = jobs.push(i, req) {
                    // The queue has room for every job made ahead: this never finds it full.
                    let _ = ptx.try_send(job);
                }
            },
        )
        .await
        .map_err(|e| format!("preparing prompts for {}: {e}", spec.label()))?;
        if !made {
            return Ok(());
        }
        let producer = if ahead < spec.requests {
            let mut factory = self.prepared.factory.clone();
            let spec = spec.clone();
            let patience = self.server_wait;
            Some(tokio::spawn(async move {
                for i in ahead..spec.requests {
                    let req = make_request_patiently(&mut factory, &spec, i, patience).await?;
                    if let Some(job) = jobs.push(i, req)
                        && ptx.send(job).await.is_err()
                    {
                        return Ok(());
                    }
                }
                if let Some(job) = jobs.rest() {
                    let _ = ptx.send(job).await;
                }
                Ok::<(), String>(())
            }))
        } else {
            if let Some(job) = jobs.rest() {
                let _ = ptx.send(job).await;
            }
            // Every job is queued: closing the queue lets the workers end when it is empty.
            drop(ptx);
            None
        };
        let end = self.run_level(spec, prx).await;
        if let Some(p) = producer {
            // Done with it, or it is blocked on a full queue nobody reads any more.
            p.abort();
            if let Ok(Err(e)) = p.await {
                return Err(format!("preparing prompts for {}: {e}", spec.label()));
            }
        }
        match end {
            LevelEnd::Done | LevelEnd::Interrupted => {}
            LevelEnd::Crashed(msg) => return self.after_crash(spec, msg).await,
            LevelEnd::ServerGone(msg) => {
                return Err(format!(
                    "the server at {} stopped answering during {}: {msg}",
                    self.prepared.server.base_url,
                    spec.label()
                ));
            }
        }
        Ok(())
    }

    /// Holds a scheduled level (`--start-at`) back until its slot starts; returns how many ms
    /// late it is (0 when on time or unscheduled). The wait ends early if the level is
    /// cancelled.
    async fn wait_for_slot(&self, spec: &LevelSpec, level: &CancellationToken) -> i64 {
        // The server's clock now, as the shared schedule is kept.
        let now_ms = crate::telemetry::now_unix_ms() + self.clock_offset_us / 1000;
        let (wait, late) = slot::wait_ms(&self.clock, spec, now_ms);
        if wait > 0 {
            self.emit(Event::Phase(format!(
                "waiting {} s for {}'s slot on the shared clock",
                wait.div_ceil(1000),
                spec.label()
            )));
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(wait)) => {}
                () = level.cancelled() => {}
            }
        }
        late
    }

    /// Holds the next level back while the user has paused.
    async fn wait_while_paused(&mut self) {
        let mut control = self.control.clone();
        while control.borrow().paused && !self.cancel.is_cancelled() {
            self.emit(Event::Phase("paused (p resumes)".into()));
            tokio::select! {
                r = control.changed() => if r.is_err() { return },
                () = self.cancel.cancelled() => return,
            }
        }
    }

    /// A reason to skip a long-context length the server says it cannot hold.
    fn context_precheck(&self, spec: &LevelSpec) -> Option<String> {
        let limit = self.prepared.server.context_limit?;
        let need = spec.context_needed();
        let (input, output) = spec.longest_request();
        (need > limit).then(|| {
            format!(
                "{input} prompt tokens + {output} output tokens = {need} exceeds the server's context limit of {limit} tokens ({}); raise it with {} to at least {need} and restart the server",
                self.prepared.server.context_limit_source.as_deref().unwrap_or("reported by the server"),
                self.prepared.server.engine.context_flag(),
            )
        })
    }

    /// One scrape of the engine's counters, right at a level's start or end, so the level's
    /// share of them is exact (the sampler alone runs once a second and would miss a short
    /// level's last requests, or count the warmup into the first level).
    async fn scrape_engine(&self) {
        let Some((url, info)) = &self.metrics else {
            return;
        };
        let http = self.prepared.client.http();
        let scrape = crate::telemetry::scrape::engine_sample_full(&http, url, info);
        if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(2), scrape).await {
            self.emit(Event::Telemetry(crate::telemetry::TelemetryRecord::Server(
                Box::new(s),
            )));
        }
    }

    /// One GPU reading now (at a level's edges, and before anything is sent: idle power).
    async fn read_gpus(&self) {
        let Some(probe) = &self.gpus else { return };
        let http = self.prepared.client.http();
        if let Ok(Some(s)) = tokio::time::timeout(Duration::from_secs(2), probe.read(&http)).await {
            self.emit(Event::Telemetry(crate::telemetry::TelemetryRecord::Gpu(s)));
        }
    }

    /// Cancels `level_cancel` when the user asks to skip the level (the control's skip count
    /// moves on).
    fn watch_for_skip(&self, level_cancel: &CancellationToken) -> tokio::task::JoinHandle<()> {
        let mut control = self.control.clone();
        let level_cancel = level_cancel.clone();
        let start_skip = control.borrow().skip;
        tokio::spawn(async move {
            while control.changed().await.is_ok() {
                if control.borrow().skip != start_skip {
                    level_cancel.cancel();
                    break;
                }
            }
        })
    }

    /// The level's closed-loop workers (none for a rate level), one a slot: a chat worker per
    /// conversation lane, or a request worker.
    fn spawn_workers(
        &self,
        spec: &LevelSpec,
        ctx: &LaneCtx<'_>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let client = Arc::new(self.prepared.client.clone());
        let lane = |slot| Lane {
            slot,
            client: client.clone(),
            queue: ctx.queue.clone(),
            stop: ctx.stop.clone(),
            watch: ctx.watch.clone(),
            level: spec.index,
            origin: ctx.origin,
            tx: self.tx.clone(),
            cancel: ctx.cancel.clone(),
            control: self.control.clone(),
            grace: self.grace,
            send_until: ctx.send_until,
        };
        (0..spec.workers())
            .map(|slot| match spec.conversation {
                Some(_) => tokio::spawn(
                    chat::ChatWorker {
                        lane: lane(slot),
                        template_tokens: self.template_tokens,
                        sub_agent_slots: {
                            let k = spec.conversation.map_or(0, |c| c.fan_out);
                            let first = spec.concurrency + slot * k;
                            (first..first + k).collect()
                        },
                    }
                    .run(),
                ),
                None => tokio::spawn(
                    Worker {
                        lane: lane(slot),
                        long_context: spec.kind == LevelKind::LongContext,
                    }
                    .run(),
                ),
            })
            .collect()
    }

    /// When an open-loop level's requests are due: a rate level's seeded schedule, a trace's
    /// recorded offsets (None: a closed-loop level).
    fn times(&self, spec: &LevelSpec) -> Option<open_loop::Times> {
        if let Some(a) = &spec.arrival {
            // A shard draws arrivals of its own: N shards at rate/N add up to the rate.
            let seed = Schedule::level_seed(self.prepared.seed, spec.index)
                ^ spec
                    .shard
                    .map_or(0, crate::workload::shard::Shard::seed_mix);
            return Some(Box::new(Schedule::new(a, seed)));
        }
        spec.trace.as_ref()?;
        let trace = self.prepared.factory.trace()?.clone();
        if spec.kind == LevelKind::Sessions {
            // An agent trace: its sessions start at their recorded times.
            return Some(Box::new(trace.session_starts_s().into_iter()));
        }
        let spec = spec.clone();
        Some(Box::new((0..spec.requests).map_while(move |i| {
            let r = trace.requests.get(spec.global_index(i) as usize)?;
            Some(r.at_ms / 1000.0)
        })))
    }

    async fn run_level(&self, spec: &LevelSpec, queue: Queue) -> LevelEnd {
        let level_cancel = self.cancel.child_token();
        let skip_watch = self.watch_for_skip(&level_cancel);
        tracing::info!(level = spec.index, label = %spec.label(), requests = spec.requests, "level started");
        self.reset_cache(spec.index).await;
        self.prepared
            .client
            .prewarm(prewarm_connections(spec))
            .await;
        self.scrape_engine().await;
        self.read_gpus().await;
        let late_ms = self.wait_for_slot(spec, &level_cancel).await;
        let origin = Instant::now();
        self.emit(Event::LevelStarted {
            index: spec.index,
            origin_unix_us: crate::metrics::unix_us(),
        });
        let bounds = slot::bounds(&self.clock, spec, origin, late_ms, self.grace);
        let (clock_cut, cut_task) = slot::cut_when_due(bounds.cut_at, &level_cancel);
        let stop = Arc::new(AtomicBool::new(false));
        let watch = Arc::new(ServerWatch::new(
            spec.index,
            origin,
            &self.prepared.server.base_url,
            self.server_wait,
            self.tx.clone(),
            self.prepared.serve.clone(),
        ));
        let mut workers = Vec::new();
        if let Some(times) = self.times(spec) {
            let ctx = Arc::new(OpenLoopCtx {
                client: Arc::new(self.prepared.client.clone()),
                watch: watch.clone(),
                stop: stop.clone(),
                level: spec.index,
                origin,
                tx: self.tx.clone(),
                cancel: level_cancel.clone(),
                grace: self.grace,
                send_until: bounds.send_until,
            });
            self.open_loop(spec, times, queue.clone(), ctx).await;
        }
        let lanes = LaneCtx {
            queue: &queue,
            stop: &stop,
            watch: &watch,
            origin,
            cancel: &level_cancel,
            send_until: bounds.send_until,
        };
        workers.extend(self.spawn_workers(spec, &lanes));
        for w in workers {
            let _ = w.await;
        }
        skip_watch.abort();
        if let Some(t) = cut_task {
            t.abort();
        }
        self.scrape_engine().await;
        self.read_gpus().await;
        // A level cut at its slot's end ran its time: not interrupted, unless the user quit.
        let interrupted = level_cancel.is_cancelled()
            && (self.cancel.is_cancelled() || !clock_cut.load(Ordering::Relaxed));
        tracing::info!(level = spec.index, interrupted, "level finished");
        self.emit(Event::LevelFinished {
            index: spec.index,
            interrupted,
            at_unix_ms: crate::telemetry::now_unix_ms(),
        });
        let crash = watch
            .crash()
            .or_else(|| self.prepared.serve.as_ref()?.crashed());
        if let Some(crash) = crash {
            return LevelEnd::Crashed(crash);
        }
        if watch.gone.load(Ordering::Relaxed) {
            return LevelEnd::ServerGone(format!(
                "it stopped accepting connections and did not come back within {:?}",
                self.server_wait
            ));
        }
        if interrupted {
            LevelEnd::Interrupted
        } else {
            LevelEnd::Done
        }
    }
}
