//! The agent sessions' findings, a sentence each per session level: the prefix cache against
//! its ceiling (`sessions_cache`), and how long sessions took and where the time went
//! (`sessions_time`).

use std::fmt::Write;

use super::{Finding, Strength, measured, ms_text};
use crate::summary::RunSummary;

/// Turns a side of the median tool wait below which the comparison of the two sides is thin.
const MIN_TURNS_A_HALF: u64 = 20;

/// Each session level's prefix cache against its ceiling: what it served of what the sessions
/// had finished, and of the turns after the longer half of the tool waits against the shorter
/// (docs/metrics.md "Agent sessions").
pub(super) fn cache(s: &RunSummary) -> Vec<Finding> {
    s.sessions
        .iter()
        .filter(|l| measured(l))
        .filter_map(|l| {
            let x = l.stats.as_ref()?.scalars.session.as_ref()?;
            let (cached, ceiling) = (x.cached_tokens?, x.cache_ceiling_tokens?);
            let share = (ceiling > 0).then(|| cached as f64 / ceiling as f64)?;
            let mut text = if cached > ceiling {
                // Sessions whose messages share text (an agent trace's first turns naming the
                // same blocks): the cache serves it, the ceiling counts whole messages only.
                format!(
                    "{}: the prefix cache served {cached} prompt tokens, more than the {ceiling} the sessions had finished before each turn ({:.1} %): their messages share text the ceiling, counting whole messages, leaves out.",
                    l.label(),
                    share * 100.0
                )
            } else {
                format!(
                    "{}: the prefix cache served {cached} prompt tokens of the {ceiling} the sessions had finished before each turn ({:.1} %); {} lost to eviction or the cache's blocks.",
                    l.label(),
                    share * 100.0,
                    ceiling - cached
                )
            };
            let by_wait = x
                .cache_by_wait
                .as_ref()
                .and_then(|w| Some((w, w.shorter.kept()?, w.longer.kept()?)));
            if let Some((w, short, long)) = by_wait {
                let _ = write!(
                    text,
                    " Turns after tool waits over {} kept {:.0} % of their ceiling ({} turns), after shorter waits {:.0} % ({} turns).",
                    ms_text(w.split_ms),
                    long * 100.0,
                    w.longer.turns,
                    short * 100.0,
                    w.shorter.turns
                );
            }
            // TTFT after the shortest waits against after the longest: what eviction costs.
            let bins = &x.ttft_by_wait;
            let ends = (bins.len() >= 2).then(|| (&bins[0], &bins[bins.len() - 2], &bins[bins.len() - 1]));
            if let Some((first, before_last, last)) = ends {
                let _ = write!(
                    text,
                    " TTFT p50 after the shortest tool waits (up to {}) was {}, after the longest (over {}) {}.",
                    ms_text(first.up_to_ms),
                    ms_text(first.median_ttft_ms),
                    ms_text(before_last.up_to_ms),
                    ms_text(last.median_ttft_ms)
                );
            }
            let mut f = Finding::new("sessions_cache", text, &[l])
                .value("cached_tokens", Some(cached as f64))
                .value("cache_ceiling_tokens", Some(ceiling as f64))
                .value("cache_share_of_ceiling", Some(share));
            if let Some((w, short, long)) = by_wait {
                f = f
                    .value("wait_split_s", Some(w.split_ms / 1e3))
                    .value("kept_after_longer_waits", Some(long))
                    .value("kept_after_shorter_waits", Some(short));
                let fewest = w.shorter.turns.min(w.longer.turns);
                if fewest < MIN_TURNS_A_HALF {
                    f = f.weakened(
                        Strength::Thin,
                        format!(
                            "only {fewest} turns on one side of the median tool wait (fewer than {MIN_TURNS_A_HALF}): the two shares may differ by chance"
                        ),
                    );
                }
            }
            if let Some((first, before_last, last)) = ends {
                f = f
                    .value("ttft_after_shortest_waits_ms", Some(first.median_ttft_ms))
                    .value("ttft_after_longest_waits_ms", Some(last.median_ttft_ms))
                    .value("shortest_waits_up_to_s", Some(first.up_to_ms / 1e3))
                    .value("longest_waits_over_s", Some(before_last.up_to_ms / 1e3));
                let fewest = first.turns.min(last.turns);
                if fewest < MIN_TURNS_A_BIN {
                    f = f.weakened(
                        Strength::Thin,
                        format!(
                            "only {fewest} turns in the shortest or the longest bin of tool waits (fewer than {MIN_TURNS_A_BIN}): their TTFTs may differ by chance"
                        ),
                    );
                }
            }
            Some(f)
        })
        .collect()
}

/// Turns in the bin of the shortest or the longest tool waits below which the TTFT comparison
/// of the two is thin.
const MIN_TURNS_A_BIN: u64 = 10;

/// Completed sessions below which a level's session means are thin.
const FEW_SESSIONS: u64 = 10;

/// Each session level's completed sessions: how many a minute, how long one took, and of that
/// the time in the server and on tools (docs/metrics.md "Agent sessions"); with `--slo`, how
/// many met it on every turn.
pub(super) fn time(s: &RunSummary) -> Vec<Finding> {
    s.sessions
        .iter()
        .filter(|l| measured(l))
        .filter_map(|l| {
            let x = l.stats.as_ref()?.scalars.session.as_ref()?;
            let (total, server, tool) = (
                x.mean_session_s?,
                x.mean_session_server_s?,
                x.mean_session_tool_s?,
            );
            let per_minute = x.sessions_per_minute?;
            let n = x.sessions_completed;
            let rest = (total - server - tool).max(0.0);
            let mut text = format!(
                "{}: {n} sessions completed, {} a minute; one took {} on average: {} in the server, {} waiting on tools, {} else (sub-agents, think time, the client).",
                l.label(),
                super::num(per_minute),
                ms_text(total * 1e3),
                ms_text(server * 1e3),
                ms_text(tool * 1e3),
                ms_text(rest * 1e3),
            );
            if let Some(m) = x.sessions_met_slo {
                let _ = write!(text, " {m} of {n} met the SLO on every turn.");
            }
            let mut f = Finding::new("sessions_time", text, &[l])
                .value("sessions_per_minute", Some(per_minute))
                .value("mean_session_s", Some(total))
                .value("mean_session_server_s", Some(server))
                .value("mean_session_tool_s", Some(tool))
                .value("sessions_met_slo", x.sessions_met_slo.map(|m| m as f64));
            if n < FEW_SESSIONS {
                f = f.weakened(
                    Strength::Thin,
                    format!("only {n} sessions completed (fewer than {FEW_SESSIONS}): their means are rough"),
                );
            }
            Some(f)
        })
        .collect()
}
