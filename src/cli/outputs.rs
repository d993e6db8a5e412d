//! Output flags shared by `servetop run` and `servetop demo`: the run directory, the dashboard
//! or progress lines, the live feeds, the charts and a baseline to compare with.

use std::path::PathBuf;

use clap::Args;

use super::values::parse_size;
use crate::grammar::parse_percent as percent;

/// Options shared by `run` and `demo`.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Outputs")]
pub struct OutputArgs {
    /// Run directory (default: runs/<UTC time>-<model>/).
    ///
    /// It holds requests.jsonl, results.json, summary.md and charts/. A directory that holds
    /// a run already is refused (--resume DIR finishes that run).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Progress lines instead of the dashboard.
    ///
    /// Tables are printed too; automatic when stdout is not a terminal.
    #[arg(long)]
    pub headless: bool,
    /// Dashboard frames per second (lower it over a slow link).
    #[arg(long, default_value = "10", hide_short_help = true)]
    pub fps: f64,
    /// Serve servetop's own Prometheus metrics at `http://ADDR/metrics` while the run goes
    /// (`servetop_` requests by outcome, tokens, TTFT/ITL/TPOT/E2E histograms, in flight,
    /// level), e.g. 0.0.0.0:9464 or just 9464.
    #[arg(long, value_name = "ADDR", hide_short_help = true)]
    pub metrics_listen: Option<String>,
    /// Also serve the run's live feed on TCP at ADDR (`HOST:PORT`, or a port on 127.0.0.1), for
    /// `servetop attach --connect ADDR`. Read-only: stopping, pausing and skipping are for
    /// viewers on the run directory's live.sock. The feed has no API key in it; anyone who can
    /// reach ADDR can watch the run.
    #[arg(long, value_name = "ADDR", hide_short_help = true)]
    pub live_listen: Option<String>,
    /// Size of the PNG charts written into <run dir>/charts/.
    #[arg(long, value_name = "WxH", default_value = "1600x900", value_parser = parse_size, hide_short_help = true)]
    pub chart_size: (u32, u32),
    /// Compare with a previous run (directory or results.json).
    ///
    /// Its curves are drawn dimmed beside this run's, the tables get Δ% columns (out tok/s,
    /// TTFT p50, TPOT p50) for the levels both runs measured, and results.json and summary.md
    /// keep each level's change.
    #[arg(long, value_name = "RUN_DIR_OR_RESULTS_JSON")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit with code 3 when a level is worse than the baseline's by more
    /// than PCT percent (out tok/s lower, or TTFT or TPOT p50 higher), or the baseline
    /// measured it and this run did not.
    #[arg(long, value_name = "PCT", requires = "baseline", value_parser = percent, hide_short_help = true)]
    pub fail_on_regression: Option<f64>,
}
