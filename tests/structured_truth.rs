//! Structured output (`--response-format`) through the real binary against a simulator that
//! answers a known share of constrained requests invalidly (`structured_invalid_every`): every
//! third constrained request it reads gets an answer that fails its constraint, and its own
//! record of each request says which (`structured_invalid`). For `json`, `json-schema FILE`
//! and `regex PATTERN` alike, each constrained twin's `schema_checked` is the number of its
//! requests the simulator answered, its `schema_valid_share` exactly the simulator's count of
//! valid answers over that number (a ratio of counts), and every record's `schema_valid` the
//! simulator's verdict on that request.
//!
//! The overhead figures: at C=1 the simulator adds `MASK_MS` to every decode step that carries
//! a constrained request and nothing else differs between the twins, so the constrained twin's
//! step (chunk gap p50) and TPOT p50 are `MASK_MS` above the plain twin's. The bound: the
//! simulator lays its steps on an absolute timeline (a late wake-up is made up by the next
//! step), so the median of its step gaps is the configured step unless it was starved (which
//! [`sim_truth::guard`] reports as such); servetop's medians trail the server's frames by at
//! most [`sim_truth::MEDIAN_TOL_MS`] each (`tests/e2e_sim.rs` holds them to it), so the
//! difference of the twins' medians is `MASK_MS` within twice that.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use servetop::metrics::RequestRecord;
use servetop::sim::{self, SimHandle};

mod run_files;
mod sim_run;
mod sim_truth;

use run_files::{bin, request_records, results};

/// Every this-many-th constrained request is answered invalidly.
const EVERY: u32 = 3;
/// Engine time each decode step carrying a constrained request costs beyond its own.
const MASK_MS: f64 = 4.0;
/// The plain decode step.
const STEP_MS: f64 = 2.0;
const REQUESTS: u64 = 12;

/// A schema whose smallest instance is `{"city": "xxx", "days": 1}`: the simulator's broken
/// answer leaves out `city`, a document the schema refuses.
fn schema_file() -> PathBuf {
    let p = std::env::temp_dir().join(format!("servetop-truth-schema-{}.json", std::process::id()));
    std::fs::write(
        &p,
        r#"{"type": "object", "properties": {"city": {"type": "string", "minLength": 3}, "days": {"type": "integer", "minimum": 1}}, "required": ["city", "days"]}"#,
    )
    .unwrap();
    p
}

/// Runs the binary against `h` with `--response-format` followed by `format`, C=1 then C=4,
/// each plain then constrained, and returns its run directory.
fn run(h: &SimHandle, name: &str, format: &[&str]) -> PathBuf {
    let dir = sim_run::temp_run_dir(&format!("truth-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    let requests = REQUESTS.to_string();
    let url = h.url();
    let mut args = vec![
        "run",
        "--base-url",
        &url,
        "--concurrency",
        "1,4",
        "--requests-per-level",
        &requests,
        "--input-len",
        "40",
        "--output-len",
        "24",
        "--warmup",
        "0",
        "--long-context",
        "none",
        "--seed",
        "5",
        "--headless",
        "--no-gpu",
        "--out",
        dir.to_str().unwrap(),
        "--response-format",
    ];
    args.extend_from_slice(format);
    let out = Command::new(bin()).args(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

/// The share of valid answers each constrained twin reports is the simulator's, and every
/// record's verdict is the simulator's verdict on that request. Returns the truth's counts of
/// (valid, constrained) answers over the run.
fn shares_are_the_simulators(h: &SimHandle, dir: &Path, kind: &str) -> (u64, u64) {
    let truth = sim_truth::of(h);
    let ids = sim_truth::by_id(&truth);
    let v = results(dir);
    assert_eq!(v["state"], "finished", "{kind}");
    assert_eq!(
        v["config"]["response_format"]["type"],
        kind.replace('-', "_")
    );
    let recs = request_records(dir);
    let (mut valid_all, mut constrained_all) = (0, 0);
    let levels = v["sweep"].as_array().unwrap();
    assert_eq!(levels.len(), 4, "{kind}: C=1, C=1 twin, C=4, C=4 twin");
    for l in levels {
        let index = l["index"].as_u64().unwrap();
        let constrained = !l["response_format"].is_null();
        let mine: Vec<&RequestRecord> = recs
            .iter()
            .filter(|r| !r.warmup && u64::from(r.level) == index)
            .collect();
        assert_eq!(mine.len() as u64, REQUESTS, "{kind} level {index}");
        let (mut valid, mut answered) = (0u64, 0u64);
        for r in &mine {
            let id = sim_truth::id_of(r);
            let s = ids
                .get(id.as_str())
                .unwrap_or_else(|| panic!("{kind}: {id} is not in the simulator's record"));
            assert!(r.is_ok() && s.completed, "{kind}: {id} did not complete");
            assert_eq!(s.structured, constrained, "{kind}: {id} constrained");
            if constrained {
                answered += 1;
                valid += u64::from(!s.structured_invalid);
                assert_eq!(
                    r.schema_valid,
                    Some(!s.structured_invalid),
                    "{kind}: {id}: servetop's verdict against the simulator's"
                );
            } else {
                assert_eq!(r.schema_valid, None, "{kind}: {id} is plain");
                assert!(!s.structured_invalid);
            }
        }
        if !constrained {
            // (Written only where answers were checked.)
            assert_eq!(
                l["schema_checked"].as_u64().unwrap_or(0),
                0,
                "{kind} level {index}"
            );
            assert!(l["schema_valid_share"].is_null(), "{kind} level {index}");
            continue;
        }
        assert_eq!(
            l["schema_checked"].as_u64(),
            Some(answered),
            "{kind} level {index}: answers checked"
        );
        let share = l["schema_valid_share"].as_f64().unwrap();
        let want = valid as f64 / answered as f64;
        assert!(
            share.to_bits() == want.to_bits(),
            "{kind} level {index}: schema_valid_share {share}, the simulator answered {valid} of {answered} validly ({want})"
        );
        valid_all += valid;
        constrained_all += answered;
    }
    (valid_all, constrained_all)
}

/// At C=1 the constrained twin's step and TPOT are `MASK_MS` above its plain twin's, within
/// the bound the module's comment derives. (Not the percentages: over a 2 ms step the same
/// bound is a wide one; and not the accept lengths servetop saw, which a busy machine moves by
/// reading two steps' events at once.)
fn overhead_is_the_configured_mask(h: &SimHandle, dir: &Path, kind: &str) {
    let v = results(dir);
    let truth = sim_truth::of(h);
    let last_us = truth
        .requests
        .iter()
        .filter_map(servetop::sim::SimRequestTrace::last_write_unix_us)
        .max()
        .unwrap();
    let run_s = last_us.saturating_sub(truth.started_unix_us) as f64 / 1e6;
    sim_truth::guard(&truth, run_s.max(1.0));
    let twin = v["sweep"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["concurrency"] == 1 && !l["response_format"].is_null())
        .unwrap();
    let o = &twin["structured_overhead"];
    let bound = 2.0 * sim_truth::MEDIAN_TOL_MS;
    for key in ["step_p50_added_ms", "tpot_p50_added_ms"] {
        let added = o[key].as_f64().unwrap();
        eprintln!("{kind}: {key} {added} ms (the simulator adds {MASK_MS} ms)");
        assert!(
            (added - MASK_MS).abs() <= bound,
            "{kind}: {key} {added} ms, the simulator adds {MASK_MS} ms a step (± {bound} ms)"
        );
    }
}

#[test]
fn each_format_reports_the_simulators_share_of_valid_answers() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let schema = schema_file();
    let schema_arg = schema.to_str().unwrap();
    // `regex`: the simulator's plain answer is words of lowercase letters, each after a space,
    // which the pattern takes whole; its broken answer begins with a `!`.
    let formats: [(&str, Vec<&str>); 3] = [
        ("json", vec!["json"]),
        ("json-schema", vec!["json-schema", schema_arg]),
        ("regex", vec!["regex", "( [a-z]+)+"]),
    ];
    let mut totals: HashMap<&str, (u64, u64)> = HashMap::new();
    for (kind, words) in &formats {
        let mut c = sim_run::steady_config(STEP_MS);
        c.structured_invalid_every = EVERY;
        c.structured_step_ms = MASK_MS;
        let h = rt
            .block_on(sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0))))
            .unwrap();
        let dir = run(&h, kind, words);
        let (valid, constrained) = shares_are_the_simulators(&h, &dir, kind);
        overhead_is_the_configured_mask(&h, &dir, kind);
        totals.insert(kind, (valid, constrained));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_file(&schema);
    // The simulator counts constrained requests from its first: of the two twins' 24, every
    // third (8) was answered invalidly, so neither share is all or nothing.
    for (kind, (valid, constrained)) in totals {
        assert_eq!(
            (valid, constrained),
            (2 * REQUESTS - 2 * REQUESTS / u64::from(EVERY), 2 * REQUESTS),
            "{kind}"
        );
    }
}
