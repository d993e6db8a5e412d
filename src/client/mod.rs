//! Streaming requests to an inference server, folded into one `RequestRecord` per request.
//!
//! The worker owns the per-chunk timestamps (docs/STYLE.md rule 2): it stamps each SSE event as it
//! is parsed, keeps only the chunks that carry tokens, and hands the app a single record. Events
//! that reached the client together are one delivery, one chunk ([`bursts`]); on engines that send
//! one event per token, the events of one speculative step are grouped into one chunk per step.

mod anthropic;
pub mod bursts;
mod cache_reset;
pub mod detect;
pub mod dialect;
mod h1;
pub mod held;
mod http;
mod kinds;
mod request;
pub mod rxtime;
pub mod sse;
mod stream;
pub mod structured;
mod template;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

pub use cache_reset::CacheReset;
pub use detect::{Engine, ServerInfo};
pub use dialect::{Dialect, is_context_error};
pub use h1::STREAM_READ_BUF;
pub use http::{POOL_IDLE, http_client};
use http::{Resp, SendError};
pub use request::{Backend, ChatMessage, ClientOptions, RequestSpec, RequestTag, SessionTurn};

use crate::metrics::{CountSource, FailureKind, Outcome, RequestRecord};

/// A request's images in its record: what they were, and the prompt tokens they took (the
/// server's `prompt_tokens` less the text's as counted, template included).
fn note_images(rec: &mut RequestRecord, spec: &RequestSpec) {
    if spec.images.is_empty() {
        return;
    }
    rec.images.clone_from(&spec.images_label);
    if rec.is_ok()
        && rec.input_source == CountSource::Usage
        && let Some((text, _)) = spec.counted_input_tokens
    {
        rec.image_tokens = rec.input_tokens.checked_sub(text);
    }
}

/// A configured client for one server.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    /// The server's root, for side requests.
    base_url: String,
    url: String,
    /// `/v1/chat/completions`, for chat histories whatever the backend.
    chat_url: String,
    backend: Backend,
    engine: Engine,
    model: String,
    /// The server's context limit as it reported it, if it did (for failure messages).
    context_limit: Option<u64>,
    api_key: Option<String>,
    opts: ClientOptions,
    /// Tokens received so far by every request of this client (sampled by the dashboard for a
    /// live rate; one relaxed atomic add a read, no event).
    live_tokens: Arc<AtomicU64>,
    /// Requests take turns to be written, one per pass of the runtime's scheduler, so that the
    /// streams waiting to be read go first ([`Client::wait_turn`]).
    write_turn: Arc<tokio::sync::Mutex<()>>,
    /// Streams to a plain-http server, on servetop's own HTTP/1.1 connections ([`h1`]); `None`
    /// for https, which goes through reqwest.
    plain: Option<Arc<h1::Pool>>,
    /// The stalls of the runtime that reads the streams, as its timer probe sees them
    /// ([`held`]).
    stalls: Arc<held::Stalls>,
    /// Plain requests' bodies, made once ([`template`]).
    templates: template::Templates,
}

/// The path (and query) of an absolute `http(s)://` URL.
fn path_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    url[after_scheme..]
        .find('/')
        .map_or("/", |i| &url[after_scheme + i..])
}

fn us_since(from: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(from).as_micros() as u64
}

/// A failure before any record fields are known.
struct Failure {
    kind: FailureKind,
    message: String,
    http_status: Option<u16>,
}

impl Failure {
    fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            http_status: None,
        }
    }
}

/// The one-line text of a reqwest error, with its causes.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// Connections [`Client::prewarm`] opens at a time through servetop's own reader.
pub const PREWARM_AT_ONCE: usize = 256;

impl Client {
    /// A client for `server` speaking `backend`.
    pub fn new(
        http: reqwest::Client,
        server: &ServerInfo,
        backend: Backend,
        api_key: Option<String>,
        opts: ClientOptions,
    ) -> Self {
        let url = format!("{}{}", server.base_url, backend.path());
        Self {
            plain: h1::Pool::new(&server.base_url),
            base_url: server.base_url.clone(),
            url,
            chat_url: format!("{}{}", server.base_url, Backend::OpenaiChat.path()),
            http,
            backend,
            engine: server.engine,
            model: server.model.clone(),
            context_limit: server.context_limit,
            api_key,
            opts,
            live_tokens: Arc::new(AtomicU64::new(0)),
            write_turn: Arc::new(tokio::sync::Mutex::new(())),
            stalls: held::Stalls::new(),
            templates: template::none_yet(),
        }
    }

    /// Where the run's timer probe notes the stalls it sees, so that reads after one are
    /// counted held (docs/metrics.md "Held reads").
    pub fn stalls(&self) -> Arc<held::Stalls> {
        self.stalls.clone()
    }

    /// The HTTP client (shared connection pool) for side requests such as metrics scrapes.
    pub fn http(&self) -> reqwest::Client {
        self.http.clone()
    }

    /// The API key requests carry, if any.
    pub fn api_key(&self) -> Option<&str> {
        self.api_key.as_deref()
    }

    /// The server's context limit changed (it was restarted with another).
    pub fn set_context_limit(&mut self, limit: Option<u64>) {
        self.context_limit = limit;
    }

    /// The run-wide count of tokens received so far (for live rates).
    pub fn live_tokens(&self) -> Arc<AtomicU64> {
        self.live_tokens.clone()
    }

    /// The protocol in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The endpoint and stream format of `spec`.
    fn route(&self, spec: &RequestSpec) -> (&str, Dialect) {
        if spec.messages.is_some() && self.backend != Backend::Anthropic {
            (&self.chat_url, Dialect::Chat)
        } else {
            (&self.url, self.backend.dialect())
        }
    }

    fn body(&self, spec: &RequestSpec) -> serde_json::Value {
        let prompt: &str = &spec.prompt;
        let backend = if spec.messages.is_some() && self.backend != Backend::Anthropic {
            Backend::OpenaiChat
        } else {
            self.backend
        };
        let mut body = match backend {
            Backend::Anthropic => anthropic::body(spec, &self.model, &self.opts),
            Backend::Sglang => json!({
                "text": prompt,
                "sampling_params": {
                    "max_new_tokens": spec.max_tokens,
                    "temperature": self.opts.temperature,
                    "ignore_eos": true,
                },
                "stream": true,
            }),
            Backend::Openai | Backend::OpenaiChat => {
                let mut b = json!({
                    "model": self.model,
                    "max_tokens": spec.max_tokens,
                    "temperature": self.opts.temperature,
                    "stream": true,
                    "ignore_eos": true,
                    "stream_options": {"include_usage": true},
                });
                if self.engine.has_continuous_usage() {
                    b["stream_options"]["continuous_usage_stats"] = json!(true);
                }
                // llama-server keeps finished prompts' KV (in its slots and a host-memory cache)
                // and reuses any matching prefix: the same seed's prompts, sent again in a later
                // run, were 99 % cache hits and "prefill" measured nothing. Ask it not to.
                if self.engine == Engine::Llamacpp {
                    b["cache_prompt"] = json!(spec.cache_prompt);
                }
                if let Some(history) = &spec.messages {
                    b["messages"] = history
                        .iter()
                        .map(|m| json!({"role": m.role, "content": &*m.content}))
                        .collect();
                } else if backend == Backend::Openai {
                    b["prompt"] = json!(prompt);
                } else if spec.images.is_empty() {
                    b["messages"] = json!([{"role": "user", "content": prompt}]);
                } else {
                    let mut parts = vec![json!({"type": "text", "text": prompt})];
                    parts.extend(
                        spec.images
                            .iter()
                            .map(|url| json!({"type": "image_url", "image_url": {"url": &**url}})),
                    );
                    b["messages"] = json!([{"role": "user", "content": parts}]);
                }
                if backend == Backend::OpenaiChat
                    && let Some(body) = b.as_object_mut()
                {
                    for (k, v) in self.opts.chat_extras.iter() {
                        body.insert(k.clone(), v.clone());
                    }
                    if let (Some(n), Some(field)) =
                        (spec.thinking_budget, self.engine.thinking_budget_field())
                    {
                        body.insert(field.into(), json!(n));
                    }
                }
                b
            }
        };
        // The answer ends where its constraint does, or where the model ends it
        // (`--natural-stop`): no EOS to ignore.
        if let Some(c) = &spec.structured {
            c.apply(&mut body, backend, self.engine);
        }
        if spec.structured.is_some() || self.opts.natural_stop {
            if let Some(o) = body.as_object_mut() {
                o.remove("ignore_eos");
            }
            if let Some(sp) = body
                .get_mut("sampling_params")
                .and_then(serde_json::Value::as_object_mut)
            {
                sp.remove("ignore_eos");
            }
        }
        if let (Some(name), Some(body)) = (&spec.adapter, body.as_object_mut()) {
            // SGLang reads the adapter from `lora_path` on both its native and its OpenAI
            // endpoints (its newer `model: "base:adapter"` form too, the older only this);
            // vLLM, and the OpenAI API generally, from `model`.
            if backend == Backend::Sglang || self.engine == Engine::Sglang {
                body.insert("lora_path".into(), json!(&**name));
            } else {
                body.insert("model".into(), json!(&**name));
            }
        }
        // `--extra-body` last: the user's fields win over servetop's own.
        if let Some(body) = body.as_object_mut() {
            for (k, v) in self.opts.extra_body.iter() {
                body.insert(k.clone(), v.clone());
            }
        }
        body
    }

    /// Opens up to `n` pooled connections before a level (best effort, at most 5 s): `t_send` is
    /// when a request is written (docs/metrics.md), so a level's first requests should not wait on a
    /// TCP handshake each, and a thousand handshakes at once would delay the first tokens of the
    /// streams already running. Servers that close connections after each response (llama-server)
    /// make it a no-op.
    ///
    /// Through servetop's own reader, what the pool lacks of `n` is opened as new connections,
    /// [`PREWARM_AT_ONCE`] at a time, each future boxed. A pooled connection keeps the waker of
    /// the task that last read it until the next reader registers its own, and a set of
    /// futures' waker keeps its node, which holds the future inline (about 2 KB): opening
    /// 10,000 at once in one set kept 20 MB live into the level's start, beside every worker's
    /// task and request body (heaptrack at C=10,000: heap peak 79.4 MB, 61.9 with the futures
    /// boxed), and had touched those pages before the level (peak RSS unchanged, 103-105 MB).
    pub async fn prewarm(&self, n: u32) {
        let url = format!("{}/v1/models", self.base_url);
        let path = path_of(&url);
        let all = async {
            if let Some(plain) = &self.plain {
                let auth = self.api_key.as_ref().map(|k| format!("Bearer {k}"));
                let mut headers: Vec<(&str, &str)> =
                    auth.iter().map(|a| ("authorization", a.as_str())).collect();
                headers.extend(
                    self.opts
                        .headers
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str())),
                );
                let headers = &headers;
                let lacking = (n as usize).saturating_sub(plain.idle_count());
                let one = |_| {
                    Box::pin(async {
                        if let Ok(r) = plain.send("GET", path, headers, b"", true).await {
                            // Read to the end so the connection goes back to the pool.
                            let _ = Resp::Own(r).text().await;
                        }
                    })
                };
                futures_util::StreamExt::for_each_concurrent(
                    futures_util::stream::iter(0..lacking),
                    PREWARM_AT_ONCE,
                    one,
                )
                .await;
            } else {
                let one = |_| {
                    Box::pin(async {
                        if let Ok(r) = self.http.get(&url).send().await {
                            let _ = r.bytes().await;
                        }
                    })
                };
                futures_util::future::join_all((0..n).map(one)).await;
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(5), all).await;
    }

    /// Posts the request body, through servetop's own HTTP/1.1 client for plain http (on a new
    /// connection when `fresh`) and reqwest otherwise.
    async fn post(
        &self,
        url: &str,
        request_id: &str,
        body: bytes::Bytes,
        fresh: bool,
    ) -> Result<Resp, SendError> {
        if let Some(plain) = &self.plain {
            let auth = self.api_key.as_ref().map(|k| format!("Bearer {k}"));
            let mut headers = vec![
                ("content-type", "application/json"),
                (
                    "user-agent",
                    concat!("servetop/", env!("CARGO_PKG_VERSION")),
                ),
                ("x-request-id", request_id),
            ];
            if let Some(a) = &auth {
                headers.push(("authorization", a.as_str()));
            }
            if self.backend == Backend::Anthropic {
                headers.push(("anthropic-version", anthropic::VERSION));
                if let Some(k) = &self.api_key {
                    headers.push(("x-api-key", k.as_str()));
                }
            }
            headers.extend(
                self.opts
                    .headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            );
            return plain
                .send("POST", path_of(url), &headers, &body, fresh)
                .await
                .map(Resp::Own)
                .map_err(|e| SendError {
                    message: format!("error sending request for url ({url}): {}", e.message),
                    ..e
                });
        }
        let mut req = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("x-request-id", request_id)
            .body(body);
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        if self.backend == Backend::Anthropic {
            req = req.header("anthropic-version", anthropic::VERSION);
            if let Some(k) = &self.api_key {
                req = req.header("x-api-key", k);
            }
        }
        req.send().await.map(Resp::Reqwest).map_err(|e| SendError {
            message: error_chain(&e),
            connect: e.is_connect(),
            timeout: e.is_timeout(),
        })
    }

    /// Sends one request and folds its stream into a record. Never returns an error: failures
    /// are data (docs/STYLE.md rule 7).
    pub async fn send(&self, spec: &RequestSpec, tag: RequestTag) -> RequestRecord {
        self.send_with(spec, tag, None).await
    }

    /// [`Client::send`], also keeping the generated text (content and reasoning) in `reply` when
    /// given: the next turn of a conversation sends it back as the assistant's message.
    pub async fn send_with(
        &self,
        spec: &RequestSpec,
        tag: RequestTag,
        reply: Option<&mut String>,
    ) -> RequestRecord {
        let Some(c) = &spec.structured else {
            let mut rec = self.exchange(spec, tag, reply).await;
            rec.lora = spec.adapter.as_deref().map(String::from);
            note_images(&mut rec, spec);
            return rec;
        };
        // A constrained answer is kept to be checked against its constraint.
        let mut own = String::new();
        let text = reply.unwrap_or(&mut own);
        let mut rec = self.exchange(spec, tag, Some(&mut *text)).await;
        rec.lora = spec.adapter.as_deref().map(String::from);
        if rec.is_ok() {
            rec.schema_valid = Some(c.accepts(text));
        }
        note_images(&mut rec, spec);
        rec
    }
}

impl Client {
    /// A stream that ended for `length` with fewer tokens than asked for, its prompt and output
    /// filling the server's context: vLLM accepts a prompt that fits and stops when prompt +
    /// output reach `--max-model-len`. Such a request measured a shorter output than planned,
    /// so it is a failure of its own kind, never a full-length measurement. Where the limit is
    /// unknown nothing is claimed.
    fn context_cut(
        &self,
        spec: &RequestSpec,
        length_stop: bool,
        input_tokens: u64,
        counts: &crate::metrics::FinalCounts,
    ) -> Option<Failure> {
        let out = counts.output_tokens;
        let limit = self.context_limit?;
        let cut = length_stop
            && counts.output_source.is_exact()
            && out < u64::from(spec.max_tokens)
            && input_tokens + out >= limit;
        cut.then(|| {
            Failure::new(
                FailureKind::ContextTooLong,
                format!(
                    "the server stopped after {out} of {} output tokens (finish_reason length): the prompt ({input_tokens} tokens) and the output filled its {limit}-token context",
                    spec.max_tokens
                ),
            )
        })
    }
}

/// The one constructor of a request's record: what its spec and tag say, sent at `t_send`,
/// ended now with `outcome`, the prompt as counted before sending, and no tokens yet (the
/// stream's fold adds them to a record that ended well).
fn record_of(
    spec: &RequestSpec,
    tag: RequestTag,
    t_send: Instant,
    end: Instant,
    outcome: Outcome,
    retries: u32,
) -> RequestRecord {
    RequestRecord {
        level: tag.level,
        index: tag.index,
        warmup: tag.warmup,
        sched_at_us: us_since(tag.origin, tag.sched),
        send_at_us: us_since(tag.origin, t_send),
        end_at_us: us_since(tag.origin, end),
        outcome,
        planned_input_tokens: spec.planned_input_tokens,
        input_tokens: spec
            .counted_input_tokens
            .map_or(spec.planned_input_tokens, |c| c.0),
        input_source: spec
            .counted_input_tokens
            .map_or(CountSource::Planned, |c| c.1),
        output_tokens: 0,
        output_source: CountSource::Planned,
        chunk_source: CountSource::Planned,
        ttft_us: None,
        e2e_us: None,
        chunks: Vec::new(),
        retries,
        slot: None,
        cached_tokens: None,
        turn: None,
        session: None,
        sub_agent: None,
        session_turns: None,
        tool_wait_ms: None,
        cache_ceiling_tokens: None,
        ttfc_us: None,
        reasoning_tokens: None,
        reasoning_source: None,
        first_tool_call_us: None,
        tool_calls: 0,
        held_reads: 0,
        first_held: false,
        finish: None,
        think_tags: false,
        lora: spec.adapter.as_deref().map(String::from),
        schema_valid: None,
        images: None,
        image_tokens: None,
    }
}

fn failed_record(
    spec: &RequestSpec,
    tag: RequestTag,
    t_send: Instant,
    f: Failure,
    retries: u32,
) -> RequestRecord {
    let outcome = Outcome::Failed {
        kind: f.kind,
        message: f.message,
        http_status: f.http_status,
    };
    record_of(spec, tag, t_send, Instant::now(), outcome, retries)
}

/// Response of a non-streamed probe: `usage.prompt_tokens`.
#[derive(Deserialize)]
struct ProbeResponse {
    usage: Option<dialect::Usage>,
    meta_info: Option<ProbeMeta>,
}

#[derive(Deserialize)]
struct ProbeMeta {
    prompt_tokens: Option<u64>,
}

impl Client {
    /// Sends `prompt` with one output token, not streamed, and returns the server's
    /// `prompt_tokens` (calibration probe when no tokenizer is available).
    pub async fn probe_prompt_tokens(&self, prompt: &str) -> Result<u64, String> {
        let spec = RequestSpec::prompt(Arc::from(prompt), 0, None, 1);
        let mut body = self.body(&spec);
        body["stream"] = json!(false);
        if let Some(o) = body.as_object_mut() {
            o.remove("stream_options");
        }
        let mut req = self.http.post(&self.url).json(&body);
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let resp = req
            .timeout(self.opts.first_token_timeout)
            .send()
            .await
            .map_err(|e| error_chain(&e))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| error_chain(&e))?;
        if !status.is_success() {
            return Err(format!(
                "HTTP {}: {}",
                status.as_u16(),
                dialect::http_error_message(&text)
            ));
        }
        let r: ProbeResponse = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        r.usage
            .and_then(|u| u.prompt_tokens)
            .or_else(|| r.meta_info.and_then(|m| m.prompt_tokens))
            .ok_or_else(|| "the server reports no usage.prompt_tokens".to_string())
    }
}

/// A record for a request cut short by the user (skip or quit).
pub fn cancelled_record(spec: &RequestSpec, tag: RequestTag, t_send: Instant) -> RequestRecord {
    RequestRecord {
        input_tokens: spec.planned_input_tokens,
        input_source: CountSource::Planned,
        ..record_of(spec, tag, t_send, Instant::now(), Outcome::Cancelled, 0)
    }
}
