//! Export benchmark: time to write every PNG chart (at the default 1600x900) for a 10-level
//! sweep plus a 5-length long-context ladder (synthetic summaries, `tui::fixtures`). Prints the
//! median and the spread of 7 runs. `cargo bench --bench export`.

use std::time::Instant;

use servetop::export::charts::{ChartRun, render_all};
use servetop::tui::fixtures;

fn main() {
    let app = fixtures::finished_run_with(&[1, 2, 4, 8, 16, 24, 32, 48, 64, 100]);
    let dir = std::env::temp_dir().join(format!("servetop-bench-export-{}", std::process::id()));
    let runs = [ChartRun {
        label: "bench".into(),
        summary: &app.session.summary,
        telemetry: &[],
    }];
    let mut times = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let files = render_all(&runs, &dir, (1600, 900)).expect("charts render");
        times.push(t.elapsed());
        assert_eq!(files.len(), 5);
    }
    times.sort();
    println!(
        "export 5 charts (10-level sweep, 5-length ladder, 1600x900): median {:?}, min {:?}, max {:?}",
        times[3], times[0], times[6]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
