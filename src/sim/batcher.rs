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
}

/// Ground truth of one request as the simulator served it.
#[derive(Clone, Debug)]
pub struct SimRequestLog {
    /// When the request reached the simulator (its HTTP request read).
    pub arrived: Instant,
    pub input_tokens: u64,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// Arrival to first emitted token.
    pub ttft: Duration,
    /// Arrival to last emitted token.
    pub e2e: Duration,
    /// Decode steps (chunks after the first).
    pub decode_steps: u32,
    pub completed: bool,
}

/// Ground truth of one chat stream's answer as the simulator streamed it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStreamLog {
    pub reasoning_tokens: u64,
    /// Tokens after the thinking: the answer, or the tool calls' names and arguments.
    pub answer_tokens: u64,
    pub tool_calls: u32,
    /// From the request's arrival to its first token of any kind, to the first answer token,
    /// and to the first tool-call delta.
    pub first_token: Option<Duration>,
    pub first_content: Option<Duration>,
    pub first_tool_call: Option<Duration>,
}

/// The simulator's own counters and a bounded log of finished requests.
#[derive(Clone, Debug, Default)]
pub struct SimLog {
    pub requests: VecDeque<SimRequestLog>,
    pub total_prompt_tokens: u64,
    /// Prompt tokens of admitted requests found in the prefix cache.
    pub total_cached_tokens: u64,
    /// Prompt tokens looked up in the prefix cache (admitted requests' prompts).
    pub total_cache_queries: u64,
    /// (cached, prompt) tokens of recent admissions (SGLang's recent-window hit rate).
    pub recent_cache: VecDeque<(u64, u64)>,
    pub total_generated_tokens: u64,
    /// The engine's TTFT histogram, as SGLang and vLLM keep one: arrival to first token,
    /// summed, and how many requests reached their first token.
    pub ttft_sum: Duration,
    pub ttft_count: u64,
    pub peak_running: usize,
    pub peak_waiting: usize,
    /// Time the engine fell behind its own step schedule and did not make up (the machine woke
    /// it more than 2 ms late): its steps took that much longer than configured, in all.
    pub schedule_slip: Duration,
    /// Requests refused for a missing or wrong API key.
    pub unauthorized: u64,
    /// Requests admitted (prefilling or decoding) and waiting, now.
    pub running: usize,
    pub waiting: usize,
    /// Tokens of context held by admitted requests, now.
    pub kv_tokens: u64,
    /// Speculative decoding counters, vLLM-style: one draft per request per decode step.
    pub spec_drafts: u64,
    pub spec_draft_tokens: u64,
    pub spec_accepted: u64,
    pub spec_accepted_per_pos: Vec<u64>,
    /// Tokens per step of recent decode steps (the engine's own recent-window accept length).
    pub recent_accept: VecDeque<u32>,
    /// Start and end of recent engine steps (utilization over the last second).
    pub recent_busy: VecDeque<(Instant, Instant)>,
    /// Time the engine spent stepping since it started, and when it started (the simulated
    /// GPUs' energy counter integrates over them).
    pub busy_total: Duration,
    pub started: Option<Instant>,
    /// When the step the engine is in now began (`None` between steps): a GPU draws its
    /// busy power through a long prefill chunk, not only once the chunk is done.
    pub step_started: Option<Instant>,
    /// Generated tokens with their times, last few seconds (generation throughput gauge).
    pub recent_tokens: VecDeque<(Instant, u32)>,
    /// Faults injected so far, by kind.
    pub injected: std::collections::BTreeMap<super::faults::FaultKind, u64>,
    /// Chat streams' answers (bounded, as `requests`).
    pub streams: VecDeque<SimStreamLog>,
    /// The assistant messages chat requests sent back in their history (bounded).
    pub received_assistant: VecDeque<String>,
    /// Every request's own record, on the Unix clock: the most recent, at most `LOG_CAP`
    /// requests and `TRACE_FRAMES` frames between them (about 16 MB), so a simulator serving
    /// for hours stays bounded.
    pub traces: VecDeque<super::truth::SimRequestTrace>,
    /// Frames held in `traces`.
    pub trace_frames: usize,
    /// When `/metrics` was read, on the Unix clock (µs; the most recent `LOG_CAP`), so a
    /// test knows which moments the engine's gauges were seen at.
    pub metrics_reads: VecDeque<u64>,
    /// When its prefix cache was flushed (`/flush_cache`), on the Unix clock (µs; the most
    /// recent `LOG_CAP`).
    pub cache_flushes: VecDeque<u64>,
}

impl SimLog {
    /// Fraction of the last second the engine was stepping.
    pub fn busy_fraction(&self, now: Instant) -> f64 {
        let from = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
        let busy: f64 = self
            .recent_busy
            .iter()
            .copied()
            .chain(self.step_started.map(|s| (s, now)))
            .map(|(a, b)| {
                b.min(now)
                    .saturating_duration_since(a.max(from))
                    .as_secs_f64()
            })
            .sum();
        busy.clamp(0.0, 1.0)
    }

    /// Tokens generated over the last second.
    pub fn tokens_last_second(&self, now: Instant) -> u64 {
        let from = now.checked_sub(Duration::from_secs(1)).unwrap_or(now);
        self.recent_tokens
            .iter()
            .filter(|(t, _)| *t >= from)
            .map(|(_, n)| u64::from(*n))
            .sum()
    }

    /// Energy of one simulated GPU since the simulator started, in millijoules: `idle_w` the
    /// whole time plus `busy_w − idle_w` while the engine stepped.
    pub fn energy_mj(&self, now: Instant, idle_w: f64, busy_w: f64) -> u64 {
        let up = self
            .started
            .map_or(0.0, |s| now.saturating_duration_since(s).as_secs_f64());
        let stepping = self
            .step_started
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
        let busy = (self.busy_total + stepping).as_secs_f64().min(up);
        ((idle_w * up + (busy_w - idle_w) * busy) * 1000.0).round() as u64
    }

    fn record_step(&mut self, start: Instant, end: Instant, tokens: u32) {
        self.step_started = None;
        self.busy_total += end.saturating_duration_since(start);
        self.recent_busy.push_back((start, end));
        self.recent_tokens.push_back((end, tokens));
        let keep = end.checked_sub(Duration::from_secs(2)).unwrap_or(end);
        while self.recent_busy.front().is_some_and(|(_, e)| *e < keep) {
            self.recent_busy.pop_front();
        }
        while self.recent_tokens.front().is_some_and(|(t, _)| *t < keep) {
            self.recent_tokens.pop_front();
        }
    }
}

const RECENT_ACCEPT: usize = 256;

pub(super) const LOG_CAP: usize = 100_000;

/// Token frames kept in [`SimLog::traces`], over all its requests (16 bytes each).
const TRACE_FRAMES: usize = 1_000_000;

impl SimLog {
    fn push(&mut self, r: SimRequestLog) {
        if self.requests.len() >= LOG_CAP {
            self.requests.pop_front();
        }
        self.requests.push_back(r);
    }

    /// Notes a chat stream's answer.
    pub fn push_stream(&mut self, s: SimStreamLog) {
        if self.streams.len() >= LOG_CAP {
            self.streams.pop_front();
        }
        self.streams.push_back(s);
    }

    /// Notes what the simulator did with one request.
    pub fn push_trace(&mut self, t: super::truth::SimRequestTrace) {
        self.trace_frames += t.writes.len();
        self.traces.push_back(t);
        while self.traces.len() > LOG_CAP || self.trace_frames > TRACE_FRAMES {
            let Some(old) = self.traces.pop_front() else {
                break;
            };
            self.trace_frames -= old.writes.len();
        }
    }

    /// Notes an assistant message a chat request sent back.
    pub fn push_received_assistant(&mut self, text: String) {
        if self.received_assistant.len() >= LOG_CAP {
            self.received_assistant.pop_front();
        }
        self.received_assistant.push_back(text);
    }
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

fn finish(a: &Active, now: Instant, completed: bool, log: &Mutex<SimLog>) {
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
        drop_gone(&mut waiting, &mut prefilling, &mut running, &log);
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
                &mut deadline,
                step_start,
                &log,
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
) {
    let now = Instant::now();
    for q in [waiting, prefilling] {
        q.retain(|a| {
            let open = !a.req.tx.is_closed();
            if !open {
                finish(a, now, false, log);
            }
            open
        });
    }
    running.retain(|a| {
        let open = !a.req.tx.is_closed();
        if !open {
            finish(a, now, false, log);
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
            c.insert(&a.req.blocks);
            c.finished.insert(&a.req.marks);
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
        });
        if last {
            finish(&a, now, true, log);
        } else {
            running.push(a);
        }
    }
}

/// One decode step of the whole batch: each request accepts a drawn number of tokens.
async fn decode_step(
    cfg: &SimConfig,
    running: &mut Vec<Active>,
    deadline: &mut Instant,
    step_start: Instant,
    log: &Mutex<SimLog>,
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
    let width = cfg.accept_length.draft_width();
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
            cfg.accept_length.draw(rng)
        };
        let k = u64::from(drawn).min(a.req.max_tokens - a.generated);
        a.generated += k;
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
        });
        if last {
            finish(a, now, true, log);
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
        Some(Ok(mut c)) => c.lookup(&a.req.blocks),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::truth::SimRequestTrace;

    #[test]
    fn a_step_in_progress_draws_busy_power_and_counts_in_the_energy() {
        // One long step (a prefill chunk) began at t0 and has not ended 1.5 s later: the power
        // gauge reads busy, and the counter holds 1.5 s at busy power, as a GPU's would.
        let t0 = Instant::now();
        let log = SimLog {
            started: Some(t0),
            step_started: Some(t0),
            ..SimLog::default()
        };
        let now = t0 + Duration::from_millis(1500);
        assert!((log.busy_fraction(now) - 1.0).abs() < 1e-9);
        assert_eq!(log.energy_mj(now, 80.0, 350.0), 525_000);
        // Between steps, idle power only.
        let idle = SimLog {
            started: Some(t0),
            ..SimLog::default()
        };
        assert!(idle.busy_fraction(now).abs() < 1e-12);
        assert_eq!(idle.energy_mj(now, 80.0, 350.0), 120_000);
    }

    #[test]
    fn the_request_record_keeps_the_newest_within_its_frame_bound() {
        let mut log = SimLog::default();
        // 2,500 requests of 1,000 frames: 2.5 million frames offered, a million kept.
        for i in 0..2_500u64 {
            log.push_trace(SimRequestTrace {
                received_unix_us: i,
                writes: vec![(i, 1); 1_000],
                ..SimRequestTrace::default()
            });
        }
        assert_eq!(log.trace_frames, TRACE_FRAMES);
        assert_eq!(log.traces.len(), TRACE_FRAMES / 1_000);
        assert_eq!(log.traces.back().map(|t| t.received_unix_us), Some(2_499));
        assert_eq!(
            log.trace_frames,
            log.traces.iter().map(|t| t.writes.len()).sum::<usize>()
        );
    }
}
