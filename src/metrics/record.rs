//! One finished request as measured (`RequestRecord`) and the per-request maths of docs/metrics.md.
//!
//! The client keeps per-chunk arrival times inside the worker and folds them into one record; this
//! module turns the raw chunk list into exact token counts per chunk (or an honest, labelled
//! estimate) and into TTFT, E2E, TPOT and decode speed.

use serde::{Deserialize, Serialize};

/// Where a token count came from, best first (docs/metrics.md "Per request", output tokens).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CountSource {
    /// `usage` reported by the server (final or per chunk).
    Usage,
    /// Per-chunk cumulative counts from the server (vLLM `continuous_usage_stats`).
    PerChunkUsage,
    /// Engine-native cumulative counts (SGLang `meta_info.completion_tokens`).
    EngineNative,
    /// Counted locally with the configured tokenizer.
    Tokenizer,
    /// Counted by the server's `/tokenize` endpoint before sending.
    ServerTokenize,
    /// One token per content chunk, rescaled to the final usage count when there is one.
    ChunkEstimate,
    /// The planned length, because nothing better was reported.
    Planned,
}

impl CountSource {
    /// Whether this source is exact (not an estimate).
    pub fn is_exact(self) -> bool {
        !matches!(self, CountSource::ChunkEstimate | CountSource::Planned)
    }

    /// Short human name.
    pub fn label(self) -> &'static str {
        match self {
            CountSource::Usage => "server usage",
            CountSource::PerChunkUsage => "per-chunk usage",
            CountSource::EngineNative => "engine meta_info",
            CountSource::Tokenizer => "local tokenizer",
            CountSource::ServerTokenize => "server /tokenize",
            CountSource::ChunkEstimate => "chunk estimate",
            CountSource::Planned => "planned length",
        }
    }
}

/// Why a request failed (docs/metrics.md "Per level", failures by kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Could not connect (refused, DNS, TLS).
    Connect,
    /// The server answered with a non-success HTTP status.
    HttpStatus,
    /// No first token within the first-token timeout, or no bytes within the idle timeout.
    Timeout,
    /// The stream ended before the server said it was finished.
    StreamCut,
    /// The stream carried something that is not the expected JSON.
    BadPayload,
    /// The server refused the prompt as longer than its context.
    ContextTooLong,
    /// The server sent an error object inside the stream.
    ServerError,
}

impl FailureKind {
    /// Every kind, in report order.
    pub const ALL: [FailureKind; 7] = [
        FailureKind::Connect,
        FailureKind::HttpStatus,
        FailureKind::Timeout,
        FailureKind::StreamCut,
        FailureKind::BadPayload,
        FailureKind::ContextTooLong,
        FailureKind::ServerError,
    ];

    /// The `snake_case` name used in files.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::HttpStatus => "http_status",
            FailureKind::Timeout => "timeout",
            FailureKind::StreamCut => "stream_cut",
            FailureKind::BadPayload => "bad_payload",
            FailureKind::ContextTooLong => "context_too_long",
            FailureKind::ServerError => "server_error",
        }
    }
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Failed {
        kind: FailureKind,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http_status: Option<u16>,
    },
    /// Stopped by the user (quit, skip) before it finished: neither a success nor a failure.
    Cancelled,
}

/// A delivery that carried at least one generated token: arrival time since `t_send`, its token
/// count, and how many token-carrying SSE events it held (docs/metrics.md "A chunk is a
/// delivery").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenChunk {
    pub t_us: u64,
    pub tokens: u32,
    /// Token-carrying events merged into this chunk (1 for a chunk that arrived alone).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub events: u32,
}

impl TokenChunk {
    /// A chunk of one event.
    pub const fn new(t_us: u64, tokens: u32) -> Self {
        Self {
            t_us,
            tokens,
            events: 1,
        }
    }
}

fn one() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_one(v: &u32) -> bool {
    *v == 1
}

/// How the client counted tokens per chunk while the stream ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkCounting {
    /// Exact per-chunk counts from the server (cumulative counters differenced).
    Exact(CountSource),
    /// Chunk text counted with the local tokenizer.
    Tokenizer,
    /// One token per content chunk, to be rescaled by the final usage count.
    OnePerChunk,
}

/// One finished request, as sent from the worker to the app and written to `requests.jsonl`.
///
/// Times are microseconds; `*_at_us` are offsets from the level's origin (the instant the level
/// started), the others are durations from `t_send`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub level: u32,
    pub index: u32,
    #[serde(default)]
    pub warmup: bool,
    /// `t_sched`: when the plan wanted the request to start.
    pub sched_at_us: u64,
    /// `t_send`: just before the request was written.
    pub send_at_us: u64,
    /// When the exchange ended (stream closed, failure or cancel).
    pub end_at_us: u64,
    #[serde(flatten)]
    pub outcome: Outcome,
    pub planned_input_tokens: u64,
    pub input_tokens: u64,
    pub input_source: CountSource,
    pub output_tokens: u64,
    pub output_source: CountSource,
    pub chunk_source: CountSource,
    /// TTFT: `t_first - t_send`.
    pub ttft_us: Option<u64>,
    /// E2E latency: `t_last - t_send`.
    pub e2e_us: Option<u64>,
    /// Token-carrying chunks (kept in the file only with `--record-chunks`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<TokenChunk>,
    /// Transparent retries of a stale pooled connection before any byte was sent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retries: u32,
    /// The closed-loop worker that sent it (0..C): one worker's requests never overlap, which
    /// lets the level fold its peak in flight online instead of keeping every interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    /// Prompt tokens the server says it served from its prefix cache (`usage.
    /// prompt_tokens_details.cached_tokens`, SGLang `meta_info.cached_tokens`, Messages
    /// `cache_read_input_tokens`); `None` when it does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// The turn of its conversation (1 = first) at a multi-turn or session level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// A session level's turn: its session's number in the level (from 0; the plan's number
    /// across shards), whether its own turn or a sub-agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u32>,
    /// A sub-agent's turn (`--fan-out`): which of its session's sub-agents sent it (1 = the
    /// first); `turn` is then the sub-agent's own turn. None for a session's own turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_agent: Option<u32>,
    /// On a session's own turns: how many it has (an agent trace's sessions differ in
    /// length), so the one with `turn` equal to it is its last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_turns: Option<u32>,
    /// The tool wait before it was sent, after the turn before it ended (a session turn after
    /// the first), in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_wait_ms: Option<f64>,
    /// A session turn's cache ceiling: the tokens of its prompt the server had finished for
    /// its session or the shared prefix before it was sent (docs/metrics.md "Agent sessions");
    /// None where the server did not count the prompt or the template cost is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ceiling_tokens: Option<u64>,
    /// TTFC: `t_first_content − t_send` (docs/metrics.md "Reasoning and tool calls"); None
    /// when the answer never began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfc_us: Option<u64>,
    /// Output tokens that were thinking; None when the stream had no reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Where `reasoning_tokens` came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_source: Option<CountSource>,
    /// `t_first_tool − t_send`: the first `tool_calls` delta.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_tool_call_us: Option<u64>,
    /// Tool calls the stream opened.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
    /// Token-carrying reads whose events may have arrived earlier than stamped (docs/metrics.md
    /// "Held reads").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub held_reads: u32,
    /// The first token came in a held read: TTFT may be long by the stall.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub first_held: bool,
    /// Why the stream ended, as its `finish_reason` said (None: it gave none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<Finish>,
    /// The answer text held a literal `<think>` or `</think>`: thinking arrived as the answer
    /// (no reasoning parser on the server).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub think_tags: bool,
    /// The LoRA adapter the request named (`--lora-modules`); None: the base model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<String>,
    /// Whether its answer complied with its `--response-format` (a JSON object, valid against
    /// the schema, matched by the pattern); None for an unconstrained or failed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_valid: Option<bool>,
    /// The images it carried (`--images`: `2×512x512`), and the prompt tokens they took: the
    /// server's `prompt_tokens` less the text's as counted for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_tokens: Option<u64>,
}

/// A stream's `finish_reason`, as far as the figures care.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    /// `length`: `max_tokens` (or the context) cut it.
    Length,
    /// Any other reason (`stop`, `tool_calls`, an end-of-sequence token): the model ended it.
    Stop,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl RequestRecord {
    /// Whether the request succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self.outcome, Outcome::Ok)
    }

    /// Client-side queueing: `t_send - t_sched`.
    pub fn client_queue_us(&self) -> u64 {
        self.send_at_us.saturating_sub(self.sched_at_us)
    }

    /// TPOT in µs: `(E2E - TTFT) / (output_tokens - 1)`, for more than one output token.
    pub fn tpot_us(&self) -> Option<f64> {
        let (ttft, e2e) = (self.ttft_us?, self.e2e_us?);
        (self.output_tokens > 1).then(|| (e2e - ttft) as f64 / (self.output_tokens - 1) as f64)
    }

    /// Decode speed in tokens/s: `(output_tokens - 1) / (E2E - TTFT)`.
    pub fn decode_tokens_per_s(&self) -> Option<f64> {
        let (ttft, e2e) = (self.ttft_us?, self.e2e_us?);
        (self.output_tokens > 1 && e2e > ttft)
            .then(|| (self.output_tokens - 1) as f64 / ((e2e - ttft) as f64 * 1e-6))
    }

    /// Content tokens: output tokens less the reasoning ones.
    pub fn content_tokens(&self) -> u64 {
        self.output_tokens
            .saturating_sub(self.reasoning_tokens.unwrap_or(0))
    }

    /// TTFC, or TTFT for a request without reasoning that never marked its first answer (a
    /// dialect without chat deltas: everything is the answer).
    pub fn ttfc_or_ttft_us(&self) -> Option<u64> {
        match self.reasoning_tokens {
            Some(r) if r > 0 => self.ttfc_us,
            _ => self.ttfc_us.or(self.ttft_us),
        }
    }

    /// Thinking time in µs: `t_first_content − t_first` (0 without reasoning).
    pub fn thinking_us(&self) -> Option<u64> {
        Some(self.ttfc_or_ttft_us()?.saturating_sub(self.ttft_us?))
    }

    /// The answer's decode speed in tokens/s: `(content_tokens − 1) / (E2E − TTFC)`.
    pub fn content_decode_tokens_per_s(&self) -> Option<f64> {
        let (ttfc, e2e) = (self.ttfc_or_ttft_us()?, self.e2e_us?);
        let n = self.content_tokens();
        (n > 1 && e2e > ttfc).then(|| (n - 1) as f64 / ((e2e - ttfc) as f64 * 1e-6))
    }

    /// Prefill speed in tokens/s: input tokens over TTFT (what a long-context test reports).
    pub fn prefill_tokens_per_s(&self) -> Option<f64> {
        let ttft = self.ttft_us?;
        (ttft > 0).then(|| self.input_tokens as f64 / (ttft as f64 * 1e-6))
    }
}

/// Final token counts of one stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FinalCounts {
    pub output_tokens: u64,
    pub output_source: CountSource,
    pub chunk_source: CountSource,
}

/// Settles per-chunk token counts and the output total once the stream is over.
///
/// `usage_completion` is the server's final `completion_tokens`, if it sent one. With
/// [`ChunkCounting::OnePerChunk`] and a usage count, the first chunk keeps one token (it comes
/// from prefill) and the remaining `N - 1` tokens are spread as evenly as integers allow over the
/// other chunks, so the chunk counts sum to the server's total; the result is labelled an estimate.
pub fn finalize_counts(
    chunks: &mut [TokenChunk],
    counting: ChunkCounting,
    usage_completion: Option<u64>,
) -> FinalCounts {
    let summed: u64 = chunks.iter().map(|c| u64::from(c.tokens)).sum();
    match counting {
        ChunkCounting::Exact(src) => FinalCounts {
            output_tokens: usage_completion.unwrap_or(summed),
            output_source: if usage_completion.is_some() {
                CountSource::Usage
            } else {
                src
            },
            chunk_source: src,
        },
        ChunkCounting::Tokenizer => FinalCounts {
            output_tokens: usage_completion.unwrap_or(summed),
            output_source: if usage_completion.is_some() {
                CountSource::Usage
            } else {
                CountSource::Tokenizer
            },
            chunk_source: CountSource::Tokenizer,
        },
        ChunkCounting::OnePerChunk => {
            let m = chunks.len() as u64;
            match usage_completion {
                Some(n) => {
                    if m >= 1 && n >= m {
                        apportion(chunks, n);
                    }
                    FinalCounts {
                        output_tokens: n,
                        output_source: CountSource::Usage,
                        chunk_source: CountSource::ChunkEstimate,
                    }
                }
                None => FinalCounts {
                    output_tokens: summed,
                    output_source: CountSource::ChunkEstimate,
                    chunk_source: CountSource::ChunkEstimate,
                },
            }
        }
    }
}

/// First chunk 1 token; `n - 1` tokens over the remaining chunks, as evenly as integers allow.
fn apportion(chunks: &mut [TokenChunk], n: u64) {
    let m = chunks.len() as u64;
    if m == 1 {
        chunks[0].tokens = n as u32;
        return;
    }
    chunks[0].tokens = 1;
    let rest = n - 1;
    let slots = m - 1;
    for (i, c) in chunks.iter_mut().skip(1).enumerate() {
        let i = i as u64;
        c.tokens = ((i + 1) * rest / slots - i * rest / slots) as u32;
    }
}

/// `(ttft_us, e2e_us)` from the token-carrying chunks: first and last arrival.
pub fn first_last(chunks: &[TokenChunk]) -> Option<(u64, u64)> {
    Some((chunks.first()?.t_us, chunks.last()?.t_us))
}

/// Calls `f(gap_us, tokens)` for each token-carrying chunk after the first: the raw chunk gap and
/// that chunk's token count. ITL splits `gap_us` evenly over `tokens`.
pub fn for_each_gap(chunks: &[TokenChunk], mut f: impl FnMut(u64, u32)) {
    for w in chunks.windows(2) {
        f(w[1].t_us.saturating_sub(w[0].t_us), w[1].tokens);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn chunks(spec: &[(u64, u32)]) -> Vec<TokenChunk> {
        spec.iter()
            .map(|&(t_us, tokens)| TokenChunk::new(t_us, tokens))
            .collect()
    }

    /// A successful request: scheduled at 100 µs, sent at 350 µs, `out` tokens.
    pub(crate) fn record(ttft: u64, e2e: u64, out: u64) -> RequestRecord {
        RequestRecord {
            level: 0,
            index: 0,
            warmup: false,
            sched_at_us: 100,
            send_at_us: 350,
            end_at_us: 350 + e2e + 10,
            outcome: Outcome::Ok,
            planned_input_tokens: 1000,
            input_tokens: 1000,
            input_source: CountSource::Usage,
            output_tokens: out,
            output_source: CountSource::Usage,
            chunk_source: CountSource::PerChunkUsage,
            ttft_us: Some(ttft),
            e2e_us: Some(e2e),
            chunks: vec![],
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
    fn tpot_decode_speed_prefill_and_queue_exact() {
        // TTFT 500 ms, E2E 2.5 s, 401 tokens: TPOT = 2 s / 400 = 5 ms; decode 200 tok/s.
        let r = record(500_000, 2_500_000, 401);
        assert_eq!(r.tpot_us(), Some(5000.0));
        assert_eq!(r.decode_tokens_per_s(), Some(200.0));
        // 1000 input tokens / 0.5 s = 2000 tok/s prefill.
        assert_eq!(r.prefill_tokens_per_s(), Some(2000.0));
        assert_eq!(r.client_queue_us(), 250);
    }

    #[test]
    fn tpot_undefined_for_single_token() {
        let r = record(500_000, 500_000, 1);
        assert_eq!(r.tpot_us(), None);
        assert_eq!(r.decode_tokens_per_s(), None);
    }

    #[test]
    fn exact_counts_keep_chunks_and_prefer_usage_total() {
        let mut c = chunks(&[(100, 1), (200, 4), (300, 3)]);
        let f = finalize_counts(
            &mut c,
            ChunkCounting::Exact(CountSource::PerChunkUsage),
            Some(8),
        );
        assert_eq!(f.output_tokens, 8);
        assert_eq!(f.output_source, CountSource::Usage);
        assert_eq!(f.chunk_source, CountSource::PerChunkUsage);
        assert_eq!(
            c.iter().map(|c| c.tokens).collect::<Vec<_>>(),
            vec![1, 4, 3]
        );
        // Without a usage-only final chunk, the per-chunk sum is the total.
        let mut c = chunks(&[(100, 1), (200, 4)]);
        let f = finalize_counts(
            &mut c,
            ChunkCounting::Exact(CountSource::EngineNative),
            None,
        );
        assert_eq!(f.output_tokens, 5);
        assert_eq!(f.output_source, CountSource::EngineNative);
    }

    #[test]
    fn one_per_chunk_rescaled_by_usage_first_chunk_one_token() {
        // 1 + 4 chunks, usage says 17 tokens: first 1, then 16 over 4 chunks = 4 each.
        let mut c = chunks(&[(10, 1), (20, 1), (30, 1), (40, 1), (50, 1)]);
        let f = finalize_counts(&mut c, ChunkCounting::OnePerChunk, Some(17));
        assert_eq!(f.output_tokens, 17);
        assert_eq!(f.chunk_source, CountSource::ChunkEstimate);
        assert_eq!(
            c.iter().map(|c| c.tokens).collect::<Vec<_>>(),
            vec![1, 4, 4, 4, 4]
        );
        // Uneven: 10 tokens over 1 + 3 chunks -> 9 over 3 = 3,3,3; 11 -> 10 over 3 = 3,3,4.
        let mut c = chunks(&[(10, 1), (20, 1), (30, 1), (40, 1)]);
        finalize_counts(&mut c, ChunkCounting::OnePerChunk, Some(11));
        assert_eq!(
            c.iter().map(|c| c.tokens).collect::<Vec<_>>(),
            vec![1, 3, 3, 4]
        );
        assert_eq!(c.iter().map(|c| u64::from(c.tokens)).sum::<u64>(), 11);
    }

    #[test]
    fn one_per_chunk_without_usage_is_an_estimate() {
        let mut c = chunks(&[(10, 1), (20, 1), (30, 1)]);
        let f = finalize_counts(&mut c, ChunkCounting::OnePerChunk, None);
        assert_eq!(f.output_tokens, 3);
        assert_eq!(f.output_source, CountSource::ChunkEstimate);
        assert!(!f.output_source.is_exact());
    }

    #[test]
    fn usage_smaller_than_chunk_count_keeps_one_per_chunk() {
        let mut c = chunks(&[(10, 1), (20, 1), (30, 1)]);
        let f = finalize_counts(&mut c, ChunkCounting::OnePerChunk, Some(2));
        assert_eq!(f.output_tokens, 2);
        assert_eq!(
            c.iter().map(|c| c.tokens).collect::<Vec<_>>(),
            vec![1, 1, 1]
        );
    }

    #[test]
    fn single_chunk_takes_all_usage_tokens() {
        let mut c = chunks(&[(10, 1)]);
        finalize_counts(&mut c, ChunkCounting::OnePerChunk, Some(5));
        assert_eq!(c[0].tokens, 5);
    }

    #[test]
    fn gaps_and_first_last() {
        let c = chunks(&[(1000, 1), (21_000, 4), (41_000, 4)]);
        assert_eq!(first_last(&c), Some((1000, 41_000)));
        let mut seen = vec![];
        for_each_gap(&c, |g, n| seen.push((g, n)));
        assert_eq!(seen, vec![(20_000, 4), (20_000, 4)]);
        assert_eq!(first_last(&[]), None);
    }

    #[test]
    fn record_json_round_trip_with_failure() {
        let mut r = record(1, 2, 3);
        r.outcome = Outcome::Failed {
            kind: FailureKind::ContextTooLong,
            message: "too long".into(),
            http_status: Some(400),
        };
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains(r#""status":"failed""#), "{s}");
        assert!(s.contains(r#""kind":"context_too_long""#), "{s}");
        let back: RequestRecord = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
    }
}
