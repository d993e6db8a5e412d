//! A session level's sessions (`--sessions`, agent traces): which completed, what the cache
//! served against its ceiling (overall, by tool wait and over time), TTFT by tool wait, and how
//! long sessions took, folded from the level's records (docs/metrics.md "Agent sessions").

use serde::{Deserialize, Serialize};

use super::record::RequestRecord;
use super::session_list::SessionClock;
pub use super::session_list::{SessionEnd, SessionRow};
use super::turns::{CeilingFold, TurnStats};

/// A session level's sessions: those that completed every turn, and the level's cache ceiling.
#[derive(Clone, Debug, Default)]
pub struct SessionFold {
    turns: u32,
    /// Requests a session sends (its turns and its sub-agents'); 0 where a session ends at its
    /// first failed request (no sub-agents), so each failed request ends one.
    per_session: u32,
    completed: u64,
    /// The sessions a failed turn ended (by their index in the level), with the first
    /// failure's kind.
    failed: std::collections::BTreeMap<u32, super::record::FailureKind>,
    ceiling: CeilingFold,
    /// Each turn after a tool wait that has a ceiling: (its wait in ms, cached, ceiling).
    after_waits: Vec<(f64, u64, u64)>,
    /// Each completed turn after a tool wait: (its wait, its TTFT), ms.
    waited: Vec<(f64, f64)>,
    /// The turns with a ceiling by when they were sent, in bins of [`CACHE_BIN_S`].
    by_time: Vec<WaitHalf>,
    /// The sessions under way, by their number: their own turns' times so far.
    open: std::collections::BTreeMap<u32, SessionClock>,
    /// The completed sessions' times, summed.
    timed: SessionSums,
    /// The sessions that ended (completed, or a failure ended them), by their number.
    ended: std::collections::BTreeMap<u32, SessionRow>,
    /// Completed sessions whose every own turn met the SLO (`None` without an SLO).
    met_slo: Option<u64>,
}

/// The completed sessions' times, µs, summed over them.
#[derive(Clone, Copy, Debug, Default)]
struct SessionSums {
    sessions: u64,
    duration_us: u64,
    server_us: u64,
    tool_us: u64,
}

/// The most bins [`SessionStats::ttft_by_wait`] splits the turns after a tool wait into.
pub const WAIT_BINS: usize = 5;

/// The turns after tool waits of about the same length (`ttft_by_wait`): the longest wait of
/// the bin, its median wait, its turns and their TTFT p50 (medians by nearest rank), ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WaitBin {
    pub up_to_ms: f64,
    pub median_wait_ms: f64,
    pub turns: u64,
    pub median_ttft_ms: f64,
}

/// The nearest-rank median of sorted `v`.
fn median_sorted(v: &[f64]) -> f64 {
    v[(v.len() - 1) / 2]
}

impl WaitBin {
    /// `waited` (wait, TTFT; ms) in at most [`WAIT_BINS`] bins of about equal count by the
    /// wait, turns of one wait never split between two bins.
    fn of(waited: &[(f64, f64)]) -> Vec<Self> {
        let mut w = waited.to_vec();
        w.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n = w.len();
        let mut out = Vec::new();
        let mut from = 0;
        for k in 1..=WAIT_BINS.min(n) {
            let mut to = (k * n / WAIT_BINS.min(n)).max(from);
            while to > from && to < n && w[to].0.total_cmp(&w[to - 1].0).is_eq() {
                to += 1;
            }
            if to == from {
                continue;
            }
            let bin = &w[from..to];
            let mut ttft: Vec<f64> = bin.iter().map(|x| x.1).collect();
            ttft.sort_by(f64::total_cmp);
            let waits: Vec<f64> = bin.iter().map(|x| x.0).collect();
            out.push(Self {
                up_to_ms: waits[waits.len() - 1],
                median_wait_ms: median_sorted(&waits),
                turns: bin.len() as u64,
                median_ttft_ms: median_sorted(&ttft),
            });
            from = to;
        }
        out
    }
}

/// The width of [`SessionStats::cache_by_time`]'s bins, in seconds.
pub const CACHE_BIN_S: u64 = 5;

/// The turns with a ceiling sent in one stretch of a level (`cache_by_time`): what the cache
/// served them against their ceiling, as the level went on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheBin {
    /// Its start, in seconds from the level's origin; it lasts [`CACHE_BIN_S`].
    pub from_s: u64,
    pub turns: u64,
    pub cached_tokens: u64,
    pub cache_ceiling_tokens: u64,
}

impl CacheBin {
    /// The share of its ceiling the cache served (none without a turn).
    pub fn kept(&self) -> Option<f64> {
        (self.cache_ceiling_tokens > 0)
            .then(|| self.cached_tokens as f64 / self.cache_ceiling_tokens as f64)
    }
}

/// The turns after a tool wait, split at the median wait: what the cache served each half
/// against its ceiling (docs/metrics.md "Agent sessions").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheByWait {
    /// The median wait: the shorter half waited at most this long, the longer half more.
    pub split_ms: f64,
    pub shorter: WaitHalf,
    pub longer: WaitHalf,
}

/// One half of [`CacheByWait`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitHalf {
    pub turns: u64,
    pub cached_tokens: u64,
    pub cache_ceiling_tokens: u64,
}

impl WaitHalf {
    fn of<'a>(turns: impl Iterator<Item = &'a (f64, u64, u64)>) -> Self {
        turns.fold(Self::default(), |h, t| Self {
            turns: h.turns + 1,
            cached_tokens: h.cached_tokens + t.1,
            cache_ceiling_tokens: h.cache_ceiling_tokens + t.2,
        })
    }

    /// The share of its ceiling the cache served.
    pub fn kept(&self) -> Option<f64> {
        (self.cache_ceiling_tokens > 0)
            .then(|| self.cached_tokens as f64 / self.cache_ceiling_tokens as f64)
    }
}

impl CacheByWait {
    /// The split of `turns` (wait ms, cached, ceiling) at their median wait; none when every
    /// turn waited as long as the median (nothing is longer).
    fn of(turns: &[(f64, u64, u64)]) -> Option<Self> {
        let mut waits: Vec<f64> = turns.iter().map(|t| t.0).collect();
        waits.sort_by(f64::total_cmp);
        let split_ms = *waits.get(waits.len().checked_sub(1)? / 2)?;
        let longer = WaitHalf::of(turns.iter().filter(|t| t.0 > split_ms));
        (longer.turns > 0).then(|| Self {
            split_ms,
            shorter: WaitHalf::of(turns.iter().filter(|t| t.0 <= split_ms)),
            longer,
        })
    }
}

/// What a session level adds to its statistics (docs/outputs.md, `sessions`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionStats {
    pub sessions_completed: u64,
    /// Sessions a failed turn ended, and by the kind of their first failure.
    #[serde(default)]
    pub sessions_failed: u64,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub sessions_failed_by_kind: std::collections::BTreeMap<super::record::FailureKind, u64>,
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    #[serde(default)]
    pub cache_ceiling_tokens: Option<u64>,
    /// TTFT p50 per turn, first turn first (None: no turn of that index completed).
    #[serde(default)]
    pub ttft_by_turn_ms: Vec<Option<f64>>,
    /// With sub-agents (`--fan-out`): their turns' statistics, by each sub-agent's own turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_agent_turns: Vec<TurnStats>,
    /// The turns after a tool wait, split at the median wait (none where the waits do not
    /// differ, or no turn had a ceiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_by_wait: Option<CacheByWait>,
    /// The turns with a ceiling by when they were sent, bins of [`CACHE_BIN_S`] from the
    /// level's origin to the last turn's (a bin without a turn is kept, with zeros).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_by_time: Vec<CacheBin>,
    /// The completed turns after a tool wait by how long it was, in at most [`WAIT_BINS`]
    /// bins of about equal count: TTFT against the wait before the turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ttft_by_wait: Vec<WaitBin>,
    /// Completed sessions a minute over the level's window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions_per_minute: Option<f64>,
    /// Over the completed sessions: from the first turn's send to the last turn's last token,
    /// and of that the time in the server (Σ its own turns' E2E) and on tools (Σ their waits),
    /// in seconds; the rest is sub-agents' joins, a user's think time, and the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_session_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_session_server_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_session_tool_s: Option<f64>,
    /// With `--slo`: completed sessions whose every own turn met it, request by request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions_met_slo: Option<u64>,
    /// Each session of the level, by its number: those that ended, then those still under way
    /// when it ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub session_list: Vec<SessionRow>,
}

impl SessionFold {
    /// A level of sessions of `turns` turns, `per_session` requests each where a session can
    /// fail more than once (0: each failed request ends one session).
    pub fn new(turns: u32, per_session: u32) -> Self {
        Self {
            turns,
            per_session,
            ..Self::default()
        }
    }

    /// Folds a failed request: it ended its session (the first failure of a session names
    /// its kind; a sub-agent's failure ends its session too).
    pub fn failed(&mut self, r: &RequestRecord, kind: super::record::FailureKind) {
        if let Some(n) = r.session {
            let c = self
                .open
                .remove(&n)
                .unwrap_or_else(|| SessionClock::opened(r));
            let slo = self.met_slo.is_some();
            self.ended
                .entry(n)
                .or_insert_with(|| c.row(n, SessionEnd::Failed(kind), slo));
        }
        if r.turn.is_some() {
            let session = r
                .session
                .unwrap_or_else(|| r.index.checked_div(self.per_session).unwrap_or(r.index));
            self.failed.entry(session).or_insert(kind);
        }
    }

    /// Folds a successful request; `met_slo`: whether it met `--slo` (none without one).
    pub fn add(&mut self, r: &RequestRecord, met_slo: Option<bool>) {
        let last = r.session_turns.unwrap_or(self.turns);
        if r.sub_agent.is_none() && r.turn == Some(last) {
            self.completed += 1;
        }
        if met_slo.is_some() {
            self.met_slo.get_or_insert(0);
        }
        if let (Some(_), Some(n)) = (r.sub_agent, r.session)
            && let Some(e) = self.open.get_mut(&n)
        {
            e.count(r);
        }
        if let (None, Some(n)) = (r.sub_agent, r.session) {
            let e = self
                .open
                .entry(n)
                .or_insert_with(|| SessionClock::opened(r));
            e.count(r);
            let e2e = r.e2e_us.unwrap_or(0);
            e.first_send_us = e.first_send_us.min(r.send_at_us);
            e.last_end_us = e.last_end_us.max(r.send_at_us + e2e);
            e.server_us += e2e;
            e.tool_us += (r.tool_wait_ms.unwrap_or(0.0) * 1e3).round() as u64;
            e.met &= met_slo.unwrap_or(true);
            if r.turn == Some(last)
                && let Some(c) = self.open.remove(&n)
            {
                self.timed.sessions += 1;
                self.timed.duration_us += c.last_end_us.saturating_sub(c.first_send_us);
                self.timed.server_us += c.server_us;
                self.timed.tool_us += c.tool_us;
                if let (Some(m), true) = (&mut self.met_slo, c.met) {
                    *m += 1;
                }
                let slo = self.met_slo.is_some();
                self.ended.insert(n, c.row(n, SessionEnd::Completed, slo));
            }
        }
        self.ceiling.add(r);
        if let (Some(w), Some(t)) = (r.tool_wait_ms, r.ttft_us) {
            self.waited.push((w, t as f64 / 1e3));
        }
        if let Some(c) = r.cache_ceiling_tokens {
            let cached = r.cached_tokens.unwrap_or(0).min(r.input_tokens);
            if let Some(w) = r.tool_wait_ms {
                self.after_waits.push((w, cached, c));
            }
            let bin = (r.send_at_us / (CACHE_BIN_S * 1_000_000)) as usize;
            if self.by_time.len() <= bin {
                self.by_time.resize(bin + 1, WaitHalf::default());
            }
            let b = &mut self.by_time[bin];
            b.turns += 1;
            b.cached_tokens += cached;
            b.cache_ceiling_tokens += c;
        }
    }

    /// Each session: those that ended, then those still open, by number.
    fn session_list(&self) -> Vec<SessionRow> {
        let slo = self.met_slo.is_some();
        let mut rows: Vec<SessionRow> = self.ended.values().cloned().collect();
        rows.extend(
            self.open
                .iter()
                .map(|(&n, c)| c.row(n, SessionEnd::Unfinished, slo)),
        );
        rows.sort_by_key(|r| r.session);
        rows
    }

    /// The statistics, with the per-turn ones of the same level: its sessions' own turns and
    /// their sub-agents'.
    pub fn stats(
        &self,
        turns: &[TurnStats],
        sub_agent_turns: Vec<TurnStats>,
        window_s: f64,
    ) -> SessionStats {
        let n = self.timed.sessions;
        let mean_s = |us: u64| (n > 0).then(|| us as f64 / n as f64 / 1e6);
        let mut failed_by_kind = std::collections::BTreeMap::new();
        for kind in self.failed.values() {
            *failed_by_kind.entry(*kind).or_insert(0u64) += 1;
        }
        SessionStats {
            sessions_failed: self.failed.len() as u64,
            sessions_failed_by_kind: failed_by_kind,
            sub_agent_turns,
            cache_by_wait: CacheByWait::of(&self.after_waits),
            ttft_by_wait: WaitBin::of(&self.waited),
            cache_by_time: self
                .by_time
                .iter()
                .zip(0u64..)
                .map(|(b, i)| CacheBin {
                    from_s: i * CACHE_BIN_S,
                    turns: b.turns,
                    cached_tokens: b.cached_tokens,
                    cache_ceiling_tokens: b.cache_ceiling_tokens,
                })
                .collect(),
            sessions_per_minute: (window_s > 0.0).then(|| self.completed as f64 / window_s * 60.0),
            mean_session_s: mean_s(self.timed.duration_us),
            mean_session_server_s: mean_s(self.timed.server_us),
            mean_session_tool_s: mean_s(self.timed.tool_us),
            sessions_met_slo: self.met_slo,
            session_list: self.session_list(),
            sessions_completed: self.completed,
            cached_tokens: self.ceiling.cached(),
            cache_ceiling_tokens: self.ceiling.ceiling(),
            ttft_by_turn_ms: (1..=self.turns)
                .map(|k| {
                    turns
                        .iter()
                        .find(|t| t.turn == k)
                        .and_then(|t| t.median_ttft_ms)
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::turns::tests::rec;

    /// Ten turns after waits of 1, 1, 1, 1, 2 … 7 ms: the four of 1 ms stay in one bin (their
    /// TTFTs 40, 10, 30, 20 ms: nearest-rank median 20), the other six pair up.
    #[test]
    fn ttft_by_the_wait_before_in_bins_of_about_equal_count() {
        let mut f = SessionFold::new(3, 0);
        let ttfts = [40, 10, 30, 20, 120, 130, 140, 150, 160, 170];
        let waits = [1, 1, 1, 1, 2, 3, 4, 5, 6, 7];
        for (w, t) in waits.into_iter().zip(ttfts) {
            let mut r = rec(2, 100, None, t * 1000);
            r.tool_wait_ms = Some(f64::from(w));
            f.add(&r, None);
        }
        // A first turn waited for nothing: not in any bin.
        f.add(&rec(1, 100, None, 5000), None);
        let got: Vec<(f64, f64, u64, f64)> = f
            .stats(&[], Vec::new(), 0.0)
            .ttft_by_wait
            .iter()
            .map(|b| (b.up_to_ms, b.median_wait_ms, b.turns, b.median_ttft_ms))
            .collect();
        assert_eq!(
            got,
            [
                (1.0, 1.0, 4, 20.0),
                (3.0, 2.0, 2, 120.0),
                (5.0, 4.0, 2, 140.0),
                (7.0, 6.0, 2, 160.0)
            ]
        );
        // One turn, one bin; every wait the same, one bin.
        assert_eq!(WaitBin::of(&[(3.0, 9.0)]).len(), 1);
        assert_eq!(WaitBin::of(&[(3.0, 9.0); 12]).len(), 1);
        assert!(WaitBin::of(&[]).is_empty());
    }

    /// Turns sent at 1 s, 3 s, 7 s and 16 s fall in the 5-second bins 0, 0, 1 and 3; bin 2
    /// is kept empty, so the bins stay a time axis.
    #[test]
    fn the_cache_against_its_ceiling_by_when_turns_were_sent() {
        let mut f = SessionFold::new(4, 0);
        for (send_s, cached, ceiling) in [(1, 80, 100), (3, 10, 100), (7, 50, 50), (16, 0, 40)] {
            let mut r = rec(2, 200, Some(cached), 1000);
            r.send_at_us = send_s * 1_000_000;
            r.cache_ceiling_tokens = Some(ceiling);
            f.add(&r, None);
        }
        // A turn without a ceiling (a server that said nothing of it) is left out.
        f.add(&rec(1, 200, Some(5), 1000), None);
        let bins = f.stats(&[], Vec::new(), 0.0).cache_by_time;
        let got: Vec<(u64, u64, u64, u64)> = bins
            .iter()
            .map(|b| (b.from_s, b.turns, b.cached_tokens, b.cache_ceiling_tokens))
            .collect();
        assert_eq!(
            got,
            [
                (0, 2, 90, 200),
                (5, 1, 50, 50),
                (10, 0, 0, 0),
                (15, 1, 0, 40)
            ]
        );
        assert_eq!(bins[0].kept(), Some(0.45));
        assert_eq!(bins[2].kept(), None);
    }

    /// Two sessions of three turns, interleaved: session 0 sends at 0, 2 and 5 s, each turn
    /// 1 s in the server, tool waits 0.5 and 1.5 s; session 1 at 1, 4 and 8 s, turns of 2 s,
    /// waits 1 and 2 s, its last turn missing the SLO. Session 2's second turn fails. So: two
    /// completed, lasting 6 s and 9 s (mean 7.5), 3 s and 6 s in the server (mean 4.5), 2 s and
    /// 3 s on tools (mean 2.5); one met the SLO on every turn; 2 a minute over 60 s.
    #[test]
    fn each_completed_session_splits_its_time_into_server_and_tools() {
        let mut f = SessionFold::new(3, 0);
        let turn = |session: u32, turn: u32, send_s: u64, e2e_s: u64, wait_s: Option<f64>| {
            let mut r = rec(turn, 100, None, 1000);
            r.session = Some(session);
            r.send_at_us = send_s * 1_000_000;
            r.e2e_us = Some(e2e_s * 1_000_000);
            r.tool_wait_ms = wait_s.map(|w| w * 1e3);
            r
        };
        let plan = [
            (turn(0, 1, 0, 1, None), true),
            (turn(1, 1, 1, 2, None), true),
            (turn(0, 2, 2, 1, Some(0.5)), true),
            (turn(2, 1, 3, 1, None), true),
            (turn(1, 2, 4, 2, Some(1.0)), true),
            (turn(0, 3, 5, 1, Some(1.5)), true),
            (turn(1, 3, 8, 2, Some(2.0)), false),
        ];
        for (r, met) in &plan {
            f.add(r, Some(*met));
        }
        f.failed(
            &turn(2, 2, 6, 1, Some(1.0)),
            super::super::record::FailureKind::Timeout,
        );
        let st = f.stats(&[], Vec::new(), 60.0);
        assert_eq!(st.sessions_completed, 2);
        assert_eq!(st.mean_session_s, Some(7.5));
        assert_eq!(st.mean_session_server_s, Some(4.5));
        assert_eq!(st.mean_session_tool_s, Some(2.5));
        assert_eq!(st.sessions_met_slo, Some(1));
        assert_eq!(st.sessions_per_minute, Some(2.0));
        // Each session's row: (number, end, own turns, start, duration, server, tool, met).
        type Row = (u32, SessionEnd, u32, f64, f64, f64, f64, Option<bool>);
        let rows: Vec<Row> = st
            .session_list
            .iter()
            .map(|r| {
                let t = (r.start_s, r.duration_s, r.server_s, r.tool_s);
                (r.session, r.end, r.turns, t.0, t.1, t.2, t.3, r.met_slo)
            })
            .collect();
        let timeout = SessionEnd::Failed(super::super::record::FailureKind::Timeout);
        assert_eq!(
            rows,
            [
                (0, SessionEnd::Completed, 3, 0.0, 6.0, 3.0, 2.0, Some(true)),
                (1, SessionEnd::Completed, 3, 1.0, 9.0, 6.0, 3.0, Some(false)),
                (2, timeout, 1, 3.0, 1.0, 1.0, 0.0, Some(true)),
            ]
        );
        assert_eq!(st.session_list[0].input_tokens, 300);
        // The row as results.json keeps it, and back.
        let json = serde_json::to_value(&st.session_list[2]).unwrap();
        assert_eq!(
            (&json["outcome"], &json["kind"], &json["turns"]),
            (
                &serde_json::json!("failed"),
                &serde_json::json!("timeout"),
                &serde_json::json!(1)
            )
        );
        let back: SessionRow = serde_json::from_value(json).unwrap();
        assert_eq!(back, st.session_list[2]);
        // Without an SLO, no count of sessions that met it.
        let mut g = SessionFold::new(3, 0);
        g.add(&plan[0].0, None);
        assert_eq!(g.stats(&[], Vec::new(), 60.0).sessions_met_slo, None);
    }
}
