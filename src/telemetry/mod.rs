//! Telemetry beside the benchmark: GPUs (NVML on this host, or a DCGM exporter's Prometheus
//! endpoint) and the serving engine's own `/metrics`.
//!
//! Samplers are producers like the runner: they report each reading through [`Reports`] (the
//! run's event channel, seen from here only as a place that takes a record) and never wait for
//! the consumer.
//! A missing GPU, driver or endpoint is a normal case that becomes an `Unavailable` event with
//! the reason, shown in its panel; nothing fails.

pub mod client_load;
pub mod dcgm;
pub mod energy;
pub mod engine_metrics;
pub mod gpu;
pub mod per_level;
pub mod prom;
pub mod record;
pub mod scrape;
pub mod smi;

pub use record::{GpuReading, GpuSample, GpuSource, ServerSample, TelemetryRecord};

/// Milliseconds since the Unix epoch, now.
pub fn now_unix_ms() -> i64 {
    (crate::metrics::unix_us() / 1000) as i64
}

/// Where the samplers send what they read; `send` says `false` once nobody listens (the run is
/// over). Telemetry needs nothing above it: the run hands it the channel's far end as this.
#[derive(Clone)]
pub struct Reports(std::sync::Arc<dyn Fn(TelemetryRecord) -> bool + Send + Sync>);

impl Reports {
    /// Reports through `send`.
    pub fn new(send: impl Fn(TelemetryRecord) -> bool + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(send))
    }

    /// Reports one record; `false` once nobody listens.
    pub fn send(&self, r: TelemetryRecord) -> bool {
        (self.0)(r)
    }
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

/// Starts the samplers a run asked for: servetop's own load (always; its timer probe notes
/// stalls in `stalls`), the engine's `/metrics`
/// (unless `no_metrics`), and GPUs from a DCGM exporter (`dcgm_url`) or NVML (unless `no_gpu`). They stop when `cancel` fires;
/// the load probe also by [`client_load::ClientProbe::finish`], the handle returned.
pub fn spawn_all(
    cfg: &crate::config::RunConfig,
    http: &reqwest::Client,
    stalls: std::sync::Arc<crate::client::held::Stalls>,
    tx: &Reports,
    cancel: &tokio_util::sync::CancellationToken,
) -> client_load::ClientProbe {
    let probe = client_load::spawn(tx.clone(), cancel.child_token(), stalls);
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
    if !cfg.no_gpu {
        match &cfg.dcgm_url {
            Some(url) => {
                scrape::spawn_dcgm(http.clone(), url.clone(), every, tx.clone(), cancel.clone());
            }
            None => gpu::spawn(every, tx.clone(), cancel.clone()),
        }
    }
    probe
}

/// Where a run reads its GPUs, for a reading on demand (just before and at the end of each
/// level, so its energy counters cover exactly the level).
#[derive(Clone, Debug)]
pub enum GpuProbe {
    Nvml,
    Dcgm(String),
}

impl GpuProbe {
    /// The probe a configuration asks for (none with `--no-gpu`).
    pub fn of(cfg: &crate::config::RunConfig) -> Option<Self> {
        if cfg.no_gpu {
            return None;
        }
        Some(cfg.dcgm_url.clone().map_or(Self::Nvml, Self::Dcgm))
    }

    /// Every GPU now, or `None` when there is none to read (the samplers say why).
    pub async fn read(&self, http: &reqwest::Client) -> Option<GpuSample> {
        match self {
            Self::Dcgm(url) => scrape::dcgm_sample(http, url).await.ok(),
            Self::Nvml => tokio::task::spawn_blocking(gpu::read_cached)
                .await
                .ok()?
                .ok(),
        }
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
