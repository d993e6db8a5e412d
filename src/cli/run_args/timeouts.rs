//! `servetop run`'s Timeouts: when a request counts as timed out, and the grace after a quit.

use clap::Args;

/// Timeouts of a request, and the grace of the requests in flight.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Timeouts")]
pub struct TimeoutArgs {
    /// Seconds from sending to the first token before a request counts as a timeout.
    #[arg(long, value_name = "S", default_value = "600", hide_short_help = true)]
    pub first_token_timeout: f64,
    /// Seconds of stream silence after the first token before a request counts as a timeout.
    #[arg(long, value_name = "S", default_value = "60", hide_short_help = true)]
    pub idle_timeout: f64,
    /// Seconds in-flight requests get to finish after quit or skip.
    #[arg(long, value_name = "S", default_value = "3", hide_short_help = true)]
    pub grace: f64,
}
