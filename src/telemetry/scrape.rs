//! Periodic scrapes of the engine's `/metrics` (plus SGLang's `/server_info`) and of a DCGM
//! exporter, as async tasks that report each reading and never wait for the consumer.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{
    GpuSample, GpuSource, Reports, TelemetryRecord, dcgm, engine_metrics, now_unix_ms, prom,
};
use crate::client::error_chain;

async fn get_text(http: &reqwest::Client, url: &str) -> Result<String, String> {
    let send = || http.get(url).timeout(Duration::from_secs(3)).send();
    // A pooled connection the server closed as it was reused fails before any answer; one retry
    // on a fresh connection tells that apart from an endpoint that is really gone.
    let resp = match send().await {
        Err(e) if !e.is_connect() && !e.is_timeout() => send().await,
        r => r,
    }
    .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("GET {url}: HTTP {}", status.as_u16()));
    }
    resp.text().await.map_err(|e| format!("GET {url}: {e}"))
}

/// Sends `reason` only when it changes, so a missing endpoint is one line, not one a second.
fn unavailable(tx: &Reports, last: &mut Option<String>, reason: String, gpu: bool) {
    if last.as_deref() != Some(reason.as_str()) {
        let at_unix_ms = now_unix_ms();
        let rec = if gpu {
            TelemetryRecord::GpuUnavailable {
                at_unix_ms,
                reason: reason.clone(),
            }
        } else {
            TelemetryRecord::ServerUnavailable {
                at_unix_ms,
                reason: reason.clone(),
            }
        };
        tx.send(rec);
        *last = Some(reason);
    }
}

/// A ticker that waits after a slow scrape instead of bursting to catch up.
fn ticker(interval: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// Waits for the next tick; `false` once `cancel` fires.
async fn tick_or_stop(tick: &mut tokio::time::Interval, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = tick.tick() => true,
        () = cancel.cancelled() => false,
    }
}

/// Scrapes the engine's `/metrics` once and maps it to a sample; `Err` says why there is none
/// (what the telemetry panel shows). Tests use it to read the engine's own counters.
pub async fn engine_sample(
    http: &reqwest::Client,
    metrics_url: &str,
) -> Result<super::ServerSample, String> {
    let text = get_text(http, metrics_url).await.map_err(|e| {
        let hint = if e.contains("HTTP 404") {
            " — the server has no Prometheus endpoint there (SGLang needs --enable-metrics, llama-server needs --metrics; or pass --metrics-url)"
        } else {
            ""
        };
        format!("{e}{hint}")
    })?;
    let page = prom::parse(&text);
    engine_metrics::map(&page, now_unix_ms()).ok_or_else(|| {
        format!(
            "{metrics_url} has no SGLang, vLLM or llama.cpp metrics ({} samples)",
            page.samples.len()
        )
    })
}

/// [`engine_sample`], plus SGLang's running accept length from `/server_info`.
pub async fn engine_sample_full(
    http: &reqwest::Client,
    metrics_url: &str,
    server_info_url: &str,
) -> Result<super::ServerSample, String> {
    let mut sample = engine_sample(http, metrics_url).await?;
    if sample.flavor == "sglang"
        && let Ok(t) = get_text(http, server_info_url).await
    {
        sample.accept_length_cumulative = serde_json::from_str::<serde_json::Value>(&t)
            .ok()
            .and_then(|v| {
                v.pointer("/internal_states/0/avg_spec_accept_length")
                    .and_then(serde_json::Value::as_f64)
            });
    }
    Ok(sample)
}

/// Scrapes the engine's metrics every `interval`. When the page uses SGLang names,
/// `server_info_url` adds SGLang's cumulative accept length.
pub fn spawn_engine(
    http: reqwest::Client,
    metrics_url: String,
    server_info_url: String,
    interval: Duration,
    tx: Reports,
    cancel: CancellationToken,
) {
    tokio::spawn(async move {
        let mut tick = ticker(interval);
        let mut last_reason = None;
        while tick_or_stop(&mut tick, &cancel).await {
            let sample = match engine_sample_full(&http, &metrics_url, &server_info_url).await {
                Ok(s) => s,
                Err(e) => {
                    unavailable(&tx, &mut last_reason, e, false);
                    continue;
                }
            };
            last_reason = None;
            if !tx.send(TelemetryRecord::Server(Box::new(sample))) {
                return;
            }
        }
    });
}

/// Scrapes a DCGM exporter every `interval` for GPUs on another host.
/// One reading of a DCGM exporter's page, or why there is none.
pub async fn dcgm_sample(http: &reqwest::Client, url: &str) -> Result<GpuSample, String> {
    let page = prom::parse(&get_text(http, url).await?);
    let Some(gpus) = dcgm::map(&page) else {
        return Err(format!("{url} has no DCGM_FI_* metrics"));
    };
    let source = if dcgm::is_simulated(&page) {
        GpuSource::SimulatedDcgm
    } else {
        GpuSource::Dcgm
    };
    Ok(GpuSample {
        at_unix_ms: now_unix_ms(),
        source,
        gpus,
    })
}

pub fn spawn_dcgm(
    http: reqwest::Client,
    url: String,
    interval: Duration,
    tx: Reports,
    cancel: CancellationToken,
) {
    tokio::spawn(async move {
        let mut tick = ticker(interval);
        let mut last_reason = None;
        while tick_or_stop(&mut tick, &cancel).await {
            let rec = match dcgm_sample(&http, &url).await {
                Ok(s) => TelemetryRecord::Gpu(s),
                Err(e) => {
                    unavailable(&tx, &mut last_reason, e, true);
                    continue;
                }
            };
            last_reason = None;
            if !tx.send(rec) {
                return;
            }
        }
    });
}
