//! A run split over processes (`--shard I/N` on a shared `--start-at` clock) and merged again
//! (`report --merge`): four shards at C=16 each run together against one simulator, each
//! shard's requests agree with the simulator's own record of them, the merge's throughput and
//! percentiles are those of the shards' records put together (computed here, not by servetop);
//! a shard left out is said, not hidden.
//!
//! Nothing is compared with a second run of servetop: four shard processes and a simulator on
//! two cores measure a differently loaded machine than one process does.

// Integration tests may unwrap: a panic is the failure report. Counts read back as JSON
// numbers compare exactly.
#![allow(clippy::unwrap_used, clippy::float_cmp)]

mod run_files;
mod sim_child;
mod sim_truth;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use serde_json::Value;
use servetop::sim::SimTruth;

use run_files::{finished, start_in};

/// A simulator whose prefill is the bottleneck (200-token prompts at 10,000 tokens/s, 20 ms
/// each, served first): at C=64 a request waits behind the prompts sent before it, so the
/// shards' requests queue behind each other's only if they really run together. No prefix
/// cache: every request is prefilled whole.
const SIM: [&str; 7] = [
    "--no-prefix-cache",
    "--decode-step-ms",
    "5",
    "--batch-growth",
    "0",
    "--prefill-tokens-per-s",
    "10000",
];

fn run_args<'a>(url: &'a str, out: &'a str, start_at: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--base-url",
        url,
        "--concurrency",
        "64",
        "--long-context",
        "none",
        "--input-len",
        "200",
        "--output-len",
        "64",
        "--level-seconds",
        "6",
        "--drain-seconds",
        "3",
        "--start-at",
        start_at,
        "--seed",
        "11",
        "--no-gpu",
        "--headless",
        "--out",
        out,
    ]
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(args)
        .env_remove("SERVETOP_API_KEY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn servetop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(args)
        .output()
        .unwrap()
}

fn results(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

fn f(level: &Value, key: &str) -> f64 {
    level[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing: {level}"))
}

/// Where one test's runs went.
struct Runs {
    tmp: PathBuf,
    shards: Vec<String>,
    /// A run that is not a shard, for the merge to refuse.
    single: String,
    merged: String,
    /// Shard 0's `/metrics` page mid-level (`--metrics-listen`).
    page: String,
    /// The simulator's record once the shards were done, and how long they ran.
    truth: SimTruth,
    run_s: f64,
}

impl Runs {
    fn dir(&self, n: &str) -> String {
        self.tmp.join(n).display().to_string()
    }
}

/// Four shards on one clock, then a run that is not a shard, then the merge.
fn run_all() -> Runs {
    let (mut sim, url) = sim_child::spawn(&SIM, &[]);
    let tmp = std::env::temp_dir().join(format!("servetop-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let dir = |n: &str| tmp.join(n).display().to_string();
    let shard_dirs: Vec<String> = (0..4).map(|i| dir(&format!("s{i}"))).collect();
    // Every shard starts its level at the same instant.
    let at = start_in(5);
    let began = std::time::Instant::now();
    let shards: Vec<Child> = (0..4)
        .map(|i| {
            let label = format!("{i}/4");
            let mut a = run_args(&url, &shard_dirs[i], &at);
            a.extend(["--shard", &label]);
            if i == 0 {
                a.extend(["--metrics-listen", "127.0.0.1:0"]);
            }
            spawn(&a)
        })
        .collect();
    let mut shards = shards.into_iter();
    let page = scrape_mid_run(shards.next().unwrap());
    for (i, c) in shards.enumerate() {
        finished(c, &format!("shard {}", i + 1));
    }
    let run_s = began.elapsed().as_secs_f64();
    let truth = sim_truth::fetch(&url);
    let single = dir("single");
    let at = start_in(3);
    finished(spawn(&run_args(&url, &single, &at)), "the single process");
    let _ = sim.kill();
    let merged = dir("merged");
    let mut merge = vec!["report", "--merge"];
    merge.extend(shard_dirs.iter().map(String::as_str));
    merge.extend(["--out", &merged]);
    let out = servetop(&merge);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Runs {
        tmp,
        shards: shard_dirs,
        single,
        merged,
        page,
        truth,
        run_s,
    }
}

/// `GET /metrics` of the shard at `addr` (host:port).
fn get_metrics(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).ok()?;
    write!(
        c,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

/// A value of the page (`name` with its labels, as written).
fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Shard 0's `/metrics` while its level runs (requests done, level under way), and after
/// the shard has ended: the page it served last.
fn scrape_mid_run(mut c: Child) -> String {
    use std::io::BufRead;
    let stderr = c.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(url) = line.split("http://").nth(1) {
                let _ = tx.send(url.trim_end_matches("/metrics").to_string());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let addr = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the shard says where its metrics are");
    let mut mid = None;
    while c.try_wait().unwrap().is_none() {
        if let Some(p) = get_metrics(&addr)
            && metric(&p, "servetop_requests_total{outcome=\"ok\"}").unwrap_or(0.0) > 0.0
            && metric(&p, "servetop_level{kind=\"sweep\",label=\"C=16\"}") == Some(0.0)
        {
            mid = Some(p);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let status = c.wait().unwrap();
    let log = reader.join().unwrap();
    assert!(status.success(), "shard 0 failed: {log}");
    mid.unwrap_or_else(|| panic!("no /metrics page mid-level from shard 0: {log}"))
}

/// The shards ran together against one server, and each measured what the server did: the
/// server's own record holds every shard's requests (by their ids), all 64 workers had a
/// request in the server at once, and each request's send, first and last token agree with the
/// server's times within a fixed tolerance.
fn shards_against_the_server(r: &Runs) {
    sim_truth::guard(&r.truth, r.run_s);
    for (i, d) in r.shards.iter().enumerate() {
        let (records, origins) = sim_truth::run_records(Path::new(d));
        let prefix = format!("servetop-shard{i}of4");
        let a = sim_truth::agree_all_with(&records, &origins, &r.truth, &prefix);
        let level = &results(Path::new(d))["sweep"][0];
        assert_eq!(
            a.requests as f64,
            f(level, "completed"),
            "shard {i}: every completed request is in the server's record"
        );
        assert_eq!(level["concurrency"], 16);
    }
    // The peak of requests the server held at once (read to last token written): a closed-loop
    // worker never has two, so 64 means the four shards' 16 workers overlapped.
    let mut edges: Vec<(u64, i32)> = r
        .truth
        .requests
        .iter()
        .filter(|t| {
            t.request_id
                .as_deref()
                .is_some_and(|id| !id.contains("warmup"))
        })
        .filter_map(|t| Some([(t.received_unix_us, 1), (t.last_write_unix_us()?, -1)]))
        .flatten()
        .collect();
    edges.sort_unstable();
    let peak = edges
        .iter()
        .scan(0, |n, &(_, d)| {
            *n += d;
            Some(*n)
        })
        .max()
        .unwrap();
    assert_eq!(peak, 64, "requests in the server at once");
}

/// The merged level against answers computed here from the shards' records themselves:
/// throughput over the window from the first send to the last completion of any shard (on the
/// Unix clock), and TTFT, TPOT, E2E and ITL percentiles as the nearest rank of all the records'
/// values together, within the histogram's 0.1 %.
fn merged_against_the_union(r: &Runs) -> Vec<(String, f64)> {
    let m = results(Path::new(&r.merged));
    let ml = &m["sweep"][0];
    assert_eq!(
        ml["concurrency"], 64,
        "the shards' workers add up to the level's"
    );
    assert_eq!(m["merged"]["shards"], 4);
    assert!(m["merged"]["missing"].is_null(), "{}", m["merged"]);
    let mut ok = Vec::new();
    let (mut first_send, mut last_end) = (u64::MAX, 0u64);
    for d in &r.shards {
        let (records, origins) = sim_truth::run_records(Path::new(d));
        for rec in records.into_iter().filter(|x| !x.warmup && x.level == 0) {
            let o = origins[&0];
            first_send = first_send.min(o + rec.send_at_us);
            // A request completes at its last token (send + E2E); one that did not, when its
            // exchange ended (docs/metrics.md "Per level", window).
            let end = match (rec.is_ok(), rec.e2e_us) {
                (true, Some(e2e)) => rec.send_at_us + e2e,
                _ => rec.end_at_us,
            };
            last_end = last_end.max(o + end);
            if rec.is_ok() {
                ok.push(rec);
            }
        }
    }
    assert_eq!(f(ml, "completed") as usize, ok.len());
    let tokens: u64 = ok.iter().map(|x| x.output_tokens).sum();
    let want_tput = tokens as f64 / ((last_end - first_send) as f64 / 1e6);
    let throughput = f(ml, "output_throughput");
    assert!(
        (throughput - want_tput).abs() <= want_tput * 1e-3,
        "output_throughput {throughput:.2} against {tokens} tokens over the shards' window: {want_tput:.2}"
    );
    let ms = |us: u64| us as f64 / 1e3;
    let ttft: Vec<f64> = ok.iter().map(|x| ms(x.ttft_us.unwrap())).collect();
    let e2e: Vec<f64> = ok.iter().map(|x| ms(x.e2e_us.unwrap())).collect();
    let tpot: Vec<f64> = ok
        .iter()
        .filter(|x| x.output_tokens > 1)
        .map(|x| (ms(x.e2e_us.unwrap()) - ms(x.ttft_us.unwrap())) / (x.output_tokens - 1) as f64)
        .collect();
    // ITL: each chunk's gap after the first, split evenly over its tokens, one value a token.
    let mut itl = Vec::new();
    for x in &ok {
        assert!(
            !x.chunks.is_empty(),
            "shards keep their chunks for the merge"
        );
        for w in x.chunks.windows(2) {
            let gap = ms(w[1].t_us - w[0].t_us) / f64::from(w[1].tokens);
            itl.extend(std::iter::repeat_n(gap, w[1].tokens as usize));
        }
    }
    let mut report = Vec::new();
    let mut wants = vec![("output_throughput".to_string(), want_tput)];
    for (name, values) in [
        ("ttft", &ttft),
        ("tpot", &tpot),
        ("e2el", &e2e),
        ("itl", &itl),
    ] {
        for (key, p) in [("median", 50.0), ("p90", 90.0), ("p99", 99.0)] {
            let key = format!("{key}_{name}_ms");
            let want = sim_truth::nearest_rank(values, p);
            wants.push((key.clone(), want));
            let got = f(ml, &key);
            report.push(format!(
                "{key}: merged {got:.3}, the records' own {want:.3}"
            ));
            assert!(
                (got - want).abs() <= want * 1e-3 + 1e-3,
                "{}",
                report.join("\n")
            );
        }
    }
    eprintln!("{}", report.join("\n"));
    wants
}

/// The merged run's files read back: sweep.csv's level row holds the figures computed from the
/// union of the shards' records (`wants`, as in `merged_against_the_union`), and summary.md's
/// Shards table names each shard with its run directory, host, requests (its requests.jsonl's
/// measured lines, counted here), clock against the server, latest start and state (each
/// shard's own results.json).
fn merged_files_read_back(r: &Runs, wants: &[(String, f64)]) {
    let merged = Path::new(&r.merged);
    let rows = run_files::csv(merged, "sweep.csv");
    assert_eq!(rows.len(), 1, "one level");
    let row = &rows[0];
    assert_eq!(row["concurrency"], "64");
    for (key, want) in wants {
        if let Some(cell) = row.get(key) {
            run_files::close(
                &format!("sweep.csv {key}"),
                cell.parse().unwrap(),
                *want,
                1e-3,
                1e-3,
            );
        }
    }
    assert!(
        [
            "output_throughput",
            "median_ttft_ms",
            "p99_itl_ms",
            "p99_e2el_ms"
        ]
        .iter()
        .all(|k| row.contains_key(*k)),
        "sweep.csv columns"
    );
    let table = run_files::md_rows(merged, "## Shards");
    assert_eq!(table.len(), 4, "a row a shard: {table:?}");
    for (i, (cells, d)) in table.iter().zip(&r.shards).enumerate() {
        let own = results(Path::new(d));
        let measured = run_files::read(Path::new(d), "requests.jsonl")
            .lines()
            .filter(|l| !l.contains("\"warmup\":true"))
            .count();
        let late = own["sweep"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|l| l["start_late_ms"].as_i64())
            .max()
            .map_or("-".to_string(), |v| v.to_string());
        assert_eq!(
            [
                &cells[0], &cells[1], &cells[2], &cells[3], &cells[5], &cells[6]
            ],
            [
                &format!("{i}/4"),
                d,
                own["host"].as_str().unwrap(),
                &measured.to_string(),
                &late,
                own["state"].as_str().unwrap()
            ],
            "summary.md Shards row {i}"
        );
        let offset = own["clock_offset"]["offset_ms"].as_f64().unwrap();
        run_files::printed(
            &format!("shard {i} clock vs server"),
            &cells[4],
            -offset,
            1e-9,
        );
    }
}

/// A shard left out is said (results.json, summary.md, stderr); a shard given twice, or a run
/// that is not a shard, is refused in one line.
fn missing_and_refused(r: &Runs) {
    let partial = r.dir("partial");
    let s = &r.shards;
    let out = servetop(&["report", "--merge", &s[0], &s[1], &s[3], "--out", &partial]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("merged 3 of 4 shards") && stderr.contains("missing: 2/4"),
        "{stderr}"
    );
    let p = results(Path::new(&partial));
    assert_eq!(p["merged"]["missing"], serde_json::json!([2]));
    assert_eq!(p["sweep"][0]["concurrency"], 48);
    let md = std::fs::read_to_string(PathBuf::from(&partial).join("summary.md")).unwrap();
    assert!(md.contains("**missing: shard 2/4**"), "{md}");
    let table = run_files::md_rows(Path::new(&partial), "## Shards");
    let names: Vec<(&str, &str)> = table
        .iter()
        .map(|c| (c[0].as_str(), c[1].as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("0/4", s[0].as_str()),
            ("1/4", &s[1]),
            ("3/4", &s[3]),
            ("2/4", "**missing**")
        ],
        "summary.md Shards table"
    );
    let twice = servetop(&["report", "--merge", &s[0], &s[0], "--out", &r.dir("twice")]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("are both shard 0/4"));
    let mixed = servetop(&[
        "report",
        "--merge",
        &s[0],
        &r.single,
        "--out",
        &r.dir("mixed"),
    ]);
    assert_eq!(mixed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&mixed.stderr).contains("is not a shard"));
    let again = servetop(&["report", "--merge", &s[0], "--out", &r.merged]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "an existing run is not overwritten"
    );
}

/// The live page mid-level: Prometheus text, every name `servetop_`, counts no more than the
/// shard's final ones, histograms whose `+Inf` bucket is their count.
fn live_page(r: &Runs) {
    let p = &r.page;
    for l in p.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        assert!(l.starts_with("servetop_"), "{l}");
        let v = l.rsplit(' ').next().unwrap();
        assert!(v.parse::<f64>().is_ok(), "{l}");
    }
    assert!(p.contains("shard=\"0/4\",simulated=\"true\""), "{p}");
    let ok = metric(p, "servetop_requests_total{outcome=\"ok\"}").unwrap();
    let done = f(&results(Path::new(&r.shards[0]))["sweep"][0], "completed");
    assert!(
        ok > 0.0 && ok <= done,
        "{ok} mid-level of {done} in the end"
    );
    for h in ["ttft", "itl", "tpot", "e2e"] {
        let inf = metric(p, &format!("servetop_{h}_seconds_bucket{{le=\"+Inf\"}}")).unwrap();
        let count = metric(p, &format!("servetop_{h}_seconds_count")).unwrap();
        assert_eq!(inf, count, "{h}");
    }
    assert_eq!(metric(p, "servetop_ttft_seconds_count"), Some(ok));
    eprintln!(
        "shard 0 mid-level:\n{}",
        p.lines()
            .filter(|l| !l.starts_with('#') && !l.contains("_bucket"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn four_shards_merge_into_one_run_of_all_their_records() {
    let runs = run_all();
    live_page(&runs);
    shards_against_the_server(&runs);
    let wants = merged_against_the_union(&runs);
    merged_files_read_back(&runs, &wants);
    missing_and_refused(&runs);
    let _ = std::fs::remove_dir_all(&runs.tmp);
}
