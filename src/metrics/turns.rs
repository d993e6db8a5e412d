//! What the server's prefix cache did for a level, and a multi-turn level's statistics per turn.
//!
//! The cache numbers are the server's own, per request (`usage.prompt_tokens_details.
//! cached_tokens`, SGLang's `meta_info.cached_tokens`): requests whose server did not say are left
//! out rather than counted as misses, and the hit rate says over how many requests it was taken.

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::record::RequestRecord;

/// Prompt tokens served from the server's prefix cache, over the successful requests that
/// reported it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CacheFold {
    reported: u64,
    input_tokens: u64,
    cached_tokens: u64,
}

impl CacheFold {
    /// Folds a successful request.
    pub fn add(&mut self, r: &RequestRecord) {
        if let Some(c) = r.cached_tokens {
            self.reported += 1;
            self.input_tokens += r.input_tokens;
            self.cached_tokens += c.min(r.input_tokens);
        }
    }

    /// Requests whose server reported its cached tokens.
    pub fn reported(&self) -> u64 {
        self.reported
    }

    /// Σ cached / Σ prompt tokens over the reporting requests.
    pub fn hit_rate(&self) -> Option<f64> {
        (self.input_tokens > 0).then(|| self.cached_tokens as f64 / self.input_tokens as f64)
    }

    /// Mean cached tokens per reporting request.
    pub fn mean_cached(&self) -> Option<f64> {
        (self.reported > 0).then(|| self.cached_tokens as f64 / self.reported as f64)
    }

    /// Σ cached tokens (`None` when no request reported).
    pub fn cached_tokens(&self) -> Option<u64> {
        (self.reported > 0).then_some(self.cached_tokens)
    }
}

/// One turn of a multi-turn level, over all its conversations.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnStats {
    /// 1 for the first turn.
    pub turn: u32,
    pub completed: u64,
    pub failed: u64,
    /// Mean prompt tokens: the whole history so far plus the new message.
    pub mean_input_tokens: Option<f64>,
    /// Mean prompt tokens the server served from its prefix cache.
    pub mean_cached_tokens: Option<f64>,
    /// Σ cached / Σ prompt tokens of this turn's requests that reported it.
    pub cache_hit_rate: Option<f64>,
    pub mean_ttft_ms: Option<f64>,
    pub median_ttft_ms: Option<f64>,
    pub p90_ttft_ms: Option<f64>,
    pub p99_ttft_ms: Option<f64>,
    pub mean_tpot_ms: Option<f64>,
    /// At a session level: Σ cached prompt tokens of the turn, and Σ its cache ceilings
    /// (docs/metrics.md "Agent sessions"), over the requests that have one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ceiling_tokens: Option<u64>,
}

#[derive(Clone, Debug, Default)]
struct TurnFold {
    completed: u64,
    failed: u64,
    input_tokens: u64,
    ttft: Dist,
    tpot: Dist,
    /// One value per token, as the level's (for the SLO on every turn).
    itl: Dist,
    e2el: Dist,
    cache: CacheFold,
    ceiling: CeilingFold,
}

/// Σ cache ceilings, and Σ cached tokens of the same requests.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CeilingFold {
    requests: u64,
    ceiling: u64,
    cached: u64,
}

impl CeilingFold {
    /// Folds a successful request with a ceiling.
    pub fn add(&mut self, r: &RequestRecord) {
        if let Some(c) = r.cache_ceiling_tokens {
            self.requests += 1;
            self.ceiling += c;
            self.cached += r.cached_tokens.unwrap_or(0).min(r.input_tokens);
        }
    }

    /// Σ ceilings (`None` when no request had one).
    pub fn ceiling(&self) -> Option<u64> {
        (self.requests > 0).then_some(self.ceiling)
    }

    /// Σ cached tokens of the requests with a ceiling (a server that did not say: 0).
    pub fn cached(&self) -> Option<u64> {
        (self.requests > 0).then_some(self.cached)
    }
}

/// Per-turn folds of a multi-turn level (records without a turn are ignored): of the
/// conversations' own turns, or of their sub-agents' (by each sub-agent's own turn).
#[derive(Clone, Debug, Default)]
pub struct TurnsFold {
    turns: Vec<TurnFold>,
    sub_agents: bool,
}

impl TurnsFold {
    /// The sub-agents' turns (`--fan-out`), over all of a level's sub-agents.
    pub fn of_sub_agents() -> Self {
        Self {
            sub_agents: true,
            ..Self::default()
        }
    }

    /// Folds a finished (completed or failed, not cancelled) record.
    pub fn add(&mut self, r: &RequestRecord) {
        let Some(turn) = r.turn.filter(|t| *t >= 1) else {
            return;
        };
        if r.sub_agent.is_some() != self.sub_agents {
            return;
        }
        let i = (turn - 1) as usize;
        if self.turns.len() <= i {
            self.turns.resize_with(i + 1, TurnFold::default);
        }
        let t = &mut self.turns[i];
        if !r.is_ok() {
            t.failed += 1;
            return;
        }
        t.completed += 1;
        t.input_tokens += r.input_tokens;
        if let Some(v) = r.ttft_us {
            t.ttft.record(v);
        }
        if let Some(v) = r.tpot_us() {
            t.tpot.record(v.round() as u64);
        }
        if let Some(v) = r.e2e_us {
            t.e2el.record(v);
        }
        super::record::for_each_gap(&r.chunks, |gap, n| {
            if n > 0 {
                t.itl
                    .record_n((gap as f64 / f64::from(n)).round() as u64, u64::from(n));
            }
        });
        t.cache.add(r);
        t.ceiling.add(r);
    }

    /// Each turn's samples, as a level's, for judging the SLO on every turn (first turn first).
    pub fn samples(&self) -> Vec<(u32, super::slo::LevelSamples<'_>)> {
        self.turns
            .iter()
            .zip(1u32..)
            .map(|(t, turn)| {
                (
                    turn,
                    super::slo::LevelSamples {
                        ttft: &t.ttft,
                        tpot: &t.tpot,
                        itl: &t.itl,
                        e2el: &t.e2el,
                        completed: t.completed,
                        failed: t.failed,
                    },
                )
            })
            .collect()
    }

    /// The statistics of every turn seen so far, first turn first.
    pub fn stats(&self) -> Vec<TurnStats> {
        self.turns
            .iter()
            .zip(1u32..)
            .map(|(t, turn)| {
                let ttft = t.ttft.stats(1e-3);
                TurnStats {
                    turn,
                    completed: t.completed,
                    failed: t.failed,
                    mean_input_tokens: (t.completed > 0)
                        .then(|| t.input_tokens as f64 / t.completed as f64),
                    mean_cached_tokens: t.cache.mean_cached(),
                    cache_hit_rate: t.cache.hit_rate(),
                    mean_ttft_ms: ttft.as_ref().map(|d| d.mean),
                    median_ttft_ms: ttft.as_ref().map(|d| d.p50),
                    p90_ttft_ms: ttft.as_ref().map(|d| d.p90),
                    p99_ttft_ms: ttft.as_ref().map(|d| d.p99),
                    mean_tpot_ms: t.tpot.mean().map(|v| v / 1000.0),
                    cached_tokens: t.ceiling.cached(),
                    cache_ceiling_tokens: t.ceiling.ceiling(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::metrics::record::Outcome;
    use crate::metrics::sessions::SessionFold;

    pub(in crate::metrics) fn rec(
        turn: u32,
        input: u64,
        cached: Option<u64>,
        ttft_us: u64,
    ) -> RequestRecord {
        RequestRecord {
            level: 0,
            index: 0,
            warmup: false,
            sched_at_us: 0,
            send_at_us: 0,
            end_at_us: ttft_us + 1000,
            outcome: Outcome::Ok,
            planned_input_tokens: input,
            input_tokens: input,
            input_source: crate::metrics::CountSource::Usage,
            output_tokens: 2,
            output_source: crate::metrics::CountSource::Usage,
            chunk_source: crate::metrics::CountSource::Usage,
            ttft_us: Some(ttft_us),
            e2e_us: Some(ttft_us + 1000),
            chunks: Vec::new(),
            retries: 0,
            slot: None,
            cached_tokens: cached,
            turn: Some(turn),
            session: None,
            sub_agent: None,
            session_turns: None,
            tool_wait_ms: None,
            cache_ceiling_tokens: None,
            ttfc_us: None,
            reasoning_tokens: None,
            reasoning_source: None,
            first_tool_call_us: None,
            tool_calls: 0,
            held_reads: 0,
            first_held: false,
            finish: None,
            think_tags: false,
            lora: None,
            schema_valid: None,
            images: None,
            image_tokens: None,
        }
    }

    #[test]
    fn turns_fold_ttft_and_cache_hits_separately() {
        let mut f = TurnsFold::default();
        f.add(&rec(1, 1000, Some(0), 50_000));
        f.add(&rec(1, 1000, Some(16), 70_000));
        f.add(&rec(2, 1200, Some(1088), 10_000));
        // A server that does not say: counted for TTFT, left out of the hit rate.
        f.add(&rec(2, 1200, None, 12_000));
        let mut failed = rec(3, 0, None, 0);
        failed.outcome = Outcome::Failed {
            kind: crate::metrics::FailureKind::ContextTooLong,
            message: "too long".into(),
            http_status: Some(400),
        };
        f.add(&failed);
        let s = f.stats();
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].turn, s[0].completed), (1, 2));
        assert!((s[0].cache_hit_rate.unwrap() - 16.0 / 2000.0).abs() < 1e-12);
        assert!((s[0].mean_ttft_ms.unwrap() - 60.0).abs() < 0.1);
        assert!((s[1].cache_hit_rate.unwrap() - 1088.0 / 1200.0).abs() < 1e-12);
        assert_eq!(s[1].mean_cached_tokens, Some(1088.0));
        assert!((s[1].mean_ttft_ms.unwrap() - 11.0).abs() < 0.1);
        assert_eq!((s[2].completed, s[2].failed), (0, 1));
        assert_eq!(s[2].cache_hit_rate, None);
    }

    #[test]
    fn sub_agents_turns_are_folded_apart_and_do_not_complete_a_session() {
        let mut own = TurnsFold::default();
        let mut sub = TurnsFold::of_sub_agents();
        let mut sessions = SessionFold::new(2, 0);
        let mut child = rec(2, 500, Some(256), 30_000);
        child.sub_agent = Some(1);
        for r in [
            rec(1, 1000, Some(0), 50_000),
            child.clone(),
            rec(2, 1200, Some(1000), 20_000),
        ] {
            own.add(&r);
            sub.add(&r);
            sessions.add(&r, None);
        }
        let (o, s) = (own.stats(), sub.stats());
        assert_eq!(o.iter().map(|t| t.completed).collect::<Vec<_>>(), [1, 1]);
        assert_eq!(o[1].mean_input_tokens, Some(1200.0));
        // The sub-agent's second turn: its own index, in its own fold.
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].completed, s[1].completed), (0, 1));
        assert_eq!(s[1].mean_input_tokens, Some(500.0));
        // Only the session's own last turn completes it.
        assert_eq!(sessions.stats(&o, s.clone(), 0.0).sessions_completed, 1);
        // A failed turn ends its session, counted once with its first failure's kind.
        let kind = crate::metrics::FailureKind::ContextTooLong;
        let mut failed = rec(2, 0, None, 0);
        failed.index = 3;
        sessions.failed(&failed, kind);
        failed.turn = Some(1);
        failed.sub_agent = Some(2);
        sessions.failed(&failed, crate::metrics::FailureKind::HttpStatus);
        let st = sessions.stats(&o, s, 0.0);
        assert_eq!(st.sessions_failed, 1);
        assert_eq!(st.sessions_failed_by_kind.get(&kind), Some(&1));
    }
}
