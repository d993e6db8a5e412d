//! A server servetop starts itself (`--serve "CMD"`): launched as a child in its own process
//! group with `{port}` and `{context_len}` filled in, its output appended to `server.log`, ready
//! once `/health` and then `/v1/models` answer, and stopped — the whole group, SIGTERM, then
//! SIGKILL after a grace — however servetop ends (a dropped handle kills it too). A server
//! servetop did not start is never touched: nothing here runs without `--serve`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

mod supervisor;

pub use supervisor::{GRACE, ServeHandle, supervise};

/// The process groups of the servers running now: a panic (whose unwinding may never reach
/// their `Drop`) kills them first, through [`kill_all_now`].
static RUNNING: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

fn running(pgid: i32, live: bool) {
    let mut r = RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    r.retain(|&p| p != pgid);
    if live {
        r.push(pgid);
    }
}

/// SIGKILLs every server servetop started and has not stopped. For the panic hook: it never
/// blocks (a lock held elsewhere is skipped) and never panics.
pub fn kill_all_now() {
    if let Ok(r) = RUNNING.try_lock() {
        for &pgid in r.iter() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// One server servetop started, as results.json's `servers` list records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerLaunch {
    /// The command as run, placeholders filled.
    pub command: String,
    /// The context limit it was started with (`{context_len}`), if the command takes one.
    pub context_len: Option<u64>,
    pub port: u16,
    /// Seconds from the launch to the first answer of `/v1/models` (cold start).
    pub ready_s: Option<f64>,
}

/// `template` with `{port}` and `{context_len}` filled in. A command without `{port}` must fix
/// its own with `--port N`; one with `{context_len}` needs `context_len`.
pub fn fill(template: &str, port: u16, context_len: Option<u64>) -> Result<String, String> {
    if template.trim().is_empty() {
        return Err("--serve needs the command that starts the server".into());
    }
    let mut cmd = template.replace("{port}", &port.to_string());
    if cmd.contains("{context_len}") {
        let Some(n) = context_len else {
            return Err(
                "the --serve command uses {context_len}: give the first server's context with --context-len N"
                    .into(),
            );
        };
        cmd = cmd.replace("{context_len}", &n.to_string());
    }
    Ok(cmd)
}

/// `template` with option `name` set to `value`: the value after `name` (or after `name=`)
/// replaced where the command has it, ` name value` added at the end where it does not. The
/// rest of the command is kept byte for byte (quotes and all).
pub fn with_param(template: &str, name: &str, value: &str) -> String {
    let b = template.as_bytes();
    let mut from = 0;
    while let Some(at) = template[from..].find(name).map(|i| i + from) {
        let end = at + name.len();
        let starts_word = at == 0 || b[at - 1].is_ascii_whitespace();
        from = end;
        if !starts_word {
            continue;
        }
        let value_at = match b.get(end) {
            Some(b'=') => end + 1,
            Some(c) if c.is_ascii_whitespace() => {
                let skip = template[end..]
                    .find(|c: char| !c.is_ascii_whitespace())
                    .map_or(template.len(), |i| end + i);
                if skip == template.len() {
                    continue;
                }
                skip
            }
            _ => continue,
        };
        let value_end = template[value_at..]
            .find(|c: char| c.is_ascii_whitespace())
            .map_or(template.len(), |i| value_at + i);
        return format!("{}{value}{}", &template[..value_at], &template[value_end..]);
    }
    format!("{} {name} {value}", template.trim_end())
}

/// The port a command fixes itself (`--port N` or `--port=N`), when it has no `{port}`.
pub fn fixed_port(template: &str) -> Option<u16> {
    let words: Vec<&str> = template.split_whitespace().collect();
    words.iter().enumerate().find_map(|(i, w)| {
        if let Some(v) = w.strip_prefix("--port=") {
            return v.parse().ok();
        }
        (*w == "--port")
            .then(|| words.get(i + 1)?.parse().ok())
            .flatten()
    })
}

/// A port nothing listens on now (the OS's pick; the server binds it a moment later).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("cannot find a free port for the server: {e}"))
}

/// A name for the run directory from the model the command serves (`--model X`,
/// `--model-path X`, `-m X`), or `served`.
pub fn model_hint(template: &str) -> String {
    let words: Vec<&str> = template.split_whitespace().collect();
    words
        .windows(2)
        .find(|w| matches!(w[0], "--model" | "--model-path" | "-m"))
        .and_then(|w| w[1].trim_end_matches('/').rsplit('/').next())
        .unwrap_or("served")
        .to_string()
}

/// Reads what a server wrote to its log since the last read (the dashboard's tail of
/// server.log).
pub struct LogTail {
    path: PathBuf,
    offset: u64,
    /// A line not yet ended when last read.
    partial: String,
}

impl LogTail {
    /// Longest line kept (a server may print a whole prompt on one line).
    const MAX_LINE: usize = 400;

    /// A tail of `path` from its start (its first read returns the newest lines already there:
    /// the server's start-up).
    pub fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: 0,
            partial: String::new(),
        }
    }

    /// The complete lines written since the last call, at most `max` (the latest).
    pub fn read_new(&mut self, max: usize) -> Vec<String> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let len = f.metadata().map_or(0, |m| m.len());
        if len < self.offset {
            // Truncated or replaced: start over.
            self.offset = 0;
            self.partial.clear();
        }
        let mut bytes = Vec::new();
        if f.seek(SeekFrom::Start(self.offset)).is_err() || f.read_to_end(&mut bytes).is_err() {
            return Vec::new();
        }
        self.offset += bytes.len() as u64;
        self.partial.push_str(&String::from_utf8_lossy(&bytes));
        let Some(end) = self.partial.rfind('\n') else {
            return Vec::new();
        };
        let done: String = self.partial.drain(..=end).collect();
        let lines: Vec<String> = done
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .map(|l| l.chars().take(Self::MAX_LINE).collect())
            .collect();
        lines[lines.len().saturating_sub(max)..].to_vec()
    }
}

/// A server servetop started and owns.
pub struct ManagedServer {
    child: Child,
    log: PathBuf,
    started: Instant,
    /// What results.json records of it.
    pub launch: ServerLaunch,
    stopped: bool,
}

impl ManagedServer {
    /// Starts `template` (through `sh -c`, so a pipeline or a script works too, in a process
    /// group of its own that stopping signals whole), its output appended to `log`.
    pub fn start(template: &str, context_len: Option<u64>, log: &Path) -> Result<Self, String> {
        let port = match fixed_port(template) {
            Some(p) if !template.contains("{port}") => p,
            _ => free_port()?,
        };
        Self::start_on(template, port, context_len, log)
    }

    /// [`ManagedServer::start`] on `port` (a restart keeps its predecessor's, so the URL the
    /// run uses stays the same).
    pub fn start_on(
        template: &str,
        port: u16,
        context_len: Option<u64>,
        log: &Path,
    ) -> Result<Self, String> {
        let command = fill(template, port, context_len)?;
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("cannot write {}: {e}", log.display()))?;
        let child = {
            use std::os::unix::process::CommandExt;
            Command::new("sh")
                .arg("-c")
                .arg(&command)
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .map_err(|e| format!("cannot start the server ({command}): {e}"))?
        };
        if let Ok(pgid) = i32::try_from(child.id()) {
            running(pgid, true);
        }
        Ok(Self {
            child,
            log: log.to_path_buf(),
            started: Instant::now(),
            launch: ServerLaunch {
                command,
                context_len,
                port,
                ready_s: None,
            },
            stopped: false,
        })
    }

    /// Where the server answers.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.launch.port)
    }

    /// The child's process id (its process group's too).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How it exited, if it has: `exited with code N` or `was killed by signal S`.
    pub fn exited(&mut self) -> Option<String> {
        let status = self.child.try_wait().ok()??;
        if let Some(c) = status.code() {
            return Some(format!("exited with code {c}"));
        }
        use std::os::unix::process::ExitStatusExt;
        Some(format!(
            "was killed by signal {}",
            status.signal().unwrap_or_default()
        ))
    }

    /// The last `n` lines of server.log, joined with ` | ` (for one-line messages).
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(n)..].join(" | ")
    }

    /// Waits until `/health` and then `/v1/models` answer 2xx, calling `tick` with the seconds
    /// waited about once a second. Fails when the server exits first or `timeout` passes; the
    /// message carries the end of server.log.
    pub async fn wait_ready(
        &mut self,
        http: &reqwest::Client,
        timeout: Duration,
        mut tick: impl FnMut(f64),
    ) -> Result<f64, String> {
        let base = self.base_url();
        let ok = |url: String| async move {
            http.get(url)
                .timeout(Duration::from_secs(2))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        };
        let mut last_tick = 0u64;
        loop {
            let waited = self.started.elapsed().as_secs_f64();
            if let Some(how) = self.exited() {
                return Err(format!(
                    "the server {how} before it was ready; last lines of server.log: {}",
                    self.log_tail(5)
                ));
            }
            if ok(format!("{base}/health")).await && ok(format!("{base}/v1/models")).await {
                self.launch.ready_s = Some(waited);
                return Ok(waited);
            }
            if waited >= timeout.as_secs_f64() {
                return Err(format!(
                    "the server was not ready after {:.0} s (--serve-timeout); last lines of server.log: {}",
                    timeout.as_secs_f64(),
                    self.log_tail(5)
                ));
            }
            if waited as u64 > last_tick {
                last_tick = waited as u64;
                tick(waited);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Stops the server's whole process group: SIGTERM, then SIGKILL when `grace` passes.
    pub async fn stop(&mut self, grace: Duration) {
        if self.stopped {
            return;
        }
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let until = Instant::now() + grace;
        while self.exited().is_none() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.signal(nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
        self.stopped = true;
        self.forget();
    }

    /// No longer among the servers a panic kills.
    fn forget(&self) {
        if let Ok(pgid) = i32::try_from(self.child.id()) {
            running(pgid, false);
        }
    }

    fn signal(&self, s: nix::sys::signal::Signal) {
        let Ok(pid) = i32::try_from(self.child.id()) else {
            return;
        };
        // The group may be gone already; that is the point.
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid), s);
    }
}

impl Drop for ManagedServer {
    /// However servetop leaves (an early return, a panic), the server it started goes with it.
    fn drop(&mut self) {
        if !self.stopped {
            self.signal(nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
            self.forget();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_param_replaces_the_value_the_command_has_or_is_added() {
        let t = "llama-server -m 'my model.gguf' -np 2 --port {port}";
        assert_eq!(
            with_param(t, "-np", "4"),
            "llama-server -m 'my model.gguf' -np 4 --port {port}"
        );
        assert_eq!(
            with_param(t, "--spec-draft-n-max", "8"),
            "llama-server -m 'my model.gguf' -np 2 --port {port} --spec-draft-n-max 8"
        );
        assert_eq!(
            with_param("vllm serve m --max-num-seqs=64", "--max-num-seqs", "128"),
            "vllm serve m --max-num-seqs=128"
        );
        // A longer option that starts with the name is not the name.
        assert_eq!(
            with_param("x --np-extra 1", "--np", "3"),
            "x --np-extra 1 --np 3"
        );
    }

    #[test]
    fn the_log_tail_returns_each_complete_line_once() {
        let path = std::env::temp_dir().join(format!("servetop-tail-{}.log", std::process::id()));
        std::fs::write(&path, "loading\nready\n").unwrap();
        let mut tail = LogTail::new(&path);
        assert_eq!(
            tail.read_new(10),
            ["loading", "ready"],
            "the start-up, once"
        );
        assert!(
            tail.read_new(10).is_empty(),
            "lines already read are not repeated"
        );
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        use std::io::Write;
        write!(f, "one\ntwo\nthr").unwrap();
        assert_eq!(tail.read_new(10), ["one", "two"]);
        write!(f, "ee\n\nfour\nfive\nsix\n").unwrap();
        assert_eq!(tail.read_new(2), ["five", "six"], "the latest `max` lines");
        assert!(tail.read_new(10).is_empty());
        std::fs::write(&path, "fresh\n").unwrap();
        assert_eq!(tail.read_new(10), ["fresh"], "a truncated log starts over");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn placeholders_are_filled_and_missing_ones_named() {
        let t = "vllm serve m --port {port} --max-model-len {context_len}";
        assert_eq!(
            fill(t, 8123, Some(65536)).unwrap(),
            "vllm serve m --port 8123 --max-model-len 65536"
        );
        let e = fill(t, 8123, None).unwrap_err();
        assert!(e.contains("--context-len"), "{e}");
        assert_eq!(fixed_port("llama-server -m x.gguf --port 9001"), Some(9001));
        assert_eq!(
            fixed_port("python -m sglang.launch_server --port=30000"),
            Some(30000)
        );
        assert_eq!(fixed_port("llama-server --port {port}"), None);
        assert_eq!(
            model_hint("llama-server -m /models/tiny.gguf -c 4096"),
            "tiny.gguf"
        );
        assert_eq!(model_hint("sh run.sh"), "served");
    }
}
