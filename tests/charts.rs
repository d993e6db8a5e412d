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
