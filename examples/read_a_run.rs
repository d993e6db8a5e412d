//! Reads a run directory that `servetop run` or `servetop demo` left behind and prints a table
//! of your own from its results.json: here, each level's p99 TTFT and p99 ITL beside the
//! throughput, and whether the numbers came from a simulated server.
//!
//! ```sh
//! cargo run --example read_a_run -- runs/20261201-101500-demo-simulated
//! ```

use std::path::PathBuf;

fn main() -> Result<(), String> {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .ok_or("usage: read_a_run RUN_DIR (a directory holding results.json)")?;
    let (summary, telemetry) = servetop::export::report::load_run(&dir)?;
    let model = summary.server.as_ref().map_or("?", |s| s.model.as_str());
    println!(
        "{} · model {model} · {} levels · {} telemetry samples{}",
        dir.display(),
        summary.levels().count(),
        telemetry.len(),
        if summary.simulator.is_some() {
            " · SIMULATED server"
        } else {
            ""
        }
    );
    println!(
        "{:<14} {:>10} {:>8} {:>13} {:>12} {:>6}",
        "level", "status", "tok/s", "TTFT p99 ms", "ITL p99 ms", "fail"
    );
    for level in summary.levels() {
        let (tok_s, ttft, itl, failed) =
            level
                .stats
                .as_ref()
                .map_or((f64::NAN, f64::NAN, f64::NAN, 0), |s| {
                    let p99 = |d: &Option<servetop::metrics::DistStats>| {
                        d.as_ref().map_or(f64::NAN, |d| d.p99)
                    };
                    (
                        s.scalars.output_throughput,
                        p99(&s.dists.ttft_ms),
                        p99(&s.dists.itl_ms),
                        s.scalars.failed,
                    )
                });
        println!(
            "{:<14} {:>10} {:>8.1} {:>13.1} {:>12.1} {:>6}",
            level.label(),
            format!("{:?}", level.status).to_lowercase(),
            tok_s,
            ttft,
            itl,
            failed
        );
    }
    Ok(())
}
