//! The one `Event` enum that crosses the channel from producers (runner, workers, samplers,
//! input) to the single consumer that owns the app state.
//!
//! The channel is unbounded on purpose: producers never wait for the consumer (docs/STYLE.md rule 1),
//! so a slow terminal can never delay a request or skew a timestamp. Its volume is bounded by
//! design: one message per request sent and per request finished, plus a handful per level.

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::client::{Backend, ServerInfo};
use crate::metrics::RequestRecord;
use crate::workload::LevelSpec;
use crate::workload::prompt::PromptMethod;

/// How a run ended (or that it has not yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    /// Every planned level ran (some may have failed requests or been skipped).
    Finished,
    /// The user stopped it (q, Ctrl-C, SIGTERM).
    Interrupted,
    /// It could not go on (server gone, bad configuration).
    Aborted,
}

impl RunState {
    /// The `snake_case` name results.json uses.
    pub fn name(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Finished => "finished",
            RunState::Interrupted => "interrupted",
            RunState::Aborted => "aborted",
        }
    }
}

/// Everything that happens during a run. It crosses the channel in memory, and the run
/// directory's journal (`events.jsonl`) and the live feed as one JSON object a line: a viewer
/// folds exactly what the run folded.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum Event {
    /// The server is identified and the plan is fixed.
    RunStarted {
        server: ServerInfo,
        backend: Backend,
        prompts: PromptMethod,
        levels: Vec<LevelSpec>,
    },
    /// The warmup measured how many tokens the server adds to every prompt.
    Calibrated(PromptMethod),
    /// What the runner is doing between levels ("warming up", "preparing prompts").
    Phase(String),
    /// The plan grew by one level (a search probe), announced before it starts.
    LevelAdded(Box<LevelSpec>),
    /// The SLO search as it stands: sent when a probe is planned and when it is judged.
    Search(Box<crate::workload::search::SearchSummary>),
    /// A level's first request is about to be sent. `origin_unix_us` is the level's time zero
    /// (every record's `*_at_us` counts from it) on the wall clock, in µs since the Unix epoch.
    LevelStarted { index: u32, origin_unix_us: u64 },
    /// A level will not run, and why.
    LevelSkipped {
        index: u32,
        reason: String,
        raise_flag: Option<String>,
    },
    /// A request is about to be sent (for the in-flight count), on `slot`: the closed-loop
    /// worker, or at a rate level the slot it took from the pool (see `metrics::level`).
    Sent { level: u32, slot: u32 },
    /// A request finished (successfully or not).
    Request(Box<RequestRecord>),
    /// A level's last request ended; `at_unix_ms` when the runner said so (the fold reads no
    /// clock: a viewer folding this later sets the same time).
    LevelFinished {
        index: u32,
        interrupted: bool,
        at_unix_ms: i64,
    },
    /// A GPU or engine telemetry sample, or the reason there is none.
    Telemetry(crate::telemetry::record::TelemetryRecord),
    /// The server servetop owns was restarted (a length needed a larger context) and is ready:
    /// the levels from here on are measured by it.
    ServerStarted {
        launch: crate::serve::ServerLaunch,
        /// The context limit it reports now.
        context_limit: Option<u64>,
    },
    /// Level `level`'s server was unreachable from `from_us` (the end of the request that failed
    /// to connect) to `to_us` (when it accepted a connection again, or when the runner stopped
    /// waiting for it), in µs from the level's origin (docs/metrics.md "Per level", outage).
    Outage {
        level: u32,
        from_us: u64,
        to_us: u64,
    },
    /// The server servetop started exited during level `index`: how, with its last log lines.
    ServerCrashed { index: u32, message: String },
    /// What asking the server to clear its prefix cache before level `level` came to
    /// (`--reset-cache`).
    CacheReset {
        level: u32,
        outcome: crate::client::CacheReset,
    },
    /// Lines the server servetop started wrote to server.log since the last of these.
    ServerLog(Vec<String>),
    /// The server's clock against this machine's, read from its `Date` headers before a
    /// scheduled run (`--start-at`) starts.
    Clock(crate::workload::clock::ClockOffset),
    /// Something the user should know that is not a request failure.
    Warning(String),
    /// The run is over.
    RunFinished {
        state: RunState,
        error: Option<String>,
    },
}

/// Producer side of the event channel.
pub type EventTx = mpsc::UnboundedSender<Event>;
/// Consumer side of the event channel.
pub type EventRx = mpsc::UnboundedReceiver<Event>;

/// A fresh event channel.
pub fn channel() -> (EventTx, EventRx) {
    mpsc::unbounded_channel()
}
