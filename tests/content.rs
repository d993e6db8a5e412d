//! Prompt sets by kind (`--content`) against the in-process simulator, whose own record of
//! each request is the known answer: with `--accept-by-content` it tells a request's kind from
//! the marker servetop's prompts open with and draws its steps' accept lengths from that kind's
//! mean, and it records the kind, the prompt's tokens and every frame it wrote.
//!
//! - Each level of a kind's pass sent only prompts of that kind (the simulator read its marker
//!   in every one), each exactly the planned length.
//! - Each level's accept length, as servetop saw it and by the server's counters, is the one the
//!   simulator's record gives (its frames' tokens after the first, per frame), and that lies
//!   near the kind's configured mean.
//! - The `accept_by_content` finding, on random shapes (two to four kinds, accept lengths drawn
//!   at least 0.4 apart, with and without the server's counters): its figures are its levels',
//!   its load the lowest concurrency, and the kinds it names as accepting most and fewest are
//!   those configured so.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::float_cmp)]

use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::metrics::curves::{DECODE_TOK_S, at};
use servetop::sim::{self, AcceptLength, SimConfig, SimHandle, SimRequestTrace};
use servetop::summary::LevelSummary;
use servetop::workload::RequestCount;
use servetop::workload::content::ContentKind::{self, Chat, Code, Json, Math, Random, Summary};

use draw::Draw;

mod draw;
mod sim_run;
mod sim_truth;

/// The simulator's accept length when a prompt's kind has none of its own: per-position rates
/// 0.8, 0.6, 0.4 (mean 1 + 0.8 + 0.48 + 0.192 = 2.472).
const BASE_RATES: [f64; 3] = [0.8, 0.6, 0.4];

/// The simulator's decode step, in ms: long enough that the client reads each step's frame on
/// its own (at 1 ms, reads merged frames and the client's tokens per chunk were 15 % high).
const STEP_MS: f64 = 6.0;

fn sim_config(by_kind: &[(ContentKind, f64)], seed: u64, metrics: bool) -> SimConfig {
    let mut c = sim_run::steady_config(STEP_MS);
    c.accept_length = AcceptLength::Rates(BASE_RATES.to_vec());
    c.accept_by_content = by_kind.iter().copied().collect();
    c.seed = seed;
    if !metrics {
        c.metrics = None;
    }
    c
}

async fn start(c: SimConfig) -> SimHandle {
    sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

fn config(url: &str, kinds: &[ContentKind], concurrency: Vec<u64>, requests: u32) -> RunConfig {
    RunConfig {
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        warmup_requests: 0,
        concurrency,
        input_len: 400,
        output_len: 96,
        requests_per_level: RequestCount::Fixed(requests),
        content: kinds.to_vec(),
        ..RunConfig::minimal(url)
    }
}

/// The tokens per frame after each request's first, pooled over `requests`: the accept length
/// as the simulator wrote it (one frame a decode step).
fn written_accept(requests: &[&SimRequestTrace]) -> f64 {
    let frames: Vec<u32> = requests
        .iter()
        .flat_map(|t| t.writes.iter().skip(1).map(|&(_, n)| n))
        .collect();
    f64::from(frames.iter().sum::<u32>()) / frames.len() as f64
}

/// The run's `accept_by_content` finding.
fn by_content(s: &servetop::summary::RunSummary) -> &servetop::summary::findings::Finding {
    s.findings
        .iter()
        .find(|f| f.id == "accept_by_content")
        .expect("the accept_by_content finding")
}

/// A kind's configured mean accept length in the simulator.
fn configured(by_kind: &[(ContentKind, f64)], k: ContentKind) -> f64 {
    by_kind.iter().find(|(x, _)| *x == k).map_or_else(
        || AcceptLength::Rates(BASE_RATES.to_vec()).mean(),
        |(_, m)| *m,
    )
}

#[test]
fn each_kinds_accept_length_is_the_simulators() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let by_kind = [(Code, 4.2), (Chat, 1.6), (Math, 3.0)];
        let h = start(sim_config(&by_kind, 5, true)).await;
        let kinds = [Code, Chat, Math, Json];
        let dir = sim_run::temp_run_dir("content");
        let session = sim_run::finished_into(config(&h.url(), &kinds, vec![1, 3], 12), &dir).await;
        let truth = sim_truth::of(&h);
        let sweep = &session.summary.sweep;
        let labels: Vec<String> = sweep.iter().map(LevelSummary::label).collect();
        assert_eq!(
            labels,
            [
                "C=1 · code",
                "C=1 · chat",
                "C=1 · math",
                "C=1 · json",
                "C=3 · code",
                "C=3 · chat",
                "C=3 · math",
                "C=3 · json"
            ]
        );
        for l in sweep {
            let kind = l.content.unwrap();
            let server = sim_truth::of_level(&truth, l.index);
            assert_eq!(server.len(), 12, "{}", l.label());
            // Every prompt was of the level's kind, and exactly its length.
            for t in &server {
                assert_eq!(t.content, Some(kind), "{:?}", t.request_id);
                assert_eq!(t.prompt_tokens, 400, "{:?}", t.request_id);
            }
            let st = l.stats.as_ref().unwrap();
            assert_eq!(st.scalars.total_input_tokens, 12 * 400, "{}", l.label());
            let written = written_accept(&server);
            let engine = l.accept_length_server.unwrap();
            // A read that took two frames at once is one chunk to the client: a few in a level
            // move its mean by well under 3 %. More, and servetop must have said its chunks
            // were delivery bursts, not drafts (a starved machine merges reads).
            match l.accept_length_client() {
                Some(client) => assert!(
                    (client - written).abs() <= 0.03 * written,
                    "{}: client {client} against the simulator's {written}",
                    l.label()
                ),
                None => assert!(l.delivery_bursts, "{}", l.label()),
            }
            assert!(
                (engine - written).abs() <= 0.01 * written,
                "{}: server counters {engine} against the simulator's frames {written}",
                l.label()
            );
            // The draws' own spread (about 200 steps a level) and each answer's last step, cut
            // by the output length, keep the mean within 0.3 of the configured one.
            let want = configured(&by_kind, kind);
            assert!(
                (written - want).abs() <= 0.3,
                "{}: the simulator wrote {written} a step against a configured {want}",
                l.label()
            );
        }
        // The finding: single stream, each kind's server figure, most and fewest.
        let f = by_content(&session.summary);
        assert_eq!(f.values["load"], 1.0);
        for l in sweep.iter().filter(|l| l.concurrency == 1) {
            let k = l.content.unwrap().name();
            assert_eq!(
                f.values[&format!("accept_length_{k}")],
                l.accept_length_server.unwrap()
            );
            assert_eq!(
                f.values[&format!("decode_tok_s_{k}")],
                at(l.stats.as_ref(), DECODE_TOK_S).unwrap()
            );
        }
        assert!(
            f.text.starts_with(
                "By content at single stream (C=1), accept length by the server's counters: code "
            ),
            "{}",
            f.text
        );
        assert!(
            f.text
                .ends_with("(code accepted the most drafts, chat the fewest)."),
            "{}",
            f.text
        );
        files_say_it(&dir, &h.url());
        let _ = std::fs::remove_dir_all(&dir);
    });
}

/// The files of the run in `dir` say it: each level's kind, the table, the plan line.
fn files_say_it(dir: &std::path::Path, url: &str) {
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["config"]["content"][1], "chat");
    assert_eq!(results["sweep"][1]["content"], "chat");
    assert_eq!(results["sweep"][1]["concurrency"], 1);
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("## Accept length by content"), "{summary}");
    assert!(summary.contains("| C=3 | math | 12 |"), "{summary}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["run", "--base-url", url, "--dry-run"])
        .args(["--long-context", "none", "--concurrency", "1,3"])
        .args(["--input-len", "400", "--content", "code,chat,math,json"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let plan = out.lines().find(|l| l.starts_with("plan: ")).unwrap();
    assert!(
        plan.contains("plan: 8 levels")
            && plan.contains("each with code, chat, math, json prompts"),
        "{plan}"
    );
}

/// One shape: the kinds and their configured accept lengths, the concurrencies, whether the
/// server reports its counters.
struct Shape {
    by_kind: Vec<(ContentKind, f64)>,
    concurrency: Vec<u64>,
    metrics: bool,
    seed: u64,
}

impl Shape {
    fn draw(d: &mut Draw, seed: u64) -> Self {
        let n = 2 + (d.next() % 3) as usize;
        let mut pool = vec![Code, Math, Chat, Summary, Json, Random];
        let mut by_kind: Vec<(ContentKind, f64)> = Vec::new();
        while by_kind.len() < n {
            let k = pool.remove((d.next() % pool.len() as u64) as usize);
            // Accept lengths at least 0.4 apart: far beyond what a level's draws move.
            let m = loop {
                let m = (d.range(1.0, 5.0) * 10.0).round() / 10.0;
                if by_kind.iter().all(|(_, o)| (o - m).abs() >= 0.4) {
                    break m;
                }
            };
            by_kind.push((k, m));
        }
        Self {
            by_kind,
            concurrency: if d.unit() < 0.5 {
                vec![1, 2]
            } else {
                vec![2, 4]
            },
            metrics: d.unit() < 0.7,
            seed,
        }
    }
}

#[test]
fn the_finding_ranks_the_kinds_on_random_shapes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut d = Draw(0xC0_4E7E);
        let (mut with_counters, mut without) = (0, 0);
        for seed in 0..8 {
            let shape = Shape::draw(&mut d, seed);
            let h = start(sim_config(&shape.by_kind, shape.seed, shape.metrics)).await;
            let kinds: Vec<ContentKind> = shape.by_kind.iter().map(|(k, _)| *k).collect();
            let cfg = RunConfig {
                output_len: 64,
                ..config(&h.url(), &kinds, shape.concurrency.clone(), 8)
            };
            let session = sim_run::finished(cfg).await;
            let what = format!(
                "shape {seed}: {:?} at C={:?}, counters {}",
                shape.by_kind, shape.concurrency, shape.metrics
            );
            let f = by_content(&session.summary);
            let load = shape.concurrency[0];
            assert_eq!(f.values["load"], load as f64, "{what}");
            let at_load: Vec<&LevelSummary> = session
                .summary
                .sweep
                .iter()
                .filter(|l| u64::from(l.concurrency) == load)
                .collect();
            assert_eq!(at_load.len(), kinds.len(), "{what}");
            let mut speeds = Vec::new();
            // The kinds with an accept length: without the server's counters, a level whose
            // reads held several frames has none (servetop calls its chunks delivery bursts).
            let mut measured: Vec<ContentKind> = Vec::new();
            for l in &at_load {
                let k = l.content.unwrap().name();
                let want = if shape.metrics {
                    assert!(
                        f.text.contains("by the server's counters"),
                        "{what}: {}",
                        f.text
                    );
                    l.accept_length_server
                } else {
                    assert_eq!(l.accept_length_server, None, "{what}");
                    l.accept_length_client()
                };
                assert_eq!(
                    f.values.get(&format!("accept_length_{k}")).copied(),
                    want,
                    "{what}"
                );
                match want {
                    Some(_) => measured.push(l.content.unwrap()),
                    None => assert!(
                        f.text.contains(&format!("{k} no accept length")),
                        "{what}: {}",
                        f.text
                    ),
                }
                let speed = at(l.stats.as_ref(), DECODE_TOK_S).unwrap();
                assert_eq!(f.values[&format!("decode_tok_s_{k}")], speed, "{what}");
                speeds.push(speed);
            }
            assert_eq!(
                f.values["decode_tok_s_min"],
                speeds.iter().copied().fold(f64::INFINITY, f64::min),
                "{what}"
            );
            assert_eq!(
                f.values["decode_tok_s_max"],
                speeds.iter().copied().fold(0.0, f64::max),
                "{what}"
            );
            // The kinds it names: of those measured, the ones configured to accept the most
            // and the fewest.
            let mut ranked = shape.by_kind.clone();
            ranked.retain(|(k, _)| measured.contains(k));
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
            if ranked.len() >= 2 {
                let (top, bottom) = (ranked[0].0.name(), ranked[ranked.len() - 1].0.name());
                assert!(
                    f.text.contains(&format!(
                        "({top} accepted the most drafts, {bottom} the fewest)"
                    )),
                    "{what}: {}",
                    f.text
                );
            } else {
                assert!(!f.text.contains("accepted the most"), "{what}: {}", f.text);
            }
            eprintln!("{what}: {}", f.text);
            if shape.metrics {
                with_counters += 1;
            } else {
                without += 1;
            }
            h.stop();
        }
        assert!(with_counters > 0 && without > 0, "both sources were drawn");
    });
}

#[test]
fn a_run_without_kinds_has_no_finding_and_one_kind_no_comparison() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start(sim_config(&[(Code, 3.0)], 1, true)).await;
        for kinds in [vec![], vec![Code]] {
            let session = sim_run::finished(config(&h.url(), &kinds, vec![1], 6)).await;
            assert!(
                !session
                    .summary
                    .findings
                    .iter()
                    .any(|f| f.id == "accept_by_content"),
                "{kinds:?}"
            );
            let l = &session.summary.sweep[0];
            assert_eq!(l.content, kinds.first().copied());
        }
        // Without --content, prompts carry no marker: the simulator's base accept length.
        let truth = sim_truth::of(&h);
        let unmarked: Vec<&SimRequestTrace> = truth
            .requests
            .iter()
            .filter(|t| t.content.is_none())
            .collect();
        assert_eq!(unmarked.len(), 6);
    });
}

/// SGLang reports a recent-window gauge, not counters: it carries the level before's steps, so
/// the finding takes each kind's accept length as servetop saw it (its tokens per chunk), and
/// the gauge only where those are delivery bursts.
#[test]
fn with_sglangs_gauge_the_finding_takes_the_clients_figure() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = sim_config(&[(Code, 4.5), (Chat, 1.5)], 3, true);
        c.metrics = Some(servetop::sim::MetricsFlavor::Sglang);
        let h = start(c).await;
        let cfg = RunConfig {
            output_len: 64,
            ..config(&h.url(), &[Code, Chat], vec![1], 8)
        };
        let session = sim_run::finished(cfg).await;
        let f = by_content(&session.summary);
        for l in &session.summary.sweep {
            let k = l.content.unwrap().name();
            let spec = l.spec_server.as_ref().expect("the gauge");
            assert_eq!(spec.source, "gauge", "{k}");
            let want = l.accept_length_client().unwrap_or(spec.accept_length);
            assert_eq!(f.values[&format!("accept_length_{k}")], want, "{k}");
        }
        assert!(
            session.summary.sweep.iter().any(|l| l.delivery_bursts)
                || f.text.contains("accept length as servetop saw it: code "),
            "{}",
            f.text
        );
    });
}

/// `--dataset` in Spec-Bench's format (`tests/fixtures/spec_bench_question.jsonl`, written by
/// the project: its coding prompts open with `Task (code):`, its math ones with `Task
/// (math):`, so the simulator accepts drafts by category) with `--categories all`: a level per
/// category, every request of a level drawn from that category's entries (the simulator read
/// their markers), its accept length the one the simulator wrote, and the finding ranking the
/// categories as configured.
#[test]
fn dataset_categories_are_passes_of_their_own() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let h = start(sim_config(&[(Code, 4.5), (Math, 1.5)], 2, true)).await;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/spec_bench_question.jsonl");
        let cfg = RunConfig {
            output_len: 64,
            content: Vec::new(),
            dataset: Some(path.clone()),
            categories: servetop::workload::dataset::Dataset::load(&path)
                .unwrap()
                .category_names(),
            ..config(&h.url(), &[], vec![1], 8)
        };
        assert_eq!(cfg.categories, ["coding", "qa", "math_reasoning"]);
        let session = sim_run::finished(cfg).await;
        let truth = sim_truth::of(&h);
        let want = [
            ("coding", Some(Code)),
            ("qa", None),
            ("math_reasoning", Some(Math)),
        ];
        for (l, (cat, marker)) in session.summary.sweep.iter().zip(want) {
            assert_eq!(l.category.as_deref(), Some(cat));
            assert_eq!(l.label(), format!("C=1 · {cat}"));
            let server = sim_truth::of_level(&truth, l.index);
            assert_eq!(server.len(), 8, "{cat}");
            assert!(server.iter().all(|t| t.content == marker), "{cat}");
            let written = written_accept(&server);
            let engine = l.accept_length_server.unwrap();
            assert!(
                (engine - written).abs() <= 0.01 * written,
                "{cat}: {engine} against {written}"
            );
        }
        let f = by_content(&session.summary);
        assert!(
            f.text
                .contains("(coding accepted the most drafts, math_reasoning the fewest)"),
            "{}",
            f.text
        );
        assert_eq!(
            f.values["accept_length_qa"],
            session.summary.sweep[1].accept_length_server.unwrap()
        );
    });
}
