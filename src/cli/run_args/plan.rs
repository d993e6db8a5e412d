//! `servetop run`'s Plan flags: the levels (concurrency, request rates, the long-context
//! ladder), their lengths and request counts, and how the run starts.

use std::path::PathBuf;

use clap::Args;

use crate::cli::values::{List, Rates, Shapes, count, count_u32, list, rates, shapes};

/// The plan: which levels run, with what lengths and how many requests.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Plan")]
pub struct PlanArgs {
    /// Closed-loop levels: 1,2,4 or 1-8 or 1-128*2, or none.
    ///
    /// A range steps by 1 (1-8), by a step of its own (10-100/10) or doubles (1-128*2).
    #[arg(long, value_name = "LIST", default_value = "1,2,4,8,16,32,64,100", value_parser = list)]
    pub concurrency: List,
    /// Open-loop request rates after the sweep (req/s), or none.
    ///
    /// Requests are sent on a precomputed schedule whether or not earlier ones finished
    /// (1,2,4,8; 0.5,1.5; 1-16*2). `inf` (last) sends a level's requests all at once, as many
    /// as --requests-per-level N says. Use `--concurrency none` for a rate sweep alone.
    #[arg(long, value_name = "LIST", default_value = "none", value_parser = rates)]
    pub request_rate: Rates,
    /// Gaps between arrivals at a rate level: gamma with this shape and mean 1/rate. 1 is
    /// Poisson; below 1 burstier (0.5 doubles the gap variance); above 1 more even.
    #[arg(long, value_name = "B", default_value = "1", hide_short_help = true)]
    pub burstiness: f64,
    /// Seconds over which each rate level's rate rises linearly from 0 to its target.
    #[arg(long, value_name = "S", default_value = "0", hide_short_help = true)]
    pub ramp_up: f64,
    /// Most requests in flight at a rate level; requests due beyond it wait in the client, and
    /// that wait is measured as client queue time (`t_send - t_sched`) [default: no cap].
    #[arg(long, value_name = "N", hide_short_help = true)]
    pub max_concurrency: Option<u32>,
    /// Run every level N times, interleaved (the whole plan, then again), and report each
    /// figure's mean and 95 % confidence interval across the runs (`ci95` in results.json, ±
    /// in the tables); a level whose runs disagree beyond their own intervals is flagged.
    #[arg(long, value_name = "N", default_value = "1", hide_short_help = true)]
    pub repeat: u32,
    /// Input tokens per sweep request (exact).
    ///
    /// Counted with the server's tokenizer.
    #[arg(long, value_name = "N", default_value = "1000", value_parser = count)]
    pub input_len: u64,
    /// Output tokens per sweep request (`ignore_eos`).
    ///
    /// Sent with `ignore_eos`, so every request generates them all.
    #[arg(long, value_name = "N", default_value = "500", value_parser = count_u32)]
    pub output_len: u32,
    /// Several input/output shapes in one run: the sweep once per IN/OUT pair.
    ///
    /// `1000/500,8000/1000,200/2000` runs the concurrency sweep (and the rate levels) for each
    /// pair in turn, in place of --input-len and --output-len, each request exact in both; the
    /// long-context ladder runs once. Tables and charts give each shape as a series of its own;
    /// the first is the headline the findings are about.
    #[arg(
        long,
        value_name = "IN/OUT,...",
        value_parser = shapes,
        conflicts_with_all = ["input_len", "output_len"],
        hide_short_help = true
    )]
    pub shapes: Option<Shapes>,
    /// Measured requests a level: N, or Fx for F × C.
    ///
    /// Fx is at least --min-requests; at a rate level it means F seconds' worth (F × rate
    /// requests).
    #[arg(long, value_name = "N|Fx", default_value = "3x")]
    pub requests_per_level: String,
    /// Fewest measured requests per level when --requests-per-level is a multiple of C.
    #[arg(long, value_name = "N", default_value = "10", hide_short_help = true)]
    pub min_requests: u32,
    /// Unmeasured warmup requests before the first level (also calibrate prompt lengths).
    #[arg(long, value_name = "N", default_value = "1", hide_short_help = true)]
    pub warmup: u32,
    /// Long-context lengths, one request at a time, or none.
    ///
    /// Input tokens; k is ×1000.
    #[arg(long, value_name = "LIST", default_value = "30k,60k,100k", value_parser = list)]
    pub long_context: List,
    /// Output tokens per long-context request.
    #[arg(long, value_name = "N", default_value = "256", value_parser = count_u32)]
    pub long_context_output_len: u32,
    /// Continue an interrupted run in DIR (new prompts).
    ///
    /// It goes on from its first unfinished level, with the configuration it was started with
    /// (other measurement flags are ignored).
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Print the plan and exit without sending a request.
    ///
    /// The plan names the levels, requests and lengths, and the lengths the server's context
    /// cannot hold.
    #[arg(long, conflicts_with = "resume")]
    pub dry_run: bool,
    /// Start a plan of more than 20 levels without asking.
    ///
    /// Without it, servetop asks first on a terminal; headless it only warns.
    #[arg(long)]
    pub yes: bool,
    /// Requests per long-context length.
    #[arg(long, value_name = "N", default_value = "3", hide_short_help = true)]
    pub long_context_repeats: u32,
    /// Seed of the random prompt text (same seed, same prompts) [default: a new one each run,
    /// written to results.json, so a second run is not answered from the server's prefix cache].
    #[arg(long, value_name = "N", hide_short_help = true)]
    pub seed: Option<u64>,
}
