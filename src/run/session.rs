//! `Session`: the single owner of a run's state. It folds every `Event` into the per-level
//! accumulators and the `RunSummary` (compute in update) and touches no file: what the fold
//! changed comes back as a [`Persist`], which the run's [`Sink`](super::sink::Sink) puts on disk.
//!
//! Both the headless printer and the dashboard drive a `Session`; neither computes statistics
//! of its own, so a number on screen and in a file cannot disagree.

use std::collections::BTreeMap;

use crate::client::Engine;
use crate::event::{Event, RunState};
use crate::metrics::{FailureKind, LevelAccumulator, LevelStats, RequestRecord, Slo};
use crate::summary::{LevelStatus, LevelSummary, RunSummary, now_rfc3339};
use crate::telemetry::per_level::LevelTelemetryAcc;
use crate::telemetry::{GpuSample, ServerSample, TelemetryRecord};
use crate::workload::{LevelKind, LevelSpec};

mod telemetry;

/// What folding one event changed on disk's side: the run directory's sink writes it.
#[derive(Debug)]
pub enum Persist {
    /// Nothing to write.
    Nothing,
    /// results.json and summary.md are due (a level started, ended or was added; the run
    /// started or ended).
    Summary,
    /// One line of requests.jsonl (chunks already dropped unless `--record-chunks`).
    Request(Box<RequestRecord>),
    /// One line of telemetry.jsonl.
    Telemetry(TelemetryRecord),
}

/// Live counters of one level.
#[derive(Clone, Debug, Default)]
pub struct LevelProgress {
    pub sent: u64,
    pub finished: u64,
}

/// State of a run, folded from events.
pub struct Session {
    pub summary: RunSummary,
    pub specs: Vec<LevelSpec>,
    accs: BTreeMap<u32, LevelAccumulator>,
    pub progress: BTreeMap<u32, LevelProgress>,
    pub current: Option<u32>,
    pub phase: String,
    slo: Option<Slo>,
    record_chunks: bool,
    /// The first file error the sink reported, kept so the run goes on and the user is told
    /// once.
    pub io_error: Option<String>,
    /// The newest GPU and engine samples (for the telemetry panel).
    pub latest_gpu: Option<GpuSample>,
    pub latest_server: Option<ServerSample>,
    level_telemetry: BTreeMap<u32, LevelTelemetryAcc>,
    /// The latest lines of the server servetop started (server.log holds them all).
    pub server_log: std::collections::VecDeque<String>,
    /// servetop's own counters and histograms for `--metrics-listen`.
    prom: crate::export::prometheus::PromFold,
    /// GPU readings still count as idle: the runner has not begun to work (no phase yet).
    idle_open: bool,
    /// Σ over idle readings of all GPUs' power, and how many readings.
    idle_power: (f64, u64),
}

/// Server log lines a session keeps for the Log tab.
const SERVER_LOG_LINES: usize = 200;

impl Session {
    /// A session starting from `summary`.
    pub fn new(summary: RunSummary) -> Self {
        let slo = summary.config.slo;
        let record_chunks = summary.config.record_chunks;
        Self {
            summary,
            specs: Vec::new(),
            accs: BTreeMap::new(),
            progress: BTreeMap::new(),
            current: None,
            phase: "connecting".into(),
            slo,
            record_chunks,
            io_error: None,
            latest_gpu: None,
            latest_server: None,
            level_telemetry: BTreeMap::new(),
            server_log: std::collections::VecDeque::new(),
            idle_open: true,
            idle_power: (0.0, 0),
            prom: crate::export::prometheus::PromFold::default(),
        }
    }

    /// What the `/metrics` page shows now (`--metrics-listen`).
    pub fn prometheus(&self) -> crate::export::prometheus::PageState<'_> {
        let level = self.current.and_then(|i| {
            let l = self.summary.level(i)?;
            Some((i, l.kind.name(), l.label()))
        });
        crate::export::prometheus::PageState {
            fold: &self.prom,
            in_flight: self.current.map_or(0, |i| self.in_flight(i)),
            level,
            shard: self
                .summary
                .config
                .shard
                .map_or_else(String::new, crate::workload::shard::Shard::label),
            simulated: self.summary.simulated,
            finished: self.summary.state != RunState::Running,
        }
    }

    /// Requests of `level` in flight now.
    pub fn in_flight(&self, level: u32) -> u64 {
        self.progress
            .get(&level)
            .map_or(0, |p| p.sent.saturating_sub(p.finished))
    }

    /// Statistics of `level` so far (also while it runs).
    pub fn live_stats(&self, level: u32) -> Option<LevelStats> {
        self.accs.get(&level).map(LevelAccumulator::stats)
    }

    /// The fold of `level`'s requests (none for a level measured before a resume).
    pub fn accumulator(&self, level: u32) -> Option<&LevelAccumulator> {
        self.accs.get(&level)
    }

    /// The TTFT of `level` so far in `n` equal bins, in ms.
    pub fn live_ttft_bins(&self, level: u32, n: usize) -> Option<crate::metrics::dist::Bins> {
        self.accs.get(&level)?.ttft_bins(n)
    }

    /// A write to the run directory failed: the first failure becomes a warning in the
    /// summary and the message the dashboard shows; the run goes on.
    pub fn io_failed(&mut self, e: &std::io::Error) {
        if self.io_error.is_none() {
            let msg = format!("writing results failed: {e}");
            self.summary.warnings.push(msg.clone());
            self.io_error = Some(msg);
        }
    }

    /// The summary is about to be written: it says when.
    pub fn stamp(&mut self) -> Persist {
        self.summary.updated_at = now_rfc3339();
        Persist::Summary
    }

    fn engine(&self) -> Engine {
        self.summary
            .server
            .as_ref()
            .map_or(Engine::Unknown, |s| s.engine)
    }

    /// Folds one event; returns what the run directory must be told of it.
    pub fn apply(&mut self, ev: Event) -> Persist {
        match ev {
            Event::RunStarted {
                server,
                backend,
                prompts,
                levels,
            } => self.run_started(server, backend, prompts, levels),
            Event::LevelAdded(spec) => return self.add_level(*spec),
            Event::Search(s) => self.summary.search = Some(*s),
            Event::Phase(p) => {
                // The runner's first phase (warming up, or preparing the first level's
                // prompts) comes after its idle GPU reading: the GPUs are working from here.
                self.idle_open = false;
                self.phase = p;
                return Persist::Nothing;
            }
            Event::Calibrated(p) => {
                self.summary.prompts = Some(p);
                return Persist::Nothing;
            }
            Event::LevelStarted {
                index,
                origin_unix_us,
            } => self.level_started(index, origin_unix_us),
            Event::LevelSkipped {
                index,
                reason,
                raise_flag,
            } => {
                if let Some(l) = self.summary.level_mut(index) {
                    l.status = LevelStatus::Skipped;
                    l.reason = Some(reason);
                    l.raise_flag = raise_flag;
                }
                self.summary.compare_to_baseline();
                self.summary.refresh_findings();
            }
            Event::ServerCrashed { index, message } => {
                if let Some(l) = self.summary.level_mut(index) {
                    l.server_crash = Some(message);
                }
            }
            Event::CacheReset { level, outcome } => self.summary.note_cache_reset(level, outcome),
            Event::Sent { level, slot } => return self.sent(level, slot),
            Event::Request(r) => return self.request(r),
            Event::Outage {
                level,
                from_us,
                to_us,
            } => return self.outage(level, from_us, to_us),
            Event::LevelFinished {
                index,
                interrupted,
                at_unix_ms,
            } => {
                self.finish_level(index, interrupted, at_unix_ms);
                if self.current == Some(index) {
                    self.current = None;
                }
                self.summary.compare_to_baseline();
                self.summary.compare_structured();
                self.summary.summarize_repeats();
                self.summary.warn_short_levels();
                self.summary.warn_reasoning(index);
                self.summary.refresh_findings();
            }
            Event::Telemetry(rec) => return self.telemetry_event(rec),
            Event::ServerStarted {
                launch,
                context_limit,
            } => {
                self.summary.servers.push(launch);
                if let Some(s) = self.summary.server.as_mut() {
                    s.context_limit = context_limit;
                }
            }
            Event::ServerLog(lines) => {
                self.server_log.extend(lines);
                let over = self.server_log.len().saturating_sub(SERVER_LOG_LINES);
                self.server_log.drain(..over);
                return Persist::Nothing;
            }
            Event::Clock(c) => self.clock(c),
            Event::Warning(w) => {
                if !self.summary.warnings.contains(&w) {
                    self.summary.warnings.push(w);
                }
                return Persist::Nothing;
            }
            Event::RunFinished { state, error } => {
                self.summary.state = state;
                self.summary.error = error;
                self.phase = match state {
                    RunState::Finished => "finished".into(),
                    RunState::Interrupted => "interrupted".into(),
                    RunState::Aborted => "aborted".into(),
                    RunState::Running => "running".into(),
                };
            }
        }
        self.stamp()
    }

    /// Folds a telemetry record; telemetry.jsonl keeps the timer lag's summary, not every probe.
    fn telemetry_event(&mut self, mut rec: TelemetryRecord) -> Persist {
        self.telemetry(&rec);
        if let TelemetryRecord::Client(c) = &mut rec {
            c.lag_us = Vec::new();
        }
        Persist::Telemetry(rec)
    }

    /// The server's clock against this machine's: kept, and a skewed one flagged.
    fn clock(&mut self, c: crate::workload::clock::ClockOffset) {
        if c.skewed() {
            self.summary.warnings.push(format!(
                "this machine's clock is {:.1} s off the server's (± {:.1} s, from its Date headers): its levels start that far from the other shards' slots; sync it (chrony, NTP) before a sharded run",
                -c.offset_ms / 1000.0,
                c.uncertainty_ms / 1000.0
            ));
        }
        self.summary.clock_offset = Some(c);
    }

    /// The run has started: the server it found and the planned levels, as waiting rows (or,
    /// resuming, the levels still to run reset).
    fn run_started(
        &mut self,
        server: crate::client::ServerInfo,
        backend: crate::client::Backend,
        prompts: crate::workload::prompt::PromptMethod,
        levels: Vec<LevelSpec>,
    ) {
        self.summary.simulated |= server.simulated;
        self.summary.server = Some(server);
        self.summary.backend = Some(backend);
        self.summary.prompts = Some(prompts);
        if self.summary.levels().next().is_none() {
            let of = |kind: LevelKind| -> Vec<LevelSummary> {
                levels
                    .iter()
                    .filter(|l| l.kind == kind)
                    .map(LevelSummary::planned)
                    .collect()
            };
            self.summary.sweep = of(LevelKind::Sweep);
            self.summary.rates = of(LevelKind::Rate);
            self.summary.long_context = of(LevelKind::LongContext);
            self.summary.multi_turn = of(LevelKind::MultiTurn);
            self.summary.traces = of(LevelKind::Trace);
            self.summary.sessions = of(LevelKind::Sessions);
        } else {
            // Resuming: the levels to run start again; finished ones keep their results.
            for spec in &levels {
                if let Some(l) = self.summary.level_mut(spec.index) {
                    *l = LevelSummary::planned(spec);
                }
            }
        }
        self.specs = levels;
    }

    /// A level starts: its fold, its telemetry window and its progress.
    fn level_started(&mut self, index: u32, origin_unix_us: u64) {
        self.current = Some(index);
        // Closed loop: one slot per worker. A rate level's slots come from a pool that
        // grows as needed; each is announced by its `Sent` event.
        let tiers = self.summary.config.slo_tiers.clone();
        let acc = match self.specs.iter().find(|s| s.index == index) {
            Some(spec) => spec.accumulator(self.slo, tiers),
            None => LevelAccumulator::new(self.slo).with_tiers(tiers),
        }
        .with_natural_stop(self.summary.config.natural_stop)
        .with_percentiles(&self.summary.config.metric_percentiles);
        self.accs.insert(index, acc);
        self.level_telemetry.insert(
            index,
            LevelTelemetryAcc::new(self.latest_server.clone(), self.latest_gpu.clone()),
        );
        // GPU readings from here on are work, not idle.
        self.idle_open = false;
        self.progress.insert(index, LevelProgress::default());
        // On the shared clock, the server's: how far past its slot's start the level began
        // (this machine's clock plus the offset measured against the server's).
        let offset_ms = self
            .summary
            .clock_offset
            .map_or(0, |c| c.offset_us() / 1000);
        let late_ms = self
            .summary
            .config
            .clock
            .slot_start_unix_ms(index)
            .map(|start| (origin_unix_us / 1000) as i64 + offset_ms - start);
        // The newest server servetop started is the one this level measures.
        let server = self.summary.servers.len().checked_sub(1).map(|i| i as u32);
        let mut late_warning = None;
        if let Some(l) = self.summary.level_mut(index) {
            l.status = LevelStatus::Running;
            l.started_at_unix_ms = Some((origin_unix_us / 1000) as i64);
            l.origin_unix_us = Some(origin_unix_us);
            l.server_index = server;
            l.start_late_ms = late_ms;
            if let Some(ms) = late_ms.filter(|&ms| ms > 1000) {
                let w = format!(
                    "{}: started {:.1} s after its slot on the shared clock, so it sent for that much less; the run was not ready in time (give --start-at more lead, or a longer --drain-seconds for the prompts of the next level)",
                    l.label(),
                    ms as f64 / 1000.0
                );
                late_warning = Some(w);
            }
            self.phase = format!("running {}", l.label());
        }
        self.summary.warnings.extend(late_warning);
        // results.json says which level is under way (for anyone watching the file): the
        // caller saves after a level starts.
    }

    /// A request of `level` is about to be sent on `slot`.
    fn sent(&mut self, level: u32, slot: u32) -> Persist {
        self.progress.entry(level).or_default().sent += 1;
        if let Some(acc) = self.accs.get_mut(&level) {
            acc.note_slot(slot);
        }
        Persist::Nothing
    }

    /// `level`'s server was unreachable from `from_us` to `to_us`: folded into the level (its
    /// results are written when it ends).
    fn outage(&mut self, level: u32, from_us: u64, to_us: u64) -> Persist {
        if let Some(acc) = self.accs.get_mut(&level) {
            acc.add_outage(from_us, to_us);
        }
        Persist::Nothing
    }

    /// A request ended: folded into its level (warmups are not), then handed on for
    /// requests.jsonl.
    fn request(&mut self, mut r: Box<RequestRecord>) -> Persist {
        self.prom.observe(&r);
        if !r.warmup {
            self.progress.entry(r.level).or_default().finished += 1;
            if let Some(acc) = self.accs.get_mut(&r.level) {
                acc.add(&r);
            }
        }
        if !self.record_chunks {
            r.chunks = Vec::new();
        }
        Persist::Request(r)
    }

    /// A level the plan did not have at the start (an SLO search probe): waiting, in its table.
    fn add_level(&mut self, spec: LevelSpec) -> Persist {
        if self.summary.level(spec.index).is_some() {
            return Persist::Nothing;
        }
        let l = LevelSummary::planned(&spec);
        match spec.kind {
            LevelKind::Sweep => self.summary.sweep.push(l),
            LevelKind::Rate => self.summary.rates.push(l),
            LevelKind::LongContext => self.summary.long_context.push(l),
            LevelKind::MultiTurn => self.summary.multi_turn.push(l),
            LevelKind::Trace => self.summary.traces.push(l),
            LevelKind::Sessions => self.summary.sessions.push(l),
        }
        self.specs.push(spec);
        self.stamp()
    }

    fn finish_level(&mut self, index: u32, interrupted: bool, at_unix_ms: i64) {
        if let Some(l) = self.summary.level_mut(index) {
            l.finished_at_unix_ms = Some(at_unix_ms);
        }
        let tel = self.level_telemetry.remove(&index);
        let mut warning = None;
        if let (Some(l), Some(tel)) = (self.summary.level_mut(index), &tel) {
            l.server_metrics = tel.server();
            l.gpus = tel.gpus();
            l.spec_server = tel.spec();
            l.accept_length_server = l.spec_server.as_ref().map(|s| s.accept_length);
            l.client = tel.client();
        }
        let stats = self.accs.get(&index).map(LevelAccumulator::stats);
        self.level_energy(index, tel.as_ref(), stats.as_ref());
        let slo_check = self.accs.get(&index).and_then(LevelAccumulator::slo_check);
        let tier_checks = self
            .accs
            .get(&index)
            .map(LevelAccumulator::tier_checks)
            .unwrap_or_default();
        if let (Some(l), Some(st)) = (self.summary.level(index), &stats) {
            // Tokens per step (steps without a draft included) is what the client's tokens per
            // chunk measure; the accept length counts drafted steps only.
            let server = l
                .spec_server
                .as_ref()
                .map(|s| s.tokens_per_step.unwrap_or(s.accept_length));
            let verdict = crate::metrics::chunk_verdict(&st.scalars, server);
            warning = verdict.warning.map(|w| format!("{}: {w}", l.label()));
            if let Some(l) = self.summary.level_mut(index) {
                l.delivery_bursts = verdict.delivery_bursts;
            }
        }
        if let Some(w) = warning {
            self.summary.warnings.push(w);
        }
        if let Some(w) = self
            .summary
            .level(index)
            .and_then(crate::summary::findings::client_bound_warning)
        {
            self.summary.warnings.push(w);
        }
        let engine = self.engine();
        let Some(l) = self.summary.level_mut(index) else {
            return;
        };
        let (completed, failed) = stats
            .as_ref()
            .map_or((0, 0), |s| (s.scalars.completed, s.scalars.failed));
        let context_refusal = stats.as_ref().and_then(|s| {
            let f = s.scalars.failures.get(FailureKind::ContextTooLong.name())?;
            (f.count == s.scalars.failed).then(|| f.first_message.clone())
        });
        l.status = if interrupted {
            LevelStatus::Interrupted
        } else if completed == 0 && failed > 0 {
            if let Some(msg) = context_refusal {
                l.reason = Some(format!(
                    "the server refused the {}-token prompt as too long ({msg}); raise the limit with {} and restart the server",
                    l.input_len,
                    engine.context_flag()
                ));
                l.raise_flag = Some(engine.context_flag().to_string());
                LevelStatus::Skipped
            } else {
                LevelStatus::Failed
            }
        } else {
            LevelStatus::Done
        };
        // A time-bounded level's count is what it sent, not its ceiling.
        if l.seconds.is_some()
            && let Some(s) = &stats
        {
            let sent = s.scalars.completed + s.scalars.failed + s.scalars.cancelled;
            l.requests = sent.min(u64::from(u32::MAX)) as u32;
        }
        l.stats = stats;
        l.slo = slo_check;
        l.slo_tiers = tier_checks;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RunConfig;
    use crate::metrics::CountSource;
    use crate::metrics::record::{Outcome, TokenChunk};

    fn spec() -> LevelSpec {
        LevelSpec::new(0, LevelKind::Sweep, 1, (100, 4), 1)
    }

    fn record() -> Box<RequestRecord> {
        Box::new(RequestRecord {
            level: 0,
            index: 0,
            warmup: false,
            sched_at_us: 0,
            send_at_us: 0,
            end_at_us: 40_000,
            outcome: Outcome::Ok,
            planned_input_tokens: 100,
            input_tokens: 100,
            input_source: CountSource::Usage,
            output_tokens: 4,
            output_source: CountSource::Usage,
            chunk_source: CountSource::Usage,
            ttft_us: Some(10_000),
            e2e_us: Some(40_000),
            chunks: (0..4)
                .map(|i| TokenChunk::new(10_000 + i * 10_000, 1))
                .collect(),
            retries: 0,
            slot: Some(0),
            cached_tokens: None,
            turn: None,
            session: None,
            sub_agent: None,
            session_turns: None,
            tool_wait_ms: None,
            cache_ceiling_tokens: None,
            ttfc_us: None,
            reasoning_tokens: None,
            reasoning_source: None,
            first_tool_call_us: None,
            tool_calls: 0,
            held_reads: 0,
            first_held: false,
            finish: None,
            think_tags: false,
            lora: None,
            schema_valid: None,
            images: None,
            image_tokens: None,
        })
    }

    /// The fold says what each event changed on disk's side and writes nothing itself: a
    /// level's start and end are a summary save, a request is one line (its chunks dropped
    /// without `--record-chunks`), a phase is nothing.
    #[test]
    fn the_fold_hands_back_what_to_write() {
        let mut s = Session::new(RunSummary::new(RunConfig::minimal("http://x"), None));
        assert!(matches!(
            s.apply(Event::LevelAdded(Box::new(spec()))),
            Persist::Summary
        ));
        assert!(matches!(
            s.apply(Event::LevelAdded(Box::new(spec()))),
            Persist::Nothing
        ));
        assert!(matches!(
            s.apply(Event::Phase("warming up".into())),
            Persist::Nothing
        ));
        assert_eq!(s.phase, "warming up");
        let started = Event::LevelStarted {
            index: 0,
            origin_unix_us: 0,
        };
        assert!(matches!(s.apply(started), Persist::Summary));
        match s.apply(Event::Request(record())) {
            Persist::Request(r) => {
                assert!(r.chunks.is_empty());
                assert_eq!(r.output_tokens, 4);
            }
            other => panic!("a request must be one requests.jsonl line, got {other:?}"),
        }
        assert_eq!(s.live_stats(0).map(|st| st.scalars.completed), Some(1));
        let finished = Event::LevelFinished {
            index: 0,
            interrupted: false,
            at_unix_ms: 0,
        };
        assert!(matches!(s.apply(finished), Persist::Summary));
        assert_eq!(
            s.summary.level(0).map(|l| l.status),
            Some(LevelStatus::Done)
        );
    }

    /// A write that fails becomes one warning in the summary and the message the dashboard
    /// shows; a second failure adds nothing, and the fold goes on.
    #[test]
    fn a_failed_write_is_one_warning_and_the_run_goes_on() {
        let dir = std::env::temp_dir().join(format!("servetop-sink-{}", std::process::id()));
        let files = crate::export::RunFiles::create(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let mut sink = super::super::sink::Sink::new(Some(files));
        let mut s = Session::new(RunSummary::new(RunConfig::minimal("http://x"), None));
        sink.apply(&mut s, Event::LevelAdded(Box::new(spec())));
        sink.save(&mut s);
        let msg = s.io_error.clone().expect("the failed save is kept");
        assert!(msg.starts_with("writing results failed: "), "{msg}");
        assert_eq!(s.summary.warnings.iter().filter(|w| **w == msg).count(), 1);
        assert_eq!(s.specs.len(), 1);
    }
}
