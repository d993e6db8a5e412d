//! Structured output and LoRA adapters on a real vLLM: its CPU build (`scripts/vllm/setup.sh`)
//! serving the tiny random-weight model with two tiny random adapters made here
//! (`scripts/vllm/make_lora.py`, PEFT's format) and its structured-output backend (xgrammar,
//! told to write no free whitespace: the random model would otherwise fill every answer with
//! it until `max_tokens` cut the JSON short).
//!
//! Known answers, one server start (about 40 s on 2 cores):
//! - Structured output, every level twice: each constrained answer is checked by servetop against
//!   the schema with the `jsonschema` crate, and every one must comply; vLLM's own
//!   `vllm:request_success_total` by `finished_reason` must have ended exactly the constrained
//!   requests with `stop` (the grammar closed them) and the plain ones, `ignore_eos`, with
//!   `length`; the overhead against the plain twin is given at every constrained level.
//! - LoRA: vLLM answers a request for an adapter it does not serve with 404, so every request
//!   completing under its adapter's name is vLLM serving that adapter; the round-robin deal is
//!   exact (4 of 8 each); a name vLLM does not list at `/v1/models` is refused before anything
//!   is sent.
//!
//! - Images, on a second server: the tiny Qwen2-VL (`make_model.py --vision`), whose processor
//!   makes a W x H image (both multiples of 28) (W/28)(H/28) tokens and two tags. Every request's
//!   image tokens, which servetop takes from vLLM's `prompt_tokens` less the text's, must be
//!   that count exactly, for each size drawn; the level's TTFT is given per size.
//!
//! The two servers take turns. Without the venv every test says why it skipped and passes; `SERVETOP_REQUIRE_VLLM=1` (set
//! by `.ci/run`) makes a missing venv fail them.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod real_server;

use std::path::{Path, PathBuf};
use std::process::Command;

use real_server::vllm::{VllmServer, available, cache_dir, root};
use real_server::{Prom, http_get};
use servetop::client::structured::ResponseFormat;
use servetop::config::{BackendChoice, RunConfig};
use servetop::event::RunState;
use servetop::run::run_headless;
use servetop::run::session::Session;
use servetop::workload::RequestCount;
use servetop::workload::mix::LoraDist;

/// A schema the random model can only answer one short way once whitespace is off.
const SCHEMA: &str = r#"{"type": "object", "properties": {"ok": {"type": "boolean"}, "size": {"enum": ["small", "large"]}}, "required": ["ok", "size"], "additionalProperties": false}"#;

fn make_adapter(dir: &Path, seed: u32) {
    let status = Command::new(cache_dir().join("venv/bin/python"))
        .arg(root().join("scripts/vllm/make_lora.py"))
        .arg("--model")
        .arg(cache_dir().join("model"))
        .arg("--out")
        .arg(dir)
        .args(["--seed", &seed.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "make_lora.py failed");
}

fn config(url: &str) -> RunConfig {
    RunConfig {
        input_len: 100,
        output_len: 48,
        first_token_timeout_s: 120.0,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        server_wait_s: 10.0,
        long_context: Vec::new(),
        requests_per_level: RequestCount::Fixed(8),
        backend: BackendChoice::OpenaiChat,
        ..RunConfig::minimal(url)
    }
}

async fn run(cfg: RunConfig, dir: &Path) -> Session {
    let (state, session) = run_headless(cfg, Some(dir.to_path_buf())).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    session
}

/// `vllm:request_success_total` by `finished_reason`.
fn finished(srv: &VllmServer, reason: &str) -> f64 {
    let (status, body) = http_get(srv.port, "/metrics").unwrap();
    assert_eq!(status, 200);
    Prom(body)
        .series("vllm:request_success_total")
        .iter()
        .filter(|(labels, _)| labels.contains(&format!("finished_reason=\"{reason}\"")))
        .map(|(_, v)| v)
        .sum()
}

/// One vLLM at a time: two would share the machine's two cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_and_lora_on_vllm() {
    if !available("structured_output_and_lora_on_vllm") {
        return;
    }
    let _turn = SERIAL.lock().await;
    let tmp = real_server::temp_run_dir("vllm", "adapters");
    let _ = std::fs::remove_dir_all(&tmp);
    let (a, b) = (tmp.join("sqla"), tmp.join("chatb"));
    make_adapter(&a, 1);
    make_adapter(&b, 2);
    let modules = [
        format!("sqla={}", a.display()),
        format!("chatb={}", b.display()),
    ];
    let srv = VllmServer::start(
        "workloads",
        &[
            "--enable-lora",
            "--max-lora-rank",
            "8",
            "--lora-modules",
            &modules[0],
            &modules[1],
            "--structured-outputs-config",
            r#"{"backend": "xgrammar", "disable_any_whitespace": true}"#,
        ],
    );
    let schema: PathBuf = tmp.join("schema.json");
    std::fs::write(&schema, SCHEMA).unwrap();
    Box::pin(structured_output_complies_and_vllm_ended_it(&srv, &schema)).await;
    Box::pin(adapters_are_served_and_dealt(&srv)).await;
    let _ = std::fs::remove_dir_all(&tmp);
}

async fn structured_output_complies_and_vllm_ended_it(srv: &VllmServer, schema: &Path) {
    let (stop0, length0) = (finished(srv, "stop"), finished(srv, "length"));
    let dir = real_server::temp_run_dir("vllm", "structured");
    let cfg = RunConfig {
        concurrency: vec![1, 2],
        response_format: Some(
            ResponseFormat::parse(&["json-schema".into(), schema.display().to_string()]).unwrap(),
        ),
        ..config(&srv.url())
    };
    let warmup = u64::from(cfg.warmup_requests);
    let session = run(cfg, &dir).await;
    let s = &session.summary;
    assert_eq!(s.sweep.len(), 4, "two levels, each with its twin");
    let (mut plain, mut constrained) = (0u64, 0u64);
    for l in &s.sweep {
        let sc = &l.stats.as_ref().unwrap().scalars;
        assert_eq!((sc.completed, sc.failed), (8, 0), "{}", l.label());
        if l.response_format.is_none() {
            plain += sc.completed;
            assert_eq!(sc.schema_checked, 0);
            continue;
        }
        constrained += sc.completed;
        assert_eq!(
            (sc.schema_checked, sc.schema_valid_share),
            (8, Some(1.0)),
            "{}: every answer parses as the schema",
            l.label()
        );
        let o = l.structured_overhead.as_ref().unwrap();
        assert!(
            o.tpot_p50_pct.is_some() && o.ttft_p50_pct.is_some(),
            "{o:?}"
        );
        // The grammar ends each answer well before the plain twin's 48 tokens.
        assert!(o.mean_output_tokens_constrained.unwrap() < 48.0, "{o:?}");
    }
    // vLLM's own count: the grammar stopped the constrained requests, max_tokens the others
    // (the warmup's too).
    let grew = |reason: &str, before: f64| (finished(srv, reason) - before).round() as u64;
    assert_eq!(grew("stop", stop0), constrained);
    assert_eq!(grew("length", length0), plain + warmup);
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("## Structured output (json-schema)"), "{md}");
    assert!(md.contains("| C=2 · json-schema |"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}

async fn adapters_are_served_and_dealt(srv: &VllmServer) {
    let dir = real_server::temp_run_dir("vllm", "lora");
    let cfg = RunConfig {
        concurrency: vec![2],
        lora_modules: vec!["sqla".into(), "chatb".into()],
        lora_dist: LoraDist::RoundRobin,
        ..config(&srv.url())
    };
    let session = run(cfg.clone(), &dir).await;
    let l = &session.summary.sweep[0];
    let by = &l.stats.as_ref().unwrap().scalars.lora;
    assert_eq!(by.len(), 2, "{by:?}");
    for (name, a) in by {
        assert_eq!((a.completed, a.failed), (4, 0), "{name}");
        assert!(a.median_ttft_ms.is_some() && a.output_throughput > 0.0);
    }
    let wrong = RunConfig {
        lora_modules: vec!["sqla".into(), "nope".into()],
        ..cfg
    };
    let err = servetop::runner::prepare(&wrong, None).await.err().unwrap();
    assert!(
        err.contains("--lora-modules nope:") && err.contains("sqla, chatb"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Qwen2-VL's count for a `W`x`H` image whose sides are multiples of 28 within its processor's
/// bounds: one token for each 28-pixel square (14-pixel patches, merged 2 x 2), between
/// `<|vision_start|>` and `<|vision_end|>`.
fn qwen2_vl_tokens(w: u64, h: u64) -> u64 {
    assert!(w.is_multiple_of(28) && h.is_multiple_of(28), "{w}x{h}");
    (w / 28) * (h / 28) + 2
}

/// `2×112x84` → its images' tokens by [`qwen2_vl_tokens`].
fn tokens_of_label(label: &str) -> u64 {
    let (n, size) = label.split_once('×').unwrap();
    let (w, h) = size.split_once('x').unwrap();
    n.parse::<u64>().unwrap() * qwen2_vl_tokens(w.parse().unwrap(), h.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_on_a_vision_model() {
    if !available("images_on_a_vision_model") {
        return;
    }
    let _turn = SERIAL.lock().await;
    let model = cache_dir().join("model-vision");
    let srv = VllmServer::start(
        "vision",
        &[
            "--model",
            model.to_str().unwrap(),
            "--limit-mm-per-prompt",
            r#"{"image": 2}"#,
        ],
    );
    let dir = real_server::temp_run_dir("vllm", "images");
    let cfg = RunConfig {
        concurrency: vec![1, 2],
        input_len: 64,
        output_len: 8,
        images: 2,
        image_sizes: servetop::workload::images::ImageSizes::List(vec![
            (56, 56),
            (112, 84),
            (224, 168),
        ]),
        seed: 7,
        ..config(&srv.url())
    };
    let session = run(cfg, &dir).await;
    let records = real_server::records(&dir);
    let measured: Vec<_> = records.iter().filter(|r| !r.warmup).collect();
    assert_eq!(measured.len(), 16);
    for r in &measured {
        assert!(r.is_ok(), "{r:?}");
        let label = r.images.as_deref().unwrap();
        // What vLLM's processor made of the two images: servetop's count is exact.
        assert_eq!(
            r.image_tokens,
            Some(tokens_of_label(label)),
            "request {} ({label}): input {:?}",
            r.index,
            r.input_tokens
        );
    }
    for l in &session.summary.sweep {
        let sc = &l.stats.as_ref().unwrap().scalars;
        assert_eq!((sc.completed, sc.failed), (8, 0), "{}", l.label());
        let mine: Vec<_> = measured.iter().filter(|r| r.level == l.index).collect();
        let mean = mine.iter().map(|r| r.image_tokens.unwrap()).sum::<u64>() as f64 / 8.0;
        assert!(
            (sc.mean_image_tokens.unwrap() - mean).abs() < 1e-9,
            "{}",
            l.label()
        );
        // TTFT by size: each size drawn is a row, over its own requests.
        let drawn: std::collections::BTreeSet<_> =
            mine.iter().filter_map(|r| r.images.clone()).collect();
        assert_eq!(
            sc.images
                .keys()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>(),
            drawn
        );
        for (label, st) in &sc.images {
            let n = mine
                .iter()
                .filter(|r| r.images.as_deref() == Some(label))
                .count();
            assert_eq!(st.completed, n as u64, "{label}");
            assert!(st.median_ttft_ms.is_some_and(|t| t > 0.0), "{label}");
        }
        eprintln!(
            "{}: image tokens a request {:.1}; TTFT p50 by images {:?}",
            l.label(),
            sc.mean_image_tokens.unwrap(),
            sc.images
                .iter()
                .map(|(k, v)| (k.as_str(), v.median_ttft_ms))
                .collect::<Vec<_>>()
        );
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("Images"), "{md}");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
