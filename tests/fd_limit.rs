//! The open-file limit at the start of a run: a socket a request in flight. Under a hard limit
//! too low for the plan, `run` stops before it sends anything — one line naming the limit and
//! how to raise it, exit 2, not a request in the simulator's record; under a soft limit too low
//! but a hard one high enough, it raises the soft limit, says so, and a level of 1000 requests
//! in flight finishes without a failure.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod sim_child;
mod sim_truth;

use std::process::Command;

/// `servetop ARGS` under `ulimit` set as `limit` (`-n 300`: soft and hard; `-Sn 300`: soft).
fn servetop_under(limit: &str, args: &[&str]) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit {limit} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_servetop"))
        .args(args)
        .env_remove("SERVETOP_API_KEY")
        .output()
        .unwrap()
}

fn run_args<'a>(url: &'a str, c: &'a str, out: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--base-url",
        url,
        "--concurrency",
        c,
        "--requests-per-level",
        "1x",
        "--input-len",
        "16",
        "--output-len",
        "4",
        "--long-context",
        "none",
        "--warmup",
        "0",
        "--no-gpu",
        "--headless",
        "--out",
        out,
    ]
}

#[test]
fn a_plan_past_the_open_file_limit_stops_before_sending_or_raises_it() {
    let (mut sim, url) = sim_child::spawn(&["--max-running", "2000"], &[]);
    let tmp = std::env::temp_dir().join(format!("servetop-fd-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let refused = tmp.join("refused").display().to_string();
    let out = servetop_under("-n 300", &run_args(&url, "1000", &refused));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("C=1000 needs about 1256 open files")
            && lines[0].contains("may open 300 (hard limit 300)")
            && lines[0].contains("ulimit -n 1256"),
        "{stderr}"
    );
    assert!(
        sim_truth::fetch(&url).requests.is_empty(),
        "nothing was sent"
    );
    // A soft limit the hard one lets it raise (where this machine's hard limit allows 1256).
    let hard = Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_string();
    if hard != "unlimited" && hard.parse::<u64>().unwrap() < 1256 {
        eprintln!(
            "the hard open-file limit here is {hard}: raising the soft limit to 1256 is not tried"
        );
        let _ = sim.kill();
        return;
    }
    let raised = tmp.join("raised").display().to_string();
    let out = servetop_under("-Sn 300", &run_args(&url, "1000", &raised));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("raised the open-file limit from 300 to 1256 for C=1000"),
        "{stderr}"
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.join("raised/results.json")).unwrap()).unwrap();
    let level = &results["sweep"][0];
    assert_eq!(level["completed"], 1000, "{level}");
    assert_eq!(level["failed"], 0, "{level}");
    let _ = sim.kill();
    let _ = std::fs::remove_dir_all(&tmp);
}
