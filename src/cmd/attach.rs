//! `servetop attach`: a viewer on a run going on (found in the registry of live runs, or by
//! its directory, or at a TCP address), or a finished run browsed from its journal.

use super::fail;
use crate::cli::AttachArgs;
use crate::event::RunState;
use crate::live::registry;
use crate::live::source::{self, Origin};
use crate::tui::viewer::Viewer;

/// `servetop attach`.
pub async fn attach(a: AttachArgs) -> i32 {
    if a.list {
        return list();
    }
    let origin = match origin(&a) {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let attached = match source::open(&origin) {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let mut viewer = match Viewer::open(attached, no_color).await {
        Ok(v) => v,
        Err(e) => return fail(&e),
    };
    if !crate::tui::available() {
        // Not a terminal: follow the run to its end, then its tables.
        viewer.read_to_end().await;
        print_out!(
            "{}",
            crate::run::headless::final_tables(&viewer.app().session)
        );
        return 0;
    }
    match Box::pin(crate::tui::attach(viewer, a.fps)).await {
        Ok(v) => {
            if let Some(e) = &v.bad_line {
                say!("servetop: a line of the run's journal was not read: {e}");
            }
            let dir = match &origin {
                Origin::File(p) | Origin::Socket(p) => p
                    .parent()
                    .map(|d| format!(" {}", d.display()))
                    .unwrap_or_default(),
                Origin::Tcp(addr) => format!(" --connect {addr}"),
            };
            if v.state == RunState::Running && v.feed_ended && origin.live() {
                say!("servetop: the run's feed ended before the run did: its process is gone");
            } else if v.state == RunState::Running {
                say!("servetop: left the viewer; the run goes on (servetop attach{dir})");
            }
            0
        }
        Err(e) => {
            say!("servetop: the viewer failed: {e}");
            1
        }
    }
}

/// Where to read: `--connect`, the directory given, or the newest run going on.
fn origin(a: &AttachArgs) -> Result<Origin, String> {
    if let Some(addr) = &a.connect {
        return Ok(Origin::Tcp(addr.clone()));
    }
    if let Some(dir) = &a.run_dir {
        return Origin::of_dir(dir);
    }
    let runs = registry::list()?;
    let newest = runs.first().ok_or(
        "no run is going on for this user (`servetop attach RUN_DIR` browses a finished one)",
    )?;
    Origin::of_dir(&newest.dir)
}

/// `servetop attach --list`.
fn list() -> i32 {
    match registry::list() {
        Ok(runs) if runs.is_empty() => {
            say!("servetop: no run is going on for this user");
            0
        }
        Ok(runs) => {
            print_out!("{:<8} {:<21} RUN_DIR", "PID", "STARTED");
            for r in runs {
                print_out!("{:<8} {:<21} {}", r.pid, r.started_at, r.dir.display());
            }
            0
        }
        Err(e) => fail(&e),
    }
}
