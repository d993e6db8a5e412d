//! `servetop report A B C` compares only like with like (docs/outputs.md "Charts, reports and
//! comparisons"). Three runs of the real binary against one in-process simulator:
//!
//! - A: C=1,2 of 200 in / 20 out tokens, and long-context lengths of 1000 and 2000 tokens;
//! - B: C=1,2 of 2000 in / 50 out tokens, no long context: at the same places as A, other
//!   requests;
//! - C: C=2,4 of A's lengths, and A's 1000-token long-context length: like A where both ran.
//!
//! Checked against what this file knows it asked for and what each run's results.json says:
//! summary.md gives no change between A's and B's levels and names the keys that differ (with
//! the values this file passed), stderr says the same, and the change between A's and C's C=2
//! and 1K levels is the one computed here from the two results.json; the charts' title bands
//! give each run's plan, and the long-context chart leaves B (no long-context level) out of
//! its legends, in the text it draws and in its pixels. A comparison of A and B alone, where
//! nothing is comparable, still exits 0.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use servetop::export::charts::{ChartRun, ChartText, render_described};
use servetop::export::report::load_run;

mod run_files;
use run_files::{bin, read, results, succeed};

/// The runs' plans: (label, concurrency, input, output, long-context lengths).
const PLANS: [(&str, &str, u64, u64, &str); 3] = [
    ("A", "1,2", 200, 20, "1000,2000"),
    ("B", "1,2", 2000, 50, "none"),
    ("C", "2,4", 200, 20, "1000"),
];

/// Long-context output tokens of A and C.
const LC_OUT: u64 = 8;

/// A fresh directory of this process for `name`.
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "servetop-report-compare-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Runs the three plans headless against one simulator; returns their directories.
fn three_runs() -> Vec<PathBuf> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut sim = servetop::sim::SimConfig::preset("fast").unwrap();
    sim.decode_step_ms = 2.0;
    let h = rt
        .block_on(servetop::sim::start(
            sim,
            SocketAddr::from(([127, 0, 0, 1], 0)),
        ))
        .unwrap();
    let url = h.url();
    PLANS
        .iter()
        .map(|(name, cs, input, output, lc)| {
            let dir = tmp(name);
            succeed(
                Command::new(bin())
                    .args(["run", "--base-url", &url, "--headless"])
                    .args(["--concurrency", cs, "--requests-per-level", "4"])
                    .args(["--input-len", &input.to_string()])
                    .args(["--output-len", &output.to_string()])
                    .args(["--long-context", lc])
                    .args(["--long-context-output-len", &LC_OUT.to_string()])
                    .args(["--api-key-env", "SERVETOP_TEST_NO_KEY"])
                    .args(["--chart-size", "400x225"])
                    .args(["--out", dir.to_str().unwrap()]),
            );
            dir
        })
        .collect()
}

/// `servetop report` of `dirs` labelled by their plans' names into `out`.
fn report(dirs: &[&PathBuf], names: &[&str], out: &Path) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("report");
    cmd.args(dirs.iter().map(|d| d.as_os_str()));
    for n in names {
        cmd.args(["--label", n]);
    }
    cmd.args(["--out", out.to_str().unwrap(), "--chart-size", "800x450"]);
    cmd.output().unwrap()
}

/// The side-by-side table of summary.md: its header's cells and each row's.
fn side_by_side(out: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let md = read(out, "summary.md");
    let cells = |l: &str| -> Vec<String> {
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = md
        .lines()
        .skip_while(|l| !l.starts_with("## Side by side"))
        .skip(1)
        .skip_while(|l| !l.starts_with('|'));
    let header = cells(lines.next().unwrap_or_else(|| panic!("no table:\n{md}")));
    let rows = lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(cells)
        .collect();
    (header, rows)
}

/// The cell of row `level` under run `run`'s `figure` column (`delta`: the Δ column after it).
fn cell<'a>(
    table: &'a (Vec<String>, Vec<Vec<String>>),
    level: &str,
    run: &str,
    figure: &str,
    delta: bool,
) -> &'a str {
    let (header, rows) = table;
    // A run's column begins with its name (summary.md adds its plan when the plans differ).
    let col = header
        .iter()
        .position(|h| {
            (h.starts_with(&format!("{run} ")) || h.starts_with(&format!("{run} · ")))
                && h.ends_with(figure)
        })
        .unwrap_or_else(|| panic!("no {run} {figure} column in {header:?}"));
    let col = if delta { col + 1 } else { col };
    if delta {
        assert_eq!(header[col], "Δ", "{header:?}");
    }
    let row = rows
        .iter()
        .find(|r| r[0] == level)
        .unwrap_or_else(|| panic!("no {level} row in {rows:?}"));
    &row[col]
}

/// A level of a results.json: `list` (`sweep`, `long_context`) where `key` is `value`.
fn level<'a>(r: &'a Value, list: &str, key: &str, value: u64) -> &'a Value {
    r[list]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l[key].as_u64() == Some(value))
        .unwrap_or_else(|| panic!("no {list} level with {key} {value}"))
}

/// The change from `a`'s `figure` to `b`'s, in percent of `a`'s.
fn change(a: &Value, b: &Value, figure: &str) -> f64 {
    let (x, y) = (a[figure].as_f64().unwrap(), b[figure].as_f64().unwrap());
    assert!(x > 0.0, "{figure} {x}");
    (y - x) / x * 100.0
}

/// `+12.3 %` read back as 12.3.
fn pct(cell: &str) -> f64 {
    cell.strip_suffix(" %")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a change: {cell:?}"))
}

/// `1 000 in / 20 out tokens`, as a run's plan reads.
fn plan(input: u64, output: u64) -> String {
    format!("{input} in / {output} out tokens")
}

fn check_table(out: &Path, runs: &[Value]) {
    let t = side_by_side(out);
    let figures = [
        ("out tok/s", "output_throughput"),
        ("TTFT p50 (ms)", "median_ttft_ms"),
    ];
    // A vs B: at the same places, other requests: no change.
    for c in ["C=1", "C=2"] {
        for (figure, _) in figures {
            assert_eq!(
                cell(&t, c, "B", figure, true),
                "not compared",
                "{c} {figure}"
            );
            assert!(!cell(&t, c, "B", figure, false).is_empty());
        }
    }
    // A vs C: the same requests at C=2 and at the 1000-token length: the change as computed
    // here from the two results.json (the table prints one decimal).
    for (row, list, key, at) in [
        ("C=2", "sweep", "concurrency", 2),
        ("1K ctx", "long_context", "input_len", 1000),
    ] {
        for (figure, json) in figures {
            let want = change(
                level(&runs[0], list, key, at),
                level(&runs[2], list, key, at),
                json,
            );
            let got = pct(cell(&t, row, "C", figure, true));
            assert!(
                (got - want).abs() <= 0.05 + 1e-9,
                "{row} {figure}: the table says {got} %, the runs' results.json {want} %"
            );
        }
        // B ran nothing like it at the long-context length: no change either.
        if list == "long_context" {
            assert_eq!(cell(&t, row, "B", "out tok/s", true), "-");
        }
    }
    // A place only C measured, and one only A measured (at the first run's side).
    assert_eq!(cell(&t, "C=4", "C", "out tok/s", true), "-");
    assert_eq!(cell(&t, "C=1", "C", "out tok/s", true), "-");
    assert_eq!(cell(&t, "2K ctx", "C", "out tok/s", true), "-");
}

#[test]
fn report_compares_only_levels_that_sent_the_same_requests() {
    let dirs = three_runs();
    let runs: Vec<Value> = dirs.iter().map(|d| results(d)).collect();
    let names: Vec<&str> = PLANS.iter().map(|p| p.0).collect();
    let out = tmp("out");
    let o = report(&dirs.iter().collect::<Vec<_>>(), &names, &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    check_table(&out, &runs);
    // The keys that differ, with A's value then B's, under the table and on stderr.
    let (a, b) = (PLANS[0], PLANS[1]);
    let why = format!(
        "at C=1, C=2: not compared: input_len {} vs {}, output_len {} vs {}",
        a.2, b.2, a.3, b.3
    );
    let md = read(&out, "summary.md");
    let note = md
        .lines()
        .find(|l| l.starts_with("- ") && l.contains(" vs B ·"))
        .unwrap_or_else(|| panic!("no note of what was not compared:\n{md}"));
    assert!(note.ends_with(&why), "{note}");
    assert!(
        stderr.contains(&format!("servetop: warning: A vs B {why}")),
        "{stderr}"
    );
    // A and C are compared wherever both measured: nothing said of them.
    assert!(!stderr.contains("A vs C"), "{stderr}");
    assert!(!md.contains(" vs C ·"), "{md}");
    check_charts(&dirs, &out);
    // Two runs with nothing comparable: said, and still a report written (exit 0).
    let apart = tmp("apart");
    let o = report(&[&dirs[0], &dirs[1]], &names[..2], &apart);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(&format!("A vs B {why}")), "{stderr}");
    assert!(
        stderr.contains("no level of these runs sent the same requests"),
        "{stderr}"
    );
    let t = side_by_side(&apart);
    assert!(
        t.1.iter().flatten().all(|c| !c.ends_with(" %")),
        "a change between unlike runs: {t:?}"
    );
    for d in dirs.iter().chain([&out, &apart]) {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The colours of `png`'s pixels below its title band.
fn colours(png: &Path) -> HashSet<[u8; 3]> {
    let img = image::open(png).unwrap().to_rgb8();
    img.enumerate_pixels()
        .filter(|(_, y, _)| *y >= 80)
        .map(|(_, _, p)| p.0)
        .collect()
}

/// Okabe–Ito blue, vermillion and bluish green: the first, second and third run's colours.
const RUN_COLOURS: [[u8; 3]; 3] = [[0, 114, 178], [213, 94, 0], [0, 158, 115]];

fn check_charts(dirs: &[PathBuf], out: &Path) {
    // What the binary drew: B's colour is in the throughput chart and nowhere in the
    // long-context chart, whose lines and legends are A's and C's.
    let thr = colours(&out.join("charts/throughput.png"));
    let lc = colours(&out.join("charts/long_context.png"));
    assert!(RUN_COLOURS.iter().all(|c| thr.contains(c)));
    assert!(lc.contains(&RUN_COLOURS[0]) && lc.contains(&RUN_COLOURS[2]));
    assert!(
        !lc.contains(&RUN_COLOURS[1]),
        "B, with no long-context level, is drawn in the long-context chart (its legend)"
    );
    // What the charts say: each run's plan in the title band, the legends.
    let loaded: Vec<_> = dirs.iter().map(|d| load_run(d).unwrap()).collect();
    let runs: Vec<ChartRun> = PLANS
        .iter()
        .zip(&loaded)
        .map(|(p, (s, t))| ChartRun {
            label: p.0.into(),
            summary: s,
            telemetry: t,
        })
        .collect();
    let charts = tmp("charts");
    let drawn = render_described(&runs, &charts, (800, 450)).unwrap();
    let text = |name: &str| -> &ChartText {
        &drawn
            .iter()
            .find(|(p, _)| p.ends_with(name))
            .unwrap_or_else(|| panic!("no {name}"))
            .1
    };
    let (a, b, c) = (PLANS[0], PLANS[1], PLANS[2]);
    let sweep = &text("throughput.png").subtitle;
    for want in [
        format!("A, C: {}", plan(a.2, a.3)),
        format!("B: {}", plan(b.2, b.3)),
    ] {
        assert!(sweep.contains(&want), "{want:?} not in {sweep:?}");
    }
    // Three runs, one series each (two may have started within one second).
    assert!(
        sweep.contains(" · 3 runs overlaid") && !sweep.contains("a line per pass"),
        "{sweep}"
    );
    let lc_sub = &text("long_context.png").subtitle;
    for want in [
        format!("A: 1K, 2K in / {LC_OUT} out tokens, one request at a time"),
        format!("C: 1K in / {LC_OUT} out tokens, one request at a time"),
    ] {
        assert!(lc_sub.contains(&want), "{want:?} not in {lc_sub:?}");
    }
    assert!(!lc_sub.contains("B:"), "{lc_sub}");
    assert_eq!(c.4, "1000");
    let legends = &text("long_context.png").legends;
    assert_eq!(legends.len(), 3, "{legends:?}");
    for l in legends {
        let runs: Vec<&str> = l.iter().map(|n| n.split(' ').next().unwrap()).collect();
        assert_eq!(runs, ["A", "C"], "{legends:?}");
    }
    // B is in the sweep charts' legends, which it has data in.
    assert!(
        text("throughput.png")
            .legends
            .iter()
            .all(|l| l.iter().any(|n| n.split(' ').next() == Some("B"))),
        "{:?}",
        text("throughput.png").legends
    );
    let _ = std::fs::remove_dir_all(&charts);
}
