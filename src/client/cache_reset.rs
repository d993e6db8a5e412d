//! Clearing the server's prefix cache (`--reset-cache`), by the endpoint its engine offers:
//!
//! - vLLM: `POST /reset_prefix_cache`, registered only when the server runs with
//!   `VLLM_SERVER_DEV_MODE=1`; it answers `{"success": false}` while blocks are still held (by
//!   requests finishing), so it is asked again for a while; older versions answer an empty 200.
//! - SGLang (and servetop's simulator, which speaks SGLang's): `POST /flush_cache`, which
//!   refuses with a 400 while requests run or wait, so it is asked again for a while.
//! - llama.cpp: `POST /slots/{id}?action=erase` for every slot `GET /slots` lists, which needs
//!   the server started with `--slot-save-path` (501 otherwise); it does not clear the
//!   host-memory prompt cache (`--cache-ram`), which can still restore a prefix.
//!
//! The outcome is data: cleared, not offered (and why, with what would offer it), or failed.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Client;
use super::detect::Engine;

/// How long a reset is retried while the server says it is busy.
const BUSY_FOR: Duration = Duration::from_secs(10);
/// Between tries.
const RETRY_EVERY: Duration = Duration::from_millis(250);

/// What asking the server to clear its prefix cache came to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "detail")]
pub enum CacheReset {
    /// Cleared, by this endpoint; with a note when the clearing is partial (llama.cpp's
    /// host-memory cache).
    Cleared {
        endpoint: String,
        note: Option<String>,
    },
    /// The server offers no way to clear it: why, and what would offer one.
    NotOffered(String),
    /// It offers one, and the reset did not happen: why.
    Failed(String),
}

/// One HTTP answer: its status and body.
struct Answer {
    status: u16,
    body: String,
}

impl Answer {
    /// `what` answered with a status that means the reset did not happen.
    fn failed(&self, what: &str) -> CacheReset {
        CacheReset::Failed(format!(
            "{what}: HTTP {}: {}",
            self.status,
            short(&self.body)
        ))
    }
}

impl Client {
    /// Asks the server to clear its prefix cache, by its engine's endpoint.
    pub async fn reset_prefix_cache(&self) -> CacheReset {
        match self.engine {
            Engine::Vllm => self.reset_vllm().await,
            Engine::Sglang | Engine::Sim => self.flush_sglang().await,
            Engine::Llamacpp => self.erase_llama_slots().await,
            Engine::Tgi | Engine::Unknown => CacheReset::NotOffered(format!(
                "{} offers no endpoint servetop knows to clear its prefix cache (vLLM, SGLang and llama.cpp do)",
                self.engine.name()
            )),
        }
    }

    async fn reset_vllm(&self) -> CacheReset {
        let path = "/reset_prefix_cache";
        let started = tokio::time::Instant::now();
        loop {
            let a = match self.side("POST", path).await {
                Ok(a) => a,
                Err(e) => return CacheReset::Failed(format!("POST {path}: {e}")),
            };
            match a.status {
                404 => {
                    return CacheReset::NotOffered(
                        "vLLM serves POST /reset_prefix_cache only when started with VLLM_SERVER_DEV_MODE=1"
                            .into(),
                    );
                }
                200 => {
                    let success = serde_json::from_str::<serde_json::Value>(&a.body)
                        .ok()
                        .and_then(|v| v["success"].as_bool());
                    match success {
                        Some(true) => return cleared(path, None),
                        // Older vLLM answers an empty 200 and does not check its reset.
                        None => {
                            return cleared(
                                path,
                                Some("this vLLM does not say whether the reset succeeded".into()),
                            );
                        }
                        Some(false) if started.elapsed() < BUSY_FOR => {}
                        Some(false) => {
                            return CacheReset::Failed(format!(
                                "vLLM kept answering success: false for {} s (blocks still held by running requests)",
                                BUSY_FOR.as_secs()
                            ));
                        }
                    }
                }
                _ => return a.failed(&format!("POST {path}")),
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    async fn flush_sglang(&self) -> CacheReset {
        let path = "/flush_cache";
        let started = tokio::time::Instant::now();
        loop {
            let a = match self.side("POST", path).await {
                Ok(a) => a,
                Err(e) => return CacheReset::Failed(format!("POST {path}: {e}")),
            };
            match a.status {
                200 => return cleared(path, None),
                404 | 405 => {
                    return CacheReset::NotOffered(format!(
                        "this server has no POST {path} (HTTP {})",
                        a.status
                    ));
                }
                // SGLang refuses while requests run or wait.
                400 if started.elapsed() < BUSY_FOR => {}
                _ => return a.failed(&format!("POST {path}")),
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    async fn erase_llama_slots(&self) -> CacheReset {
        let slots = match self.side("GET", "/slots").await {
            Ok(a) if a.status == 200 => a.body,
            Ok(a) if a.status == 404 || a.status == 501 => {
                return CacheReset::NotOffered(
                    "llama-server lists its slots only with the /slots endpoint on (it is by default; --no-slots turns it off)"
                        .into(),
                );
            }
            Ok(a) => return a.failed("GET /slots"),
            Err(e) => return CacheReset::Failed(format!("GET /slots: {e}")),
        };
        let ids: Vec<u64> = serde_json::from_str::<serde_json::Value>(&slots)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s["id"].as_u64())
            .collect();
        if ids.is_empty() {
            return CacheReset::Failed("GET /slots listed no slot".into());
        }
        for id in ids {
            let path = format!("/slots/{id}?action=erase");
            match self.side("POST", &path).await {
                Ok(a) if a.status == 200 => {}
                Ok(a) if a.status == 501 => {
                    return CacheReset::NotOffered(
                        "llama-server erases its slots only when started with --slot-save-path"
                            .into(),
                    );
                }
                Ok(a) => return a.failed(&format!("POST {path}")),
                Err(e) => return CacheReset::Failed(format!("POST {path}: {e}")),
            }
        }
        cleared(
            "/slots/{id}?action=erase",
            Some(
                "llama-server keeps prompts in host memory too (--cache-ram) and may restore a prefix from there; start it with --cache-ram 0 for cold levels"
                    .into(),
            ),
        )
    }

    /// A side request to the server's root, with the run's key: its status and body.
    async fn side(&self, method: &str, path: &str) -> Result<Answer, String> {
        let url = format!("{}{path}", self.base_url);
        let mut req = match method {
            "GET" => self.http.get(&url),
            _ => self.http.post(&url),
        }
        .timeout(Duration::from_secs(30));
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let r = req.send().await.map_err(|e| super::error_chain(&e))?;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap_or_default();
        Ok(Answer { status, body })
    }
}

fn cleared(endpoint: &str, note: Option<String>) -> CacheReset {
    CacheReset::Cleared {
        endpoint: endpoint.into(),
        note,
    }
}

/// The start of a body, for an error line.
fn short(body: &str) -> String {
    let one: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(160) {
        Some((i, _)) => format!("{}…", &one[..i]),
        None => one,
    }
}
