//! `servetop sim`: a simulated OpenAI-compatible inference server, always labelled simulated.
//!
//! It behaves like a continuous-batching engine by shape, in real time (nothing is scaled):
//! a bounded set of running requests (the rest queue FIFO), prefill that costs
//! `input / prefill_tokens_per_s` seconds and stalls decoding while it runs (SGLang's default
//! prefill priority), and decode steps whose duration is
//!
//! ```text
//! step_ms = decode_step_ms × (1 + batch_growth × (B − 1)) + context_ms_per_1k × Σcontext / 1000
//! ```
//!
//! for `B` running requests with `Σcontext` tokens of KV between them. Each step emits one SSE
//! chunk per request carrying the speculative accept length's worth of tokens.

mod ask;
mod batcher;
pub mod faults;
pub mod finished;
pub mod firehose;
mod http;
pub mod images;
mod log;
mod messages;
mod metrics;
pub mod prefix_cache;
mod side;
mod stream;
pub mod structured;
pub mod tokenizer;
pub mod truth;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::workload::content::ContentKind;

pub use log::{SimLog, SimRequestLog, SimStreamLog};
pub use truth::{SimRequestTrace, SimTruth};

/// Tokens emitted per decode step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AcceptLength {
    /// Exactly this many tokens every step.
    Fixed(u32),
    /// `floor` or `floor + 1` tokens, with the probability that makes the mean come out.
    Mean(f64),
    /// Per-position acceptance rates of the draft tokens: accept length = 1 + accepted.
    Rates(Vec<f64>),
}

impl AcceptLength {
    /// Parses `4` (fixed), `3.5` (mean of a two-point mix), or `0.9,0.8,0.6` (per-position rates).
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.contains(',') {
            let rates: Vec<f64> = s
                .split(',')
                .map(|p| {
                    p.trim()
                        .parse::<f64>()
                        .map_err(|_| format!("accept rate '{p}' is not a number"))
                })
                .collect::<Result<_, _>>()?;
            if rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
                return Err("accept rates must lie in 0..1".into());
            }
            return Ok(AcceptLength::Rates(rates));
        }
        let v: f64 = s
            .parse()
            .map_err(|_| format!("accept length '{s}' is not a number"))?;
        if !(1.0..=64.0).contains(&v) {
            return Err(format!("accept length {v} must lie in 1..64"));
        }
        if v.fract() == 0.0 {
            Ok(AcceptLength::Fixed(v as u32))
        } else {
            Ok(AcceptLength::Mean(v))
        }
    }

    /// Draft tokens proposed per step (0: no speculative decoding).
    pub fn draft_width(&self) -> u32 {
        match self {
            AcceptLength::Fixed(n) => n.saturating_sub(1),
            AcceptLength::Mean(m) => (m.ceil() as u32).saturating_sub(1),
            AcceptLength::Rates(r) => r.len() as u32,
        }
    }

    /// The expected tokens per step.
    pub fn mean(&self) -> f64 {
        match self {
            AcceptLength::Fixed(n) => f64::from(*n),
            AcceptLength::Mean(m) => *m,
            AcceptLength::Rates(r) => {
                let mut p = 1.0;
                let mut m = 1.0;
                for x in r {
                    p *= x;
                    m += p;
                }
                m
            }
        }
    }

    /// Draws one step's accept length.
    pub fn draw(&self, rng: &mut impl rand::Rng) -> u32 {
        match self {
            AcceptLength::Fixed(n) => *n,
            AcceptLength::Mean(m) => {
                let lo = m.floor();
                lo as u32 + u32::from(rng.random_bool((m - lo).clamp(0.0, 1.0)))
            }
            AcceptLength::Rates(r) => {
                let mut n = 1;
                for &p in r {
                    if rng.random_bool(p.clamp(0.0, 1.0)) {
                        n += 1;
                    } else {
                        break;
                    }
                }
                n
            }
        }
    }
}

/// Everything the simulated engine does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    pub preset: String,
    pub model: String,
    /// Requests decoded at once; the rest wait in a FIFO queue.
    pub max_running: u32,
    pub prefill_tokens_per_s: f64,
    /// Largest prefill piece per step (long prompts are chunked, as engines do).
    pub prefill_chunk_tokens: u64,
    /// Decode step at batch 1 and short context.
    pub decode_step_ms: f64,
    /// Extra step time per additional running request, as a fraction of `decode_step_ms`.
    pub batch_growth: f64,
    /// Extra step time per 1000 tokens of context held by the running batch.
    pub context_ms_per_1k: f64,
    pub accept_length: AcceptLength,
    /// Largest prompt + output tokens per request.
    pub context_length: u64,
    /// Honour `stream_options.continuous_usage_stats` (vLLM/SGLang do).
    pub continuous_usage: bool,
    pub seed: u64,
    /// Serve `/metrics` with SGLang or vLLM names (`None`: no metrics endpoint).
    pub metrics: Option<MetricsFlavor>,
    /// KV-cache capacity in tokens (for the usage gauge and simulated GPU memory).
    pub kv_capacity_tokens: u64,
    /// Simulated GPUs on the DCGM-style endpoint `/dcgm/metrics` (0: none).
    pub gpus: u32,
    pub gpu_mem_gb: f64,
    /// Model weights, split evenly over the GPUs.
    pub weights_gb: f64,
    /// Injected faults (none by default).
    #[serde(default)]
    pub faults: faults::Faults,
    /// Keep prompts' KV blocks (and replies', for the next chat turn) and skip the prefill of
    /// a prompt's cached prefix, as vLLM and SGLang do by default.
    #[serde(default = "yes")]
    pub prefix_cache: bool,
    /// Decode steps whose events are written to a stream together, after its first token (1:
    /// each step's event as it is made). Above 1 the server holds tokens back and writes runs of
    /// events in one write, as vLLM's API server does when its event loop falls behind.
    #[serde(default = "one")]
    pub write_batch: u32,
    /// Milliseconds the server holds a stream after its last token, before the usage chunk and
    /// `[DONE]` (0: none). E2E, TPOT and decode speed end at the last token and must not move.
    #[serde(default)]
    pub trailer_delay_ms: f64,
    /// Chat answers first think this many tokens (streamed as SGLang's `reasoning_content`, or
    /// with vLLM metrics vLLM 0.32's `reasoning` plus `completion_tokens_details.
    /// reasoning_tokens` in the usage), then answer (0: no reasoning).
    pub reasoning_tokens: u64,
    /// A chat request that offers `tools` is answered, after any reasoning, with this many tool
    /// calls streamed as `tool_calls` deltas, its answer tokens split evenly over them (0: plain
    /// answers).
    pub tool_calls: u32,
    /// Each simulated GPU draws `gpu_idle_w` while the engine waits and `gpu_busy_w` while it
    /// steps; the reported power follows the last second's load and the energy counter is the
    /// exact integral of that model.
    pub gpu_idle_w: f64,
    pub gpu_busy_w: f64,
    /// A key every `/v1/*` request must send as `Authorization: Bearer KEY` (vLLM's
    /// `--api-key`); never written to any file.
    #[serde(skip)]
    pub api_key: Option<String>,
    /// LoRA adapters it serves besides the base model (`--lora-modules`): a request names one
    /// as its `model` (vLLM) or `lora_path` (SGLang), and an unknown name is refused as vLLM
    /// refuses it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lora: Vec<SimLora>,
    /// Engine time each decode step costs beyond its own while it carries a request with a
    /// structured-output constraint (its grammar's token mask), in ms (`--structured-step-ms`;
    /// 0 by default).
    #[serde(default)]
    pub structured_step_ms: f64,
    /// The mean accept length of a constrained request's steps (its grammar's mask rejects
    /// drafts the plain model would have kept), in place of `accept_length` (0: the same as a
    /// plain request's; `--structured-accept-length`).
    #[serde(default)]
    pub structured_accept_length: f64,
    /// The mean accept length of a request's steps by the kind of its prompt, told from the
    /// marker servetop's `--content` prompts open with (`Task (code):`; a prompt without one is
    /// `random`'s), in place of `accept_length` (`--accept-by-content code=4.1,chat=2.6`; none:
    /// every kind the same). The draft is as wide as the largest of them needs.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub accept_by_content: std::collections::BTreeMap<crate::workload::content::ContentKind, f64>,
    /// Every K-th constrained request it reads is answered with one that fails its constraint,
    /// and its record says so (`structured_invalid`; `--structured-invalid-every`; 0, never, by
    /// default): a known share of non-compliant answers.
    #[serde(default)]
    pub structured_invalid_every: u32,
    /// Engine time each image in a request costs at its prefill (its vision encoder), in ms
    /// (`--image-ms`; 0 by default). Its tokens ([`images::tokens`]) prefill as any other.
    #[serde(default)]
    pub image_ms: f64,
    /// Where a model's answer ends on its own: a request that does not ask to ignore the end
    /// of sequence (no `ignore_eos`, and no structured-output constraint) ends at a length
    /// drawn for it from a log-normal distribution with this median and a spread of
    /// [`NATURAL_SIGMA`], seeded by the simulator's seed and the request's number; if that is
    /// below its `max_tokens` it stops there with finish reason `stop`, else at `max_tokens`
    /// with `length` (`--natural-len`; 0, by default: the model never ends on its own). A
    /// Messages request has no `ignore_eos` (the API has none), so it may end on its own too.
    #[serde(default)]
    pub natural_len: u64,
}

/// The spread (σ of the log) of the answer lengths a model ends at on its own around
/// [`SimConfig::natural_len`]: the middle half of them within about ×0.7 to ×1.5 of it.
pub const NATURAL_SIGMA: f64 = 0.5;

/// One adapter the simulator serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SimLora {
    pub name: String,
    /// Engine time each of its requests costs at its prefill (its weights swapped in), in ms:
    /// the request's first token comes that much later, and the batch waits with it, as on a
    /// real engine (`--lora-switch-ms NAME=MS`; 0 by default).
    #[serde(default)]
    pub switch_ms: f64,
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

/// Which engine's metric names the simulator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum MetricsFlavor {
    Sglang,
    Vllm,
}

/// Names of the built-in presets.
pub const PRESETS: [&str; 2] = ["hybrid-27b-2x48g-mtp", "fast"];

impl SimConfig {
    /// Draft tokens proposed per step: as many as `accept_length` drafts, or as the largest
    /// of `accept_by_content` needs (0: no speculative decoding).
    pub fn draft_width(&self) -> u32 {
        self.accept_by_content
            .values()
            .map(|&m| AcceptLength::Mean(m).draft_width())
            .fold(self.accept_length.draft_width(), u32::max)
    }

    /// The accept length a request of prompt kind `content` draws its steps from (a prompt
    /// without a marker is `random`'s).
    pub fn accept_for(
        &self,
        content: Option<crate::workload::content::ContentKind>,
    ) -> AcceptLength {
        let kind = content.unwrap_or(crate::workload::content::ContentKind::Random);
        self.accept_by_content
            .get(&kind)
            .map_or_else(|| self.accept_length.clone(), |&m| AcceptLength::Mean(m))
    }

    /// A preset by name.
    ///
    /// `hybrid-27b-2x48g-mtp` (alias `brief`) reproduces the deployment of the brief: a 27B
    /// hybrid-attention model under SGLang on two 48 GB GPUs with MTP speculative decoding —
    /// ~73 tok/s single stream (accept length 4.0 in 54.8 ms steps), aggregate near 500 tok/s at
    /// C=64-100 (64 running, the rest queue), prefill 6.7K tok/s, ~65 tok/s decode at 120K,
    /// 32K context; by kind of prompt, accept lengths from 4.6 (code) to 3.2 (chat). `fast` is for tests: tiny steps, fast prefill, wide batches.
    pub fn preset(name: &str) -> Result<Self, String> {
        match name {
            "hybrid-27b-2x48g-mtp" | "brief" => Ok(SimConfig {
                preset: "hybrid-27b-2x48g-mtp".into(),
                model: "sim/hybrid-27b-mtp".into(),
                max_running: 64,
                prefill_tokens_per_s: 6700.0,
                prefill_chunk_tokens: 8192,
                decode_step_ms: 54.8,
                batch_growth: 0.1103,
                context_ms_per_1k: 0.056,
                // Mean exactly 4.0: 1 + .95 + .95·.9 + .95·.9·.85 + .95·.9·.85·.6443.
                accept_length: AcceptLength::Rates(vec![0.95, 0.9, 0.85, 0.6443]),
                context_length: 32768,
                continuous_usage: true,
                seed: 1,
                metrics: Some(MetricsFlavor::Sglang),
                kv_capacity_tokens: 400_000,
                gpus: 2,
                gpu_mem_gb: 48.0,
                weights_gb: 54.0,
                faults: faults::Faults::default(),
                prefix_cache: true,
                write_batch: 1,
                trailer_delay_ms: 0.0,
                reasoning_tokens: 0,
                tool_calls: 0,
                gpu_idle_w: 80.0,
                gpu_busy_w: 350.0,
                api_key: None,
                lora: Vec::new(),
                structured_step_ms: 0.0,
                structured_accept_length: 0.0,
                // By kind of prompt (`servetop run --content`): predictable text accepts more
                // drafts than prose; a prompt without a marker keeps the 4.0 above.
                accept_by_content: [
                    (ContentKind::Code, 4.6),
                    (ContentKind::Json, 4.4),
                    (ContentKind::Math, 4.1),
                    (ContentKind::Summary, 3.4),
                    (ContentKind::Chat, 3.2),
                ]
                .into_iter()
                .collect(),
                structured_invalid_every: 0,
                image_ms: 0.0,
                natural_len: 0,
            }),
            "fast" => Ok(SimConfig {
                preset: "fast".into(),
                model: "sim/fast".into(),
                max_running: 256,
                prefill_tokens_per_s: 1_000_000.0,
                prefill_chunk_tokens: 65536,
                decode_step_ms: 2.0,
                batch_growth: 0.0,
                context_ms_per_1k: 0.0,
                accept_length: AcceptLength::Fixed(1),
                context_length: 131_072,
                continuous_usage: true,
                seed: 1,
                metrics: Some(MetricsFlavor::Vllm),
                kv_capacity_tokens: 10_000_000,
                gpus: 0,
                gpu_mem_gb: 80.0,
                weights_gb: 16.0,
                faults: faults::Faults::default(),
                prefix_cache: true,
                write_batch: 1,
                trailer_delay_ms: 0.0,
                reasoning_tokens: 0,
                tool_calls: 0,
                gpu_idle_w: 80.0,
                gpu_busy_w: 350.0,
                api_key: None,
                lora: Vec::new(),
                structured_step_ms: 0.0,
                structured_accept_length: 0.0,
                accept_by_content: std::collections::BTreeMap::new(),
                structured_invalid_every: 0,
                image_ms: 0.0,
                natural_len: 0,
            }),
            other => Err(format!(
                "unknown preset '{other}' (known: {})",
                PRESETS.join(", ")
            )),
        }
    }

    /// The decode step duration in ms for `batch` running requests holding `context` tokens.
    pub fn step_ms(&self, batch: usize, context: u64) -> f64 {
        let b = batch.max(1) as f64;
        self.decode_step_ms * (1.0 + self.batch_growth * (b - 1.0))
            + self.context_ms_per_1k * context as f64 / 1000.0
    }

    /// Checks the numbers make sense.
    pub fn validate(&self) -> Result<(), String> {
        let pos = |v: f64, n: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("{n} must be a positive number"))
            }
        };
        pos(self.prefill_tokens_per_s, "--prefill-tokens-per-s")?;
        pos(self.decode_step_ms, "--decode-step-ms")?;
        if !(self.gpu_idle_w.is_finite()
            && self.gpu_busy_w.is_finite()
            && self.gpu_idle_w >= 0.0
            && self.gpu_busy_w >= self.gpu_idle_w)
        {
            return Err(
                "--gpu-idle-w must be at least 0 and --gpu-busy-w at least --gpu-idle-w".into(),
            );
        }
        if self.batch_growth < 0.0 || self.context_ms_per_1k < 0.0 {
            return Err("growth terms must not be negative".into());
        }
        if self.max_running == 0 || self.context_length == 0 || self.prefill_chunk_tokens == 0 {
            return Err(
                "--max-running, --context-length and the prefill chunk must be at least 1".into(),
            );
        }
        Ok(())
    }
}

/// The simulator's listener: Nagle off on every connection (real servers turn it off; without it
/// small SSE frames wait for delayed ACKs, ~40 ms, and arrive in bursts), and the
/// `reset-before` fault, which resets a share of new connections before reading a byte.
struct SimListener {
    inner: tokio::net::TcpListener,
    reset_before: f64,
    rng: rand::rngs::SmallRng,
    log: Arc<Mutex<SimLog>>,
}

impl axum::serve::Listener for SimListener {
    type Io = tokio::net::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        use rand::Rng;
        loop {
            let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
            let _ = io.set_nodelay(true);
            if self.reset_before > 0.0 && self.rng.random_bool(self.reset_before.clamp(0.0, 1.0)) {
                if let Ok(mut l) = self.log.lock() {
                    *l.injected
                        .entry(faults::FaultKind::ResetBefore)
                        .or_default() += 1;
                }
                // Linger 0: closing sends a reset, as a crashed or overloaded server does. (The
                // deprecation is about a positive linger blocking the thread on drop; zero never
                // waits.)
                #[allow(deprecated)]
                let _ = io.set_linger(Some(std::time::Duration::ZERO));
                drop(io);
                continue;
            }
            return (io, addr);
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A running simulator.
pub struct SimHandle {
    pub addr: SocketAddr,
    pub config: SimConfig,
    /// The simulator's own record of what it did (ground truth for tests).
    pub log: Arc<Mutex<SimLog>>,
    shutdown: tokio_util::sync::CancellationToken,
}

impl SimHandle {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving.
    pub fn stop(&self) {
        self.shutdown.cancel();
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Binds `addr` (port 0 for a free one) and serves in background tasks.
pub async fn start(config: SimConfig, addr: SocketAddr) -> std::io::Result<SimHandle> {
    config
        .validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let log = Arc::new(Mutex::new(SimLog {
        started: Some(std::time::Instant::now()),
        ..SimLog::default()
    }));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let cache = config.prefix_cache.then(|| {
        Arc::new(Mutex::new(prefix_cache::PrefixCache::new(
            config.kv_capacity_tokens,
        )))
    });
    let tx = batcher::spawn(config.clone(), log.clone(), cache.clone(), shutdown.clone());
    let app = http::router(Arc::new(http::SimState {
        config: config.clone(),
        engine: tx,
        cache,
        next_id: std::sync::atomic::AtomicU64::new(0),
        constrained: std::sync::atomic::AtomicU64::new(0),
        log: log.clone(),
    }));
    let stop = shutdown.clone();
    let stop_cfg = config.clone();
    let stop_log = log.clone();
    tokio::spawn(async move {
        let listener = SimListener {
            inner: listener,
            reset_before: stop_cfg.faults.reset_before,
            rng: <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(
                stop_cfg.seed ^ 0x00C0_FFEE,
            ),
            log: stop_log,
        };
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await;
    });
    Ok(SimHandle {
        addr,
        config,
        log,
        shutdown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn accept_length_forms() {
        assert_eq!(AcceptLength::parse("4").unwrap(), AcceptLength::Fixed(4));
        assert_eq!(AcceptLength::parse("3.5").unwrap(), AcceptLength::Mean(3.5));
        assert!(matches!(
            AcceptLength::parse("0.9,0.5").unwrap(),
            AcceptLength::Rates(_)
        ));
        assert!(AcceptLength::parse("0").is_err());
        assert!(AcceptLength::parse("1.5,2").is_err());
        let preset = SimConfig::preset("brief").unwrap();
        assert!((preset.accept_length.mean() - 4.0).abs() < 1e-3);
    }

    #[test]
    fn accept_draws_average_to_the_mean() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        for a in [AcceptLength::Mean(2.5), AcceptLength::Rates(vec![0.8, 0.5])] {
            let n = 200_000;
            let s: u64 = (0..n).map(|_| u64::from(a.draw(&mut rng))).sum();
            let got = s as f64 / f64::from(n);
            assert!((got - a.mean()).abs() < 0.02, "{got} vs {}", a.mean());
        }
        assert_eq!(AcceptLength::Fixed(4).draw(&mut rng), 4);
    }

    #[test]
    fn brief_preset_numbers() {
        let c = SimConfig::preset("brief").unwrap();
        // Single stream: 4 tokens per 54.8 ms step = 73 tok/s.
        let single = c.accept_length.mean() / (c.step_ms(1, 1500) / 1000.0);
        assert!((single - 73.0).abs() < 0.5, "{single}");
        // Decode at 120K context: about 65 tok/s.
        let long = c.accept_length.mean() / (c.step_ms(1, 120_000) / 1000.0);
        assert!((long - 65.0).abs() < 0.7, "{long}");
        assert!(SimConfig::preset("nope").is_err());
    }
}
