//! The runs going on for this user, wherever they were started from: one small file per run
//! in the user's runtime directory (`$XDG_RUNTIME_DIR/servetop/`, else
//! `/tmp/servetop-<uid>/`; `SERVETOP_RUNTIME_DIR` overrides), written when a run's live feed
//! starts and removed when it ends. A file whose process is gone (a run killed) is skipped and
//! removed by the next listing.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One run going on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveRun {
    pub pid: u32,
    /// Its run directory, absolute.
    pub dir: PathBuf,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
}

/// The registry's directory for this user, created owner-only.
pub fn root() -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = if let Some(d) = std::env::var_os("SERVETOP_RUNTIME_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        PathBuf::from(d).join("servetop")
    } else {
        std::env::temp_dir().join(format!("servetop-{}", rustix::process::getuid().as_raw()))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// A run's place in the registry, removed when dropped.
pub struct Registered(PathBuf);

impl Drop for Registered {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Registers this process's run in `dir`.
pub fn register(dir: &Path) -> Result<Registered, String> {
    let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let me = LiveRun {
        pid: std::process::id(),
        dir,
        started_at: crate::summary::now_rfc3339(),
    };
    // One file per registration (a process may serve more than one run, one after another).
    static SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = root()?.join(format!("{}-{n}.json", me.pid));
    let json = serde_json::to_vec(&me).map_err(|e| e.to_string())?;
    crate::export::write_atomic(&path, &json)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(Registered(path))
}

fn alive(pid: u32) -> bool {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .is_some_and(|p| rustix::process::test_kill_process(p).is_ok())
}

/// The runs going on, newest first.
pub fn list() -> Result<Vec<LiveRun>, String> {
    let root = root()?;
    let entries =
        std::fs::read_dir(&root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    let mut runs = Vec::new();
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Some(run) = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<LiveRun>(&b).ok())
        else {
            continue;
        };
        if alive(run.pid) && run.dir.is_dir() {
            runs.push(run);
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    runs.sort_by(|a, b| b.started_at.cmp(&a.started_at).then(b.pid.cmp(&a.pid)));
    Ok(runs)
}
