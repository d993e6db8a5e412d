//! llama.cpp's `llama-server` and its tiny test models, as `scripts/llama/build.sh` leaves them
//! (the suites `llama_server.rs` and `llama_serve.rs`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name the servers give their model (`-a`).
pub const ALIAS: &str = "tiny-llama.gguf";

pub struct Paths {
    pub server: PathBuf,
    pub target: PathBuf,
    pub draft: PathBuf,
    /// Thinking templates (`scripts/llama/think_templates.py`): one whose budget works, one
    /// whose budget llama-server cannot see begin.
    pub think_template: PathBuf,
    pub think_nospace_template: PathBuf,
    /// The target tokenizing without a leading space, and llama.cpp's stock Qwen3 template:
    /// tool calls llama-server can constrain.
    pub nospace: PathBuf,
    pub qwen3_template: PathBuf,
}

pub fn cache_dir() -> PathBuf {
    std::env::var_os("SERVETOP_LLAMA_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/llama"),
        PathBuf::from,
    )
}

/// The binary and models, or `None` (after saying why) when this machine has not built them
/// or is too busy to time llama-server.
pub fn paths(test: &str) -> Option<Paths> {
    let dir = cache_dir();
    let p = Paths {
        server: dir.join("bin/llama-server"),
        target: dir.join("models/tiny-llama.gguf"),
        draft: dir.join("models/tiny-llama-draft.gguf"),
        think_template: dir.join("templates/think.jinja"),
        think_nospace_template: dir.join("templates/think-nospace.jinja"),
        nospace: dir.join("models/tiny-llama-nospace.gguf"),
        qwen3_template: dir.join("templates/qwen3.jinja"),
    };
    let missing: Vec<String> = [
        &p.server,
        &p.target,
        &p.draft,
        &p.think_template,
        &p.think_nospace_template,
        &p.nospace,
        &p.qwen3_template,
    ]
    .iter()
    .filter(|f| !f.exists())
    .map(|f| f.display().to_string())
    .collect();
    if missing.is_empty() {
        return super::quiet_enough("llama-server", "SERVETOP_REQUIRE_LLAMA", test).then_some(p);
    }
    let why = format!(
        "llama_server::{test}: llama-server or its test models are missing ({}); build them with scripts/llama/build.sh (about 10 min on 2 cores)",
        missing.join(", ")
    );
    super::skip("llama-server", "SERVETOP_REQUIRE_LLAMA", &why);
    None
}

/// Keeps this process (the client) off the server's core (the last), once.
pub fn pin_client() {
    let n = super::cores();
    if n >= 2 {
        super::pin_client(&format!("0-{}", n - 2));
    }
}

/// A llama-server child process; killed on drop, and by its watchdog when this process ends.
pub struct LlamaServer {
    pub child: Child,
    pub watchdog: Option<Child>,
    pub url: String,
    pub log: PathBuf,
}

impl LlamaServer {
    pub fn start(p: &Paths, name: &str, args: &[&str]) -> Self {
        pin_client();
        let port = super::free_port();
        let log =
            std::env::temp_dir().join(format!("servetop-llama-{}-{name}.log", std::process::id()));
        let n = super::cores();
        let mut cmd = if n >= 2 {
            let mut c = Command::new("taskset");
            c.args(["-c", &(n - 1).to_string()]).arg(&p.server);
            c
        } else {
            Command::new(&p.server)
        };
        cmd.arg("-m")
            .arg(&p.target)
            .args(["-a", ALIAS, "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .args(["-t", "1", "--metrics"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = cmd.spawn().unwrap_or_else(|e| {
            panic!("cannot start {}: {e}", p.server.display());
        });
        // Ends the server once this test process is gone, however it ended (the shared servers
        // live in statics, which are never dropped). Checks the name before killing the pid.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {me} 2>/dev/null && kill -0 {srv} 2>/dev/null; do sleep 0.5; done; \
                 grep -q llama-server /proc/{srv}/cmdline 2>/dev/null && kill {srv}",
                me = std::process::id(),
                srv = child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        let mut server = Self {
            child,
            watchdog,
            url: format!("http://127.0.0.1:{port}"),
            log,
        };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "llama-server {name} exited ({status}) while starting:\n{}",
                    server.log_tail()
                );
            }
            if super::http_get(port, "/health").is_some_and(|r| r.0 == 200) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "llama-server {name} not healthy after 120 s:\n{}",
                server.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    pub fn metrics_url(&self) -> String {
        format!("{}/metrics", self.url)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(w) = self.watchdog.as_mut() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}
