//! The simulator's Prometheus pages: engine metrics in SGLang or vLLM naming, consistent with
//! what it actually did, and a DCGM-exporter-style page for its simulated GPUs (labelled
//! `simulated="true"`). GPU memory here follows KV usage (as if the cache were allocated on
//! demand); SGLang and vLLM preallocate their KV pool, so on real hardware memory stays flat.

use std::fmt::Write;
use std::time::Instant;

use super::log::SimLog;
use super::{MetricsFlavor, SimConfig};

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The engine's `/metrics` page.
pub fn engine_page(cfg: &SimConfig, log: &SimLog, flavor: MetricsFlavor, now: Instant) -> String {
    let mut out = String::new();
    let m = esc(&cfg.model);
    let kv = log.kv_tokens as f64 / cfg.kv_capacity_tokens.max(1) as f64;
    match flavor {
        MetricsFlavor::Sglang => sglang_page(&mut out, cfg, log, &m, kv, now),
        MetricsFlavor::Vllm => vllm_page(&mut out, cfg, log, &m, kv),
    }
    out
}

/// SGLang's names: gauges of the scheduler, the prefix-cache hit rate, the recent accept
/// length, and the token counters.
fn sglang_page(out: &mut String, cfg: &SimConfig, log: &SimLog, m: &str, kv: f64, now: Instant) {
    let recent_accept = (!log.recent_accept.is_empty()).then(|| {
        log.recent_accept.iter().map(|k| f64::from(*k)).sum::<f64>()
            / log.recent_accept.len() as f64
    });
    let l = format!("engine_type=\"unified\",model_name=\"{m}\",tp_rank=\"0\"");
    let g = |out: &mut String, name: &str, help: &str, v: f64| {
        family(out, name, "gauge", help);
        let _ = writeln!(out, "{name}{{{l}}} {v}");
    };
    g(
        out,
        "sglang:num_running_reqs",
        "The number of running requests.",
        log.running as f64,
    );
    g(
        out,
        "sglang:num_queue_reqs",
        "The number of requests in the waiting queue.",
        log.waiting as f64,
    );
    g(
        out,
        "sglang:num_used_tokens",
        "The number of used tokens.",
        log.kv_tokens as f64,
    );
    g(out, "sglang:token_usage", "The token usage.", kv);
    g(
        out,
        "sglang:gen_throughput",
        "The generation throughput (token/s).",
        log.tokens_last_second(now) as f64,
    );
    let (hit, asked) = log
        .recent_cache
        .iter()
        .fold((0u64, 0u64), |(h, q), (c, p)| (h + c, q + p));
    g(
        out,
        "sglang:cache_hit_rate",
        "The prefix cache hit rate.",
        if asked == 0 {
            0.0
        } else {
            hit as f64 / asked as f64
        },
    );
    if cfg.draft_width() > 0 {
        g(
            out,
            "sglang:spec_accept_length",
            "The average acceptance length of speculative decoding.",
            recent_accept.unwrap_or(0.0),
        );
    }
    let l2 = format!("engine_type=\"unified\",model_name=\"{m}\"");
    family(
        out,
        "sglang:prompt_tokens_total",
        "counter",
        "Number of prefill tokens processed.",
    );
    let _ = writeln!(
        out,
        "sglang:prompt_tokens_total{{{l2}}} {}",
        log.total_prompt_tokens
    );
    family(
        out,
        "sglang:generation_tokens_total",
        "counter",
        "Number of generation tokens processed.",
    );
    let _ = writeln!(
        out,
        "sglang:generation_tokens_total{{{l2}}} {}",
        log.total_generated_tokens
    );
    ttft_histogram(out, "sglang", &l2, log);
}

/// The engine's TTFT histogram as `<prefix>:time_to_first_token_seconds`: its sum, its count
/// and the `+Inf` bucket (the simulator keeps no finer buckets).
fn ttft_histogram(out: &mut String, prefix: &str, labels: &str, log: &SimLog) {
    let name = format!("{prefix}:time_to_first_token_seconds");
    family(
        out,
        &name,
        "histogram",
        "Histogram of time to first token in seconds.",
    );
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", log.ttft_sum.as_secs_f64());
    let _ = writeln!(
        out,
        "{name}_bucket{{le=\"+Inf\",{labels}}} {}.0",
        log.ttft_count
    );
    let _ = writeln!(out, "{name}_count{{{labels}}} {}.0", log.ttft_count);
}

/// vLLM's names: gauges, the prefix-cache and token counters, and the speculative-decoding
/// counters per draft position.
fn vllm_page(out: &mut String, cfg: &SimConfig, log: &SimLog, m: &str, kv: f64) {
    let l = format!("engine=\"0\",model_name=\"{m}\"");
    let g = |out: &mut String, name: &str, help: &str, v: f64| {
        family(out, name, "gauge", help);
        let _ = writeln!(out, "{name}{{{l}}} {v}");
    };
    let c = |out: &mut String, name: &str, help: &str, v: u64| {
        family(out, name, "counter", help);
        let _ = writeln!(out, "{name}{{{l}}} {v}.0");
    };
    g(
        out,
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        log.running as f64,
    );
    g(
        out,
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        log.waiting as f64,
    );
    g(
        out,
        "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
        kv,
    );
    c(
        out,
        "vllm:prefix_cache_queries_total",
        "Prefix cache queries, in terms of number of queried tokens.",
        log.total_cache_queries,
    );
    c(
        out,
        "vllm:prefix_cache_hits_total",
        "Prefix cache hits, in terms of number of cached tokens.",
        log.total_cached_tokens,
    );
    c(
        out,
        "vllm:num_preemptions_total",
        "Cumulative number of preemption from the engine.",
        0,
    );
    c(
        out,
        "vllm:prompt_tokens_total",
        "Number of prefill tokens processed.",
        log.total_prompt_tokens,
    );
    c(
        out,
        "vllm:generation_tokens_total",
        "Number of generation tokens processed.",
        log.total_generated_tokens,
    );
    ttft_histogram(out, "vllm", &l, log);
    if cfg.draft_width() > 0 {
        c(
            out,
            "vllm:spec_decode_num_drafts_total",
            "Number of spec decoding drafts.",
            log.spec_drafts,
        );
        c(
            out,
            "vllm:spec_decode_num_draft_tokens_total",
            "Number of draft tokens.",
            log.spec_draft_tokens,
        );
        c(
            out,
            "vllm:spec_decode_num_accepted_tokens_total",
            "Number of accepted tokens.",
            log.spec_accepted,
        );
        family(
            out,
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "counter",
            "Accepted tokens per draft position.",
        );
        for (i, v) in log.spec_accepted_per_pos.iter().enumerate() {
            let _ = writeln!(
                out,
                "vllm:spec_decode_num_accepted_tokens_per_pos_total{{{l},position=\"{i}\"}} {v}.0"
            );
        }
    }
}

/// SGLang's `/server_info` shape, with the cumulative accept length.
pub fn server_info(cfg: &SimConfig, log: &SimLog) -> serde_json::Value {
    let avg =
        (log.spec_drafts > 0).then(|| 1.0 + log.spec_accepted as f64 / log.spec_drafts as f64);
    serde_json::json!({
        "version": concat!("servetop-sim ", env!("CARGO_PKG_VERSION")),
        "model_path": cfg.model,
        "context_length": cfg.context_length,
        "simulated": true,
        "internal_states": [{"avg_spec_accept_length": avg}],
    })
}

/// The simulated GPUs as a DCGM exporter would show them.
pub fn dcgm_page(cfg: &SimConfig, log: &SimLog, now: Instant) -> String {
    let mut out = String::new();
    let n = cfg.gpus.max(1);
    let util = log.busy_fraction(now) * 100.0;
    let kv_share = log.kv_tokens as f64 / cfg.kv_capacity_tokens.max(1) as f64;
    let total_mib = cfg.gpu_mem_gb * 1024.0;
    let weights_mib = cfg.weights_gb * 1024.0 / f64::from(n);
    let kv_pool_mib = (total_mib * 0.9 - weights_mib).max(0.0);
    let used_mib = (weights_mib + kv_share.min(1.0) * kv_pool_mib).min(total_mib);
    let rows: [(&str, &str, f64); 7] = [
        (
            "DCGM_FI_DEV_SM_CLOCK",
            "SM clock frequency (in MHz).",
            if util > 0.0 { 2100.0 } else { 210.0 },
        ),
        (
            "DCGM_FI_DEV_GPU_TEMP",
            "GPU temperature (in C).",
            35.0 + util * 0.4,
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            "Power draw (in W).",
            cfg.gpu_idle_w + (cfg.gpu_busy_w - cfg.gpu_idle_w) * util / 100.0,
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "GPU utilization (in %).",
            util.round(),
        ),
        (
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "Memory utilization (in %).",
            (util * 0.6).round(),
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "Framebuffer memory free (in MiB).",
            (total_mib - used_mib).round(),
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "Framebuffer memory used (in MiB).",
            used_mib.round(),
        ),
    ];
    let energy = log.energy_mj(now, cfg.gpu_idle_w, cfg.gpu_busy_w);
    family(
        &mut out,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    );
    for g in 0..cfg.gpus {
        let _ = writeln!(
            out,
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu=\"{g}\",UUID=\"GPU-servetop-sim-{g}\",device=\"nvidia{g}\",modelName=\"Simulated {:.0}GB GPU\",Hostname=\"servetop-sim\",simulated=\"true\"}} {energy}",
            cfg.gpu_mem_gb
        );
    }
    for (name, help, v) in rows {
        family(&mut out, name, "gauge", help);
        for g in 0..cfg.gpus {
            let _ = writeln!(
                out,
                "{name}{{gpu=\"{g}\",UUID=\"GPU-servetop-sim-{g}\",device=\"nvidia{g}\",modelName=\"Simulated {:.0}GB GPU\",Hostname=\"servetop-sim\",simulated=\"true\"}} {v}",
                cfg.gpu_mem_gb
            );
        }
    }
    out
}
