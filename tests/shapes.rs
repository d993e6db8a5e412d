//! Shape grids (`--shapes IN/OUT,…`) against the in-process simulator, whose record of each
//! request (its prompt's tokens as it counted them, the tokens it wrote) is the known answer:
//! every level of a shape's pass sent exactly the shape's lengths, the sweep holds one level per
//! shape and concurrency in shape order, and the outputs give each shape as a series of its own.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::summary::LevelSummary;
use servetop::workload::RequestCount;
use servetop::workload::shapes::Shape;

mod sim_run;
mod sim_truth;

#[test]
fn every_level_of_a_shape_has_its_lengths_exactly() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = servetop::sim::start(
            sim_run::steady_config(1.0),
            SocketAddr::from(([127, 0, 0, 1], 0)),
        )
        .await
        .unwrap();
        let shapes = Shape::parse_list("300/24,1200/40,150/64").unwrap();
        let dir = sim_run::temp_run_dir("shapes");
        let cfg = RunConfig {
            api_key_env: "SERVETOP_TEST_NO_KEY".into(),
            warmup_requests: 0,
            concurrency: vec![1, 3],
            requests_per_level: RequestCount::Fixed(6),
            long_context: vec![900],
            long_context_output_len: 16,
            long_context_repeats: 2,
            shapes: shapes.clone(),
            ..RunConfig::minimal(&h.url())
        };
        let session = sim_run::finished_into(cfg, &dir).await;
        let truth = sim_truth::of(&h);
        let sweep = &session.summary.sweep;
        let labels: Vec<String> = sweep.iter().map(LevelSummary::label).collect();
        assert_eq!(
            labels,
            [
                "C=1 · 300/24",
                "C=3 · 300/24",
                "C=1 · 1200/40",
                "C=3 · 1200/40",
                "C=1 · 150/64",
                "C=3 · 150/64"
            ]
        );
        for (l, shape) in sweep.iter().zip(shapes.iter().flat_map(|s| [s, s])) {
            assert_eq!(
                (l.input_len, l.output_len),
                (shape.input_len, shape.output_len)
            );
            assert_eq!(l.shape, Some(*shape));
            let server = sim_truth::of_level(&truth, l.index);
            assert_eq!(server.len(), 6, "{}", l.label());
            for t in &server {
                assert_eq!(t.prompt_tokens, shape.input_len, "{:?}", t.request_id);
                assert_eq!(
                    t.tokens(),
                    u64::from(shape.output_len),
                    "{:?}",
                    t.request_id
                );
            }
        }
        // The ladder runs once, after every shape's sweep, with its own lengths.
        let ladder = &session.summary.long_context;
        assert_eq!(ladder.len(), 1);
        assert_eq!((ladder[0].input_len, ladder[0].shape), (900, None));
        assert_eq!(ladder[0].index, 6);
        // A series per shape, the first the headline.
        let passes = session.summary.passes();
        let series: Vec<&str> = passes.series().iter().map(|p| p.label.as_str()).collect();
        assert_eq!(series, ["300/24", "1200/40", "150/64"]);
        assert!(passes.headline().holds(&ladder[0]));
        // The files: each level's shape and lengths, the plan line, the table.
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(results["config"]["shapes"][1], "1200/40");
        assert_eq!(results["sweep"][3]["shape"], "1200/40");
        assert_eq!(results["sweep"][3]["input_len"], 1200);
        assert_eq!(results["sweep"][3]["output_len"], 40);
        let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
        assert!(
            summary.contains("## Concurrency sweep (shapes 300/24, 1200/40, 150/64 in/out tokens)"),
            "{summary}"
        );
        assert!(summary.contains("| 3 | 1200/40 | 6 |"), "{summary}");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
            .args([
                "run",
                "--base-url",
                &h.url(),
                "--dry-run",
                "--long-context",
                "none",
            ])
            .args(["--concurrency", "1,3", "--shapes", "300/24,1200/40,150/64"])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        let plan = out.lines().find(|l| l.starts_with("plan: ")).unwrap();
        assert!(
            plan.contains("plan: 6 levels")
                && plan.contains("each of the shapes 300/24, 1200/40, 150/64 in/out tokens"),
            "{plan}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// `--shape-mix` (each request draws a shape by weight) and `--length-dist lognormal:S`: every
/// request the simulator read had the lengths servetop drew for it (the plan's own draw for that
/// request, worked out here), a mix's shapes came in their shares within sampling bounds, and
/// log-normal lengths stayed within 3σ with their median near the level's.
#[test]
fn drawn_lengths_are_the_ones_each_request_had() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = servetop::sim::start(
            sim_run::steady_config(0.2),
            SocketAddr::from(([127, 0, 0, 1], 0)),
        )
        .await
        .unwrap();
        let base = RunConfig {
            api_key_env: "SERVETOP_TEST_NO_KEY".into(),
            warmup_requests: 0,
            concurrency: vec![4],
            requests_per_level: RequestCount::Fixed(200),
            long_context: vec![],
            seed: 11,
            ..RunConfig::minimal(&h.url())
        };
        let mixed = RunConfig {
            shape_mix: servetop::workload::shapes::WeightedShape::parse_list("400/8:3,1600/4:1")
                .unwrap(),
            ..base.clone()
        };
        let spread = RunConfig {
            input_len: 600,
            output_len: 12,
            lognormal_sigma: Some(0.4),
            ..base
        };
        for cfg in [mixed, spread] {
            let before = sim_truth::of(&h).requests.len();
            let spec = cfg.levels().remove(0);
            let session = sim_run::finished(cfg.clone()).await;
            let truth = sim_truth::of(&h);
            let ours = &truth.requests[before..];
            assert_eq!(ours.len(), 200);
            let mut inputs = Vec::new();
            for t in ours {
                let id = t.request_id.as_deref().unwrap();
                let i: u32 = id.rsplit('-').next().unwrap().parse().unwrap();
                let (input, output) = spec.request_lengths(11, i);
                assert_eq!(t.prompt_tokens, input, "{id}");
                assert_eq!(t.tokens(), u64::from(output), "{id}");
                inputs.push(input);
            }
            let st = session.summary.sweep[0].stats.as_ref().unwrap();
            assert_eq!(
                st.scalars.total_input_tokens,
                inputs.iter().sum::<u64>(),
                "the level's tokens are the requests'"
            );
            if cfg.shape_mix.is_empty() {
                let (lo, hi) = servetop::workload::mix::lognormal_bounds(600, 0.4, 1);
                assert!(inputs.iter().all(|x| (lo..=hi).contains(x)));
                inputs.sort_unstable();
                // The median of 200 log-normal draws (σ 0.4) lies within 4 standard errors
                // (1.2533·0.4·600/√200 ≈ 21 tokens) of the level's 600.
                assert!((inputs[100] as f64 - 600.0).abs() < 85.0, "{}", inputs[100]);
                assert!(inputs[0] < 450 && inputs[199] > 800, "{inputs:?}");
            } else {
                assert!(inputs.iter().all(|&x| x == 400 || x == 1600));
                let long = inputs.iter().filter(|&&x| x == 1600).count() as f64;
                // A binomial count of 200 draws at 1/4: within 4 standard deviations (6.1).
                assert!((long - 50.0).abs() < 4.0 * 6.13, "{long}");
                // The level plans the weighted means.
                assert_eq!((spec.input_tokens, spec.output_tokens), (700, 7));
            }
        }
    });
}
