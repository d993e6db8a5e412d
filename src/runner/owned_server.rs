//! The server servetop started (`--serve`), from the runner's side. A long-context length it
//! cannot hold: restart it with a context that fits, wait until it is ready, warm it up again,
//! and go on in the same run. A crash during a level: the level says how it exited, and with
//! `--restart-on-crash` the server is restarted once. Its log's new lines go to the dashboard.
//! A server servetop did not start is never restarted (the level is skipped with the flag to
//! raise, as before).

use std::time::{Duration, Instant};

use super::Runner;
use crate::client::detect;
use crate::event::{Event, EventTx};
use crate::serve::ServeHandle;
use crate::workload::{LevelKind, LevelSpec};

/// Sends the lines the server adds to `log` as `ServerLog` events, once a second, until the
/// returned task is aborted or nobody listens.
pub(super) fn spawn_log_tail(log: &std::path::Path, tx: EventTx) -> tokio::task::JoinHandle<()> {
    let mut tail = crate::serve::LogTail::new(log);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        loop {
            every.tick().await;
            let lines = tail.read_new(50);
            if !lines.is_empty() && tx.send(Event::ServerLog(lines)).is_err() {
                return;
            }
        }
    })
}

impl Runner {
    /// Skips `spec` (and says why, with the flag to raise) when the server cannot hold it,
    /// after making room if the run owns the server. `Err` ends the run.
    pub(super) async fn skipped_as_too_long(&mut self, spec: &LevelSpec) -> Result<bool, String> {
        if self.make_room(spec).await? {
            return Ok(false);
        }
        let Some(reason) = self
            .context_precheck(spec)
            .map(|r| self.owned_reason(spec, r))
        else {
            return Ok(false);
        };
        tracing::info!(level = spec.index, %reason, "length skipped before sending");
        self.emit(Event::LevelSkipped {
            index: spec.index,
            reason,
            raise_flag: Some(self.prepared.server.engine.context_flag().into()),
        });
        Ok(true)
    }

    /// Whether `spec` fits the server now, after restarting it with a larger context if the run
    /// owns it and the level is a long-context length. `Err` ends the run (the new server did
    /// not come up).
    async fn make_room(&mut self, spec: &LevelSpec) -> Result<bool, String> {
        let Some(limit) = self.prepared.server.context_limit else {
            return Ok(true);
        };
        let need = spec.context_needed();
        if need <= limit {
            return Ok(true);
        }
        let Some(serve) = self.prepared.serve.clone() else {
            return Ok(false);
        };
        if spec.kind != LevelKind::LongContext {
            return Ok(false);
        }
        let Some(context) = serve.context_for(need) else {
            return Ok(false);
        };
        let flag = self.prepared.server.engine.context_flag();
        self.restart_server(&serve, Some(context), &format!("with {flag} {context}"))
            .await?;
        Ok(self.prepared.server.context_limit.is_none_or(|l| need <= l))
    }

    /// Restarts the owned server (`context`: None keeps the one it had), the dashboard's phase
    /// counting the seconds; once it is ready its context is read again, it is recorded
    /// (`ServerStarted`) and warmed up like the first. `Err`: it did not come up.
    async fn restart_server(
        &mut self,
        serve: &ServeHandle,
        context: Option<u64>,
        how: &str,
    ) -> Result<(), String> {
        let started = Instant::now();
        let restart = serve.restart(context);
        tokio::pin!(restart);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        let launch = loop {
            tokio::select! {
                r = &mut restart => break r?,
                _ = tick.tick() => self.emit(Event::Phase(format!(
                    "restarting server {how} · {:.0} s",
                    started.elapsed().as_secs_f64()
                ))),
            }
        };
        self.reread_context().await?;
        self.emit(Event::ServerStarted {
            launch,
            context_limit: self.prepared.server.context_limit,
        });
        // A fresh server's first requests are slow (graphs, caches): warm it like the first.
        self.warmup().await
    }

    /// The server servetop started exited during `spec` (`crash`: how, with its last log
    /// lines). The level keeps its failed requests and says why; with `--restart-on-crash` the
    /// server is restarted once (same context) and the run goes on, otherwise it stops here.
    pub(super) async fn after_crash(
        &mut self,
        spec: &LevelSpec,
        crash: String,
    ) -> Result<(), String> {
        tracing::warn!(level = spec.index, %crash, "the server crashed during the level");
        self.emit(Event::ServerCrashed {
            index: spec.index,
            message: crash.clone(),
        });
        let Some(serve) = self.prepared.serve.clone() else {
            return Err(crash);
        };
        if !serve.restart_on_crash {
            return Err(format!(
                "during {}: {crash} (--restart-on-crash restarts it once and goes on)",
                spec.label()
            ));
        }
        if self.crash_restarts > 0 || self.cancel.is_cancelled() {
            return Err(format!(
                "during {}: {crash} (it was restarted once after a crash already)",
                spec.label()
            ));
        }
        self.crash_restarts += 1;
        self.emit(Event::Warning(format!(
            "{}: the server crashed; restarting it (--restart-on-crash), the level's failed requests stay in the results",
            spec.label()
        )));
        self.restart_server(&serve, None, "after a crash").await
    }

    /// Why a length is skipped, for a server the run owns: no `--context-steps` value holds it
    /// (or the restarted server still reports less), rather than "restart the server".
    fn owned_reason(&self, spec: &LevelSpec, reason: String) -> String {
        let Some(serve) = &self.prepared.serve else {
            return reason;
        };
        let need = spec.context_needed();
        let (input, output) = spec.longest_request();
        match serve.context_steps.last() {
            Some(&max) if max < need => format!(
                "{input} prompt tokens + {output} output tokens = {need}, more than the largest --context-steps value ({max}); add a larger step to measure this length",
            ),
            _ => reason,
        }
    }

    /// Asks the restarted server its context limit again.
    async fn reread_context(&mut self) -> Result<(), String> {
        let base = self.prepared.server.base_url.clone();
        let client = &self.prepared.client;
        let probes = detect::probe(&client.http(), &base, client.api_key()).await;
        let info = detect::identify(&base, &probes, Some(&self.prepared.server.model))?;
        self.prepared.server.context_limit = info.context_limit;
        self.prepared.server.context_limit_source = info.context_limit_source;
        self.prepared.client.set_context_limit(info.context_limit);
        Ok(())
    }
}
