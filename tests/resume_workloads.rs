//! `--resume` of a run that uses every workload flag at once: `--response-format json`,
//! `--lora-modules` with `--lora-dist zipf:1.1`, `--images` with two sizes, `--range-ratio` and
//! `--thinking-budget`, through the real binary against the simulator. The run is stopped
//! (SIGTERM) once its second level is under way and resumed from its directory; the resumed
//! results.json must hold each flag's setting as given, and the levels the resume ran must have
//! used every one of them, read from what the simulator received: each request names the
//! adapter the zipf deal gives its index for the resumed seed, carries the image size the deal
//! gives it (its image tokens, ⌈W/28⌉·⌈H/28⌉, the simulator's count), asks for the output
//! length drawn within ±50 %, carries the constraint on the constrained twins (and its answer
//! complies), and thinks the budget's 4 tokens where the simulator would think 8.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use servetop::metrics::RequestRecord;
use servetop::sim::{self, AcceptLength, SimConfig, SimLora};
use servetop::workload::images::{ImageMix, ImageSizes};
use servetop::workload::mix::{self, Length, LoraDist, LoraMix};

mod run_files;
mod sim_truth;

use run_files::{bin, request_records, results, wait_for_level_running};

const ADAPTERS: [&str; 5] = ["a1", "a2", "a3", "a4", "a5"];
const SIZES: [(u32, u32); 2] = [(56, 56), (112, 84)];
const OUTPUT: u64 = 20;
const RATIO: f64 = 0.5;
const BUDGET: u64 = 4;
/// What the simulator thinks without a budget.
const THINKS: u64 = 8;
const REQUESTS: usize = 6;

/// Each flag's setting in results.json's configuration, as given on the command line.
fn config_is_as_given(v: &Value) {
    let c = &v["config"];
    assert_eq!(c["response_format"], json!({"type": "json"}), "{c}");
    assert_eq!(c["lora_modules"], json!(ADAPTERS), "{c}");
    let dist: LoraDist = serde_json::from_value(c["lora_dist"].clone()).unwrap();
    assert_eq!(dist, LoraDist::Zipf(1.1));
    assert_eq!(c["images"], 1, "{c}");
    let sizes: ImageSizes = serde_json::from_value(c["image_sizes"].clone()).unwrap();
    assert_eq!(sizes, ImageSizes::List(SIZES.to_vec()));
    assert_eq!(c["range_ratio"], RATIO, "{c}");
    assert_eq!(c["thinking_budgets"], json!([BUDGET]), "{c}");
}

/// Image tokens of a `w`×`h` image: one a 28-pixel square.
fn image_tokens((w, h): (u32, u32)) -> u64 {
    u64::from(w.div_ceil(28) * h.div_ceil(28))
}

/// Every record the resume added against what the simulator received and what the flags
/// deal for the resumed seed.
fn resumed_levels_used_every_flag(v: &Value, resumed: &[RequestRecord], h: &sim::SimHandle) {
    let seed = v["resumed_with_seed"].as_u64().expect("resumed_with_seed");
    let truth = sim_truth::of(h);
    // The resumed requests are the latest of their ids in the simulator's record.
    let ids = sim_truth::by_id(&truth);
    let lora = LoraMix {
        modules: ADAPTERS.map(String::from).to_vec(),
        dist: LoraDist::Zipf(1.1),
    };
    let images = ImageMix {
        per_request: 1,
        sizes: ImageSizes::List(SIZES.to_vec()),
    };
    let (lo, hi) = mix::bounds(OUTPUT, RATIO, 1);
    let mut lengths = std::collections::BTreeSet::new();
    let mut constrained_seen = 0;
    for r in resumed.iter().filter(|r| !r.warmup) {
        let id = sim_truth::id_of(r);
        let s = ids[id.as_str()];
        let level = v["sweep"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["index"].as_u64() == Some(u64::from(r.level)))
            .unwrap();
        assert!(r.is_ok() && s.completed, "{id}");
        let dealt = lora.pick(seed, r.index);
        assert_eq!(s.lora.as_deref(), Some(dealt), "{id}: its adapter");
        assert_eq!(r.lora.as_deref(), Some(dealt), "{id}: its adapter");
        let size = images.size_of(seed, r.index);
        assert_eq!(
            s.image_tokens,
            image_tokens(size),
            "{id}: its image {size:?}"
        );
        let want = mix::draw(OUTPUT, RATIO, 1, seed, Length::Output, r.index);
        assert!((lo..=hi).contains(&want));
        assert_eq!(s.max_tokens, want, "{id}: its output length");
        lengths.insert(s.max_tokens);
        let constrained = level["response_format"] == "json";
        assert_eq!(s.structured, constrained, "{id}: the constraint");
        assert_eq!(r.schema_valid, constrained.then_some(true), "{id}");
        constrained_seen += usize::from(constrained);
        assert_eq!(level["thinking_budget"], BUDGET, "{id}");
        assert_eq!(r.reasoning_tokens, Some(BUDGET), "{id}: thought its budget");
    }
    assert!(lengths.len() > 1, "the lengths were spread: {lengths:?}");
    assert!(
        constrained_seen >= REQUESTS,
        "a constrained level was resumed"
    );
}

/// Starts the run with every workload flag against `url`, writing into `dir`, and stops it
/// (SIGTERM) inside its second level, the constrained C=1 twin.
fn run_and_stop(url: &str, dir: &Path) {
    let (output, ratio, budget, requests) = (
        OUTPUT.to_string(),
        RATIO.to_string(),
        BUDGET.to_string(),
        REQUESTS.to_string(),
    );
    let mut child = Command::new(bin())
        .args([
            "run",
            "--base-url",
            url,
            "--concurrency",
            "1,2",
            "--requests-per-level",
            &requests,
            "--input-len",
            "40",
            "--output-len",
            &output,
            "--warmup",
            "0",
            "--long-context",
            "none",
            "--response-format",
            "json",
            "--lora-modules",
            &ADAPTERS.join(","),
            "--lora-dist",
            "zipf:1.1",
            "--images",
            "1",
            "--image-size",
            "56x56,112x84",
            "--range-ratio",
            &ratio,
            "--thinking-budget",
            &budget,
            "--seed",
            "3",
            "--headless",
            "--no-gpu",
            "--grace",
            "0.3",
            "--out",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // C=1 plain, C=1 · json, C=2 plain, C=2 · json: stop inside the constrained C=1 twin.
    wait_for_level_running(dir, 1);
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(child.wait().unwrap().code(), Some(130));
}

#[test]
fn a_resumed_run_keeps_every_workload_flag() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 20.0;
    c.batch_growth = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    c.reasoning_tokens = THINKS;
    c.lora = ADAPTERS
        .iter()
        .map(|a| SimLora {
            name: (*a).to_string(),
            switch_ms: 0.0,
        })
        .collect();
    let h = rt
        .block_on(sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0))))
        .unwrap();
    let dir =
        std::env::temp_dir().join(format!("servetop-resume-workloads-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    run_and_stop(&h.url(), &dir);
    let v = results(&dir);
    assert_eq!(v["state"], "interrupted");
    assert_eq!(v["sweep"][0]["status"], "done");
    assert_eq!(v["sweep"][1]["status"], "interrupted");
    config_is_as_given(&v);
    let lines_before = request_records(&dir).len();

    let out = Command::new(bin())
        .args(["run", "--resume", dir.to_str().unwrap(), "--headless"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = results(&dir);
    assert_eq!(v["state"], "finished");
    config_is_as_given(&v);
    let levels = v["sweep"].as_array().unwrap();
    assert_eq!(levels.len(), 4);
    for l in levels {
        assert_eq!(l["status"], "done", "level {}", l["index"]);
        assert_eq!(l["completed"], REQUESTS, "level {}", l["index"]);
        assert_eq!(l["range_ratio"], RATIO, "level {}", l["index"]);
    }
    let recs = request_records(&dir);
    let resumed = &recs[lines_before..];
    // The interrupted twin and both C=2 levels ran again.
    assert_eq!(resumed.iter().filter(|r| r.is_ok()).count(), 3 * REQUESTS);
    resumed_levels_used_every_flag(&v, resumed, &h);
    let _ = std::fs::remove_dir_all(&dir);
}
