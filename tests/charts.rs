//! PNG charts and reports: valid images of the requested size with drawn text and several
//! colours, overlays that show every run, and `report` reproducing summary.md byte for byte.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use image::GenericImageView;
use servetop::export::charts::{ChartRun, render_all};
use servetop::export::report;
use servetop::run::run_headless;
use servetop::sim::{self, AcceptLength, SimConfig};
use servetop::tui::fixtures;
use servetop::workload::RequestCount;

mod chart_pixels;
use chart_pixels::{
    BLUE, GREEN, GREY, PURPLE, PX, Series, VERMILLION, check_series, frames, limit_rows,
    mark_columns, markers, residuals, steps, tick_columns, x_axis_row, y_axis_column,
};

const NAMES: [&str; 6] = [
    "throughput.png",
    "tradeoff.png",
    "latency.png",
    "long_context.png",
    "spec_decoding.png",
    "gpu_timeline.png",
];

/// A fresh directory of its own for each call (tests drawing the same chart run at once).
fn tmp(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("servetop-charts-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn colours_in(img: &image::DynamicImage, area: (u32, u32, u32, u32)) -> HashSet<[u8; 3]> {
    let (x0, y0, w, h) = area;
    let mut set = HashSet::new();
    for y in y0..y0 + h {
        for x in x0..x0 + w {
            let p = img.get_pixel(x, y).0;
            set.insert([p[0], p[1], p[2]]);
        }
    }
    set
}

#[test]
fn every_chart_is_a_png_of_the_requested_size_with_text_and_colours() {
    let app = fixtures::finished_run();
    let dir = tmp("one");
    let runs = [ChartRun {
        label: "synthetic".into(),
        summary: &app.session.summary,
        telemetry: &[],
    }];
    let files = render_all(&runs, &dir, (1200, 700)).unwrap();
    assert_eq!(files.len(), 6);
    for name in NAMES {
        let img = image::open(dir.join(name)).unwrap();
        assert_eq!(img.dimensions(), (1200, 700), "{name}");
        // The title band (top 80 px) holds dark text on white: not blank.
        let title = colours_in(&img, (0, 0, 700, 80));
        assert!(
            title.len() > 5,
            "{name}: title area looks blank ({} colours)",
            title.len()
        );
        assert!(
            title.iter().any(|c| c.iter().all(|v| *v < 100)),
            "{name}: no dark text pixels"
        );
        // Axes, grid, text and at least one series colour.
        let all = colours_in(&img, (0, 0, 1200, 700));
        assert!(all.len() >= 8, "{name}: only {} colours", all.len());
    }
    // Without telemetry, the timeline says why instead of drawing empty axes.
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where the first run's series (Okabe–Ito blue) is drawn in the panel spanning columns
/// `x0..x1`: the mean row of its pixels in the 4 leftmost and the 4 rightmost columns that hold
/// any (the centres of the first and the last marker), and the row of the panel's x axis (the
/// lowest row with a dark run across half the panel).
fn series_ends(img: &image::DynamicImage, x0: u32, x1: u32) -> (f64, f64, f64) {
    const BLUE: [u8; 3] = [0, 114, 178];
    let (_, h) = img.dimensions();
    let is = |x: u32, y: u32, c: [u8; 3]| {
        let p = img.get_pixel(x, y).0;
        [p[0], p[1], p[2]] == c
    };
    let cols: Vec<u32> = (x0..x1)
        .filter(|&x| (0..h).any(|y| is(x, y, BLUE)))
        .collect();
    let mean_row = |xs: &[u32]| {
        let ys: Vec<u32> = xs
            .iter()
            .flat_map(|&x| (0..h).filter(move |&y| is(x, y, BLUE)))
            .collect();
        f64::from(ys.iter().sum::<u32>()) / ys.len() as f64
    };
    let left = mean_row(&cols[..4]);
    let right = mean_row(&cols[cols.len() - 4..]);
    let dark = |x: u32, y: u32| img.get_pixel(x, y).0[..3].iter().all(|v| *v < 80);
    let axis = (0..h)
        .rev()
        .find(|&y| (x0..x1).filter(|&x| dark(x, y)).count() as u32 > (x1 - x0) / 2)
        .expect("an x axis");
    (left, right, f64::from(axis))
}

/// The throughput chart draws the summary's numbers: in each of its three panels (all with a
/// y axis from 0), the height of the last marker over the first is the last level's value over
/// the first level's. 8 %: a marker is 5 px across and the first one stands about 50 px over
/// the axis.
#[test]
fn the_throughput_chart_draws_each_levels_value_at_its_height() {
    let app = fixtures::finished_run();
    let dir = tmp("heights");
    let runs = [ChartRun {
        label: "synthetic".into(),
        summary: &app.session.summary,
        telemetry: &[],
    }];
    render_all(&runs, &dir, (1200, 700)).unwrap();
    let img = image::open(dir.join("throughput.png")).unwrap();
    let sweep = &app.session.summary.sweep;
    let ends = |f: &dyn Fn(&servetop::metrics::LevelStats) -> f64| {
        let v = |i: usize| f(sweep[i].stats.as_ref().unwrap());
        v(sweep.len() - 1) / v(0)
    };
    let want = [
        ends(&|s| s.scalars.output_throughput),
        ends(&|s| s.dists.decode_tokens_per_s.as_ref().unwrap().mean),
        ends(&|s| s.scalars.request_throughput),
    ];
    // The fixture's values move a long way: up 7.8× for tokens/s, down to a tenth per stream.
    assert!(want[0] > 5.0 && want[1] < 0.2 && want[2] > 5.0, "{want:?}");
    for (k, want) in want.into_iter().enumerate() {
        let x0 = 400 * k as u32;
        let (left, right, axis) = series_ends(&img, x0, x0 + 400);
        let drawn = (axis - right) / (axis - left);
        assert!(
            (drawn / want - 1.0).abs() < 0.08,
            "panel {k}: last/first drawn {drawn:.3}, the summary says {want:.3}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_overlay_of_two_runs_draws_both_series() {
    let a = fixtures::finished_run();
    let b = fixtures::finished_run_with(&[1, 2, 4, 8]);
    let dir = tmp("overlay");
    let runs = [
        ChartRun {
            label: "before".into(),
            summary: &a.session.summary,
            telemetry: &[],
        },
        ChartRun {
            label: "after".into(),
            summary: &b.session.summary,
            telemetry: &[],
        },
    ];
    render_all(&runs, &dir, (1600, 900)).unwrap();
    let img = image::open(dir.join("throughput.png")).unwrap();
    let colours = colours_in(&img, (0, 80, 1600, 820));
    // The first two palette colours (Okabe–Ito blue and vermillion) both appear.
    assert!(
        colours.contains(&[0, 114, 178]),
        "first run's colour missing"
    );
    assert!(
        colours.contains(&[213, 94, 0]),
        "second run's colour missing"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn chart_size_is_parsed_and_checked() {
    assert_eq!(servetop::cli::parse_size("1600x900").unwrap(), (1600, 900));
    assert!(servetop::cli::parse_size("16x9").is_err());
    assert!(servetop::cli::parse_size("wide").is_err());
}

async fn real_run(dir: &Path) {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 5.0;
    c.accept_length = AcceptLength::Fixed(2);
    c.gpus = 2;
    let h = sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let mut cfg = servetop::config::RunConfig::demo();
    cfg.base_url = h.url();
    cfg.concurrency = vec![1, 4];
    cfg.output_len = 41;
    cfg.requests_per_level = RequestCount::Fixed(4);
    cfg.long_context = vec![2000, 200_000];
    cfg.long_context_output_len = 9;
    cfg.dcgm_url = Some(format!("{}/dcgm/metrics", h.url()));
    let (_, s) = run_headless(cfg, Some(dir.to_path_buf())).await.unwrap();
    servetop::export::report::write_charts(dir, &s.summary, (800, 500)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_reproduces_summary_md_byte_for_byte() {
    let dir = tmp("report");
    real_run(&dir).await;
    let before = std::fs::read(dir.join("summary.md")).unwrap();
    for name in NAMES {
        assert!(
            dir.join("charts").join(name).exists(),
            "{name} written at the end of the run"
        );
    }
    let sweep_csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    assert_eq!(sweep_csv.lines().count(), 3, "header + 2 levels");
    // A simulated run says so in its exported tables too.
    assert!(sweep_csv.starts_with("run,simulated,"));
    assert!(
        sweep_csv
            .lines()
            .skip(1)
            .all(|l| l.split(',').nth(1) == Some("true")),
        "{sweep_csv}"
    );
    std::fs::remove_file(dir.join("summary.md")).unwrap();
    let files = report::report(std::slice::from_ref(&dir), &[], None, (800, 500)).unwrap();
    assert!(files.iter().any(|f| f.ends_with("summary.md")));
    let after = std::fs::read(dir.join("summary.md")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&before),
        String::from_utf8_lossy(&after)
    );
    let lc = std::fs::read_to_string(dir.join("long_context.csv")).unwrap();
    assert!(lc.contains("200000,skipped"), "{lc}");
    // Two runs overlay into their own directory with one CSV row set per run.
    let out = tmp("report-out");
    report::report(
        &[dir.clone(), dir.clone()],
        &["a".into(), "b".into()],
        Some(&out),
        (800, 500),
    )
    .unwrap();
    let both = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(both.lines().filter(|l| l.starts_with("a,")).count(), 2);
    assert_eq!(both.lines().filter(|l| l.starts_with("b,")).count(), 2);
    assert!(
        report::report(
            std::slice::from_ref(&dir),
            &["x".into(), "y".into()],
            None,
            (800, 500)
        )
        .is_err()
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn tab_screenshots_are_pngs_of_the_terminal_grid() {
    let mut app = fixtures::with_telemetry(2);
    app.ui.no_color = false;
    let buffers = app.tab_buffers(80, 24);
    let dir = tmp("shots");
    let files = servetop::tui::write_screenshots(&dir, &buffers).unwrap();
    assert_eq!(files.len(), 5);
    let (cw, ch) = servetop::export::screenshot::CELL;
    for f in &files {
        let img = image::open(f).unwrap();
        assert_eq!(img.dimensions(), (80 * cw, 24 * ch), "{}", f.display());
        // Text and colours of the real cells, not a blank frame.
        assert!(
            colours_in(&img, (0, 0, 80 * cw, 24 * ch)).len() > 10,
            "{}",
            f.display()
        );
    }
    // The SIMULATED badge keeps its magenta background in the header row.
    let sweep = image::open(&files[0]).unwrap();
    assert!(colours_in(&sweep, (0, 0, 40 * cw, ch)).contains(&[200, 90, 200]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sets a latency distribution's percentiles to `p50` and `p99`, with p90 (and the rest)
/// far from p99: a chart that drew p90 as its p99 line would draw it at half the height.
fn set_dist(d: &mut Option<servetop::metrics::DistStats>, p50: f64, p99: f64) {
    *d = Some(servetop::metrics::DistStats {
        count: 100,
        mean: p50 * 1.1,
        std: p50 * 0.3,
        min: p50 * 0.8,
        p50,
        p90: p50 * 1.25,
        p95: p50 * 1.5,
        p99,
        p999: p99 * 1.02,
        max: p99 * 1.05,
        extra: Vec::new(),
    });
}

/// `latency.png` draws each level's p50 and p99 (both in the run's blue) at their heights: the
/// synthetic run, its latency percentiles set to values whose p90 is far from its p99 (the
/// fixture's own requests spread too little to tell them apart), on a linear axis from 0
/// (they span less than the 30× that turns the axis to log10). In each panel (TTFT, ITL,
/// TPOT) every level has two markers at its concurrency, the upper one at p99; every marker
/// is within 2 px of its value's height on one scale.
#[test]
fn the_latency_chart_draws_p50_and_p99_at_their_heights() {
    let app = fixtures::finished_run();
    let mut summary = app.session.summary.clone();
    // p50 rises 200 → 400 ms over the six levels, p99 from 2.5× to 3× p50.
    let p50 = |i: usize| 200.0 + 40.0 * i as f64;
    let p99 = |i: usize| p50(i) * (2.5 + 0.1 * i as f64);
    let panels = [1.0, 0.05, 0.06];
    for (i, l) in summary.sweep.iter_mut().enumerate() {
        let s = l.stats.as_mut().unwrap();
        assert!(
            s.scalars.reasoning_share.is_none_or(|x| x <= 0.0),
            "no TTFC panel"
        );
        let d = &mut s.dists;
        set_dist(&mut d.ttft_ms, p50(i) * panels[0], p99(i) * panels[0]);
        set_dist(&mut d.itl_ms, p50(i) * panels[1], p99(i) * panels[1]);
        set_dist(&mut d.tpot_ms, p50(i) * panels[2], p99(i) * panels[2]);
    }
    let n = summary.sweep.len();
    assert_eq!(n, 6);
    // Linear: the values span 6×, under the 30× of a log10 axis.
    assert!(p99(n - 1) / p50(0) < 30.0);
    let dir = tmp("latency");
    let runs = [ChartRun {
        label: "synthetic".into(),
        summary: &summary,
        telemetry: &[],
    }];
    render_all(&runs, &dir, (1200, 700)).unwrap();
    let img = image::open(dir.join("latency.png")).unwrap().to_rgb8();
    for (k, name) in ["TTFT", "ITL", "TPOT"].into_iter().enumerate() {
        let x0 = 400 * k as u32;
        let found = markers(&img, BLUE, x0, x0 + 400);
        assert_eq!(found.len(), 2 * n, "{name}: markers at {found:?}");
        let axis = x_axis_row(&img, x0, x0 + 400);
        let y_axis = y_axis_column(&img, x0, x0 + 400);
        let (mut drawn, mut want, mut across, mut log2c) = (vec![], vec![], vec![], vec![]);
        for (i, pair) in found.chunks(2).enumerate() {
            // One column a level: its two markers within a pixel of each other across, at
            // log2 of its concurrency from the y axis.
            assert!((pair[0].0 - pair[1].0).abs() <= 1.0, "{name}: {pair:?}");
            across.push(f64::midpoint(pair[0].0, pair[1].0) - y_axis);
            log2c.push(f64::from(summary.sweep[i].concurrency).log2());
            let (upper, lower) = if pair[0].1 < pair[1].1 {
                (pair[0], pair[1])
            } else {
                (pair[1], pair[0])
            };
            // p99 over p50 at this level, free of any scale: each height within PX of its
            // place, the ratio within PX · (1 + ratio) / (p50's height) of the summary's.
            let (l, u) = (axis - lower.1, axis - upper.1);
            let ratio = p99(i) / p50(i);
            assert!(
                (u / l - ratio).abs() <= PX * (1.0 + ratio) / l,
                "{name} C={}: the p99 marker stands {:.2}× as high as the p50 one ({u:.0} and \
                 {l:.0} px over the axis); the summary's p99 is {ratio:.2}× its p50 (its p90 \
                 1.25×)",
                summary.sweep[i].concurrency,
                u / l,
            );
            drawn.extend([l, u]);
            want.extend([p50(i) * panels[k], p99(i) * panels[k]]);
        }
        let (_, res) = residuals(&across, &log2c);
        assert!(
            res.iter().all(|r| r.abs() <= PX),
            "{name}: levels drawn {across:.1?} px right of the y axis, off log2(C) {log2c:.2?} \
             by {res:.1?} px"
        );
        let (scale, res) = residuals(&drawn, &want);
        // The marker furthest from its value's height names the failure.
        let j = (0..res.len())
            .max_by(|&a, &b| res[a].abs().total_cmp(&res[b].abs()))
            .unwrap();
        let at = |v: &[f64]| v.iter().map(|w| scale * w).collect::<Vec<_>>();
        assert!(
            res[j].abs() <= PX,
            "{name} C={} {}: drawn {:.1} px over the axis, its value {:.2} ms puts it at {:.1} px \
             ({:+.1} px off). Drawn (p50, p99 a level): {drawn:.1?}; where the values put them: \
             {:.1?}; where the p90s would be: {:.1?}",
            summary.sweep[j / 2].concurrency,
            ["p50", "p99"][j % 2],
            drawn[j],
            want[j],
            scale * want[j],
            res[j],
            at(&want),
            at(&(0..n)
                .map(|i| p50(i) * 1.25 * panels[k])
                .collect::<Vec<_>>()),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `long_context.png` draws each finished length at its input length and its value: the
/// synthetic run's 8K, 16K and 30K lengths (60K and 100K skipped, so the axis runs to 105K),
/// in each panel (TTFT, prefill, decode, all on linear axes from 0) one marker a length,
/// within 2 px of where its length and its value put it.
#[test]
fn the_long_context_chart_draws_each_length_at_its_place() {
    let app = fixtures::finished_run();
    let s = &app.session.summary;
    let dir = tmp("long-context");
    let runs = [ChartRun {
        label: "synthetic".into(),
        summary: s,
        telemetry: &[],
    }];
    render_all(&runs, &dir, (1200, 700)).unwrap();
    let img = image::open(dir.join("long_context.png")).unwrap().to_rgb8();
    let done: Vec<_> = s
        .long_context
        .iter()
        .filter(|l| l.stats.is_some())
        .collect();
    let k: Vec<f64> = done.iter().map(|l| l.input_len as f64 / 1000.0).collect();
    assert_eq!(k, [8.0, 16.0, 30.0]);
    let stats = |f: &dyn Fn(&servetop::metrics::LevelStats) -> Option<f64>| -> Vec<f64> {
        done.iter()
            .map(|l| f(l.stats.as_ref().unwrap()).unwrap())
            .collect()
    };
    let panels = [
        (
            "TTFT",
            stats(&|s| s.dists.ttft_ms.as_ref().map(|d| d.mean / 1000.0)),
        ),
        ("prefill", stats(&|s| s.scalars.prefill_tokens_per_s)),
        (
            "decode",
            stats(&|s| s.dists.decode_tokens_per_s.as_ref().map(|d| d.mean)),
        ),
    ];
    // TTFT grows 3.4× from 8K to 30K: its markers far apart in height as well.
    assert!(panels[0].1[2] / panels[0].1[0] > 3.0, "{:?}", panels[0].1);
    for (p, (name, want)) in panels.iter().enumerate() {
        let x0 = 400 * p as u32;
        let found = markers(&img, BLUE, x0, x0 + 400);
        assert_eq!(found.len(), 3, "{name}: markers at {found:?}");
        let (axis, y_axis) = (
            x_axis_row(&img, x0, x0 + 400),
            y_axis_column(&img, x0, x0 + 400),
        );
        let across: Vec<f64> = found.iter().map(|m| m.0 - y_axis).collect();
        let up: Vec<f64> = found.iter().map(|m| axis - m.1).collect();
        for (what, drawn, want) in [("input length", &across, &k), ("value", &up, want)] {
            let (scale, res) = residuals(drawn, want);
            assert!(
                res.iter().all(|r| r.abs() <= PX),
                "{name}: drawn {drawn:.1?} px from the axis, where each {what} of {want:.2?} puts \
                 them is {:.1?} px",
                want.iter().map(|w| scale * w).collect::<Vec<_>>()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--repeat`: `throughput.png` draws each level's mean output tokens/s with an error bar
/// from the low to the high end of the summary's `ci95` for it. Three runs of three levels,
/// their values set 0, ± 10, 15, 20 % about 300, 500 and 400 tok/s: Student's t puts the
/// ends ± 25 to 50 % out, 50 to 135 px from the marker. A marker is within 2 px of its mean's
/// height, a bar's cap (14 px wide, 2 px thick: its centre half a pixel off its row at most)
/// within 2 px of its end's.
#[test]
fn repeat_error_bars_span_the_summarys_interval() {
    let app = fixtures::finished_run_with(&[1, 8, 64]);
    let mut s = app.session.summary.clone();
    let base = s.sweep.clone();
    let mean = [300.0, 500.0, 400.0];
    s.config.repeat = 3;
    s.sweep = (0..3u32)
        .flat_map(|pass| base.iter().enumerate().map(move |(i, l)| (pass, i, l)))
        .map(|(pass, i, l)| {
            let mut l = l.clone();
            l.index = pass * 3 + i as u32;
            l.repeat = Some(servetop::workload::Repeat {
                n: pass + 1,
                of: 3,
                first: i as u32,
            });
            let spread = 0.1 + 0.05 * i as f64;
            l.stats.as_mut().unwrap().scalars.output_throughput =
                mean[i] * (1.0 + (f64::from(pass) - 1.0) * spread);
            l
        })
        .collect();
    s.summarize_repeats();
    let first: Vec<_> = s.repeated_levels().filter(|l| l.stats.is_some()).collect();
    assert_eq!(first.len(), 3);
    let mut want = Vec::new();
    for (i, l) in first.iter().enumerate() {
        let m = l.repeat_mean["output_throughput"];
        let [lo, hi] = l.ci95["output_throughput"];
        assert!(
            (m - mean[i]).abs() < 1e-9 && lo > 0.0 && (hi - m) > 0.2 * m,
            "{l:?}"
        );
        want.push([lo, m, hi]);
    }
    let dir = tmp("repeat-bars");
    let runs = [ChartRun {
        label: "synthetic".into(),
        summary: &s,
        telemetry: &[],
    }];
    render_all(&runs, &dir, (1200, 700)).unwrap();
    let img = image::open(dir.join("throughput.png")).unwrap().to_rgb8();
    let found = markers(&img, BLUE, 0, 400);
    assert_eq!(found.len(), 3, "markers at {found:?}");
    let axis = x_axis_row(&img, 0, 400);
    let mut drawn = Vec::new();
    for &(cx, cy) in &found {
        // A cap: a row blue across 13 columns about the marker, clear of the marker itself (a
        // line through it is that wide only where it is nearly flat: within 2 px of it).
        let cx = cx.round() as u32;
        let caps: Vec<u32> = (0..img.height())
            .filter(|&y| (f64::from(y) - cy).abs() > 6.0)
            .filter(|&y| (cx - 6..=cx + 6).all(|x| img.get_pixel(x, y).0 == BLUE))
            .collect();
        let mean_of = |rows: Vec<u32>| {
            assert!(
                !rows.is_empty() && rows.len() <= 3,
                "caps at {caps:?} about {cy}"
            );
            f64::from(rows.iter().sum::<u32>()) / rows.len() as f64
        };
        let high = mean_of(
            caps.iter()
                .copied()
                .filter(|&y| f64::from(y) < cy)
                .collect(),
        );
        let low = mean_of(
            caps.iter()
                .copied()
                .filter(|&y| f64::from(y) > cy)
                .collect(),
        );
        drawn.extend([axis - low, axis - cy, axis - high]);
    }
    let want: Vec<f64> = want.into_iter().flatten().collect();
    let (scale, res) = residuals(&drawn, &want);
    assert!(
        res.iter().all(|r| r.abs() <= PX),
        "(low end, mean, high end) a level drawn {drawn:.1?} px over the axis; the summary's \
         ci95 and means put them at {:.1?} px",
        want.iter().map(|w| scale * w).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Renders `summary` (and `telemetry`) as one run and opens the figure `name`.
fn render(
    summary: &servetop::summary::RunSummary,
    telemetry: &[servetop::telemetry::TelemetryRecord],
    name: &str,
    size: (u32, u32),
) -> image::RgbImage {
    let dir = tmp(name.trim_end_matches(".png"));
    let runs = [ChartRun {
        label: "synthetic".into(),
        summary,
        telemetry,
    }];
    render_all(&runs, &dir, size).unwrap();
    let img = image::open(dir.join(name)).unwrap().to_rgb8();
    let _ = std::fs::remove_dir_all(&dir);
    img
}

/// `spec_decoding.png` draws each level's accept length as the client saw it (solid) and as
/// the engine reported it (dashed), both in the run's blue, at log2 of its concurrency: the
/// synthetic run's six levels set to client figures 1.4 to 3.0 and engine figures 0.9 to 1.1
/// above them, on a linear axis from 0. The last level's chunks are delivery bursts, not
/// drafts: its client figure is not an accept length and has no marker. Every marker within
/// 2 px ([`PX`]) of where its level and its value put it; the client's line solid (no gap),
/// the engine's dashed (a gap).
#[test]
fn the_spec_decoding_chart_draws_both_accept_lengths_at_their_heights() {
    let app = fixtures::finished_run();
    let mut s = app.session.summary.clone();
    let client = [1.4, 1.7, 2.1, 2.4, 2.8, 3.0];
    let server = [2.3, 2.6, 3.1, 3.5, 3.8, 4.1];
    let n = s.sweep.len();
    assert_eq!(n, 6);
    for (i, l) in s.sweep.iter_mut().enumerate() {
        l.stats.as_mut().unwrap().scalars.accept_length_client = Some(client[i]);
        l.accept_length_server = Some(server[i]);
        l.delivery_bursts = i == n - 1;
    }
    let img = render(&s, &[], "spec_decoding.png", (1200, 700));
    let f = frames(&img, 1);
    assert_eq!(f.len(), 1, "{f:?}");
    let x = |i: usize| f64::from(s.sweep[i].concurrency).log2();
    check_series(
        &img,
        &f[0],
        "accept length",
        &[
            Series::new(
                "client",
                BLUE,
                false,
                (0..n - 1).map(|i| (x(i), client[i])).collect(),
            ),
            Series::new(
                "server",
                BLUE,
                true,
                (0..n).map(|i| (x(i), server[i])).collect(),
            ),
        ],
    );
}

/// `energy.png` draws each level's output tokens per joule and its cost per million output
/// tokens (a panel each, linear from 0) at log2 of its concurrency: the synthetic run's six
/// levels set to tokens per joule rising 0.6 → 6.6 and a cost falling 9 → 0.9 USD, and the
/// figures beside them a chart could take instead (joules per token, the cost per million of
/// all tokens) to other shapes, not multiples of them: a panel that drew one of those would
/// move its markers off any one scale. Every marker within 2 px ([`PX`]) of its place.
#[test]
fn the_energy_chart_draws_tokens_per_joule_and_cost_at_their_heights() {
    let app = fixtures::finished_run();
    let mut s = app.session.summary.clone();
    let per_joule = [0.6, 1.9, 3.1, 4.4, 6.2, 6.6];
    let cost = [9.0, 3.2, 2.0, 1.4, 0.95, 0.9];
    let cost_total = [0.8, 0.5, 0.4, 0.35, 0.3, 0.3];
    let n = s.sweep.len();
    assert_eq!(n, 6);
    for (i, l) in s.sweep.iter_mut().enumerate() {
        let e = &mut l.energy;
        e.output_tokens_per_joule = Some(per_joule[i]);
        e.joules_per_output_token = Some(1.0 / per_joule[i]);
        e.cost_per_million_output_tokens = Some(cost[i]);
        e.cost_per_million_total_tokens = Some(cost_total[i]);
    }
    let img = render(&s, &[], "energy.png", (1200, 700));
    let f = frames(&img, 2);
    assert_eq!(f.len(), 2, "{f:?}");
    let x = |i: usize| f64::from(s.sweep[i].concurrency).log2();
    for (k, (name, v)) in [("tokens per joule", per_joule), ("cost", cost)]
        .into_iter()
        .enumerate()
    {
        let points = (0..n).map(|i| (x(i), v[i])).collect();
        check_series(&img, &f[k], name, &[Series::new(name, BLUE, false, points)]);
    }
}

/// Without a price, `energy.png` is one panel of tokens per joule across the figure (the
/// second panel was a sentence), each marker still at its height, and no cost drawn.
#[test]
fn the_energy_chart_without_a_price_is_one_panel_of_tokens_per_joule() {
    let app = fixtures::finished_run();
    let mut s = app.session.summary.clone();
    let per_joule = [0.6, 1.9, 3.1, 4.4, 6.2, 6.6];
    for (i, l) in s.sweep.iter_mut().enumerate() {
        let e = &mut l.energy;
        e.output_tokens_per_joule = Some(per_joule[i]);
        e.joules_per_output_token = Some(1.0 / per_joule[i]);
        e.cost_per_million_output_tokens = None;
        e.cost_per_million_total_tokens = None;
    }
    let img = render(&s, &[], "energy.png", (1200, 700));
    let f = frames(&img, 1);
    assert_eq!(f.len(), 1, "{f:?}");
    // The one panel takes most of the figure's width.
    assert!(f[0].x1 - f[0].x0 > 900, "{:?}", f[0]);
    let x = |i: usize| f64::from(s.sweep[i].concurrency).log2();
    let points = (0..s.sweep.len()).map(|i| (x(i), per_joule[i])).collect();
    check_series(
        &img,
        &f[0],
        "tokens per joule",
        &[Series::new("tokens per joule", BLUE, false, points)],
    );
}

/// `rates.png` draws each rate level at its offered rate (linear from 0): the synthetic
/// rate-only run's five levels set to 2, 4, 6, 8 and 10 req/s. TTFT and TPOT p50 (solid) and
/// p99 (dashed), p99 2 to 3.4× p50 for TTFT and 3 to 1.5× for TPOT (other shapes, so one
/// panel cannot draw the other's figures unseen), each p90 1.25× its p50 (a chart drawing p90
/// as p99 puts it at half the height or less), on linear axes; the client queue's p50 2 to
/// 60 ms and p99 12 to 500 ms, on a log axis (compared as log10 of the values). The achieved
/// rates: sent (solid) at 3/4 of the offered rate, completed (dashed) at 45 %, beside the
/// grey dashed offered line through each level's rate. Every marker within 2 px ([`PX`]) of
/// its place; each line in its style (solid: no gap; dashed: a gap), so sent and completed
/// (or p50 and p99) cannot trade values without trading the styles that name them.
#[test]
fn the_rates_chart_draws_each_rate_levels_figures_at_their_places() {
    let app = fixtures::finished_rates_only();
    let mut s = app.session.summary.clone();
    let rates = [2.0, 4.0, 6.0, 8.0, 10.0];
    let ttft50 = [300.0, 340.0, 420.0, 600.0, 900.0];
    let ttft99: Vec<f64> = (0..5)
        .map(|i| ttft50[i] * (2.0 + 0.35 * i as f64))
        .collect();
    let tpot50 = [15.0, 18.0, 20.0, 22.0, 30.0];
    let tpot99: Vec<f64> = (0..5)
        .map(|i| tpot50[i] * (3.0 - 0.375 * i as f64))
        .collect();
    let queue50 = [2.0, 3.0, 5.0, 20.0, 60.0];
    let queue99 = [12.0, 20.0, 50.0, 150.0, 500.0];
    assert_eq!(s.rates.len(), 5);
    for (i, l) in s.rates.iter_mut().enumerate() {
        l.arrival.as_mut().unwrap().request_rate = rates[i];
        let st = l.stats.as_mut().unwrap();
        assert!(st.scalars.completed > 0);
        st.scalars.achieved_request_rate = Some(0.75 * rates[i]);
        st.scalars.request_throughput = 0.45 * rates[i];
        set_dist(&mut st.dists.ttft_ms, ttft50[i], ttft99[i]);
        set_dist(&mut st.dists.tpot_ms, tpot50[i], tpot99[i]);
        set_dist(&mut st.dists.client_queue_ms, queue50[i], queue99[i]);
    }
    let img = render(&s, &[], "rates.png", (1200, 900));
    let f = frames(&img, 2);
    assert_eq!(f.len(), 4, "{f:?}");
    let pts = |v: &[f64], y: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
        rates.iter().zip(v).map(|(r, v)| (*r, y(*v))).collect()
    };
    let lin = |v: f64| v;
    // The queue spans 250×, over the 30× that turns the axis to log10: from 10^0.
    assert!(queue99[4] / queue50[0] > 30.0 && queue50[0] >= 1.0 && queue50[0] < 10.0);
    let log = |v: f64| v.log10();
    let pair = |a: &[f64], b: &[f64], y: &dyn Fn(f64) -> f64| {
        [
            Series::new("p50", BLUE, false, pts(a, y)),
            Series::new("p99", BLUE, true, pts(b, y)),
        ]
    };
    check_series(&img, &f[0], "TTFT", &pair(&ttft50, &ttft99, &lin));
    check_series(&img, &f[1], "TPOT", &pair(&tpot50, &tpot99, &lin));
    check_series(
        &img,
        &f[2],
        "achieved",
        &[
            Series::new("sent", BLUE, false, pts(&rates.map(|r| 0.75 * r), &lin)),
            Series::new("completed", BLUE, true, pts(&rates.map(|r| 0.45 * r), &lin)),
            Series::new("offered", GREY, true, pts(&rates, &lin)),
        ],
    );
    check_series(&img, &f[3], "client queue", &pair(&queue50, &queue99, &log));
}

/// `turns.png` draws each turn of the multi-turn level at its number (linear from 0): the
/// synthetic chats' four turns set to a TTFT p50 (solid) of 250 → 700 ms and p90 (dashed)
/// twice it, with the mean 1.6× p50 and p99 3× p90 (a chart drawing either instead moves its
/// markers off the fitted scale), and prompt tokens (solid) 1000 → 3400 beside those served
/// from the cache (dashed) 150 → 3100, on linear axes. Every marker within 2 px ([`PX`]) of
/// its place; each line in its style (solid: no gap; dashed: a gap).
#[test]
fn the_turns_chart_draws_each_turn_at_its_place() {
    let app = fixtures::finished_chats();
    let mut s = app.session.summary.clone();
    let p50 = [250.0, 400.0, 550.0, 700.0];
    let p90 = p50.map(|v| 2.0 * v);
    let prompt = [1000.0, 1800.0, 2600.0, 3400.0];
    let cached = [150.0, 1500.0, 2300.0, 3100.0];
    assert_eq!(s.multi_turn.len(), 1);
    let turns = &mut s.multi_turn[0].stats.as_mut().unwrap().scalars.turns;
    assert_eq!(turns.len(), 4);
    for (i, t) in turns.iter_mut().enumerate() {
        assert_eq!(t.turn as usize, i + 1);
        t.median_ttft_ms = Some(p50[i]);
        t.mean_ttft_ms = Some(1.6 * p50[i]);
        t.p90_ttft_ms = Some(p90[i]);
        t.p99_ttft_ms = Some(3.0 * p90[i]);
        t.mean_input_tokens = Some(prompt[i]);
        t.mean_cached_tokens = Some(cached[i]);
    }
    let img = render(&s, &[], "turns.png", (1200, 700));
    let f = frames(&img, 2);
    assert_eq!(f.len(), 2, "{f:?}");
    let pts = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, v)| ((i + 1) as f64, *v))
            .collect()
    };
    check_series(
        &img,
        &f[0],
        "TTFT by turn",
        &[
            Series::new("p50", BLUE, false, pts(&p50)),
            Series::new("p90", BLUE, true, pts(&p90)),
        ],
    );
    check_series(
        &img,
        &f[1],
        "prompt tokens by turn",
        &[
            Series::new("prompt", BLUE, false, pts(&prompt)),
            Series::new("cached", BLUE, true, pts(&cached)),
        ],
    );
}

/// `trace.png` draws each bin of the replayed trace at its start (seconds, linear from 0):
/// twelve bins of 2 s set to known figures. TTFT p50 (solid) 120 → 400 ms and p99 (dashed)
/// 900 → 9000 ms span 75×, so its axis is log10 (compared as log10 of the values); E2E p50
/// (linear); requests due per second (the bin's sent requests over its 2 s: drawn as counts,
/// the due line would stand twice as high against the failed one) and failed per second
/// (purple, dashed); the client queue's p99 on a log axis, one bin without one (no marker).
/// Every marker within 2 px ([`PX`]) of its place; each line in its style (solid: no gap;
/// dashed: a gap).
#[test]
fn the_trace_chart_draws_each_bin_at_its_place() {
    let app = fixtures::mid_trace();
    let mut s = app.session.summary.clone();
    assert_eq!(s.traces.len(), 1);
    let tens = |v: [i32; 12]| v.map(|v| 10.0 * f64::from(v));
    let p50 = tens([12, 15, 13, 20, 26, 18, 15, 30, 40, 25, 16, 14]);
    let p99 = tens([90, 150, 120, 300, 600, 250, 140, 500, 900, 400, 160, 130]);
    let e2e = tens([200, 240, 210, 300, 360, 280, 230, 400, 500, 350, 250, 220]);
    let sent = [4u64, 6, 10, 8, 12, 6, 4, 14, 16, 10, 6, 4];
    let failed = [0u64, 0, 1, 0, 2, 0, 0, 3, 6, 1, 0, 0];
    // The third bin without a client queue figure.
    let queue =
        [5, 8, 0, 20, 60, 15, 5, 120, 300, 40, 10, 5].map(|v| (v > 0).then(|| f64::from(v)));
    let start = |i: usize| 2.0 * i as f64;
    let mut stats = fixtures::finished_run().session.summary.sweep[0]
        .stats
        .clone()
        .unwrap();
    stats.scalars.timeline = (0..12)
        .map(|i| servetop::metrics::timeline::TimelineBin {
            start_s: start(i),
            sent: sent[i],
            failed: failed[i],
            ttft_p50_ms: Some(p50[i]),
            ttft_p99_ms: Some(p99[i]),
            e2el_p50_ms: Some(e2e[i]),
            client_queue_p99_ms: queue[i],
        })
        .collect();
    s.traces[0].stats = Some(stats);
    let img = render(&s, &[], "trace.png", (1200, 900));
    let f = frames(&img, 2);
    assert_eq!(f.len(), 4, "{f:?}");
    // log10 less the lowest decade: TTFT from 10^2, the queue from 10^0.
    let log = |lo: f64| move |v: f64| v.log10() - lo;
    assert!(p99[8] / p50[0] > 30.0 && (2.0..3.0).contains(&p50[0].log10()));
    let pts = |v: &[f64], y: &dyn Fn(f64) -> f64| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, v)| (start(i), y(*v)))
            .collect()
    };
    check_series(
        &img,
        &f[0],
        "TTFT",
        &[
            Series::new("p50", BLUE, false, pts(&p50, &log(2.0))),
            Series::new("p99", BLUE, true, pts(&p99, &log(2.0))),
        ],
    );
    assert!(
        e2e.iter().copied().fold(0.0, f64::max) / e2e.iter().copied().fold(f64::MAX, f64::min)
            < 30.0
    );
    check_series(
        &img,
        &f[1],
        "E2E",
        &[Series::new("p50", BLUE, false, pts(&e2e, &|v| v))],
    );
    let per_s = |v: &[u64]| v.iter().map(|n| *n as f64 / 2.0).collect::<Vec<_>>();
    check_series(
        &img,
        &f[2],
        "requests due",
        &[
            Series::new("due", BLUE, false, pts(&per_s(&sent), &|v| v)),
            Series::new("failed", PURPLE, true, pts(&per_s(&failed), &|v| v)),
        ],
    );
    let q: Vec<(f64, f64)> = queue
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((start(i), (*v)?.log10())))
        .collect();
    let (q_lo, q_hi) = q
        .iter()
        .fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    // 5 to 300 ms: 60×, over 30×; from 10^0.
    assert!(q.len() == 11 && q_hi - q_lo > 30f64.log10() && (0.0..1.0).contains(&q_lo));
    check_series(
        &img,
        &f[3],
        "client queue",
        &[Series::new("p99", BLUE, false, q)],
    );
}

/// A judged probe as [`searched`] sets it: its rate, its goodput, and its TTFT's and TPOT's
/// (p90, low end, high end) of the interval.
type Judged = (f64, f64, [[f64; 3]; 2]);

/// Sets the synthetic search's probes to five judged ones at 2 to 10 req/s in bisection order
/// (8, 4, 6, 10, 2), beside one cut short at 7 and one never judged at 5 (neither drawn): 6
/// passes and 8 fails, the bracket; each probe's goodput (well under the rate, apart from the
/// grey line where every request is good) and its TTFT and TPOT p90 with a 95 % interval of
/// 0.6× to 1.5× it, against limits of 2500 and 40 ms. Returns the summary and, by rate, the
/// judged probes' goodput and each metric's (p90, low end, high end).
fn searched() -> (servetop::summary::RunSummary, Vec<Judged>) {
    use servetop::metrics::{MetricCheck, Slo, SloCheck};
    use servetop::workload::search::{Probe, ProbeAt};
    let app = fixtures::mid_search();
    let mut s = app.session.summary.clone();
    let search = s.search.as_mut().unwrap();
    search.slo = Slo {
        ttft_ms: Some(2500.0),
        tpot_ms: Some(40.0),
        percentile: 90.0,
        ..Slo::default()
    };
    // (rate, goodput, TTFT p90, TPOT p90), in the order probed.
    let judged = [
        (8.0, 3.0, 2900.0, 45.0),
        (4.0, 2.5, 1300.0, 19.0),
        (6.0, 4.0, 1800.0, 26.0),
        (10.0, 1.5, 4200.0, 60.0),
        (2.0, 1.0, 1000.0, 15.0),
    ];
    let check = |ttft: f64, tpot: f64| {
        let metric = |name: &str, v: f64, limit: f64| MetricCheck {
            metric: name.into(),
            limit_ms: limit,
            value_ms: Some(v),
            samples: 100,
            ci_low_ms: Some(0.6 * v),
            ci_high_ms: Some(1.5 * v),
            meets: v <= limit,
            certain: true,
        };
        let metrics = vec![metric("ttft", ttft, 2500.0), metric("tpot", tpot, 40.0)];
        SloCheck {
            percentile: 90.0,
            confidence: 0.95,
            requests: 100,
            failed: 0,
            meets: metrics.iter().all(|m| m.meets),
            certain: true,
            metrics,
            turns: Vec::new(),
        }
    };
    let probe = |step: u32, rate: f64, goodput: f64, check: Option<SloCheck>, cut: bool| Probe {
        achieved_request_rate: Some(rate),
        request_throughput: Some(rate),
        goodput: Some(goodput),
        check,
        interrupted: cut,
        ..Probe::new(step, step, ProbeAt::Rate { request_rate: rate }, 100)
    };
    search.probes = judged
        .iter()
        .enumerate()
        .map(|(k, j)| probe(k as u32 + 1, j.0, j.1, Some(check(j.2, j.3)), false))
        .collect();
    search
        .probes
        .push(probe(6, 7.0, 6.5, Some(check(500.0, 8.0)), true));
    search.probes.push(probe(7, 5.0, 4.8, None, false));
    search.pass_rate = Some(6.0);
    search.fail_rate = Some(8.0);
    let mut by_rate: Vec<_> = judged
        .iter()
        .map(|j| {
            let ci = |v: f64| [v, 0.6 * v, 1.5 * v];
            (j.0, j.1, [ci(j.2), ci(j.3)])
        })
        .collect();
    by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
    (s, by_rate)
}

/// `slo_search.png` draws each judged probe at its offered rate (linear from 0) and the
/// bracket and limits where they are: the search of [`searched`]. Goodput (solid) beside the
/// grey dashed line where every request is good (y = x); TTFT and TPOT p90 (solid) between
/// the low and high ends of their interval (green, dashed), on linear axes (each spans under
/// 30×); the probe cut short and the one never judged have no marker. On every panel, the
/// answer (6 req/s) and the lowest failing rate (8) marked down the plot; on each metric's
/// panel, its limit as a red line across. Every marker, mark and limit within 2 px ([`PX`]:
/// a mark is 1 px wide, a limit 2 px high, their centres within half a pixel) of where its
/// value puts it, the marks and limits on the scales fitted through the markers.
#[test]
fn the_slo_search_chart_draws_each_probe_and_the_bracket_at_their_places() {
    let (s, by_rate) = searched();
    let img = render(&s, &[], "slo_search.png", (1200, 900));
    let f = frames(&img, 2);
    assert_eq!(f.len(), 3, "goodput, TTFT and TPOT panels: {f:?}");
    let pts = |y: &dyn Fn(&Judged) -> f64| -> Vec<(f64, f64)> {
        by_rate.iter().map(|p| (p.0, y(p))).collect()
    };
    let mut scales = vec![check_series(
        &img,
        &f[0],
        "goodput",
        &[
            Series::new("goodput", BLUE, false, pts(&|p| p.1)),
            Series::new("all requests good", GREY, true, pts(&|p| p.0)),
        ],
    )];
    for (k, (name, limit)) in [("TTFT", 2500.0), ("TPOT", 40.0)].into_iter().enumerate() {
        let v = |j: usize| pts(&move |p| p.2[k][j]);
        let lo = v(1).iter().map(|p| p.1).fold(f64::MAX, f64::min);
        let hi = v(2).iter().map(|p| p.1).fold(0.0, f64::max);
        assert!(hi / lo < 30.0, "{name}: a linear axis");
        let (sx, sy) = check_series(
            &img,
            &f[k + 1],
            name,
            &[
                Series::new("p90", BLUE, false, v(0)),
                Series::new("interval low end", GREEN, true, v(1)),
                Series::new("interval high end", GREEN, true, v(2)),
            ],
        );
        let rows = limit_rows(&img, &f[k + 1]);
        let up: Vec<f64> = rows.iter().map(|r| f[k + 1].axis - r).collect();
        assert!(
            up.len() == 1 && (up[0] - sy * limit).abs() <= PX,
            "{name}: limit lines drawn {up:.1?} px over the axis; its {limit} ms limit puts it \
             at {:.1} px",
            sy * limit
        );
        scales.push((sx, sy));
    }
    for (f, (sx, _)) in f.iter().zip(scales) {
        let across: Vec<f64> = mark_columns(&img, f).iter().map(|c| c - f.y_axis).collect();
        let want = [6.0, 8.0].map(|r| sx * r);
        assert!(
            across.len() == 2 && (0..2).all(|i| (across[i] - want[i]).abs() <= PX),
            "marks drawn {across:.1?} px right of the y axis; the answer (6 req/s) and the \
             lowest failing rate (8) put them at {want:.1?} px"
        );
    }
}

/// A value a level of the timeline's series: memory (GiB) and utilization (%) of GPU 0 and
/// GPU 1, the KV cache's use (0..1), requests running and queued.
const MEM: [[f64; 6]; 2] = [
    [20.0, 45.0, 70.0, 95.0, 110.0, 120.0],
    [10.0, 30.0, 50.0, 60.0, 80.0, 90.0],
];
const UTIL: [[f64; 6]; 2] = [
    [30.0, 50.0, 70.0, 90.0, 99.0, 95.0],
    [10.0, 20.0, 35.0, 50.0, 65.0, 75.0],
];
const KV: [f64; 6] = [0.05, 0.2, 0.35, 0.5, 0.65, 0.8];
const RUNNING: [f64; 6] = [1.0, 4.0, 8.0, 16.0, 48.0, 48.0];
const QUEUED: [f64; 6] = [0.0, 0.0, 0.0, 0.0, 16.0, 52.0];

/// The synthetic run with its six sweep levels 10 s apart from 2 s after its first telemetry
/// sample (the long-context lengths off the timeline), and 62 GPU and engine samples a second
/// apart holding [`MEM`], [`UTIL`], [`KV`], [`RUNNING`] and [`QUEUED`] one value a level (the
/// first level's value from the first sample).
fn timeline_run() -> (
    servetop::summary::RunSummary,
    Vec<servetop::telemetry::TelemetryRecord>,
) {
    use servetop::telemetry::{GpuReading, GpuSample, GpuSource, ServerSample, TelemetryRecord};
    const GIB: u64 = 1 << 30;
    const T0: i64 = 1_750_000_000_000;
    let app = fixtures::finished_run();
    let mut s = app.session.summary.clone();
    assert_eq!(s.sweep.len(), 6);
    for (i, l) in s.sweep.iter_mut().enumerate() {
        l.started_at_unix_ms = Some(T0 + 2000 + 10_000 * i as i64);
    }
    // The long-context lengths ran at another time: off this timeline.
    for l in &mut s.long_context {
        l.started_at_unix_ms = None;
    }
    let level = |t: i64| ((t - 2).max(0) / 10).min(5) as usize;
    let mut telemetry = Vec::new();
    for t in 0..62i64 {
        let i = level(t);
        let gpus = (0..2)
            .map(|g| GpuReading {
                index: g as u32,
                name: "NVIDIA H200".into(),
                mem_used_bytes: Some(MEM[g][i] as u64 * GIB),
                mem_total_bytes: Some(141 * GIB),
                util_gpu_pct: Some(UTIL[g][i]),
                ..GpuReading::default()
            })
            .collect();
        telemetry.push(TelemetryRecord::Gpu(GpuSample {
            at_unix_ms: T0 + 1000 * t,
            source: GpuSource::Nvml,
            gpus,
        }));
        telemetry.push(TelemetryRecord::Server(Box::new(ServerSample {
            at_unix_ms: T0 + 1000 * t,
            flavor: "vllm".into(),
            running: Some(RUNNING[i]),
            queued: Some(QUEUED[i]),
            kv_usage: Some(KV[i]),
            ..ServerSample::default()
        })));
    }
    (s, telemetry)
}

/// A series held a value a level: its name, its colour, its values.
type Held = (&'static str, [u8; 3], [f64; 6]);

/// `gpu_timeline.png` draws the run's telemetry over its seconds (linear, from the run's first
/// moment: its first sample, 2 s before the first of six levels of 10 s) as lines: 62 samples
/// a second apart (over the 40 that get markers); each series holds one value a level and
/// steps between a level's last sample and the next one's first (between seconds 10k + 1 and
/// 10k + 2). Memory of two GPUs in GiB (blue, vermillion) on an axis to the GPUs' 141 GiB,
/// their utilization and the KV cache's use (green; the engine's 0..1 as %) on axes to 100 %:
/// each flat within 2 px of its value on the axis's own scale (its top at the y axis's top
/// end), so memory used counted in GB against a total in GiB (7 % high), a fraction drawn as
/// % or a GPU's line in the other's colour would show. Requests running (blue, solid) and
/// queued (vermillion, dashed): the flats on one fitted scale. In every panel each step
/// (where the line crosses halfway between its flats) within 2 px of its time on one time
/// scale fitted through the y axis, and where no line runs near 0 each level's start tick
/// within 2 px of its start (2 + 10k s) on that scale: samples and levels on one clock. (A
/// run's zero moved later moves only the tick labels: the axis begins at its earliest point.)
/// 2 px: a flat 3 px line's centre row and a tick's centre column are whole pixels within
/// half a pixel of their place, the axis a pixel off the row of 0 ([`PX`]); a step's
/// crossing is interpolated between columns either side of it.
#[test]
fn the_gpu_timeline_draws_each_series_at_its_values_and_times() {
    let (s, telemetry) = timeline_run();
    let img = render(&s, &telemetry, "gpu_timeline.png", (1200, 900));
    let f = frames(&img, 2);
    assert_eq!(f.len(), 4, "{f:?}");
    let pct = KV.map(|k| 100.0 * k);
    // (panel, the axis's top when fixed, its series).
    let panels: [(&str, Option<f64>, Vec<Held>); 4] = [
        (
            "memory",
            Some(141.0),
            vec![("GPU 0", BLUE, MEM[0]), ("GPU 1", VERMILLION, MEM[1])],
        ),
        (
            "utilization",
            Some(100.0),
            vec![("GPU 0", BLUE, UTIL[0]), ("GPU 1", VERMILLION, UTIL[1])],
        ),
        ("KV cache", Some(100.0), vec![("use", GREEN, pct)]),
        (
            "requests",
            None,
            vec![("running", BLUE, RUNNING), ("queued", VERMILLION, QUEUED)],
        ),
    ];
    for (f, (panel, top, series)) in f.iter().zip(panels) {
        check_held(&img, f, panel, top, &series);
    }
}

/// Checks a panel of series held a value a level (see
/// [`the_gpu_timeline_draws_each_series_at_its_values_and_times`]): their flats, against the
/// axis's fixed `top` or one fitted scale; their steps' times, and the level-start ticks
/// (but in the requests panel, where a line near 0 covers them), on one fitted time scale.
fn check_held(
    img: &image::RgbImage,
    f: &chart_pixels::Frame,
    panel: &str,
    top: Option<f64>,
    series: &[Held],
) {
    let (mut drawn, mut want, mut across, mut times) = (vec![], vec![], vec![], vec![]);
    for &(name, colour, v) in series {
        // The flats a level's value makes (neighbouring equal values are one) and the
        // seconds of each step between them.
        let mut flats = vec![v[0]];
        let mut at = vec![];
        for i in 1..6 {
            if (v[i] - v[i - 1]).abs() > 0.0 {
                flats.push(v[i]);
                at.push(10.0 * i as f64 + 1.5);
            }
        }
        let (rows, cols) = steps(img, f, colour);
        assert_eq!(
            rows.len(),
            flats.len(),
            "{panel} {name}: flats drawn at rows {rows:.1?}; the data holds {flats:?}"
        );
        drawn.extend(rows.iter().map(|r| (name, f.axis - r)));
        want.extend(flats);
        across.extend(cols.iter().map(|c| (name, c - f.y_axis)));
        times.extend(at);
    }
    let up: Vec<f64> = drawn.iter().map(|d| d.1).collect();
    let scale = match top {
        Some(top) => (f.axis - f.top) / top,
        None => residuals(&up, &want).0,
    };
    let off: Vec<f64> = up.iter().zip(&want).map(|(d, w)| d - scale * w).collect();
    assert!(
        off.iter().all(|o| o.abs() <= PX),
        "{panel}: flats (series, px over the axis) drawn at {drawn:.1?}; their values \
         {want:?} put them at {:.1?} px ({})",
        want.iter().map(|w| scale * w).collect::<Vec<_>>(),
        top.map_or("on the fitted scale".to_string(), |t| format!(
            "the axis's top, {t}, at {:.0} px",
            f.axis - f.top
        )),
    );
    let cols: Vec<f64> = across.iter().map(|a| a.1).collect();
    let (sx, res) = residuals(&cols, &times);
    assert!(
        res.iter().all(|r| r.abs() <= PX),
        "{panel}: steps (series, px right of the y axis) drawn at {across:.1?}; at \
         seconds {times:?} they are at {:.1?} px",
        times.iter().map(|t| sx * t).collect::<Vec<_>>()
    );
    // Each level's start, a tick up from the axis (hidden under a line near 0 in the
    // requests panel).
    if panel != "requests" {
        let ticks: Vec<f64> = tick_columns(img, f).iter().map(|c| c - f.y_axis).collect();
        let want: Vec<f64> = (0..6).map(|i| sx * (2.0 + 10.0 * f64::from(i))).collect();
        assert!(
            ticks.len() == 6 && ticks.iter().zip(&want).all(|(t, w)| (t - w).abs() <= PX),
            "{panel}: level-start ticks drawn {ticks:.1?} px right of the y axis; the levels' \
             starts (2, 12, … 52 s) put them at {want:.1?} px"
        );
    }
}

/// `lora.png` draws each adapter's TTFT p50 (left panel) and output tokens/s (right) over the
/// sweep at log2 of its concurrency, a line an adapter in the palette's colours by name order
/// (alpha blue, beta vermillion, gamma green): the synthetic run's six levels given three
/// adapters whose figures are set here, each adapter's apart from the others' at every level.
/// Each adapter's mean TTFT is its p50 plus 200 ms and its request rate a constant, so a panel
/// drawing either instead cannot fit one scale. Every marker within 2 px ([`PX`]) of where its
/// level and value put it, six of each colour in each panel.
#[test]
fn the_lora_chart_draws_each_adapters_figures_at_their_places() {
    let app = fixtures::finished_run();
    let mut s = app.session.summary.clone();
    let names = ["alpha", "beta", "gamma"];
    let ttft = [
        [400.0, 450.0, 520.0, 600.0, 800.0, 900.0],
        [220.0, 250.0, 290.0, 330.0, 420.0, 470.0],
        [60.0, 70.0, 85.0, 100.0, 140.0, 160.0],
    ];
    let tput = [
        [70.0, 130.0, 200.0, 260.0, 300.0, 310.0],
        [35.0, 70.0, 120.0, 160.0, 190.0, 200.0],
        [12.0, 30.0, 50.0, 70.0, 80.0, 85.0],
    ];
    s.config.lora_modules = names.map(String::from).to_vec();
    assert_eq!(s.sweep.len(), 6);
    for (i, l) in s.sweep.iter_mut().enumerate() {
        let st = l.stats.as_mut().unwrap();
        st.scalars.lora = names
            .iter()
            .enumerate()
            .map(|(k, n)| {
                let a = servetop::metrics::lora::LoraStats {
                    completed: 10,
                    share: 1.0 / 3.0,
                    request_throughput: 5.0,
                    output_throughput: tput[k][i],
                    mean_ttft_ms: Some(ttft[k][i] + 200.0),
                    median_ttft_ms: Some(ttft[k][i]),
                    p99_ttft_ms: Some(ttft[k][i] * 3.0),
                    ..Default::default()
                };
                ((*n).to_string(), a)
            })
            .collect();
    }
    let img = render(&s, &[], "lora.png", (1200, 700));
    let f = frames(&img, 2);
    assert_eq!(f.len(), 2, "{f:?}");
    let x = |i: usize| f64::from(s.sweep[i].concurrency).log2();
    let colours = [BLUE, VERMILLION, GREEN];
    for (panel, (frame, v)) in ["TTFT p50", "output tokens/s"]
        .into_iter()
        .zip([(&f[0], &ttft), (&f[1], &tput)])
    {
        let series: Vec<Series> = (0..3)
            .map(|k| {
                Series::new(
                    names[k],
                    colours[k],
                    false,
                    (0..6).map(|i| (x(i), v[k][i])).collect(),
                )
            })
            .collect();
        check_series(&img, frame, panel, &series);
    }
}

/// `pareto.png` of a tune draws each configuration's loads at (per-user, aggregate output
/// tokens/s), both axes linear from 0, in the palette's colours in the order run, and the
/// Pareto front in grey: a grey marker on each point no other point matches on both speeds
/// and beats on one (computed here), joined by a dashed grey line. A front point's grey marker
/// covers its configuration's, so each colour shows its configuration's dominated points
/// alone: here A's overloaded last load (blue), all of B's (vermillion) and two of C's
/// (green); the front is C's lightest load and A's first three. Every marker within 2 px
/// ([`PX`]) of its place.
#[test]
fn the_pareto_chart_draws_each_load_and_the_front_at_their_places() {
    use servetop::summary::tune::{ConfigStatus, LoadPoint, TuneConfig, TuneSummary};
    let loads: [Vec<(f64, f64)>; 3] = [
        vec![(100.0, 100.0), (90.0, 300.0), (70.0, 500.0), (60.0, 470.0)],
        vec![(80.0, 80.0), (70.0, 250.0), (55.0, 380.0), (45.0, 400.0)],
        vec![(120.0, 40.0), (60.0, 200.0), (40.0, 300.0)],
    ];
    let configs: Vec<TuneConfig> = loads
        .iter()
        .enumerate()
        .map(|(i, pts)| {
            let mut c = TuneConfig::pending(
                &[("config".into(), ["A", "B", "C"][i].into())],
                String::new(),
                String::new(),
            );
            c.status = ConfigStatus::Measured;
            c.capacity = Some(4.0 - i as f64);
            c.points = pts
                .iter()
                .enumerate()
                .map(|(k, &(u, a))| LoadPoint {
                    level: format!("C={}", 1 << k),
                    per_user_tokens_per_s: u,
                    aggregate_tokens_per_s: a,
                    meets_slo: None,
                })
                .collect();
            c
        })
        .collect();
    let tune = TuneSummary::new("tpot:50".into(), false, configs);
    // The front by its definition: no other point at least as fast on both and faster on one.
    let all: Vec<(usize, (f64, f64))> = loads
        .iter()
        .enumerate()
        .flat_map(|(i, pts)| pts.iter().map(move |p| (i, *p)))
        .collect();
    let dominated = |p: (f64, f64)| {
        all.iter()
            .any(|&(_, q)| q.0 >= p.0 && q.1 >= p.1 && (q.0 > p.0 || q.1 > p.1))
    };
    let front: Vec<(f64, f64)> = all
        .iter()
        .map(|&(_, p)| p)
        .filter(|&p| !dominated(p))
        .collect();
    assert_eq!(front.len(), 4, "{front:?}");
    let app = fixtures::finished_run();
    let runs = [ChartRun {
        label: "synthetic".into(),
        summary: &app.session.summary,
        telemetry: &[],
    }];
    let dir = tmp("pareto");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("pareto.png");
    servetop::export::charts::pareto_figure(&runs, &tune)
        .unwrap()
        .draw_png(&path, (1200, 900))
        .unwrap();
    let img = image::open(&path).unwrap().to_rgb8();
    let _ = std::fs::remove_dir_all(&dir);
    let f = frames(&img, 1);
    assert_eq!(f.len(), 1, "{f:?}");
    let colours = [BLUE, VERMILLION, GREEN];
    // Each dominated load a series of its own (its configuration's line bends at the front's
    // points, under their grey markers), the front one dashed grey series.
    let mut series: Vec<Series> = all
        .iter()
        .filter(|&&(_, p)| dominated(p))
        .map(|&(i, p)| Series::new(&format!("config {i} at {p:?}"), colours[i], false, vec![p]))
        .collect();
    series.push(Series::new("Pareto front", GREY, true, front));
    check_series(&img, &f[0], "pareto", &series);
}
