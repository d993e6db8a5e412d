//! A concurrency sweep from code: starts servetop's built-in simulated server on a free port,
//! runs C = 1, 2, 4, 8 against it (100 in / 32 out tokens, 8 requests per level) and prints one
//! line per level. Nothing here needs a GPU or a model; every number is simulated.
//!
//! ```sh
//! cargo run --example sweep_the_simulator
//! ```

use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::sim::{self, SimConfig};

#[tokio::main]
async fn main() -> Result<(), String> {
    // A simulated engine: 20 ms decode steps, 2 tokens accepted per step, 4 requests at a time.
    let mut sim_cfg = SimConfig::preset("fast")?;
    sim_cfg.decode_step_ms = 20.0;
    sim_cfg.accept_length = sim::AcceptLength::Fixed(2);
    sim_cfg.max_running = 4;
    let server = sim::start(sim_cfg, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| format!("cannot start the simulator: {e}"))?;

    let cfg = RunConfig {
        concurrency: vec![1, 2, 4, 8],
        input_len: 100,
        output_len: 32,
        ..RunConfig::minimal(&server.url())
    };
    let (state, session) = servetop::run::run_headless(cfg, None).await?;
    println!(
        "run {state:?} against the SIMULATED server at {}",
        server.url()
    );
    println!(
        "{:>5} {:>10} {:>14} {:>14}",
        "C", "out tok/s", "TTFT p50 ms", "ITL p50 ms"
    );
    for level in &session.summary.sweep {
        let Some(numbers) = &level.stats else {
            continue;
        };
        let p50 = |d: &Option<servetop::metrics::DistStats>| d.as_ref().map_or(f64::NAN, |d| d.p50);
        println!(
            "{:>5} {:>10.1} {:>14.1} {:>14.1}",
            level.concurrency,
            numbers.scalars.output_throughput,
            p50(&numbers.dists.ttft_ms),
            p50(&numbers.dists.itl_ms),
        );
    }
    server.stop();
    Ok(())
}
