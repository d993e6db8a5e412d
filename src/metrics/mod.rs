//! Measurement maths (docs/metrics.md): per-request records and formulas, HDR-backed distributions,
//! per-level accumulation and the level summary every screen and export reads.

pub mod chunks;
pub mod curves;
pub mod dist;
pub mod images;
mod in_flight;
pub mod level;
mod level_stats;
pub mod lora;
pub mod reasoning;
pub mod record;
mod session_list;
pub mod sessions;
pub mod slo;
pub mod slo_tiers;
pub mod steady;
pub mod timeline;
pub mod turns;

pub use chunks::{ChunkVerdict, chunk_verdict};
pub use dist::{Dist, DistStats};
pub use level::{
    FailureCount, LevelAccumulator, LevelDists, LevelScalars, LevelStats, OutageWindow,
};
pub use record::{
    ChunkCounting, CountSource, FailureKind, FinalCounts, Finish, Outcome, RequestRecord,
    TokenChunk, finalize_counts,
};
pub use slo::{MetricCheck, Slo, SloCheck};
pub use turns::TurnStats;

/// Microseconds since the Unix epoch (the wall clock, for lining up with other processes),
/// shifted by [`TEST_CLOCK_SKEW_ENV`] when a test sets it.
pub fn unix_us() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    now.saturating_add(test_clock_skew_us()).max(0) as u64
}

/// For tests only: milliseconds to add to this process's wall clock, as on a machine whose
/// clock is that far off (shards on one machine with clocks that disagree). servetop says so
/// when it is set.
pub const TEST_CLOCK_SKEW_ENV: &str = "SERVETOP_TEST_CLOCK_SKEW_MS";

/// [`TEST_CLOCK_SKEW_ENV`] in µs, read once (0 when unset or not a number).
pub fn test_clock_skew_us() -> i64 {
    static SKEW: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *SKEW.get_or_init(|| {
        std::env::var(TEST_CLOCK_SKEW_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(0, |ms| (ms * 1000.0).round() as i64)
    })
}
