//! Per-level aggregation: `LevelAccumulator` folds `RequestRecord`s as they arrive (compute in
//! update), `LevelStats` is the finished summary with vLLM-compatible key names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::in_flight::InFlight;
#[cfg(test)]
use super::in_flight::sweep_peak;
pub use super::level_stats::{LevelDists, LevelScalars, LevelStats};
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
    /// milli-tokens/s, so integer buckets keep three digits for slow streams.
    decode_speed: Dist,
    prefill_speed: Dist,
    completed: u64,
    cancelled: u64,
    failures: BTreeMap<FailureKind, FailureCount>,
    input_tokens: u64,
    output_tokens: u64,
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
    /// The exact peak in flight, folded online.
    in_flight: InFlight,
    busy_us: u64,
    slo: Option<Slo>,
    slo_met: u64,
    output_sources: BTreeMap<CountSource, u64>,
    chunk_sources: BTreeMap<CountSource, u64>,
    /// Cached prompt tokens the server reported, and a multi-turn level's turns.
    cache: super::turns::CacheFold,
    turns: super::turns::TurnsFold,
}

impl LevelAccumulator {
    /// An empty accumulator; `slo` enables goodput.
    pub fn new(slo: Option<Slo>) -> Self {
        Self {
            slo: slo.filter(|s| !s.is_empty()),
            ..Self::default()
        }
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
        self.first_end_us = Some(self.first_end_us.map_or(end, |f| f.min(end)));
        self.in_flight
            .add(r.slot, r.send_at_us, end.max(r.send_at_us));
        self.busy_us += end.saturating_sub(r.send_at_us);
        self.client_queue.record(r.client_queue_us());

        self.turns.add(r);
        if let Outcome::Failed { kind, message, .. } = &r.outcome {
            let e = self.failures.entry(*kind).or_insert_with(|| FailureCount {
                count: 0,
                first_message: message.clone(),
            });
            e.count += 1;
            return;
        }

        self.completed += 1;
        self.cache.add(r);
        self.input_tokens += r.input_tokens;
        self.output_tokens += r.output_tokens;
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

    /// The level judged against its SLO at the SLO's percentile (None without an SLO).
    pub fn slo_check(&self) -> Option<SloCheck> {
        let slo = self.slo?;
        Some(super::slo::check(
            &slo,
            &LevelSamples {
                ttft: &self.ttft,
                tpot: &self.tpot,
                itl: &self.itl,
                e2el: &self.e2el,
                completed: self.completed,
                failed: self.failed(),
            },
        ))
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

    /// The summary of everything folded so far (cheap enough to call for a live view).
    pub fn stats(&self) -> LevelStats {
        let start = self.window_start_us.unwrap_or(0);
        let window_s = self.window_end_us.saturating_sub(start) as f64 * 1e-6;
        let per_s = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
        let ms = 1e-3;
        // Steady state: from the first completion (ramp-up over) to the last send (drain starts),
        // counted over whole 1 s bins inside that span.
        let (steady_duration_s, steady_output_throughput) = match self.first_end_us {
            Some(first_end) if self.last_send_us > first_end => {
                let lo = first_end.div_ceil(US_PER_S) as usize;
                let hi = (self.last_send_us / US_PER_S) as usize;
                if hi > lo {
                    let toks: u64 = (lo..hi)
                        .map(|b| self.bins.get(b).copied().unwrap_or(0))
                        .sum();
                    let secs = (hi - lo) as f64;
                    (Some(secs), Some(toks as f64 / secs))
                } else {
                    (None, None)
                }
            }
            _ => (None, None),
        };
        let scalars = LevelScalars {
            completed: self.completed,
            failed: self.failed(),
            cancelled: self.cancelled,
            duration_s: window_s,
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
            mean_input_tokens: (self.completed > 0)
                .then(|| self.input_tokens as f64 / self.completed as f64),
            mean_output_tokens: (self.completed > 0)
                .then(|| self.output_tokens as f64 / self.completed as f64),
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
            turns: self.turns.stats(),
        };
        let dists = LevelDists {
            ttft_ms: self.ttft.stats(ms),
            tpot_ms: self.tpot.stats(ms),
            itl_ms: self.itl.stats(ms),
            e2el_ms: self.e2el.stats(ms),
            client_queue_ms: self.client_queue.stats(ms),
            chunk_gap_ms: self.chunk_gap.stats(ms),
            tokens_per_chunk: self.tokens_per_chunk.stats(1.0),
            decode_tokens_per_s: self.decode_speed.stats(1e-3),
            prefill_tokens_per_s: self.prefill_speed.stats(1e-3),
        };
        LevelStats { scalars, dists }
    }
}

/// Events per second over `n` events from `first_us` to `last_us`: `(n − 1) / span`, the
/// estimate that does not count the first event's gap, which lies before the span.
fn rate_over(n: u64, first_us: u64, last_us: u64) -> Option<f64> {
    let span = last_us.checked_sub(first_us)?;
    (n >= 2 && span > 0).then(|| (n - 1) as f64 / (span as f64 * 1e-6))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::TokenChunk;

    /// A successful request at C=1 as the simulator with 20 ms steps and accept length 4 makes it.
    fn ok_record(send: u64, ttft: u64, n_steps: u64) -> RequestRecord {
        let mut chunks = vec![TokenChunk::new(ttft, 1)];
        for i in 1..=n_steps {
            chunks.push(TokenChunk::new(ttft + i * 20_000, 4));
        }
        let e2e = chunks.last().unwrap().t_us;
        RequestRecord {
            level: 0,
            index: 0,
            warmup: false,
            sched_at_us: send,
            send_at_us: send,
            end_at_us: send + e2e + 100,
            outcome: Outcome::Ok,
            planned_input_tokens: 100,
            input_tokens: 100,
            input_source: CountSource::Usage,
            output_tokens: 1 + 4 * n_steps,
            output_source: CountSource::Usage,
            chunk_source: CountSource::PerChunkUsage,
            ttft_us: Some(ttft),
            e2e_us: Some(e2e),
            chunks,
            retries: 0,
            slot: None,
            cached_tokens: None,
            turn: None,
        }
    }

    #[test]
    fn level_of_fixed_steps_gives_exact_itl_tpot_and_accept_length() {
        let mut acc = LevelAccumulator::new(None);
        // Two back-to-back requests: TTFT 50 ms, 100 steps of 20 ms, 401 tokens each.
        let a = ok_record(0, 50_000, 100);
        let b_send = a.send_at_us + a.e2e_us.unwrap();
        let b = ok_record(b_send, 50_000, 100);
        acc.add(&a);
        acc.add(&b);
        let s = acc.stats();
        let d = &s.dists;
        assert_eq!(s.scalars.completed, 2);
        assert_eq!(s.scalars.total_output_tokens, 802);
        // per-token ITL = 20 ms / 4 = 5 ms; TPOT = 2000 ms / 400 = 5 ms; chunk gap 20 ms.
        let itl = d.itl_ms.as_ref().unwrap();
        assert_eq!(itl.count, 800);
        assert!((itl.mean - 5.0).abs() < 1e-9);
        assert!((d.tpot_ms.as_ref().unwrap().mean - 5.0).abs() < 1e-9);
        assert!((d.chunk_gap_ms.as_ref().unwrap().mean - 20.0).abs() < 1e-9);
        assert!((s.scalars.accept_length_client.unwrap() - 4.0).abs() < 1e-12);
        assert!((d.decode_tokens_per_s.as_ref().unwrap().mean - 200.0).abs() < 1e-9);
        assert!((d.ttft_ms.as_ref().unwrap().mean - 50.0).abs() < 1e-9);
        // Window = 2 × 2.05 s; output tok/s = 802 / 4.1 s.
        assert!((s.scalars.duration_s - 4.1).abs() < 1e-9);
        assert!((s.scalars.output_throughput - 802.0 / 4.1).abs() < 1e-9);
        assert!((s.scalars.request_throughput - 2.0 / 4.1).abs() < 1e-9);
        assert!(
            (s.scalars.total_token_throughput - 1002.0 / 4.1).abs() < 1e-9,
            "{}",
            s.scalars.total_token_throughput
        );
        assert_eq!(s.scalars.max_concurrent_requests, 1);
        assert!((s.scalars.mean_concurrency - 1.0).abs() < 1e-9);
    }

    #[test]
    fn multi_event_delivery_share_counts_deliveries_of_several_events() {
        let mut acc = LevelAccumulator::new(None);
        // 101 deliveries each; in the first request 25 of them held two events, in the second 0.
        let mut a = ok_record(0, 50_000, 100);
        for c in a.chunks.iter_mut().skip(1).step_by(4) {
            c.events = 2;
        }
        assert_eq!(a.chunks.iter().filter(|c| c.events == 2).count(), 25);
        let b = ok_record(3_000_000, 50_000, 100);
        acc.add(&a);
        acc.add(&b);
        let s = acc.stats().scalars;
        assert_eq!(s.deliveries, 202);
        assert!((s.multi_event_delivery_share.unwrap() - 25.0 / 202.0).abs() < 1e-12);
        assert_eq!(
            LevelAccumulator::new(None)
                .stats()
                .scalars
                .multi_event_delivery_share,
            None
        );
    }

    #[test]
    fn peak_counts_tokens_not_chunks_in_one_second_bins() {
        let mut acc = LevelAccumulator::new(None);
        let r = ok_record(0, 50_000, 100); // 4 tokens every 20 ms -> 200 tok/s (bins 0 and 1)
        acc.add(&r);
        let s = acc.stats();
        // First bin: first token at 50 ms + 47 steps at 70..990 ms => 1 + 4*47 = 189 tokens.
        // Second bin: steps at 1010..1990 ms => 50 steps => 200 tokens.
        assert!((s.scalars.max_output_tokens_per_s - 200.0).abs() < 1e-9);
    }

    #[test]
    fn peak_in_flight_is_exact_and_handover_is_not_overlap() {
        let mut acc = LevelAccumulator::new(None);
        for (send, e2e) in [(0, 1_000_000), (1_000_000, 1_000_000), (500_000, 2_000_000)] {
            let mut r = ok_record(send, 10_000, 1);
            r.e2e_us = Some(e2e);
            r.chunks.last_mut().unwrap().t_us = e2e;
            acc.add(&r);
        }
        // [0,1s) and [1s,2s) hand over; [0.5s,2.5s) overlaps both: peak 2.
        assert_eq!(acc.stats().scalars.max_concurrent_requests, 2);
    }

    #[test]
    fn failures_counted_by_kind_with_first_message_and_excluded_from_latency() {
        let mut acc = LevelAccumulator::new(None);
        acc.add(&ok_record(0, 50_000, 10));
        for msg in ["first", "second"] {
            let mut r = ok_record(0, 1, 1);
            r.outcome = Outcome::Failed {
                kind: FailureKind::HttpStatus,
                message: msg.into(),
                http_status: Some(500),
            };
            acc.add(&r);
        }
        let mut c = ok_record(0, 1, 1);
        c.outcome = Outcome::Cancelled;
        acc.add(&c);
        let mut w = ok_record(0, 1, 1);
        w.warmup = true;
        acc.add(&w);
        let s = acc.stats();
        assert_eq!(s.scalars.completed, 1);
        assert_eq!(s.scalars.failed, 2);
        assert_eq!(s.scalars.cancelled, 1);
        let f = &s.scalars.failures["http_status"];
        assert_eq!((f.count, f.first_message.as_str()), (2, "first"));
        assert_eq!(s.dists.ttft_ms.as_ref().unwrap().count, 1);
    }

    #[test]
    fn goodput_counts_requests_meeting_every_slo() {
        let slo = Slo::parse("ttft:100,tpot:6").unwrap();
        let mut acc = LevelAccumulator::new(Some(slo));
        acc.add(&ok_record(0, 50_000, 100)); // ttft 50 ms, tpot 5 ms: meets
        acc.add(&ok_record(0, 150_000, 100)); // ttft 150 ms: misses
        let s = acc.stats();
        assert_eq!(s.scalars.slo_met, Some(1));
        let window = s.scalars.duration_s;
        assert!((s.scalars.goodput.unwrap() - 1.0 / window).abs() < 1e-9);
        assert!(Slo::parse("ttft:x").is_err());
        assert!(Slo::parse("speed:3").is_err());
    }

    #[test]
    fn steady_state_window_drops_ramp_and_drain() {
        let mut acc = LevelAccumulator::new(None);
        // Three sequential requests of ~2.05 s: first end 2.05 s, last send 4.1 s.
        let mut send = 0;
        for _ in 0..3 {
            let r = ok_record(send, 50_000, 100);
            send += r.e2e_us.unwrap();
            acc.add(&r);
        }
        let s = acc.stats();
        // Whole bins inside [2.05 s, 4.1 s): bin 3 only ([3 s, 4 s)) — 200 tok/s steady.
        assert_eq!(s.scalars.steady_duration_s, Some(1.0));
        assert!((s.scalars.steady_output_throughput.unwrap() - 200.0).abs() < 1e-9);
    }

    #[test]
    fn awkward_floats_round_trip_bit_for_bit() {
        // serde_json's default parser can be one ULP off; results.json must read back exactly
        // (report re-renders summary.md byte for byte from it).
        let mut s = LevelStats::default();
        s.scalars.output_throughput = 2.405_f64.next_down();
        s.scalars.duration_s = 0.1 + 0.2;
        s.scalars.request_throughput = 1.0 / 3.0;
        let back: LevelStats = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(
            back.scalars.output_throughput.to_bits(),
            s.scalars.output_throughput.to_bits()
        );
        assert_eq!(
            back.scalars.duration_s.to_bits(),
            s.scalars.duration_s.to_bits()
        );
        assert_eq!(
            back.scalars.request_throughput.to_bits(),
            s.scalars.request_throughput.to_bits()
        );
    }

    #[test]
    fn json_keys_are_vllm_names_and_round_trip() {
        let mut acc = LevelAccumulator::new(None);
        acc.add(&ok_record(0, 50_000, 100));
        let s = acc.stats();
        let v = serde_json::to_value(&s).unwrap();
        for key in [
            "mean_ttft_ms",
            "median_ttft_ms",
            "p99_ttft_ms",
            "p99.9_ttft_ms",
            "mean_tpot_ms",
            "p99_itl_ms",
            "mean_e2el_ms",
            "request_throughput",
            "output_throughput",
            "total_token_throughput",
            "max_output_tokens_per_s",
            "max_concurrent_requests",
            "mean_decode_tokens_per_s",
            "accept_length_client",
            "mean_tokens_per_chunk",
            "multi_event_delivery_share",
            "deliveries",
        ] {
            assert!(v.get(key).is_some(), "missing {key}");
        }
        let back: LevelStats = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
    }

    /// The full sweep over every interval: the definition the online fold must match.
    fn naive_peak(iv: &[(u64, u64)]) -> u64 {
        let mut ev = Vec::new();
        for &(s, e) in iv {
            ev.push((s, 1i8));
            ev.push((e, -1i8));
        }
        sweep_peak(0, ev)
    }

    proptest::proptest! {
        /// Closed-loop workers (each one's requests back to back or with gaps, including zero-gap
        /// handovers), records arriving in any order across workers: the online peak equals the
        /// full sweep.
        #[test]
        fn online_peak_in_flight_matches_full_sweep_with_bounded_memory(
            workers in proptest::collection::vec(
                proptest::collection::vec((0u64..3, 1u64..40), 1..120), 1..12),
            order in proptest::collection::vec(0usize..1000, 0..3000),
        ) {
            let slots = workers.len() as u32;
            // Each worker's intervals, in its own order.
            let mut queues: Vec<std::collections::VecDeque<(u64, u64)>> = workers
                .iter()
                .map(|w| {
                    let mut t = 0;
                    w.iter()
                        .map(|&(gap, len)| {
                            let s = t + gap;
                            t = s + len;
                            (s, t)
                        })
                        .collect()
                })
                .collect();
            let all: Vec<(u64, u64)> = queues.iter().flatten().copied().collect();
            let mut f = InFlight { slots, ..InFlight::default() };
            let mut picks = order.into_iter();
            while queues.iter().any(|q| !q.is_empty()) {
                let live: Vec<usize> = (0..queues.len()).filter(|&i| !queues[i].is_empty()).collect();
                let i = live[picks.next().unwrap_or(0) % live.len()];
                let (s, e) = queues[i].pop_front().unwrap();
                f.add(Some(i as u32), s, e);
            }
            proptest::prop_assert_eq!(f.peak(), naive_peak(&all));
        }
    }

    proptest::proptest! {
        /// Open loop: requests arrive on their own schedule and take the free slot freed longest
        /// ago (a new one when none is free); `Sent` (the slot) reaches the fold when the
        /// request goes out, its record when it ends. The online peak equals the full sweep.
        #[test]
        fn open_loop_slot_pool_keeps_the_online_peak_exact(
            reqs in proptest::collection::vec((0u64..30, 1u64..200), 1..400),
            cap in proptest::option::of(1usize..12),
        ) {
            use std::collections::{BTreeMap, VecDeque};
            // Events in time order: (time, 0 = end / 1 = send, ...). Ends first at equal times:
            // a slot freed at t can be taken by a request sent at t.
            let mut f = InFlight::default();
            let mut free: VecDeque<u32> = VecDeque::new();
            let mut next_slot = 0u32;
            let mut running: BTreeMap<(u64, u32), u64> = BTreeMap::new(); // (end, slot) -> send
            let mut all = Vec::new();
            let mut t = 0u64;
            let mut max_held = 0usize;
            let finish_until = |until: u64, f: &mut InFlight, free: &mut VecDeque<u32>,
                                    running: &mut BTreeMap<(u64, u32), u64>| {
                while let Some((&(end, slot), &send)) = running.iter().next() {
                    if end > until { break; }
                    running.remove(&(end, slot));
                    f.add(Some(slot), send, end);
                    free.push_back(slot);
                }
            };
            for &(gap, len) in &reqs {
                t += gap;
                finish_until(t, &mut f, &mut free, &mut running);
                // With a cap, a request due now waits in the client queue for a free slot.
                let mut send = t;
                if let Some(cap) = cap
                    && running.len() >= cap
                {
                    let (&(end, _), _) = running.iter().next().unwrap();
                    send = end;
                    finish_until(send, &mut f, &mut free, &mut running);
                }
                let slot = free.pop_front().unwrap_or_else(|| { next_slot += 1; next_slot - 1 });
                f.note_slot(slot);
                running.insert((send + len, slot), send);
                all.push((send, send + len));
                max_held = max_held.max(f.pending.len() + f.open.len());
                t = t.max(send);
            }
            finish_until(u64::MAX, &mut f, &mut free, &mut running);
            proptest::prop_assert_eq!(f.peak(), naive_peak(&all));
            // Memory follows the slots in use, not the number of requests.
            proptest::prop_assert!(max_held <= 64 + 4 * next_slot as usize + 1, "held {} with {} slots", max_held, next_slot);
        }
    }

    #[test]
    fn peak_in_flight_memory_stays_bounded_over_many_requests() {
        // 8 workers, 100,000 requests of varied length, arriving as they end (the worker that
        // ends first sends its next one): the level keeps a few hundred intervals, not 100,000.
        let mut acc = LevelAccumulator::new(None).with_slots(8);
        let mut t = [0u64; 8];
        let mut max_held = 0;
        for i in 0..100_000u64 {
            let w = (0..8).min_by_key(|&w| t[w]).unwrap();
            let len = 1_000 + (i * 7919) % 50_000;
            let mut r = ok_record(t[w], 500, 1);
            r.slot = Some(w as u32);
            r.e2e_us = Some(len);
            r.chunks.last_mut().unwrap().t_us = len;
            t[w] += len;
            acc.add(&r);
            max_held = max_held.max(acc.held_intervals());
        }
        assert!(max_held < 1_000, "held {max_held} intervals");
        assert_eq!(acc.stats().scalars.max_concurrent_requests, 8);
    }
}
