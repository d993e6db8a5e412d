//! The plan before the run (docs/outputs.md, "The plan"): the `plan:` line comes before the
//! warmup's, with the lengths the server's context cannot hold named at the start, not after
//! the sweep; `--dry-run` prints it and sends nothing to the server's engine; a plan of more
//! than 20 levels is said headless; `report` of two runs of different plans says so, carries
//! each plan in its chart subtitles and calls the comparison not like for like. The plan line says its
//! time (`about …`) and what it was estimated from: the stated default on a server that has
//! served nothing, the warmup once it is back, an earlier run against the same server after
//! one; lengths the server cannot hold are not counted. The simulator child's own record (`GET /sim/requests`) is
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
    a_search_and_a_tune_say_their_time(&url);
    sessions_say_their_time_with_their_tool_waits(&url);
    the_plan_comes_before_the_warmup(&url, &dir);
    many_levels_are_said_headless(&url, &dir);
    an_earlier_run_is_the_next_plans_basis(&url, &dir);
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
    // On stdout, with its time from the stated default (the server has served nothing), the
    // 8K length it cannot hold left out.
    assert!(
        String::from_utf8_lossy(&dry.stdout).contains(plan),
        "the plan is on stdout"
    );
    let (low, high) = time_range(plan);
    assert!(plan.contains("(no basis yet: assumed "), "{plan}");
    assert!(
        plan.contains("1 to be skipped, not counted (longer than the server's context)"),
        "{plan}"
    );
    // The default's arithmetic, which the test does itself: C=1 and C=2, 10 requests each
    // (`3×C`, at least 10), 100 in / 8 out; 2K three times, 256 out each.
    let requests = |c: f64| (3.0 * c).ceil().max(10.0);
    let t1 = |p: f64, d: f64, i: f64, o: f64| i / p + o / d;
    let (fast, slow) = ((20_000.0, 120.0), (2_000.0, 20.0));
    let want_low = requests(1.0) * t1(fast.0, fast.1, 100.0, 8.0)
        + (requests(2.0) / 2.0).ceil() * t1(fast.0, fast.1, 100.0, 8.0)
        + 3.0 * t1(fast.0, fast.1, 2000.0, 256.0);
    let want_high = requests(1.0) * t1(slow.0, slow.1, 100.0, 8.0)
        + (requests(2.0) / 2.0).ceil() * t1(slow.0, slow.1, 100.0, 8.0) * 2f64.powf(0.75)
        + 3.0 * t1(slow.0, slow.1, 2000.0, 256.0);
    assert!(
        in_words(want_low) == low && in_words(want_high) == high,
        "{plan}: want {want_low:.1}–{want_high:.1} s"
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

/// The stated default's single request of 100 in / 8 out: fast (20K tok/s prefill, 120 tok/s a
/// stream) and slow (2K, 20).
fn one_request_s() -> (f64, f64) {
    (100.0 / 20_000.0 + 8.0 / 120.0, 100.0 / 2_000.0 + 8.0 / 20.0)
}

/// An SLO search's time by the test's own arithmetic: a throughput probe of C=4 and 16
/// requests (4 waves; the slow end each wave ×4^¾), then `probes` rate probes of 1 s at least,
/// each at most as long as 10 requests at the throughput probe's slowest rate (3.2 s), and one
/// request's drain.
fn search_s(probes: (f64, f64)) -> (f64, f64) {
    let (fast, slow) = one_request_s();
    let (tp_low, tp_high) = (4.0 * fast, 4.0 * slow * 4f64.powf(0.75));
    let longest = 1f64.max(10.0 / (16.0 / tp_high)) + slow;
    (tp_low + probes.0 * 1.0, tp_high + probes.1 * longest)
}

const SEARCH_PLAN: &[&str] = &[
    "--input-len",
    "100",
    "--output-len",
    "8",
    "--slo",
    "ttft:500",
    "--search-probe-concurrency",
    "4",
    "--search-seconds",
    "1",
    "--search-min-requests",
    "10",
];

/// `run --search rate --dry-run` counts its throughput probe and 2–16 rate probes; `tune
/// --dry-run` its configurations' levels and searches, the later ones stopped early from one
/// probe up.
fn a_search_and_a_tune_say_their_time(url: &str) {
    let search = servetop(
        &[
            &["run", "--base-url", url, "--search", "rate"],
            SEARCH_PLAN,
            &["--dry-run"],
        ]
        .concat(),
    );
    let out = String::from_utf8_lossy(&search.stdout);
    assert!(search.status.success(), "{out}");
    let plan = out.lines().find(|l| l.starts_with("plan: ")).unwrap();
    assert!(
        plan.contains(
            "; the SLO search as its throughput probe and 2–16 rate probes of at least 1 s;"
        ),
        "{plan}"
    );
    let (low, high) = search_s((2.0, 16.0));
    assert_eq!(time_range(plan), (in_words(low), in_words(high)), "{plan}");

    let tune = servetop(
        &[
            &[
                "tune",
                "--serve",
                "servetop sim --port {port}",
                "--serve-param=--max-running=1,4",
                "--serve-param=--decode-step-ms=10,20",
                "--concurrency",
                "1",
                "--requests-per-level",
                "3",
                "--min-requests",
                "3",
            ],
            SEARCH_PLAN,
            &["--dry-run"],
        ]
        .concat(),
    );
    let out = String::from_utf8_lossy(&tune.stdout);
    assert!(
        tune.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&tune.stderr)
    );
    let plan = out.lines().find(|l| l.starts_with("plan: ")).unwrap();
    assert!(
        plan.contains("; 4 configurations, each its levels and an SLO search of 1–16 rate probes of at least 1 s;"),
        "{plan}"
    );
    // Four configurations of three single requests; the first search in full, the three
    // others from one probe (a fail at the rate to beat ends them).
    let (fast, slow) = one_request_s();
    let (full, early) = (search_s((2.0, 16.0)), search_s((1.0, 16.0)));
    let low = 4.0 * 3.0 * fast + full.0 + 3.0 * early.0;
    let high = 4.0 * 3.0 * slow + full.1 + 3.0 * early.1;
    assert_eq!(time_range(plan), (in_words(low), in_words(high)), "{plan}");
}

/// `--sessions 2` of 4 sessions of 3 turns, 2 s tool waits: 12 requests in 6 waves of the two
/// users, and each user's 2 sessions wait 2 s before each of their 2 later turns (8 s).
fn sessions_say_their_time_with_their_tool_waits(url: &str) {
    let dry = servetop(&[
        "run",
        "--base-url",
        url,
        "--concurrency",
        "none",
        "--long-context",
        "none",
        "--sessions",
        "2",
        "--sessions-per-level",
        "4",
        "--turns",
        "3",
        "--tool-wait",
        "2",
        "--input-len",
        "100",
        "--output-len",
        "8",
        "--dry-run",
    ]);
    let out = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{out}");
    let plan = out.lines().find(|l| l.starts_with("plan: ")).unwrap();
    assert!(
        plan.contains("sessions C=2 (4 sessions a level of 3 turns, tool results of 1K tokens after a tool wait of 2 s ≤ 30 s)"),
        "{plan}"
    );
    let (fast, slow) = one_request_s();
    let waits = 2.0 * 2.0 * 2.0;
    let (low, high) = (6.0 * fast + waits, 6.0 * slow * 2f64.powf(0.75) + waits);
    assert_eq!(time_range(plan), (in_words(low), in_words(high)), "{plan}");
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
    // Once the warmup is back, the time again from its speeds, before the first level.
    let time = at("[time] ");
    assert!(at("[warmup] ok") < time && time < at("[C=1]"), "{out}");
    assert!(
        lines[time].contains(" for the 1 level (from the warmup request ("),
        "{}",
        lines[time]
    );
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

/// The next plan against the same server is estimated from the runs beside its directory: the
/// newest with the same server and model.
fn an_earlier_run_is_the_next_plans_basis(url: &str, dir: &std::path::Path) {
    let next = dir.join("next");
    let dry = servetop(&[
        "run",
        "--base-url",
        url,
        "--concurrency",
        "1",
        "--long-context",
        "none",
        "--out",
        next.to_str().unwrap(),
        "--dry-run",
    ]);
    let out = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{out}");
    let plan = out.lines().find(|l| l.starts_with("plan: ")).unwrap();
    time_range(plan);
    let earlier = format!(
        "(from the run in {} against this server and model;",
        dir.join("many").display()
    );
    assert!(plan.contains(&earlier), "{plan}");
}

/// The time of a plan line as said (`about 3 min` → both ends `3 min`; `about 20 s–3 min`).
fn time_range(plan: &str) -> (String, String) {
    let said = plan
        .split("; time: about ")
        .nth(1)
        .unwrap_or_else(|| panic!("no `time: about` in {plan}"));
    let range = said.split(" (").next().unwrap();
    let units = ["s", "min", "h"];
    let one = |t: &str| {
        let (v, u) = t.rsplit_once(' ').unwrap_or_else(|| panic!("{range}"));
        assert!(units.contains(&u), "unit {u} in {plan}");
        assert!(v.parse::<f64>().is_ok(), "{v} in {plan}");
        t.to_string()
    };
    match range.split_once('–') {
        None => (one(range), one(range)),
        Some((lo, hi)) => {
            let hi = one(hi);
            let unit = hi.rsplit_once(' ').unwrap().1;
            // `3–5 min`: the low end takes the high end's unit.
            let lo = if lo.contains(' ') {
                one(lo)
            } else {
                one(&format!("{lo} {unit}"))
            };
            (lo, hi)
        }
    }
}

/// Seconds as the plan says them: whole seconds under 90 s, whole minutes under 90 min, hours
/// with a tenth under 10 h.
fn in_words(s: f64) -> String {
    if s.round() < 90.0 {
        format!("{} s", s.round())
    } else if s < 5400.0 {
        format!("{} min", (s / 60.0).round())
    } else {
        format!("{:.1} h", s / 3600.0)
    }
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
