//! `servetop run`'s flags: one group per `--help` heading, each in its own file, flattened
//! into [`RunArgs`] in the order the headings are listed.

mod plan;
mod server;
mod sessions;
mod slo;
mod telemetry;
mod timeouts;
mod workload;

use clap::Args;

use super::{OutputArgs, ShardArgs, TraceArgs};
pub use plan::PlanArgs;
pub use server::ServerArgs;
pub use sessions::SessionArgs;
pub use slo::SloArgs;
pub use telemetry::TelemetryArgs;
pub use timeouts::TimeoutArgs;
pub use workload::WorkloadArgs;

/// `servetop run`: every flag, by heading.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub clock: ShardArgs,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub sessions: SessionArgs,
    /// Run in the background, with no terminal: it survives this SSH session, its output goes
    /// to <run dir>/run.log, and `servetop attach` watches it. Returns once the run has started.
    #[arg(long, conflicts_with = "dry_run", help_heading = "Outputs")]
    pub detach: bool,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    #[command(flatten)]
    pub timeouts: TimeoutArgs,
    #[command(flatten)]
    pub slo: SloArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}
