//! A run split over processes (`--shard I/N` on a shared `--start-at` clock) and merged again
//! (`report --merge`): four shards at C=64 in all measure what one process at C=64 measures;
//! the merge's percentiles are exactly those of the shards' records put together; a shard left
//! out is said, not hidden.

// Integration tests may unwrap: a panic is the failure report. Exact float equality is the
// point where the merge and the test fold the same records.
#![allow(clippy::unwrap_used, clippy::float_cmp)]

mod sim_child;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

use serde_json::Value;
use servetop::metrics::{LevelAccumulator, RequestRecord};

/// A simulator whose prefill is the bottleneck (200-token prompts at 10,000 tokens/s, 20 ms
/// each, served first): at C=64 a request waits behind the prompts sent before it, so TTFT
/// is set by how many are ahead (up to 63 × 20 ms), not by when within a decode step it
/// arrived; four shards of 16 and one process of 64 see the same queue only if the shards
/// really run together. No prefix cache: the second run sends the same prompts as the first.
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

fn finished(c: Child, what: &str) {
    let out = c.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `@<unix seconds>` this many seconds from now.
fn start_in(s: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!("@{}", now + s)
}

fn results(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap()
}

fn records(dir: &Path) -> Vec<RequestRecord> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn f(level: &Value, key: &str) -> f64 {
    level[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing: {level}"))
}

/// Nearest-rank percentile of sorted values.
fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank - 1]
}

/// Where one test's runs went.
struct Runs {
    tmp: PathBuf,
    shards: Vec<String>,
    single: String,
    merged: String,
    /// Shard 0's `/metrics` page mid-level (`--metrics-listen`).
    page: String,
}

impl Runs {
    fn dir(&self, n: &str) -> String {
        self.tmp.join(n).display().to_string()
    }
}

/// Four shards on one clock, then one process doing the whole level, then the merge.
fn run_all() -> Runs {
    let (mut sim, url) = sim_child::spawn(&SIM, &[]);
    let tmp = std::env::temp_dir().join(format!("servetop-shards-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let dir = |n: &str| tmp.join(n).display().to_string();
    let shard_dirs: Vec<String> = (0..4).map(|i| dir(&format!("s{i}"))).collect();
    // Every shard starts its level at the same instant.
    let at = start_in(5);
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

/// The merged level against the one process's: the same load, the same figures within 5 %.
fn matches_one_process(r: &Runs) {
    let m = results(Path::new(&r.merged));
    let one = results(Path::new(&r.single));
    let (ml, sl) = (&m["sweep"][0], &one["sweep"][0]);
    assert_eq!(
        ml["concurrency"], 64,
        "the shards' workers add up to the level's"
    );
    assert_eq!(m["merged"]["shards"], 4);
    assert!(m["merged"]["missing"].is_null(), "{}", m["merged"]);
    for d in &r.shards {
        assert_eq!(results(Path::new(d))["sweep"][0]["concurrency"], 16);
    }
    let mut report = Vec::new();
    for key in [
        "output_throughput",
        "median_ttft_ms",
        "p90_ttft_ms",
        "median_tpot_ms",
        "p90_tpot_ms",
        "median_itl_ms",
        "median_e2el_ms",
        "p90_e2el_ms",
    ] {
        let (a, b) = (f(ml, key), f(sl, key));
        report.push(format!(
            "{key}: merged {a:.3} vs one process {b:.3} ({:+.1} %)",
            (a / b - 1.0) * 100.0
        ));
        assert!((a - b).abs() / b <= 0.05, "{}", report.join("\n"));
    }
    eprintln!("{}", report.join("\n"));
}

/// The merge's percentiles are those of all the shards' records together: folded again
/// exactly, and within the histogram's three digits of the raw values' nearest rank.
fn percentiles_of_the_union(r: &Runs) {
    let m = results(Path::new(&r.merged));
    let ml = &m["sweep"][0];
    let all: Vec<RequestRecord> = r
        .shards
        .iter()
        .flat_map(|d| records(Path::new(d)))
        .filter(|r| !r.warmup && r.level == 0)
        .collect();
    let mut acc = LevelAccumulator::new(None);
    for r in &all {
        acc.add(r);
    }
    let folded = acc.stats().dists;
    let ttft = folded.ttft_ms.as_ref().unwrap();
    let mut raw: Vec<u64> = all
        .iter()
        .filter(|r| r.is_ok())
        .filter_map(|r| r.ttft_us)
        .collect();
    raw.sort_unstable();
    assert_eq!(f(ml, "completed") as usize, raw.len());
    for (key, p, exact) in [
        ("median_ttft_ms", 50.0, ttft.p50),
        ("p90_ttft_ms", 90.0, ttft.p90),
        ("p99_ttft_ms", 99.0, ttft.p99),
    ] {
        assert_eq!(
            f(ml, key),
            exact,
            "{key}: the merge folds the records it was given"
        );
        let want = nearest_rank(&raw, p) as f64 / 1000.0;
        assert!(
            (exact - want).abs() <= want * 1e-3 + 1e-3,
            "{key}: {exact} against the records' own {want}"
        );
    }
    assert_eq!(f(ml, "p99_tpot_ms"), folded.tpot_ms.as_ref().unwrap().p99);
    let itl = folded.itl_ms.as_ref().unwrap();
    assert_eq!(
        f(ml, "p99_itl_ms"),
        itl.p99,
        "shards keep their chunks for the merge"
    );
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
fn four_shards_merge_into_the_run_one_process_makes() {
    let runs = run_all();
    live_page(&runs);
    matches_one_process(&runs);
    percentiles_of_the_union(&runs);
    missing_and_refused(&runs);
    let _ = std::fs::remove_dir_all(&runs.tmp);
}
