//! Read-back of the rate, long-context and multi-turn levels' files (docs/outputs.md "What a
//! run leaves behind"): `rates.csv`, `long_context.csv`, `turns.csv`, their results.json levels and
//! summary.md's "Request-rate sweep", "Long context" and "Multi-turn chats" tables, each figure
//! against what this file computes from the run's own requests.jsonl records (and, for the
//! prefix cache, the server's own count): counts exactly, sums, rates and means to rounding,
//! percentiles as the nearest rank within the histogram's 0.1 %, summary.md's cells as those
//! numbers printed. The trace's files are read back in tests/trace.rs, repeats, steady state and
//! energy in tests/readback.rs, the merged shards' in tests/shards.rs.
//!
//! One run of the real binary against an in-process simulator holds all three kinds of level.
//! Nothing here compares a measured time with a configured constant: machine load cannot move a
//! check.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use servetop::sim::{self, AcceptLength, SimConfig};

mod run_files;
use run_files::{
    Rec, bin, cell_f64, close, csv, hdr_close, md_row, md_rows, mean, nearest_rank, num,
    peak_in_flight, printed, read, records, results, succeed, window_s,
};

/// The run: two rate levels of 16 requests, a long-context ladder of 2K and 4K tokens (two
/// requests each), and 4 three-turn chats two at a time, all with 10 output tokens. Returns
/// the run directory and the prompt tokens the server says it served from its prefix cache.
fn run() -> (PathBuf, u64) {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 20.0;
    c.batch_growth = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let h = rt
        .block_on(sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0))))
        .unwrap();
    let dir = std::env::temp_dir().join(format!("servetop-readback-levels-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    succeed(
        Command::new(bin())
            .args(["run", "--base-url", &h.url(), "--headless", "--seed", "7"])
            .args(["--concurrency", "none", "--request-rate", "10,20"])
            .args(["--requests-per-level", "16", "--input-len", "100"])
            .args(["--output-len", "10", "--long-context", "2k,4k"])
            .args([
                "--long-context-output-len",
                "10",
                "--long-context-repeats",
                "2",
            ])
            .args(["--multi-turn", "3", "--conversations", "4"])
            .args(["--conversation-concurrency", "2", "--followup-len", "64"])
            .args([
                "--api-key-env",
                "SERVETOP_TEST_NO_KEY",
                "--chart-size",
                "400x225",
            ])
            .args(["--out", dir.to_str().unwrap()]),
    );
    let cached = h.log.lock().unwrap().total_cached_tokens;
    (dir, cached)
}

/// `f` of each record, in ms where it is a time.
fn each(rs: &[Rec], f: impl Fn(&Rec) -> f64) -> Vec<f64> {
    rs.iter().map(f).collect()
}

fn ttft_ms(r: &Rec) -> f64 {
    r.ttft as f64 * 1e-3
}

fn e2e_ms(r: &Rec) -> f64 {
    r.e2e as f64 * 1e-3
}

fn tpot_ms(r: &Rec) -> f64 {
    r.tpot_us() * 1e-3
}

/// `"a / b"` printed as `a` and `b`: the p50 and p99 (or mean and p50) of `xs`.
fn printed_pair(what: &str, cell: &str, want: (f64, f64)) {
    let (a, b) = cell
        .split_once(" / ")
        .unwrap_or_else(|| panic!("{what}: `{cell}` is not `a / b`"));
    printed(&format!("{what} (first)"), a, want.0, 1e-3);
    printed(&format!("{what} (second)"), b, want.1, 1e-3);
}

/// rates.csv, results.json's `rates` and summary.md's "Request-rate sweep" row of one rate
/// level against its records (docs/metrics.md "Per level", "Trace replay" for the rates'
/// estimator (n − 1) / span).
fn check_rate_level(dir: &Path, level: &Value, row: &std::collections::HashMap<String, String>) {
    let rate = level["arrival"]["request_rate"].as_f64().unwrap();
    let what = format!("{rate} req/s");
    let rs = records(dir, level["index"].as_u64().unwrap());
    let n = rs.len();
    assert_eq!(n, 16, "{what}: every request completed");
    let span = |f: fn(&Rec) -> u64| {
        let (lo, hi) = (
            rs.iter().map(f).min().unwrap(),
            rs.iter().map(f).max().unwrap(),
        );
        (hi - lo) as f64 * 1e-6
    };
    let w = window_s(&rs);
    let (ttft, tpot, e2e, queue) = (
        each(&rs, ttft_ms),
        each(&rs, tpot_ms),
        each(&rs, e2e_ms),
        each(&rs, Rec::queue_ms),
    );
    let out_tput = rs.iter().map(|r| r.output).sum::<u64>() as f64 / w;
    let achieved = (n - 1) as f64 / span(|r| r.send);
    let exact = [
        ("duration_s", w),
        ("achieved_request_rate", achieved),
        ("scheduled_request_rate", (n - 1) as f64 / span(|r| r.sched)),
        ("request_throughput", n as f64 / w),
        ("output_throughput", out_tput),
        ("mean_ttft_ms", mean(&ttft)),
        ("mean_client_queue_ms", mean(&queue)),
    ];
    for (k, want) in exact {
        close(
            &format!("rates.csv {what} {k}"),
            cell_f64(row, k),
            want,
            1e-9,
            1e-9,
        );
        close(
            &format!("results.json {what} {k}"),
            num(level, k),
            want,
            1e-9,
            1e-9,
        );
    }
    // TPOT is kept in whole µs a request: its mean within half a µs.
    close(
        &format!("rates.csv {what} mean_tpot_ms"),
        cell_f64(row, "mean_tpot_ms"),
        mean(&tpot),
        0.0,
        5e-4,
    );
    let pct = [
        ("median_ttft_ms", &ttft, 0.5),
        ("p99_ttft_ms", &ttft, 0.99),
        ("median_tpot_ms", &tpot, 0.5),
        ("p99_tpot_ms", &tpot, 0.99),
        ("median_e2el_ms", &e2e, 0.5),
        ("p99_e2el_ms", &e2e, 0.99),
        ("median_client_queue_ms", &queue, 0.5),
        ("p99_client_queue_ms", &queue, 0.99),
    ];
    for (k, xs, q) in pct {
        let want = nearest_rank(xs, q);
        hdr_close(&format!("rates.csv {what} {k}"), cell_f64(row, k), want);
        hdr_close(&format!("results.json {what} {k}"), num(level, k), want);
    }
    let peak = peak_in_flight(&rs);
    for (k, want) in [
        ("burstiness", "1"),
        ("max_concurrency", ""),
        ("status", "done"),
        ("completed", "16"),
        ("failed", "0"),
        ("max_concurrent_requests", &peak.to_string()),
        ("goodput", ""),
    ] {
        assert_eq!(row[k], want, "rates.csv {what} {k}");
    }
    close(
        &format!("rates.csv {what} request_rate"),
        cell_f64(row, "request_rate"),
        rate,
        0.0,
        0.0,
    );

    rate_md_row(
        dir,
        rate,
        &RateWant {
            n,
            w,
            achieved,
            out_tput,
            peak,
        },
        [&ttft, &tpot, &e2e, &queue],
    );
}

/// What a rate level's summary.md row must print, beside its latency values.
#[derive(Clone, Copy)]
struct RateWant {
    n: usize,
    w: f64,
    achieved: f64,
    out_tput: f64,
    peak: u64,
}

/// summary.md's "Request-rate sweep" row of the level at `rate`: `lat` holds its TTFT, TPOT,
/// E2E and client-queue values (ms).
fn rate_md_row(dir: &Path, rate: f64, v: &RateWant, lat: [&[f64]; 4]) {
    let what = format!("{rate} req/s");
    let [ttft, tpot, e2e, queue] = lat;
    let RateWant {
        n,
        w,
        achieved,
        out_tput,
        peak,
    } = *v;
    // rate | sent req/s | done | done req/s | out tok/s | TTFT p50 / p99 | TPOT p50 / p99 |
    // E2E p50 | client queue p50 / p99 | peak in flight | failures
    let md = md_row(dir, "Request-rate sweep", &format!("{rate}"));
    let p = |xs: &[f64]| (nearest_rank(xs, 0.5), nearest_rank(xs, 0.99));
    printed(
        &format!("summary.md {what} sent req/s"),
        &md[1],
        achieved,
        1e-9,
    );
    assert_eq!(
        [&md[2], &md[9], &md[10]],
        ["16", &peak.to_string(), "0"],
        "summary.md {what}"
    );
    printed(
        &format!("summary.md {what} done req/s"),
        &md[3],
        n as f64 / w,
        1e-9,
    );
    printed(
        &format!("summary.md {what} out tok/s"),
        &md[4],
        out_tput,
        1e-9,
    );
    printed_pair(&format!("summary.md {what} TTFT"), &md[5], p(ttft));
    printed_pair(&format!("summary.md {what} TPOT"), &md[6], p(tpot));
    printed(
        &format!("summary.md {what} E2E p50"),
        &md[7],
        nearest_rank(e2e, 0.5),
        1e-3,
    );
    printed_pair(&format!("summary.md {what} client queue"), &md[8], p(queue));
}

/// `long_context.csv`, results.json's `long_context` and summary.md's "Long context" row of one
/// length against its records: prompts of exactly the length (the server's count), TTFT's
/// mean, prefill speed `input / TTFT` and decode speed `(output − 1) / (E2E − TTFT)` averaged
/// over the requests (docs/metrics.md "Per request").
fn check_length(dir: &Path, level: &Value, row: &std::collections::HashMap<String, String>) {
    let len = level["context_tokens"].as_u64().unwrap();
    let what = format!("{len} tokens");
    let rs = records(dir, level["index"].as_u64().unwrap());
    assert_eq!(rs.len(), 2, "{what}: two requests");
    assert!(rs.iter().all(|r| r.input == len), "{what}: prompts {rs:?}");
    let ttft = mean(&each(&rs, ttft_ms));
    let prefill = mean(&each(&rs, |r| r.input as f64 / (r.ttft as f64 * 1e-6)));
    let decode = mean(&each(&rs, |r| {
        (r.output - 1) as f64 / ((r.e2e - r.ttft) as f64 * 1e-6)
    }));
    assert_eq!(row["context_tokens"], len.to_string());
    for (k, want) in [
        ("status", "done"),
        ("completed", "2"),
        ("failed", "0"),
        ("reason", ""),
    ] {
        assert_eq!(row[k], want, "long_context.csv {what} {k}");
    }
    // Speeds are kept in thousandths of a token per second: their means within 1e-3.
    for (k, json, want, abs) in [
        ("mean_input_tokens", "mean_input_tokens", len as f64, 0.0),
        ("mean_ttft_ms", "mean_ttft_ms", ttft, 1e-9),
        (
            "prefill_tokens_per_s",
            "prefill_tokens_per_s",
            prefill,
            1e-3,
        ),
        (
            "mean_decode_tokens_per_s",
            "mean_decode_tokens_per_s",
            decode,
            1e-3,
        ),
    ] {
        close(
            &format!("long_context.csv {what} {k}"),
            cell_f64(row, k),
            want,
            1e-9,
            abs,
        );
        close(
            &format!("results.json {what} {json}"),
            num(level, json),
            want,
            1e-9,
            abs,
        );
    }
    // context | input tokens | TTFT mean (ms) | prefill tok/s | decode tok/s | status
    let md = md_row(dir, "Long context", &format!("{}K", len / 1000));
    assert_eq!(
        [&md[1], &md[5]],
        [&len.to_string(), "done"],
        "summary.md {what}"
    );
    printed(&format!("summary.md {what} TTFT"), &md[2], ttft, 1e-9);
    printed(&format!("summary.md {what} prefill"), &md[3], prefill, 1e-6);
    printed(&format!("summary.md {what} decode"), &md[4], decode, 1e-6);
}

/// summary.md's "Multi-turn chats" row of turn `t`: its mean prompt and cached tokens, TTFT
/// values and mean TPOT.
fn turn_md_row(t: u64, cells: &[String], input: f64, cached: f64, ttft: &[f64], tpot: f64) {
    // turn | ok | failed | prompt tokens | cached (share) | TTFT mean / p50 | TTFT p90 /
    // p99 | TPOT mean
    let what = format!("summary.md turn {t}");
    assert_eq!(
        [&cells[0], &cells[1], &cells[2]],
        [&t.to_string(), "4", "0"],
        "{what}"
    );
    printed(&format!("{what} prompt tokens"), &cells[3], input, 1e-9);
    assert_eq!(
        cells[4],
        format!("{cached:.0} ({:.0} %)", 100.0 * cached / input),
        "{what} cached"
    );
    printed_pair(
        &format!("{what} TTFT mean / p50"),
        &cells[5],
        (mean(ttft), nearest_rank(ttft, 0.5)),
    );
    printed_pair(
        &format!("{what} TTFT p90 / p99"),
        &cells[6],
        (nearest_rank(ttft, 0.9), nearest_rank(ttft, 0.99)),
    );
    printed(&format!("{what} TPOT mean"), &cells[7], tpot, 1e-4);
}

/// `turns.csv`, results.json's `multi_turn` and summary.md's "Multi-turn chats" table against the
/// records of each turn; the cached tokens in the records are the server's own count.
fn check_turns(dir: &Path, level: &Value) {
    let rs = records(dir, level["index"].as_u64().unwrap());
    assert_eq!(rs.len(), 12, "4 chats of 3 turns");
    let rows = csv(dir, "turns.csv");
    assert_eq!(rows.len(), 3, "a row a turn");
    let md = md_rows(dir, "## Multi-turn chats");
    assert_eq!(md.len(), 3, "a row a turn: {md:?}");
    for (t, (row, cells)) in (1..=3u64).zip(rows.iter().zip(&md)) {
        let of: Vec<Rec> = rs.iter().copied().filter(|r| r.turn == Some(t)).collect();
        assert_eq!(of.len(), 4, "turn {t}: one request a chat");
        let input = mean(&each(&of, |r| r.input as f64));
        let cached = mean(&each(&of, |r| r.cached as f64));
        let ttft = each(&of, ttft_ms);
        let tpot = mean(&each(&of, tpot_ms));
        for (k, want) in [
            ("level", level["index"].to_string()),
            ("turns", "3".into()),
            ("conversation_concurrency", "2".into()),
            ("first_turn_input_len", "100".into()),
            ("followup_len", "64".into()),
            ("output_len", "10".into()),
            ("turn", t.to_string()),
            ("completed", "4".into()),
            ("failed", "0".into()),
        ] {
            assert_eq!(row[k], want, "turns.csv turn {t} {k}");
        }
        let what = format!("turns.csv turn {t}");
        close(
            &format!("{what} mean_input_tokens"),
            cell_f64(row, "mean_input_tokens"),
            input,
            1e-9,
            0.0,
        );
        close(
            &format!("{what} mean_cached_tokens"),
            cell_f64(row, "mean_cached_tokens"),
            cached,
            1e-9,
            0.0,
        );
        close(
            &format!("{what} cache_hit_rate"),
            cell_f64(row, "cache_hit_rate"),
            cached / input,
            1e-9,
            0.0,
        );
        close(
            &format!("{what} mean_ttft_ms"),
            cell_f64(row, "mean_ttft_ms"),
            mean(&ttft),
            1e-9,
            1e-9,
        );
        close(
            &format!("{what} mean_tpot_ms"),
            cell_f64(row, "mean_tpot_ms"),
            tpot,
            0.0,
            5e-4,
        );
        for (k, q) in [
            ("median_ttft_ms", 0.5),
            ("p90_ttft_ms", 0.9),
            ("p99_ttft_ms", 0.99),
        ] {
            hdr_close(
                &format!("{what} {k}"),
                cell_f64(row, k),
                nearest_rank(&ttft, q),
            );
        }
        turn_md_row(t, cells, input, cached, &ttft, tpot);
    }
    // The chats' share of prompt tokens from the cache, over the level.
    let share = rs.iter().map(|r| r.cached).sum::<u64>() as f64
        / rs.iter().map(|r| r.input).sum::<u64>() as f64;
    close(
        "results.json prefix_cache_hit_rate",
        num(level, "prefix_cache_hit_rate"),
        share,
        1e-9,
        0.0,
    );
    let text = read(dir, "summary.md");
    let line = format!(
        "{:.1} % of prompt tokens from the prefix cache",
        100.0 * share
    );
    assert!(
        text.contains(&line),
        "summary.md should say `{line}`:\n{text}"
    );
}

#[test]
fn rate_long_context_and_multi_turn_files_follow_from_the_records() {
    let (dir, server_cached) = run();
    let file = results(&dir);

    // Every cached token a record holds is one the server says it served from its cache.
    let recorded: u64 = read(&dir, "requests.jsonl")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["cached_tokens"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(
        recorded, server_cached,
        "cached tokens: records against the server's count"
    );

    let rates = file["rates"].as_array().unwrap();
    let rows = csv(&dir, "rates.csv");
    assert_eq!((rates.len(), rows.len()), (2, 2));
    for (level, row) in rates.iter().zip(&rows) {
        check_rate_level(&dir, level, row);
    }

    let lengths = file["long_context"].as_array().unwrap();
    let rows = csv(&dir, "long_context.csv");
    assert_eq!((lengths.len(), rows.len()), (2, 2));
    for (level, row) in lengths.iter().zip(&rows) {
        check_length(&dir, level, row);
    }

    let chats = file["multi_turn"].as_array().unwrap();
    assert_eq!(chats.len(), 1);
    check_turns(&dir, &chats[0]);
    // Later turns resend the history the server has cached: something to read back.
    assert!(
        num(&chats[0], "prefix_cache_hit_rate") > 0.3,
        "{}",
        chats[0]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
