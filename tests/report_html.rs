//! report.html in a real browser: the demo's page opened from disk in headless Chromium, checked
//! through the browser against the run's own results.json and charts/ — no console error and
//! no request but the page itself; every chart the PNGs draw drawn (points counted, pixels not
//! blank); each finding's text and each sweep and long-context table cell as results.json has
//! it; a click on a finding highlighting its levels' rows and chart points; a click on a column
//! head sorting its table. A screenshot of the page is kept (`SERVETOP_REPORT_SCREENSHOT=PATH`
//! writes it there too, as the README's was).
//!
//! Chromium is Debian's `chromium` package (`.ci/run` installs it). Without it this suite skips,
//! saying so, unless `SERVETOP_REQUIRE_CHROMIUM=1` (CI) makes a missing browser a failure.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod browser;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// The browser, or none (skipping) where it is not installed and not required.
fn chromium() -> Option<PathBuf> {
    let found = browser::find_chromium();
    if found.is_none() {
        assert!(
            std::env::var("SERVETOP_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "SERVETOP_REQUIRE_CHROMIUM=1 but no Chromium is installed (apt-get install chromium)"
        );
        eprintln!("Chromium is not installed (apt-get install chromium): skipping");
    }
    found
}

/// A fresh directory under the temp dir for this process's `name`.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "servetop-report-html-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The demo, headless, into `dir`; it must succeed.
fn demo(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["demo", "--headless", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Half a unit of the last digit `shown` gives: how far a correctly rounded figure may lie
/// from the value it was rounded from.
fn half_unit(shown: &str) -> f64 {
    let decimals = shown.split_once('.').map_or(0, |(_, d)| d.len());
    0.5 * 10f64.powi(-i32::try_from(decimals).unwrap())
}

/// `shown` is `want` rounded for display (or `-` where there is no value).
fn shows(shown: &str, want: Option<f64>, what: &str) {
    let Some(want) = want else {
        assert_eq!(
            shown, "-",
            "{what}: the page shows {shown}, results.json has none"
        );
        return;
    };
    let got: f64 = shown
        .trim_end_matches('%')
        .parse()
        .unwrap_or_else(|_| panic!("{what}: the page shows {shown:?}, not a number"));
    assert!(
        (got - want).abs() <= half_unit(shown) + 1e-9,
        "{what}: the page shows {shown}, results.json has {want}"
    );
}

/// The cells of the table row of `level` in the table whose head has `first` as its first
/// column and a column `has`, by column head.
fn row(b: &mut browser::Browser, (first, has): (&str, &str), level: &str) -> Vec<(String, String)> {
    let js = format!(
        r##"(() => {{
            const t = [...document.querySelectorAll("#tables table")].find((t) => {{
                const h = [...t.tHead.rows[0].cells].map((c) => c.textContent);
                return h[0] === {first:?} && h.includes({has:?});
            }});
            if (!t) return null;
            const heads = [...t.tHead.rows[0].cells].map((c) => c.textContent);
            const r = [...t.tBodies[0].rows].find((r) => r.dataset.level === {level:?});
            return r ? [...r.cells].map((c, i) => [heads[i], c.textContent]) : null;
        }})()"##
    );
    let v = b.eval(&js).unwrap();
    serde_json::from_value(v.clone())
        .unwrap_or_else(|_| panic!("no row for {level} in the {first:?} table: {v}"))
}

fn cell<'a>(cells: &'a [(String, String)], head: &str) -> &'a str {
    cells.iter().find(|(h, _)| h == head).map_or_else(
        || panic!("no column {head:?} in {cells:?}"),
        |(_, c)| c.as_str(),
    )
}

/// `v` with every number as a float: the browser writes 64 where serde wrote 64.0.
fn numbers(v: &Value) -> Value {
    match v {
        Value::Number(n) => serde_json::json!(n.as_f64()),
        Value::Array(a) => Value::Array(a.iter().map(numbers).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), numbers(v))).collect()),
        other => other.clone(),
    }
}

fn f(l: &Value, key: &str) -> Option<f64> {
    l[key].as_f64()
}

/// Counts the pixels of `selector`'s canvases that are drawn and not white, and those in the
/// highlight's translucent amber alone — read back from the canvas (transparent where nothing
/// is drawn).
fn pixels(b: &mut browser::Browser, selector: &str) -> (u64, u64) {
    let js = format!(
        r#"(() => {{
            let ink = 0, amber = 0;
            for (const c of document.querySelectorAll({selector:?} + " canvas")) {{
                const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
                for (let i = 0; i < d.length; i += 4) {{
                    if (d[i + 3] > 0 && (d[i] < 245 || d[i + 1] < 245 || d[i + 2] < 245)) ink++;
                    if (d[i + 3] > 40 && d[i + 3] < 120 && d[i] > 245 && d[i + 1] > 180 && d[i + 1] < 215 && d[i + 2] < 30) amber++;
                }}
            }}
            return [ink, amber];
        }})()"#
    );
    let v = b.eval(&js).unwrap();
    (v[0].as_u64().unwrap(), v[1].as_u64().unwrap())
}

/// The sweep levels that completed a request.
fn done_sweep(results: &Value) -> Vec<&Value> {
    results["sweep"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["completed"].as_u64() > Some(0))
        .collect()
}

/// Every chart the PNGs draw is on the page, and drawn: its points counted, its canvas not
/// blank; a panel with nothing to draw says why; the throughput chart's points and the
/// timeline's requests are the run's.
fn charts_are_drawn(b: &mut browser::Browser, dir: &Path, results: &Value) {
    let mut pngs: Vec<String> = std::fs::read_dir(dir.join("charts"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".png").map(String::from)
        })
        .collect();
    pngs.sort();
    assert!(pngs.len() >= 7, "{pngs:?}");
    let mut on_page: Vec<String> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('figure.figure')].map((f) => f.id.slice(4))")
            .unwrap(),
    )
    .unwrap();
    on_page.sort();
    assert_eq!(on_page, pngs);
    let charts: Vec<(String, Option<String>, bool)> = serde_json::from_value(
        b.eval("[...document.querySelectorAll('[data-chart]')].map((e) => [e.dataset.chart, e.dataset.points ?? null, e.classList.contains('empty')])")
            .unwrap(),
    )
    .unwrap();
    assert!(charts.len() > pngs.len(), "{charts:?}");
    for (name, points, empty) in &charts {
        let n: u64 = points
            .as_deref()
            .unwrap_or_else(|| panic!("{name} was not drawn"))
            .parse()
            .unwrap();
        if *empty {
            assert_eq!(n, 0, "{name}");
            continue;
        }
        assert!(n > 0, "{name} drew no point");
        let (ink, _) = pixels(b, &format!("[data-chart='{name}']"));
        assert!(ink > 500, "{name}: {ink} pixels drawn");
    }
    // The throughput chart's points are results.json's: one a sweep level, at its
    // concurrency, its output tokens/s.
    let done = done_sweep(results);
    let drawn = b
        .eval("JSON.parse(document.getElementById('figures').textContent).find((f) => f.name === 'throughput').spec.panels[0].lines[0].points")
        .unwrap();
    let want: Vec<[f64; 2]> = done
        .iter()
        .map(|l| {
            [
                l["concurrency"].as_f64().unwrap(),
                f(l, "output_throughput").unwrap(),
            ]
        })
        .collect();
    assert_eq!(
        serde_json::from_value::<Vec<[f64; 2]>>(drawn).unwrap(),
        want
    );
    let count = b
        .eval("document.querySelector(\"[data-chart='throughput/0']\").dataset.points")
        .unwrap();
    assert_eq!(count.as_str().unwrap(), done.len().to_string());
    // The timeline drew every measured request.
    let requests_jsonl = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    let measured = requests_jsonl
        .lines()
        .filter(|l| !l.contains("\"warmup\":true"))
        .count();
    let lanes = b
        .eval("document.querySelector(\"[data-chart='requests']\").dataset.points")
        .unwrap();
    assert_eq!(lanes.as_str().unwrap(), measured.to_string());
}

/// Each finding's text, and the sweep and long-context tables' cells, as results.json has them.
fn findings_and_tables_are_the_results(b: &mut browser::Browser, results: &Value) {
    let done = done_sweep(results);
    // Each finding's text, as results.json has it.
    let findings = results["findings"].as_array().unwrap();
    assert!(findings.len() >= 5);
    for fd in findings {
        let id = fd["id"].as_str().unwrap();
        let text = b
            .eval(&format!(
                "document.querySelector('li.finding[data-finding={id:?}] .finding-text').textContent"
            ))
            .unwrap();
        assert_eq!(text, fd["text"], "finding {id}");
    }

    // The sweep and long-context tables' cells, as results.json has them.
    for l in &done {
        let label = format!("C={}", l["concurrency"]);
        let cells = row(b, ("C", "out tok/s"), &label);
        let what = |c: &str| format!("{label} {c}");
        assert_eq!(cell(&cells, "C"), l["concurrency"].to_string());
        assert_eq!(cell(&cells, "done"), l["completed"].to_string());
        shows(
            cell(&cells, "req/s"),
            f(l, "request_throughput"),
            &what("req/s"),
        );
        shows(
            cell(&cells, "out tok/s"),
            f(l, "output_throughput"),
            &what("out tok/s"),
        );
        shows(
            cell(&cells, "per-stream tok/s"),
            f(l, "mean_decode_tokens_per_s"),
            &what("per-stream"),
        );
        let (p50, p99) = cell(&cells, "TTFT p50 / p99 (ms)")
            .split_once(" / ")
            .unwrap();
        shows(p50, f(l, "median_ttft_ms"), &what("TTFT p50"));
        shows(p99, f(l, "p99_ttft_ms"), &what("TTFT p99"));
        shows(
            cell(&cells, "TPOT p50 (ms)"),
            f(l, "median_tpot_ms"),
            &what("TPOT p50"),
        );
        shows(
            cell(&cells, "E2E p50 (ms)"),
            f(l, "median_e2el_ms"),
            &what("E2E p50"),
        );
    }
    let ladder = results["long_context"].as_array().unwrap();
    assert!(!ladder.is_empty());
    for l in ladder {
        let label = format!("{}K ctx", l["input_len"].as_u64().unwrap() / 1000);
        let cells = row(b, ("context", "prefill tok/s"), &label);
        let what = |c: &str| format!("{label} {c}");
        shows(
            cell(&cells, "input tokens"),
            f(l, "mean_input_tokens"),
            &what("input"),
        );
        shows(
            cell(&cells, "TTFT mean (ms)"),
            f(l, "mean_ttft_ms"),
            &what("TTFT"),
        );
        shows(
            cell(&cells, "prefill tok/s"),
            f(l, "mean_prefill_tokens_per_s"),
            &what("prefill"),
        );
        shows(
            cell(&cells, "decode tok/s"),
            f(l, "mean_decode_tokens_per_s"),
            &what("decode"),
        );
    }
}

/// The energy table's rows (the demo's GPUs are the simulator's), and the steady state's, as
/// results.json has them.
fn energy_and_steady_rows_are_the_results(b: &mut browser::Browser, results: &Value) {
    for l in &done_sweep(results) {
        let label = format!("C={}", l["concurrency"]);
        let cells = row(b, ("level", "energy (J)"), &label);
        let what = |c: &str| format!("{label} {c}");
        shows(
            cell(&cells, "energy (J)"),
            f(l, "energy_j"),
            &what("energy"),
        );
        shows(
            cell(&cells, "mean power (W)"),
            f(l, "mean_power_w"),
            &what("power"),
        );
        shows(
            cell(&cells, "J / output token"),
            f(l, "joules_per_output_token"),
            &what("J/token"),
        );
        shows(
            cell(&cells, "output tokens / J"),
            f(l, "output_tokens_per_joule"),
            &what("tokens/J"),
        );
        let cells = row(b, ("level", "steady out tok/s"), &label);
        shows(
            cell(&cells, "steady out tok/s"),
            f(l, "steady_output_throughput"),
            &what("steady out tok/s"),
        );
    }
}

/// A click on a finding highlights the rows of exactly its levels, and its points on the
/// charts (amber bands over the sweep's charts); a second click clears it. A click on a
/// column's head sorts its rows by it, ascending.
fn a_click_highlights_and_sorts(b: &mut browser::Browser, dir: &Path, results: &Value) {
    let findings = results["findings"].as_array().unwrap();
    let done = done_sweep(results);
    let latency = findings
        .iter()
        .find(|f| f["id"] == "latency")
        .expect("the demo has a latency finding");
    let mut levels: Vec<String> = serde_json::from_value(latency["levels"].clone()).unwrap();
    levels.sort();
    levels.dedup();
    let (_, amber_before) = pixels(b, "[data-chart='throughput/0']");
    assert_eq!(amber_before, 0);
    b.click("li.finding[data-finding='latency'] .rests")
        .unwrap();
    b.wait_for(
        "document.body.dataset.highlighted > 0",
        Duration::from_secs(5),
    )
    .unwrap();
    let mut lit: Vec<String> = serde_json::from_value(
        b.eval("[...new Set([...document.querySelectorAll('tr.hl')].map((r) => r.dataset.level))]")
            .unwrap(),
    )
    .unwrap();
    lit.sort();
    assert_eq!(lit, levels);
    let (_, amber) = pixels(b, "[data-chart='throughput/0']");
    assert!(
        amber > 100,
        "{amber} highlighted pixels on the throughput chart"
    );
    b.screenshot(&dir.join("report.png"), true).unwrap();
    if let Ok(p) = std::env::var("SERVETOP_REPORT_SCREENSHOT") {
        // The charts, the highlighted finding's levels marked on them.
        b.eval("document.getElementById('charts').scrollIntoView({block: 'start'})")
            .unwrap();
        b.screenshot(Path::new(&p), false).unwrap();
    }
    // Again: the highlight is gone.
    b.click("li.finding[data-finding='latency'] .rests")
        .unwrap();
    assert_eq!(
        b.eval("document.querySelectorAll('tr.hl').length").unwrap(),
        0
    );

    // A click on a column's head sorts its rows by it, ascending.
    b.click("#tables table th:nth-child(4)").unwrap();
    let column: Vec<f64> = serde_json::from_value(
        b.eval("[...document.querySelector('#tables table').tBodies[0].rows].map((r) => parseFloat(r.cells[3].textContent))")
            .unwrap(),
    )
    .unwrap();
    assert!(
        column.len() == done.len() && column.windows(2).all(|w| w[0] <= w[1]),
        "{column:?}"
    );
    assert_eq!(b.console_errors(), Vec::<String>::new());
}

#[test]
fn the_demos_report_opens_from_disk_and_shows_what_results_json_says() {
    let Some(chromium) = chromium() else {
        return;
    };
    // SERVETOP_REPORT_RUN=DIR checks the report of a run already there (the demo's, kept).
    let given = std::env::var_os("SERVETOP_REPORT_RUN").map(PathBuf::from);
    let dir = given.clone().unwrap_or_else(|| temp_dir("demo"));
    if given.is_none() {
        demo(&dir);
    }
    let page = dir.join("report.html");
    let size = std::fs::metadata(&page).unwrap().len();
    assert!(size < 1_000_000, "report.html is {size} bytes");
    let results: Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();

    let mut b = browser::Browser::launch(&chromium, 1400, 1100).unwrap();
    let load_ms = b.open(&page).unwrap();
    b.wait_for(
        "document.body.dataset.drawn === '1'",
        Duration::from_secs(30),
    )
    .unwrap();
    let draw_ms = b.eval("+document.body.dataset.drawMs").unwrap();
    eprintln!(
        "report.html: {size} bytes, load event after {load_ms:.0} ms, charts drawn {draw_ms} ms after navigation began"
    );

    // Nothing went wrong, and nothing was fetched: the one request is the page itself.
    assert_eq!(b.console_errors(), Vec::<String>::new());
    let requests = b.requests();
    let own = b.eval("location.href").unwrap();
    assert_eq!(requests, vec![own.as_str().unwrap().to_string()]);

    // The embedded results are the run's (its credentials masked: the demo has none).
    let embedded = b
        .eval("JSON.parse(document.getElementById('results').textContent)")
        .unwrap();
    assert_eq!(
        numbers(&embedded["findings"]),
        numbers(&results["findings"])
    );
    assert_eq!(numbers(&embedded["sweep"]), numbers(&results["sweep"]));

    charts_are_drawn(&mut b, &dir, &results);
    findings_and_tables_are_the_results(&mut b, &results);
    energy_and_steady_rows_are_the_results(&mut b, &results);
    a_click_highlights_and_sorts(&mut b, &dir, &results);
    drop(b);
    if given.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The page is one file that names no other: no script, style, image or font fetched from
/// anywhere, and a server command's credentials written `***`, wherever the summary has them.
#[test]
fn the_page_embeds_everything_and_masks_credentials() {
    let app = servetop::tui::fixtures::finished_run();
    let mut s = app.session.summary.clone();
    let launch = servetop::serve::ServerLaunch {
        command: "HF_TOKEN=hf_secret1 vllm serve m --api-key sk-secret2 --port 8000".into(),
        context_len: Some(32_768),
        port: 8000,
        ready_s: Some(1.0),
    };
    s.servers = vec![launch];
    let page = servetop::export::html::run_page(&servetop::export::html::PageRun {
        label: "run".into(),
        summary: &s,
        telemetry: &[],
        requests: &[],
    });
    assert!(!page.contains("hf_secret1") && !page.contains("sk-secret2"));
    assert!(page.contains("HF_TOKEN=*** vllm serve m --api-key *** --port 8000"));
    assert!(page.contains("<script type=\"application/json\" id=\"results\""));
    for attr in ["src=", "href=\"http", "url(", "@import", "<link"] {
        assert!(!page.contains(attr), "the page has {attr}");
    }
    // The embedded results read back as the summary, but for the masked command.
    let start = page.find("id=\"results\"").unwrap();
    let json = &page[page[start..].find('>').unwrap() + start + 1..];
    let json = &json[..json.find("</script>").unwrap()];
    let back: servetop::summary::RunSummary = serde_json::from_str(json).unwrap();
    assert_eq!(back.findings, s.findings);
    assert_eq!(back.sweep, s.sweep);
    assert_eq!(
        back.servers[0].command,
        "HF_TOKEN=*** vllm serve m --api-key *** --port 8000"
    );
}

/// `report A B --html`: one page comparing two saved runs of unlike plans, opened in the
/// browser — no error, nothing fetched, every chart drawn with both runs' lines, the unlike-plan
/// warning `report` prints, each run's plan and findings, and the first run's results embedded.
#[test]
fn two_runs_compare_on_one_page() {
    let Some(chromium) = chromium() else {
        return;
    };
    let root = temp_dir("compare");
    let a = servetop::tui::fixtures::finished_run().session.summary;
    let mut b = a.clone();
    b.config.input_len = 2000;
    for (name, s) in [("before", &a), ("after", &b)] {
        let d = root.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("results.json"), serde_json::to_vec(s).unwrap()).unwrap();
    }
    let out = root.join("compare");
    let run = Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["report", "--html", "--out"])
        .arg(&out)
        .arg(root.join("before"))
        .arg(root.join("after"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("different plans"), "{stderr}");
    // --html writes the page alone.
    let written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(written, ["report.html"]);

    let mut page = browser::Browser::launch(&chromium, 1400, 1000).unwrap();
    page.open(&out.join("report.html")).unwrap();
    page.wait_for(
        "document.body.dataset.drawn === '1'",
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(page.console_errors(), Vec::<String>::new());
    assert_eq!(page.requests().len(), 1);
    let unlike = page
        .eval("document.querySelector('.unlike').textContent")
        .unwrap();
    assert!(
        unlike.as_str().unwrap().contains("different plans"),
        "{unlike}"
    );
    let plans = page
        .eval("document.querySelector('ul.runs').textContent")
        .unwrap();
    let plans = plans.as_str().unwrap();
    assert!(
        plans.contains("before: 1000 in") && plans.contains("after: 2000 in"),
        "{plans}"
    );
    // Each run's findings, named by run.
    for (run, s) in [("before", &a), ("after", &b)] {
        let texts: Vec<String> = serde_json::from_value(
            page.eval(&format!(
                "[...document.querySelectorAll('li.finding')].filter((li) => li.querySelector('.run').textContent === {run:?}).map((li) => li.querySelector('.finding-text').textContent)"
            ))
            .unwrap(),
        )
        .unwrap();
        let want: Vec<String> = s.findings.iter().map(|f| f.text.clone()).collect();
        assert_eq!(texts, want, "{run}");
    }
    // The throughput chart has a line per run, both drawn.
    let lines = page
        .eval("JSON.parse(document.getElementById('figures').textContent).find((f) => f.name === 'throughput').spec.panels[0].lines.map((l) => [l.name, l.points.length])")
        .unwrap();
    let lines: Vec<(String, usize)> = serde_json::from_value(lines).unwrap();
    let sweep = a.sweep.iter().filter(|l| l.stats.is_some()).count();
    assert_eq!(
        lines,
        [("before".to_string(), sweep), ("after".to_string(), sweep)]
    );
    let drawn = page
        .eval("document.querySelector(\"[data-chart='throughput/0']\").dataset.points")
        .unwrap();
    assert_eq!(drawn.as_str().unwrap(), (2 * sweep).to_string());
    let (ink, _) = pixels(&mut page, "[data-chart='throughput/0']");
    assert!(ink > 500, "{ink}");
    let first = page
        .eval("JSON.parse(document.getElementById('results').textContent).config.input_len")
        .unwrap();
    assert_eq!(first, 1000);
    drop(page);
    let _ = std::fs::remove_dir_all(&root);
}

/// A measurement, not a check of the demo: the report.html of the run at `SERVETOP_REPORT_RUN`
/// (e.g. one of 100,000 requests) opened five times; prints its size and the median time to
/// its load event and to its charts drawn, and that the timeline was sampled as the page says.
/// `cargo test --release --test report_html -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: needs SERVETOP_REPORT_RUN=DIR"]
fn report_load_time() {
    let Some(chromium) = chromium() else {
        return;
    };
    let dir =
        PathBuf::from(std::env::var_os("SERVETOP_REPORT_RUN").expect("SERVETOP_REPORT_RUN=DIR"));
    let page = dir.join("report.html");
    let size = std::fs::metadata(&page).unwrap().len();
    let mut loads = Vec::new();
    let mut draws = Vec::new();
    for _ in 0..5 {
        let mut b = browser::Browser::launch(&chromium, 1400, 1000).unwrap();
        loads.push(b.open(&page).unwrap());
        b.wait_for(
            "document.body.dataset.drawn === '1'",
            Duration::from_secs(60),
        )
        .unwrap();
        draws.push(
            b.eval("+document.body.dataset.drawMs")
                .unwrap()
                .as_f64()
                .unwrap(),
        );
        assert_eq!(b.console_errors(), Vec::<String>::new());
        assert_eq!(b.requests().len(), 1);
        if loads.len() == 1 {
            let said = b
                .eval("document.querySelector('#timeline .sub').textContent")
                .unwrap();
            let lanes = b
                .eval("document.querySelector(\"[data-chart='requests']\").dataset.points")
                .unwrap();
            eprintln!("timeline: {lanes} requests drawn; the page says: {said}");
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    eprintln!(
        "{}: {size} bytes; load event {:.0} ms, charts drawn {:.0} ms after navigation began (medians of 5)",
        page.display(),
        median(&mut loads),
        median(&mut draws)
    );
}
