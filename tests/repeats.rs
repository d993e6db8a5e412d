//! `--repeat N` and the steady window against the built-in simulator, whose decode step is a
//! known constant: the 95 % intervals across repeats must contain the configured per-token time
//! (docs/metrics.md "Repeated runs"), and a closed loop of equal requests has a known number of
//! steady requests (docs/metrics.md "Per level").
//!
//! The simulator here takes `STEP_MS` per decode step whatever the batch (no batch growth),
//! one token a step, prefill at a million tokens a second: TPOT and ITL are `STEP_MS` and a
//! stream decodes 1000 / `STEP_MS` tokens a second, at every concurrency. The engine keeps its
//! steps on a fixed grid (a late step is made up), so the client's figures scatter around the
//! configured ones instead of drifting; the simulator's recorded schedule slip (time it fell
//! behind and did not make up) widens the check, as in the other known-answer suites.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::repeats::FIGURES;
use servetop::sim::{self, AcceptLength, SimConfig};
use servetop::summary::LevelSummary;
use servetop::workload::RequestCount;

mod sim_run;
use sim_run::finished;

const STEP_MS: f64 = 20.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_repeats_give_intervals_that_hold_the_configured_step() {
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
    let s = finished(cfg).await;
    let slip_ms = h.log.lock().unwrap().schedule_slip.as_secs_f64() * 1e3;
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
    for l in &sweep[..2] {
        for k in ["median_tpot_ms", "mean_tpot_ms", "median_itl_ms"] {
            let [lo, hi] = l.ci95[k];
            // The slip, as if it all fell in one request's 20 steps: how far the simulator
            // itself strayed from its configured step.
            let widen = slip_ms / 20.0;
            println!(
                "{} {k}: mean {:.4} ms, 95 % interval [{lo:.4}, {hi:.4}] (the simulator slipped {slip_ms:.1} ms over the run: ± {widen:.3} ms allowed)",
                l.base_label(),
                l.repeat_mean[k]
            );
            assert!(
                lo - widen <= STEP_MS && STEP_MS <= hi + widen,
                "{} {k}: [{lo:.4}, {hi:.4}] does not hold the configured {STEP_MS} ms",
                l.label()
            );
        }
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
    let slip_ms = h.log.lock().unwrap().schedule_slip.as_secs_f64() * 1e3;
    assert!(
        (tpot.p50 - STEP_MS).abs() <= 0.05 * STEP_MS + slip_ms / 20.0,
        "steady TPOT p50 {} ms",
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
