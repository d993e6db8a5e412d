//! The SLO capacity search end to end against the built-in simulator (127.0.0.1:0), on a
//! configuration whose true answer follows from the simulator's own parameters.
//!
//! The simulator (see `sim::SimConfig::step_ms`): every running request gets one token per
//! decode step (accept length 1); a step lasts `D · (1 + g · (b − 1))` with `b` requests in the
//! batch; prefill is 1M tok/s (0.1 ms for a 100-token prompt) and nothing else slows a step.
//! A request of `O` output tokens gets its first token at prefill, then `O − 1` decode steps, so
//! its TPOT is the mean step time over its life.
//!
//! Arrivals at rate `λ` are nearly deterministic (gamma gaps of shape 1000: a gap's coefficient
//! of variation is 3 %), so in steady state the batch is a constant `b`, and by Little's law
//! `b = λ · (O − 1) · TPOT` with `TPOT = D · (1 + g · (b − 1))`. A TPOT limit `X` is met
//! exactly while `TPOT(b) ≤ X`, i.e. `b ≤ b* = 1 + (X / D − 1) / g`, so the highest rate that
//! meets it is `λ* = b* / ((O − 1) · X)`.
//!
//! With D = 10 ms, g = 0.05, O = 51, X = 20 ms: b* = 1 + 1 / 0.05 = 21 requests in the batch,
//! λ* = 21 / (50 × 0.020 s) = 21.0 requests/s.
//!
//! How sharp the edge is: solving the two equations for TPOT gives
//! `TPOT(λ) = D (1 − g) / (1 − g D (O − 1) λ)`; at λ* that is d ln TPOT / d ln λ ≈ 1.1, so a
//! probe 5 % off λ* misses or clears the limit by about 5.5 % — far more than a level's own noise
//! (TPOT p90 intervals of ±1 % here). A finite level's ramp-up (the batch fills over one request
//! lifetime, ~1 s of a 3 s level) only lowers early requests' TPOT; the p90 sits on the steady
//! state.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::PathBuf;

use servetop::config::RunConfig;
use servetop::event::RunState;
use servetop::metrics::Slo;
use servetop::sim::{self, AcceptLength, SimConfig};
use servetop::workload::OpenLoop;
use servetop::workload::search::{Precision, SearchConfig, SearchStatus};

mod sim_truth;

/// The tests time a simulator on a 2-core machine: they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const STEP_MS: f64 = 40.0;
const GROWTH: f64 = 0.05;
const OUTPUT_LEN: u32 = 13;
const TPOT_LIMIT_MS: f64 = 80.0;

fn sim_config() -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = STEP_MS;
    c.batch_growth = GROWTH;
    c.accept_length = AcceptLength::Fixed(1);
    c.context_ms_per_1k = 0.0;
    c.prefill_tokens_per_s = 1_000_000.0;
    c.max_running = 256;
    c
}

/// The true answer, from the configuration (derivation in the module comment).
fn expected_rate(c: &SimConfig, output_len: u32, tpot_limit_ms: f64) -> f64 {
    let b_star = 1.0 + (tpot_limit_ms / c.decode_step_ms - 1.0) / c.batch_growth;
    b_star / (f64::from(output_len - 1) * tpot_limit_ms / 1000.0)
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-slo-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Every probe is a real rate level, judged from the same records the session folded: the
/// search's verdict and the level's own SLO check are the same numbers.
fn probes_are_rate_levels(
    session: &servetop::run::session::Session,
    s: &servetop::workload::search::SearchSummary,
    truth: f64,
) {
    let (pass, fail) = (s.pass_rate.unwrap(), s.fail_rate.unwrap());
    assert_eq!(session.summary.rates.len(), s.probes.len());
    for p in &s.probes {
        let l = session.summary.level(p.level).unwrap();
        assert_eq!(l.request_rate(), p.at.rate());
        assert_eq!(l.slo.as_ref(), p.check.as_ref(), "probe {}", p.step);
        let c = p.check.as_ref().unwrap();
        assert_eq!(
            c.requests,
            u64::from(p.requests),
            "no failures, nothing lost"
        );
        // Far above the edge the verdict is a certain fail (a simulator slowed by a busy
        // machine serves less, never more); below it, what the server did decides
        // ([`verdicts_are_the_servers`]).
        if p.at.value() > 1.1 * truth {
            assert!(!c.meets && c.certain, "probe at {} req/s", p.at.value());
        }
        // Bisection: a pass is at or below the answer, a fail at or above the bracket's top.
        if c.meets {
            assert!(p.at.value() <= pass);
        } else {
            assert!(p.at.value() >= fail);
        }
    }
}

/// Each probe's TPOT p90 is the p90 of the server's own per-request TPOTs (its frames' span over
/// the tokens after the first, `tests/sim_truth`), and wherever that is clearly on one side of
/// the limit the probe's verdict says so: the search judged what the server did, whatever the
/// machine's load did to the server.
fn verdicts_are_the_servers(
    session: &servetop::run::session::Session,
    s: &servetop::workload::search::SearchSummary,
    truth: &servetop::sim::SimTruth,
) {
    // A request's TPOT moves by at most twice the delivery tolerance over its decode tokens.
    let tol = 2.0 * (sim_truth::TOL_MS + 1.0) / f64::from(OUTPUT_LEN - 1);
    for p in &s.probes {
        let l = session.summary.level(p.level).unwrap();
        let got = l
            .stats
            .as_ref()
            .unwrap()
            .dists
            .tpot_ms
            .as_ref()
            .unwrap()
            .p90;
        let server: Vec<f64> = sim_truth::of_level(truth, p.level)
            .into_iter()
            .filter_map(sim_truth::server_tpot_ms)
            .collect();
        assert_eq!(server.len(), p.requests as usize, "probe {}", p.step);
        let want = sim_truth::nearest_rank(&server, 90.0);
        assert!(
            (got - want).abs() <= tol + want * 1e-3,
            "probe {} at {:.3} req/s: TPOT p90 {got:.3} ms, the server's {want:.3} ms (± {tol:.3})",
            p.step,
            p.at.value()
        );
        let c = p.check.as_ref().unwrap();
        if want < TPOT_LIMIT_MS - tol {
            assert!(
                c.meets,
                "probe {}: the server met the limit ({want:.3} ms)",
                p.step
            );
        } else if want > TPOT_LIMIT_MS + tol {
            assert!(
                !c.meets,
                "probe {}: the server missed the limit ({want:.3} ms)",
                p.step
            );
        }
    }
}

/// One line a probe, for the log of a failed run.
fn print_probes(s: &servetop::workload::search::SearchSummary) {
    for p in &s.probes {
        let c = p.check.as_ref().unwrap();
        eprintln!(
            "probe {} · {:.3} req/s (sent {:.2}) · goodput {:.2} · {} · {}",
            p.step,
            p.at.value(),
            p.achieved_request_rate.unwrap_or(f64::NAN),
            p.goodput.unwrap_or(f64::NAN),
            c.verdict(),
            c.describe()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_search_finds_the_tpot_capacity_within_its_precision() {
    let _serial = SERIAL.lock().await;
    let simc = sim_config();
    let truth = expected_rate(&simc, OUTPUT_LEN, TPOT_LIMIT_MS);
    assert!((truth - 21.875).abs() < 1e-9, "{truth}");
    let h = sim::start(simc, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let precision = 0.05;
    let cfg = RunConfig {
        concurrency: vec![],
        input_len: 100,
        output_len: OUTPUT_LEN,
        open_loop: OpenLoop {
            burstiness: 1000.0,
            ..OpenLoop::default()
        },
        slo: Some(Slo {
            tpot_ms: Some(TPOT_LIMIT_MS),
            percentile: 90.0,
            ..Slo::default()
        }),
        search: Some(SearchConfig {
            precision: Precision::Relative(precision),
            // Three seconds' worth per probe, at least 40 requests: ~60 requests near λ*.
            probe_seconds: 3.0,
            min_requests: 40,
            probe_concurrency: 32,
            ..SearchConfig::rate()
        }),
        grace_s: 0.5,
        seed: 7,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        no_metrics: true,
        server_wait_s: 5.0,
        ..RunConfig::minimal(&h.url())
    };
    cfg.validate().unwrap();
    let dir = temp_dir("tpot");
    let started = std::time::Instant::now();
    let (state, session) = servetop::run::run_headless(cfg, Some(dir.clone()))
        .await
        .unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    let s = session.summary.search.as_ref().expect("a search section");
    print_probes(s);
    eprintln!(
        "{} · expected {truth:.3} req/s · {:.1} s",
        s.headline(),
        started.elapsed().as_secs_f64()
    );

    // The answer: converged, within its stated precision of the true capacity.
    assert_eq!(s.status, SearchStatus::Converged);
    let (pass, fail) = (s.pass_rate.unwrap(), s.fail_rate.unwrap());
    assert!(s.precision.satisfied(pass, fail), "[{pass}, {fail}]");
    // What the server did decides each probe (its own record); the simulator must not have
    // been starved. The configured capacity bounds the answer from above (a simulator slowed
    // by a busy machine serves less, never more) and, loosely, from below.
    let record = sim_truth::of(&h);
    sim_truth::guard(&record, started.elapsed().as_secs_f64());
    verdicts_are_the_servers(&session, s, &record);
    assert!(
        pass <= truth * (1.0 + precision) && pass >= 0.75 * truth,
        "answer {pass:.3} req/s, true {truth:.3} (bracket [{pass:.3}, {fail:.3}])"
    );

    // The bound came from a measurement: the closed-loop probe's completed requests/s.
    let tp = s.throughput_probe.as_ref().unwrap();
    let bound = tp.request_throughput.unwrap();
    let probe_level = session.summary.level(tp.level).unwrap();
    let measured = probe_level
        .stats
        .as_ref()
        .unwrap()
        .scalars
        .request_throughput;
    assert!((bound - measured).abs() < 1e-9);
    assert!((s.probes[0].at.value() - bound).abs() < 1e-9);

    probes_are_rate_levels(&session, s, truth);

    // The files carry it: results.json's search section and summary.md's table.
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["search"]["status"], "converged");
    assert_eq!(v["search"]["pass_rate"].as_f64(), Some(pass));
    assert_eq!(
        v["search"]["probes"].as_array().unwrap().len(),
        s.probes.len()
    );
    assert_eq!(v["config"]["search"]["probe_seconds"], 3.0);
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("## SLO capacity search"), "{md}");
    assert!(md.contains(&s.headline()), "{md}");
    let files =
        servetop::export::report::export_run(&dir, &session.summary, &[], (800, 450)).unwrap();
    assert!(files.iter().any(|f| f.ends_with("charts/slo_search.png")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_stopped_part_way_says_so_and_keeps_what_it_measured() {
    let _serial = SERIAL.lock().await;
    use servetop::export::RunFiles;
    use servetop::run::run_prepared;
    use servetop::summary::RunSummary;
    use tokio_util::sync::CancellationToken;

    let h = sim::start(sim_config(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let dir = temp_dir("stopped");
    let cfg = RunConfig {
        concurrency: vec![],
        input_len: 100,
        output_len: OUTPUT_LEN,
        slo: Some(Slo {
            tpot_ms: Some(TPOT_LIMIT_MS),
            ..Slo::default()
        }),
        search: Some(SearchConfig {
            probe_seconds: 2.0,
            min_requests: 20,
            probe_concurrency: 16,
            ..SearchConfig::rate()
        }),
        grace_s: 0.2,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        no_metrics: true,
        out_dir: dir.clone(),
        ..RunConfig::minimal(&h.url())
    };
    let prepared = servetop::runner::prepare(&cfg, None).await.unwrap();
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    // Stop half a second into the first rate probe: results.json lists it as soon as the
    // search plans it (the throughput probe is over by then).
    let watch = dir.join("results.json");
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let planned = std::fs::read(&watch)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v["search"]["probes"].as_array().map(|p| !p.is_empty()))
                .unwrap_or(false);
            if planned {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        c.cancel();
    });
    let (state, session) = run_prepared(
        &cfg,
        prepared,
        RunSummary::new(cfg.clone(), None),
        servetop::run::sink::Sink::new(Some(RunFiles::create(&dir).unwrap())),
        true,
        cancel,
    )
    .await;
    assert_eq!(state, RunState::Interrupted);
    let s = session.summary.search.as_ref().unwrap();
    assert_eq!(s.status, SearchStatus::Stopped, "{}", s.headline());
    assert!(
        s.throughput_probe
            .as_ref()
            .unwrap()
            .request_throughput
            .is_some()
    );
    // The probe that was cut short is on file, marked, and decides nothing.
    let last = s.probes.last().expect("the first rate probe had started");
    assert!(last.interrupted, "{last:?}");
    assert_eq!(last.verdict(), "interrupted");
    assert_eq!((s.pass_rate, s.fail_rate), (None, None));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(v["search"]["status"], "stopped");
    assert_eq!(v["rates"][0]["status"], "interrupted");
    let _ = std::fs::remove_dir_all(&dir);
}
