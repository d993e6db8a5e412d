//! servetop: a live dashboard and headless runner for LLM-serving benchmarks.
//!
//! Data flows one way (docs/STYLE.md):
//!
//! ```text
//! cmd ──► run::start ──► runner ── workers ──► client ──► RequestRecord ─┐
//!              │         runner ──► LevelStarted / LevelFinished / Sent ──┤ one Event enum,
//!              └──► telemetry samplers ──► TelemetryRecord ───────────────┤ one unbounded
//! signals / keys ──► cancel token, Control watch                          │ channel
//!                                                                         ▼
//!        Session::apply (single owner): level folds, summaries ──► Persist ──► Sink: run dir,
//!                                    ▼                                    journal, live feed
//!        run::headless printer │ tui (App folds, render is pure) │ export (charts, CSV, md)
//! ```
//!
//! The modules stand on floors, top down; a module imports only from floors below its own, and
//! two on one floor do not import each other (`scripts/layers.py` checks it in CI; nothing
//! imports [`cmd`]):
//! 1. [`cmd`]: one file per command (`run`, `sim`, `demo`, `report`, `gpu`, `attach`, `tune`,
//!    `soak`, `bench-client`), flags in, exit code out; [`cmd::execute`] composes a run (server
//!    launch, run directory, live feed, dashboard or headless, stop, tables, charts, exit code).
//! 2. [`selfbench`]: servetop measuring itself: the client benchmark and the memory soak.
//! 3. [`cli`]: the command line (clap; `run`'s flags one group per `--help` heading) and flags →
//!    [`config::RunConfig`] / [`sim::SimConfig`];
//!    [`tui`]: the dashboard: the `App` folds events, tabs render it.
//! 4. [`run`]: a running benchmark: [`run::start`] builds runner, telemetry and channel in one
//!    place; [`run::session`] folds the events (no files), [`run::sink`] writes what the fold
//!    hands back and serves the live feed and the metrics page; the headless loop and its tables.
//! 5. [`live`]: the run's journal (`events.jsonl`), the live feed that serves it to viewers
//!    (`live.sock`, `--live-listen`), the viewer's reader, and the registry of runs going on.
//! 6. [`export`]: run directory, results.json, summary.md, CSV, charts (built as data, drawn as
//!    PNGs), report.html (one self-contained page), screenshots, `report`, a tune's files.
//! 7. [`summary`]: the one summary type, what every output is written from, and what is
//!    computed from it alone: [`summary::findings`] (what the numbers mean, with their caveats,
//!    numbered once for every output), [`summary::baseline`] (a previous run's levels, whether a
//!    plan can be compared with them, and this run's change against them), [`summary::repeats`]
//!    (means and intervals across `--repeat`), [`summary::merge`] (shards folded into one run),
//!    [`summary::redact`] (server commands' credentials written `***`),
//!    [`summary::tune`] (`servetop tune`'s leaderboard, early stop and Pareto front).
//! 8. [`runner`]: warmup, closed-loop and open-loop levels, chats, the SLO search driver,
//!    cancellation, pause and skip.
//! 9. [`event`]: the one enum crossing the channel.
//! 10. [`telemetry`]: GPUs (NVML, DCGM) and the engine's `/metrics`, sampled beside the run and
//!     reported through [`telemetry::Reports`] (the run's channel, as telemetry sees it).
//! 11. [`config`]: the validated run configuration.
//! 12. [`sim`]: the built-in simulated inference server (and the firehose); [`serve`]: a server
//!     servetop starts itself (`--serve`): launch, readiness, restarts, stop.
//! 13. [`workload`]: level plans, prompts of exact token length, datasets, arrival schedules,
//!     the SLO search's plan, and the requests (jobs) the runner sends.
//! 14. [`client`]: engine detection, streaming requests folded into records, SSE, dialects.
//! 15. [`metrics`]: the maths of docs/metrics.md: records, HDR distributions, per-level folds,
//!     SLOs, turns, the curves the charts plot.
//! 16. [`fmt`]: numbers as written on screen and in files; [`grammar`]: flag values as typed
//!     (`64k`, `1-128*2`, rates, `WxH`), read by both [`cli`] and [`workload`].

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
