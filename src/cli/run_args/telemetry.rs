//! `servetop run`'s Telemetry and cost flags: the engine's metrics, the GPUs, and the price
//! of an hour.

use clap::Args;

/// Telemetry and cost: what is sampled beside the run, and what an hour costs.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Telemetry and cost")]
pub struct TelemetryArgs {
    /// USD per GPU hour: each level's cost per million output (and total) tokens, from its
    /// wall time and the GPUs sampled.
    #[arg(
        long,
        value_name = "USD",
        conflicts_with = "cost_per_hour",
        hide_short_help = true
    )]
    pub gpu_hour_cost: Option<f64>,
    /// USD per hour for the whole deployment, instead of per GPU.
    #[arg(long, value_name = "USD", hide_short_help = true)]
    pub cost_per_hour: Option<f64>,
    /// The deployment's GPU count, for the per-GPU figures (report.html's trade-off chart)
    /// when servetop sees no GPU (no NVML or DCGM here, or the server is on another host).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), hide_short_help = true)]
    pub gpus: Option<u32>,
    /// Keep every chunk's arrival time and token count in requests.jsonl.
    #[arg(long, hide_short_help = true)]
    pub record_chunks: bool,
    /// The percentiles of TTFT, TPOT, ITL and E2E the tables give, e.g. 50,90,95,99,99.9.
    ///
    /// As vLLM's bench --metric-percentiles: summary.md's sweep and rate tables give each of
    /// the four at these percentiles (instead of p50 and p99), and results.json has
    /// `p75_ttft_ms` and the like beside the percentiles it always has (p50 as `median`, p90,
    /// p95, p99, p99.9).
    #[arg(long, value_name = "LIST", value_parser = crate::cli::values::percentiles, hide_short_help = true)]
    pub metric_percentiles: Option<crate::cli::values::Percentiles>,
    /// The engine's Prometheus endpoint [default: <base-url>/metrics].
    #[arg(long, value_name = "URL", hide_short_help = true)]
    pub metrics_url: Option<String>,
    /// Do not scrape the engine's metrics.
    #[arg(long, hide_short_help = true)]
    pub no_metrics: bool,
    /// A DCGM exporter endpoint (e.g. `http://gpu-host:9400/metrics`) for GPUs on another host.
    #[arg(long, value_name = "URL", hide_short_help = true)]
    pub dcgm_url: Option<String>,
    /// Do not sample GPUs.
    #[arg(long, hide_short_help = true)]
    pub no_gpu: bool,
    /// Seconds between GPU samples.
    #[arg(long, value_name = "S", default_value = "1", hide_short_help = true)]
    pub gpu_interval: f64,
}
