//! vLLM's CPU build and its tiny test model, as `scripts/vllm/setup.sh` leaves them (the suites
//! `vllm_server.rs` and `vllm_serve.rs`).

use std::path::{Path, PathBuf};

/// The project's root (where `scripts/vllm/serve.sh` is).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where the venv and model are (`SERVETOP_VLLM_DIR`, default `.cache/vllm`).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("SERVETOP_VLLM_DIR").map_or_else(|| root().join(".cache/vllm"), PathBuf::from)
}

/// Whether the venv and model are there; says why not (and fails under
/// `SERVETOP_REQUIRE_VLLM=1`).
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
        return true;
    }
    let why = format!(
        "vllm_server::{test}: vLLM's CPU build or its test model is missing ({}); install them with scripts/vllm/setup.sh (about 2 min, 6 GB)",
        missing.join(", ")
    );
    super::skip("vLLM", "SERVETOP_REQUIRE_VLLM", &why);
    false
}
