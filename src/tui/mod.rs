//! The live dashboard: ratatui + crossterm over the same events the headless mode consumes.
//!
//! Here: the module map and the entry points that compose a dashboard (`run` on this
//! terminal, `attach` for a viewer, `run_offscreen` for benchmarks). The frame loop is in
//! `frame_loop`, what `e` and `s` write in `exports`, the state and its update in [`app`].

pub mod action;
pub mod app;
mod exports;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
mod frame_loop;
pub mod frames;
mod refresh;
pub mod tab;
pub mod tabs;
pub mod text;
pub mod theme;
pub mod ui;
pub mod viewer;
pub mod views;

#[cfg(test)]
mod tests;

use std::io::IsTerminal;

use ratatui::crossterm::event::EventStream;
use tokio_util::sync::CancellationToken;

use crate::config::RunConfig;
use crate::event::RunState;
use crate::run::follower::follow;
use crate::run::session::Session;
use crate::run::sink::Sink;
use crate::runner::Prepared;
use crate::summary::RunSummary;

use self::app::App;
pub use self::exports::write_screenshots;
use self::frame_loop::Loop;

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

/// Runs `prepared` under the dashboard. Returns when the user leaves after the run ended (or
/// as it ends, with `exit_when_done`), or when a confirmed quit has finished saving.
pub async fn run(
    cfg: &RunConfig,
    prepared: Prepared,
    summary: RunSummary,
    sink: Sink,
    screen: Screen,
    cancel: CancellationToken,
) -> std::io::Result<(RunState, Session)> {
    // ratatui's own panic hook prints with `eprintln!`, which panics (and so aborts) once the
    // terminal is gone: put the hook that was there back, behind one that restores quietly.
    let outer = std::panic::take_hook();
    let terminal = ratatui::try_init();
    drop(std::panic::take_hook());
    std::panic::set_hook(outer);
    install_panic_hook(|| {
        let _ = ratatui::try_restore();
    });
    let mut terminal = terminal?;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let start = crate::run::start(cfg, prepared, &cancel);
    crate::run::let_viewers_steer(&sink, &start, &cancel);
    let cancel = cancel.clone();
    // Folding, drawing and keys on the follower thread: the streams' reads never wait for a
    // frame.
    let r = follow("servetop-dashboard", move || async move {
        let loop_ = Loop {
            fps: screen.fps,
            hangup: screen.hangup,
            chart_size: screen.chart_size,
            input: Some(EventStream::new()),
            exit_when_done: screen.exit_when_done,
        };
        let app = App::new(Session::new(summary), start.live_tokens.clone(), no_color)
            .with_sink(sink.with_tokens(start.live_tokens.clone()));
        let r = loop_.run(app, start, &mut terminal, &cancel).await;
        let_go(terminal);
        r
    })
    .await;
    let _ = ratatui::try_restore();
    r.map(|(state, session, _)| (state, session))
}

/// Runs `viewer` (`servetop attach`) on this terminal until the user leaves.
pub async fn attach(viewer: viewer::Viewer, fps: f64) -> std::io::Result<viewer::Viewed> {
    let mut terminal = ratatui::try_init()?;
    install_panic_hook(|| {
        let _ = ratatui::try_restore();
    });
    let r = Box::pin(viewer.run(&mut terminal, fps, Some(EventStream::new()))).await;
    let _ = ratatui::try_restore();
    let_go(terminal);
    r
}

/// Drops `terminal`, unless it is gone (hung up): ratatui's drop gives the cursor back and,
/// when it cannot, says so with `eprintln!`, which panics when stderr is that terminal. A
/// terminal that is gone has no cursor to give back: it is let go unsaid.
fn let_go<B: ratatui::backend::Backend>(mut terminal: ratatui::Terminal<B>) {
    if terminal.show_cursor().is_err() {
        std::mem::forget(terminal);
    }
}

/// Runs the plan with the dashboard drawn at `fps` into a terminal of `size` cells that goes
/// nowhere: the whole cost of the dashboard (folding, layout, diffing, escape codes) without a
/// screen, for benchmarks. Ends when the run does, with what it drew.
pub async fn run_offscreen(
    cfg: &RunConfig,
    prepared: Prepared,
    summary: RunSummary,
    sink: Sink,
    fps: f64,
    size: (u16, u16),
    cancel: CancellationToken,
) -> std::io::Result<(RunState, Session, frames::Drawn)> {
    let backend = ratatui::backend::CrosstermBackend::new(std::io::sink());
    let mut terminal = ratatui::Terminal::with_options(
        backend,
        ratatui::TerminalOptions {
            viewport: ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, size.0, size.1)),
        },
    )?;
    let start = crate::run::start(cfg, prepared, &cancel);
    let cancel = cancel.clone();
    follow("servetop-dashboard", move || async move {
        let loop_ = Loop {
            fps,
            hangup: CancellationToken::new(),
            chart_size: (1600, 900),
            input: None,
            exit_when_done: true,
        };
        let app = App::new(Session::new(summary), start.live_tokens.clone(), false)
            .with_sink(sink.with_tokens(start.live_tokens.clone()));
        loop_.run(app, start, &mut terminal, &cancel).await
    })
    .await
}

/// How the dashboard on a terminal runs.
#[derive(Clone, Debug)]
pub struct Screen {
    /// Frames a second at most.
    pub fps: f64,
    /// The size of the PNGs `e` exports.
    pub chart_size: (u32, u32),
    /// Leave when the run is over instead of waiting for `q` (a run with more to follow, as in
    /// a server-configuration sweep).
    pub exit_when_done: bool,
    /// Cancelled when the terminal hangs up (SIGHUP: a dropped SSH session): the dashboard
    /// detaches, the run goes on.
    pub hangup: CancellationToken,
}
