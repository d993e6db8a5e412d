//! What the charts plot of a level: one definition of each curve's value, read by the
//! dashboard's views (live, from the running level's fold) and by the PNG charts (from the
//! saved summary), so a line on screen and the line of the same name in a file cannot plot
//! different things.

use super::LevelStats;

/// A curve's value at one level.
pub type Y = fn(&LevelStats) -> Option<f64>;

/// The value of `y` at a level with results (none before its first completed request).
pub fn at(stats: Option<&LevelStats>, y: Y) -> Option<f64> {
    stats.filter(|s| s.scalars.completed > 0).and_then(y)
}

/// Aggregate output tokens per second.
pub const OUTPUT_TOK_S: Y = |s| Some(s.scalars.output_throughput);
/// Completed requests per second.
pub const REQUESTS_S: Y = |s| Some(s.scalars.request_throughput);
/// The rate requests went out at (a rate level).
pub const SENT_REQUESTS_S: Y = |s| s.scalars.achieved_request_rate;
/// Mean per-request decode speed, tokens per second.
pub const DECODE_TOK_S: Y = |s| s.dists.decode_tokens_per_s.as_ref().map(|d| d.mean);
/// Prefill speed, input tokens per second.
pub const PREFILL_TOK_S: Y = |s| s.scalars.prefill_tokens_per_s;
/// Mean time to first token, in seconds.
pub const TTFT_MEAN_S: Y = |s| s.dists.ttft_ms.as_ref().map(|d| d.mean / 1000.0);

/// The p50 and p99 curves of one latency distribution, in milliseconds.
#[derive(Clone, Copy)]
pub struct Percentiles {
    pub p50: Y,
    pub p99: Y,
}

/// Time to first token.
pub const TTFT_MS: Percentiles = Percentiles {
    p50: |s| s.dists.ttft_ms.as_ref().map(|d| d.p50),
    p99: |s| s.dists.ttft_ms.as_ref().map(|d| d.p99),
};
/// Time to the first token of the answer (after the thinking).
pub const TTFC_MS: Percentiles = Percentiles {
    p50: |s| s.dists.ttfc_ms.as_ref().map(|d| d.p50),
    p99: |s| s.dists.ttfc_ms.as_ref().map(|d| d.p99),
};
/// Inter-token latency, per token.
pub const ITL_MS: Percentiles = Percentiles {
    p50: |s| s.dists.itl_ms.as_ref().map(|d| d.p50),
    p99: |s| s.dists.itl_ms.as_ref().map(|d| d.p99),
};
/// Time per output token.
pub const TPOT_MS: Percentiles = Percentiles {
    p50: |s| s.dists.tpot_ms.as_ref().map(|d| d.p50),
    p99: |s| s.dists.tpot_ms.as_ref().map(|d| d.p99),
};
/// Time a request waited in the client past its scheduled send.
pub const CLIENT_QUEUE_MS: Percentiles = Percentiles {
    p50: |s| s.dists.client_queue_ms.as_ref().map(|d| d.p50),
    p99: |s| s.dists.client_queue_ms.as_ref().map(|d| d.p99),
};
