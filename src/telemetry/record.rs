//! What the samplers report: GPU readings, the engine's view, and the `telemetry.jsonl` line
//! that carries either (or why it is unavailable). Plain data, imported by the event enum.

use serde::{Deserialize, Serialize};

/// One GPU at one moment. Fields a device does not support are `None` (shown as N/A).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuReading {
    pub index: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    /// Percent of time a kernel ran.
    pub util_gpu_pct: Option<f64>,
    /// Percent of time device memory was read or written.
    pub util_mem_pct: Option<f64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub temp_c: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    /// The energy counter: millijoules since the driver loaded (NVML total energy consumption,
    /// Volta and newer; DCGM `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_mj: Option<u64>,
}

/// Where GPU readings come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSource {
    Nvml,
    /// `nvidia-smi --query-gpu`, where NVML could not be loaded (the static build).
    NvidiaSmi,
    Dcgm,
    /// The simulator's DCGM-style endpoint: not real hardware.
    SimulatedDcgm,
}

/// Every GPU at one moment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub at_unix_ms: i64,
    pub source: GpuSource,
    pub gpus: Vec<GpuReading>,
}

/// The engine's own view at one moment, mapped from its `/metrics` to common names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSample {
    pub at_unix_ms: i64,
    /// `sglang`, `vllm`, `llamacpp` or `servetop-sim/...`: which names were read.
    pub flavor: String,
    /// Requests being decoded (gauge).
    pub running: Option<f64>,
    /// Requests waiting for a slot (gauge).
    pub queued: Option<f64>,
    /// KV-cache usage, 0..1 (gauge).
    pub kv_usage: Option<f64>,
    /// Prefix-cache hit rate 0..1, as the engine reports it (gauge, SGLang).
    pub prefix_hit_rate: Option<f64>,
    /// Prefix-cache queries and hits (counters, vLLM).
    pub prefix_queries_total: Option<f64>,
    pub prefix_hits_total: Option<f64>,
    /// Generation throughput the engine reports (gauge, tokens/s).
    pub gen_throughput: Option<f64>,
    pub preemptions_total: Option<f64>,
    pub prompt_tokens_total: Option<f64>,
    pub generation_tokens_total: Option<f64>,
    /// The engine's own TTFT histogram: its sum in seconds and its count (SGLang and vLLM
    /// `time_to_first_token_seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_seconds_sum: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_seconds_count: Option<f64>,
    /// A stream's decode rate as the engine reports it, tokens/s: the inverse of its mean time
    /// per output token (SGLang and vLLM), or llama.cpp's `predicted_tokens_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_tokens_per_s: Option<f64>,
    /// Speculative decoding counters (vLLM, llama.cpp).
    pub spec_drafts_total: Option<f64>,
    pub spec_draft_tokens_total: Option<f64>,
    pub spec_accepted_total: Option<f64>,
    /// Accepted tokens per draft position (counter per position).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec_accepted_per_pos_total: Vec<f64>,
    /// Recent-window accept length gauge (SGLang `spec_accept_length`).
    pub accept_length_gauge: Option<f64>,
    /// Cumulative accept length from SGLang's `/server_info`.
    pub accept_length_cumulative: Option<f64>,
}

/// A telemetry line of `telemetry.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TelemetryRecord {
    Gpu(GpuSample),
    /// Boxed: a server sample is several times larger than the other variants.
    Server(Box<ServerSample>),
    GpuUnavailable {
        at_unix_ms: i64,
        reason: String,
    },
    ServerUnavailable {
        at_unix_ms: i64,
        reason: String,
    },
    /// servetop's own load: CPU time and its runtime's timer lag.
    Client(super::client_load::ClientSample),
}
