//! `Session`: the single owner of a run's state. It folds every `Event` into the per-level
//! accumulators and the `RunSummary`, and keeps the run directory in step (compute in update).
//!
//! Both the headless printer and the dashboard drive a `Session`; neither computes statistics
//! of its own, so a number on screen and in a file cannot disagree.

use std::collections::BTreeMap;

use crate::client::Engine;
use crate::event::{Event, RunState};
use crate::export::RunFiles;
use crate::metrics::{FailureKind, LevelAccumulator, LevelStats, Slo};
use crate::summary::{LevelStatus, LevelSummary, RunSummary, now_rfc3339};
use crate::telemetry::per_level::LevelTelemetryAcc;
use crate::telemetry::{GpuSample, ServerSample, TelemetryRecord};
use crate::workload::{LevelKind, LevelSpec};

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
    files: Option<RunFiles>,
    slo: Option<Slo>,
    record_chunks: bool,
    /// The first file error, kept so the run goes on and the user is told once.
    pub io_error: Option<String>,
    /// The newest GPU and engine samples (for the telemetry panel).
    pub latest_gpu: Option<GpuSample>,
    pub latest_server: Option<ServerSample>,
    level_telemetry: BTreeMap<u32, LevelTelemetryAcc>,
}

impl Session {
    /// A session writing into `files` (None: in memory only, for tests).
    pub fn new(summary: RunSummary, files: Option<RunFiles>) -> Self {
        let slo = summary.config.slo;
        let record_chunks = summary.config.record_chunks;
        Self {
            summary,
            specs: Vec::new(),
            accs: BTreeMap::new(),
            progress: BTreeMap::new(),
            current: None,
            phase: "connecting".into(),
            files,
            slo,
            record_chunks,
            io_error: None,
            latest_gpu: None,
            latest_server: None,
            level_telemetry: BTreeMap::new(),
        }
    }

    /// The run directory, if writing.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.files.as_ref().map(RunFiles::dir)
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

    fn io<T>(&mut self, r: std::io::Result<T>) {
        if let Err(e) = r
            && self.io_error.is_none()
        {
            let msg = format!("writing results failed: {e}");
            self.summary.warnings.push(msg.clone());
            self.io_error = Some(msg);
        }
    }

    /// Rewrites results.json and summary.md now.
    pub fn save(&mut self) {
        self.summary.updated_at = now_rfc3339();
        if let Some(f) = self.files.as_mut() {
            let r = f.write_summary(&self.summary);
            self.io(r);
        }
    }

    /// Pushes buffered request lines to disk (the loops call it a few times a second; saving
    /// the summary flushes first, so results.json never counts a request the file lacks).
    pub fn flush(&mut self) {
        if let Some(f) = self.files.as_mut() {
            let r = f.flush();
            self.io(r);
        }
    }

    fn engine(&self) -> Engine {
        self.summary
            .server
            .as_ref()
            .map_or(Engine::Unknown, |s| s.engine)
    }

    /// Folds one event.
    pub fn apply(&mut self, ev: Event) {
        match ev {
            Event::RunStarted {
                server,
                backend,
                prompts,
                levels,
            } => self.run_started(server, backend, prompts, levels),
            Event::LevelAdded(spec) => self.add_level(spec),
            Event::Search(s) => {
                self.summary.search = Some(*s);
                self.save();
            }
            Event::Phase(p) => self.phase = p,
            Event::Calibrated(p) => self.summary.prompts = Some(p),
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
                self.save();
            }
            Event::Sent { level, slot } => {
                self.progress.entry(level).or_default().sent += 1;
                if let Some(acc) = self.accs.get_mut(&level) {
                    acc.note_slot(slot);
                }
            }
            Event::Request(r) => self.request(r),
            Event::LevelFinished { index, interrupted } => {
                self.finish_level(index, interrupted);
                if self.current == Some(index) {
                    self.current = None;
                }
                self.save();
            }
            Event::Telemetry(rec) => self.telemetry(rec),
            Event::Warning(w) => {
                if !self.summary.warnings.contains(&w) {
                    self.summary.warnings.push(w);
                }
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
                self.save();
            }
        }
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
        } else {
            // Resuming: the levels to run start again; finished ones keep their results.
            for spec in &levels {
                if let Some(l) = self.summary.level_mut(spec.index) {
                    *l = LevelSummary::planned(spec);
                }
            }
        }
        self.specs = levels;
        self.save();
    }

    /// A level starts: its fold, its telemetry window and its progress.
    fn level_started(&mut self, index: u32, origin_unix_us: u64) {
        self.current = Some(index);
        // Closed loop: one slot per worker. A rate level's slots come from a pool that
        // grows as needed; each is announced by its `Sent` event.
        let slots = self
            .specs
            .iter()
            .find(|s| s.index == index)
            .map_or(0, LevelSpec::workers);
        self.accs
            .insert(index, LevelAccumulator::new(self.slo).with_slots(slots));
        self.level_telemetry
            .insert(index, LevelTelemetryAcc::new(self.latest_server.clone()));
        self.progress.insert(index, LevelProgress::default());
        if let Some(l) = self.summary.level_mut(index) {
            l.status = LevelStatus::Running;
            l.started_at_unix_ms = Some(crate::telemetry::now_unix_ms());
            l.origin_unix_us = Some(origin_unix_us);
            self.phase = format!("running {}", l.label());
        }
        // results.json says which level is under way (for anyone watching the file).
        self.save();
    }

    /// A request ended: folded into its level (warmups are not), then appended to
    /// requests.jsonl.
    fn request(&mut self, mut r: Box<crate::metrics::RequestRecord>) {
        if !r.warmup {
            self.progress.entry(r.level).or_default().finished += 1;
            if let Some(acc) = self.accs.get_mut(&r.level) {
                acc.add(&r);
            }
        }
        if !self.record_chunks {
            r.chunks = Vec::new();
        }
        if let Some(f) = self.files.as_mut() {
            let res = f.append(&r);
            self.io(res);
        }
    }

    /// A level the plan did not have at the start (an SLO search probe): waiting, in its table.
    fn add_level(&mut self, spec: LevelSpec) {
        if self.summary.level(spec.index).is_some() {
            return;
        }
        let l = LevelSummary::planned(&spec);
        match spec.kind {
            LevelKind::Sweep => self.summary.sweep.push(l),
            LevelKind::Rate => self.summary.rates.push(l),
            LevelKind::LongContext => self.summary.long_context.push(l),
            LevelKind::MultiTurn => self.summary.multi_turn.push(l),
        }
        self.specs.push(spec);
        self.save();
    }

    fn telemetry(&mut self, rec: TelemetryRecord) {
        if let Some(f) = self.files.as_mut() {
            let r = f.append_telemetry(&rec);
            self.io(r);
        }
        let t = &mut self.summary.telemetry;
        let current = self.current.and_then(|i| self.level_telemetry.get_mut(&i));
        match rec {
            TelemetryRecord::Gpu(g) => {
                t.gpu_source = Some(g.source);
                t.gpu_reason = None;
                if let Some(acc) = current {
                    acc.add_gpu(&g);
                }
                self.latest_gpu = Some(g);
            }
            TelemetryRecord::Server(s) => {
                t.server_flavor = Some(s.flavor.clone());
                t.server_reason = None;
                if let Some(acc) = current {
                    acc.add_server(&s);
                }
                self.latest_server = Some(*s);
            }
            TelemetryRecord::GpuUnavailable { reason, .. } => t.gpu_reason = Some(reason),
            TelemetryRecord::ServerUnavailable { reason, .. } => t.server_reason = Some(reason),
        }
    }

    fn finish_level(&mut self, index: u32, interrupted: bool) {
        if let Some(l) = self.summary.level_mut(index) {
            l.finished_at_unix_ms = Some(crate::telemetry::now_unix_ms());
        }
        let tel = self.level_telemetry.remove(&index);
        let mut warning = None;
        if let (Some(l), Some(tel)) = (self.summary.level_mut(index), &tel) {
            l.server_metrics = tel.server();
            l.gpus = tel.gpus();
            l.spec_server = tel.spec();
            l.accept_length_server = l.spec_server.as_ref().map(|s| s.accept_length);
        }
        let stats = self.accs.get(&index).map(LevelAccumulator::stats);
        let slo_check = self.accs.get(&index).and_then(LevelAccumulator::slo_check);
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
        l.stats = stats;
        l.slo = slo_check;
    }
}
