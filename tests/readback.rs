//! Read-back of the files a run leaves behind (docs/outputs.md "What a run leaves behind"),
//! checked against answers this file computes itself: from the run's own `requests.jsonl`
//! records, from `telemetry.jsonl`'s GPU readings, or from first principles (Student's t). No
//! servetop aggregation code computes an expected value here; the run is the real binary, so
//! the files are exactly those a user gets.
//!
//! 1. `--repeat 3` (docs/metrics.md "Repeated runs"): each level's mean and 95 % interval
//!    `mean ± t(0.975, n − 1) · s / √n` over its three runs, computed here, against
//!    results.json's `repeat_mean` / `ci95` on every run, repeats.csv's columns and
//!    summary.md's "Across repeats" cells as printed. Each run's `output_throughput` and
//!    `request_throughput` are first recomputed from its records. An interval built with the
//!    normal 1.96, with t for the wrong degrees of freedom, or with the population standard
//!    deviation has a half width off by 18 % or more, far outside the tolerance (means: 1e-6
//!    relative; half widths: the rounding of the documented table value 4.303, 1.2e-4).
//! 2. The steady window (docs/metrics.md "Per level"): a closed loop of 16 equal requests at
//!    C=4; from the records, the first completion, the last send, the requests sent at or after
//!    the one and done by the other (exactly 16 − 2·4 = 8 of them), and their TTFT, TPOT and
//!    E2E by nearest rank; against results.json's `steady_*` keys and summary.md's "Steady
//!    state" row.
//! 3. Energy with a run directory (docs/metrics.md "Energy and cost"): two simulated GPUs read
//!    through the simulator's DCGM endpoint; each level's `energy_j` must be the growth of the
//!    GPUs' counters between two readings in telemetry.jsonl that bracket the level, and power,
//!    energy per token and cost follow by arithmetic from it and the records; sweep.csv and
//!    summary.md's "Energy and cost" table must say the same.
//! 4. `servetop report` of that energy run, copied without its findings, writes summary.md
//!    byte for byte as the run did; with the GPUs' sampled power halved in the copy, the
//!    energy finding doubts the counter by −50 %.
//!
//! Nothing here compares a measured time with a configured constant: every expected value is
//! derived from what the run itself recorded, so machine load cannot move a check.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use servetop::sim::{self, AcceptLength, SimConfig};

mod run_files;
use run_files::{
    Rec, bin, cell_f64, close, csv, hdr_close, md_row, nearest_rank, num, plus_minus, printed,
    read, records, results, succeed, window_s,
};

// ---------------------------------------------------------------------------------------------
// Running and reading
// ---------------------------------------------------------------------------------------------

/// A simulator with 20 ms decode steps, one token a step, whatever the batch.
fn sim_config() -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 20.0;
    c.batch_growth = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    c
}

/// Runs the real binary headless against an in-process simulator configured by `sim`, with
/// `args` after the common ones (`{url}` in an argument stands for the simulator's URL),
/// writing its run directory; returns that directory.
fn run(name: &str, sim: SimConfig, args: &[&str]) -> PathBuf {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let h = rt
        .block_on(sim::start(sim, SocketAddr::from(([127, 0, 0, 1], 0))))
        .unwrap();
    let url = h.url();
    let dir = std::env::temp_dir().join(format!("servetop-readback-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    succeed(
        Command::new(bin())
            .args(["run", "--base-url", &url, "--headless"])
            .args([
                "--input-len",
                "100",
                "--long-context",
                "none",
                "--seed",
                "7",
            ])
            .args([
                "--api-key-env",
                "SERVETOP_TEST_NO_KEY",
                "--chart-size",
                "400x225",
            ])
            .args(["--out", dir.to_str().unwrap()])
            .args(args.iter().map(|a| a.replace("{url}", &url))),
    );
    dir
}

// ---------------------------------------------------------------------------------------------
// 1. --repeat 3: mean and Student's t interval
// ---------------------------------------------------------------------------------------------

/// t(0.975, 2): the 0.975 quantile of Student's t with 2 degrees of freedom. For 2 degrees of
/// freedom the quantile has a closed form, `(2p − 1) · √(2 / (4p(1 − p)))` (the CDF is
/// `1/2 + t / (2√(2 + t²))`), checked below: 4.30265272974946385…. The often-quoted
/// 4.302652729911275 is 4e-11 off (a numerical inversion's error; nothing here can see it).
const T975_DF2: f64 = 4.302_652_729_749_464;

/// How far an interval's half width may be from `T975_DF2 · s / √n`: docs/metrics.md gives
/// the table as "4.303 for three" (three decimals), and a table value rounded to three
/// decimals is within half a unit of its third decimal, 0.0005 / 4.3027 = 1.2e-4 relative.
/// The mistakes this is for are far larger: z = 1.96 is 54 % narrower, t(0.975, 1) = 12.706
/// 195 % wider, the population standard deviation (÷ n) 18 % narrower.
const T_TABLE_REL: f64 = 0.0005 / T975_DF2;

/// The figures given a mean and an interval, as docs/metrics.md "Repeated runs" lists them:
/// written out here rather than taken from `servetop::summary::repeats::FIGURES`, so a figure the product
/// stopped summarizing fails this test instead of leaving it.
const FIGURES: [&str; 12] = [
    "output_throughput",
    "request_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
];

/// Mean, sample standard deviation (n − 1) and the 95 % half width of three values.
fn students_t(xs: &[f64]) -> (f64, f64, f64) {
    assert_eq!(xs.len(), 3, "this table value is for three runs");
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let s = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    (mean, s, T975_DF2 * s / n.sqrt())
}

/// The interval `[lo, hi]` a file gives for `mean ± half`: centred on the mean within 1e-6
/// relative (the mean is exact arithmetic), its half width Student's within the table's
/// rounding.
fn check_interval(what: &str, lo: f64, hi: f64, mean: f64, half: f64) {
    close(
        &format!("{what} interval centre"),
        f64::midpoint(lo, hi),
        mean,
        1e-6,
        1e-12,
    );
    close(
        &format!("{what} interval half width"),
        (hi - lo) / 2.0,
        half,
        T_TABLE_REL,
        1e-9 * mean.abs().max(1.0),
    );
}

/// One repeated level's runs' values of every figure. The throughputs are recomputed from each
/// run's own records (tokens and requests over first send to last completion) and must be
/// results.json's; the latency figures are histogram percentiles, read from results.json (each
/// run's TPOT median checked against its records' nearest rank on the way).
fn per_run_values(dir: &Path, label: &str, runs: &[&Value]) -> HashMap<&'static str, Vec<f64>> {
    let mut per_run: HashMap<&str, Vec<f64>> = HashMap::new();
    for l in runs {
        let rs = records(dir, l["index"].as_u64().unwrap());
        assert_eq!(rs.len(), 8, "{label}: 8 requests a run");
        let w = window_s(&rs);
        let what = format!("{label} run {}", l["index"]);
        close(
            &format!("{what} duration_s"),
            num(l, "duration_s"),
            w,
            0.0,
            1e-9,
        );
        let tokens: u64 = rs.iter().map(|r| r.output).sum();
        let out_tput = tokens as f64 / w;
        let req_tput = rs.len() as f64 / w;
        close(
            &format!("{what} output_throughput"),
            num(l, "output_throughput"),
            out_tput,
            1e-9,
            0.0,
        );
        close(
            &format!("{what} request_throughput"),
            num(l, "request_throughput"),
            req_tput,
            1e-9,
            0.0,
        );
        let tpots: Vec<f64> = rs.iter().map(|r| r.tpot_us() * 1e-3).collect();
        hdr_close(
            &format!("{what} median_tpot_ms"),
            num(l, "median_tpot_ms"),
            nearest_rank(&tpots, 0.5),
        );
        for k in FIGURES {
            let x = match k {
                "output_throughput" => out_tput,
                "request_throughput" => req_tput,
                _ => num(l, k),
            };
            per_run.entry(k).or_default().push(x);
        }
    }
    per_run
}

/// One repeated level's files against the mean and interval of its runs' values: results.json
/// on every run, repeats.csv's row, summary.md's "Across repeats" row.
fn check_repeated_level(dir: &Path, label: &str, runs: &[&Value]) {
    let per_run = per_run_values(dir, label, runs);
    let csv_rows = csv(dir, "repeats.csv");
    let csv_row = csv_rows
        .iter()
        .find(|r| r["level"] == label)
        .unwrap_or_else(|| panic!("no {label} row in repeats.csv"));
    assert_eq!(csv_row["runs_done"], "3");
    assert_eq!(csv_row["runs"], "3");

    let mut want: HashMap<&str, (f64, f64)> = HashMap::new();
    for k in FIGURES {
        let (mean, s, half) = students_t(&per_run[k]);
        want.insert(k, (mean, half));
        println!(
            "{label} {k}: runs {:?} → mean {mean:.6}, s {s:.6}, 95 % half width {half:.6}",
            per_run[k]
        );
        // Every run of the level carries the same mean and interval (docs).
        for l in runs {
            let what = format!("results.json level {} {k}", l["index"]);
            close(
                &format!("{what} repeat_mean"),
                num(&l["repeat_mean"], k),
                mean,
                1e-6,
                1e-12,
            );
            let ci = l["ci95"][k].as_array().unwrap();
            check_interval(
                &what,
                ci[0].as_f64().unwrap(),
                ci[1].as_f64().unwrap(),
                mean,
                half,
            );
        }
        let what = format!("repeats.csv {label} {k}");
        close(&what, cell_f64(csv_row, k), mean, 1e-6, 1e-12);
        check_interval(
            &what,
            cell_f64(csv_row, &format!("{k}_ci95_low")),
            cell_f64(csv_row, &format!("{k}_ci95_high")),
            mean,
            half,
        );
    }

    // The checks above tell Student's t from the normal approximation: the throughput's runs
    // differ, and 1.96 · s / √3 lies well outside the tolerance.
    let (mean, s, half) = students_t(&per_run["output_throughput"]);
    let z_half = 1.96 * s / 3f64.sqrt();
    assert!(
        (half - z_half).abs() > T_TABLE_REL * half + 1e-9 * mean,
        "{label}: the three runs' throughputs agree too closely ({:?}) to tell t from z",
        per_run["output_throughput"]
    );

    // summary.md's "Across repeats": mean ± half width as printed.
    let row = md_row(dir, "Across repeats", label);
    assert_eq!(row[1], "3 of 3", "{row:?}");
    for (col, k) in [(2, "output_throughput"), (5, "median_tpot_ms")] {
        let (m, h) = plus_minus(&row[col]);
        let (mean, half) = want[k];
        printed(&format!("summary.md {label} {k} mean"), m, mean, 1e-6);
        printed(
            &format!("summary.md {label} {k} half width"),
            h,
            half,
            T_TABLE_REL,
        );
    }
}

#[test]
fn repeat_means_and_intervals_in_results_csv_and_summary_are_students_t() {
    // The closed form of t(0.975, 2) reproduces the hard-coded table value.
    let p: f64 = 0.975;
    close(
        "t(0.975, 2) closed form",
        (2.0 * p - 1.0) * (2.0 / (4.0 * p * (1.0 - p))).sqrt(),
        T975_DF2,
        1e-12,
        0.0,
    );

    let dir = run(
        "repeat",
        sim_config(),
        &[
            "--concurrency",
            "1,4",
            "--output-len",
            "21",
            "--requests-per-level",
            "8",
            "--repeat",
            "3",
            "--no-gpu",
        ],
    );
    let v = results(&dir);
    let sweep = v["sweep"].as_array().unwrap();
    // The plan three times over: C=1 #1, C=4 #1, C=1 #2, …; each run is a level of its own.
    assert_eq!(sweep.len(), 6);
    assert_eq!(
        csv(&dir, "repeats.csv").len(),
        2,
        "one repeats.csv row per level"
    );
    for (first, c) in [(0u64, 1u64), (1, 4)] {
        let label = format!("C={c}");
        let runs: Vec<&Value> = sweep
            .iter()
            .filter(|l| l["repeat"]["first"].as_u64() == Some(first))
            .collect();
        assert_eq!(runs.len(), 3, "{label}: three runs");
        for (n, l) in runs.iter().enumerate() {
            assert_eq!(l["concurrency"].as_u64(), Some(c));
            assert_eq!(l["repeat"]["n"].as_u64(), Some(n as u64 + 1));
            assert_eq!(l["repeat"]["of"].as_u64(), Some(3));
        }
        check_repeated_level(&dir, &label, &runs);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// 2. The steady-state window
// ---------------------------------------------------------------------------------------------

/// results.json's steady `name` (ttft, tpot, e2el) distribution against the steady requests'
/// own values `xs` (ms): the count, the median and p99 by nearest rank within the histogram's
/// precision, min, max and mean exactly.
fn check_steady_series(l: &Value, name: &str, xs: &[f64]) {
    assert_eq!(
        l[format!("steady_{name}_ms_count")].as_u64(),
        Some(xs.len() as u64),
        "steady {name} count"
    );
    let median = nearest_rank(xs, 0.5);
    println!("steady {name}: {xs:?} → nearest-rank median {median}");
    hdr_close(
        &format!("median_steady_{name}_ms"),
        num(l, &format!("median_steady_{name}_ms")),
        median,
    );
    hdr_close(
        &format!("p99_steady_{name}_ms"),
        num(l, &format!("p99_steady_{name}_ms")),
        nearest_rank(xs, 0.99),
    );
    // Min, max and mean are exact (TPOT is kept in whole µs: 1e-3 ms).
    let abs = if name == "tpot" { 1e-3 } else { 1e-9 };
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    for (k, want) in [("min", min), ("max", max), ("mean", mean)] {
        let key = format!("{k}_steady_{name}_ms");
        close(&key, num(l, &key), want, 1e-9, abs);
    }
}

/// A closed loop of 4 workers sending 16 requests that all take the same time runs in four
/// waves: the first goes out before anything completes (ramp-up), the last ends after the
/// last send (drain), so the two middle waves, 16 − 2·4 = 8 requests, are sent at or after the
/// first completion and done by the last send.
///
/// On the boundaries: a worker sends its next request only after its previous stream closed,
/// which is after that request's last token, so a send equal to the first completion (or a
/// completion equal to the last send) to the microsecond does not happen in practice; `>=`
/// against `>` cannot be told apart by the run. What pins the window is the exact count and
/// the exact set of requests: the window's bounds, and the steady min, max and mean (exact,
/// not histogram figures), which change if any request moves in or out.
#[test]
fn steady_window_and_its_latency_follow_from_the_records() {
    const C: usize = 4;
    const N: usize = 16;
    let dir = run(
        "steady",
        sim_config(),
        &[
            "--concurrency",
            "4",
            "--output-len",
            "21",
            "--requests-per-level",
            "16",
            "--no-gpu",
        ],
    );
    let v = results(&dir);
    let l = &v["sweep"][0];
    let rs = records(&dir, 0);
    assert_eq!(rs.len(), N);
    assert_eq!(l["completed"].as_u64(), Some(N as u64));
    close("duration_s", num(l, "duration_s"), window_s(&rs), 0.0, 1e-9);

    // docs/metrics.md "Per level": from the first completion to the last send; its requests
    // are those sent at or after its start and done by its end.
    let first_done = rs.iter().map(|r| r.done).min().unwrap();
    let last_send = rs.iter().map(|r| r.send).max().unwrap();
    let steady: Vec<Rec> = rs
        .iter()
        .copied()
        .filter(|r| r.send >= first_done && r.done <= last_send)
        .collect();
    let ties = rs
        .iter()
        .filter(|r| r.send == first_done || r.done == last_send)
        .count();
    println!(
        "steady window {first_done}–{last_send} µs: {} requests ({ties} on a boundary)",
        steady.len()
    );
    assert_eq!(steady.len(), N - 2 * C, "from the records");
    assert_eq!(
        l["steady_requests"].as_u64(),
        Some(steady.len() as u64),
        "results.json"
    );
    close(
        "steady_from_s",
        num(l, "steady_from_s"),
        first_done as f64 * 1e-6,
        0.0,
        1e-9,
    );
    close(
        "steady_to_s",
        num(l, "steady_to_s"),
        last_send as f64 * 1e-6,
        0.0,
        1e-9,
    );

    // The steady throughput counts whole seconds of the level's output inside that span: from
    // the first whole second after the first completion to the last whole second before the
    // last send (docs/metrics.md "Per level"); none when no whole second fits.
    let (lo, hi) = (first_done.div_ceil(1_000_000), last_send / 1_000_000);
    let want_secs = (hi > lo).then(|| (hi - lo) as f64);
    assert_eq!(
        l["steady_duration_s"].as_f64(),
        want_secs,
        "steady_duration_s for the span {first_done}–{last_send} µs"
    );

    let ms = |f: fn(&Rec) -> f64| steady.iter().map(f).collect::<Vec<f64>>();
    let series = [
        ("ttft", ms(|r| r.ttft as f64 * 1e-3)),
        ("tpot", ms(|r| r.tpot_us() * 1e-3)),
        ("e2el", ms(|r| r.e2e as f64 * 1e-3)),
    ];
    for (name, xs) in &series {
        check_steady_series(l, name, xs);
    }

    // summary.md's "Steady state" row: the count of all, the window, TTFT p50.
    let row = md_row(&dir, "Steady state", "C=4");
    assert_eq!(row[1], format!("{} of {N}", N - 2 * C), "{row:?}");
    let (from, to) = row[2]
        .split_once('–')
        .unwrap_or_else(|| panic!("window cell `{}`", row[2]));
    printed(
        "summary.md steady from",
        from,
        first_done as f64 * 1e-6,
        0.0,
    );
    printed("summary.md steady to", to, last_send as f64 * 1e-6, 0.0);
    let (p50, _) = row[4].split_once(" / ").unwrap();
    printed(
        "summary.md steady TTFT p50",
        p50,
        nearest_rank(&series[0].1, 0.5),
        1e-3,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// 3. Energy and cost in results.json, sweep.csv and summary.md
// ---------------------------------------------------------------------------------------------

/// USD per GPU hour.
const PRICE: f64 = 2.5;

/// One GPU reading of telemetry.jsonl: its time and each GPU's energy counter (mJ).
struct Reading {
    at_ms: i64,
    energy_mj: Vec<(u64, u64)>,
    power_w: f64,
}

fn gpu_readings(dir: &Path) -> Vec<Reading> {
    read(dir, "telemetry.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "gpu")
        .map(|r| {
            let gpus = r["gpus"].as_array().unwrap();
            Reading {
                at_ms: r["at_unix_ms"].as_i64().unwrap(),
                energy_mj: gpus
                    .iter()
                    .map(|g| {
                        (
                            g["index"].as_u64().unwrap(),
                            g["energy_mj"].as_u64().unwrap(),
                        )
                    })
                    .collect(),
                power_w: gpus.iter().map(|g| g["power_w"].as_f64().unwrap()).sum(),
            }
        })
        .collect()
}

/// Joules the GPUs' counters grew by from `a` to `b`, summed over the GPUs.
fn counter_joules(a: &Reading, b: &Reading) -> Option<f64> {
    let mut j = 0.0;
    for (i, e) in &b.energy_mj {
        let (_, e0) = a.energy_mj.iter().find(|(k, _)| k == i)?;
        j += e.checked_sub(*e0)? as f64 / 1000.0;
    }
    Some(j)
}

/// One level's energy and cost in results.json, sweep.csv (`csv_row`) and summary.md against
/// the GPU `readings` of telemetry.jsonl and the level's records.
fn check_energy_level(
    dir: &Path,
    l: &Value,
    csv_row: &HashMap<String, String>,
    readings: &[Reading],
) {
    let label = format!("C={}", l["concurrency"]);
    assert_eq!(csv_row["concurrency"], l["concurrency"].to_string());
    let rs = records(dir, l["index"].as_u64().unwrap());
    assert_eq!(rs.len(), 8);
    let out_tokens = rs.iter().map(|r| r.output).sum::<u64>() as f64;
    let all_tokens = out_tokens + rs.iter().map(|r| r.input).sum::<u64>() as f64;
    let duration = window_s(&rs);
    close(
        &format!("{label} duration_s"),
        num(l, "duration_s"),
        duration,
        0.0,
        1e-9,
    );
    assert_eq!(l["energy_source"], "counter", "{label}");

    // The counters read just before the level and at its end: two readings of
    // telemetry.jsonl, one at or before the level's first send, one at or after its last
    // completion (1 ms of slack for the readings' whole milliseconds), whose span is the
    // energy window and whose counters grew by the energy.
    let origin_ms = num(l, "origin_unix_us") * 1e-3;
    let first_send_ms = origin_ms + rs.iter().map(|r| r.send).min().unwrap() as f64 * 1e-3;
    let last_done_ms = origin_ms + rs.iter().map(|r| r.done).max().unwrap() as f64 * 1e-3;
    let (energy_j, window) = (num(l, "energy_j"), num(l, "energy_window_s"));
    let pair = readings.iter().find_map(|a| {
        readings.iter().find_map(|b| {
            let brackets =
                a.at_ms as f64 <= first_send_ms + 1.0 && b.at_ms as f64 + 1.0 >= last_done_ms;
            let span = (b.at_ms - a.at_ms) as f64 / 1000.0;
            let j = counter_joules(a, b)?;
            (brackets && (span - window).abs() < 1e-9 && (j - energy_j).abs() <= 1e-9 * j)
                .then_some((span, j, b.energy_mj.len() as u32))
        })
    });
    let (span, joules, gpus) = pair.unwrap_or_else(|| {
        panic!(
            "{label}: energy_j {energy_j} over {window} s is no counter growth between \
             readings bracketing the level ({first_send_ms:.1}–{last_done_ms:.1} ms)"
        )
    });
    println!("{label}: {joules} J over {span} s from {gpus} GPUs, {out_tokens} output tokens");

    // What follows by arithmetic (docs/metrics.md "Energy and cost"); the price is per GPU
    // hour, times the GPUs read.
    let cost = f64::from(gpus) * PRICE * duration / 3600.0;
    let want = [
        ("energy_j", joules),
        ("mean_power_w", joules / span),
        ("joules_per_output_token", joules / out_tokens),
        ("output_tokens_per_joule", out_tokens / joules),
        ("cost_per_million_output_tokens", cost / out_tokens * 1e6),
        ("cost_per_million_total_tokens", cost / all_tokens * 1e6),
    ];
    let md = md_row(dir, "Energy and cost", &label);
    for (i, (k, want)) in want.iter().enumerate() {
        close(&format!("{label} {k}"), num(l, k), *want, 1e-9, 0.0);
        // sweep.csv prints results.json's value, digit for digit.
        assert_eq!(
            cell_f64(csv_row, k).to_bits(),
            num(l, k).to_bits(),
            "{label} sweep.csv {k}"
        );
        printed(&format!("{label} summary.md {k}"), &md[i + 1], *want, 1e-9);
    }
    assert_eq!(csv_row["energy_source"], "counter");
    assert_eq!(md[7], "counter");
}

#[test]
fn energy_in_results_csv_and_summary_follows_from_the_readings_and_records() {
    const GPUS: u32 = 2;
    let mut c = sim_config();
    c.decode_step_ms = 10.0;
    c.gpus = GPUS;
    // Power follows the load, so energy is not simply a constant times the window.
    c.gpu_idle_w = 100.0;
    c.gpu_busy_w = 400.0;
    let price = PRICE.to_string();
    let dir = run(
        "energy",
        c,
        &[
            "--concurrency",
            "1,4",
            "--output-len",
            "40",
            "--requests-per-level",
            "8",
            "--gpu-hour-cost",
            &price,
            "--dcgm-url",
            "{url}/dcgm/metrics",
        ],
    );
    let v = results(&dir);
    let sweep = v["sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 2);
    let readings = gpu_readings(&dir);
    assert!(readings.iter().all(|r| r.energy_mj.len() == GPUS as usize));
    let csv_rows = csv(&dir, "sweep.csv");
    assert_eq!(csv_rows.len(), 2);

    for (l, csv_row) in sweep.iter().zip(&csv_rows) {
        check_energy_level(&dir, l, csv_row, &readings);
    }

    // Idle power: before any request every reading is the GPUs' idle draw, so the mean of
    // the readings before the first request is the first reading's total power.
    let idle = num(&v["telemetry"], "idle_power_w");
    let first = readings.iter().min_by_key(|r| r.at_ms).unwrap();
    close("idle_power_w", idle, first.power_w, 1e-9, 0.0);
    let md = read(&dir, "summary.md");
    let line = md
        .lines()
        .find_map(|l| l.strip_prefix("Idle power before the first request: "))
        .unwrap_or_else(|| panic!("no idle power line:\n{md}"));
    printed(
        "summary.md idle power",
        line.split(' ').next().unwrap(),
        first.power_w,
        1e-9,
    );
    report_recomputes_the_findings(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// 4. `servetop report` recomputes the findings
// ---------------------------------------------------------------------------------------------

/// A copy of a run directory's files (not its charts).
fn copy_run(dir: &Path, name: &str) -> PathBuf {
    let to = dir.with_file_name(format!(
        "{}-{name}",
        dir.file_name().unwrap().to_str().unwrap()
    ));
    let _ = std::fs::remove_dir_all(&to);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
    to
}

fn edit_results(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v = results(dir);
    edit(&mut v);
    std::fs::write(dir.join("results.json"), serde_json::to_vec(&v).unwrap()).unwrap();
}

fn report(dir: &Path) {
    succeed(Command::new(bin()).args(["report", dir.to_str().unwrap(), "--chart-size", "400x225"]));
}

/// The run's findings are a function of its saved summary: `report` of a copy whose
/// results.json lost its `findings` writes summary.md byte for byte as the run did. With the
/// GPUs' sampled power halved in the copy, the energy finding doubts the counter, and says by
/// how much (−50 %): the caveat is made from the saved figures, not carried over.
fn report_recomputes_the_findings(dir: &Path) {
    let v = results(dir);
    let energy = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "energy")
        .unwrap_or_else(|| panic!("no energy finding: {:#}", v["findings"]));
    assert!(
        !energy["caveats"].to_string().contains("sampled power"),
        "the simulator's counter and sampled power disagree: {energy:#}"
    );
    let copy = copy_run(dir, "report");
    edit_results(&copy, |v| {
        v.as_object_mut().unwrap().remove("findings");
    });
    report(&copy);
    let (a, b) = (read(dir, "summary.md"), read(&copy, "summary.md"));
    assert!(a.contains("## Findings"), "{a}");
    assert!(a == b, "report wrote another summary.md:\n{a}\n---\n{b}");

    edit_results(&copy, |v| {
        for l in v["sweep"].as_array_mut().unwrap() {
            let counter = l["mean_power_w"].as_f64().unwrap();
            let gpus = l["gpus"].as_array_mut().unwrap();
            let n = gpus.len() as f64;
            for g in gpus {
                g["mean_power_w"] = (counter / 2.0 / n).into();
            }
        }
    });
    report(&copy);
    let md = read(&copy, "summary.md");
    let findings = md
        .split("## Findings")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(
        findings.contains("sampled power averaged") && findings.contains("(-50 %)"),
        "{findings}"
    );
    let _ = std::fs::remove_dir_all(&copy);
}
