//! The level fold's tests: statistics against hand-computed answers, the online peak against
//! a full sweep.

use super::*;
use crate::metrics::in_flight::sweep_peak;
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

/// A C=1 level whose server went away: a 490 ms request every 0.5 s from 0 s, one that fails to
/// connect (sent 3.0 s, failed 3.2 s), the server back at 7.0 s, then a request every 0.5 s from
/// 7.0 s to the last send at 10.5 s. One request (another slot's) spans the outage: sent at
/// 3.1 s, it ends at 6.54 s with a 3.44 s E2E.
#[test]
fn an_outage_is_summed_and_left_out_of_the_steady_window() {
    let mut acc = LevelAccumulator::new(None);
    // TTFT 50 ms + 22 steps of 20 ms = 490 ms, 89 tokens, all inside the send's half second.
    let req = |send: u64| ok_record(send, 50_000, 22);
    for k in 0..6 {
        acc.add(&req(k * 500_000));
    }
    let mut failed = req(3_000_000);
    failed.outcome = Outcome::Failed {
        kind: FailureKind::Connect,
        message: "connection refused".into(),
        http_status: None,
    };
    (failed.ttft_us, failed.e2e_us, failed.chunks) = (None, None, Vec::new());
    failed.end_at_us = 3_200_000;
    acc.add(&failed);
    // Its tokens (6.1 s to 6.54 s) fall in bin 6, inside the outage.
    let mut across = ok_record(3_100_000, 3_000_000, 22);
    across.slot = Some(1);
    acc.add(&across);
    for k in 0..8 {
        acc.add(&req(7_000_000 + k * 500_000));
    }
    // Two reports of one outage (overlapping) count once.
    acc.add_outage(3_200_000, 5_000_000);
    acc.add_outage(4_000_000, 7_000_000);
    let s = acc.stats();
    let sc = &s.scalars;
    assert!((sc.outage_s - 3.8).abs() < 1e-9, "{}", sc.outage_s);
    assert_eq!(
        sc.outages,
        vec![OutageWindow {
            from_s: 3.2,
            to_s: 7.0
        }]
    );
    // The window runs from the first completion (0.49 s) to the last send (10.5 s): whole bins
    // 1 to 9, of which 3, 4, 5 and 6 overlap the outage. The rest (1, 2, 7, 8, 9) hold two
    // requests each: 178 tokens a second. Counting the outage's bins would give 178 · 5 / 9
    // plus the spanning request's 89 tokens over 9 s.
    assert_eq!(sc.steady_duration_s, Some(5.0));
    assert!((sc.steady_output_throughput.unwrap() - 178.0).abs() < 1e-9);
    // Sent at or after 0.49 s and done by 10.5 s: 5 before the outage, 7 after it; the one
    // spanning it is left out, so every steady E2E is 490 ms.
    assert_eq!(sc.steady_requests, Some(12));
    let e2e = s.dists.steady_e2el_ms.as_ref().unwrap();
    assert_eq!(e2e.count, 12);
    assert!((e2e.max - 490.0).abs() < 1.0, "{e2e:?}");
    // The window and the level's own latency keep it.
    assert_eq!(s.dists.e2el_ms.as_ref().unwrap().count, 15);
    assert!((sc.duration_s - 10.99).abs() < 1e-9, "{}", sc.duration_s);
    // Written, and read back.
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["outages"][0]["to_s"], serde_json::json!(7.0));
    let back: LevelStats = serde_json::from_value(v).unwrap();
    assert_eq!(back, s);
}

#[test]
fn a_level_without_an_outage_writes_outage_s_0_and_older_results_read() {
    let mut acc = LevelAccumulator::new(None);
    acc.add(&ok_record(0, 50_000, 100));
    let s = acc.stats();
    assert_eq!(s.scalars.outage_s.to_bits(), 0.0_f64.to_bits());
    let mut v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["outage_s"], serde_json::json!(0.0));
    assert!(v.get("outages").is_none());
    // A results.json from before outages were measured has neither key.
    v.as_object_mut().unwrap().remove("outage_s");
    let back: LevelStats = serde_json::from_value(v).unwrap();
    assert_eq!(back, s);
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

/// `--metric-percentiles`: TTFT, TPOT, ITL and E2E carry the percentiles asked for beyond the
/// fixed ones under vLLM's keys (`p75_ttft_ms`, `p99.99_e2el_ms`), and read back the same.
#[test]
fn percentiles_asked_for_are_written_and_read_back() {
    let mut acc = LevelAccumulator::new(None).with_percentiles(&[25.0, 75.0, 99.0, 99.99]);
    for i in 0..20u64 {
        acc.add(&ok_record(i, 40_000 + 1_000 * i, 100));
    }
    let s = acc.stats();
    let v = serde_json::to_value(&s).unwrap();
    for key in ["p25_ttft_ms", "p75_tpot_ms", "p75_itl_ms", "p99.99_e2el_ms"] {
        assert!(
            v.get(key).is_some_and(serde_json::Value::is_f64),
            "missing {key}"
        );
    }
    // p99 is a fixed key; the others' percentiles are not asked for.
    assert!(v.get("p25_chunk_gap_ms").is_none() && v.get("p25_steady_ttft_ms").is_none());
    let back: LevelStats = serde_json::from_value(v).unwrap();
    assert_eq!(back, s);
    // TTFTs of 40..59 ms: the 5th (p25) and the 15th (p75) by nearest rank.
    let ttft = s.dists.ttft_ms.unwrap();
    assert!(
        (ttft.percentile(25.0).unwrap() - 44.0).abs() < 0.05,
        "{ttft:?}"
    );
    assert!(
        (ttft.percentile(75.0).unwrap() - 54.0).abs() < 0.05,
        "{ttft:?}"
    );
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
        let mut ends = Vec::new(); // of the records the fold has been given
        let mut kept_wrong = Vec::new();
        let mut finish_until = |until: u64, f: &mut InFlight, free: &mut VecDeque<u32>,
                                running: &mut BTreeMap<(u64, u32), u64>| {
            while let Some((&(end, slot), &send)) = running.iter().next() {
                if end > until { break; }
                running.remove(&(end, slot));
                f.add(Some(slot), send, end);
                ends.push(end);
                kept_wrong.extend(kept_beyond_the_watermark(f, &ends));
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
            t = t.max(send);
        }
        finish_until(u64::MAX, &mut f, &mut free, &mut running);
        proptest::prop_assert_eq!(f.peak(), naive_peak(&all));
        proptest::prop_assert!(kept_wrong.is_empty(), "{}", kept_wrong.join("; "));
    }
}

/// What the fold may keep after a record: exactly the records that end at or after its
/// watermark (the instants before it are settled), and the watermark caught up with the slots
/// whenever a batch is due. That is the memory bound: the requests overlapping the oldest one
/// still running, not every request of the level. (It is not a multiple of the slots: one long
/// request holds the watermark while short ones keep arriving.)
fn kept_beyond_the_watermark(f: &InFlight, ends: &[u64]) -> Option<String> {
    let held = f.pending.len() + f.open.len();
    let due = ends.iter().filter(|&&e| e >= f.swept_to).count();
    if held != due {
        return Some(format!(
            "held {held} records, {due} end at or after the watermark {}",
            f.swept_to
        ));
    }
    let batch = 64 + 2 * f.slots as usize;
    let watermark = f.slot_end.values().min().copied().unwrap_or(0);
    let all_reported = f.slot_end.len() == f.slots as usize;
    (f.pending.len() >= batch && all_reported && f.swept_to != watermark).then(|| {
        format!(
            "{} records pending with the watermark at {} behind the slots' {watermark}",
            f.pending.len(),
            f.swept_to
        )
    })
}

/// Open loop at a steady rate over 100,000 requests (gaps of 0–29 µs, lengths of 1–199 µs, as
/// in the property above, drawn from a fixed LCG): what the fold holds stays near the number
/// of requests in flight at once (about 100/14.5 ≈ 7 on average), far from the 100,000 a fold
/// keeping every interval would hold. The limit of 1,000 leaves room for bursts.
#[test]
fn open_loop_memory_stays_bounded_over_many_requests() {
    use std::collections::{BTreeMap, VecDeque};
    let mut f = InFlight::default();
    let mut free: VecDeque<u32> = VecDeque::new();
    let mut next_slot = 0u32;
    let mut running: BTreeMap<(u64, u32), u64> = BTreeMap::new();
    let (mut t, mut max_held, mut x) = (0u64, 0usize, 12_345u64);
    let mut draw = |n: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % n
    };
    for _ in 0..100_000 {
        t += draw(30);
        let len = 1 + draw(199);
        while let Some((&(end, slot), &send)) = running.iter().next() {
            if end > t {
                break;
            }
            running.remove(&(end, slot));
            f.add(Some(slot), send, end);
            free.push_back(slot);
            max_held = max_held.max(f.pending.len() + f.open.len());
        }
        let slot = free.pop_front().unwrap_or_else(|| {
            next_slot += 1;
            next_slot - 1
        });
        f.note_slot(slot);
        running.insert((t + len, slot), t);
    }
    assert!(
        max_held < 1_000,
        "held {max_held} intervals with {next_slot} slots"
    );
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
