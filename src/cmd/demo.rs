//! `servetop demo`: the built-in simulator, started and restarted by servetop as a managed
//! server, and a run against it, end to end.

use super::execute::{self, Job};
use super::fail;
use crate::cli::DemoArgs;
use crate::config::{MultiTurn, RunConfig, ServeConfig};
use crate::export::default_run_dir;
use crate::sim::SimConfig;

/// The demo's multi-turn level.
const DEMO_CHATS: MultiTurn = MultiTurn {
    turns: 4,
    conversations: 8,
    concurrency: 4,
    followup_len: 64,
};

/// The demo's server context, and the contexts servetop restarts it with for longer lengths.
const DEMO_CONTEXT: u64 = 32_768;
const DEMO_CONTEXT_STEPS: [u64; 2] = [65_536, 131_072];

/// `servetop demo`: servetop starts its own simulator as the managed server (`--serve`), at a
/// 32K context, and restarts it with 64K and then 128K when the ladder's 60K and 100K need it.
pub async fn demo(a: DemoArgs) -> i32 {
    let preset = "hybrid-27b-2x48g-mtp";
    let sim_cfg = match SimConfig::preset(preset) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            return fail(&format!(
                "cannot find servetop's own binary to start the simulator: {e}"
            ));
        }
    };
    // The port is fixed before the start, so the simulated GPUs' endpoint is known too.
    let port = match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => return fail(&format!("cannot find a free port for the simulator: {e}")),
    };
    let url = format!("http://127.0.0.1:{port}");
    let mut cfg = RunConfig::demo();
    match a.trace.load() {
        Err(e) => return fail(&e),
        Ok(Some(t)) => {
            eprintln!(
                "servetop demo: starting the SIMULATED server (preset {preset}) at {url} and replaying {} requests of {} at their recorded times{}",
                t.loaded.as_ref().map_or(0, |l| l.requests.len()),
                t.path.display(),
                if (t.speedup - 1.0).abs() > 1e-9 {
                    format!(", {}× faster", crate::fmt::fmt_rate(t.speedup))
                } else {
                    String::new()
                }
            );
            cfg.concurrency = Vec::new();
            cfg.long_context = Vec::new();
            cfg.trace = Some(t);
            return Box::pin(finish(cfg, sim_cfg, &a, &exe, port, preset)).await;
        }
        Ok(None) => {}
    }
    eprintln!(
        "servetop demo: starting the SIMULATED server (preset {preset}) at {url} with a {}-token context — sweep C={} ({} in / {} out), long context {} (servetop restarts the server at {} tokens for the lengths that need it), then {} chats of {} turns through the simulated prefix cache",
        DEMO_CONTEXT,
        cfg.concurrency
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
        cfg.input_len,
        cfg.output_len,
        cfg.long_context
            .iter()
            .map(|n| crate::fmt::fmt_tokens(*n))
            .collect::<Vec<_>>()
            .join(", "),
        DEMO_CONTEXT_STEPS
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", then "),
        DEMO_CHATS.conversations,
        DEMO_CHATS.turns
    );
    // Last, a few chats: what the prefix cache saves turn by turn (the long-context tab's table,
    // charts/turns.png). Here rather than in `demo_config`, which tests and benchmarks reuse.
    cfg.multi_turn = Some(DEMO_CHATS);
    Box::pin(finish(cfg, sim_cfg, &a, &exe, port, preset)).await
}

/// Starts the simulator as the managed server at `port` and runs `cfg` against it.
async fn finish(
    mut cfg: RunConfig,
    sim_cfg: SimConfig,
    a: &DemoArgs,
    exe: &std::path::Path,
    port: u16,
    preset: &str,
) -> i32 {
    let url = format!("http://127.0.0.1:{port}");
    cfg.base_url = String::new();
    cfg.serve = Some(ServeConfig {
        command: format!(
            "'{}' sim --preset {preset} --port {port} --context-length {{context_len}}",
            exe.display()
        ),
        context_len: Some(DEMO_CONTEXT),
        context_steps: DEMO_CONTEXT_STEPS.to_vec(),
        timeout_s: 60.0,
        restart_on_crash: false,
        params: Vec::new(),
    });
    // The simulator's GPUs stand in for the host's: the demo shows every panel filled.
    cfg.dcgm_url = Some(format!("{url}/dcgm/metrics"));
    let mut out = a.output.clone();
    if out.out.is_none() {
        out.out = Some(default_run_dir("demo-simulated"));
    }
    let job = Job {
        cfg,
        simulator: Some(sim_cfg),
        previous: None,
    };
    Box::pin(execute::alone(job, &out)).await.code
}
