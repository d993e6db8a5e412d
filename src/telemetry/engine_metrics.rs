//! Engine `/metrics` pages mapped to the common `ServerSample` fields (docs/telemetry.md). Each
//! engine's names are listed once here; several series of one name (data-parallel ranks,
//! engines) are added up, except ratios, which are averaged.

use super::ServerSample;
use super::prom::Page;

/// Which engine's names a page uses, by prefix.
pub fn flavor(page: &Page) -> Option<&'static str> {
    for (prefix, name) in [
        ("sglang:", "sglang"),
        ("vllm:", "vllm"),
        ("llamacpp:", "llamacpp"),
    ] {
        if page.samples.iter().any(|s| s.name.starts_with(prefix)) {
            return Some(name);
        }
    }
    None
}

/// The first of `names` that the page has, summed over its series.
fn sum_any(page: &Page, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| page.sum(n))
}

/// The first of `names` that the page has, averaged over its series.
fn mean_any(page: &Page, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| page.mean(n))
}

/// The inverse of the mean of the first histogram of `names` (its `_sum` over its `_count`):
/// a rate from a time per token. `None` before it has counted anything.
fn per_second(page: &Page, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| {
        let count = page.sum(&format!("{n}_count")).filter(|c| *c > 0.0)?;
        let sum = page.sum(&format!("{n}_sum")).filter(|s| *s > 0.0)?;
        Some(count / sum)
    })
}

/// Per-position counters `name{position="i"}`, in position order.
fn per_position(page: &Page, name: &str) -> Vec<f64> {
    let mut v: Vec<(usize, f64)> = page
        .all(name)
        .filter_map(|s| Some((s.label("position")?.parse().ok()?, s.value)))
        .collect();
    v.sort_by_key(|p| p.0);
    let mut out: Vec<f64> = Vec::new();
    for (pos, val) in v {
        if out.len() <= pos {
            out.resize(pos + 1, 0.0);
        }
        out[pos] += val;
    }
    out
}

/// Maps a parsed page to a sample, or `None` when it has no known engine names.
pub fn map(page: &Page, at_unix_ms: i64) -> Option<ServerSample> {
    let f = flavor(page)?;
    let mut s = ServerSample {
        at_unix_ms,
        flavor: f.to_string(),
        ..ServerSample::default()
    };
    match f {
        "sglang" => {
            s.running = sum_any(page, &["sglang:num_running_reqs"]);
            s.queued = sum_any(page, &["sglang:num_queue_reqs"]);
            s.kv_usage = mean_any(page, &["sglang:token_usage"]);
            s.prefix_hit_rate = mean_any(page, &["sglang:cache_hit_rate"]);
            s.gen_throughput = sum_any(page, &["sglang:gen_throughput"]);
            s.prompt_tokens_total = sum_any(page, &["sglang:prompt_tokens_total"]);
            s.generation_tokens_total = sum_any(page, &["sglang:generation_tokens_total"]);
            s.ttft_seconds_sum = sum_any(page, &["sglang:time_to_first_token_seconds_sum"]);
            s.ttft_seconds_count = sum_any(page, &["sglang:time_to_first_token_seconds_count"]);
            s.decode_tokens_per_s = per_second(
                page,
                &[
                    "sglang:time_per_output_token_seconds",
                    "sglang:inter_token_latency_seconds",
                ],
            );
            s.preemptions_total = sum_any(page, &["sglang:num_retracted_requests_total"]);
            s.accept_length_gauge = mean_any(page, &["sglang:spec_accept_length"]);
        }
        "vllm" => {
            s.running = sum_any(page, &["vllm:num_requests_running"]);
            s.queued = sum_any(page, &["vllm:num_requests_waiting"]);
            // Renamed in newer versions; older ones call it gpu_cache_usage_perc (both 0..1).
            s.kv_usage = mean_any(
                page,
                &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
            );
            s.prefix_queries_total = sum_any(
                page,
                &[
                    "vllm:prefix_cache_queries_total",
                    "vllm:gpu_prefix_cache_queries_total",
                ],
            );
            s.prefix_hits_total = sum_any(
                page,
                &[
                    "vllm:prefix_cache_hits_total",
                    "vllm:gpu_prefix_cache_hits_total",
                ],
            );
            s.preemptions_total = sum_any(page, &["vllm:num_preemptions_total"]);
            s.prompt_tokens_total = sum_any(page, &["vllm:prompt_tokens_total"]);
            s.generation_tokens_total = sum_any(page, &["vllm:generation_tokens_total"]);
            s.ttft_seconds_sum = sum_any(page, &["vllm:time_to_first_token_seconds_sum"]);
            s.ttft_seconds_count = sum_any(page, &["vllm:time_to_first_token_seconds_count"]);
            s.decode_tokens_per_s = per_second(
                page,
                &[
                    "vllm:request_time_per_output_token_seconds",
                    "vllm:time_per_output_token_seconds",
                    "vllm:inter_token_latency_seconds",
                ],
            );
            s.spec_drafts_total = sum_any(page, &["vllm:spec_decode_num_drafts_total"]);
            s.spec_draft_tokens_total = sum_any(page, &["vllm:spec_decode_num_draft_tokens_total"]);
            s.spec_accepted_total = sum_any(page, &["vllm:spec_decode_num_accepted_tokens_total"]);
            s.spec_accepted_per_pos_total =
                per_position(page, "vllm:spec_decode_num_accepted_tokens_per_pos_total");
        }
        _ => {
            s.running = sum_any(page, &["llamacpp:requests_processing"]);
            s.queued = sum_any(page, &["llamacpp:requests_deferred"]);
            s.kv_usage = mean_any(page, &["llamacpp:kv_cache_usage_ratio"]);
            s.prompt_tokens_total = sum_any(page, &["llamacpp:prompt_tokens_total"]);
            // Its prompt_tokens_total leaves out the tokens reused from the cache.
            s.prefix_hits_total = sum_any(page, &["llamacpp:prompt_tokens_cached_total"]);
            s.prefix_queries_total = s
                .prefix_hits_total
                .zip(s.prompt_tokens_total)
                .map(|(hit, miss)| hit + miss);
            s.generation_tokens_total = sum_any(page, &["llamacpp:tokens_predicted_total"]);
            s.decode_tokens_per_s =
                mean_any(page, &["llamacpp:predicted_tokens_seconds"]).filter(|v| *v > 0.0);
            s.spec_drafts_total = sum_any(page, &["llamacpp:spec_decode_num_drafts_total"]);
            s.spec_draft_tokens_total =
                sum_any(page, &["llamacpp:spec_decode_num_draft_tokens_total"]);
            s.spec_accepted_total =
                sum_any(page, &["llamacpp:spec_decode_num_accepted_tokens_total"]);
            s.spec_accepted_per_pos_total = per_position(
                page,
                "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
            );
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::prom::parse;

    #[test]
    fn vllm_names_and_per_position_counters() {
        let p = parse(
            "vllm:num_requests_running{engine=\"0\"} 3\nvllm:num_requests_running{engine=\"1\"} 2\n\
             vllm:num_requests_waiting 7\nvllm:gpu_cache_usage_perc 0.5\n\
             vllm:spec_decode_num_drafts_total 100\nvllm:spec_decode_num_draft_tokens_total 300\n\
             vllm:spec_decode_num_accepted_tokens_total 200\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 60\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 90\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 50\n",
        );
        let s = map(&p, 5).unwrap();
        assert_eq!(s.flavor, "vllm");
        assert_eq!(
            (s.running, s.queued, s.kv_usage),
            (Some(5.0), Some(7.0), Some(0.5))
        );
        assert_eq!(s.spec_accepted_per_pos_total, vec![90.0, 60.0, 50.0]);
        assert_eq!(s.spec_drafts_total, Some(100.0));
    }

    #[test]
    fn sglang_gauges() {
        let p = parse(
            "sglang:num_running_reqs{model_name=\"m\"} 8\nsglang:num_queue_reqs{model_name=\"m\"} 36\nsglang:token_usage{model_name=\"m\"} 0.42\nsglang:spec_accept_length{model_name=\"m\"} 3.9\n",
        );
        let s = map(&p, 0).unwrap();
        assert_eq!(s.flavor, "sglang");
        assert_eq!(s.queued, Some(36.0));
        assert_eq!(s.kv_usage, Some(0.42));
        assert_eq!(s.accept_length_gauge, Some(3.9));
    }

    #[test]
    fn the_engines_ttft_histogram_sums_over_its_series() {
        let s = map(
            &parse(include_str!("../../tests/fixtures/metrics/sglang.prom")),
            0,
        )
        .unwrap();
        assert_eq!(s.ttft_seconds_count, Some(11228.0 + 37.0));
        assert!(
            (s.ttft_seconds_sum.unwrap() - (5_487.310_922_145_844 + 17.928_411_006_927_49)).abs()
                < 1e-9
        );
        let v = map(
            &parse(include_str!("../../tests/fixtures/metrics/vllm.prom")),
            0,
        )
        .unwrap();
        assert_eq!(v.ttft_seconds_count, Some(1816.0));
        assert_eq!(v.ttft_seconds_sum, Some(561.221_470_832_824_7));
    }

    #[test]
    fn unknown_pages_map_to_nothing() {
        assert!(map(&parse("process_cpu_seconds_total 3\n"), 0).is_none());
    }
}
