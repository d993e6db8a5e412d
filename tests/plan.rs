//! The plan before the run (docs/outputs.md, "The plan"): the `plan:` line comes before the
//! warmup's, with the lengths the server's context cannot hold named at the start, not after
//! the sweep; `--dry-run` prints it and sends nothing to the server's engine; a plan of more
//! than 20 levels is said headless; `report` of two runs of different plans says so, carries
//! each plan in its legend and calls the comparison not like for like. The simulator child's own record (`GET /sim/requests`) is
//! what says whether a request reached its engine.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;

mod run_files;
mod sim_child;
mod sim_truth;

fn servetop(args: &[&str]) -> std::process::Output {
    Command::new(run_files::bin()).args(args).output().unwrap()
}

#[test]
fn the_plan_comes_first_and_names_what_does_not_fit() {
    let (child, url) = sim_child::spawn(&["--context-length", "4096"], &[]);
    let _child = sim_child::KillOnDrop(child);
    let dir = std::env::temp_dir().join(format!("servetop-plan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dry_run_sends_nothing(&url);
    the_plan_comes_before_the_warmup(&url, &dir);
    many_levels_are_said_headless(&url, &dir);
    unlike_plans_are_said_when_compared(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

fn dry_run_sends_nothing(url: &str) {
    // --dry-run: the plan and the limits, exit 0, and no request reaches the engine.
    let dry = servetop(&[
        "run",
        "--base-url",
        url,
        "--concurrency",
        "1,2",
        "--input-len",
        "100",
        "--output-len",
        "8",
        "--long-context",
        "2k,8k",
        "--dry-run",
    ]);
    let text =
        String::from_utf8_lossy(&dry.stdout).to_string() + &String::from_utf8_lossy(&dry.stderr);
    assert!(dry.status.success(), "{text}");
    let plan = text
        .lines()
        .find(|l| l.starts_with("plan: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        plan.starts_with("plan: 4 levels, ") && plan.contains("long context 2K, 8K"),
        "{plan}"
    );
    let limits = text
        .lines()
        .find(|l| l.starts_with("limits: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        limits.starts_with(
            "limits: 8K ctx needs more than the server's 4096-token context: it will be skipped"
        ) && limits.contains("servetop sim --context-length of at least 8"),
        "{limits}"
    );
    assert!(
        sim_truth::fetch(url).requests.is_empty(),
        "--dry-run sent a request to the engine"
    );
}

fn the_plan_comes_before_the_warmup(url: &str, dir: &std::path::Path) {
    // A run: the plan line before the warmup's, and kept in results.json.
    let run = servetop(&[
        "run",
        "--base-url",
        url,
        "--headless",
        "--concurrency",
        "1",
        "--requests-per-level",
        "2",
        "--input-len",
        "100",
        "--output-len",
        "8",
        "--long-context",
        "8k",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let out =
        String::from_utf8_lossy(&run.stdout).to_string() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{out}");
    let lines: Vec<&str> = out.lines().collect();
    let at = |p: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no {p} in:\n{out}"))
    };
    assert!(at("plan: ") < at("[warmup]"), "{out}");
    assert!(at("limits: 8K ctx") < at("[warmup]"), "{out}");
    let results = run_files::results(dir);
    assert!(
        results["plan"][0]
            .as_str()
            .unwrap()
            .starts_with("plan: 2 levels, 5 requests"),
        "{:#}",
        results["plan"]
    );
}

fn many_levels_are_said_headless(url: &str, dir: &std::path::Path) {
    // More than 20 levels, headless: said, and the run goes on.
    let many = servetop(&[
        "run",
        "--base-url",
        url,
        "--headless",
        "--concurrency",
        "1-21",
        "--requests-per-level",
        "1",
        "--input-len",
        "10",
        "--output-len",
        "1",
        "--long-context",
        "none",
        "--warmup",
        "0",
        "--out",
        dir.join("many").to_str().unwrap(),
    ]);
    let out =
        String::from_utf8_lossy(&many.stdout).to_string() + &String::from_utf8_lossy(&many.stderr);
    assert!(many.status.success(), "{out}");
    assert!(
        out.contains("[warning] the plan has 21 levels and 21 requests"),
        "{out}"
    );
}

fn unlike_plans_are_said_when_compared(dir: &std::path::Path) {
    let cmp = dir.join("cmp");
    let o = servetop(&[
        "report",
        dir.to_str().unwrap(),
        dir.join("many").to_str().unwrap(),
        "--label",
        "A",
        "--label",
        "B",
        "--out",
        cmp.to_str().unwrap(),
        "--chart-size",
        "400x225",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("warning: these runs had different plans"),
        "{err}"
    );
    let md = std::fs::read_to_string(cmp.join("summary.md")).unwrap();
    assert!(md.contains("## A · 100 in / 8 out tokens"), "{md}");
    assert!(md.contains("## B · 10 in / 1 out tokens"), "{md}");
    let across = md.split("## Findings across the runs").nth(1).unwrap();
    assert!(across.contains("not like for like"), "{md}");
}
