//! Per-level aggregation: `LevelAccumulator` folds `RequestRecord`s as they arrive (compute in
//! update), `LevelStats` is the finished summary with vLLM-compatible key names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::in_flight::InFlight;
pub use super::level_stats::{LevelDists, LevelScalars, LevelStats, OutageWindow};
use super::record::{CountSource, FailureKind, Outcome, RequestRecord, for_each_gap};
pub use super::slo::Slo;
use super::slo::{LevelSamples, SloCheck};

/// Count and first message of one failure kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailureCount {
    pub count: u64,
    pub first_message: String,
}

const US_PER_S: u64 = 1_000_000;

/// Folds the measured (non-warmup) records of one level.
#[derive(Clone, Debug, Default)]
pub struct LevelAccumulator {
    ttft: Dist,
    tpot: Dist,
    itl: Dist,
    e2el: Dist,
    client_queue: Dist,
    chunk_gap: Dist,
    tokens_per_chunk: Dist,
    /// Token-carrying deliveries, and those that held more than one event.
    deliveries: u64,
    multi_event_deliveries: u64,
    /// Held reads (docs/metrics.md "Held reads"), and requests whose first token came in one.
    held_reads: u64,
    held_first_tokens: u64,
    /// milli-tokens/s, so integer buckets keep three digits for slow streams.
    decode_speed: Dist,
    prefill_speed: Dist,
    completed: u64,
    cancelled: u64,
    failures: BTreeMap<FailureKind, FailureCount>,
    input_tokens: u64,
    output_tokens: u64,
    /// Each completed request's input and output tokens.
    input_lengths: Dist,
    output_lengths: Dist,
    window_start_us: Option<u64>,
    window_end_us: u64,
    first_end_us: Option<u64>,
    last_send_us: u64,
    /// Requests sent (completed or failed) and the span of their scheduled times.
    sent: u64,
    first_sched_us: Option<u64>,
    last_sched_us: u64,
    /// Output tokens placed at their arrival time, 1 s bins from the level origin.
    bins: Vec<u64>,
    /// Requests ended (completed or failed) by the second of their end, from the level origin.
    ends: Vec<u64>,
    /// The exact peak in flight, folded online.
    in_flight: InFlight,
    busy_us: u64,
    slo: Option<Slo>,
    slo_met: u64,
    /// `--slo-tier`: each level is judged against every tier too.
    tiers: Vec<super::slo_tiers::SloTier>,
    output_sources: BTreeMap<CountSource, u64>,
    chunk_sources: BTreeMap<CountSource, u64>,
    /// Cached prompt tokens the server reported, and a multi-turn level's turns.
    cache: super::turns::CacheFold,
    turns: super::turns::TurnsFold,
    /// A session level's sub-agents' turns (`--fan-out`).
    sub_agent_turns: Option<super::turns::TurnsFold>,
    /// A session level's sessions and cache ceiling.
    sessions: Option<super::sessions::SessionFold>,
    reasoning: super::reasoning::ReasoningFold,
    /// Latency over the level's timeline (a trace level's).
    timeline: Option<super::timeline::TimelineFold>,
    /// Completed requests, for the steady window known at the end.
    steady: super::steady::SteadyFold,
    /// The requests of each LoRA adapter, apart.
    lora: super::lora::LoraFold,
    /// The completed requests' images.
    images: super::images::ImageFold,
    /// Answers checked against `--response-format`, and those that complied.
    schema_checked: u64,
    schema_valid: u64,
    /// The level's outages (µs from its origin, `[from, to)`), sorted and disjoint.
    outages: Vec<(u64, u64)>,
    /// How the completed answers ended (`--natural-stop`).
    endings: Endings,
    /// Percentiles of TTFT, TPOT, ITL and E2E asked for beyond the fixed ones
    /// (`--metric-percentiles`), in %.
    percentiles: Vec<f64>,
}

/// The completed requests that reached their output cap (finish reason `length`) and those
/// the model ended (any other reason), reported with `--natural-stop`.
#[derive(Clone, Debug, Default)]
struct Endings {
    reported: bool,
    length: u64,
    stop: u64,
}

impl Endings {
    fn add(&mut self, r: &RequestRecord) {
        match r.finish {
            Some(super::record::Finish::Length) => self.length += 1,
            Some(super::record::Finish::Stop) => self.stop += 1,
            None => {}
        }
    }

    /// `(reached_output_cap, ended_by_model)`, where reported.
    fn counts(&self) -> (Option<u64>, Option<u64>) {
        (
            self.reported.then_some(self.length),
            self.reported.then_some(self.stop),
        )
    }
}

impl LevelAccumulator {
    /// An empty accumulator; `slo` enables goodput.
    pub fn new(slo: Option<Slo>) -> Self {
        Self {
            slo: slo.filter(|s| !s.is_empty()),
            ..Self::default()
        }
    }

    /// A session level of sessions of `turns` turns, each `per_session` requests where one
    /// session can fail more than once (with sub-agents; 0 otherwise): also folds its sessions
    /// and cache ceiling.
    #[must_use]
    pub fn with_sessions(mut self, turns: u32, per_session: u32) -> Self {
        self.sessions = Some(super::sessions::SessionFold::new(turns, per_session));
        self.sub_agent_turns = Some(super::turns::TurnsFold::of_sub_agents());
        self
    }

    /// Reports how the completed answers ended (`--natural-stop`: the model may end them).
    #[must_use]
    pub fn with_natural_stop(mut self, on: bool) -> Self {
        self.endings.reported = on;
        self
    }

    /// Also gives TTFT, TPOT, ITL and E2E at `percentiles` (in %; `--metric-percentiles`).
    #[must_use]
    pub fn with_percentiles(mut self, percentiles: &[f64]) -> Self {
        self.percentiles = percentiles.to_vec();
        self
    }

    /// Also folds latency over the level's timeline, in bins of `bin_s` seconds.
    #[must_use]
    pub fn with_timeline(mut self, bin_s: f64) -> Self {
        self.timeline = Some(super::timeline::TimelineFold::new(bin_s));
        self
    }

    /// Folds one record. Warmup records are ignored; cancelled ones are only counted.
    pub fn add(&mut self, r: &RequestRecord) {
        if r.warmup {
            return;
        }
        if matches!(r.outcome, Outcome::Cancelled) {
            self.cancelled += 1;
            return;
        }
        self.window_start_us = Some(
            self.window_start_us
                .map_or(r.send_at_us, |s| s.min(r.send_at_us)),
        );
        self.last_send_us = self.last_send_us.max(r.send_at_us);
        self.sent += 1;
        self.first_sched_us = Some(
            self.first_sched_us
                .map_or(r.sched_at_us, |s| s.min(r.sched_at_us)),
        );
        self.last_sched_us = self.last_sched_us.max(r.sched_at_us);
        let end = if r.is_ok() {
            r.e2e_us.map_or(r.end_at_us, |e| r.send_at_us + e)
        } else {
            r.end_at_us
        };
        self.window_end_us = self.window_end_us.max(end);
        let second = (end / US_PER_S) as usize;
        if self.ends.len() <= second {
            self.ends.resize(second + 1, 0);
        }
        self.ends[second] += 1;
        self.first_end_us = Some(self.first_end_us.map_or(end, |f| f.min(end)));
        self.in_flight
            .add(r.slot, r.send_at_us, end.max(r.send_at_us));
        self.busy_us += end.saturating_sub(r.send_at_us);
        self.client_queue.record(r.client_queue_us());
        if let Some(t) = &mut self.timeline {
            t.add(r);
        }

        self.fold_turns(r);
        self.lora.add(r);
        if let Outcome::Failed { kind, message, .. } = &r.outcome {
            self.fold_failure(r, *kind, message);
            return;
        }

        self.completed += 1;
        self.endings.add(r);
        self.steady.add(r, end);
        self.cache.add(r);
        let met = self.slo.map(|s| s.met_by(r));
        self.sessions.iter_mut().for_each(|s| s.add(r, met));
        self.reasoning.add(r);
        self.input_tokens += r.input_tokens;
        self.output_tokens += r.output_tokens;
        if let Some(ok) = r.schema_valid {
            self.schema_checked += 1;
            self.schema_valid += u64::from(ok);
        }
        self.images.add(r);
        self.input_lengths.record(r.input_tokens);
        self.output_lengths.record(r.output_tokens);
        *self.output_sources.entry(r.output_source).or_default() += 1;
        *self.chunk_sources.entry(r.chunk_source).or_default() += 1;
        if let Some(v) = r.ttft_us {
            self.ttft.record(v);
        }
        if let Some(v) = r.e2e_us {
            self.e2el.record(v);
        }
        if let Some(v) = r.tpot_us() {
            self.tpot.record(v.round() as u64);
        }
        if let Some(v) = r.decode_tokens_per_s() {
            self.decode_speed.record((v * 1000.0).round() as u64);
        }
        if let Some(v) = r.prefill_tokens_per_s() {
            self.prefill_speed.record((v * 1000.0).round() as u64);
        }
        for_each_gap(&r.chunks, |gap, n| {
            self.chunk_gap.record(gap);
            if n > 0 {
                // Split the gap evenly over the chunk's tokens: one ITL value per token.
                self.itl
                    .record_n((gap as f64 / f64::from(n)).round() as u64, u64::from(n));
                self.tokens_per_chunk.record(u64::from(n));
            }
        });
        self.deliveries += r.chunks.len() as u64;
        self.multi_event_deliveries += r.chunks.iter().filter(|c| c.events > 1).count() as u64;
        self.held_reads += u64::from(r.held_reads);
        self.held_first_tokens += u64::from(r.first_held);
        for c in &r.chunks {
            let bin = ((r.send_at_us + c.t_us) / US_PER_S) as usize;
            if self.bins.len() <= bin {
                self.bins.resize(bin + 1, 0);
            }
            self.bins[bin] += u64::from(c.tokens);
        }
        if self.slo.is_some_and(|s| s.met_by(r)) {
            self.slo_met += 1;
        }
    }

    /// The server was unreachable from `from_us` to `to_us` (µs from the level's origin): an
    /// outage, merged with any it overlaps (docs/metrics.md "Per level", outage).
    pub fn add_outage(&mut self, from_us: u64, to_us: u64) {
        if to_us <= from_us {
            return;
        }
        let (mut lo, mut hi) = (from_us, to_us);
        // Those it touches become one with it; the rest stay in order.
        self.outages.retain(|&(f, t)| {
            let apart = t < lo || f > hi;
            if !apart {
                lo = lo.min(f);
                hi = hi.max(t);
            }
            apart
        });
        let at = self.outages.partition_point(|&(f, _)| f < lo);
        self.outages.insert(at, (lo, hi));
    }

    /// Whether `[lo_us, hi_us]` overlaps an outage by more than a point.
    fn in_outage(&self, lo_us: u64, hi_us: u64) -> bool {
        self.outages.iter().any(|&(f, t)| f < hi_us && t > lo_us)
    }

    /// The level judged against its SLO at the SLO's percentile (None without an SLO).
    pub fn slo_check(&self) -> Option<SloCheck> {
        Some(self.judge(&self.slo?))
    }

    /// The level against `slo`: a session level on every turn too
    /// ([`super::slo::check_every_turn`]).
    fn judge(&self, slo: &Slo) -> SloCheck {
        let all = self.samples();
        if self.sessions.is_some() {
            super::slo::check_every_turn(slo, &all, &self.turns.samples())
        } else {
            super::slo::check(slo, &all)
        }
    }

    /// Also judges the level against each of `tiers`.
    #[must_use]
    pub fn with_tiers(mut self, tiers: Vec<super::slo_tiers::SloTier>) -> Self {
        self.tiers = tiers;
        self
    }

    /// The level judged against each SLO tier, in the order given.
    pub fn tier_checks(&self) -> Vec<super::slo_tiers::TierCheck> {
        self.tiers
            .iter()
            .map(|t| super::slo_tiers::TierCheck {
                tier: t.name.clone(),
                check: self.judge(&t.slo),
            })
            .collect()
    }

    fn samples(&self) -> LevelSamples<'_> {
        LevelSamples {
            ttft: &self.ttft,
            tpot: &self.tpot,
            itl: &self.itl,
            e2el: &self.e2el,
            completed: self.completed,
            failed: self.failed(),
        }
    }

    /// Requests that ended (completed or failed), excluding cancelled ones.
    pub fn finished(&self) -> u64 {
        self.completed + self.failed()
    }

    /// Failed requests of every kind.
    pub fn failed(&self) -> u64 {
        self.failures.values().map(|f| f.count).sum()
    }

    /// The exact peak of requests in flight.
    fn peak_in_flight(&self) -> u64 {
        self.in_flight.peak()
    }

    /// Tells the accumulator how many closed-loop workers send this level's requests (each
    /// stamps its records with its slot), so the peak in flight can be folded as the level goes
    /// instead of keeping every request's interval until the end.
    #[must_use]
    pub fn with_slots(mut self, slots: u32) -> Self {
        self.in_flight.slots = slots;
        self
    }

    /// A request of this level is about to be sent on `slot` (open loop: slots come from a pool
    /// that grows as needed).
    pub fn note_slot(&mut self, slot: u32) {
        self.in_flight.note_slot(slot);
    }

    /// Request intervals held in memory right now (bounded when slots are known).
    pub fn held_intervals(&self) -> usize {
        self.in_flight.pending.len() + self.in_flight.open.len()
    }

    /// The level's TTFT so far in `n` equal bins, in ms (the dashboard's latency panel).
    pub fn ttft_bins(&self, n: usize) -> Option<super::dist::Bins> {
        self.ttft.bins(n, 1e-3)
    }

    /// The ITL so far in `n` equal bins, in ms.
    pub fn itl_bins(&self, n: usize) -> Option<super::dist::Bins> {
        self.itl.bins(n, 1e-3)
    }

    /// Output tokens by the second of their arrival, from the level's start.
    pub fn tokens_by_second(&self) -> &[u64] {
        &self.bins
    }

    /// Requests ended (completed or failed) by the second of their end, from the level's start.
    pub fn ends_by_second(&self) -> &[u64] {
        &self.ends
    }

    /// Steady state: from the first completion (ramp-up over) to the last send (drain
    /// starts), counted over whole 1 s bins inside that span that overlap no outage: its
    /// seconds and output tok/s.
    fn steady_throughput(&self) -> (Option<f64>, Option<f64>) {
        match self.first_end_us {
            Some(first_end) if self.last_send_us > first_end => {
                let lo = first_end.div_ceil(US_PER_S);
                let hi = self.last_send_us / US_PER_S;
                let kept: Vec<u64> = (lo..hi)
                    .filter(|&b| !self.in_outage(b * US_PER_S, (b + 1) * US_PER_S))
                    .collect();
                if kept.is_empty() {
                    return (None, None);
                }
                let toks: u64 = kept
                    .iter()
                    .map(|&b| self.bins.get(b as usize).copied().unwrap_or(0))
                    .sum();
                let secs = kept.len() as f64;
                (Some(secs), Some(toks as f64 / secs))
            }
            _ => (None, None),
        }
    }

    /// A failed record: counted by kind, and at a session level, the session it ended.
    fn fold_failure(&mut self, r: &RequestRecord, kind: FailureKind, message: &str) {
        if let Some(s) = &mut self.sessions {
            s.failed(r, kind);
        }
        let e = self.failures.entry(kind).or_insert_with(|| FailureCount {
            count: 0,
            first_message: message.to_string(),
        });
        e.count += 1;
    }

    /// A record's turn: the conversations' own, or a sub-agent's.
    fn fold_turns(&mut self, r: &RequestRecord) {
        self.turns.add(r);
        if let Some(t) = &mut self.sub_agent_turns {
            t.add(r);
        }
    }

    /// The share of checked answers that complied with `--response-format`.
    fn schema_valid_share(&self) -> Option<f64> {
        (self.schema_checked > 0).then(|| self.schema_valid as f64 / self.schema_checked as f64)
    }

    /// The summary of everything folded so far (cheap enough to call for a live view).
    /// The level's outages in seconds from its origin.
    fn outage_windows(&self) -> Vec<OutageWindow> {
        self.outages
            .iter()
            .map(|&(f, t)| OutageWindow {
                from_s: f as f64 / 1e6,
                to_s: t as f64 / 1e6,
            })
            .collect()
    }

    pub fn stats(&self) -> LevelStats {
        let start = self.window_start_us.unwrap_or(0);
        let window_s = self.window_end_us.saturating_sub(start) as f64 * 1e-6;
        let per_s = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
        let (steady_duration_s, steady_output_throughput) = self.steady_throughput();
        let reasoning = self.reasoning.stats();
        let turns = self.turns.stats();
        let steady = self
            .first_end_us
            .and_then(|f| self.steady.stats(f, self.last_send_us, &self.outages));
        let scalars = LevelScalars {
            completed: self.completed,
            failed: self.failed(),
            cancelled: self.cancelled,
            duration_s: window_s,
            outage_s: self.outages.iter().map(|&(f, t)| t - f).sum::<u64>() as f64 / 1e6,
            outages: self.outage_windows(),
            total_input_tokens: self.input_tokens,
            total_output_tokens: self.output_tokens,
            request_throughput: per_s(self.completed as f64),
            output_throughput: per_s(self.output_tokens as f64),
            total_token_throughput: per_s((self.input_tokens + self.output_tokens) as f64),
            max_output_tokens_per_s: self.bins.iter().copied().max().unwrap_or(0) as f64,
            max_concurrent_requests: self.peak_in_flight(),
            mean_concurrency: per_s(self.busy_us as f64 * 1e-6),
            steady_duration_s,
            steady_output_throughput,
            steady_requests: steady.as_ref().map(|s| s.requests),
            steady_from_s: steady.as_ref().map(|s| s.from_s),
            steady_to_s: steady.as_ref().map(|s| s.to_s),
            achieved_request_rate: rate_over(
                self.sent,
                self.window_start_us.unwrap_or(0),
                self.last_send_us,
            ),
            scheduled_request_rate: rate_over(
                self.sent,
                self.first_sched_us.unwrap_or(0),
                self.last_sched_us,
            ),
            goodput: self.slo.map(|_| per_s(self.slo_met as f64)),
            slo_met: self.slo.map(|_| self.slo_met),
            accept_length_client: self.tokens_per_chunk.mean(),
            deliveries: self.deliveries,
            multi_event_delivery_share: (self.deliveries > 0)
                .then(|| self.multi_event_deliveries as f64 / self.deliveries as f64),
            held_reads: self.held_reads,
            held_read_share: (self.deliveries > 0)
                .then(|| (self.held_reads as f64 / self.deliveries as f64).min(1.0)),
            held_first_tokens: self.held_first_tokens,
            mean_input_tokens: (self.completed > 0)
                .then(|| self.input_tokens as f64 / self.completed as f64),
            mean_output_tokens: (self.completed > 0)
                .then(|| self.output_tokens as f64 / self.completed as f64),
            reached_output_cap: self.endings.counts().0,
            ended_by_model: self.endings.counts().1,
            prefill_tokens_per_s: self.prefill_speed.mean().map(|v| v / 1000.0),
            output_token_sources: self.output_sources.clone(),
            chunk_token_sources: self.chunk_sources.clone(),
            failures: self
                .failures
                .iter()
                .map(|(k, v)| (k.name().to_string(), v.clone()))
                .collect(),
            total_cached_tokens: self.cache.cached_tokens(),
            prefix_cache_hit_rate: self.cache.hit_rate(),
            cache_reports: self.cache.reported(),
            session: self.sessions.as_ref().map(|s| {
                let sub = self
                    .sub_agent_turns
                    .as_ref()
                    .map(super::turns::TurnsFold::stats);
                s.stats(&turns, sub.unwrap_or_default(), window_s)
            }),
            turns,
            mean_reasoning_tokens: reasoning.mean_reasoning_tokens,
            mean_content_tokens: reasoning.mean_content_tokens,
            reasoning_share: reasoning.reasoning_share,
            mean_tool_calls: reasoning.mean_tool_calls.filter(|&m| m > 0.0),
            unanswered_requests: reasoning.unanswered_requests,
            unanswered_stopped: reasoning.unanswered_stopped,
            think_tag_requests: reasoning.think_tag_requests,
            timeline: self
                .timeline
                .as_ref()
                .map(super::timeline::TimelineFold::bins)
                .unwrap_or_default(),
            lora: self.lora.stats(window_s),
            schema_checked: self.schema_checked,
            schema_valid_share: self.schema_valid_share(),
            mean_image_tokens: self.images.mean_image_tokens(),
            images: self.images.stats(),
        };
        let dists = self.dists(reasoning, steady);
        LevelStats { scalars, dists }
    }

    /// The level's distributions, with the reasoning and steady-window ones folded apart.
    fn dists(
        &self,
        reasoning: super::reasoning::ReasoningStats,
        steady: Option<super::steady::SteadyStats>,
    ) -> LevelDists {
        let ms = 1e-3;
        LevelDists {
            ttft_ms: self.ttft.stats_at(ms, &self.percentiles),
            tpot_ms: self.tpot.stats_at(ms, &self.percentiles),
            itl_ms: self.itl.stats_at(ms, &self.percentiles),
            e2el_ms: self.e2el.stats_at(ms, &self.percentiles),
            client_queue_ms: self.client_queue.stats(ms),
            chunk_gap_ms: self.chunk_gap.stats(ms),
            tokens_per_chunk: self.tokens_per_chunk.stats(1.0),
            decode_tokens_per_s: self.decode_speed.stats(1e-3),
            prefill_tokens_per_s: self.prefill_speed.stats(1e-3),
            ttfc_ms: reasoning.ttfc_ms,
            thinking_ms: reasoning.thinking_ms,
            content_decode_tokens_per_s: reasoning.content_decode_tokens_per_s,
            first_tool_call_ms: reasoning.first_tool_call_ms,
            steady_ttft_ms: steady.as_ref().and_then(|s| s.ttft_ms.clone()),
            steady_tpot_ms: steady.as_ref().and_then(|s| s.tpot_ms.clone()),
            steady_e2el_ms: steady.and_then(|s| s.e2el_ms),
            input_tokens_per_request: self.input_lengths.stats(1.0),
            output_tokens_per_request: self.output_lengths.stats(1.0),
        }
    }
}

/// Events per second over `n` events from `first_us` to `last_us`: `(n − 1) / span`, the
/// estimate that does not count the first event's gap, which lies before the span.
fn rate_over(n: u64, first_us: u64, last_us: u64) -> Option<f64> {
    let span = last_us.checked_sub(first_us)?;
    (n >= 2 && span > 0).then(|| (n - 1) as f64 / (span as f64 * 1e-6))
}

#[cfg(test)]
mod tests;
