//! Telemetry beside the benchmark: GPUs (NVML on this host, or a DCGM exporter's Prometheus
//! endpoint) and the serving engine's own `/metrics`.
//!
//! Samplers are producers like the runner: they send `Event`s and never wait for the consumer.
//! A missing GPU, driver or endpoint is a normal case that becomes an `Unavailable` event with
//! the reason, shown in its panel; nothing fails.

pub mod dcgm;
pub mod engine_metrics;
pub mod gpu;
pub mod per_level;
pub mod prom;
pub mod scrape;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, now.
pub fn now_unix_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

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
}

/// Where GPU readings come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSource {
    Nvml,
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
}

/// The engine's metrics page and SGLang's `/server_info`, unless metrics are off.
pub fn engine_urls(cfg: &crate::config::RunConfig) -> Option<(String, String)> {
    if cfg.no_metrics {
        return None;
    }
    let base = cfg.base_url.trim_end_matches('/');
    let url = cfg
        .metrics_url
        .clone()
        .unwrap_or_else(|| format!("{base}/metrics"));
    Some((url, format!("{base}/server_info")))
}

/// Starts the samplers a run asked for: the engine's `/metrics` (unless `no_metrics`), and GPUs
/// from a DCGM exporter (`dcgm_url`) or NVML (unless `no_gpu`). They stop when `cancel` fires.
pub fn spawn_all(
    cfg: &crate::config::RunConfig,
    http: &reqwest::Client,
    tx: &crate::event::EventTx,
    cancel: &tokio_util::sync::CancellationToken,
) {
    let every = std::time::Duration::from_secs_f64(cfg.gpu_interval_s);
    if let Some((url, info)) = engine_urls(cfg) {
        scrape::spawn_engine(
            http.clone(),
            url,
            info,
            std::time::Duration::from_secs(1),
            tx.clone(),
            cancel.clone(),
        );
    }
    if cfg.no_gpu {
        return;
    }
    match &cfg.dcgm_url {
        Some(url) => {
            scrape::spawn_dcgm(http.clone(), url.clone(), every, tx.clone(), cancel.clone());
        }
        None => gpu::spawn(every, tx.clone(), cancel.clone()),
    }
}

/// One GPU as a line: `GPU 0 NVIDIA H200 · mem 61.2/139.8 GiB · util 34% · 312/700 W · 54°C · 1980 MHz`.
pub fn gpu_line(g: &GpuReading) -> String {
    let gib = |b: u64| b as f64 / (1024.0 * 1024.0 * 1024.0);
    let na = || "N/A".to_string();
    let mem = match (g.mem_used_bytes, g.mem_total_bytes) {
        (Some(u), Some(t)) => format!("{:.1}/{:.1} GiB", gib(u), gib(t)),
        (Some(u), None) => format!("{:.1} GiB", gib(u)),
        _ => na(),
    };
    let power = match (g.power_w, g.power_limit_w) {
        (Some(p), Some(l)) => format!("{p:.0}/{l:.0} W"),
        (Some(p), None) => format!("{p:.0} W"),
        _ => na(),
    };
    format!(
        "GPU {} {} · mem {mem} · util {} · {power} · {} · {}",
        g.index,
        g.name,
        g.util_gpu_pct.map_or_else(na, |u| format!("{u:.0}%")),
        g.temp_c.map_or_else(na, |t| format!("{t:.0}°C")),
        g.sm_clock_mhz.map_or_else(na, |c| format!("{c:.0} MHz")),
    )
}
