//! How a signal ends a run, in one place: Ctrl-C and SIGTERM stop it (in-flight requests get
//! their grace period, the results are saved; a second one ends the grace at once); SIGHUP (a dropped SSH session) stops a headless
//! run in a terminal, and only detaches the dashboard, or a detached run, which go on. A series
//! of runs (a tune, a `--serve-param` sweep) is watched once, from its start to the process's
//! end, and each of its runs takes child tokens of the series' own.

use tokio_util::sync::CancellationToken;

use crate::cli::OutputArgs;

/// A run's stop and hang-up tokens.
pub(super) struct Tokens {
    /// Cancelled on Ctrl-C or SIGTERM (and on SIGHUP where nothing survives one).
    pub stop: CancellationToken,
    /// Cancelled on SIGHUP where the run survives it (the dashboard detaches).
    pub hangup: CancellationToken,
}

impl Tokens {
    /// Tokens for one run of the series these are: cancelled with the series'.
    pub fn child(&self) -> Self {
        Self {
            stop: self.stop.child_token(),
            hangup: self.hangup.child_token(),
        }
    }
}

/// Watches the signals for a run (or a series of runs) drawn under the dashboard or not.
pub(super) fn watch(dashboard: bool) -> Tokens {
    let stop = CancellationToken::new();
    let hangup = CancellationToken::new();
    let survive = dashboard || super::detach::is_detached();
    spawn(stop.clone(), survive.then(|| hangup.clone()), !dashboard);
    Tokens { stop, hangup }
}

/// Whether the runs `out` describes draw the dashboard (else they print lines).
pub(super) fn dashboard(out: &OutputArgs) -> bool {
    !out.headless && crate::tui::available()
}

/// Cancels `cancel` on Ctrl-C or SIGTERM. SIGHUP cancels `hangup` when given (the dashboard
/// detaches, the run goes on), else `cancel` too. `say` prints a line (headless only: under
/// the dashboard the screen says it).
fn spawn(cancel: CancellationToken, hangup: Option<CancellationToken>, say: bool) {
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                let _ = tokio::signal::ctrl_c().await;
                cancel.cancel();
                return;
            };
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => break,
                    _ = term.recv() => break,
                    _ = hup.recv() => match &hangup {
                        Some(h) => h.cancel(),
                        None => break,
                    },
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        if say {
            say!(
                "servetop: stopping — in-flight requests get their grace period, results are being saved (Ctrl-C again: stop now)"
            );
        }
        cancel.cancel();
        // A second Ctrl-C or SIGTERM: no more grace.
        second_stop().await;
        if say {
            say!(
                "servetop: stopping now — in-flight requests are cancelled, results are being saved"
            );
        }
        crate::runner::hurry();
    });
}

/// The next Ctrl-C or SIGTERM.
async fn second_stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
