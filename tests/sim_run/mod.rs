//! What the suites against the in-process simulator share: a plan run headless to its end,
//! quietly and without files, that must finish.

// Each suite uses its own share of these.
#![allow(dead_code)]

use servetop::config::RunConfig;
use servetop::event::RunState;
use servetop::run::run_prepared;
use servetop::run::session::Session;
use servetop::runner::{self, Prepared};
use tokio_util::sync::CancellationToken;

/// Runs `prepared` under `cfg` to the end; it must finish.
pub async fn finish_prepared(cfg: &RunConfig, prepared: Prepared) -> Session {
    let (state, session) = run_prepared(
        cfg,
        prepared,
        servetop::summary::RunSummary::new(cfg.clone(), None),
        None,
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
