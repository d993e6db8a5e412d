//! llama.cpp's `llama-server` and its tiny test models, as `scripts/llama/build.sh` leaves them
//! (the suites `llama_server.rs` and `llama_serve.rs`).

use std::path::{Path, PathBuf};

/// The name the servers give their model (`-a`).
pub const ALIAS: &str = "tiny-llama.gguf";

pub struct Paths {
    pub server: PathBuf,
    pub target: PathBuf,
    pub draft: PathBuf,
}

pub fn cache_dir() -> PathBuf {
    std::env::var_os("SERVETOP_LLAMA_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/llama"),
        PathBuf::from,
    )
}

/// The binary and models, or `None` (after saying why) when this machine has not built them.
pub fn paths(test: &str) -> Option<Paths> {
    let dir = cache_dir();
    let p = Paths {
        server: dir.join("bin/llama-server"),
        target: dir.join("models/tiny-llama.gguf"),
        draft: dir.join("models/tiny-llama-draft.gguf"),
    };
    let missing: Vec<String> = [&p.server, &p.target, &p.draft]
        .iter()
        .filter(|f| !f.exists())
        .map(|f| f.display().to_string())
        .collect();
    if missing.is_empty() {
        return Some(p);
    }
    let why = format!(
        "llama_server::{test}: llama-server or its test models are missing ({}); build them with scripts/llama/build.sh (about 10 min on 2 cores)",
        missing.join(", ")
    );
    super::skip("llama-server", "SERVETOP_REQUIRE_LLAMA", &why);
    None
}
