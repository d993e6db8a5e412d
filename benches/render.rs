//! Render benchmark: time to draw each dashboard tab at 160x48 from a state with 100 sweep
//! levels of history (synthetic, see `tui::fixtures`). Prints median, p90 and p99 per tab.
//!
//! Run with `cargo bench --bench render`. Each draw goes through ratatui's `Terminal::draw` on a
//! `TestBackend`, so it includes building the frame and diffing it against the previous one —
//! everything but writing escape codes to a real terminal.

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use servetop::tui::app::Tab;
use servetop::tui::fixtures;

fn stats(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9), at(0.99))
}

fn main() {
    let levels: Vec<u64> = (1..=100).collect();
    let t = Instant::now();
    let mut app = fixtures::mid_sweep(levels);
    println!(
        "state: 100 sweep levels (synthetic), built in {:?}",
        t.elapsed()
    );
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).expect("test backend");
    let iterations = 2000;
    println!(
        "{:<16} {:>10} {:>10} {:>10}",
        "tab @160x48", "median", "p90", "p99"
    );
    for tab in Tab::ALL {
        app.ui.tab = tab;
        for _ in 0..100 {
            terminal
                .draw(|f| f.render_widget(&app, f.area()))
                .expect("draw");
        }
        let mut times = Vec::with_capacity(iterations);
        for i in 0..iterations {
            // Alternate the clock so each frame differs from the last, as a live screen does.
            app.clocked.now = Duration::from_secs(83 + (i % 2) as u64);
            let t = Instant::now();
            terminal
                .draw(|f| f.render_widget(&app, f.area()))
                .expect("draw");
            times.push(t.elapsed());
        }
        let (p50, p90, p99) = stats(times);
        println!(
            "{:<16} {:>10.3?} {:>10.3?} {:>10.3?}",
            tab.title(),
            p50,
            p90,
            p99
        );
    }
}
