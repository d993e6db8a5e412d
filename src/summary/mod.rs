//! `RunSummary`: the one summary type behind the screen, results.json, summary.md and charts.

use serde::{Deserialize, Serialize};

pub mod baseline;
mod cache_reset;
pub mod eta;
pub mod findings;
pub mod merge;
pub mod passes;
pub mod reasoning;
pub mod redact;
pub mod repeats;
pub mod slo_tiers;
pub mod structured;
pub mod tune;

use crate::client::{Backend, ServerInfo};
use crate::config::RunConfig;
use crate::event::RunState;
use crate::metrics::{LevelStats, SloCheck};
use crate::sim::SimConfig;
use crate::telemetry::GpuSource;
use crate::telemetry::per_level::{GpuLevelStats, ServerLevelStats, SpecLevelStats};
use crate::workload::prompt::PromptMethod;
use crate::workload::search::SearchSummary;
use crate::workload::{Arrival, LevelKind, LevelSpec};
use baseline::{Baseline, LevelKey};
pub use passes::{Pass, Passes};

/// Where a level stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelStatus {
    Waiting,
    Running,
    Done,
    /// Not run: too long for the server, or refused by it as too long.
    Skipped,
    /// Ran, but no request succeeded.
    Failed,
    /// Stopped by the user part-way.
    Interrupted,
}

impl LevelStatus {
    /// Lower-case name as in files.
    pub fn name(self) -> &'static str {
        match self {
            LevelStatus::Waiting => "waiting",
            LevelStatus::Running => "running",
            LevelStatus::Done => "done",
            LevelStatus::Skipped => "skipped",
            LevelStatus::Failed => "failed",
            LevelStatus::Interrupted => "interrupted",
        }
    }
}

/// One level in results.json: its plan, status and (once anything finished) its statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelSummary {
    pub index: u32,
    pub kind: LevelKind,
    /// Closed-loop workers; at a rate level its `--max-concurrency` (0: no cap).
    pub concurrency: u32,
    /// How requests arrive at a rate level: the configured `request_rate`, `burstiness`,
    /// `ramp_up_s` and `max_concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// Planned input tokens of a long-context level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    pub input_len: u64,
    pub output_len: u32,
    pub requests: u32,
    /// Leading tokens of every prompt shared by all of the level's requests.
    #[serde(default, skip_serializing_if = "crate::workload::is_zero")]
    pub shared_prefix_tokens: u64,
    /// The spread of its requests' input and output lengths around `input_len` and
    /// `output_len` (`--range-ratio`): each drawn from [⌊(1−R)·L⌋, ⌈(1+R)·L⌉].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_ratio: Option<f64>,
    /// The constraint its requests carried (`--response-format`: `json`, `json-schema` or
    /// `regex`): the constrained twin of the level before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<String>,
    /// A constrained level against its plain twin (`--response-format`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_overhead: Option<structured::StructuredOverhead>,
    /// A multi-turn level's conversations: turns, and tokens per follow-up message (at a
    /// session level, per tool result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<crate::workload::Conversation>,
    /// A session level's tool waits between turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_wait: Option<crate::workload::sessions::ToolWait>,
    /// A session level's think time before a user's next session (`--think-time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<crate::workload::sessions::ToolWait>,
    /// The trace a trace level replays: file, format, speedup, duration, offered rate and the
    /// prefix-cache hit rate its `hash_ids` imply (`input_len`/`output_len` are its means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::workload::trace::TraceLevel>,
    /// Which of its level's `--repeat` runs this is (`n` of `of`; `first`: the first's index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<crate::workload::Repeat>,
    /// The kind of its prompts (`--content`): the pass of that kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<crate::workload::content::ContentKind>,
    /// The dataset category its requests were drawn from (`--categories`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Its input/output pair (`--shapes`): the shape of its pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<crate::workload::shapes::Shape>,
    /// The thinking budget its requests carried (`--thinking-budget`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// With `--repeat`: each figure's mean over the level's finished runs, its 95 % interval
    /// (Student's t over the runs' values; two runs at least), and the figures whose runs
    /// disagree beyond their own intervals. The same on every run of the level.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub repeat_mean: std::collections::BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub ci95: std::collections::BTreeMap<String, [f64; 2]>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats_disagree: Vec<String>,
    pub status: LevelStatus,
    pub reason: Option<String>,
    /// The server flag that would let a skipped length run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raise_flag: Option<String>,
    /// When the level started and ended (Unix ms), to place it on telemetry timelines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_unix_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_unix_ms: Option<i64>,
    /// The level's time zero in µs since the Unix epoch: a record's `send_at_us` and chunk
    /// times count from here, so they can be lined up with server logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_unix_us: Option<u64>,
    /// Speculative accept length the server reports for this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_length_server: Option<f64>,
    /// How the server figure was obtained, acceptance rate and per-position rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_server: Option<SpecLevelStats>,
    /// Which of the run's `servers` (the ones servetop started) measured this level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_index: Option<u32>,
    /// The server servetop started exited during this level: how, with its last log lines
    /// (`server exited with code 137; last log lines: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_crash: Option<String>,
    /// What clearing the server's prefix cache before this level came to (`--reset-cache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_reset: Option<crate::client::CacheReset>,
    /// The client's tokens per chunk above 1 are delivery bursts, not speculative drafts (the
    /// server reports no speculation, or tokens per step that disagree):
    /// `accept_length_client` is then not shown as an accept length.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delivery_bursts: bool,
    /// The engine's own load over the level (from its /metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<ServerLevelStats>,
    /// Each GPU over the level.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuLevelStats>,
    /// The level's energy and cost (`energy_j`, `joules_per_output_token`, …).
    #[serde(flatten, default)]
    pub energy: crate::telemetry::energy::LevelEnergy,
    /// servetop's own load over the level (`client_cpu_share`, `client_timer_lag_p99_ms`, …).
    #[serde(flatten, default)]
    pub client: crate::telemetry::per_level::ClientLevelStats,
    /// The level against the SLO at its percentile (with `--slo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloCheck>,
    /// The level against each `--slo-tier`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_tiers: Vec<crate::metrics::slo_tiers::TierCheck>,
    /// Seconds the level sent requests for (`--level-seconds`); `requests` is then what it
    /// sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// The share of the level this process ran (`--shard I/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::workload::shard::Shard>,
    /// How late the level started past its slot on the shared clock (`--start-at`), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_late_ms: Option<i64>,
    #[serde(flatten)]
    pub stats: Option<LevelStats>,
}

impl LevelSummary {
    /// The client-side accept length to show as one: tokens per chunk, unless they are delivery
    /// bursts.
    pub fn accept_length_client(&self) -> Option<f64> {
        if self.delivery_bursts {
            return None;
        }
        self.stats.as_ref()?.scalars.accept_length_client
    }

    /// The kind of its prompts as outputs name it: its `--content` kind, or its dataset
    /// category (`--categories`); none for a level of neither.
    pub fn content_name(&self) -> Option<&str> {
        self.content
            .map(crate::workload::content::ContentKind::name)
            .or(self.category.as_deref())
    }

    /// A waiting level from its plan.
    pub fn planned(spec: &LevelSpec) -> Self {
        Self {
            index: spec.index,
            kind: spec.kind,
            concurrency: spec.concurrency,
            arrival: spec.arrival,
            context_tokens: (spec.kind == LevelKind::LongContext).then_some(spec.input_tokens),
            input_len: spec.input_tokens,
            output_len: spec.output_tokens,
            requests: spec.requests,
            shared_prefix_tokens: spec.shared_prefix_tokens,
            range_ratio: spec.mix.range_ratio,
            response_format: spec
                .mix
                .response_format
                .as_ref()
                .map(|f| f.label().to_string()),
            structured_overhead: None,
            conversation: spec.conversation,
            tool_wait: spec.tool_wait,
            think_time: spec.think_time,
            trace: spec.trace.clone(),
            repeat: spec.repeat,
            content: spec.content,
            category: spec.category.clone(),
            shape: spec.shape,
            thinking_budget: spec.thinking_budget,
            repeat_mean: std::collections::BTreeMap::new(),
            ci95: std::collections::BTreeMap::new(),
            repeats_disagree: Vec::new(),
            status: LevelStatus::Waiting,
            reason: None,
            server_crash: None,
            cache_reset: None,
            energy: crate::telemetry::energy::LevelEnergy::default(),
            client: crate::telemetry::per_level::ClientLevelStats::default(),
            raise_flag: None,
            started_at_unix_ms: None,
            finished_at_unix_ms: None,
            origin_unix_us: None,
            accept_length_server: None,
            spec_server: None,
            server_index: None,
            delivery_bursts: false,
            server_metrics: None,
            gpus: Vec::new(),
            slo: None,
            slo_tiers: Vec::new(),
            seconds: spec.seconds,
            shard: spec.shard,
            start_late_ms: None,
            stats: None,
        }
    }

    /// A session level's users as a table's first column says them: its concurrent users,
    /// `0.5/s` for sessions started at a rate, `trace` for an agent trace's.
    pub fn users_cell(&self) -> String {
        match (&self.trace, self.arrival) {
            (Some(_), _) => "trace".into(),
            (None, Some(a)) => format!("{}/s", crate::fmt::fmt_rate(a.request_rate)),
            (None, None) => self.concurrency.to_string(),
        }
    }

    /// Where the level stands on the dimensions its label names (the same source of labels
    /// as the plan's, [`crate::workload::Place`]).
    pub fn place(&self) -> crate::workload::Place<'_> {
        crate::workload::Place {
            kind: self.kind,
            concurrency: self.concurrency,
            input_tokens: self.input_len,
            request_rate: self.request_rate(),
            turns: self.conversation.map(|c| c.turns),
            trace: self.trace.as_ref(),
            response_format: self.response_format.as_deref(),
            content: self.content,
            category: self.category.as_deref(),
            shape: self.shape,
            thinking_budget: self.thinking_budget,
            repeat: self.repeat,
        }
    }

    /// `C=8`, `4 req/s`, `30K ctx` or `4-turn chats, C=4`; `C=8 #2` for a second run.
    pub fn label(&self) -> String {
        self.place().label()
    }

    /// The label without the repeat's number (with the thinking budget's).
    pub fn base_label(&self) -> String {
        self.place().base_label()
    }

    /// The configured request rate of a rate level; a trace level's mean offered rate.
    pub fn request_rate(&self) -> Option<f64> {
        self.arrival
            .map(|a| a.request_rate)
            .or_else(|| self.trace.as_ref()?.offered_rate)
    }

    /// The level in a few characters, for a tick on a chart's axis: `C=64`, `60K`, `2.5/s`,
    /// `chats`.
    pub fn short_label(&self) -> String {
        self.place().short_label()
    }

    /// What identifies the level across runs (for the baseline comparison).
    pub fn key(&self) -> LevelKey {
        LevelKey {
            kind: self.kind,
            concurrency: self.concurrency,
            input_len: self.input_len,
            output_len: self.output_len,
            requests: self.requests,
            request_rate: self.request_rate(),
            content: self.content,
        }
    }
}

/// Name and version of the tool that wrote a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

impl Default for ToolInfo {
    fn default() -> Self {
        Self {
            name: "servetop".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// The whole run: configuration, server, levels, warnings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub tool: ToolInfo,
    pub state: RunState,
    pub started_at: String,
    pub updated_at: String,
    pub host: String,
    /// True when the server is servetop's simulator: no number here is from real hardware.
    pub simulated: bool,
    /// The simulator's configuration, when servetop started it (demo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulator: Option<SimConfig>,
    pub config: RunConfig,
    pub server: Option<ServerInfo>,
    pub backend: Option<Backend>,
    pub prompts: Option<PromptMethod>,
    pub sweep: Vec<LevelSummary>,
    /// The open-loop request-rate levels, in rate order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<LevelSummary>,
    pub long_context: Vec<LevelSummary>,
    /// The SLO capacity search: its probes, the answer and its bracket (`--search`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchSummary>,
    /// The multi-turn level (`--multi-turn`), with its statistics per turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub multi_turn: Vec<LevelSummary>,
    /// The replayed trace (`--trace`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<LevelSummary>,
    /// The agent-session levels (`--sessions`), one per number of concurrent users.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<LevelSummary>,
    /// What the run said it would do before its first request: the `plan:` line, and the
    /// `limits:` line when a length does not fit the server's context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<String>,
    pub warnings: Vec<String>,
    /// The server's clock minus this machine's, from its `Date` headers (scheduled runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset: Option<crate::workload::clock::ClockOffset>,
    /// A run merged from shards (`report --merge`): which it had, which were missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<crate::summary::merge::MergeInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The servers servetop started (`--serve`), in order: the command, its context and its
    /// time to ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<crate::serve::ServerLaunch>,
    /// Whether GPU and engine telemetry were available, from where, or why not.
    #[serde(default)]
    pub telemetry: TelemetryStatus,
    /// The previous run this one is compared against (`--baseline`), and each level's change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// The seed of the prompts a resumed run sent (`--resume`): a new one, so the server's
    /// prefix cache has not seen them; `config.seed` stays the first run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_with_seed: Option<u64>,
    /// What the numbers mean, recomputed from the rest whenever a level ends
    /// ([`findings::of`]; docs/metrics.md "Findings").
    #[serde(default)]
    pub findings: Vec<findings::Finding>,
    /// With `--slo-tier`: the most users or concurrent requests each tier holds
    /// ([`slo_tiers::answers`]), recomputed with the findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_tiers: Vec<slo_tiers::TierAnswer>,
    /// A configuration's run of a `servetop tune`: the tune's configurations so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune_progress: Option<tune::progress::TuneProgress>,
}

/// What telemetry the run had.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TelemetryStatus {
    pub gpu_source: Option<GpuSource>,
    /// Why there are no GPU readings (NVML's or the exporter's words).
    pub gpu_reason: Option<String>,
    /// `sglang`, `vllm` or `llamacpp`: whose metric names were read.
    pub server_flavor: Option<String>,
    /// Why there are no engine metrics.
    pub server_reason: Option<String>,
    /// All GPUs' power before the first request (the server's cost of being on, apart from
    /// its cost of working), in W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_power_w: Option<f64>,
}

/// Now as RFC 3339 UTC, seconds precision.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map_or_else(|_| String::new(), |t| t.to_string())
}

impl RunSummary {
    /// An empty summary of a run about to start.
    pub fn new(config: RunConfig, simulator: Option<SimConfig>) -> Self {
        let now = now_rfc3339();
        Self {
            tool: ToolInfo::default(),
            state: RunState::Running,
            started_at: now.clone(),
            updated_at: now,
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            simulated: simulator.is_some(),
            simulator,
            config,
            server: None,
            backend: None,
            prompts: None,
            sweep: Vec::new(),
            rates: Vec::new(),
            long_context: Vec::new(),
            search: None,
            multi_turn: Vec::new(),
            sessions: Vec::new(),
            traces: Vec::new(),
            plan: Vec::new(),
            warnings: Vec::new(),
            clock_offset: None,
            merged: None,
            error: None,
            servers: Vec::new(),
            telemetry: TelemetryStatus::default(),
            baseline: None,
            resumed_with_seed: None,
            findings: Vec::new(),
            slo_tiers: Vec::new(),
            tune_progress: None,
        }
    }

    /// The level with run index `index`.
    pub fn level_mut(&mut self, index: u32) -> Option<&mut LevelSummary> {
        self.sweep
            .iter_mut()
            .chain(self.rates.iter_mut())
            .chain(self.long_context.iter_mut())
            .chain(self.multi_turn.iter_mut())
            .chain(self.sessions.iter_mut())
            .chain(self.traces.iter_mut())
            .find(|l| l.index == index)
    }

    /// The level with run index `index`.
    pub fn level(&self, index: u32) -> Option<&LevelSummary> {
        self.levels().find(|l| l.index == index)
    }

    /// Recomputes the findings from the summary as it stands.
    pub fn refresh_findings(&mut self) {
        self.slo_tiers = slo_tiers::answers(self);
        self.findings = findings::of(self);
    }

    /// Adds what finished level `index` says of the server's reasoning and tool-call parsers
    /// ([`reasoning::warnings`]), each once.
    pub fn warn_reasoning(&mut self, index: u32) {
        let server = reasoning::Server {
            engine: self
                .server
                .as_ref()
                .map_or(crate::client::Engine::Unknown, |s| s.engine),
            reasoning_parser: self
                .server
                .as_ref()
                .and_then(|s| s.reasoning_parser.as_deref()),
            chat: self.backend.is_some_and(crate::client::Backend::is_chat),
        };
        let Some(l) = self.levels().find(|l| l.index == index) else {
            return;
        };
        for w in reasoning::warnings(&self.config, server, l) {
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
        }
    }

    /// Keeps the run's one warning about finished concurrency and rate levels too short to
    /// reach steady state up to date, naming each (`C=8 (0 of 8)`).
    pub fn warn_short_levels(&mut self) {
        use crate::metrics::steady::{SHORT_LEVELS, short_level, short_levels_warning};
        let short: Vec<String> = self
            .sweep
            .iter()
            .chain(&self.rates)
            .filter(|l| l.status == LevelStatus::Done)
            .filter_map(|l| short_level(&l.label(), l.stats.as_ref()?))
            .collect();
        self.warnings.retain(|w| !w.starts_with(SHORT_LEVELS));
        if !short.is_empty() {
            let timed = self.config.clock.level_seconds.is_some();
            self.warnings.push(short_levels_warning(&short, timed));
        }
    }

    /// The run as if only thinking budget `b` had been planned: its levels alone (with
    /// `--thinking-budget`, each budget's plan is a run of its own for charts and findings).
    #[must_use]
    pub fn only_budget(&self, b: u32) -> RunSummary {
        let mut s = self.keep(|l| l.thinking_budget == Some(b));
        s.config.thinking_budgets = vec![b];
        s
    }

    /// The run with only the levels `keep` accepts, in every part (the run as if only those
    /// had been planned).
    #[must_use]
    pub fn keep(&self, keep: impl Fn(&LevelSummary) -> bool) -> RunSummary {
        let mut s = self.clone();
        for part in [
            &mut s.sweep,
            &mut s.rates,
            &mut s.long_context,
            &mut s.multi_turn,
            &mut s.sessions,
            &mut s.traces,
        ] {
            part.retain(&keep);
        }
        s
    }

    /// Every level, to change: in the order of [`RunSummary::levels`].
    pub fn levels_mut(&mut self) -> impl Iterator<Item = &mut LevelSummary> {
        self.sweep
            .iter_mut()
            .chain(self.rates.iter_mut())
            .chain(self.long_context.iter_mut())
            .chain(self.multi_turn.iter_mut())
            .chain(self.sessions.iter_mut())
            .chain(self.traces.iter_mut())
    }

    /// What the per-GPU figures divide by: the most GPUs servetop saw over any level (`true`),
    /// else `--gpus` (`false`); none when it saw none and none was given.
    pub fn gpu_count(&self) -> Option<(u32, bool)> {
        let seen = self.levels().map(|l| l.gpus.len()).max().unwrap_or(0);
        match u32::try_from(seen) {
            Ok(n) if n > 0 => Some((n, true)),
            _ => self.config.gpus.map(|n| (n, false)),
        }
    }

    /// Every level: the concurrency sweep, the rate levels, the long-context ladder, the
    /// multi-turn level, the session levels, the trace.
    pub fn levels(&self) -> impl Iterator<Item = &LevelSummary> {
        self.sweep
            .iter()
            .chain(self.rates.iter())
            .chain(self.long_context.iter())
            .chain(self.multi_turn.iter())
            .chain(self.sessions.iter())
            .chain(self.traces.iter())
    }

    /// The first level each restarted server measured (a length that needed a larger context),
    /// with that server's context, in the order they ran.
    pub fn first_after_restarts(&self) -> Vec<(&LevelSummary, Option<u64>)> {
        let mut ran: Vec<&LevelSummary> = self
            .levels()
            .filter(|l| l.started_at_unix_ms.is_some())
            .collect();
        ran.sort_by_key(|l| l.started_at_unix_ms);
        let mut seen = std::collections::HashSet::from([0]);
        ran.into_iter()
            .filter_map(|l| {
                let i = l.server_index?;
                seen.insert(i).then(|| {
                    let ctx = self.servers.get(i as usize).and_then(|v| v.context_len);
                    (l, ctx)
                })
            })
            .collect()
    }
}
