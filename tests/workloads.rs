//! Known answers for the workloads beyond fixed-length text, against the in-process simulator:
//! what the simulator received is the independent answer each figure is checked against.
//!
//! Length spreads (`--range-ratio`): each request's input and output lengths are drawn
//! uniformly from `[⌊(1−R)·L⌋, ⌈(1+R)·L⌉]`; the simulator's record of every request says what
//! it was asked for, and results.json's per-request length figures must match that record.
//!
//! LoRA mixes (`--lora-modules`): every request names the adapter its distribution dealt it and
//! the simulator got that name; each adapter's median TTFT is the simulator's record of its
//! requests, and an adapter the simulator makes cost 40 ms shows it.
//!
//! Structured output (`--response-format`): each level runs twice, plain then constrained; the
//! simulator adds a stated time to each step carrying a constrained request, and the TPOT
//! servetop adds to the constrained twin is the one the simulator's record shows; answers are
//! the schema's instance (all comply) unless the output limit cuts them (none do).

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::float_cmp)]

use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::sim::{self, SimHandle};
use servetop::workload::RequestCount;

mod sim_run;
mod sim_truth;

async fn start() -> SimHandle {
    sim::start(
        sim_run::steady_config(1.0),
        SocketAddr::from(([127, 0, 0, 1], 0)),
    )
    .await
    .expect("simulator starts")
}

fn config(url: &str) -> RunConfig {
    RunConfig {
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        warmup_requests: 0,
        ..RunConfig::minimal(url)
    }
}

/// Mean and sample standard deviation.
/// The run's finding `id`; it must have one.
fn finding<'a>(
    session: &'a servetop::run::session::Session,
    id: &str,
) -> &'a servetop::summary::findings::Finding {
    session
        .summary
        .findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} finding in {:#?}", session.summary.findings))
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[test]
fn a_range_ratio_sends_lengths_with_the_stated_mean_and_spread() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start().await;
        // 400 requests of 400 ± 50 % input and 20 ± 50 % output tokens, over the completions
        // endpoint (no template tokens: the simulator counts the prompt alone).
        let cfg = RunConfig {
            concurrency: vec![16],
            input_len: 400,
            output_len: 20,
            range_ratio: Some(0.5),
            requests_per_level: RequestCount::Fixed(400),
            seed: 11,
            backend: servetop::config::BackendChoice::Openai,
            ..config(&h.url())
        };
        let session = sim_run::finished(cfg).await;
        let truth = sim_truth::of(&h);
        let got = sim_truth::of_level(&truth, 0);
        assert_eq!(got.len(), 400);
        let inputs: Vec<f64> = got.iter().map(|r| r.prompt_tokens as f64).collect();
        let outputs: Vec<f64> = got.iter().map(|r| r.max_tokens as f64).collect();
        // Uniform over 200..=600: mean 400, standard deviation √((401² − 1)/12) = 115.76; the
        // mean of 400 draws has a standard error of 5.8 (four of them: 23), a sample standard
        // deviation of about 3.3 (four: 13).
        let (mean, std) = mean_std(&inputs);
        assert!((mean - 400.0).abs() < 23.0, "input mean {mean}");
        assert!((std - 115.76).abs() < 13.0, "input std {std}");
        assert!(inputs.iter().all(|&x| (200.0..=600.0).contains(&x)));
        // Uniform over 10..=30: mean 20, standard deviation √((21² − 1)/12) = 6.06.
        let (mean, std) = mean_std(&outputs);
        assert!((mean - 20.0).abs() < 1.2, "output mean {mean}");
        assert!((std - 6.06).abs() < 0.7, "output std {std}");
        assert!(outputs.iter().all(|&x| (10.0..=30.0).contains(&x)));

        // results.json's figures are those of what the server received, exactly.
        let level = session.summary.levels().next().unwrap();
        assert_eq!(level.range_ratio, Some(0.5));
        let d = &level.stats.as_ref().unwrap().dists;
        let sent = d.input_tokens_per_request.as_ref().unwrap();
        let (mean, std) = mean_std(&inputs);
        // (results.json's standard deviations are the population's, over n.)
        let n = inputs.len() as f64;
        let population_std = std * ((n - 1.0) / n).sqrt();
        assert!((sent.mean - mean).abs() < 1e-9, "{} vs {mean}", sent.mean);
        assert!(
            (sent.std - population_std).abs() < 1e-6,
            "{} vs {population_std}",
            sent.std
        );
        let lo = inputs.iter().copied().fold(f64::MAX, f64::min);
        let hi = inputs.iter().copied().fold(0.0, f64::max);
        assert_eq!((sent.min, sent.max), (lo, hi));
        let out = d.output_tokens_per_request.as_ref().unwrap();
        assert!((out.mean - mean_std(&outputs).0).abs() < 1e-9);
    });
}

#[test]
fn the_same_seed_sends_the_same_lengths_at_every_level() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start().await;
        let cfg = RunConfig {
            concurrency: vec![1, 4],
            input_len: 300,
            output_len: 8,
            range_ratio: Some(0.3),
            requests_per_level: RequestCount::Fixed(12),
            seed: 5,
            backend: servetop::config::BackendChoice::Openai,
            ..config(&h.url())
        };
        sim_run::finished(cfg).await;
        let truth = sim_truth::of(&h);
        let lengths = |level: u32| {
            let mut by_index: Vec<(u32, u64, u64)> = sim_truth::of_level(&truth, level)
                .iter()
                .map(|r| {
                    let id = r.request_id.as_deref().unwrap();
                    let i: u32 = id.rsplit('-').next().unwrap().parse().unwrap();
                    (i, r.prompt_tokens, r.max_tokens)
                })
                .collect();
            by_index.sort_unstable();
            by_index
        };
        let (a, b) = (lengths(0), lengths(1));
        assert_eq!(a.len(), 12);
        assert_eq!(a, b, "level 1 sent other lengths than level 0");
        let distinct: std::collections::BTreeSet<u64> = a.iter().map(|x| x.1).collect();
        assert!(distinct.len() > 6, "the lengths are spread: {a:?}");
    });
}

/// A simulator serving adapters `a`, `b` and `slow`, whose every request costs 40 ms of engine
/// time at its prefill.
async fn start_with_adapters() -> SimHandle {
    let mut c = sim_run::steady_config(1.0);
    c.lora = ["a", "b", "slow"]
        .into_iter()
        .map(|name| servetop::sim::SimLora {
            name: name.into(),
            switch_ms: if name == "slow" { SWITCH_MS } else { 0.0 },
        })
        .collect();
    sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

/// The simulator's stated cost of an adapter's request.
const SWITCH_MS: f64 = 40.0;

fn adapters() -> Vec<String> {
    ["a", "b", "slow"].map(String::from).to_vec()
}

#[test]
fn per_adapter_figures_match_the_server_and_show_the_switch_cost() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start_with_adapters().await;
        let dir = sim_run::temp_run_dir("lora");
        let cfg = RunConfig {
            concurrency: vec![1, 3],
            input_len: 50,
            output_len: 10,
            lora_modules: adapters(),
            lora_dist: servetop::workload::mix::LoraDist::RoundRobin,
            requests_per_level: RequestCount::Fixed(24),
            ..config(&h.url())
        };
        let session = sim_run::finished_into(cfg, &dir).await;
        let truth = sim_truth::of(&h);
        let (records, origins) = sim_truth::run_records(&dir);
        let ids = sim_truth::by_id(&truth);
        // Each request named the adapter round-robin dealt it, and the server got that name.
        for r in records.iter().filter(|r| !r.warmup) {
            let want = ["a", "b", "slow"][r.index as usize % 3];
            assert_eq!(r.lora.as_deref(), Some(want), "request {}", r.index);
            let s = ids[sim_truth::id_of(r).as_str()];
            assert_eq!(s.lora.as_deref(), Some(want));
        }
        let server_ttft = sim_truth::server_seen_ttft_ms(&records, &origins, &truth);
        let ok: Vec<_> = records.iter().filter(|r| r.is_ok() && !r.warmup).collect();
        for level in session.summary.levels() {
            let by = &level.stats.as_ref().unwrap().scalars.lora;
            assert_eq!(by.keys().cloned().collect::<Vec<_>>(), adapters());
            for (name, s) in by {
                assert_eq!((s.completed, s.failed), (8, 0), "{name}");
                assert!((s.share - 1.0 / 3.0).abs() < 1e-12);
                // Its median TTFT is the server's record of its requests' first frames.
                let mut theirs: Vec<f64> = ok
                    .iter()
                    .zip(&server_ttft)
                    .filter(|(r, _)| r.level == level.index && r.lora.as_deref() == Some(name))
                    .map(|(_, t)| *t)
                    .collect();
                theirs.sort_by(f64::total_cmp);
                let want = sim_truth::nearest_rank(&theirs, 50.0);
                let got = s.median_ttft_ms.unwrap();
                assert!(
                    (got - want).abs() <= sim_truth::MEDIAN_TOL_MS + want * 1e-3,
                    "{} {name}: median TTFT {got} ms, the server's record {want} ms",
                    level.label()
                );
            }
            // One at a time, the slow adapter's first tokens come its stated cost later.
            if level.concurrency == 1 {
                let (slow, a) = (
                    by["slow"].median_ttft_ms.unwrap(),
                    by["a"].median_ttft_ms.unwrap(),
                );
                assert!(
                    slow - a >= SWITCH_MS - sim_truth::MEDIAN_TOL_MS,
                    "slow {slow} ms against a {a} ms"
                );
            }
        }
        // The lora finding: at C=1, slow's first token its stated cost after the fastest's,
        // the figures the level's own; prompts alike (no spread), so not confounded.
        let f = finding(&session, "lora");
        assert_eq!(f.levels, ["C=1"], "{f:?}");
        let by = &session.summary.sweep[0]
            .stats
            .as_ref()
            .unwrap()
            .scalars
            .lora;
        for name in adapters() {
            assert_eq!(
                f.values[&format!("ttft_p50_ms_{name}")],
                by[&name].median_ttft_ms.unwrap()
            );
        }
        assert!(f.text.contains("slow's first token comes"), "{}", f.text);
        assert!(
            f.strength < servetop::summary::findings::Strength::Confounded,
            "{f:?}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// Adapters sent spread lengths (`--range-ratio 0.5`): dealt round-robin, every adapter gets
/// the same draws, so their mean prompts (the server's own count) are equal and the lora
/// finding compares like with like; drawn uniformly, their means are whatever the draws gave,
/// and the finding is confounded exactly when the server's record shows them over 10 % apart.
#[test]
fn adapters_dealt_spread_lengths_compare_like_with_like_or_say_they_do_not() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        for dist in [
            servetop::workload::mix::LoraDist::RoundRobin,
            servetop::workload::mix::LoraDist::Uniform,
        ] {
            let h = start_with_adapters().await;
            let cfg = RunConfig {
                concurrency: vec![1],
                input_len: 200,
                output_len: 6,
                range_ratio: Some(0.5),
                lora_modules: adapters(),
                lora_dist: dist,
                requests_per_level: RequestCount::Fixed(12),
                seed: 5,
                ..config(&h.url())
            };
            let session = sim_run::finished(cfg).await;
            let truth = sim_truth::of(&h);
            // Each adapter's mean prompt as the server counted it.
            let mean = |name: &str| {
                let v: Vec<f64> = sim_truth::of_level(&truth, 0)
                    .iter()
                    .filter(|r| r.lora.as_deref() == Some(name))
                    .map(|r| r.prompt_tokens as f64)
                    .collect();
                v.iter().sum::<f64>() / v.len() as f64
            };
            let means: Vec<f64> = adapters().iter().map(|a| mean(a)).collect();
            let (lo, hi) = means
                .iter()
                .fold((f64::MAX, 0.0f64), |(lo, hi), m| (lo.min(*m), hi.max(*m)));
            let f = finding(&session, "lora");
            for (a, m) in adapters().iter().zip(&means) {
                assert!(
                    (f.values[&format!("mean_input_tokens_{a}")] - m).abs() < 1e-9,
                    "{a}: {f:?}"
                );
            }
            let confounded = hi / lo - 1.0 > servetop::summary::findings::INPUT_CONFOUND;
            eprintln!("{}: mean prompts {means:?}", dist.label());
            if dist == servetop::workload::mix::LoraDist::RoundRobin {
                assert_eq!(lo, hi, "round-robin deals every adapter the same draws");
            }
            assert_eq!(
                f.strength == servetop::summary::findings::Strength::Confounded,
                confounded,
                "{f:?}"
            );
        }
    });
}

#[test]
fn sglang_takes_the_adapter_in_lora_path_and_an_unknown_name_is_refused() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start_with_adapters().await;
        let cfg = RunConfig {
            concurrency: vec![2],
            input_len: 40,
            output_len: 4,
            lora_modules: vec!["b".into(), "slow".into()],
            lora_dist: servetop::workload::mix::LoraDist::Zipf(1.0),
            requests_per_level: RequestCount::Fixed(12),
            backend: servetop::config::BackendChoice::Sglang,
            ..config(&h.url())
        };
        sim_run::finished(cfg.clone()).await;
        let truth = sim_truth::of(&h);
        let got = sim_truth::of_level(&truth, 0);
        assert_eq!(got.len(), 12);
        assert!(
            got.iter()
                .all(|r| matches!(r.lora.as_deref(), Some("b" | "slow"))),
            "every /generate request named its adapter in lora_path"
        );
        let wrong = RunConfig {
            lora_modules: vec!["a".into(), "nope".into()],
            ..cfg
        };
        let err = servetop::runner::prepare(&wrong, None).await.err().unwrap();
        assert!(
            err.contains("--lora-modules nope:") && err.contains("does not serve it"),
            "{err}"
        );
    });
}

/// The simulator's stated cost of a decode step carrying a constrained request.
const MASK_MS: f64 = 5.0;

fn schema_file(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("servetop-{name}-{}.json", std::process::id()));
    std::fs::write(
        &p,
        r#"{"type": "object", "properties": {"city": {"type": "string", "minLength": 3}, "days": {"type": "integer", "minimum": 1}}, "required": ["city", "days"]}"#,
    )
    .unwrap();
    p
}

fn schema_format(p: &std::path::Path) -> servetop::client::structured::ResponseFormat {
    servetop::client::structured::ResponseFormat::parse(&[
        "json-schema".into(),
        p.display().to_string(),
    ])
    .unwrap()
}

#[test]
fn structured_output_runs_each_level_twice_and_shows_the_stated_overhead() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = sim_run::steady_config(2.0);
        c.structured_step_ms = MASK_MS;
        let h = sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let schema = schema_file("schema");
        let cfg = RunConfig {
            concurrency: vec![1, 4],
            input_len: 60,
            output_len: 24,
            requests_per_level: RequestCount::Fixed(12),
            response_format: Some(schema_format(&schema)),
            ..config(&h.url())
        };
        let session = sim_run::finished(cfg).await;
        let truth = sim_truth::of(&h);
        let s = &session.summary;
        // C=1, C=1 · json-schema, C=4, C=4 · json-schema.
        let labels: Vec<String> = s
            .sweep
            .iter()
            .map(servetop::summary::LevelSummary::label)
            .collect();
        assert_eq!(
            labels,
            ["C=1", "C=1 · json-schema", "C=4", "C=4 · json-schema"]
        );
        for l in &s.sweep {
            let constrained = l.response_format.is_some();
            let got = sim_truth::of_level(&truth, l.index);
            assert_eq!(got.len(), 12);
            assert!(
                got.iter().all(|r| r.structured == constrained),
                "{}",
                l.label()
            );
            let sc = &l.stats.as_ref().unwrap().scalars;
            if !constrained {
                assert_eq!((sc.schema_checked, sc.schema_valid_share), (0, None));
                continue;
            }
            // Every answer is the schema's instance: all comply.
            assert_eq!((sc.schema_checked, sc.schema_valid_share), (12, Some(1.0)));
            let o = l.structured_overhead.as_ref().unwrap();
            assert_eq!(o.plain_level + 1, l.index);
            // The added TPOT is what the server's own record of the two levels says.
            let server_tpot = |level: u32| {
                let mut v: Vec<f64> = sim_truth::of_level(&truth, level)
                    .iter()
                    .filter_map(|r| sim_truth::server_tpot_ms(r))
                    .collect();
                v.sort_by(f64::total_cmp);
                sim_truth::nearest_rank(&v, 50.0)
            };
            let server_added = server_tpot(l.index) - server_tpot(o.plain_level);
            let added = o.tpot_p50_added_ms.unwrap();
            assert!(
                (added - server_added).abs() <= 2.0 * sim_truth::MEDIAN_TOL_MS,
                "{}: servetop adds {added} ms a token, the server's record {server_added} ms",
                l.label()
            );
            if l.concurrency == 1 {
                assert!(
                    server_added >= MASK_MS - sim_truth::MEDIAN_TOL_MS,
                    "the simulator added {server_added} ms, told {MASK_MS}"
                );
            }
        }
        let f = finding(&session, "structured_output");
        assert!(f.text.contains("100 % of 24 answers comply"), "{}", f.text);
        // The plan's own findings are about the plain levels only.
        assert!(
            s.findings
                .iter()
                .filter(|f| f.id != "structured_output")
                .all(|f| f.levels.iter().all(|l| !l.contains("json-schema")))
        );
        let _ = std::fs::remove_file(&schema);
    });
}

#[test]
fn answers_cut_by_their_output_limit_do_not_comply() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start().await;
        let schema = schema_file("cut");
        // Two tokens (eight characters) cannot hold the schema's smallest instance.
        let cfg = RunConfig {
            concurrency: vec![2],
            input_len: 40,
            output_len: 2,
            requests_per_level: RequestCount::Fixed(6),
            response_format: Some(schema_format(&schema)),
            backend: servetop::config::BackendChoice::OpenaiChat,
            ..config(&h.url())
        };
        let session = sim_run::finished(cfg).await;
        let l = &session.summary.sweep[1];
        let sc = &l.stats.as_ref().unwrap().scalars;
        assert_eq!((sc.schema_checked, sc.schema_valid_share), (6, Some(0.0)));
        let f = session
            .summary
            .findings
            .iter()
            .find(|f| f.id == "structured_output")
            .unwrap();
        assert!(f.text.contains("0.00 % of 6 answers comply"), "{}", f.text);
        let _ = std::fs::remove_file(&schema);
    });
}

/// The simulator's stated engine time an image costs at its prefill.
const IMAGE_MS: f64 = 30.0;

#[test]
fn image_tokens_are_the_servers_count_and_ttft_is_given_per_size() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = sim_run::steady_config(1.0);
        c.image_ms = IMAGE_MS;
        let h = sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let dir = sim_run::temp_run_dir("images");
        // 112x112 is 4·4 = 16 tokens of 28-pixel squares, 280x280 10·10 = 100.
        let cfg = RunConfig {
            concurrency: vec![1],
            input_len: 80,
            output_len: 8,
            images: 2,
            image_sizes: servetop::workload::images::ImageSizes::List(vec![(112, 112), (280, 280)]),
            requests_per_level: RequestCount::Fixed(16),
            seed: 3,
            // The warmup (text only) teaches servetop the chat template's own tokens.
            warmup_requests: 1,
            ..config(&h.url())
        };
        let session = sim_run::finished_into(cfg, &dir).await;
        let truth = sim_truth::of(&h);
        let ids = sim_truth::by_id(&truth);
        let (records, origins) = sim_truth::run_records(&dir);
        let measured: Vec<_> = records.iter().filter(|r| !r.warmup && r.is_ok()).collect();
        assert_eq!(measured.len(), 16);
        for r in &measured {
            let s = ids[sim_truth::id_of(r).as_str()];
            // The image tokens servetop reports are the ones the server counted, exactly.
            assert_eq!(r.image_tokens, Some(s.image_tokens), "request {}", r.index);
            let want = match r.images.as_deref() {
                Some("2×112x112") => 32,
                Some("2×280x280") => 200,
                other => panic!("request {}: images {other:?}", r.index),
            };
            assert_eq!(s.image_tokens, want);
        }
        let sc = &session.summary.sweep[0].stats.as_ref().unwrap().scalars;
        let mean = measured
            .iter()
            .map(|r| r.image_tokens.unwrap())
            .sum::<u64>() as f64
            / 16.0;
        assert!((sc.mean_image_tokens.unwrap() - mean).abs() < 1e-9);
        assert_eq!(
            sc.images.len(),
            2,
            "both sizes drawn: {:?}",
            sc.images.keys()
        );
        let server_ttft = sim_truth::server_seen_ttft_ms(&records, &origins, &truth);
        let ok: Vec<_> = records.iter().filter(|r| r.is_ok() && !r.warmup).collect();
        for (label, st) in &sc.images {
            let mut theirs: Vec<f64> = ok
                .iter()
                .zip(&server_ttft)
                .filter(|(r, _)| r.images.as_deref() == Some(label))
                .map(|(_, t)| *t)
                .collect();
            theirs.sort_by(f64::total_cmp);
            let want = sim_truth::nearest_rank(&theirs, 50.0);
            let got = st.median_ttft_ms.unwrap();
            assert!(
                (got - want).abs() <= sim_truth::MEDIAN_TOL_MS + want * 1e-3,
                "{label}: median TTFT {got} ms, the server's record {want} ms"
            );
            // Two images, each its stated cost, before the first token.
            assert!(got >= 2.0 * IMAGE_MS, "{label}: {got} ms");
        }
        // The images finding: each size's TTFT and image tokens, the fewest tokens first.
        let f = finding(&session, "images");
        assert_eq!(f.values["image_tokens_2×112x112"], 32.0, "{f:?}");
        assert_eq!(f.values["image_tokens_2×280x280"], 200.0, "{f:?}");
        assert_eq!(
            f.values["ttft_p50_ms_2×280x280"],
            sc.images["2×280x280"].median_ttft_ms.unwrap()
        );
        let (small, large) = (
            f.text.find("2×112x112").unwrap(),
            f.text.find("2×280x280").unwrap(),
        );
        assert!(small < large, "{}", f.text);
        let _ = std::fs::remove_dir_all(&dir);
    });
}
