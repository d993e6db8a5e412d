//! `--repeat N` and the steady window against the built-in simulator: each run's figures are
//! those of the server's own record of its requests, and the interval across repeats is
//! Student's t over the runs (docs/metrics.md "Repeated runs"); a closed loop of equal requests
//! has a known number of steady requests (docs/metrics.md "Per level").
//!
//! The simulator here takes `STEP_MS` per decode step whatever the batch (no batch growth),
//! one token a step, prefill at a million tokens a second. What it really did is read from its
//! own record (`tests/sim_truth`), never assumed from its configuration, so a loaded machine
//! moves both sides alike; a starved one fails the test naming the slip.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::sim::{self, AcceptLength, SimConfig};
use servetop::summary::LevelSummary;
use servetop::summary::repeats::FIGURES;
use servetop::workload::RequestCount;

mod sim_run;
mod sim_truth;
use sim_run::finished;

/// Student's t(0.975, 2), the 95 % two-sided quantile for three runs, in closed form: with two
/// degrees of freedom the quantile at p is (2p − 1) / √(2p(1 − p)).
fn t_975_2() -> f64 {
    let p = 0.975_f64;
    (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt()
}

const STEP_MS: f64 = 20.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_repeats_match_the_server_and_their_interval_is_students_t() {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = STEP_MS;
    c.batch_growth = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    c.prefill_tokens_per_s = 1_000_000.0;
    let h = sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let cfg = RunConfig {
        concurrency: vec![1, 4],
        output_len: 21,
        requests_per_level: RequestCount::Fixed(8),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        repeat: 3,
        ..RunConfig::minimal(&h.url())
    };
    let started = std::time::Instant::now();
    let s = finished(cfg).await;
    let truth = sim_truth::of(&h);
    sim_truth::guard(&truth, started.elapsed().as_secs_f64());
    let sweep = &s.summary.sweep;
    // The plan three times over, interleaved: C=1 #1, C=4 #1, C=1 #2, and so on.
    let labels: Vec<String> = sweep.iter().map(LevelSummary::label).collect();
    assert_eq!(
        labels,
        ["C=1 #1", "C=4 #1", "C=1 #2", "C=4 #2", "C=1 #3", "C=4 #3"]
    );
    for l in sweep {
        let r = l.repeat.unwrap();
        assert_eq!((r.of, r.first), (3, l.index % 2));
        // Every run of a level carries the same mean and interval, of every figure.
        let first = &sweep[r.first as usize];
        assert_eq!(l.ci95, first.ci95);
        for k in FIGURES {
            assert!(l.ci95.contains_key(k), "{}: no ci95 of {k}", l.label());
        }
    }
    for base in 0..2 {
        let runs: Vec<&LevelSummary> = sweep.iter().skip(base).step_by(2).collect();
        // Each run's median TPOT against the median of the server's own per-request times
        // (its last frame less its first, over the tokens after the first). A request's
        // figure moves by at most (25 + 1) ms / 20 tokens between the two records.
        let medians: Vec<f64> = runs
            .iter()
            .map(|l| {
                let got = l.stats.as_ref().unwrap().dists.tpot_ms.as_ref().unwrap().p50;
                let server: Vec<f64> = sim_truth::of_level(&truth, l.index)
                    .into_iter()
                    .filter_map(sim_truth::server_tpot_ms)
                    .collect();
                assert_eq!(server.len(), 8, "{}: the server's record of it", l.label());
                let want = sim_truth::nearest_rank(&server, 50.0);
                println!("{}: median TPOT {got:.4} ms, the server's {want:.4} ms", l.label());
                assert!(
                    (got - want).abs() <= 0.5,
                    "{}: median TPOT {got:.4} ms, the server wrote its requests at {want:.4} ms a token",
                    l.label()
                );
                got
            })
            .collect();
        // The interval across the three runs, by hand: mean ± t(0.975, 2)·s/√3.
        let mean = medians.iter().sum::<f64>() / 3.0;
        let sd = (medians.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        let half = t_975_2() * sd / 3f64.sqrt();
        let l = runs[0];
        let k = "median_tpot_ms";
        let [lo, hi] = l.ci95[k];
        println!(
            "{} {k}: runs {medians:.4?}, mean {:.4}, 95 % interval [{lo:.4}, {hi:.4}], by hand [{:.4}, {:.4}]",
            l.base_label(),
            l.repeat_mean[k],
            mean - half,
            mean + half
        );
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(near(l.repeat_mean[k], mean), "{}: mean", l.base_label());
        // The half width within the documented table value's rounding (4.303 for 4.30265:
        // 1.2e-4 of it); the normal 1.96 would be 54 % short.
        let got_half = (hi - lo) / 2.0;
        assert!(
            near(f64::midpoint(lo, hi), mean) && (got_half - half).abs() <= 2e-4 * half + 1e-9,
            "{} {k}: [{lo}, {hi}] is not mean ± t·s/√n = [{}, {}]",
            l.base_label(),
            mean - half,
            mean + half
        );
        println!(
            "{}: runs disagree beyond their own intervals on {:?}",
            l.base_label(),
            l.repeats_disagree
        );
    }
}

/// A closed loop of C workers sending N requests that all take the same time runs in waves:
/// the first wave goes out before anything completes (ramp-up) and the last ends after the last
/// send (drain), so exactly N − 2C requests are sent after the first completion and done by the
/// last send, whatever the machine's timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_of_equal_requests_has_n_minus_2c_steady_requests() {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = STEP_MS;
    c.batch_growth = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    let h = sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let cfg = RunConfig {
        concurrency: vec![4],
        output_len: 21,
        requests_per_level: RequestCount::Fixed(16),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        ..RunConfig::minimal(&h.url())
    };
    let s = finished(cfg).await;
    let st = s.summary.sweep[0].stats.as_ref().unwrap();
    assert_eq!(st.scalars.steady_requests, Some(16 - 2 * 4));
    let tpot = st.dists.steady_tpot_ms.as_ref().unwrap();
    assert_eq!(tpot.count, 8);
    // The steady requests' median TPOT against the server's record of the same eight.
    let truth = sim_truth::of(&h);
    let server: Vec<f64> = sim_truth::of_level(&truth, 0)
        .into_iter()
        .filter_map(sim_truth::server_tpot_ms)
        .collect();
    assert_eq!(server.len(), 16);
    let (lo, hi) = (
        server.iter().copied().fold(f64::MAX, f64::min),
        server.iter().copied().fold(f64::MIN, f64::max),
    );
    assert!(
        (lo - 0.5..=hi + 0.5).contains(&tpot.p50),
        "steady TPOT p50 {} ms outside the server's per-request {lo:.3}..{hi:.3} ms",
        tpot.p50
    );
    // Long enough: no warning about it.
    assert!(
        !s.summary
            .warnings
            .iter()
            .any(|w| w.contains("steady state")),
        "{:?}",
        s.summary.warnings
    );
    // Half as many requests: 8 − 8 = 0 steady, and the run says so.
    let mut cfg = RunConfig {
        concurrency: vec![4],
        output_len: 21,
        requests_per_level: RequestCount::Fixed(8),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        ..RunConfig::minimal(&h.url())
    };
    cfg.warmup_requests = 0;
    let s = finished(cfg).await;
    let st = s.summary.sweep[0].stats.as_ref().unwrap();
    assert_eq!(st.scalars.steady_requests, Some(0));
    assert!(
        s.summary
            .warnings
            .iter()
            .any(|w| w.starts_with("levels too short for steady state")
                && w.contains("C=4 (0 of 8)")),
        "{:?}",
        s.summary.warnings
    );
}
