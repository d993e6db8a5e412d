//! The binary's answers to bad input: one line naming the problem, exit code 2, fast.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

fn servetop(args: &[&str]) -> (i32, String, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(args)
        .env_remove("SERVETOP_API_KEY")
        .output()
        .expect("binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    (out.status.code().unwrap_or(-1), stderr, t.elapsed())
}

#[test]
fn bad_inputs_give_one_line_and_exit_2() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["run", "--base-url", "http://127.0.0.1:9", "--headless"],
            "cannot reach http://127.0.0.1:9",
        ),
        (
            &["run", "--base-url", "ftp://example", "--headless"],
            "must start with http:// or https://",
        ),
        (
            &["run", "--base-url", "not a url", "--headless"],
            "is not a URL",
        ),
        (
            &[
                "run",
                "--base-url",
                "http://127.0.0.1:9",
                "--concurrency",
                "4,2",
            ],
            "must be strictly increasing",
        ),
        (
            &[
                "run",
                "--base-url",
                "http://127.0.0.1:9",
                "--concurrency",
                "none",
                "--long-context",
                "none",
            ],
            "nothing to run",
        ),
        (&["sim", "--preset", "nope"], "unknown preset 'nope'"),
    ];
    for (args, want) in cases {
        let (code, err, took) = servetop(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
        if !args.contains(&"--concurrency") {
            // clap prints usage lines after its error; our own errors are a single line.
            assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        }
    }
}

#[test]
fn help_lists_the_three_commands() {
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .arg("--help")
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    for c in ["run", "sim", "demo"] {
        assert!(s.contains(c), "{s}");
    }
}
