//! The simulator's own record of every streamed request, on the Unix clock: when it read the
//! request, when its engine admitted it, and when each frame of token events went to the
//! connection. Served at `GET /sim/requests` (and kept in [`super::SimLog::traces`] for an
//! in-process simulator), so a test checks each request a client measured against what the
//! server really did, with a fixed tolerance, whatever the machine's load; and says how far the
//! simulator fell behind its own step schedule, so a test can tell a starved machine from a
//! wrong measurement.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::metrics::unix_us;

/// What the simulator did with one request that reached its engine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimRequestTrace {
    /// The request's `X-Request-Id`, if it sent one (servetop sends `servetop-LEVEL-INDEX`).
    pub request_id: Option<String>,
    /// The request read, before its prompt is tokenized (µs since the Unix epoch).
    pub received_unix_us: u64,
    /// The prompt's tokens as the simulator counted them (with a chat's template tokens), and
    /// the output tokens the request asked for.
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub max_tokens: u64,
    /// Where its answer ended on its own, below `max_tokens` (`--natural-len`; absent where it
    /// ran to `max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub natural_stop_at: Option<u64>,
    /// Prompt tokens its images took (in `prompt_tokens` too).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub image_tokens: u64,
    /// The kind its prompt's marker named (`--content`; none: no marker, `random`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<crate::workload::content::ContentKind>,
    /// It carried a structured-output constraint.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub structured: bool,
    /// Its answer fails its constraint: broken on purpose (every `structured_invalid_every`-th
    /// constrained request), or a JSON document cut by its output limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub structured_invalid: bool,
    /// The LoRA adapter it named (none: the base model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<String>,
    /// The engine admitted it: its prefill began (none if it never did).
    pub admitted_unix_us: Option<u64>,
    /// Each frame of token events as it was handed to the connection: µs since the Unix epoch,
    /// taken just before, and the tokens the frame carried. A frame holds one decode step's
    /// events, or several with `--write-batch`.
    pub writes: Vec<(u64, u32)>,
    /// The frame with the first answer token (after any thinking) was written then; none for a
    /// stream that is not a chat answer, or that never began its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_content_unix_us: Option<u64>,
    /// The frame with the last token was written.
    pub completed: bool,
    /// Prompt tokens its prefix cache served (the usage's `prompt_tokens_details.
    /// cached_tokens`); none with the cache off, or before its prefill completed (the engine
    /// says it with the first token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// When it arrived (its prompt tokenized, before the engine had it): its prompt's longest
    /// prefix, cut where a message's content or its opening tokens end, that
    /// equals the start of a sequence the simulator had finished, a prompt whose prefill had
    /// completed or a reply as the next turn renders it (its prompt, the assistant message's
    /// opening, the reply); 0 for none. Not bounded by the cache's capacity or blocks: what it
    /// had finished, not what it still holds (that is `cached_tokens`), up to
    /// [`super::finished::MARKS_KEPT`] (the module says what it cannot see). Chat requests with
    /// the prefix cache on only: none for
    /// completions and `/generate`, or with the cache off. Images take no tokens in the
    /// simulated template's ids, so with images it counts text and template tokens only, as
    /// `cached_tokens` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_prefix_tokens: Option<u64>,
    /// When its prefill began, the first block of its prompt the cache did not hold had been
    /// evicted at this instant (µs since the Unix epoch): what it lost, and when. None when that
    /// block was never cached (or the cache is off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_evicted_unix_us: Option<u64>,
    /// The engine let go of its KV blocks (its last token generated; µs since the Unix epoch):
    /// from then on they can be evicted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_unix_us: Option<u64>,
}

impl SimRequestTrace {
    /// Tokens written in all.
    pub fn tokens(&self) -> u64 {
        self.writes.iter().map(|&(_, n)| u64::from(n)).sum()
    }

    /// When the first and the last token went out.
    pub fn first_write_unix_us(&self) -> Option<u64> {
        self.writes.first().map(|w| w.0)
    }

    pub fn last_write_unix_us(&self) -> Option<u64> {
        self.writes.last().map(|w| w.0)
    }
}

/// The page `GET /sim/requests` serves.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SimTruth {
    /// Always true: this is a simulated server's record.
    pub simulated: bool,
    /// Time the engine fell behind its own step schedule and did not make up, since it started
    /// ([`super::SimLog::schedule_slip`]).
    pub schedule_slip_ms: f64,
    /// When the simulator started (µs since the Unix epoch).
    pub started_unix_us: u64,
    /// The most recent requests (at most 100,000, and a million frames between them), oldest
    /// first.
    pub requests: Vec<SimRequestTrace>,
    /// When its `/metrics` page was read (µs since the Unix epoch), oldest first: the moments
    /// a client saw its running and waiting gauges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics_reads_unix_us: Vec<u64>,
    /// When its prefix cache was flushed (`/flush_cache`; µs since the Unix epoch), oldest
    /// first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cache_flushes_unix_us: Vec<u64>,
    /// Its KV cache's evictions (the most recent), oldest first: when, how many tokens, and
    /// for what (`running`: a running request's KV; `cache`: blocks handed to the cache).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<super::prefix_cache::Eviction>,
    /// The most tokens its running requests held beyond `--kv-capacity-tokens` (vLLM would
    /// have preempted; 0: never).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub kv_overcommit_peak_tokens: u64,
}

impl SimTruth {
    /// The record of the simulator behind `log`, now.
    pub fn of(log: &super::SimLog) -> Self {
        Self {
            simulated: true,
            schedule_slip_ms: log.schedule_slip.as_secs_f64() * 1e3,
            started_unix_us: log.started.map_or(0, unix_of),
            requests: log.traces.iter().cloned().collect(),
            metrics_reads_unix_us: log.metrics_reads.iter().copied().collect(),
            cache_flushes_unix_us: log.cache_flushes.iter().copied().collect(),
            evictions: Vec::new(),
            kv_overcommit_peak_tokens: 0,
        }
    }

    /// With the record of its KV cache.
    #[must_use]
    pub fn with_cache(mut self, cache: &super::prefix_cache::PrefixCache) -> Self {
        self.evictions = cache.evictions.iter().copied().collect();
        self.kv_overcommit_peak_tokens =
            cache.overcommit_peak_blocks * super::prefix_cache::BLOCK as u64;
        self
    }

    /// The request sent with this `X-Request-Id`.
    pub fn request(&self, id: &str) -> Option<&SimRequestTrace> {
        self.requests
            .iter()
            .find(|r| r.request_id.as_deref() == Some(id))
    }
}

/// An instant of this process on the Unix clock, in µs.
pub fn unix_of(t: Instant) -> u64 {
    let ago = Instant::now().saturating_duration_since(t).as_micros() as u64;
    unix_us().saturating_sub(ago)
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(v: &u64) -> bool {
    *v == 0
}
