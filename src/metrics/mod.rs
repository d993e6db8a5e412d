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

/// Microseconds since the Unix epoch (the wall clock, for lining up with other processes).
pub fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}
