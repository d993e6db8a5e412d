//! Natural stops (`--natural-stop`) against the in-process simulator, whose own record of each
//! request is the known answer: with `--natural-len` it ends an answer sent without
//! `ignore_eos` at a length drawn for it, and says where (`natural_stop_at`).
//!
//! - Each answer's length and finish reason are the simulator's: its tokens, `stop` where the
//!   simulator ended it, `length` where it ran to the cap; each level's counts of both and its
//!   median length are those of the record.
//! - The same simulator runs every answer to the cap when servetop sends `ignore_eos` (the
//!   default): nothing is reported as a natural stop then.
//! - The `natural_stop` finding, on random shapes (the simulator's median answer from 0.15 to 2
//!   times the cap, in three bands, so every verdict is met): its medians, its count at the
//!   cap, and its verdict (far short, mostly at the cap, or neither) are those the record gives.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::float_cmp)]

use std::net::SocketAddr;

use servetop::config::{BackendChoice, RunConfig};
use servetop::metrics::Finish;
use servetop::sim::{self, SimHandle, SimRequestTrace};
use servetop::workload::RequestCount;

use draw::Draw;

mod draw;
mod sim_run;
mod sim_truth;

async fn start(natural_len: u64, seed: u64) -> SimHandle {
    let mut c = sim_run::steady_config(0.5);
    c.natural_len = natural_len;
    c.seed = seed;
    sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

fn config(url: &str, natural_stop: bool) -> RunConfig {
    RunConfig {
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        warmup_requests: 0,
        concurrency: vec![1, 4],
        output_len: 64,
        requests_per_level: RequestCount::Fixed(24),
        natural_stop,
        ..RunConfig::minimal(url)
    }
}

/// Where the simulator ended an answer itself.
fn ended_by_model(t: &SimRequestTrace) -> bool {
    t.natural_stop_at.is_some()
}

#[test]
fn each_answer_ends_where_the_simulator_ended_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start(40, 7).await;
        let dir = sim_run::temp_run_dir("natural-stop");
        let session = sim_run::finished_into(config(&h.url(), true), &dir).await;
        let truth = sim_truth::of(&h);
        let by_id = sim_truth::by_id(&truth);
        let (records, _) = sim_truth::run_records(&dir);
        assert_eq!(records.len(), 48);
        for r in &records {
            let t = by_id[sim_truth::id_of(r).as_str()];
            assert_eq!(r.output_tokens, t.tokens(), "{}", sim_truth::id_of(r));
            assert_eq!(t.max_tokens, 64, "the cap was asked for");
            let want = if ended_by_model(t) {
                assert_eq!(t.natural_stop_at, Some(t.tokens()));
                assert!(t.tokens() < 64);
                Finish::Stop
            } else {
                assert_eq!(t.tokens(), 64);
                Finish::Length
            };
            assert_eq!(r.finish, Some(want), "{}", sim_truth::id_of(r));
        }
        // Both kinds of ending happened (the draws are fixed by the simulator's seed).
        assert!(
            by_id.values().any(|t| ended_by_model(t)) && by_id.values().any(|t| !ended_by_model(t)),
            "a median of 40 against a cap of 64 ends some answers and caps others"
        );
        for (i, l) in session.summary.sweep.iter().enumerate() {
            let server = sim_truth::of_level(&truth, i as u32);
            let st = l.stats.as_ref().unwrap();
            let stopped = server.iter().filter(|t| ended_by_model(t)).count() as u64;
            assert_eq!(st.scalars.ended_by_model, Some(stopped), "{}", l.label());
            assert_eq!(
                st.scalars.reached_output_cap,
                Some(server.len() as u64 - stopped),
                "{}",
                l.label()
            );
            let lengths: Vec<f64> = server.iter().map(|t| t.tokens() as f64).collect();
            let d = st.dists.output_tokens_per_request.as_ref().unwrap();
            assert_eq!(
                d.p50,
                sim_truth::nearest_rank(&lengths, 50.0),
                "{}",
                l.label()
            );
            assert_eq!(
                d.max,
                lengths.iter().copied().fold(0.0, f64::max),
                "{}",
                l.label()
            );
        }
        // The files say it: the configuration, the plan line, the table.
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(results["config"]["natural_stop"], true);
        assert!(results["sweep"][0]["reached_output_cap"].is_u64());
        let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        assert!(
            summary.contains("## Answer lengths (natural stops)"),
            "{summary}"
        );
        // The plan says so before the run (`--dry-run` prints it and sends nothing).
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
            .args(["run", "--base-url", &h.url(), "--natural-stop", "--dry-run"])
            .args(["--long-context", "none", "--concurrency", "1"])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        let plan = out.lines().find(|l| l.starts_with("plan: ")).unwrap();
        assert!(
            plan.contains("; natural stops (each output length a cap"),
            "{plan}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}

#[test]
fn with_ignore_eos_every_answer_runs_to_the_cap() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        // A simulator that ends answers early when allowed, sent the default: ignore_eos.
        let h = start(10, 7).await;
        for backend in [BackendChoice::Openai, BackendChoice::Sglang] {
            let cfg = RunConfig {
                concurrency: vec![2],
                requests_per_level: RequestCount::Fixed(8),
                backend,
                ..config(&h.url(), false)
            };
            let session = sim_run::finished(cfg).await;
            let st = session.summary.sweep[0].stats.as_ref().unwrap();
            assert_eq!(st.scalars.total_output_tokens, 8 * 64, "{backend:?}");
            assert_eq!(st.scalars.reached_output_cap, None);
            assert!(
                !session
                    .summary
                    .findings
                    .iter()
                    .any(|f| f.id == "natural_stop"),
                "{backend:?}"
            );
        }
        assert!(
            sim_truth::of(&h)
                .requests
                .iter()
                .all(|t| !ended_by_model(t))
        );
        // SGLang's own endpoint with natural stops: its finish reason object says `stop`.
        let cfg = RunConfig {
            concurrency: vec![2],
            requests_per_level: RequestCount::Fixed(8),
            backend: BackendChoice::Sglang,
            ..config(&h.url(), true)
        };
        let session = sim_run::finished(cfg).await;
        let st = session.summary.sweep[0].stats.as_ref().unwrap();
        let truth = sim_truth::of(&h);
        let stopped = truth.requests.iter().filter(|t| ended_by_model(t)).count() as u64;
        assert!(stopped > 0, "a median of 10 against 64 ends answers");
        assert_eq!(st.scalars.ended_by_model, Some(stopped));
        assert_eq!(
            st.scalars.total_output_tokens,
            truth
                .requests
                .iter()
                .rev()
                .take(8)
                .map(SimRequestTrace::tokens)
                .sum::<u64>()
        );
    });
}

/// One shape: the simulator's median answer and seed, the cap, the concurrencies.
struct Shape {
    natural_len: u64,
    cap: u32,
    seed: u64,
    concurrency: Vec<u64>,
}

impl Shape {
    fn draw(seed: u64) -> Self {
        let mut d = Draw(seed);
        let cap = d.pick(&[32u32, 64, 100]);
        // The median against the cap from one of three bands in turn, so the shapes meet
        // every verdict (far short, neither, mostly at the cap); the verdict each gets is
        // computed from the simulator's record, not from its band.
        let (lo, hi) = [(0.15, 0.45), (0.55, 0.95), (1.1, 2.0)][(seed % 3) as usize];
        let natural_len = (f64::from(cap) * d.range(lo, hi)).round().max(1.0) as u64;
        let concurrency = if d.unit() < 0.5 { vec![1, 4] } else { vec![2] };
        Self {
            natural_len,
            cap,
            seed,
            concurrency,
        }
    }
}

#[test]
fn the_finding_is_the_records_on_random_shapes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let seeds: Vec<u64> = std::env::var("SERVETOP_SHAPES").map_or_else(
        |_| (1..=10).collect(),
        |s| s.split(',').map(|x| x.trim().parse().unwrap()).collect(),
    );
    let mut verdicts = [0usize; 3];
    for seed in seeds {
        let shape = Shape::draw(seed);
        rt.block_on(async {
            let h = start(shape.natural_len, shape.seed).await;
            let cfg = RunConfig {
                concurrency: shape.concurrency.clone(),
                output_len: shape.cap,
                requests_per_level: RequestCount::Fixed(16),
                seed,
                ..config(&h.url(), true)
            };
            let session = sim_run::finished(cfg).await;
            let truth = sim_truth::of(&h);
            let cap = f64::from(shape.cap);
            let (mut at_cap, mut done) = (0u64, 0u64);
            let mut medians = Vec::new();
            for i in 0..shape.concurrency.len() {
                let server = sim_truth::of_level(&truth, i as u32);
                let lengths: Vec<f64> = server.iter().map(|t| t.tokens() as f64).collect();
                medians.push(sim_truth::nearest_rank(&lengths, 50.0));
                let capped = server.iter().filter(|t| !ended_by_model(t)).count() as u64;
                at_cap += capped;
                done += server.len() as u64;
            }
            let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = medians.iter().copied().fold(0.0, f64::max);
            let far = hi < 0.5 * cap;
            // `mostly` is over every cap's answers together; one cap here, so over all levels.
            let mostly = !far && at_cap as f64 > 0.5 * done as f64;
            let f = session
                .summary
                .findings
                .iter()
                .find(|f| f.id == "natural_stop")
                .unwrap_or_else(|| panic!("seed {seed}: no natural_stop finding"));
            let v = &f.values;
            let what = format!(
                "seed {seed} (median {} of cap {}): {}",
                shape.natural_len, shape.cap, f.text
            );
            assert_eq!(v["reached_output_cap"], at_cap as f64, "{what}");
            assert_eq!(v["completed"], done as f64, "{what}");
            assert!((v["median_share_min"] - lo / cap).abs() < 1e-12, "{what}");
            assert!((v["median_share_max"] - hi / cap).abs() < 1e-12, "{what}");
            assert_eq!(v["far_short"], f64::from(u8::from(far)), "{what}");
            assert_eq!(v["mostly_capped"], f64::from(u8::from(mostly)), "{what}");
            assert_eq!(f.text.contains("far short of the cap"), far, "{what}");
            assert_eq!(f.text.contains("Most reached the cap"), mostly, "{what}");
            assert!(
                f.text
                    .contains(&format!("{at_cap} of {done} reaching the cap")),
                "{what}"
            );
            verdicts[if far {
                0
            } else if mostly {
                1
            } else {
                2
            }] += 1;
        });
    }
    eprintln!(
        "verdicts over the shapes: far short {}, mostly at the cap {}, neither {}",
        verdicts[0], verdicts[1], verdicts[2]
    );
}
