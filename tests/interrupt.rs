//! Interruption and resume through the real binary: SIGTERM, SIGINT and SIGHUP (a dropped SSH
//! session) end a running sweep the same clean way (exit 130, results.json and requests.jsonl
//! consistent), and `--resume` finishes the same levels from where it stopped, with prompts the
//! server's prefix cache has not seen.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use servetop::metrics::{Outcome, RequestRecord};
use servetop::sim::{self, AcceptLength, SimConfig};

mod run_files;

use run_files::{bin, request_records, results, wait_for_level_running};

/// The C=1 level's measured records.
fn first_level_records(recs: &[RequestRecord], first_level: u64) -> Vec<RequestRecord> {
    recs.iter()
        .filter(|r| !r.warmup && u64::from(r.level) == first_level)
        .cloned()
        .collect()
}

/// Runs `args`, sends SIG`sig` once the C=2 level is under way, and checks what was saved:
/// the completed requests of the interrupted level and (returned) the C=1 level's records.
fn run_and_signal(args: &[&str], dir: &Path, sig: &str) -> (u64, Vec<RequestRecord>) {
    let said = dir.with_extension("stderr");
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    // Signal once the C=2 level is under way (results.json says so): the C=1 level is then
    // finished and must survive the resume untouched. The C=2 level has 6 requests of
    // ~0.4 s, two at a time, so the signal lands well inside it.
    wait_for_level_running(dir, 1);
    let killed = Command::new("kill")
        .args([format!("-{sig}"), child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "SIG{sig} exits 130");
    // Its last line says how to finish it.
    let said = std::fs::read_to_string(&said).unwrap();
    let resume = format!("servetop run --resume {}", dir.display());
    assert!(
        said.lines().last().is_some_and(|l| l.ends_with(&resume)),
        "SIG{sig}: no `{resume}` at the end of:\n{said}"
    );

    let v = results(dir);
    assert_eq!(v["state"], "interrupted", "SIG{sig}");
    assert_eq!(v["sweep"][0]["status"], "done");
    assert_eq!(v["sweep"][0]["completed"], 6);
    assert_eq!(v["sweep"][1]["status"], "interrupted");
    assert_eq!(v["sweep"][2]["status"], "waiting");
    let recs = request_records(dir);
    let level = v["sweep"][1]["index"].as_u64().unwrap();
    let measured: Vec<&RequestRecord> = recs
        .iter()
        .filter(|r| !r.warmup && u64::from(r.level) == level)
        .collect();
    let ok = measured.iter().filter(|r| r.is_ok()).count() as u64;
    let cancelled = measured
        .iter()
        .filter(|r| r.outcome == Outcome::Cancelled)
        .count() as u64;
    assert_eq!(
        ok,
        v["sweep"][1]["completed"].as_u64().unwrap(),
        "every completed request is in requests.jsonl"
    );
    assert_eq!(cancelled, v["sweep"][1]["cancelled"].as_u64().unwrap());
    assert!(ok < 6, "the level was really interrupted");
    let first_level = v["sweep"][0]["index"].as_u64().unwrap();
    let before_resume = first_level_records(&recs, first_level);
    assert_eq!(before_resume.len(), 6);
    (ok, before_resume)
}

/// `--resume` finishes the run: every level done, the interrupted one's requests run again,
/// and the finished C=1 level kept as it was.
/// The resumed levels get prompts the server has not seen: the simulator's prefix cache (which
/// keeps every prompt's blocks) serves none of their tokens, and results.json names the new
/// seed. With the first run's seed again, the interrupted level's requests and the warmup would
/// be the same prompts, served from the cache.
fn resume_finishes(dir: &Path, ok: u64, before_resume: &[RequestRecord], cached: &dyn Fn() -> u64) {
    let first_level = results(dir)["sweep"][0]["index"].as_u64().unwrap();
    let lines_before = request_records(dir).len();
    let cached_before = cached();
    let out = Command::new(bin())
        .args(["run", "--resume", dir.to_str().unwrap(), "--headless"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = results(dir);
    assert_eq!(v["state"], "finished");
    for (i, c) in [1, 2, 4].iter().enumerate() {
        assert_eq!(v["sweep"][i]["concurrency"], *c);
        assert_eq!(v["sweep"][i]["status"], "done", "level {i} after resume");
        assert_eq!(v["sweep"][i]["completed"], 6, "level {i} after resume");
    }
    let recs = request_records(dir);
    let ok_now = recs.iter().filter(|r| !r.warmup && r.is_ok()).count();
    assert_eq!(
        ok_now as u64,
        6 + ok + 12,
        "the resumed run appended the C=2 and C=4 levels' requests only"
    );
    assert_eq!(
        first_level_records(&recs, first_level),
        before_resume,
        "the finished C=1 level was kept, not run again"
    );
    assert_eq!(
        cached(),
        cached_before,
        "the server served none of the resumed run's prompt tokens from its cache"
    );
    let resumed = &recs[lines_before..];
    assert!(
        resumed.iter().all(|r| r.cached_tokens == Some(0)),
        "every resumed request reports 0 cached tokens: {:?}",
        resumed.iter().map(|r| r.cached_tokens).collect::<Vec<_>>()
    );
    let seed = v["resumed_with_seed"].as_u64().expect("resumed_with_seed");
    assert_ne!(Some(seed), v["config"]["seed"].as_u64(), "a new seed");
}

#[test]
fn signals_stop_cleanly_and_resume_finishes_the_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 20.0;
    c.accept_length = AcceptLength::Fixed(1);
    let h = rt
        .block_on(sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0))))
        .unwrap();
    for sig in ["TERM", "INT", "HUP"] {
        let dir = std::env::temp_dir().join(format!("servetop-sig{sig}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let args = [
            "run",
            "--base-url",
            &h.url(),
            "--concurrency",
            "1,2,4",
            "--requests-per-level",
            "6",
            "--output-len",
            "20",
            "--long-context",
            "none",
            "--headless",
            "--no-gpu",
            "--grace",
            "0.3",
            "--out",
            dir.to_str().unwrap(),
        ];
        let (ok, before_resume) = run_and_signal(&args, &dir, sig);
        let cached = || h.log.lock().unwrap().total_cached_tokens;
        resume_finishes(&dir, ok, &before_resume, &cached);
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_file(dir.with_extension("stderr"));
    }
}
