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

const NAMES: [&str; 5] = [
    "throughput.png",
    "latency.png",
    "long_context.png",
    "spec_decoding.png",
    "gpu_timeline.png",
];

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("servetop-charts-{name}-{}", std::process::id()));
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
    assert_eq!(files.len(), 5);
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
    app.no_color = false;
    let buffers = app.tab_buffers(80, 24);
    let dir = tmp("shots");
    let files = servetop::tui::write_screenshots(&dir, &buffers).unwrap();
    assert_eq!(files.len(), 4);
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

/// Okabe–Ito blue: the first run's colour on every chart.
const BLUE: [u8; 3] = [0, 114, 178];

/// The centres of the markers drawn in `colour` between columns `x0..x1`: a marker is a filled
/// disc of radius 5, so its centre is where a disc of radius 4 fits in that colour (a 3 px
/// line, a 2 px error bar, a legend key or two lines crossing hold no such disc). Neighbouring
/// fits are one marker, at their mean: (column, row), left to right.
fn markers(img: &image::RgbImage, colour: [u8; 3], x0: u32, x1: u32) -> Vec<(f64, f64)> {
    let (_, h) = img.dimensions();
    let is = |x: i64, y: i64| img.get_pixel(x as u32, y as u32).0 == colour;
    let disc = |x: i64, y: i64| {
        (-4i64..=4).all(|dy| {
            (-4i64..=4)
                .filter(|dx| dx * dx + dy * dy <= 16)
                .all(|dx| is(x + dx, y + dy))
        })
    };
    let mut groups: Vec<Vec<(i64, i64)>> = Vec::new();
    for x in i64::from(x0) + 4..i64::from(x1) - 4 {
        for y in 4..i64::from(h) - 4 {
            if !is(x, y) || !disc(x, y) {
                continue;
            }
            match groups.iter_mut().find(|g| {
                g.iter()
                    .any(|&(a, b)| (a - x).abs() <= 2 && (b - y).abs() <= 2)
            }) {
                Some(g) => g.push((x, y)),
                None => groups.push(vec![(x, y)]),
            }
        }
    }
    groups
        .iter()
        .map(|g| {
            let n = g.len() as f64;
            (
                g.iter().map(|p| p.0 as f64).sum::<f64>() / n,
                g.iter().map(|p| p.1 as f64).sum::<f64>() / n,
            )
        })
        .collect()
}

/// The row of the x axis of the panel spanning columns `x0..x1`: the lowest row dark across
/// half the panel.
fn x_axis_row(img: &image::RgbImage, x0: u32, x1: u32) -> f64 {
    let dark = |x: u32, y: u32| img.get_pixel(x, y).0.iter().all(|v| *v < 80);
    let row = (0..img.height())
        .rev()
        .find(|&y| (x0..x1).filter(|&x| dark(x, y)).count() as u32 > (x1 - x0) / 2)
        .expect("an x axis");
    f64::from(row)
}

/// The column of the y axis of the panel spanning columns `x0..x1`: the leftmost column dark
/// down a third of the figure's height.
fn y_axis_column(img: &image::RgbImage, x0: u32, x1: u32) -> f64 {
    let dark = |x: u32, y: u32| img.get_pixel(x, y).0.iter().all(|v| *v < 80);
    let h = img.height();
    let col = (x0..x1)
        .find(|&x| (0..h).filter(|&y| dark(x, y)).count() as u32 > h / 3)
        .expect("a y axis");
    f64::from(col)
}

/// How far each of `drawn` (pixels from an axis) is from the line through the origin that
/// best fits it against `want` (the summary's values): on an axis from 0, a drawn distance is
/// the value times one scale, so every residual is a rounding error.
fn residuals(drawn: &[f64], want: &[f64]) -> (f64, Vec<f64>) {
    let scale = drawn.iter().zip(want).map(|(d, w)| d * w).sum::<f64>()
        / want.iter().map(|w| w * w).sum::<f64>();
    let res = drawn.iter().zip(want).map(|(d, w)| d - scale * w).collect();
    (scale, res)
}

/// A marker's centre is a whole pixel (plotters rounds a point to one) and sits within half a
/// pixel of its exact place; the axis line is one pixel off the row of 0 at most. So a marker
/// stands within 2 px of where its value puts it, and a fitted scale cannot hide a wrong value
/// that moves a marker further.
const PX: f64 = 2.0;

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
