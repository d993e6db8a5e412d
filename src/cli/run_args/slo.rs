//! `servetop run`'s SLO and capacity search flags: the service-level objectives and the
//! search for the highest request rate, or the most concurrent requests, that meet them.

use clap::Args;

/// The SLO and the capacity search.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "SLO and capacity search")]
pub struct SloArgs {
    /// SLOs in ms, e.g. ttft:2000,tpot:50.
    ///
    /// The metrics: ttft, tpot, itl and e2el. Goodput counts the requests meeting each of TTFT,
    /// TPOT and E2E; a level meets the SLO when every metric's --slo-percentile is within its
    /// limit (failed requests count as misses).
    #[arg(long, value_name = "SPEC")]
    pub slo: Option<String>,
    /// The percentile a level must meet every --slo limit at (90, 99, p99.9).
    #[arg(long, value_name = "P", default_value = "90", hide_short_help = true)]
    pub slo_percentile: String,
    /// A named SLO tier, e.g. interactive=ttft:2000,tpot:50 (repeat for each tier).
    ///
    /// Every level is judged against each tier at --slo-percentile, as against --slo, and the
    /// run answers the most users (session levels) or concurrent requests (the sweep) each tier
    /// holds.
    #[arg(long, value_name = "NAME=SPEC", hide_short_help = true)]
    pub slo_tier: Vec<String>,
    /// Find the highest rate or concurrency meeting --slo.
    ///
    /// rate: the highest request rate, from a closed-loop throughput probe, then open-loop rate
    /// levels bisecting between a passing and a failing rate. concurrency: the most concurrent
    /// requests, from closed-loop levels bisecting between a passing and a failing concurrency
    /// (with --sessions, session levels of that many users), up to --max-concurrency. The search
    /// runs alone (no concurrency sweep, rate levels or long-context ladder).
    #[arg(long, value_name = "rate|concurrency")]
    pub search: Option<String>,
    /// Stop bisecting when the bracket [pass, fail] is this narrow: 5% (of the passing rate)
    /// or 0.5 (requests/s).
    #[arg(
        long,
        value_name = "X%|X",
        default_value = "5%",
        hide_short_help = true
    )]
    pub search_precision: String,
    /// Seconds' worth of requests per search probe (rate × S requests; a concurrency probe: S
    /// seconds at the last probe's pace).
    #[arg(long, value_name = "S", default_value = "30", hide_short_help = true)]
    pub search_seconds: f64,
    /// Fewest measured requests per search probe, so its percentile rests on enough of them.
    #[arg(long, value_name = "N", default_value = "100", hide_short_help = true)]
    pub search_min_requests: u32,
    /// Closed-loop workers of the rate search's throughput probe [default: --max-concurrency,
    /// else 64]; the concurrency search's first probe [default: a quarter of
    /// --max-concurrency, at most 64].
    #[arg(long, value_name = "N", hide_short_help = true)]
    pub search_probe_concurrency: Option<u32>,
}
