//! servetop: a live dashboard and headless runner for LLM-serving benchmarks.
//!
//! Data flows one way (see STYLE.md of the project):
//!
//! ```text
//! runner ── workers ──► RequestRecord (one per finished request) ─┐
//! runner ──► LevelStarted / LevelFinished / Phase / Sent ─────────┤ one Event enum,
//! signals / keys ──► cancel token, Control watch ─────────────────┘ one unbounded channel
//!                              ▼
//!        Session::apply (single owner): histograms, summaries, run directory
//!                              ▼
//!        headless printer / dashboard render / exports read RunSummary
//! ```
//!
//! Modules:
//! - [`cli`], [`commands`]: the command line and the three commands (`run`, `sim`, `demo`).
//! - [`config`]: the validated run configuration written into every result file.
//! - [`event`]: the one enum crossing the channel.
//! - [`workload`]: sweep and long-context plans, prompts of exact token length.
//! - [`client`]: engine detection and streaming requests folded into records.
//! - [`runner`]: warmup and closed-loop levels, cancellation, pause and skip.
//! - [`search`]: the SLO capacity search (`--search rate`): the next-rate rule and its report.
//! - [`metrics`]: METRICS.md maths: records, HDR distributions, per-level summaries.
//! - [`session`], [`summary`]: the state folded from events; the one summary type.
//! - [`export`]: run directory, results.json, summary.md.
//! - [`headless`]: progress lines and final tables.
//! - [`telemetry`]: GPUs (NVML, DCGM) and the engine's `/metrics`, sampled beside the run.
//! - [`sim`]: the built-in simulated inference server.
//! - [`bench`]: the client benchmark against the firehose (`servetop bench-client`).
//! - [`sse`]: server-sent events framing without a per-event allocation.
//! - [`soak`]: the long-run memory benchmark (`servetop soak`).

pub mod bench;
pub mod cli;
pub mod client;
pub mod commands;
pub mod config;
pub mod event;
pub mod export;
pub mod headless;
pub mod metrics;
pub mod runner;
pub mod search;
pub mod session;
pub mod sim;
pub mod soak;
pub mod sse;
pub mod summary;
pub mod telemetry;
pub mod tui;
pub mod workload;
