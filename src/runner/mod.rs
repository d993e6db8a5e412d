//! Drives a plan against a server: warmup, then each level, as a closed loop of workers
//! (concurrency sweep, long context) or as an open-loop dispatcher (request-rate levels).
//!
//! The runner knows nothing of a terminal (STYLE.md rule 5): it only sends `Event`s. It obeys a
//! cancellation token (quit) and a `watch` of `Control` (pause, skip) from whoever drives it.
//!
//! Open loop: the dispatcher sends request `i` at `origin + t_i` of a seeded schedule
//! ([`crate::workload::Schedule`]) whether or not earlier ones have finished; each request runs
//! in its own task. `t_sched` is the scheduled time, so any lateness of the client (a full
//! `--max-concurrency`, prompts not ready) is client queue time, never hidden in TTFT. Pausing
//! and waiting for a server that went away hold the dispatcher and shift the rest of the
//! schedule by the time held, so neither turns into a burst of overdue requests.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::client::{
    self, Backend, Client, ClientOptions, RequestSpec, RequestTag, ServerInfo, detect,
};
use crate::config::{BackendChoice, RunConfig};
use crate::event::{Event, EventTx, RunState};
use crate::metrics::{CountSource, FailureKind, Outcome};
use crate::workload::prompt::{Counter, PromptFactory};
use crate::workload::{Arrival, LevelKind, LevelSpec, Schedule};

mod chat;
mod search;

pub use search::SearchPlan;

/// User intents the runner obeys between requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Control {
    /// Dispatch no new requests (in-flight ones finish).
    pub paused: bool,
    /// Incremented to skip the rest of the current level.
    pub skip: u64,
}

/// Everything needed to run, after talking to the server.
pub struct Prepared {
    pub server: ServerInfo,
    pub backend: Backend,
    pub client: Client,
    pub factory: PromptFactory,
    pub levels: Vec<LevelSpec>,
    /// The run seed: prompt text and rate levels' arrival schedules derive from it.
    pub seed: u64,
    /// The SLO capacity search to run after the planned levels, and the SLO it searches for.
    pub search: Option<SearchPlan>,
}

/// Identifies the server, picks the protocol and the prompt counter, and builds the plan.
/// Every error is one line a user can act on.
pub async fn prepare(cfg: &RunConfig, api_key: Option<String>) -> Result<Prepared, String> {
    let http = client::http_client().map_err(|e| format!("HTTP client: {e}"))?;
    let base = cfg.base_url.trim_end_matches('/').to_string();
    let tokenizer = match &cfg.tokenizer {
        Some(path) => Some(Arc::new(
            tokenizers::Tokenizer::from_file(path)
                .map_err(|e| format!("cannot read tokenizer {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let probes = detect::probe(&http, &base, api_key.as_deref()).await;
    if let Some(status @ (401 | 403)) = probes.models_status {
        return Err(match api_key {
            Some(_) => format!(
                "{base} refused the API key (HTTP {status} on /v1/models): put the key the server was started with in ${}",
                cfg.api_key_env
            ),
            None => format!(
                "{base} needs an API key (HTTP {status} on /v1/models): put it in ${} (or name another variable with --api-key-env)",
                cfg.api_key_env
            ),
        });
    }
    if probes.models.is_none()
        && probes.props.is_none()
        && probes.tgi_info.is_none()
        && probes.server_info.is_none()
    {
        // Tell "nothing listens there" from "something that is not an LLM server".
        if let Err(e) = http.get(&base).timeout(Duration::from_secs(5)).send().await {
            return Err(format!(
                "cannot reach {base}: {} (is the server running, and is the URL right?)",
                client::error_chain(&e)
            ));
        }
    }
    let server = detect::identify(&base, &probes, cfg.model.as_deref())?;
    let backend = match cfg.backend {
        BackendChoice::Auto | BackendChoice::Openai => Backend::Openai,
        BackendChoice::OpenaiChat => Backend::OpenaiChat,
        BackendChoice::Sglang => Backend::Sglang,
    };
    let opts = ClientOptions {
        first_token_timeout: Duration::from_secs_f64(cfg.first_token_timeout_s),
        idle_timeout: Duration::from_secs_f64(cfg.idle_timeout_s),
        tokenizer: tokenizer.clone(),
        temperature: cfg.temperature,
    };
    let client = Client::new(http.clone(), &server, backend, api_key.clone(), opts);
    let counter = match tokenizer {
        Some(t) => Counter::Local(t),
        None => match Counter::server(http, &base, server.engine, &server.model, api_key).await {
            Ok(c) => c,
            Err(_) => Counter::calibrate_with_probes(&client, cfg.seed).await.map_err(|e| {
                format!("no way to size prompts: the server has no usable /tokenize and {e}; pass --tokenizer PATH/tokenizer.json")
            })?,
        },
    };
    let levels = cfg.levels();
    if let Some(why) = nothing_fits(&server, &levels).or_else(|| search_fits(&server, cfg)) {
        return Err(why);
    }
    let mut factory = PromptFactory::new(counter, cfg.seed);
    if let Some(path) = &cfg.dataset {
        let d = crate::workload::dataset::Dataset::load(path)?;
        factory = factory.with_dataset(Arc::new(d));
    }
    Ok(Prepared {
        server,
        backend,
        client,
        factory,
        levels,
        seed: cfg.seed,
        search: cfg
            .search
            .clone()
            .zip(cfg.slo)
            .map(|(config, slo)| SearchPlan {
                config,
                slo,
                input_tokens: cfg.input_len,
                output_tokens: cfg.output_len,
                shared_prefix_tokens: cfg.shared_prefix_len,
                open_loop: cfg.open_loop.clone(),
            }),
    })
}

/// When the server's context limit is known and not one planned level fits in it, the run would
/// only skip: that is a configuration error, said before anything is written. (When some levels
/// fit, the others are skipped one by one with the flag to raise.)
fn nothing_fits(server: &ServerInfo, levels: &[LevelSpec]) -> Option<String> {
    let limit = server.context_limit?;
    let need = |l: &LevelSpec| l.input_tokens + u64::from(l.output_tokens);
    let smallest = levels.iter().map(need).min()?;
    (smallest > limit).then(|| {
        format!(
            "no planned level fits the server's context limit of {limit} tokens ({}): the smallest needs {smallest} (prompt + output); raise it with {} to at least {smallest} and restart the server, or lower --input-len/--output-len",
            server
                .context_limit_source
                .as_deref()
                .unwrap_or("reported by the server"),
            server.engine.context_flag()
        )
    })
}

/// A search whose probes cannot fit the server's context is refused before it starts.
fn search_fits(server: &ServerInfo, cfg: &RunConfig) -> Option<String> {
    cfg.search.as_ref()?;
    let probe = LevelSpec {
        index: 0,
        kind: LevelKind::Rate,
        concurrency: 0,
        input_tokens: cfg.input_len,
        output_tokens: cfg.output_len,
        requests: 1,
        arrival: None,
        shared_prefix_tokens: 0,
        conversation: None,
    };
    nothing_fits(server, &[probe])
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
}

/// Input tokens of the warmup request: the sweep's length, kept well inside the context.
pub fn warmup_input(cfg: &RunConfig, prepared: &Prepared) -> u64 {
    match prepared.server.context_limit {
        Some(limit) => cfg.input_len.min(limit / 2).max(1),
        None => cfg.input_len.max(1),
    }
}

/// Why a level ended.
enum LevelEnd {
    Done,
    Interrupted,
    /// Every request failed to connect: the server is gone.
    ServerGone(String),
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
        }
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
        let (state, error) = match self.run_inner().await {
            Ok(()) if self.cancel.is_cancelled() => (RunState::Interrupted, None),
            Ok(()) => (RunState::Finished, None),
            Err(e) => (RunState::Aborted, Some(e)),
        };
        self.emit(Event::RunFinished { state, error });
        state
    }

    async fn run_inner(&mut self) -> Result<(), String> {
        if let Some(d) = self.prepared.factory.dataset() {
            // The most any one level draws (each level starts from its own point in the order).
            let requests: u64 = self
                .prepared
                .levels
                .iter()
                .filter(|l| l.kind != LevelKind::LongContext)
                .map(|l| match l.conversation {
                    Some(c) => u64::from(l.requests / c.turns.max(1)),
                    None => u64::from(l.requests),
                })
                .max()
                .unwrap_or(0);
            if let Some(w) = d.repeats_warning(requests) {
                self.emit(Event::Warning(w));
            }
        }
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
        if let Some(reason) = self.context_precheck(spec) {
            tracing::info!(level = spec.index, %reason, "length skipped before sending");
            self.emit(Event::LevelSkipped {
                index: spec.index,
                reason,
                raise_flag: Some(self.prepared.server.engine.context_flag().into()),
            });
            return Ok(());
        }
        if let Some(w) = self.chat_growth_warning(spec) {
            self.emit(Event::Warning(w));
        }
        // Prompts are prepared ahead of the level, so sizing them (a /tokenize call each)
        // never runs while it is measured; a level longer than the lookahead gets the rest
        // from a producer that stays that far ahead, so memory follows the concurrency and
        // not the number of requests.
        let ahead = spec
            .requests
            .min(PROMPTS_AHEAD.max(spec.concurrency.saturating_mul(2)))
            .min(PROMPTS_AHEAD.max(spec.arrival.map_or(0, |a| {
                // A rate level: ten seconds of arrivals ahead.
                (a.request_rate * 10.0).ceil().min(f64::from(u32::MAX)) as u32
            })));
        self.emit(Event::Phase(format!(
            "preparing {ahead} prompts of {} tokens for {}{}",
            spec.input_tokens,
            spec.label(),
            if ahead < spec.requests {
                " (the rest while it runs)"
            } else {
                ""
            }
        )));
        let (ptx, prx) = tokio::sync::mpsc::channel(ahead.max(1) as usize);
        for i in 0..ahead {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            let req = make_request(&mut self.prepared.factory, spec, i)
                .await
                .map_err(|e| format!("preparing prompts for {}: {e}", spec.label()))?;
            // Capacity is `ahead`: never waits.
            let _ = ptx.send((i, req)).await;
        }
        let producer = (ahead < spec.requests).then(|| {
            let mut factory = self.prepared.factory.clone();
            let spec = spec.clone();
            let patience = self.server_wait;
            tokio::spawn(async move {
                for i in ahead..spec.requests {
                    // Sizing a prompt asks the server (/tokenize): while it is away, wait as
                    // long as the workers do, then give up with the last error.
                    let started = Instant::now();
                    let req = loop {
                        match make_request(&mut factory, &spec, i).await {
                            Ok(r) => break r,
                            Err(e) if started.elapsed() >= patience => return Err(e),
                            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                        }
                    };
                    if ptx.send((i, req)).await.is_err() {
                        break;
                    }
                }
                Ok::<(), String>(())
            })
        });
        let end = self
            .run_level(spec, Arc::new(tokio::sync::Mutex::new(prx)))
            .await;
        if let Some(p) = producer {
            // Done with it, or it is blocked on a full queue nobody reads any more.
            p.abort();
            if let Ok(Err(e)) = p.await {
                return Err(format!("preparing prompts for {}: {e}", spec.label()));
            }
        }
        match end {
            LevelEnd::Done | LevelEnd::Interrupted => {}
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
    /// A multi-turn level's first turn fits, but its history grows each turn: say before it runs
    /// when the last turns will not fit (they will fail with the server's context error, and the
    /// conversation stops there).
    fn chat_growth_warning(&self, spec: &LevelSpec) -> Option<String> {
        let limit = self.prepared.server.context_limit?;
        if self.prepared.factory.dataset().is_some() {
            return None;
        }
        let need = chat::last_turn_tokens(spec)?;
        (need > limit).then(|| {
            format!(
                "{}: the last turns' history will reach about {need} tokens (prompt + output), above the server's context limit of {limit}; those turns will fail as too long. Use fewer turns (--multi-turn), shorter messages, or raise {} to at least {need}",
                spec.label(),
                self.prepared.server.engine.context_flag(),
            )
        })
    }

    fn context_precheck(&self, spec: &LevelSpec) -> Option<String> {
        let limit = self.prepared.server.context_limit?;
        let need = spec.input_tokens + u64::from(spec.output_tokens);
        (need > limit).then(|| {
            format!(
                "{} prompt tokens + {} output tokens = {need} exceeds the server's context limit of {limit} tokens ({}); raise it with {} to at least {need} and restart the server",
                spec.input_tokens,
                spec.output_tokens,
                self.prepared.server.context_limit_source.as_deref().unwrap_or("reported by the server"),
                self.prepared.server.engine.context_flag(),
            )
        })
    }

    async fn warmup(&mut self) -> Result<(), String> {
        if self.warmup_requests == 0 {
            return Ok(());
        }
        self.emit(Event::Phase("warming up".into()));
        let origin = Instant::now();
        let mut any_ok = false;
        let mut last_err = String::new();
        for i in 0..self.warmup_requests {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            let prompt = self
                .prepared
                .factory
                .make(self.warmup_input_tokens, u32::MAX, i)
                .await
                .map_err(|e| format!("preparing the warmup prompt: {e}"))?;
            let spec = RequestSpec::prompt(
                prompt.text,
                self.warmup_input_tokens,
                prompt
                    .counted_tokens
                    .map(|n| (n, CountSource::ServerTokenize)),
                self.warmup_output_tokens,
            );
            let tag = RequestTag {
                level: 0,
                index: i,
                warmup: true,
                origin,
                sched: Instant::now(),
            };
            let rec = self.prepared.client.send(&spec, tag).await;
            match &rec.outcome {
                Outcome::Ok => {
                    // Calibrate: tokens the server adds (BOS, chat template) to what we count.
                    if !any_ok
                        && rec.input_source == CountSource::Usage
                        && self.prepared.factory.counter().is_exact()
                        && let Some(counted) = prompt.counted_tokens
                    {
                        self.prepared.factory.offset_tokens =
                            rec.input_tokens as i64 - counted as i64;
                        self.emit(Event::Calibrated(self.prepared.factory.method()));
                    }
                    any_ok = true;
                }
                Outcome::Failed { kind, message, .. } => {
                    last_err.clone_from(message);
                    if *kind == FailureKind::Connect {
                        return Err(format!("warmup request could not connect: {message}"));
                    }
                }
                Outcome::Cancelled => {}
            }
            self.emit(Event::Request(Box::new(rec)));
        }
        if !any_ok {
            self.emit(Event::Warning(format!(
                "every warmup request failed: {last_err}"
            )));
        }
        Ok(())
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
        let lane = |slot| Lane {
            slot,
            client: self.prepared.client.clone(),
            queue: ctx.queue.clone(),
            stop: ctx.stop.clone(),
            watch: ctx.watch.clone(),
            level: spec.index,
            origin: ctx.origin,
            tx: self.tx.clone(),
            cancel: ctx.cancel.clone(),
            control: self.control.clone(),
            grace: self.grace,
        };
        (0..spec.workers())
            .map(|slot| match spec.conversation {
                Some(c) => tokio::spawn(
                    chat::ChatWorker {
                        lane: lane(slot),
                        turns: c.turns,
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

    async fn run_level(&self, spec: &LevelSpec, queue: Queue) -> LevelEnd {
        let level_cancel = self.cancel.child_token();
        let skip_watch = self.watch_for_skip(&level_cancel);
        tracing::info!(level = spec.index, label = %spec.label(), requests = spec.requests, "level started");
        self.prepared
            .client
            .prewarm(prewarm_connections(spec))
            .await;
        self.scrape_engine().await;
        let origin = Instant::now();
        self.emit(Event::LevelStarted {
            index: spec.index,
            origin_unix_us: crate::metrics::unix_us(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let watch = Arc::new(ServerWatch::new(
            &self.prepared.server.base_url,
            self.server_wait,
            self.tx.clone(),
        ));
        let mut workers = Vec::new();
        if let Some(arrival) = spec.arrival {
            let ctx = Arc::new(OpenLoopCtx {
                client: self.prepared.client.clone(),
                watch: watch.clone(),
                stop: stop.clone(),
                level: spec.index,
                origin,
                tx: self.tx.clone(),
                cancel: level_cancel.clone(),
                grace: self.grace,
            });
            let seed = Schedule::level_seed(self.prepared.seed, spec.index);
            self.open_loop(spec, &arrival, seed, queue.clone(), ctx)
                .await;
        }
        let lanes = LaneCtx {
            queue: &queue,
            stop: &stop,
            watch: &watch,
            origin,
            cancel: &level_cancel,
        };
        workers.extend(self.spawn_workers(spec, &lanes));
        for w in workers {
            let _ = w.await;
        }
        skip_watch.abort();
        self.scrape_engine().await;
        let interrupted = level_cancel.is_cancelled();
        tracing::info!(level = spec.index, interrupted, "level finished");
        self.emit(Event::LevelFinished {
            index: spec.index,
            interrupted,
        });
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

impl Runner {
    /// Sends a rate level's requests on their schedule, each in its own task, and waits for the
    /// last one. Slots come from a pool (the one freed longest ago first; a new one only when
    /// none is free), so one slot's requests never overlap and the peak-in-flight fold stays
    /// exact with memory that follows the slots in use (`metrics::level::InFlight`).
    async fn open_loop(
        &self,
        spec: &LevelSpec,
        arrival: &Arrival,
        seed: u64,
        queue: Queue,
        ctx: Arc<OpenLoopCtx>,
    ) {
        let mut schedule = Schedule::new(arrival, seed);
        let cap = arrival.max_concurrency.map_or(usize::MAX, |c| c as usize);
        let mut free: VecDeque<u32> = VecDeque::new();
        let mut next_slot = 0u32;
        let mut running: tokio::task::JoinSet<u32> = tokio::task::JoinSet::new();
        // Time spent paused or waiting for the server: the rest of the schedule moves by it.
        let mut held = Duration::ZERO;
        let mut control = self.control.clone();
        let cancel = ctx.cancel.clone();
        let give_back = |free: &mut VecDeque<u32>, r: Result<u32, tokio::task::JoinError>| {
            if let Ok(slot) = r {
                free.push_back(slot);
            }
        };
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
                        Some(r) = running.join_next() => give_back(&mut free, r),
                    }
                    held += start.elapsed();
                    continue;
                }
                let due = origin_plus(ctx.origin, offset + held);
                if Instant::now() >= due {
                    break;
                }
                tokio::select! {
                    () = tokio::time::sleep_until(due.into()) => {}
                    Some(r) = running.join_next() => give_back(&mut free, r),
                    _ = control.changed() => {}
                    () = cancel.cancelled() => {}
                }
            }
            let sched = origin_plus(ctx.origin, offset + held);
            // Over the cap it waits for a slot: that wait is client queue time.
            while running.len() >= cap {
                tokio::select! {
                    Some(r) = running.join_next() => give_back(&mut free, r),
                    () = cancel.cancelled() => break 'requests,
                }
            }
            while let Some(r) = running.try_join_next() {
                give_back(&mut free, r);
            }
            let next = tokio::select! {
                n = async { queue.lock().await.recv().await } => n,
                () = cancel.cancelled() => None,
            };
            let Some((i, req)) = next else { break };
            let slot = free.pop_front().unwrap_or_else(|| {
                next_slot += 1;
                next_slot - 1
            });
            // Announced before the request goes out (the peak-in-flight fold relies on it).
            let _ = ctx.tx.send(Event::Sent {
                level: ctx.level,
                slot,
            });
            running.spawn(open_loop_request(ctx.clone(), slot, i, req, sched));
        }
        while running.join_next().await.is_some() {}
    }
}

/// `origin + d`, saturating far in the future instead of panicking.
fn origin_plus(origin: Instant, d: Duration) -> Instant {
    origin
        .checked_add(d)
        .unwrap_or_else(|| origin + Duration::from_secs(86_400 * 365))
}

/// What every request task of an open-loop level shares.
struct OpenLoopCtx {
    client: Client,
    watch: Arc<ServerWatch>,
    stop: Arc<AtomicBool>,
    level: u32,
    origin: Instant,
    tx: EventTx,
    cancel: CancellationToken,
    grace: Duration,
}

/// One open-loop request: sends it, records it, and gives its slot back. A request that cannot
/// connect holds the dispatcher until the server is back, or gives up on the level.
async fn open_loop_request(
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
        () = async move { cancel.cancelled().await; tokio::time::sleep(grace).await } => {
            client::cancelled_record(&spec, tag, Instant::now())
        }
    };
    rec.slot = Some(slot);
    deliver(rec, &ctx.tx, &ctx.watch, &ctx.stop, &ctx.cancel).await;
    slot
}

/// Sends a finished request's record on. After a failure to connect, holds the caller until the
/// server accepts connections again, or stops the level when it does not come back in time.
async fn deliver(
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
        } => Some(message.clone()),
        _ => None,
    };
    let _ = tx.send(Event::Request(Box::new(rec)));
    if let Some(why) = connect
        && !watch.wait_for_server(&why).await
    {
        stop.store(true, Ordering::Relaxed);
        cancel.cancel();
    }
}

/// Watches for a server that stopped accepting connections: one worker probes (a TCP connect,
/// engine-agnostic), the others wait behind it, and the wait is bounded.
struct ServerWatch {
    addr: String,
    url: String,
    wait: Duration,
    tx: EventTx,
    probe: tokio::sync::Mutex<()>,
    gone: AtomicBool,
    /// The server is unreachable and being waited for (an open-loop level holds meanwhile).
    down: AtomicBool,
}

impl ServerWatch {
    fn new(base_url: &str, wait: Duration, tx: EventTx) -> Self {
        let addr = reqwest::Url::parse(base_url)
            .ok()
            .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
            .unwrap_or_default();
        Self {
            addr,
            url: base_url.to_string(),
            wait,
            tx,
            probe: tokio::sync::Mutex::new(()),
            gone: AtomicBool::new(false),
            down: AtomicBool::new(false),
        }
    }

    async fn reachable(&self) -> bool {
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
    async fn wait_for_server(&self, why: &str) -> bool {
        let _one_prober = self.probe.lock().await;
        if self.gone.load(Ordering::Relaxed) {
            return false;
        }
        if self.reachable().await {
            return true;
        }
        self.down.store(true, Ordering::Relaxed);
        let back = self.wait_down(why).await;
        self.down.store(false, Ordering::Relaxed);
        back
    }

    /// The countdown of [`ServerWatch::wait_for_server`] once the server did not answer.
    async fn wait_down(&self, why: &str) -> bool {
        let _ = self.tx.send(Event::Warning(format!(
            "the server at {} stopped accepting connections ({why}); waiting up to {:.0} s for it to come back",
            self.url,
            self.wait.as_secs_f64()
        )));
        let start = Instant::now();
        loop {
            let left = self.wait.saturating_sub(start.elapsed());
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

/// Prompts prepared before a level starts (or twice the concurrency, if more).
const PROMPTS_AHEAD: u32 = 1024;

/// A level's prepared requests, in order, shared by its workers.
type Queue = Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<(u32, RequestSpec)>>>;

/// The request for `spec`'s `i`-th prompt. At a multi-turn level, a turn's new user message
/// (see [`chat`]).
async fn make_request(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
) -> Result<RequestSpec, String> {
    if let Some((_, turn)) = spec.turn_of(i) {
        return chat::make_turn(factory, spec, i, turn).await;
    }
    if spec.kind != LevelKind::LongContext
        && let Some(d) = factory.dataset().cloned()
    {
        let e = d.pick(factory.seed(), spec.index, i);
        return dataset_request(factory, spec, e).await;
    }
    let prompt = factory
        .make_with_prefix(spec.input_tokens, spec.shared_prefix_tokens, spec.index, i)
        .await?;
    let mut r = RequestSpec::prompt(
        prompt.text,
        spec.input_tokens,
        prompt
            .counted_tokens
            .map(|n| (n, factory.counter().source())),
        spec.output_tokens,
    );
    r.cache_prompt = spec.shared_prefix_tokens > 0;
    Ok(r)
}

/// A request for dataset entry `e`: its first user message (after the shared prefix, if any)
/// and the output length it asks for, its reference reply's length, or the level's.
async fn dataset_request(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    e: &crate::workload::dataset::Entry,
) -> Result<RequestSpec, String> {
    let first = e
        .user_turns
        .first()
        .cloned()
        .unwrap_or_else(|| Arc::from(""));
    let text: Arc<str> = if spec.shared_prefix_tokens > 0 {
        let p = factory.shared_prefix(spec.shared_prefix_tokens).await?;
        Arc::from(format!("{} {first}", p.text))
    } else {
        first
    };
    let counted = factory.counter().count(&text).await?;
    let counted = (counted as i64 + factory.offset_tokens).max(0) as u64;
    let output = match (e.output_len, &e.reply) {
        (Some(n), _) => n,
        (None, Some(r)) => {
            (factory.counter().count(r).await?.max(1)).min(u64::from(u32::MAX)) as u32
        }
        (None, None) => spec.output_tokens,
    };
    let mut r = RequestSpec::prompt(
        text,
        counted,
        Some((counted, factory.counter().source())),
        output,
    );
    r.cache_prompt = spec.shared_prefix_tokens > 0;
    Ok(r)
}

/// What each closed-loop worker of a level holds: its slot, the client, the level's queue and
/// channel, and what stops or pauses it.
/// What a level's lanes share, borrowed while its workers are spawned.
struct LaneCtx<'a> {
    queue: &'a Queue,
    stop: &'a Arc<AtomicBool>,
    watch: &'a Arc<ServerWatch>,
    origin: Instant,
    cancel: &'a CancellationToken,
}

/// Connections to open before a level starts: its concurrency, or a rate level's second's
/// worth of arrivals (at most its cap); never more than its requests.
fn prewarm_connections(spec: &LevelSpec) -> u32 {
    let n = match spec.arrival {
        Some(a) => (a.request_rate.ceil().min(f64::from(u32::MAX)) as u32)
            .max(1)
            .min(a.max_concurrency.unwrap_or(u32::MAX)),
        None => spec.concurrency,
    };
    n.min(spec.requests)
}

struct Lane {
    /// Which of the level's workers this is (stamped on its records).
    slot: u32,
    client: Client,
    queue: Queue,
    stop: Arc<AtomicBool>,
    watch: Arc<ServerWatch>,
    level: u32,
    origin: Instant,
    tx: EventTx,
    cancel: CancellationToken,
    control: watch::Receiver<Control>,
    grace: Duration,
}

impl Lane {
    /// The level was cancelled or stopped: send nothing more.
    fn halted(&self) -> bool {
        self.cancel.is_cancelled() || self.stop.load(Ordering::Relaxed)
    }

    async fn wait_while_paused(&mut self) {
        while self.control.borrow().paused && !self.cancel.is_cancelled() {
            tokio::select! {
                r = self.control.changed() => if r.is_err() { break },
                () = self.cancel.cancelled() => break,
            }
        }
    }

    /// Announces request `index` on this lane's slot and sends it now: in a closed loop the slot
    /// freed just now, so this is `t_sched`. Once the level is cancelled it has the grace period
    /// to finish, then ends as cancelled. `reply` keeps the generated text when given.
    async fn send(
        &self,
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
            slot: self.slot,
        });
        let grace = self.grace;
        let cancel = self.cancel.clone();
        let mut rec = tokio::select! {
            r = self.client.send_with(spec, tag, reply) => r,
            () = async move { cancel.cancelled().await; tokio::time::sleep(grace).await } => {
                client::cancelled_record(spec, tag, sched)
            }
        };
        rec.slot = Some(self.slot);
        rec
    }

    /// [`deliver`] through this lane.
    async fn deliver(&self, rec: crate::metrics::RequestRecord) {
        deliver(rec, &self.tx, &self.watch, &self.stop, &self.cancel).await;
    }
}

/// One closed-loop worker: takes the next request as soon as its previous one ends.
struct Worker {
    lane: Lane,
    long_context: bool,
}

impl Worker {
    async fn run(mut self) {
        loop {
            // Nothing left to send: end now, paused or not, so the level can finish.
            {
                let q = self.lane.queue.lock().await;
                if q.is_closed() && q.is_empty() {
                    return;
                }
            }
            self.lane.wait_while_paused().await;
            if self.lane.halted() {
                return;
            }
            let Some((i, spec)) = self.lane.queue.lock().await.recv().await else {
                return;
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
