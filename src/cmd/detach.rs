//! `servetop run --detach`: the same run in a process of its own, with no terminal — its own
//! process group (a hang-up of this terminal never reaches it), input from nowhere, output to
//! `<run dir>/run.log` — and this one returns once it is running, saying how to watch it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::live::registry;

/// Set in a detached run's environment: where its output goes until its run directory exists
/// (then it is moved to `<run dir>/run.log`).
pub const LOG_ENV: &str = "SERVETOP_DETACHED_LOG";

/// The log's name in the run directory.
pub const LOG: &str = "run.log";

/// How long this process waits for the detached run to start its first level's files.
const WAIT: Duration = Duration::from_secs(120);

/// Whether this process is a detached run.
pub fn is_detached() -> bool {
    std::env::var_os(LOG_ENV).is_some()
}

/// A detached run has its run directory: its output moves into `dir/run.log` (the open file
/// keeps being written, under its new name).
pub fn adopt_log(dir: &Path) {
    let Some(log) = std::env::var_os(LOG_ENV).map(PathBuf::from) else {
        return;
    };
    let to = dir.join(LOG);
    if log != to && std::fs::rename(&log, &to).is_err() {
        tracing::warn!("the detached run's output stays in {}", log.display());
    }
}

/// Starts `args` (this process's arguments without `--detach`) as a detached run with `out`
/// as its run directory when given; returns the exit code for this process.
pub fn detach(args: Vec<String>, out: Option<&Path>) -> i32 {
    // Its run directory's log, or (the directory is named once the server is known) one
    // beside the default run directories, moved into its own when it has one.
    let (dir, log) = match out {
        Some(d) => (d, d.join(LOG)),
        None => (
            Path::new("runs"),
            Path::new("runs").join(format!(".detached-{}.log", std::process::id())),
        ),
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        return super::fail(&format!("cannot create {}: {e}", dir.display()));
    }
    let log = std::path::absolute(&log).unwrap_or(log);
    let file = match std::fs::File::create(&log) {
        Ok(f) => f,
        Err(e) => return super::fail(&format!("cannot write {}: {e}", log.display())),
    };
    let (Ok(exe), Ok(err)) = (std::env::current_exe(), file.try_clone()) else {
        return super::fail("cannot start the detached run: servetop's own path is unknown");
    };
    // Headless, and a plan too long to start without asking starts: nobody is there to ask.
    let mut args = args;
    for flag in ["--headless", "--yes"] {
        if !args.iter().any(|a| a == flag) {
            args.push(flag.into());
        }
    }
    let mut child = {
        use std::os::unix::process::CommandExt;
        match Command::new(exe)
            .args(args)
            .env(LOG_ENV, &log)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return super::fail(&format!("cannot start the detached run: {e}")),
        }
    };
    let pid = child.id();
    say!(
        "servetop: started detached (pid {pid}); its output: {}",
        log.display()
    );
    let until = Instant::now() + WAIT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            // It ended before it ran: what it said is the reason.
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = said.lines().collect();
            for l in &lines[lines.len().saturating_sub(20)..] {
                say!("{l}");
            }
            return status.code().unwrap_or(1);
        }
        if let Some(run) = registry::list()
            .unwrap_or_default()
            .into_iter()
            .find(|r| r.pid == pid)
        {
            say!(
                "servetop: the run goes on in {}; watch it: servetop attach {}",
                run.dir.display(),
                run.dir.display()
            );
            return 0;
        }
        if Instant::now() >= until {
            say!(
                "servetop: the detached run is still getting ready (pid {pid}); `servetop attach --list` lists it once it runs"
            );
            return 0;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// This process's arguments after the program name, without `--detach`.
pub fn args_without_detach() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| a != "--detach")
        .collect()
}
