//! What the suites against the in-process simulator share: a plan run headless to its end,
//! quietly and without files, that must finish.

// Each suite uses its own share of these.
#![allow(dead_code)]

use servetop::config::RunConfig;
use servetop::event::RunState;
use servetop::run::run_prepared;
use servetop::run::session::Session;
use servetop::runner::{self, Prepared};
use servetop::sim::{AcceptLength, SimConfig};
use tokio_util::sync::CancellationToken;

/// Runs `prepared` under `cfg` to the end; it must finish.
pub async fn finish_prepared(cfg: &RunConfig, prepared: Prepared) -> Session {
    let (state, session) = run_prepared(
        cfg,
        prepared,
        servetop::summary::RunSummary::new(cfg.clone(), None),
        servetop::run::sink::Sink::none(),
        true,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    session
}

/// Prepares `cfg` against its server and runs it to the end.
pub async fn finished(cfg: RunConfig) -> Session {
    let prepared = runner::prepare(&cfg, None).await.expect("prepare");
    finish_prepared(&cfg, prepared).await
}

/// [`finish_prepared`], writing the run's directory at `dir` (requests.jsonl and results.json,
/// for the suites that check each record against the simulator's own).
pub async fn finish_prepared_into(
    cfg: &RunConfig,
    prepared: Prepared,
    dir: &std::path::Path,
) -> Session {
    let _ = std::fs::remove_dir_all(dir);
    let files = servetop::export::RunFiles::create(dir).expect("a run directory");
    let (state, session) = run_prepared(
        cfg,
        prepared,
        servetop::summary::RunSummary::new(cfg.clone(), None),
        servetop::run::sink::Sink::new(Some(files)),
        true,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    session
}

/// [`finished`], writing the run's directory at `dir`.
pub async fn finished_into(cfg: RunConfig, dir: &std::path::Path) -> Session {
    let prepared = runner::prepare(&cfg, None).await.expect("prepare");
    finish_prepared_into(&cfg, prepared, dir).await
}

/// A fresh directory under the temp dir for this process's run `name`.
pub fn temp_run_dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("servetop-{name}-{}", std::process::id()))
}

/// A simulator whose shape is set by hand: `step_ms` a decode step whatever the batch or its
/// context, one token a step (no speculation), prefill instant.
pub fn steady_config(step_ms: f64) -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = step_ms;
    c.batch_growth = 0.0;
    c.context_ms_per_1k = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    c.prefill_tokens_per_s = 1_000_000.0;
    c.prefill_chunk_tokens = 1_000_000;
    c
}
