//! Reading a run directory back as a user would: results.json, requests.jsonl's records, the
//! CSV files and summary.md's tables, and the comparisons the read-back suites make against
//! answers they compute themselves (`tests/readback.rs`, `tests/readback_levels.rs`).

// Each suite uses its own share of these.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_servetop")
}

/// Runs `cmd` (the servetop binary, as a user would) to its end; it must succeed, or its
/// stderr is the failure report.
pub fn succeed(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

pub fn results(dir: &Path) -> Value {
    serde_json::from_str(&read(dir, "results.json")).unwrap()
}

/// requests.jsonl as servetop's own records, every line (warmup included).
pub fn request_records(dir: &Path) -> Vec<servetop::metrics::RequestRecord> {
    read(dir, "requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits until results.json shows the sweep's level `i` running (no fixed sleep: a loaded
/// machine may take longer to get there), for a minute at most.
pub fn wait_for_level_running(dir: &Path, i: usize) {
    let t = std::time::Instant::now();
    loop {
        let status = std::fs::read(dir.join("results.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .map(|v| v["sweep"][i]["status"].clone());
        if status.as_ref().and_then(Value::as_str) == Some("running") {
            return;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(60),
            "level {i} never ran: {status:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("no number {k} in {v}"))
}

/// One measured, completed request of requests.jsonl (times in µs from its level's origin).
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    /// Its number in the level's plan (`index`).
    pub index: u64,
    /// `t_sched`: when it was due.
    pub sched: u64,
    pub send: u64,
    /// `t_last` = `t_send` + E2E: the completion (docs/metrics.md: E2E is `t_last − t_send`).
    pub done: u64,
    pub ttft: u64,
    pub e2e: u64,
    pub input: u64,
    pub output: u64,
    /// Prompt tokens the server said it served from its cache (0 when it did not say).
    pub cached: u64,
    /// The turn of its conversation at a multi-turn level.
    pub turn: Option<u64>,
}

impl Rec {
    /// TPOT in µs: `(E2E − TTFT) / (output − 1)`.
    pub fn tpot_us(&self) -> f64 {
        (self.e2e - self.ttft) as f64 / (self.output - 1) as f64
    }

    /// Client queue in ms: `t_send − t_sched`.
    pub fn queue_ms(&self) -> f64 {
        (self.send - self.sched) as f64 * 1e-3
    }
}

/// The measured (not warmup) requests of `level`; every one must have completed.
pub fn records(dir: &Path, level: u64) -> Vec<Rec> {
    read(dir, "requests.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["level"].as_u64() == Some(level) && r["warmup"] != Value::Bool(true))
        .map(|r| {
            assert_eq!(r["status"], "ok", "{r}");
            let u = |k: &str| {
                r[k].as_u64()
                    .unwrap_or_else(|| panic!("no integer {k} in {r}"))
            };
            Rec {
                index: u("index"),
                sched: u("sched_at_us"),
                send: u("send_at_us"),
                done: u("send_at_us") + u("e2e_us"),
                ttft: u("ttft_us"),
                e2e: u("e2e_us"),
                input: u("input_tokens"),
                output: u("output_tokens"),
                cached: r["cached_tokens"].as_u64().unwrap_or(0),
                turn: r["turn"].as_u64(),
            }
        })
        .collect()
}

/// The level's window from its records: first send to last completion, in seconds.
pub fn window_s(rs: &[Rec]) -> f64 {
    let first = rs.iter().map(|r| r.send).min().unwrap();
    let last = rs.iter().map(|r| r.done).max().unwrap();
    (last - first) as f64 * 1e-6
}

/// A CSV file as rows of column → cell (servetop's CSV quotes only cells with commas or
/// quotes; none of the files read here has one, which is checked).
pub fn csv(dir: &Path, name: &str) -> Vec<HashMap<String, String>> {
    let text = read(dir, name);
    assert!(!text.contains('"'), "{name} has quoted cells:\n{text}");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "{name}: {l}");
            header
                .iter()
                .zip(cells)
                .map(|(h, c)| ((*h).to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

pub fn cell_f64(row: &HashMap<String, String>, k: &str) -> f64 {
    row.get(k)
        .unwrap_or_else(|| panic!("no column {k}"))
        .parse()
        .unwrap_or_else(|e| panic!("{k}: {e}"))
}

/// The cells of the row of summary.md's `## {section}` tables whose first cell is `label`.
/// `section` is the heading's text, or its start before a ` (`.
pub fn md_row(dir: &Path, section: &str, label: &str) -> Vec<String> {
    md_tables(dir, &format!("## {section}"))
        .into_iter()
        .flatten()
        .find(|r| r[0] == label)
        .unwrap_or_else(|| {
            panic!(
                "no {label} row under {section}:\n{}",
                read(dir, "summary.md")
            )
        })
}

/// The rows of the first table under summary.md's heading `heading`.
pub fn md_rows(dir: &Path, heading: &str) -> Vec<Vec<String>> {
    md_tables(dir, heading)
        .into_iter()
        .next()
        .unwrap_or_default()
}

/// The tables under summary.md's heading `heading` (`## Title` or `### Title`, whole or up to
/// a ` (`), down to the next heading: each as its rows of trimmed cells, the header and its
/// rule left out.
pub fn md_tables(dir: &Path, heading: &str) -> Vec<Vec<Vec<String>>> {
    let md = read(dir, "summary.md");
    let mut lines = md
        .lines()
        .skip_while(|l| !(*l == heading || l.starts_with(&format!("{heading} ("))));
    assert!(
        lines.next().is_some(),
        "no `{heading}` in summary.md:\n{md}"
    );
    let mut tables: Vec<Vec<Vec<String>>> = Vec::new();
    let mut in_table = false;
    for l in lines.take_while(|l| !l.starts_with('#')) {
        if !l.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<String> = l
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        if !in_table {
            // The header.
            in_table = true;
            tables.push(Vec::new());
        } else if !cells.iter().all(|c| c.chars().all(|ch| "-:".contains(ch))) {
            tables.last_mut().unwrap().push(cells);
        }
    }
    tables
}

/// The most requests in flight at once: each holds `[send, done)`, so one that ends when
/// another starts does not overlap it.
pub fn peak_in_flight(rs: &[Rec]) -> u64 {
    let mut edges: Vec<(u64, i64)> = rs
        .iter()
        .flat_map(|r| [(r.send, 1), (r.done, -1)])
        .collect();
    edges.sort_unstable();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in edges {
        now += d;
        peak = peak.max(now);
    }
    peak as u64
}

pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// `got` equals `want` within `rel` of `want` (and `abs`).
pub fn close(what: &str, got: f64, want: f64, rel: f64, abs: f64) {
    assert!(
        (got - want).abs() <= rel * want.abs() + abs,
        "{what}: file says {got}, computed {want} (tolerance {rel:e} relative + {abs:e})"
    );
}

/// A number as summary.md prints it (docs: 3 significant figures or so): no decimals from 100
/// up, one from 10, two below. `cell` must be `want` so rounded, with `rel` of leeway for
/// what `want` itself may be off by.
pub fn printed(what: &str, cell: &str, want: f64, rel: f64) {
    let decimals = if want.abs() >= 100.0 {
        0
    } else if want.abs() >= 10.0 {
        1
    } else {
        2
    };
    let shown = cell.split_once('.').map_or(0, |(_, f)| f.len());
    assert_eq!(
        shown, decimals,
        "{what}: `{cell}` should show {want} with {decimals} decimals"
    );
    let got: f64 = cell
        .parse()
        .unwrap_or_else(|e| panic!("{what}: `{cell}`: {e}"));
    let half_unit = 0.5 * 10f64.powi(-(decimals as i32));
    assert!(
        (got - want).abs() <= half_unit + rel * want.abs() + 1e-9,
        "{what}: `{cell}` is not {want} rounded to {decimals} decimals"
    );
}

/// `"a ± b"` → (a, b).
pub fn plus_minus(cell: &str) -> (&str, &str) {
    cell.split_once(" ± ")
        .unwrap_or_else(|| panic!("`{cell}` is not mean ± half width"))
}

/// The value of nearest rank ⌈q·n⌉ among `xs` (the percentile definition the HDR histograms
/// follow, docs/metrics.md "Per level").
pub fn nearest_rank(xs: &[f64], q: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).max(1);
    v[rank - 1]
}

/// A histogram percentile against the exact nearest-rank value: within the 3-significant-digit
/// bucket (0.1 %), plus 1 µs (1e-3 ms) for TPOT, which is kept in whole µs.
pub fn hdr_close(what: &str, got_ms: f64, want_ms: f64) {
    close(what, got_ms, want_ms, 1e-3, 1e-3);
}

/// Waits for a child servetop and fails, with its stderr, unless it succeeded.
pub fn finished(c: std::process::Child, what: &str) {
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `@<unix seconds>` this many seconds from now (`--start-at`).
pub fn start_in(s: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!("@{}", now + s)
}
