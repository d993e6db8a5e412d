//! `servetop demo`: the built-in simulator and a run against it, end to end.

use std::net::SocketAddr;

use super::fail;
use super::run::execute;
use crate::cli::DemoArgs;
use crate::config::{MultiTurn, RunConfig};
use crate::export::default_run_dir;
use crate::sim::{self, SimConfig};

/// The demo's multi-turn level.
const DEMO_CHATS: MultiTurn = MultiTurn {
    turns: 4,
    conversations: 8,
    concurrency: 4,
    followup_len: 64,
};

/// `servetop demo`.
pub async fn demo(a: DemoArgs) -> i32 {
    let sim_cfg = match SimConfig::preset("hybrid-27b-2x48g-mtp") {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let handle = match sim::start(sim_cfg.clone(), SocketAddr::from(([127, 0, 0, 1], 0))).await {
        Ok(h) => h,
        Err(e) => return fail(&format!("cannot start the simulator: {e}")),
    };
    eprintln!(
        "servetop demo: SIMULATED server (preset {}) at {} — sweep C={} ({} in / {} out), long context {}, then {} chats of {} turns through the simulated prefix cache",
        sim_cfg.preset,
        handle.url(),
        RunConfig::demo()
            .concurrency
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(","),
        RunConfig::demo().input_len,
        RunConfig::demo().output_len,
        RunConfig::demo()
            .long_context
            .iter()
            .map(|n| crate::fmt::fmt_tokens(*n))
            .collect::<Vec<_>>()
            .join(", "),
        DEMO_CHATS.conversations,
        DEMO_CHATS.turns
    );
    let mut cfg = RunConfig::demo();
    cfg.base_url = handle.url();
    // Last, a few chats: what the prefix cache saves turn by turn (the long-context tab's table,
    // charts/turns.png). Here rather than in `demo_config`, which tests and benchmarks reuse.
    cfg.multi_turn = Some(DEMO_CHATS);
    // The simulator's GPUs stand in for the host's: the demo shows every panel filled.
    cfg.dcgm_url = Some(format!("{}/dcgm/metrics", handle.url()));
    let mut out = a.output.clone();
    if out.out.is_none() {
        out.out = Some(default_run_dir("demo-simulated"));
    }
    execute(cfg, Some(sim_cfg), &out).await
}
