//! servetop: a live dashboard and headless runner for LLM-serving benchmarks.
//!
//! Data flows one way (see STYLE.md of the project):
//!
//! ```text
//! cmd ──► run::start ──► runner ── workers ──► client ──► RequestRecord ─┐
//!              │         runner ──► LevelStarted / LevelFinished / Sent ──┤ one Event enum,
//!              └──► telemetry samplers ──► TelemetryRecord ───────────────┤ one unbounded
//! signals / keys ──► cancel token, Control watch                          │ channel
//!                                                                         ▼
//!        Session::apply (single owner): level folds, summaries ──► Persist ──► Sink: run dir files
//!                                    ▼
//!        run::headless printer │ tui (App folds, render is pure) │ export (charts, CSV, md)
//! ```
//!
//! Layers, top down (a module imports only from layers below it; nothing imports [`cmd`]):
//! - [`cmd`]: one file per command (`run`, `sim`, `demo`, `report`, `gpu`, `attach`, `tune`,
//!   `soak`, `bench-client`), flags in, exit code out.
//! - [`cli`]: the command line (clap) and flags → [`config::RunConfig`] / [`sim::SimConfig`].
//! - [`selfbench`]: servetop measuring itself: the client benchmark and the memory soak.
//! - [`tui`]: the dashboard: the `App` folds events, tabs render it.
//! - [`run`]: a running benchmark: [`run::start`] builds runner, telemetry and channel in one
//!   place; [`run::session`] folds the events (no files), [`run::sink`] writes what the fold
//!   hands back; the headless loop and its tables.
//! - [`summary`]: the one summary type, what every output is written from, and what is
//!   computed from it alone: [`summary::findings`] (what the numbers mean, with their caveats,
//!   numbered once for every output), [`summary::baseline`] (a previous run's levels and this run's
//!   change against them), [`summary::repeats`] (means and intervals across `--repeat`),
//!   [`summary::merge`] (shards folded into one run), [`summary::tune`] (`servetop tune`'s
//!   leaderboard, early stop and Pareto front, read from its configurations' runs).
//! - [`export`]: run directory, results.json, summary.md, CSV, PNG charts, screenshots, `report`.
//! - [`runner`]: warmup, closed-loop and open-loop levels, chats, the SLO search driver,
//!   cancellation, pause and skip.
//! - [`telemetry`]: GPUs (NVML, DCGM) and the engine's `/metrics`, sampled beside the run and
//!   reported through [`telemetry::Reports`] (the run's channel, as telemetry sees it).
//! - [`config`], [`event`]: the validated run configuration; the one enum crossing the channel.
//! - [`workload`]: level plans, prompts of exact token length, datasets, arrival schedules,
//!   the SLO search's plan, and the requests (jobs) the runner sends.
//! - [`client`]: engine detection, streaming requests folded into records, SSE, dialects.
//! - [`sim`]: the built-in simulated inference server (and the firehose).
//! - [`serve`]: a server servetop starts itself (`--serve`): launch, readiness, stop.
//! - [`metrics`]: METRICS.md maths: records, HDR distributions, per-level folds, SLOs, turns,
//!   the curves the charts plot.
//! - [`fmt`]: numbers as written on screen and in files.
//! - [`grammar`]: flag values as typed (`64k`, `1-128*2`, rates, `WxH`): a leaf, imports nothing.

pub mod cli;
pub mod client;
pub mod cmd;
pub mod config;
pub mod event;
pub mod export;
pub mod fmt;
pub mod grammar;
pub mod live;
pub mod metrics;
pub mod run;
pub mod runner;
pub mod selfbench;
pub mod serve;
pub mod sim;
pub mod summary;
pub mod telemetry;
pub mod tui;
pub mod workload;
