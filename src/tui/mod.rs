//! The live dashboard: ratatui + crossterm over the same events the headless mode consumes.
//!
//! The loop owns the `App` and waits on three things at once: runner events (drained in
//! batches, folded in update), terminal input (mapped to actions), and a frame clock (draw at
//! `--fps`). The runner never waits on it (STYLE.md rule 1).

pub mod action;
pub mod app;
pub mod tabs;
pub mod theme;
pub mod ui;

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ratatui::crossterm::event::{Event as TermEvent, EventStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::RunConfig;
use crate::event::{self, RunState};
use crate::export::RunFiles;
use crate::runner::{Control, Prepared, Runner};
use crate::session::Session;
use crate::sim::SimConfig;
use crate::summary::RunSummary;

use self::action::map_key;
use self::app::{App, Effect};

/// Whether the dashboard can run here (stdout and stdin are a terminal).
pub fn available() -> bool {
    std::io::stdout().is_terminal() && std::io::stdin().is_terminal()
}

/// Chains a panic hook that runs `restore` before the previous hook prints the message, so a
/// panic anywhere leaves a usable terminal.
pub fn install_panic_hook(restore: impl Fn() + Send + Sync + 'static) {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        prev(info);
    }));
}

/// Runs `prepared` under the dashboard. Returns when the user leaves after the run ended, or
/// when a confirmed quit has finished saving.
pub async fn run(
    cfg: &RunConfig,
    prepared: Prepared,
    simulator: Option<SimConfig>,
    files: Option<RunFiles>,
    fps: f64,
    cancel: CancellationToken,
) -> std::io::Result<(RunState, Session)> {
    let live = prepared.client.live_tokens();
    let session = Session::new(RunSummary::new(cfg.clone(), simulator), files);
    let (tx, mut rx) = event::channel();
    let (control_tx, control_rx) = watch::channel(Control::default());
    let runner = Runner {
        warmup_input_tokens: crate::commands::warmup_input(cfg, &prepared),
        warmup_output_tokens: cfg.output_len.min(64),
        prepared,
        warmup_requests: cfg.warmup_requests,
        grace: Duration::from_secs_f64(cfg.grace_s),
        tx,
        cancel: cancel.clone(),
        control: control_rx,
    };
    let task = tokio::spawn(runner.run());

    install_panic_hook(ratatui::restore);
    let mut terminal = ratatui::try_init()?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut app = App::new(session, Arc::clone(&live), no_color);
    let mut input = EventStream::new();
    let period = Duration::from_secs_f64(1.0 / fps.clamp(0.5, 60.0));
    let mut frames = tokio::time::interval(period);
    frames.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let start = Instant::now();
    let mut draw_error = None;
    while !app.exit {
        tokio::select! {
            ev = rx.recv() => {
                let Some(ev) = ev else { break };
                app.apply(ev);
                let mut n = 1;
                while let Ok(more) = rx.try_recv() {
                    app.apply(more);
                    n += 1;
                    if n >= 4096 { break; }
                }
                app.end_batch();
            }
            Some(term) = input.next() => {
                if let Ok(TermEvent::Key(k)) = term
                    && let Some(action) = map_key(k, app.confirm_quit)
                {
                    match app.handle(action) {
                        Some(Effect::Pause(p)) => control_tx.send_modify(|c| c.paused = p),
                        Some(Effect::Skip) => control_tx.send_modify(|c| c.skip += 1),
                        Some(Effect::Cancel) => cancel.cancel(),
                        None => {}
                    }
                }
            }
            _ = frames.tick() => {
                app.tick(start.elapsed());
                if let Err(e) = terminal.draw(|f| f.render_widget(&app, f.area())) {
                    draw_error = Some(e);
                    cancel.cancel();
                    break;
                }
            }
            () = cancel.cancelled(), if !app.quitting => {
                // SIGTERM or SIGHUP: stop like a confirmed quit.
                app.quitting = true;
                if app.run_over() { app.exit = true; }
            }
        }
    }
    ratatui::restore();
    let state = task.await.unwrap_or(RunState::Aborted);
    // Events sent after the loop stopped (the final RunFinished) still count.
    while let Ok(ev) = rx.try_recv() {
        app.apply(ev);
    }
    app.end_batch();
    app.session.save();
    if let Some(e) = draw_error {
        return Err(e);
    }
    Ok((state, app.session))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn panic_hook_restores_before_the_message() {
        static RESTORED: AtomicBool = AtomicBool::new(false);
        super::install_panic_hook(|| RESTORED.store(true, Ordering::SeqCst));
        let r = std::panic::catch_unwind(|| panic!("boom"));
        assert!(r.is_err());
        assert!(RESTORED.load(Ordering::SeqCst));
        let _ = std::panic::take_hook();
    }
}
