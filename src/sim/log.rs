//! The simulator's own record: its counters, the gauges it publishes, and a bounded log of
//! what it did with each request (the tests' answer key, served on `/sim/requests`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

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

    pub(super) fn record_step(&mut self, start: Instant, end: Instant, tokens: u32) {
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

pub(super) const RECENT_ACCEPT: usize = 256;

pub(super) const LOG_CAP: usize = 100_000;

/// Token frames kept in [`SimLog::traces`], over all its requests (16 bytes each).
const TRACE_FRAMES: usize = 1_000_000;

impl SimLog {
    pub(super) fn push(&mut self, r: SimRequestLog) {
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
