//! Token events that arrive in bursts: grouped into deliveries (every engine), and on engines
//! that send one event per token, into the decode steps that sent them.
//!
//! **Deliveries** ([`merge_deliveries`], docs/metrics.md "A chunk is a delivery"): events stamped
//! within [`DELIVERY_WINDOW_US`] of a delivery's first event are that delivery, one chunk with the
//! first event's time and the sum of the tokens. A server that writes runs of events back to back
//! (vLLM's API server when its event loop falls behind) otherwise shows half its gaps as zeros,
//! and ITL p50 reads 0.00 ms while TPOT is milliseconds. Events of one read share the kernel's
//! receive timestamp; stamped at parse time instead (https) they are a task switch apart, tens of
//! microseconds; the fastest decode step measured here is about 500 µs.
//!
//! **Steps** ([`group`]):
//!
//! Engines without per-chunk token counts send one SSE event per token (llama.cpp, TGI). With
//! speculative decoding one verification step accepts several tokens, and the server writes them
//! back to back: tens of microseconds apart, where steps are milliseconds apart (llama-server with
//! a draft model: about 7 ms between steps, 30–300 µs inside a burst). Counted event by event,
//! every chunk holds one token, the client-side accept length reads 1.0 and the per-token ITL is
//! the microsecond gap inside a burst. Grouped, each chunk is one step's delivery, as it is on
//! engines that send one event per step (vLLM, SGLang), and tokens per chunk is the accept length
//! the client sees.
//!
//! The grouping is decided per request, after the stream, from the gaps themselves: the log-gaps
//! are split in two by Otsu's criterion (the split that best separates two groups), and the
//! events are grouped only when the result is unmistakably bimodal:
//! - the two groups' geometric means are at least [`MIN_SEPARATION`] apart, and
//! - the short gaps are at least [`MIN_SHORT_SHARE`] of all gaps, so that the occasional pair of
//!   events a busy client reads late (a few percent of gaps, seen at high concurrency) is not
//!   taken for speculation; an accept length below about 1.25 is then reported as 1.0.
//!
//! The boundary between steps is then put at a third of the median long gap (or Otsu's split, if
//! higher): no decode step is that much shorter than the typical one, while a burst can be paused
//! that long when the server's writer thread loses its core to the compute thread (llama-server
//! pinned to one core pauses 1.2–1.7 ms inside a burst of a 7 ms step; split there, the
//! client-side accept length read 2.0 where the server's counters said 3.0).
//!
//! A stream without bursts (one token per step) is left as it is. Grouping only moves the
//! boundaries between chunks: the first chunk (the first token, from prefill) stays alone so TTFT
//! is unchanged, and a group takes the arrival time of its last event so the last token's time
//! (E2E) is unchanged.

use crate::metrics::TokenChunk;

/// Events stamped this close to a delivery's first event (µs, inclusive) belong to it.
pub const DELIVERY_WINDOW_US: u64 = 100;

/// Merges the chunks that reached the client together into one chunk per delivery: the first
/// chunk's time, the sum of tokens and events. Chunks further apart are left as they are.
pub fn merge_deliveries(chunks: &mut Vec<TokenChunk>) {
    let mut kept = 0usize;
    for i in 0..chunks.len() {
        let c = chunks[i];
        if kept > 0 && c.t_us.saturating_sub(chunks[kept - 1].t_us) <= DELIVERY_WINDOW_US {
            let d = &mut chunks[kept - 1];
            d.tokens = d.tokens.saturating_add(c.tokens);
            d.events = d.events.saturating_add(c.events);
        } else {
            chunks[kept] = c;
            kept += 1;
        }
    }
    chunks.truncate(kept);
}

/// Gaps shorter than this count as this long: events of one read share a timestamp (gap 0), and
/// on a log scale those zeros would pull the split below every real gap.
pub const GAP_FLOOR_US: u64 = 50;
/// Fewest gaps (events after the first) a stream needs before its bursts are looked for.
pub const MIN_GAPS: usize = 8;
/// Ratio of the long gaps' geometric mean to the short gaps' for a bimodal stream.
pub const MIN_SEPARATION: f64 = 10.0;
/// Share of all gaps the short ones must have.
pub const MIN_SHORT_SHARE: f64 = 0.2;

/// The gap (µs) at and above which an event starts a new group, or `None` when the stream has
/// no bursts to group.
pub fn burst_threshold_us(chunks: &[TokenChunk]) -> Option<f64> {
    if chunks.len() < MIN_GAPS + 1 {
        return None;
    }
    let mut logs: Vec<f64> = chunks
        .windows(2)
        .map(|w| (w[1].t_us.saturating_sub(w[0].t_us).max(GAP_FLOOR_US) as f64).ln())
        .collect();
    logs.sort_by(f64::total_cmp);
    let n = logs.len();
    let total: f64 = logs.iter().sum();
    // Otsu: the split k (first k gaps short) maximising k(n-k)(mean_short - mean_long)^2.
    let mut best: Option<(f64, usize, f64, f64)> = None;
    let mut prefix = 0.0;
    for k in 1..n {
        prefix += logs[k - 1];
        let short = prefix / k as f64;
        let long = (total - prefix) / (n - k) as f64;
        let score = (k * (n - k)) as f64 * (long - short).powi(2);
        if best.is_none_or(|b| score > b.0) {
            best = Some((score, k, short, long));
        }
    }
    let (_, k, short, long) = best?;
    let bimodal =
        long - short >= MIN_SEPARATION.ln() && k as f64 >= MIN_SHORT_SHARE * n as f64 && n - k >= 2;
    if !bimodal {
        return None;
    }
    // Halfway (in log space) between the longest short gap and the shortest long one; but a gap
    // under a third of the median step is no step of its own, whatever cluster it fell in.
    let otsu = f64::midpoint(logs[k - 1], logs[k]).exp();
    let median_step = logs[k + (n - k) / 2].exp();
    Some(otsu.max(median_step / 3.0))
}

/// Groups burst events into one chunk per burst (see the module docs). Returns whether it did.
pub fn group(chunks: &mut Vec<TokenChunk>) -> bool {
    let Some(threshold) = burst_threshold_us(chunks) else {
        return false;
    };
    let mut out: Vec<TokenChunk> = Vec::with_capacity(chunks.len());
    for (i, c) in chunks.iter().enumerate() {
        // The first chunk (i = 0) stays alone, and so the second always starts a group.
        let joins = i >= 2 && (c.t_us.saturating_sub(chunks[i - 1].t_us) as f64) < threshold;
        match out.last_mut() {
            Some(last) if joins => {
                last.t_us = c.t_us;
                last.tokens += c.tokens;
                last.events += c.events;
            }
            _ => out.push(*c),
        }
    }
    *chunks = out;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream whose steps (every `step_us`) deliver `sizes[i]` tokens `inner_us` apart.
    fn stream(step_us: u64, inner_us: u64, sizes: &[u32]) -> Vec<TokenChunk> {
        let mut v = vec![TokenChunk::new(5000, 1)];
        let mut t = 5000;
        for &n in sizes {
            t += step_us;
            for j in 0..u64::from(n) {
                v.push(TokenChunk::new(t + j * inner_us, 1));
            }
            t += u64::from(n - 1) * inner_us;
        }
        v
    }

    #[test]
    fn bursts_become_one_chunk_per_step_with_ttft_and_e2e_kept() {
        let sizes = [3, 1, 4, 2, 5, 3, 1, 2, 4, 3];
        let mut c = stream(7000, 50, &sizes);
        let (first, last) = (c[0].t_us, c.last().unwrap().t_us);
        let total: u32 = c.iter().map(|x| x.tokens).sum();
        assert!(group(&mut c));
        assert_eq!(c.len(), 1 + sizes.len());
        assert_eq!(
            c.iter().skip(1).map(|x| x.tokens).collect::<Vec<_>>(),
            sizes
        );
        assert_eq!(c[0], TokenChunk::new(first, 1));
        assert_eq!(c.last().unwrap().t_us, last);
        assert_eq!(c.iter().map(|x| x.tokens).sum::<u32>(), total);
    }

    #[test]
    fn a_burst_paused_by_the_server_stays_one_step() {
        // 7 ms steps of 3 tokens, 60 µs apart, except that every other burst pauses 1.5 ms after
        // its first token (the writer thread waiting for its core).
        let mut c = vec![TokenChunk::new(4000, 1)];
        let mut t = 4000;
        for i in 0..30 {
            t += 7000;
            let inner = if i % 2 == 0 {
                [0, 1500, 1560]
            } else {
                [0, 60, 120]
            };
            for d in inner {
                c.push(TokenChunk::new(t + d, 1));
            }
            t += inner[2];
        }
        assert!(group(&mut c));
        assert_eq!(c.len(), 31);
        assert!(c.iter().skip(1).all(|x| x.tokens == 3));
    }

    #[test]
    fn steady_one_token_steps_with_jitter_are_left_alone() {
        // 1.4 ms steps with ±20 % jitter and two late reads (a 60 µs gap) in 60 gaps.
        let mut c: Vec<TokenChunk> = Vec::new();
        let mut t = 3000u64;
        for i in 0..61u64 {
            c.push(TokenChunk::new(t, 1));
            t += match i {
                20 | 40 => 60,
                _ => 1120 + (i * 7919 % 560),
            };
        }
        let before = c.clone();
        assert!(!group(&mut c));
        assert_eq!(c, before);
    }

    #[test]
    fn short_streams_and_even_gaps_are_left_alone() {
        let mut short = stream(7000, 50, &[3, 3]);
        assert!(!group(&mut short));
        let mut even = stream(1000, 1000, &[1; 20]);
        assert!(burst_threshold_us(&even).is_none());
        assert!(!group(&mut even));
    }

    #[test]
    fn events_of_one_read_are_one_delivery() {
        // vLLM's API server behind at one stream: runs of one-token events read together
        // (the same stamp), and one event 100 µs after a delivery (still in it) or 101 µs (not).
        let t = |t_us, tokens| TokenChunk::new(t_us, tokens);
        let mut c = vec![
            t(9_000, 1),
            t(9_000, 1),
            t(11_400, 1),
            t(13_800, 1),
            t(13_800, 2),
            t(13_900, 1),
            t(16_000, 1),
            t(16_101, 1),
        ];
        merge_deliveries(&mut c);
        let d = |t_us, tokens, events| TokenChunk {
            t_us,
            tokens,
            events,
        };
        assert_eq!(
            c,
            vec![
                d(9_000, 2, 2),
                d(11_400, 1, 1),
                d(13_800, 4, 3),
                d(16_000, 1, 1),
                d(16_101, 1, 1)
            ]
        );
        let mut none: Vec<TokenChunk> = Vec::new();
        merge_deliveries(&mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn steps_count_the_events_they_group() {
        let mut c = stream(7000, 50, &[3, 1, 4, 2, 5, 3, 1, 2, 4, 3]);
        assert!(group(&mut c));
        assert_eq!(
            c.iter().map(|x| x.events).collect::<Vec<_>>(),
            [1, 3, 1, 4, 2, 5, 3, 1, 2, 4, 3]
        );
    }

    #[test]
    fn rare_pairs_are_not_speculation() {
        // Accept length 1.1: one step in ten carries two tokens (10 % short gaps).
        let sizes: Vec<u32> = (0..40).map(|i| if i % 10 == 0 { 2 } else { 1 }).collect();
        assert!(burst_threshold_us(&stream(5000, 40, &sizes)).is_none());
        // Accept length 1.5: half the steps carry two tokens (a third of gaps are short).
        let sizes: Vec<u32> = (0..40).map(|i| 1 + i % 2).collect();
        assert!(burst_threshold_us(&stream(5000, 40, &sizes)).is_some());
    }
}
