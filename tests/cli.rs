//! The binary's answers to bad input: one line naming the problem, exit code 2, fast.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod sim_child;

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

/// An address where nothing listens.
const U: &str = "http://127.0.0.1:9";

/// Bad input, and what its one-line error must say.
const BAD_INPUTS: [(&[&str], &str); 53] = [
    (
        &[
            "run",
            "--base-url",
            U,
            "--images",
            "1",
            "--backend",
            "openai",
        ],
        "--images go in chat messages",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--images",
            "1",
            "--image-size",
            "512",
        ],
        "--image-size '512' must look like",
    ),
    (
        &["sim", "--lora-modules", "a,b", "--lora-switch-ms", "c=4"],
        "--lora-switch-ms: 'c' is not one of --lora-modules",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--concurrency",
            "1",
            "--lora-dist",
            "zipf:0",
        ],
        "'zipf:0' is not uniform, round-robin or zipf:S",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--concurrency",
            "1",
            "--range-ratio",
            "1",
        ],
        "'1' is not a spread from 0 to below 1",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--range-ratio",
            "0.2",
            "--dataset",
            "Cargo.toml",
        ],
        "--range-ratio spreads random prompts' lengths; a --dataset or --trace sets each request's own",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--range-ratio",
            "0.5",
            "--input-len",
            "1000",
            "--shared-prefix-len",
            "500",
        ],
        "--range-ratio 0.5 draws prompts as short as 500 tokens, which cannot hold --shared-prefix-len 500",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--shard",
            "0/2",
            "--level-seconds",
            "9",
            "--start-at",
            "+30",
        ],
        "+S counts from each machine's own start",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--level-seconds",
            "9",
            "--drain-seconds",
            "1",
            "--start-at",
            "+30",
        ],
        "--drain-seconds 1 is shorter than --grace 3",
    ),
    (
        &[
            "run",
            "--serve",
            "true {port}",
            "--serve-param=--a=1,2",
            "--level-seconds",
            "5",
            "--start-at",
            "+10",
        ],
        "--start-at with --serve-param",
    ),
    (
        &["run", "--base-url", U, "--shard", "4/4"],
        "--shard 4/4: expected I/N with 0 ≤ I < N",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--shard",
            "1/4",
            "--level-seconds",
            "30",
        ],
        "give every shard the same --start-at TIME and --level-seconds S",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--level-seconds",
            "10",
            "--start-at",
            "noon",
        ],
        "--start-at noon: not a time",
    ),
    (
        &["report", "--merge", "/nonexistent-shard-dir"],
        "no shard could be read",
    ),
    // Before the server is asked anything (port 9 would say "cannot reach").
    (
        &[
            "run",
            "--base-url",
            "http://127.0.0.1:9",
            "--dataset",
            "/nonexistent.jsonl",
        ],
        "--dataset /nonexistent.jsonl: no such file",
    ),
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
    (
        &["run", "--base-url", U, "--search", "rate"],
        "--search needs --slo",
    ),
    (
        &["run", "--base-url", U, "--slo", "speed:3"],
        "unknown SLO metric 'speed' (use ttft, tpot, itl, e2el)",
    ),
    (
        &["run", "--base-url", U, "--slo", "itl:fast"],
        "'fast' is not a positive number of ms",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--slo",
            "tpot:50",
            "--slo-percentile",
            "100",
        ],
        "--slo-percentile '100' is not a percentile between 0 and 100",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--slo",
            "tpot:50",
            "--search",
            "rate",
            "--search-precision",
            "0%",
        ],
        "--search-precision '0%' must be a percentage like 5% or a rate in req/s like 0.5",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--slo",
            "tpot:50",
            "--search",
            "speed",
        ],
        "--search 'speed': the searches are 'rate' and 'concurrency'",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--slo",
            "tpot:50",
            "--search",
            "concurrency",
            "--sessions",
            "2,4",
        ],
        "--search concurrency picks the users of each session level: give --sessions one number, its first probe",
    ),
    (
        &["run", "--base-url", U, "--sessions", "2", "--fan-out", "65"],
        "--fan-out 65: at most 64 sub-agents a session",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--sessions",
            "2",
            "--fan-out",
            "2",
            "--sub-agent-turns",
            "0",
        ],
        "--sub-agent-turns must be between 1 and 1000",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--slo",
            "tpot:50",
            "--search",
            "rate",
            "--request-rate",
            "1,2",
        ],
        "--search rate picks its own levels",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--slo",
            "tpot:50",
            "--search",
            "rate",
            "--search-seconds",
            "0",
        ],
        "--search-seconds must be a positive number of seconds",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--trace",
            "/nonexistent/trace.jsonl",
        ],
        "--trace /nonexistent/trace.jsonl: cannot read it",
    ),
    (
        &["run", "--base-url", U, "--trace", "Cargo.toml"],
        "--trace Cargo.toml: neither Mooncake JSONL",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--trace",
            TRACE,
            "--request-rate",
            "2",
        ],
        "--trace replays the trace alone",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--trace",
            TRACE,
            "--trace-speedup",
            "0",
        ],
        "--trace-speedup 0: a factor above 0",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--trace",
            TRACE,
            "--trace-window",
            "5:1",
        ],
        "--trace-window \"5:1\": seconds FROM:TO",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--trace",
            TRACE,
            "--trace-window",
            "100:200",
        ],
        "--trace-window 100:200: no request of",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--trace",
            TRACE,
            "--trace-format",
            "csv",
        ],
        "--trace-format \"csv\": use mooncake",
    ),
    (
        &["run", "--base-url", U, "--repeat", "0"],
        "--repeat 0: run each level 1 to 100 times",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--slo",
            "tpot:50",
            "--search",
            "rate",
            "--repeat",
            "3",
        ],
        "--repeat with --search",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--shape-mix",
            "100/10:2,300/5",
            "--dataset",
            SPEC,
        ],
        "--shape-mix and --length-dist draw servetop's own prompt lengths",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--concurrency",
            "1",
            "--length-dist",
            "lognormal:0",
        ],
        "is not lognormal:S",
    ),
    (
        &["demo", "--trace", "/nonexistent/trace.csv"],
        "--trace /nonexistent/trace.csv: cannot read it",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--content",
            "code",
            "--input-len",
            "100",
        ],
        "--content: prompts of 100 tokens (after any shared prefix) are too short",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--content",
            "code",
            "--dataset",
            SPEC,
        ],
        "--content and --dataset both choose the prompts",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--dataset",
            SPEC,
            "--categories",
            "qa,poetry",
        ],
        "has no category 'poetry' (it has coding, qa, math_reasoning)",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--dataset",
            PROMPTS,
            "--categories",
            "all",
        ],
        "--categories: no entry of",
    ),
    (
        &["sim", "--accept-by-content", "code=70"],
        "--accept-by-content 'code=70': the accept length must be a number from 1 to 64",
    ),
    (
        &["sim", "--accept-by-content", "poem=2"],
        "'poem' is not a content kind",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--concurrency",
            "1",
            "--shapes",
            "1000",
        ],
        "'1000': a shape is IN/OUT tokens, e.g. 1000/500",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--shapes",
            "100/10",
            "--dataset",
            SPEC,
        ],
        "--shapes and --dataset both set the lengths",
    ),
    (
        &[
            "run",
            "--base-url",
            U,
            "--shapes",
            "4000/10,100/10",
            "--shared-prefix-len",
            "500",
        ],
        "--shared-prefix-len 500 must be less than every shape's input (100 is the shortest)",
    ),
];

/// A plain prompts file, without categories.
const PROMPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data/prompts.jsonl");

/// A Spec-Bench question file the project wrote.
const SPEC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/spec_bench_question.jsonl"
);

/// The Mooncake sample trace.
const TRACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/examples/data/trace-mooncake.jsonl"
);

#[test]
fn bad_inputs_give_one_line_and_exit_2() {
    for (args, want) in BAD_INPUTS {
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
    assert_eq!(out.status.code(), Some(0), "--help is not an error");
    let s = String::from_utf8_lossy(&out.stdout);
    // Each command on a line of its own in the Commands list, with its description.
    for c in ["run", "sim", "demo"] {
        assert!(
            s.lines()
                .any(|l| l.trim_start().starts_with(&format!("{c} "))),
            "{s}"
        );
    }
}

/// `run -h` fits one 80-line screen at 80 columns: the flags most runs need under their
/// headings, then examples against SGLang, vLLM and llama.cpp; `run --help` has every flag,
/// grouped under the same headings and more.
#[test]
fn run_help_is_short_and_grouped() {
    let help = |flag: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
            .args(["run", flag])
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let short = help("-h");
    let lines = short.lines().count();
    assert!(lines <= 80, "run -h is {lines} lines:\n{short}");
    assert!(short.lines().all(|l| l.chars().count() <= 80), "{short}");
    for must in [
        "Server:",
        "Plan:",
        "Outputs:",
        "--base-url",
        "--concurrency",
        "--input-len",
        "--output-len",
        "--long-context",
        "--dry-run",
        "--yes",
        "# SGLang",
        "# vLLM",
        "# llama-server",
    ] {
        assert!(short.contains(must), "run -h lacks {must}:\n{short}");
    }
    // Rarer flags wait for --help.
    assert!(!short.contains("--gpu-hour-cost"), "{short}");
    let long = help("--help");
    for must in [
        "Server:",
        "Plan:",
        "Workload:",
        "SLO and capacity search:",
        "Telemetry and cost:",
        "Outputs:",
        "Distributed (several client machines):",
        "--gpu-hour-cost",
        "--trace-speedup",
    ] {
        assert!(long.contains(must), "run --help lacks {must}");
    }
}

/// A `servetop sim` child on a free port; returns it and its URL.
fn sim_child() -> (std::process::Child, String) {
    sim_child_with(&[], &[])
}

/// A simulator child process at a 32K context, with extra arguments and environment.
fn sim_child_with(args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, String) {
    let mut all = vec!["--context-length", "32768"];
    all.extend_from_slice(args);
    sim_child::spawn(&all, env)
}

#[test]
fn bad_inputs_against_a_live_server() {
    let (mut sim, url) = sim_child();
    let not_llm = format!("{url}/health");
    let ctx_dir = std::env::temp_dir().join(format!("servetop-ctx-{}", std::process::id()));
    let bad_dataset =
        std::env::temp_dir().join(format!("servetop-bad-dataset-{}.jsonl", std::process::id()));
    std::fs::write(&bad_dataset, "{\"prompt\": \"fine\"}\n{\"prompt\": oops}\n").unwrap();
    let bad_dataset_line = format!("--dataset {} line 2: not JSON", bad_dataset.display());
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec![
                "run",
                "--base-url",
                &url,
                "--headless",
                "--dataset",
                bad_dataset.to_str().unwrap(),
                "--out",
                ctx_dir.to_str().unwrap(),
            ],
            bad_dataset_line,
        ),
        (
            vec![
                "run",
                "--base-url",
                &url,
                "--headless",
                "--dataset",
                "/nonexistent/sharegpt.json",
            ],
            "--dataset /nonexistent/sharegpt.json: no such file".into(),
        ),
        (
            vec!["run", "--base-url", &url, "--model", "nope", "--headless"],
            format!("model 'nope' is not served at {url}; it serves: sim/fast"),
        ),
        (
            vec![
                "run",
                "--base-url",
                &url,
                "--headless",
                "--out",
                "/proc/servetop-cannot-write-here",
            ],
            "cannot create output directory /proc/servetop-cannot-write-here".into(),
        ),
        (
            vec![
                "run",
                "--base-url",
                &url,
                "--headless",
                "--tokenizer",
                "/nonexistent/tokenizer.json",
            ],
            "cannot read tokenizer /nonexistent/tokenizer.json".into(),
        ),
        (
            vec!["run", "--base-url", &not_llm, "--headless"],
            "is it an LLM server, and is the URL its root (without /v1)?".into(),
        ),
        (
            vec![
                "run",
                "--base-url",
                &url,
                "--headless",
                "--input-len",
                "40000",
                "--long-context",
                "none",
                "--out",
                ctx_dir.to_str().unwrap(),
            ],
            "no planned level fits the server's context limit of 32768 tokens (/v1/models max_model_len): the smallest needs 40500 (prompt + output); raise it with servetop sim --context-length to at least 40500".into(),
        ),
    ];
    for (args, want) in cases {
        let (code, err, took) = servetop(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(&want), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
    }
    assert!(
        !ctx_dir.exists(),
        "nothing is written for a run that cannot start"
    );
    let _ = sim.kill();
}

/// Every file under `dir`, subfolders included.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn the_api_key_is_sent_and_never_written() {
    let secret = "sk-servetop-test-SECRET-1234567890";
    // The server refuses /v1/* without this key, as vLLM's --api-key does: a run that
    // finishes proves the key went out with every request.
    let (mut sim, url) = sim_child_with(
        &["--api-key-env", "SERVETOP_SIM_KEY"],
        &[("SERVETOP_SIM_KEY", secret)],
    );
    let dir = std::env::temp_dir().join(format!("servetop-secret-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args([
            "run",
            "--base-url",
            &url,
            "--concurrency",
            "1",
            "--requests-per-level",
            "2",
            "--output-len",
            "5",
            "--long-context",
            "none",
            "--headless",
            "--no-gpu",
            "--out",
            dir.to_str().unwrap(),
        ])
        .env("SERVETOP_API_KEY", secret)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!printed.contains(secret));
    let files = files_under(&dir);
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} holds the API key",
            path.display()
        );
    }
    let names: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    for must in [
        "results.json",
        "summary.md",
        "requests.jsonl",
        "servetop.log",
        "sweep.csv",
    ] {
        assert!(
            names.iter().any(|n| n == must),
            "{must} not among {names:?}"
        );
    }
    assert!(
        names.iter().any(|n| n.starts_with("charts/")),
        "charts checked too: {names:?}"
    );
    // With a wrong key the server answers 401, and servetop says so in one line.
    let wrong_dir = dir.with_extension("wrong");
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["run", "--base-url", &url, "--concurrency", "1"])
        .args(["--requests-per-level", "2", "--long-context", "none"])
        .args([
            "--headless",
            "--no-gpu",
            "--out",
            wrong_dir.to_str().unwrap(),
        ])
        .env("SERVETOP_API_KEY", "sk-wrong")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // Bad input: exit 2, one line naming the status and the variable to fix, the key itself
    // never printed, nothing written.
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("HTTP 401") && err.contains("$SERVETOP_API_KEY"),
        "{err}"
    );
    assert!(!err.contains("sk-wrong"), "{err}");
    assert!(!wrong_dir.exists(), "a refused key writes no run");
    let _ = std::fs::remove_dir_all(&wrong_dir);
    let results = std::fs::read_to_string(dir.join("results.json")).unwrap();
    assert!(
        results.contains("\"api_key_env\": \"SERVETOP_API_KEY\""),
        "the variable's name is recorded"
    );
    let _ = sim.kill();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The words of a sentence, lowercase, without `e.g.`/`i.e.`: what it says, not how it is cut.
fn words(sentence: &str) -> Vec<String> {
    sentence
        .to_lowercase()
        .replace("e.g.", " ")
        .replace("i.e.", " ")
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether two sentences say the same thing: the shorter's words (four or more) nearly all
/// (80 %) in the longer. Catches a short help repeated, reworded a little, in the long help.
fn same_sentence(a: &str, b: &str) -> bool {
    let (a, b) = (words(a), words(b));
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short == long {
        return true;
    }
    short.len() >= 4 && short.iter().filter(|w| long.contains(w)).count() * 5 >= short.len() * 4
}

/// Each option's help in a rendered `--help`: the option line, then its text joined into one
/// line (its wrapping undone).
fn option_helps(help: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        let option = line.strip_prefix("  ").is_some_and(|l| {
            l.starts_with('-') || l.starts_with("    --") || l.starts_with(['<', '['])
        });
        if option {
            let (name, rest) = line
                .trim()
                .split_once("  ")
                .map_or((line.trim(), ""), |(n, r)| (n, r.trim()));
            out.push((name.to_string(), rest.to_string()));
        } else if !line.starts_with(' ') {
            // A heading or the text after the options ends the option before it.
            out.push((String::new(), String::new()));
        } else if let Some((_, text)) = out.last_mut() {
            text.push(' ');
            text.push_str(line.trim());
        }
    }
    out.retain(|(name, _)| !name.is_empty());
    out
}

/// The sentences (over 20 characters) said twice within one option's `--help`, for every
/// command: `(command, option, sentence, its repeat)`.
fn repeated_sentences() -> Vec<(String, String, String, String)> {
    use clap::CommandFactory;
    let mut cli = servetop::cli::Cli::command();
    cli.build();
    let names: Vec<String> = cli
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let mut found = Vec::new();
    for name in names {
        let help = cli
            .find_subcommand_mut(&name)
            .unwrap()
            .render_long_help()
            .to_string();
        for (option, text) in option_helps(&help) {
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            // `e.g. x` does not end a sentence.
            let text = text
                .replace("e.g. ", "e.g.\u{a0}")
                .replace("i.e. ", "i.e.\u{a0}");
            let sentences: Vec<&str> = text
                .split(". ")
                .map(str::trim)
                .filter(|s| s.chars().count() > 20)
                .collect();
            for (i, a) in sentences.iter().enumerate() {
                for b in &sentences[i + 1..] {
                    if same_sentence(a, b) {
                        found.push((name.clone(), option.clone(), (*a).into(), (*b).into()));
                    }
                }
            }
        }
    }
    found
}

/// `--help` says each thing once: an option's first paragraph is its `-h` help, and the
/// paragraphs after it only add what it did not say.
#[test]
fn long_help_never_repeats_a_sentence() {
    let found = repeated_sentences();
    let list: Vec<String> = found
        .iter()
        .map(|(c, o, a, b)| format!("{c} {o}: {a:?} again as {b:?}"))
        .collect();
    assert!(
        found.is_empty(),
        "{} sentences said twice:\n{}",
        found.len(),
        list.join("\n")
    );
}

#[test]
fn the_repeat_check_sees_a_reworded_repeat_and_not_two_sentences() {
    assert!(same_sentence(
        "Server root URL, without /v1 (`http://127.0.0.1:30000`)",
        "Server root URL, without /v1 (e.g. `http://127.0.0.1:30000`)"
    ));
    assert!(!same_sentence(
        "Seconds to wait for the server --serve started to answer /health",
        "Its output goes to server.log in the run directory"
    ));
    let helps = option_helps(
        "Server:\n      --base-url <URL>\n          Server root URL. Without\n          /v1\n\n  -h, --help\n          Print help\n",
    );
    assert_eq!(
        helps,
        [
            (
                "--base-url <URL>".to_string(),
                " Server root URL. Without /v1".to_string()
            ),
            ("-h, --help".to_string(), " Print help".to_string())
        ]
    );
}

/// A directory that holds a run already is refused before anything starts, and left as it
/// was: `run` would add its records to that run's `requests.jsonl` (its `--resume` appends), and
/// `bench-client` would write its cases' directories again. Both refusals come before any
/// server is reached (the address here has nothing listening: a run that went on would fail
/// on it instead).
#[test]
fn a_directory_that_holds_a_run_is_refused_and_left_as_it_was() {
    let base = std::env::temp_dir().join(format!("servetop-held-{}", std::process::id()));
    let cases: [(&str, &[&str], &str); 3] = [
        (
            "results.json",
            &["run", "--base-url", U, "--headless"],
            "holds a run already (results.json)",
        ),
        (
            "requests.jsonl",
            &["run", "--base-url", U, "--headless"],
            "holds a run already (requests.jsonl)",
        ),
        (
            "bench-client.json",
            &["bench-client", "--concurrency", "1"],
            "holds a bench-client run already (bench-client.json)",
        ),
    ];
    for (file, args, want) in cases {
        let dir = base.join(file);
        std::fs::create_dir_all(&dir).unwrap();
        let kept = format!("the earlier run's {file}\n");
        std::fs::write(dir.join(file), &kept).unwrap();
        let mut all = args.to_vec();
        all.extend(["--out", dir.to_str().unwrap()]);
        let (code, err, _) = servetop(&all);
        assert_eq!(code, 2, "{all:?}: {err}");
        assert!(err.contains(want), "{all:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{all:?}: {err}");
        assert_eq!(std::fs::read_to_string(dir.join(file)).unwrap(), kept);
        assert_eq!(
            files_under(&dir),
            vec![dir.join(file)],
            "{all:?} wrote nothing"
        );
    }
    // An empty directory, or one with other files, is a run directory as before.
    let empty = base.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (code, err, _) = servetop(&[
        "run",
        "--base-url",
        U,
        "--headless",
        "--out",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("holds a run"), "{err}");
    let _ = std::fs::remove_dir_all(&base);
}
