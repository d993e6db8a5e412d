//! A level's finished summary: plain numbers, distributions, and their flat JSON form under
//! vLLM's key names.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::dist::DistStats;
use super::level::FailureCount;
use super::record::CountSource;

/// Plain numbers of a level summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LevelScalars {
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Window: first `t_send` to the last completion.
    pub duration_s: f64,
    /// Seconds of the level during which the server was unreachable, summed over its outages
    /// (docs/metrics.md "Per level", outage); 0 when none. Always written.
    #[serde(default)]
    pub outage_s: f64,
    /// Each outage, in seconds from the level's origin (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outages: Vec<OutageWindow>,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    /// Peak output tokens in any 1 s bin (tokens at their arrival times, not chunks).
    pub max_output_tokens_per_s: f64,
    /// Exact peak of requests in flight.
    pub max_concurrent_requests: u64,
    /// Concurrency achieved: Σ E2E / window.
    pub mean_concurrency: f64,
    pub steady_duration_s: Option<f64>,
    pub steady_output_throughput: Option<f64>,
    /// Requests wholly inside the steady window (sent at or after the first completion, done
    /// by the last send), and the window in seconds from the level's origin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_from_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_to_s: Option<f64>,
    /// Requests sent per second, `(n − 1) / (last t_send − first t_send)` over the requests
    /// that completed or failed: at a rate level, the rate achieved against the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_request_rate: Option<f64>,
    /// The same over the scheduled times `t_sched`: at a rate level, the rate the seeded
    /// schedule itself drew (it differs from the configured rate by Poisson noise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_request_rate: Option<f64>,
    /// Requests/s meeting every SLO (only with `--slo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_met: Option<u64>,
    /// Mean tokens per chunk after the first: the speculative accept length seen by the client.
    pub accept_length_client: Option<f64>,
    /// Token-carrying deliveries of the completed requests (docs/metrics.md "A chunk is a
    /// delivery").
    #[serde(default)]
    pub deliveries: u64,
    /// Share of those deliveries that held more than one token event (0..1).
    #[serde(default)]
    pub multi_event_delivery_share: Option<f64>,
    /// Token-carrying reads that may hold arrivals earlier than their stamp (docs/metrics.md
    /// "Held reads"), their share of the deliveries, and the requests whose first token came
    /// in one.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub held_reads: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_read_share: Option<f64>,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub held_first_tokens: u64,
    pub mean_input_tokens: Option<f64>,
    pub mean_output_tokens: Option<f64>,
    /// `--natural-stop`: completed requests whose answer reached its output cap (finish
    /// reason `length`), and those the model ended itself (any other reason); a request whose
    /// stream gave no finish reason is in neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reached_output_cap: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_by_model: Option<u64>,
    /// Mean over requests of input tokens / TTFT (the long-context prefill speed).
    pub prefill_tokens_per_s: Option<f64>,
    /// How many requests' output totals came from each source.
    pub output_token_sources: BTreeMap<CountSource, u64>,
    /// How many requests' per-chunk counts came from each source.
    pub chunk_token_sources: BTreeMap<CountSource, u64>,
    pub failures: BTreeMap<String, FailureCount>,
    /// Prompt tokens the server says it served from its prefix cache, over the successful
    /// requests that said (`cache_reports` of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cached_tokens: Option<u64>,
    /// Σ cached / Σ prompt tokens over those requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cache_reports: u64,
    /// A multi-turn or session level's statistics per turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<super::turns::TurnStats>,
    /// A session level's sessions and cache ceiling.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub session: Option<super::sessions::SessionStats>,
    /// Mean thinking and answer tokens per completed request (docs/metrics.md "Reasoning and
    /// tool calls"); their share of the output.
    #[serde(default)]
    pub mean_reasoning_tokens: Option<f64>,
    #[serde(default)]
    pub mean_content_tokens: Option<f64>,
    #[serde(default)]
    pub reasoning_share: Option<f64>,
    /// Tool calls per completed request (absent when none was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_tool_calls: Option<f64>,
    /// Completed requests that thought and never began an answer (no content, no tool call):
    /// no TTFC (docs/metrics.md "Reasoning and tool calls").
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub unanswered_requests: u64,
    /// Of those, the ones the model ended itself (a finish reason other than `length`) while
    /// the server still counted every token as thinking.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub unanswered_stopped: u64,
    /// Completed requests whose answer text held a literal `<think>` or `</think>`.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub think_tag_requests: u64,
    /// Latency over the level's timeline, by scheduled time (a trace level's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<super::timeline::TimelineBin>,
    /// Completed answers checked against `--response-format`, and the share of them that
    /// complied (a JSON object, valid against the schema, matched by the pattern).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub schema_checked: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_valid_share: Option<f64>,
    /// Prompt tokens the images of a request took (`--images`: the server's count less the
    /// text's), and TTFT by the images requests carried (`2×512x512`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_image_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, super::images::ImageStats>,
    /// The level's figures per LoRA adapter its requests named (`--lora-modules`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lora: BTreeMap<String, super::lora::LoraStats>,
}

/// One outage of a level: from the end of the request that failed to connect to when the server
/// accepted a connection again (or the level ended), in seconds from the level's origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OutageWindow {
    pub from_s: f64,
    pub to_s: f64,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// The distributions of a level, serialized as flat vLLM-style keys (`p99_ttft_ms`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelDists {
    pub ttft_ms: Option<DistStats>,
    pub tpot_ms: Option<DistStats>,
    pub itl_ms: Option<DistStats>,
    pub e2el_ms: Option<DistStats>,
    pub client_queue_ms: Option<DistStats>,
    pub chunk_gap_ms: Option<DistStats>,
    pub tokens_per_chunk: Option<DistStats>,
    pub decode_tokens_per_s: Option<DistStats>,
    pub prefill_tokens_per_s: Option<DistStats>,
    /// Time to first content token (TTFT where nothing was thinking).
    pub ttfc_ms: Option<DistStats>,
    /// `t_first_content − t_first`, over the requests that reasoned.
    pub thinking_ms: Option<DistStats>,
    pub content_decode_tokens_per_s: Option<DistStats>,
    pub first_tool_call_ms: Option<DistStats>,
    /// TTFT, TPOT and E2E of the steady window's requests.
    pub steady_ttft_ms: Option<DistStats>,
    pub steady_tpot_ms: Option<DistStats>,
    pub steady_e2el_ms: Option<DistStats>,
    /// Input and output tokens of each completed request, as counted for it: with
    /// `--range-ratio` (or a dataset) their spread.
    pub input_tokens_per_request: Option<DistStats>,
    pub output_tokens_per_request: Option<DistStats>,
}

impl LevelDists {
    /// `(metric key, distribution)` in file order; the key already carries its unit.
    fn fields(&self) -> [(&'static str, &Option<DistStats>); 18] {
        [
            ("ttft_ms", &self.ttft_ms),
            ("tpot_ms", &self.tpot_ms),
            ("itl_ms", &self.itl_ms),
            ("e2el_ms", &self.e2el_ms),
            ("client_queue_ms", &self.client_queue_ms),
            ("chunk_gap_ms", &self.chunk_gap_ms),
            ("tokens_per_chunk", &self.tokens_per_chunk),
            ("decode_tokens_per_s", &self.decode_tokens_per_s),
            ("prefill_tokens_per_s", &self.prefill_tokens_per_s),
            ("ttfc_ms", &self.ttfc_ms),
            ("thinking_ms", &self.thinking_ms),
            (
                "content_decode_tokens_per_s",
                &self.content_decode_tokens_per_s,
            ),
            ("first_tool_call_ms", &self.first_tool_call_ms),
            ("steady_ttft_ms", &self.steady_ttft_ms),
            ("steady_tpot_ms", &self.steady_tpot_ms),
            ("steady_e2el_ms", &self.steady_e2el_ms),
            ("input_tokens_per_request", &self.input_tokens_per_request),
            ("output_tokens_per_request", &self.output_tokens_per_request),
        ]
    }

    fn fields_mut(&mut self) -> [(&'static str, &mut Option<DistStats>); 18] {
        [
            ("ttft_ms", &mut self.ttft_ms),
            ("tpot_ms", &mut self.tpot_ms),
            ("itl_ms", &mut self.itl_ms),
            ("e2el_ms", &mut self.e2el_ms),
            ("client_queue_ms", &mut self.client_queue_ms),
            ("chunk_gap_ms", &mut self.chunk_gap_ms),
            ("tokens_per_chunk", &mut self.tokens_per_chunk),
            ("decode_tokens_per_s", &mut self.decode_tokens_per_s),
            ("prefill_tokens_per_s", &mut self.prefill_tokens_per_s),
            ("ttfc_ms", &mut self.ttfc_ms),
            ("thinking_ms", &mut self.thinking_ms),
            (
                "content_decode_tokens_per_s",
                &mut self.content_decode_tokens_per_s,
            ),
            ("first_tool_call_ms", &mut self.first_tool_call_ms),
            ("steady_ttft_ms", &mut self.steady_ttft_ms),
            ("steady_tpot_ms", &mut self.steady_tpot_ms),
            ("steady_e2el_ms", &mut self.steady_e2el_ms),
            (
                "input_tokens_per_request",
                &mut self.input_tokens_per_request,
            ),
            (
                "output_tokens_per_request",
                &mut self.output_tokens_per_request,
            ),
        ]
    }
}

/// A finished (or live) level summary: the one type the screen and every export read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(into = "Map<String, Value>", try_from = "Map<String, Value>")]
pub struct LevelStats {
    pub scalars: LevelScalars,
    pub dists: LevelDists,
}

impl From<LevelStats> for Map<String, Value> {
    fn from(s: LevelStats) -> Self {
        let mut m = match serde_json::to_value(&s.scalars) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        for (metric, d) in s.dists.fields() {
            if let Some(d) = d {
                m.insert(format!("{metric}_count"), Value::from(d.count));
                for (stat, v) in d.named_all() {
                    m.insert(format!("{stat}_{metric}"), json_f64(v));
                }
            }
        }
        m
    }
}

impl TryFrom<Map<String, Value>> for LevelStats {
    type Error = String;
    fn try_from(m: Map<String, Value>) -> Result<Self, String> {
        let mut dists = LevelDists::default();
        for (metric, slot) in dists.fields_mut() {
            let Some(count) = m.get(&format!("{metric}_count")).and_then(Value::as_u64) else {
                continue;
            };
            *slot = DistStats::from_named(count, |stat| {
                m.get(&format!("{stat}_{metric}"))
                    .map(|v| v.as_f64().unwrap_or(f64::NAN))
            })
            .map(|d| DistStats {
                extra: extra_percentiles(&m, metric),
                ..d
            });
        }
        let scalars: LevelScalars =
            serde_json::from_value(Value::Object(m)).map_err(|e| e.to_string())?;
        Ok(LevelStats { scalars, dists })
    }
}

/// The percentiles of `metric` asked for beyond the fixed ones (`p75_ttft_ms`), ascending.
fn extra_percentiles(m: &Map<String, Value>, metric: &str) -> Vec<(f64, f64)> {
    let suffix = format!("_{metric}");
    let mut out: Vec<(f64, f64)> = m
        .iter()
        .filter_map(|(k, v)| {
            let p: f64 = k.strip_suffix(&suffix)?.strip_prefix('p')?.parse().ok()?;
            (!super::dist::is_fixed(p)).then(|| (p, v.as_f64().unwrap_or(f64::NAN)))
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// JSON has no NaN: write null for values that are not finite.
fn json_f64(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}
