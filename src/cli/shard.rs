//! Time-bounded levels on a shared clock and one machine's share of a run: `--level-seconds`,
//! `--drain-seconds`, `--start-at`, `--shard I/N` (or `--shards N` in a Kubernetes Indexed Job).

use clap::Args;

use crate::grammar::parse_start_at;
use crate::workload::clock::{DEFAULT_DRAIN_S, LevelClock};
use crate::workload::shard::Shard;

/// The longest a level or its drain may be, seconds.
const WEEK_S: f64 = 604_800.0;

/// How long levels last, when they start, and which share of the run this process sends.
#[derive(Debug, Args, Clone, Default)]
pub struct ShardArgs {
    /// Every level sends requests for S seconds (instead of its request count), then gives
    /// the requests in flight --drain-seconds to finish; useful alone, and what lets shards
    /// change levels together.
    #[arg(long, value_name = "S", help_heading = "Plan", hide_short_help = true)]
    pub level_seconds: Option<f64>,
    /// Seconds after a time-bounded level stops sending that its requests in flight get to
    /// finish; those still running then are cancelled (counted as cancelled, not failed).
    #[arg(
        long,
        value_name = "S",
        requires = "level_seconds",
        help_heading = "Plan",
        hide_short_help = true
    )]
    pub drain_seconds: Option<f64>,
    /// Start the first level at TIME, and level k at TIME + k × (--level-seconds +
    /// --drain-seconds), whatever the others do: an RFC 3339 time (2026-12-02T10:00:00Z), Unix
    /// seconds (@1796205600), or +S seconds from now. Shards given the same TIME change levels
    /// together with no coordinator.
    #[arg(
        long,
        value_name = "TIME",
        requires = "level_seconds",
        help_heading = "Distributed (several client machines)",
        hide_short_help = true
    )]
    pub start_at: Option<String>,
    /// Run shard I of N (I from 0): C/N of each level's workers, rate/N of each rate level
    /// with its own arrivals, every Nth request of a dataset or trace. Each shard writes its
    /// own run directory; `servetop report --merge DIR...` makes one run of them. Needs
    /// --start-at and --level-seconds.
    #[arg(
        long,
        value_name = "I/N",
        conflicts_with = "shards",
        help_heading = "Distributed (several client machines)",
        hide_short_help = true
    )]
    pub shard: Option<String>,
    /// Run one of N shards, the index from `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job's).
    #[arg(
        long,
        value_name = "N",
        help_heading = "Distributed (several client machines)",
        hide_short_help = true
    )]
    pub shards: Option<u32>,
}

impl ShardArgs {
    /// The level clock, checked (`now_ms`: this machine's clock, for `+S`).
    pub fn clock(&self, now_ms: i64) -> Result<LevelClock, String> {
        if let Some(s) = self.level_seconds
            && !(s.is_finite() && s > 0.0 && s <= WEEK_S)
        {
            return Err(format!(
                "--level-seconds {s}: must be more than 0 seconds and at most a week ({WEEK_S})"
            ));
        }
        let drain_s = self.drain_seconds.unwrap_or(DEFAULT_DRAIN_S);
        if !(drain_s.is_finite() && (0.0..=WEEK_S).contains(&drain_s)) {
            return Err(format!(
                "--drain-seconds {drain_s}: must be 0 seconds or more, at most a week ({WEEK_S})"
            ));
        }
        Ok(LevelClock {
            level_seconds: self.level_seconds,
            drain_s,
            start_at_unix_ms: self
                .start_at
                .as_deref()
                .map(|s| parse_start_at(s, now_ms))
                .transpose()?,
        })
    }

    /// The shard this process is (None: the whole run). Shards need one absolute start:
    /// `+S` counts from each machine's own start.
    pub fn shard(&self) -> Result<Option<Shard>, String> {
        let shard = self.parse_shard()?;
        if let (Some(sh), Some(at)) = (shard, self.start_at.as_deref())
            && sh.count > 1
            && at.trim().starts_with('+')
        {
            return Err(format!(
                "--start-at {at} with --shard: +S counts from each machine's own start; give every shard the same absolute time (2026-12-02T10:00:00Z or @unix seconds)"
            ));
        }
        Ok(shard)
    }

    fn parse_shard(&self) -> Result<Option<Shard>, String> {
        match (&self.shard, self.shards) {
            (Some(s), _) => Shard::parse(s).map(Some),
            (None, Some(n)) => {
                let index = std::env::var("JOB_COMPLETION_INDEX").ok();
                Shard::from_env(n, index.as_deref()).map(Some)
            }
            (None, None) => Ok(None),
        }
    }
}
