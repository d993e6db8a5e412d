//! The simulated engine: one task owns the queue, the running batch and the clock.
//!
//! Step deadlines are laid on an absolute timeline (`deadline += step`), so the timer's
//! millisecond rounding delays single wake-ups but never accumulates into the average rate.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::SimConfig;
use super::log::{RECENT_ACCEPT, SimLog, SimRequestLog};
use super::prefix_cache::PrefixCache;

/// What the engine sends back to a request's HTTP stream.
#[derive(Clone, Copy, Debug)]
pub struct Emit {
    /// New tokens (one SSE chunk).
    pub tokens: u32,
    /// These were the last tokens of the request.
    pub last: bool,
    /// Prompt tokens served from the prefix cache (set on the first emit).
    pub cached: u64,
    /// When the engine admitted the request (set on the first emit).
    pub admitted: Option<Instant>,
    /// The first block of its prompt the cache did not hold had been evicted then (µs since
    /// the Unix epoch; set on the first emit).
    pub prefix_evicted_unix_us: Option<u64>,
    /// The engine let go of the request's KV blocks then (µs since the Unix epoch; set on the
    /// last emit).
    pub released_unix_us: Option<u64>,
}

/// A request handed to the engine.
pub struct SimRequest {
    pub input_tokens: u64,
    pub max_tokens: u64,
    pub tx: mpsc::UnboundedSender<Emit>,
    pub arrived: Instant,
    /// The prompt's prefix-cache block hashes ([`super::prefix_cache::block_hashes`]).
    pub blocks: Vec<u64>,
    /// A chat prompt's marks ([`super::finished::marks`]), noted as finished when its prefill
    /// completes (empty for other prompts, or with the cache off).
    pub marks: Vec<super::finished::Mark>,
    /// Engine time its prefill costs beyond its tokens' (its LoRA adapter swapped in).
    pub extra_prefill: Duration,
    /// It carries a structured-output constraint: every step it is in costs
    /// `structured_step_ms` more.
    pub constrained: bool,
    /// What its steps' accept lengths are drawn from (its prompt's kind's, else the engine's).
    pub accept: super::AcceptLength,
}

struct Active {
    req: SimRequest,
    prefilled: u64,
    /// Prompt tokens found in the prefix cache at admission.
    cached: u64,
    generated: u64,
    first_token_at: Option<Instant>,
    steps: u32,
    /// When its prefill began.
    admitted: Option<Instant>,
    /// Its prompt's leading blocks it pins in the cache, and the KV blocks it holds outside it.
    pinned: usize,
    private: u64,
    /// What the cache said of its first missing block.
    prefix_evicted_unix_us: Option<u64>,
}

/// KV blocks `tokens` tokens take.
fn blocks_of(tokens: u64) -> u64 {
    tokens.div_ceil(super::prefix_cache::BLOCK as u64)
}

/// Starts the engine task; requests go in through the returned sender.
pub fn spawn(
    cfg: SimConfig,
    log: Arc<Mutex<SimLog>>,
    cache: Option<Arc<Mutex<PrefixCache>>>,
    shutdown: CancellationToken,
) -> mpsc::UnboundedSender<SimRequest> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        tokio::select! {
            () = run(cfg, rx, log, cache) => {}
            () = shutdown.cancelled() => {}
        }
    });
    tx
}

fn finish(
    a: &Active,
    now: Instant,
    completed: bool,
    log: &Mutex<SimLog>,
    cache: Option<&Mutex<PrefixCache>>,
) {
    if let Some(Ok(mut c)) = cache.map(Mutex::lock) {
        c.release(&a.req.blocks[..a.pinned], a.private);
    }
    if let Ok(mut l) = log.lock() {
        l.push(SimRequestLog {
            arrived: a.req.arrived,
            input_tokens: a.req.input_tokens,
            cached_tokens: a.cached,
            output_tokens: a.generated,
            ttft: a
                .first_token_at
                .map_or(Duration::ZERO, |t| t - a.req.arrived),
            e2e: now - a.req.arrived,
            decode_steps: a.steps,
            completed,
        });
        l.total_generated_tokens += a.generated;
    }
}

async fn run(
    cfg: SimConfig,
    mut rx: mpsc::UnboundedReceiver<SimRequest>,
    log: Arc<Mutex<SimLog>>,
    cache: Option<Arc<Mutex<PrefixCache>>>,
) {
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    let mut waiting: VecDeque<Active> = VecDeque::new();
    let mut prefilling: VecDeque<Active> = VecDeque::new();
    let mut running: Vec<Active> = Vec::new();
    let mut deadline = Instant::now();
    loop {
        while let Ok(r) = rx.try_recv() {
            waiting.push_back(new_active(r, &log));
        }
        drop_gone(
            &mut waiting,
            &mut prefilling,
            &mut running,
            &log,
            cache.as_deref(),
        );
        if waiting.is_empty() && prefilling.is_empty() && running.is_empty() {
            // Idle: the gauges read zero until the next request arrives.
            if let Ok(mut l) = log.lock() {
                l.step_started = None;
                l.running = 0;
                l.waiting = 0;
                l.kv_tokens = 0;
            }
            match rx.recv().await {
                Some(r) => {
                    waiting.push_back(new_active(r, &log));
                    deadline = Instant::now();
                    continue;
                }
                None => return,
            }
        }
        while prefilling.len() + running.len() < cfg.max_running as usize {
            match waiting.pop_front() {
                Some(mut a) => {
                    admit(&mut a, cache.as_deref(), &log);
                    prefilling.push_back(a);
                }
                None => break,
            }
        }
        publish_gauges(&log, &waiting, &prefilling, &running);
        let step_start = Instant::now();
        if let Ok(mut l) = log.lock() {
            l.step_started = Some(step_start);
        }
        // Never schedule a step in the past after an idle period or a slow wake-up. A wake-up
        // that late is time the engine does not make up: its steps ran longer than configured.
        let now = Instant::now();
        let floor = now.checked_sub(Duration::from_millis(2)).unwrap_or(now);
        if deadline < floor {
            if let Ok(mut l) = log.lock() {
                l.schedule_slip += floor - deadline;
            }
            deadline = floor;
        }
        if !prefilling.is_empty() {
            prefill_step(
                &cfg,
                &mut prefilling,
                &mut running,
                &mut deadline,
                step_start,
                &log,
                cache.as_deref(),
            )
            .await;
        } else if !running.is_empty() {
            decode_step(
                &cfg,
                &mut running,
                (&mut deadline, step_start),
                (&log, cache.as_deref()),
                &mut rng,
            )
            .await;
        }
    }
}

/// Clients that went away free their slot (a cancelled request, a dropped connection).
fn drop_gone(
    waiting: &mut VecDeque<Active>,
    prefilling: &mut VecDeque<Active>,
    running: &mut Vec<Active>,
    log: &Mutex<SimLog>,
    cache: Option<&Mutex<PrefixCache>>,
) {
    let now = Instant::now();
    for q in [waiting, prefilling] {
        q.retain(|a| {
            let open = !a.req.tx.is_closed();
            if !open {
                finish(a, now, false, log, cache);
            }
            open
        });
    }
    running.retain(|a| {
        let open = !a.req.tx.is_closed();
        if !open {
            finish(a, now, false, log, cache);
        }
        open
    });
}

/// The scheduler's gauges as they stand: running, waiting, KV tokens in use, and their peaks.
fn publish_gauges(
    log: &Mutex<SimLog>,
    waiting: &VecDeque<Active>,
    prefilling: &VecDeque<Active>,
    running: &[Active],
) {
    if let Ok(mut l) = log.lock() {
        l.running = running.len() + prefilling.len();
        l.waiting = waiting.len();
        l.kv_tokens = running
            .iter()
            .map(|a| a.req.input_tokens + a.generated)
            .chain(prefilling.iter().map(|a| a.prefilled))
            .sum();
        l.peak_running = l.peak_running.max(l.running);
        l.peak_waiting = l.peak_waiting.max(l.waiting);
    }
}

/// One prefill piece of the prompt at the head of the queue; when it completes, its first
/// token goes out and it joins the decode batch.
async fn prefill_step(
    cfg: &SimConfig,
    prefilling: &mut VecDeque<Active>,
    running: &mut Vec<Active>,
    deadline: &mut Instant,
    step_start: Instant,
    log: &Mutex<SimLog>,
    cache: Option<&Mutex<PrefixCache>>,
) {
    let Some(head) = prefilling.front_mut() else {
        return;
    };
    // Prefill has priority and stalls the decode batch while it runs.
    let piece = (head.req.input_tokens - head.prefilled).min(cfg.prefill_chunk_tokens);
    // Its adapter's cost, paid once, in its first piece.
    *deadline += std::mem::take(&mut head.req.extra_prefill);
    *deadline += Duration::from_secs_f64(piece as f64 / cfg.prefill_tokens_per_s);
    tokio::time::sleep_until((*deadline).into()).await;
    head.prefilled += piece;
    let done = head.prefilled >= head.req.input_tokens;
    if let Ok(mut l) = log.lock() {
        l.record_step(step_start, Instant::now(), u32::from(done));
    }
    if done && let Some(mut a) = prefilling.pop_front() {
        if let Some(Ok(mut c)) = cache.map(Mutex::lock) {
            c.prefilled(&a.req.blocks, a.pinned);
            c.finished.insert(&a.req.marks);
            let full = a.req.blocks.len();
            a.private = a
                .private
                .saturating_sub((full.saturating_sub(a.pinned)) as u64);
            a.pinned = full;
        }
        let now = Instant::now();
        a.first_token_at = Some(now);
        a.generated = 1;
        if let Ok(mut l) = log.lock() {
            l.ttft_sum += now.saturating_duration_since(a.req.arrived);
            l.ttft_count += 1;
        }
        let last = a.generated >= a.req.max_tokens;
        let _ = a.req.tx.send(Emit {
            tokens: 1,
            last,
            cached: a.cached,
            admitted: a.admitted,
            prefix_evicted_unix_us: a.prefix_evicted_unix_us,
            released_unix_us: last.then(crate::metrics::unix_us),
        });
        if last {
            finish(&a, now, true, log, cache);
        } else {
            running.push(a);
        }
    }
}

/// One decode step of the whole batch: each request accepts a drawn number of tokens.
async fn decode_step(
    cfg: &SimConfig,
    running: &mut Vec<Active>,
    (deadline, step_start): (&mut Instant, Instant),
    (log, cache): (&Mutex<SimLog>, Option<&Mutex<PrefixCache>>),
    rng: &mut SmallRng,
) {
    let context: u64 = running
        .iter()
        .map(|a| a.req.input_tokens + a.generated)
        .sum();
    let mask_ms = if running.iter().any(|a| a.req.constrained) {
        cfg.structured_step_ms
    } else {
        0.0
    };
    *deadline += Duration::from_secs_f64((cfg.step_ms(running.len(), context) + mask_ms) / 1000.0);
    tokio::time::sleep_until((*deadline).into()).await;
    let now = Instant::now();
    let width = cfg.draft_width();
    let mut step_tokens = 0u32;
    let (mut drafts, mut draft_tokens, mut accepted) = (0u64, 0u64, 0u64);
    let mut per_pos = vec![0u64; width as usize];
    let mut accepts = Vec::with_capacity(running.len());
    running.retain_mut(|a| {
        let drawn = if a.req.constrained && cfg.structured_accept_length >= 1.0 {
            // No more than the drafts the plain model makes: a mask only rejects.
            super::AcceptLength::Mean(cfg.structured_accept_length)
                .draw(rng)
                .min(width + 1)
        } else {
            a.req.accept.draw(rng).min(width + 1)
        };
        let k = u64::from(drawn).min(a.req.max_tokens - a.generated);
        a.generated += k;
        // Its KV grows into new blocks as its output does.
        let held = a.pinned as u64 + a.private;
        let need = blocks_of(a.req.input_tokens + a.generated);
        if need > held
            && let Some(Ok(mut c)) = cache.map(Mutex::lock)
        {
            c.grow(need - held);
            a.private += need - held;
        }
        a.steps += 1;
        step_tokens += k as u32;
        if width > 0 {
            // One draft of `width` tokens per request per step, k − 1 of them accepted
            // (the step's last token is the target model's own), as vLLM counts.
            drafts += 1;
            draft_tokens += u64::from(width);
            accepted += k - 1;
            for p in per_pos.iter_mut().take((k - 1) as usize) {
                *p += 1;
            }
        }
        accepts.push(k as u32);
        let last = a.generated >= a.req.max_tokens;
        let _ = a.req.tx.send(Emit {
            tokens: k as u32,
            last,
            cached: 0,
            admitted: None,
            prefix_evicted_unix_us: None,
            released_unix_us: last.then(crate::metrics::unix_us),
        });
        if last {
            finish(a, now, true, log, cache);
            false
        } else {
            true
        }
    });
    if let Ok(mut l) = log.lock() {
        l.record_step(step_start, now, step_tokens);
        l.spec_drafts += drafts;
        l.spec_draft_tokens += draft_tokens;
        l.spec_accepted += accepted;
        if l.spec_accepted_per_pos.len() < per_pos.len() {
            l.spec_accepted_per_pos.resize(per_pos.len(), 0);
        }
        for (i, v) in per_pos.iter().enumerate() {
            l.spec_accepted_per_pos[i] += v;
        }
        for k in accepts {
            if l.recent_accept.len() >= RECENT_ACCEPT {
                l.recent_accept.pop_front();
            }
            l.recent_accept.push_back(k);
        }
    }
}

/// Recent admissions behind the SGLang-style hit-rate gauge.
const RECENT_CACHE: usize = 256;

/// Looks the prompt up in the prefix cache as it is admitted: the cached part needs no prefill.
/// At least the last prompt token is always computed (it yields the first output token), as
/// vLLM does when a whole prompt is cached.
fn admit(a: &mut Active, cache: Option<&Mutex<PrefixCache>>, log: &Mutex<SimLog>) {
    let blocks = match cache.map(Mutex::lock) {
        Some(Ok(mut c)) => {
            let all = blocks_of(a.req.input_tokens);
            let adm = c.admit(&a.req.blocks, all);
            a.pinned = adm.cached_blocks;
            a.private = all.saturating_sub(adm.cached_blocks as u64);
            a.prefix_evicted_unix_us = adm.first_missing_evicted_unix_us;
            adm.cached_blocks
        }
        _ => 0,
    };
    let cached = (blocks as u64 * super::prefix_cache::BLOCK as u64)
        .min(a.req.input_tokens.saturating_sub(1));
    a.cached = cached;
    a.prefilled = cached;
    a.admitted = Some(Instant::now());
    if let Ok(mut l) = log.lock() {
        l.total_cached_tokens += cached;
        l.total_cache_queries += a.req.input_tokens;
        if l.recent_cache.len() >= RECENT_CACHE {
            l.recent_cache.pop_front();
        }
        l.recent_cache.push_back((cached, a.req.input_tokens));
    }
}

fn new_active(req: SimRequest, log: &Mutex<SimLog>) -> Active {
    if let Ok(mut l) = log.lock() {
        l.total_prompt_tokens += req.input_tokens;
    }
    Active {
        req,
        prefilled: 0,
        cached: 0,
        generated: 0,
        first_token_at: None,
        steps: 0,
        admitted: None,
        pinned: 0,
        private: 0,
        prefix_evicted_unix_us: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::prefix_cache::{BLOCK, EvictedFor, block_hashes};

    /// Sends a request of `ids` for `max_tokens` and reads it to its end: what its first emit
    /// said of the cache.
    async fn serve(
        engine: &mpsc::UnboundedSender<SimRequest>,
        ids: &[u32],
        max_tokens: u64,
    ) -> (u64, Option<u64>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        engine
            .send(SimRequest {
                input_tokens: ids.len() as u64,
                max_tokens,
                tx,
                arrived: Instant::now(),
                blocks: block_hashes(ids),
                marks: Vec::new(),
                extra_prefill: Duration::ZERO,
                constrained: false,
                accept: super::super::AcceptLength::Fixed(1),
            })
            .unwrap();
        let first = rx.recv().await.unwrap();
        let mut last = first.last;
        while !last {
            last = rx.recv().await.unwrap().last;
        }
        (first.cached, first.prefix_evicted_unix_us)
    }

    #[tokio::test]
    async fn a_running_requests_output_evicts_the_idle_prefix_tail_first() {
        // A pool of 8 blocks. A's 64-token prompt (4 blocks) is served and stays cached. B, a
        // 32-token prompt generating 48 tokens, ends holding 80 tokens: 5 blocks, one more
        // than the 4 left, so exactly one of A's goes, its last. A again finds its first 3.
        let mut cfg = super::super::SimConfig::preset("fast").unwrap();
        cfg.accept_length = super::super::AcceptLength::Mean(1.0);
        let log = Arc::new(Mutex::new(SimLog::default()));
        let cache = Arc::new(Mutex::new(PrefixCache::new(8 * BLOCK as u64)));
        let stop = CancellationToken::new();
        let engine = spawn(cfg, log, Some(cache.clone()), stop.clone());
        let a: Vec<u32> = (0..64).collect();
        let b: Vec<u32> = (1000..1032).collect();
        assert_eq!(serve(&engine, &a, 1).await, (0, None));
        assert_eq!(serve(&engine, &b, 48).await.0, 0);
        let evictions: Vec<_> = cache.lock().unwrap().evictions.iter().copied().collect();
        assert_eq!(evictions.len(), 1, "{evictions:?}");
        assert_eq!(evictions[0].tokens, BLOCK as u64);
        assert_eq!(evictions[0].evicted_for, EvictedFor::Running);
        assert_eq!(
            serve(&engine, &a, 1).await,
            (3 * BLOCK as u64, Some(evictions[0].unix_us))
        );
        stop.cancel();
    }
}
