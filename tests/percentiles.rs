//! `--metric-percentiles` against the in-process simulator: the percentiles asked for are in
//! results.json under vLLM's keys (`p75_ttft_ms`), each the nearest rank of the run's own
//! per-request times in requests.jsonl (to the histogram's three digits), and summary.md's
//! sweep table gives them, as `report` writes it again. A bad list is one line, before anything
//! is sent.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::float_cmp)]

use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::sim;
use servetop::workload::RequestCount;

mod sim_run;
mod sim_truth;

#[test]
fn the_percentiles_asked_for_are_the_records_nearest_ranks() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = sim::start(
            sim_run::steady_config(0.5),
            SocketAddr::from(([127, 0, 0, 1], 0)),
        )
        .await
        .unwrap();
        let dir = sim_run::temp_run_dir("percentiles");
        let asked = [25.0, 50.0, 75.0, 99.9];
        let cfg = RunConfig {
            api_key_env: "SERVETOP_TEST_NO_KEY".into(),
            warmup_requests: 0,
            concurrency: vec![1, 4],
            output_len: 24,
            requests_per_level: RequestCount::Fixed(24),
            metric_percentiles: asked.to_vec(),
            ..RunConfig::minimal(&h.url())
        };
        sim_run::finished_into(cfg, &dir).await;
        let (records, _) = sim_truth::run_records(&dir);
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(
            results["config"]["metric_percentiles"],
            serde_json::json!(asked)
        );
        for (i, level) in results["sweep"].as_array().unwrap().iter().enumerate() {
            let mine: Vec<_> = records
                .iter()
                .filter(|r| r.level == i as u32 && !r.warmup)
                .collect();
            assert_eq!(mine.len(), 24);
            let ms = |us: u64| us as f64 / 1e3;
            let ttft: Vec<f64> = mine.iter().map(|r| ms(r.ttft_us.unwrap())).collect();
            let e2e: Vec<f64> = mine.iter().map(|r| ms(r.e2e_us.unwrap())).collect();
            for (metric, values) in [("ttft_ms", &ttft), ("e2el_ms", &e2e)] {
                for (p, key) in [(25.0, "p25"), (75.0, "p75"), (99.9, "p99.9"), (50.0, "median")]
                {
                    let got = level[format!("{key}_{metric}")].as_f64().unwrap();
                    let want = sim_truth::nearest_rank(values, p);
                    assert!(
                        (got - want).abs() <= 1e-3 * want + 1e-3,
                        "level {i} {key}_{metric}: {got} against the records' {want}"
                    );
                }
            }
            // A percentile not asked for is not written.
            assert!(level.get("p75_chunk_gap_ms").is_none());
        }
        let head = "TTFT p25 / p50 / p75 / p99.9 (ms) | ITL p25 / p50 / p75 / p99.9 (ms) | TPOT p25 / p50 / p75 / p99.9 (ms) | E2E p25 / p50 / p75 / p99.9 (ms)";
        let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        assert!(summary.contains(head), "{summary}");
        // `report` writes the same table from the saved run.
        std::fs::remove_file(dir.join("summary.md")).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
            .arg("report")
            .arg(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let again = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        assert!(again.contains(head), "{again}");
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn a_bad_list_is_one_line() {
    for bad in ["99,50", "0,50", "50,x", "100"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
            .args([
                "run",
                "--base-url",
                "http://127.0.0.1:9",
                "--metric-percentiles",
                bad,
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains("--metric-percentiles"), "{bad}: {err}");
    }
}
