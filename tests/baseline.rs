//! `--baseline` and `--fail-on-regression` through the binary, against a simulator child: a
//! run compared with a baseline made faster than it exits 3 naming the levels; with one made
//! slower it exits 0; the Δ in results.json is the change between the two files' numbers; bad
//! baselines are one-line errors that write nothing.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod sim_child;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A short headless run (C=1,2; 64 in / 16 out) into `out` with `extra` flags: exit code
/// and stderr.
fn run(url: &str, out: &Path, extra: &[&str]) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args([
            "run",
            "--base-url",
            url,
            "--headless",
            "--concurrency",
            "1,2",
            "--input-len",
            "64",
            "--output-len",
            "16",
            "--requests-per-level",
            "6",
            "--long-context",
            "none",
            "--out",
            out.to_str().unwrap(),
        ])
        .args(extra)
        .env_remove("SERVETOP_API_KEY")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn read(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// `results` with every sweep level's throughput multiplied by `f` and its TTFT and TPOT
/// medians divided by it (f > 1: a faster server), written to `to`.
fn scaled(results: &Value, f: f64, to: &Path) -> PathBuf {
    let mut v = results.clone();
    for l in v["sweep"].as_array_mut().unwrap() {
        for (k, by) in [
            ("output_throughput", f),
            ("median_ttft_ms", 1.0 / f),
            ("median_tpot_ms", 1.0 / f),
        ] {
            let x = l[k].as_f64().unwrap();
            l[k] = serde_json::json!(x * by);
        }
    }
    std::fs::write(to, serde_json::to_vec(&v).unwrap()).unwrap();
    to.to_path_buf()
}

#[test]
fn a_run_worse_than_its_baseline_exits_3_and_one_better_exits_0() {
    let (mut sim, url) = sim_child::spawn(&[], &[]);
    let tmp = std::env::temp_dir().join(format!("servetop-baseline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let first = tmp.join("first");
    let (code, err) = run(&url, &first, &[]);
    assert_eq!(code, 0, "{err}");
    let base = read(&first.join("results.json"));

    // Against a baseline ten times faster: every level is a regression, named on stderr.
    let fast = scaled(&base, 10.0, &tmp.join("fast.json"));
    let worse = tmp.join("worse");
    let (code, err) = run(
        &url,
        &worse,
        &[
            "--baseline",
            fast.to_str().unwrap(),
            "--fail-on-regression",
            "5",
        ],
    );
    assert_eq!(code, 3, "{err}");
    for level in ["C=1", "C=2"] {
        assert!(
            err.lines().any(|l| l.starts_with(&format!(
                "servetop: worse than the baseline: {level}: out tok/s -"
            ))),
            "{err}"
        );
    }
    let now = read(&worse.join("results.json"));
    let comparisons = now["baseline"]["comparisons"].as_array().unwrap();
    assert_eq!(comparisons.len(), 2);
    // Δ is the change between the two files' values, in percent of the baseline's.
    let fast_v = read(&fast);
    for (i, c) in comparisons.iter().enumerate() {
        let b = fast_v["sweep"][i]["output_throughput"].as_f64().unwrap();
        let n = now["sweep"][i]["output_throughput"].as_f64().unwrap();
        let want = (n - b) / b * 100.0;
        let got = c["output_throughput_pct"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        assert!(got < -80.0, "ten times slower than the baseline: {got}");
        let b = fast_v["sweep"][i]["median_ttft_ms"].as_f64().unwrap();
        let n = now["sweep"][i]["median_ttft_ms"].as_f64().unwrap();
        let got = c["ttft_p50_pct"].as_f64().unwrap();
        assert!((got - (n - b) / b * 100.0).abs() < 1e-6);
        assert!(c["regression"].as_str().unwrap().contains("limit 5%"));
    }
    let md = std::fs::read_to_string(worse.join("summary.md")).unwrap();
    assert!(md.contains("## Against the baseline"), "{md}");
    assert!(md.contains("**worse by more than 5%**"), "{md}");

    // Against a baseline ten times slower: better everywhere, no regression, exit 0.
    let slow = scaled(&base, 0.1, &tmp.join("slow.json"));
    let better = tmp.join("better");
    let (code, err) = run(
        &url,
        &better,
        &[
            "--baseline",
            slow.to_str().unwrap(),
            "--fail-on-regression",
            "5",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("worse than the baseline"), "{err}");
    let now = read(&better.join("results.json"));
    for c in now["baseline"]["comparisons"].as_array().unwrap() {
        assert!(c["output_throughput_pct"].as_f64().unwrap() > 100.0, "{c}");
        assert!(c.get("regression").is_none(), "{c}");
    }

    // The same comparison offline, of saved runs: `report --baseline`, the same verdicts.
    let report = |dir: &Path, base: &Path| {
        Command::new(env!("CARGO_BIN_EXE_servetop"))
            .arg("report")
            .arg(dir)
            .arg("--baseline")
            .arg(base)
            .args(["--fail-on-regression", "5"])
            .output()
            .unwrap()
    };
    let o = report(&worse, &fast);
    assert_eq!(o.status.code(), Some(3));
    let table = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        table.matches("**worse by more than 5%**").count(),
        2,
        "{table}"
    );
    assert_eq!(report(&better, &slow).status.code(), Some(0));

    // A run directory works as well as its results.json; without a limit nothing is judged.
    let plain = tmp.join("plain");
    let (code, err) = run(&url, &plain, &["--baseline", first.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let now = read(&plain.join("results.json"));
    assert_eq!(now["baseline"]["comparisons"].as_array().unwrap().len(), 2);

    bad_baselines_are_one_line_errors(&url, &tmp, &first);
    let _ = sim.kill();
    the_limits_edge_and_one_figure_alone(&tmp, &first, &base);
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Bad baselines: one line, exit 2, no run directory.
fn bad_baselines_are_one_line_errors(url: &str, tmp: &Path, first: &Path) {
    let missing = tmp.join("missing");
    let nowhere = tmp.join("nowhere");
    let other_lengths = tmp.join("other");
    std::fs::write(tmp.join("junk.json"), "{\"not\": \"results\"}").unwrap();
    let junk = tmp.join("junk.json");
    for (flags, want) in [
        (vec!["--baseline", missing.to_str().unwrap()], "cannot read"),
        (
            vec!["--baseline", junk.to_str().unwrap()],
            "is not a servetop results file",
        ),
    ] {
        let (code, err) = run(url, &nowhere, &flags);
        assert_eq!(code, 2, "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
        assert!(!nowhere.exists());
    }
    // A gate over a baseline that shares no level with the plan (other lengths) compares
    // nothing: bad input.
    let o = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["run", "--base-url", url, "--headless", "--concurrency", "1"])
        .args(["--input-len", "99", "--long-context", "none", "--out"])
        .arg(&other_lengths)
        .args([
            "--baseline",
            first.to_str().unwrap(),
            "--fail-on-regression",
            "5",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no level of this plan matches"), "{err}");
    assert!(!other_lengths.exists());
}

/// The limit's edge, one figure at a time, offline (`report --baseline`, no timing involved): a
/// baseline whose one figure makes this run 4.9 % worse passes a 5 % gate, one that makes it
/// 5.1 % worse fails it, naming that figure and no other, for throughput, TTFT and TPOT alike.
fn the_limits_edge_and_one_figure_alone(tmp: &Path, run: &Path, now: &Value) {
    // (key, name on stderr, the baseline value that makes this run worse by `w`).
    type Make = fn(f64, f64) -> f64;
    let figures: [(&str, &str, Make); 3] = [
        // Lower throughput is worse: now = base · (1 − w).
        ("output_throughput", "out tok/s", |n, w| n / (1.0 - w)),
        // Higher latency is worse: now = base · (1 + w).
        ("median_ttft_ms", "TTFT p50", |n, w| n / (1.0 + w)),
        ("median_tpot_ms", "TPOT p50", |n, w| n / (1.0 + w)),
    ];
    for (key, name, make) in figures {
        for (worse, fails) in [(0.049, false), (0.051, true)] {
            let mut v = now.clone();
            for l in v["sweep"].as_array_mut().unwrap() {
                let n = l[key].as_f64().unwrap();
                l[key] = serde_json::json!(make(n, worse));
            }
            let path = tmp.join(format!("{key}-{worse}.json"));
            std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
            let o = Command::new(env!("CARGO_BIN_EXE_servetop"))
                .arg("report")
                .arg(run)
                .arg("--baseline")
                .arg(&path)
                .args(["--fail-on-regression", "5"])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            let what = format!("{name} {:.1} % worse", worse * 100.0);
            if fails {
                assert_eq!(o.status.code(), Some(3), "{what}: {err}");
                let lines: Vec<&str> = err
                    .lines()
                    .filter(|l| l.starts_with("servetop: worse than the baseline: "))
                    .collect();
                assert_eq!(lines.len(), 2, "{what}: both levels named: {err}");
                for l in lines {
                    assert!(l.contains(name), "{what}: {l}");
                    for other in ["out tok/s", "TTFT p50", "TPOT p50"] {
                        assert!(other == name || !l.contains(other), "{what}: {l}");
                    }
                    assert!(l.ends_with("(limit 5%)"), "{what}: {l}");
                }
            } else {
                assert_eq!(o.status.code(), Some(0), "{what}: {err}");
                assert!(!err.contains("worse than the baseline"), "{what}: {err}");
            }
        }
    }
    // A baseline of other lengths shares no level with the run: the comparison asked for
    // cannot be made, and says so with a failing exit, gate or not.
    let mut other = now.clone();
    for l in other["sweep"].as_array_mut().unwrap() {
        l["input_len"] = serde_json::json!(l["input_len"].as_u64().unwrap() + 1);
    }
    let path = tmp.join("other-lengths.json");
    std::fs::write(&path, serde_json::to_vec(&other).unwrap()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .arg("report")
        .arg(run)
        .arg("--baseline")
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no level of this plan matches"), "{err}");
}
