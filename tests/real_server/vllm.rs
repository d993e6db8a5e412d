//! vLLM's CPU build and its tiny test model, as `scripts/vllm/setup.sh` leaves them (the suites
//! `vllm_server.rs` and `vllm_serve.rs`).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The context every server here is started with.
pub const MAX_MODEL_LEN: u64 = 4096;

/// The project's root (where `scripts/vllm/serve.sh` is).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where the venv and model are (`SERVETOP_VLLM_DIR`, default `.cache/vllm`).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("SERVETOP_VLLM_DIR").map_or_else(|| root().join(".cache/vllm"), PathBuf::from)
}

/// Whether the venv and model are there and the machine is quiet enough to time vLLM; says
/// why not (and fails under `SERVETOP_REQUIRE_VLLM=1`).
pub fn available(test: &str) -> bool {
    let dir = cache_dir();
    let missing: Vec<String> = [
        dir.join("venv/bin/python"),
        dir.join("model/config.json"),
        dir.join("model/tokenizer.json"),
    ]
    .iter()
    .filter(|f| !f.exists())
    .map(|f| f.display().to_string())
    .collect();
    if missing.is_empty() {
        return super::quiet_enough("vLLM", "SERVETOP_REQUIRE_VLLM", test);
    }
    let why = format!(
        "vllm_server::{test}: vLLM's CPU build or its test model is missing ({}); install them with scripts/vllm/setup.sh (about 2 min, 6 GB)",
        missing.join(", ")
    );
    super::skip("vLLM", "SERVETOP_REQUIRE_VLLM", &why);
    false
}

/// Keeps this process (the client) off core 0, where vLLM computes.
pub fn pin_client() {
    let n = super::cores();
    if n >= 2 {
        super::pin_client(&format!("1-{}", n - 1));
    }
}

pub fn kill_group(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", &format!("-{pid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A vLLM server in its own process group (the API server and its engine core), ended on drop
/// and by its watchdog when this process ends.
pub struct VllmServer {
    pub name: String,
    pub args: Vec<String>,
    /// Environment set for it besides the script's (`VLLM_SERVER_DEV_MODE=1`).
    pub env: Vec<(String, String)>,
    pub port: u16,
    pub child: Child,
    pub watchdog: Option<Child>,
    pub log: PathBuf,
}

impl VllmServer {
    pub fn start(name: &str, args: &[&str]) -> Self {
        Self::start_with_env(name, args, &[])
    }

    /// [`Self::start`] with `env` set for the server.
    pub fn start_with_env(name: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        pin_client();
        let args: Vec<String> = args.iter().map(|a| (*a).to_string()).collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        let port = super::free_port();
        let log =
            std::env::temp_dir().join(format!("servetop-vllm-{}-{name}.log", std::process::id()));
        let (child, watchdog) = Self::spawn(port, &args, &env, &log);
        let s = Self {
            name: name.to_string(),
            args,
            env,
            port,
            child,
            watchdog,
            log,
        };
        s.wait_healthy()
    }

    pub fn spawn(
        port: u16,
        args: &[String],
        env: &[(String, String)],
        log: &Path,
    ) -> (Child, Option<Child>) {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = Command::new(root().join("scripts/vllm/serve.sh"))
            .args([
                "--port",
                &port.to_string(),
                "--max-model-len",
                &MAX_MODEL_LEN.to_string(),
            ])
            .args(args)
            .env("SERVETOP_VLLM_DIR", cache_dir())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {me} 2>/dev/null && kill -0 {srv} 2>/dev/null; do sleep 0.5; done; \
                 kill -TERM -- -{srv} 2>/dev/null; sleep 3; kill -KILL -- -{srv} 2>/dev/null",
                me = std::process::id(),
                srv = child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        (child, watchdog)
    }

    pub fn wait_healthy(mut self) -> Self {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "vLLM {} exited ({status}) while starting:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            if super::http_get(self.port, "/health").is_some_and(|r| r.0 == 200) {
                eprintln!(
                    "vLLM {} healthy after {:.0} s",
                    self.name,
                    started.elapsed().as_secs_f64()
                );
                return self;
            }
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "vLLM {} not healthy after 600 s:\n{}",
                self.name,
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kills the whole server at once (SIGKILL to its group), as a crash would.
    pub fn kill_hard(&mut self) {
        kill_group(self.child.id(), "-KILL");
        let _ = self.child.wait();
        if let Some(w) = self.watchdog.as_mut() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }

    /// Starts it again on the same port, without waiting for it to be healthy.
    pub fn respawn(&mut self) {
        let (child, watchdog) = Self::spawn(self.port, &self.args, &self.env, &self.log);
        self.child = child;
        self.watchdog = watchdog;
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        kill_group(self.child.id(), "-TERM");
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        kill_group(self.child.id(), "-KILL");
        let _ = self.child.wait();
        if let Some(w) = self.watchdog.as_mut() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// The tokens of `model_dir`'s byte-level BPE whose bytes are not UTF-8 on their own (a lone
/// byte past 0x7F). Greedy decoding of the random-weight model can loop on one of them; vLLM's
/// streaming detokenizer then holds every such token's text back, waiting for the character to
/// complete: tokens that stream no text (one prompt of eight thought 12 of them, then answered
/// 27 more, no content event at all).
pub fn partial_utf8_tokens(model_dir: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(model_dir.join("tokenizer.json")).unwrap();
    let tok: serde_json::Value = serde_json::from_str(&text).unwrap();
    // GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the other 68
    // bytes for U+0100 onwards, in byte order.
    let printable = |b: u32| (0x21..=0x7e).contains(&b) || (0xa1..=0xff).contains(&b) && b != 0xad;
    let others: Vec<u8> = (0u8..=255).filter(|&b| !printable(u32::from(b))).collect();
    let byte_of = |c: char| {
        let c = c as u32;
        if printable(c) {
            u8::try_from(c).ok()
        } else {
            c.checked_sub(0x100)
                .and_then(|n| others.get(n as usize).copied())
        }
    };
    let mut ids: Vec<u32> = tok["model"]["vocab"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(piece, id)| {
            let bytes: Option<Vec<u8>> = piece.chars().map(byte_of).collect();
            let bytes = bytes?;
            std::str::from_utf8(&bytes)
                .is_err()
                .then(|| u32::try_from(id.as_u64().unwrap()).unwrap())
        })
        .collect();
    ids.sort_unstable();
    ids
}
