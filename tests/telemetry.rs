//! Telemetry: parsing real engines' exposition formats (fixtures written from each project's
//! source, see their header comments), and end-to-end runs against the simulator's /metrics in
//! vLLM and SGLang naming, with and without the endpoint.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]
// Parsed values are compared exactly on purpose.
#![allow(clippy::float_cmp)]

use std::net::SocketAddr;
use std::path::PathBuf;

use proptest::prelude::*;
use servetop::event::RunState;
use servetop::run::run_headless;
use servetop::sim::{self, AcceptLength, MetricsFlavor, SimConfig};
use servetop::telemetry::{dcgm, engine_metrics, prom};
use servetop::workload::RequestCount;

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/metrics")
            .join(name),
    )
    .unwrap()
}

#[test]
fn vllm_fixture() {
    let page = prom::parse(&fixture("vllm.prom"));
    assert_eq!(page.skipped_lines, 0);
    let s = engine_metrics::map(&page, 0).unwrap();
    assert_eq!(s.flavor, "vllm");
    assert_eq!(
        (s.running, s.queued, s.kv_usage),
        (Some(12.0), Some(3.0), Some(0.4219))
    );
    assert_eq!(s.spec_drafts_total, Some(301_776.0));
    assert_eq!(s.spec_accepted_total, Some(577_541.0));
    assert_eq!(
        s.spec_accepted_per_pos_total,
        vec![241_002.0, 187_223.0, 149_316.0]
    );
    assert_eq!(s.prefix_hits_total, Some(1_917_452.0));
    // The per-position counters add up to the total, as in vLLM.
    assert_eq!(s.spec_accepted_per_pos_total.iter().sum::<f64>(), 577_541.0);
    // Histogram lines are samples too, with their le labels (including +Inf).
    assert!(
        page.all("vllm:time_to_first_token_seconds_bucket")
            .any(|b| b.label("le") == Some("+Inf"))
    );
}

#[test]
fn sglang_fixture_with_escaped_labels() {
    let page = prom::parse(&fixture("sglang.prom"));
    assert_eq!(page.skipped_lines, 0);
    let s = engine_metrics::map(&page, 0).unwrap();
    assert_eq!(s.flavor, "sglang");
    assert_eq!(s.running, Some(48.0));
    // The fixture's one series: tests/fixtures/metrics/sglang.prom line 66.
    assert_eq!(
        s.accept_length_gauge,
        Some(3.124_023_437_5),
        "sglang:spec_accept_length is read"
    );
    let tenant = page
        .all("sglang:prompt_tokens_total")
        .filter_map(|x| x.label("tenant"))
        .find(|t| !t.is_empty())
        .unwrap();
    assert_eq!(tenant, "acme \"beta\" \\ eu-west");
    // Both tenants' series add up.
    assert_eq!(s.prompt_tokens_total, Some(8_128_902.0 + 40_218.0));
}

#[test]
fn llamacpp_fixture() {
    let page = prom::parse(&fixture("llamacpp.prom"));
    assert_eq!(page.skipped_lines, 0);
    let s = engine_metrics::map(&page, 0).unwrap();
    assert_eq!(s.flavor, "llamacpp");
    assert_eq!((s.running, s.queued), (Some(3.0), Some(0.0)));
    assert_eq!(s.spec_drafts_total, Some(152_880.0));
    assert_eq!(s.spec_accepted_per_pos_total.len(), 4);
}

#[test]
fn dcgm_fixture() {
    let page = prom::parse(&fixture("dcgm.prom"));
    assert_eq!(page.skipped_lines, 0);
    let g = dcgm::map(&page).unwrap();
    assert_eq!(g.len(), 2);
    assert_eq!(g[0].name, "NVIDIA H100 80GB HBM3");
    assert_eq!(g[0].util_gpu_pct, Some(97.0));
    assert_eq!(g[0].mem_used_bytes, Some(74_210 * 1024 * 1024));
    assert_eq!(g[0].mem_total_bytes, Some((74_210 + 6_802) * 1024 * 1024));
    assert_eq!(g[1].util_gpu_pct, Some(0.0));
    assert!(!dcgm::is_simulated(&page));
}

proptest! {
    #[test]
    fn parser_never_panics(text in ".{0,400}") {
        let p = prom::parse(&text);
        prop_assert!(p.samples.len() + p.skipped_lines <= text.lines().count());
    }

    #[test]
    fn generated_samples_round_trip(
        name in "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}",
        key in "[a-zA-Z_][a-zA-Z0-9_]{0,10}",
        value in "[ -~]{0,20}",
        v in -1e12f64..1e12,
    ) {
        let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
        let line = format!("{name}{{{key}=\"{escaped}\"}} {v}\n");
        let p = prom::parse(&line);
        prop_assert_eq!(p.skipped_lines, 0);
        prop_assert_eq!(&p.samples[0].name, &name);
        prop_assert_eq!(p.samples[0].label(&key), Some(value.as_str()));
        prop_assert_eq!(p.samples[0].value, v);
    }
}

async fn run_against(sim_cfg: SimConfig) -> servetop::run::session::Session {
    let h = sim::start(sim_cfg, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let mut cfg = servetop::config::RunConfig::demo();
    cfg.base_url = h.url();
    cfg.concurrency = vec![1, 4];
    cfg.input_len = 200;
    cfg.output_len = 241;
    cfg.requests_per_level = RequestCount::Fixed(4);
    cfg.long_context = vec![];
    cfg.no_gpu = true;
    let (state, s) = run_headless(cfg, None).await.unwrap();
    assert_eq!(state, RunState::Finished);
    s
}

fn fast(flavor: Option<MetricsFlavor>) -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 10.0;
    c.accept_length = AcceptLength::Fixed(3);
    c.metrics = flavor;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_counters_give_the_server_accept_length() {
    let s = run_against(fast(Some(MetricsFlavor::Vllm))).await;
    assert_eq!(s.summary.telemetry.server_flavor.as_deref(), Some("vllm"));
    for l in &s.summary.sweep {
        let spec = l.spec_server.as_ref().unwrap();
        assert_eq!(spec.source, "counters");
        // Each step accepts 2 drafts + the target token = 3; the last step of a request can be
        // cut short by max_tokens (241 = 1 + 80 × 3 never is), so the counters say exactly 3.
        let a = l.accept_length_server.unwrap();
        assert!((a - 3.0).abs() < 0.02, "{}: {a}", l.label());
        assert!((spec.acceptance_rate.unwrap() - 1.0).abs() < 0.01);
        let m = l.server_metrics.as_ref().unwrap();
        // Every request of a level runs 2.4 s (80 steps of 10 ms, then some), all C of them at
        // once, and the 1 s sampler reads the gauge while they do: its peak is C, never more.
        let c = f64::from(l.concurrency);
        assert_eq!(m.max_running, Some(c), "{}", l.label());
        // The counters are scraped as the level starts and ends, so they cover exactly its
        // requests, even for the C=4 level that is shorter than the 1 s sampler.
        let out = l.stats.as_ref().unwrap().scalars.total_output_tokens;
        assert_eq!(out, 4 * 241);
        assert_eq!(m.generation_tokens, Some(out as f64), "{}", l.label());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_gauge_is_read() {
    let s = run_against(fast(Some(MetricsFlavor::Sglang))).await;
    assert_eq!(s.summary.telemetry.server_flavor.as_deref(), Some("sglang"));
    let l = &s.summary.sweep[1];
    let spec = l.spec_server.as_ref().unwrap();
    assert_eq!(spec.source, "gauge");
    assert!(
        (spec.accept_length - 3.0).abs() < 0.05,
        "{}",
        spec.accept_length
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_metrics_the_run_completes_and_says_why() {
    let s = run_against(fast(None)).await;
    assert_eq!(
        s.summary.sweep.iter().filter(|l| l.stats.is_some()).count(),
        2
    );
    let why = s.summary.telemetry.server_reason.as_deref().unwrap();
    assert!(
        why.contains("HTTP 404") && why.contains("--enable-metrics"),
        "{why}"
    );
    assert!(
        s.summary
            .sweep
            .iter()
            .all(|l| l.accept_length_server.is_none())
    );
}
