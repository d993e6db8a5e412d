//! Engine dialects: each engine's identification endpoints and stream formats, replayed from the
//! fixtures in `tests/fixtures/dialects/<engine>/` by a small in-test HTTP server, and driven
//! through servetop exactly as a real run would (`--backend auto`, chat, SGLang native).
//!
//! The fixtures follow each engine's documented and source-visible formats (vLLM, SGLang, TGI) or
//! were recorded from a real server (llama.cpp, `tests/fixtures/dialects/llamacpp/`); see
//! `tests/fixtures/dialects/README.md` for where each comes from. Only the numbers that depend on
//! the prompt are filled in at replay time: `{{prompt_tokens}}` (and `{{prompt_tokens+K}}`) become
//! the prompt's token count under the fixture server's stand-in tokenizer (one token per
//! whitespace-separated word, plus the engine's BOS and chat-template tokens), which its
//! `/tokenize` answers with too. Everything else is replayed byte for byte, one SSE event per
//! write, a couple of milliseconds apart (`: servetop-fixture delay_ms=N` lines set a longer gap
//! and are not sent).

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Value, json};

use servetop::client::detect::{self, Engine};
use servetop::client::dialect::{self, Dialect};
use servetop::config::{BackendChoice, RunConfig};
use servetop::event::RunState;
use servetop::metrics::{CountSource, LevelStats, RequestRecord};
use servetop::run::run_headless;
use servetop::run::session::Session;
use servetop::workload::RequestCount;

mod run_files;

/// How the fixture server counts a prompt, per engine.
#[derive(Clone, Copy)]
struct Tokens {
    /// Tokens the engine adds to a completion prompt (BOS).
    bos: u64,
    /// Tokens a chat template adds around one user message.
    chat_overhead: u64,
}

fn tokens_of(engine: &str) -> Tokens {
    match engine {
        // The tiny llama model's ChatML template (see scripts/llama/make_model.py), counted with
        // its SentencePiece vocabulary when the fixture was recorded.
        "llamacpp" => Tokens {
            bos: 1,
            chat_overhead: 27,
        },
        _ => Tokens {
            bos: 1,
            chat_overhead: 9,
        },
    }
}

fn fixture_dir(engine: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dialects")
        .join(engine)
}

/// One request the fixture server received (a GET's body is null).
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    body: Value,
    headers: axum::http::HeaderMap,
}

struct FixtureServer {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Replay at most this many events of a stream (then close without `[DONE]`).
    cut_after: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FixtureServer {
    fn requests(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path == path)
            .cloned()
            .collect()
    }

    fn posts(&self, path: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path == path)
            .map(|s| s.body.clone())
            .collect()
    }
}

/// Replaces `{{prompt_tokens}}` and `{{prompt_tokens+K}}` with numbers.
fn fill(template: &str, prompt_tokens: u64) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{prompt_tokens") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "{{prompt_tokens".len()..];
        let end = after.find("}}").expect("closed placeholder");
        let add: u64 = match after[..end].strip_prefix('+') {
            Some(k) => k.parse().expect("numeric offset"),
            None => 0,
        };
        out.push_str(&(prompt_tokens + add).to_string());
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The stand-in tokenizer: one token per whitespace-separated word.
fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// Prompt tokens of a generation request as the engine would count them.
fn prompt_tokens(path: &str, body: &Value, t: Tokens) -> u64 {
    let text_words = |v: &Value| v.as_str().map_or(0, words);
    match path {
        "/v1/chat/completions" => {
            let msgs = body["messages"].as_array().cloned().unwrap_or_default();
            t.bos + t.chat_overhead + msgs.iter().map(|m| text_words(&m["content"])).sum::<u64>()
        }
        // The engine puts `system` first as a chat message.
        "/v1/messages" => {
            let msgs = body["messages"].as_array().cloned().unwrap_or_default();
            t.bos
                + t.chat_overhead
                + text_words(&body["system"])
                + msgs.iter().map(|m| text_words(&m["content"])).sum::<u64>()
        }
        "/generate" => t.bos + text_words(&body["text"]),
        _ => t.bos + text_words(&body["prompt"]),
    }
}

/// Splits an `.sse` fixture into (delay before, event text) pairs.
fn sse_events(text: &str) -> Vec<(Duration, String)> {
    let mut out = Vec::new();
    let mut delay = Duration::from_millis(2);
    for block in text.split("\n\n") {
        let mut event = String::new();
        for line in block.lines() {
            if let Some(d) = line.strip_prefix(": servetop-fixture delay_ms=") {
                delay = Duration::from_millis(d.trim().parse().unwrap());
            } else if !line.is_empty() {
                event.push_str(line);
                event.push('\n');
            }
        }
        if !event.is_empty() {
            event.push('\n');
            out.push((delay, event));
            delay = Duration::from_millis(2);
        }
    }
    out
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn not_found() -> Response {
    json_response(StatusCode::NOT_FOUND, r#"{"detail":"Not Found"}"#.into())
}

/// `/tokenize` in the engine's own request and answer shapes.
fn tokenize(engine: &str, body: &Value) -> Response {
    let ids = |n: u64| Value::from((0..n).map(|i| 1000 + i).collect::<Vec<_>>());
    match engine {
        "llamacpp" => match body["content"].as_str() {
            Some(c) => json_response(
                StatusCode::OK,
                json!({"tokens": ids(words(c))}).to_string(),
            ),
            None => json_response(
                StatusCode::BAD_REQUEST,
                json!({"error":{"code":400,"message":"\"content\" must be provided","type":"invalid_request_error"}}).to_string(),
            ),
        },
        // TGI takes {"inputs": ...} and answers a bare list of tokens; servetop's OpenAI-style
        // body is refused, so it sizes prompts with probe requests instead.
        "tgi" => match body["inputs"].as_str() {
            Some(s) => {
                let toks: Vec<Value> = s
                    .split_whitespace()
                    .enumerate()
                    .map(|(i, w)| json!({"id": 1000 + i, "text": w, "start": 0, "stop": 0}))
                    .collect();
                json_response(StatusCode::OK, Value::from(toks).to_string())
            }
            None => json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Failed to deserialize the JSON body into the target type: missing field `inputs` at line 1 column 80".into(),
            ),
        },
        _ => {
            let n = body["prompt"].as_str().map_or(0, words);
            json_response(
                StatusCode::OK,
                json!({"count": n, "max_model_len": 40960, "tokens": ids(n), "token_strs": null})
                    .to_string(),
            )
        }
    }
}

fn stream_response(events: Vec<(Duration, String)>, cut_after: usize) -> Response {
    let events: Vec<_> = events.into_iter().take(cut_after).collect();
    let stream = futures_util::stream::unfold(events.into_iter(), |mut it| async move {
        let (delay, ev) = it.next()?;
        tokio::time::sleep(delay).await;
        Some((Ok::<_, Infallible>(Bytes::from(ev)), it))
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

fn handle(
    engine: &'static str,
    seen: &Mutex<Vec<Seen>>,
    cut_after: &AtomicUsize,
    method: &Method,
    uri: &Uri,
    headers: &axum::http::HeaderMap,
    body: &Bytes,
) -> Response {
    let dir = fixture_dir(engine);
    let path = uri.path().to_string();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    seen.lock().unwrap().push(Seen {
        path: path.clone(),
        body: body.clone(),
        headers: headers.clone(),
    });
    if *method == Method::GET {
        let file = match path.as_str() {
            "/v1/models" => "models.json",
            "/server_info" | "/get_server_info" => "server_info.json",
            "/props" => "props.json",
            "/info" => "info.json",
            "/version" => "version.json",
            "/health" => return json_response(StatusCode::OK, r#"{"status":"ok"}"#.into()),
            _ => return not_found(),
        };
        return read(file).map_or_else(not_found, |t| json_response(StatusCode::OK, t));
    }
    let stem = match path.as_str() {
        "/tokenize" => return tokenize(engine, &body),
        "/v1/completions" => "completions",
        "/v1/chat/completions" => "chat",
        "/v1/messages" => "messages",
        "/generate" => "generate",
        _ => return not_found(),
    };
    let n = prompt_tokens(&path, &body, tokens_of(engine));
    let streamed = body["stream"].as_bool().unwrap_or(false);
    if streamed {
        match read(&format!("{stem}.sse")) {
            Some(t) => stream_response(sse_events(&fill(&t, n)), cut_after.load(Ordering::SeqCst)),
            None => not_found(),
        }
    } else {
        match read(&format!("{stem}.json")) {
            Some(t) => json_response(StatusCode::OK, fill(&t, n)),
            None => not_found(),
        }
    }
}

async fn serve(engine: &'static str) -> FixtureServer {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let cut_after = Arc::new(AtomicUsize::new(usize::MAX));
    let (s, c) = (seen.clone(), cut_after.clone());
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: axum::http::HeaderMap, body: Bytes| {
            let response = handle(engine, &s, &c, &method, &uri, &headers, &body);
            async move { response }
        },
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        axum::serve(
            axum::serve::ListenerExt::tap_io(listener, |tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            app,
        )
        .await
        .unwrap();
    });
    FixtureServer {
        url,
        seen,
        cut_after,
        task,
    }
}

fn run_config(url: &str) -> RunConfig {
    RunConfig {
        input_len: 64,
        output_len: 16,
        requests_per_level: RequestCount::Fixed(2),
        first_token_timeout_s: 10.0,
        idle_timeout_s: 10.0,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        no_metrics: true,
        server_wait_s: 5.0,
        ..RunConfig::minimal(url)
    }
}

async fn run(url: &str, backend: BackendChoice) -> Session {
    let mut cfg = run_config(url);
    cfg.backend = backend;
    let (state, session) = run_headless(cfg, None).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    session
}

/// [`run`] with the automatic backend, keeping every chunk: the session and its measured
/// records.
async fn run_recorded(url: &str, name: &str) -> (Session, Vec<RequestRecord>) {
    let dir = std::env::temp_dir().join(format!("servetop-dialects-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = run_config(url);
    cfg.record_chunks = true;
    let (state, session) = run_headless(cfg, Some(dir.clone())).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    let records = std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<RequestRecord>(l).unwrap())
        .filter(|r| !r.warmup && r.is_ok())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    (session, records)
}

fn stats(s: &Session) -> &LevelStats {
    s.summary.sweep[0].stats.as_ref().expect("level has stats")
}

#[tokio::test]
async fn auto_detection_names_each_engine_its_model_and_context_limit() {
    let http = servetop::client::http_client(&[]).unwrap();
    let cases = [
        (
            "vllm",
            Engine::Vllm,
            "Qwen/Qwen3-8B",
            40960,
            "/v1/models max_model_len",
            Some("0.11.0"),
        ),
        (
            "sglang",
            Engine::Sglang,
            "meta-llama/Llama-3.1-8B-Instruct",
            131_072,
            "/v1/models max_model_len",
            Some("0.5.4"),
        ),
        (
            "llamacpp",
            Engine::Llamacpp,
            "tiny-llama.gguf",
            2048,
            "/props default_generation_settings.n_ctx (per slot)",
            None,
        ),
        (
            "tgi",
            Engine::Tgi,
            "mistralai/Mistral-7B-Instruct-v0.3",
            8192,
            "/info max_total_tokens",
            Some("3.3.4"),
        ),
    ];
    for (name, want, model, ctx, source, version) in cases {
        let srv = serve(name).await;
        let probes = detect::probe(&http, &srv.url, None).await;
        let info = detect::identify(&srv.url, &probes, None).unwrap();
        assert_eq!(info.engine, want, "{name}");
        assert_eq!(info.model, model, "{name}");
        assert_eq!(info.context_limit, Some(ctx), "{name}");
        assert_eq!(info.context_limit_source.as_deref(), Some(source), "{name}");
        if let Some(v) = version {
            assert_eq!(info.engine_version.as_deref(), Some(v), "{name}");
        }
        assert!(!info.simulated, "{name}");
    }
}

/// What a `--backend auto` run must make of each engine's completions stream.
struct Expect {
    engine: &'static str,
    /// Output tokens per request, from the fixture's own usage.
    output_tokens: u64,
    chunk_source: CountSource,
    /// Whether servetop must ask for per-chunk usage (`continuous_usage_stats`).
    continuous_usage: bool,
    /// Mean tokens per chunk after the first, from the fixture's cumulative counts (exact
    /// engines) or one per event (the others).
    /// Tokens per token-carrying event after the first, as the fixture has them.
    tokens_per_event: f64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_backend_counts_each_engines_completions_stream() {
    let cases = [
        Expect {
            engine: "vllm",
            output_tokens: 7,
            chunk_source: CountSource::PerChunkUsage,
            continuous_usage: true,
            // completions.sse's cumulative completion_tokens: 1, 3, 6, 7 (then a usage-only
            // chunk at 7): chunks of 2, 3 and 1 after the first.
            tokens_per_event: 6.0 / 3.0,
        },
        Expect {
            engine: "sglang",
            output_tokens: 8,
            chunk_source: CountSource::PerChunkUsage,
            continuous_usage: true,
            // completions.sse's cumulative completion_tokens: 1, 4, 7, 8 (then a usage-only
            // chunk at 8): chunks of 3, 3 and 1 after the first.
            tokens_per_event: 7.0 / 3.0,
        },
        Expect {
            engine: "llamacpp",
            output_tokens: 16,
            chunk_source: CountSource::ChunkEstimate,
            continuous_usage: false,
            tokens_per_event: 1.0,
        },
        Expect {
            engine: "tgi",
            output_tokens: 5,
            chunk_source: CountSource::ChunkEstimate,
            continuous_usage: false,
            tokens_per_event: 1.0,
        },
    ];
    // The exact engines' fixtures carry several tokens in some chunks: a client that counted
    // events instead of tokens would fail here.
    for e in cases {
        let srv = serve(e.engine).await;
        let (s, records) = run_recorded(&srv.url, e.engine).await;
        let st = stats(&s);
        let sc = &st.scalars;
        let name = e.engine;
        assert_eq!(sc.completed, 2, "{name}: {:?}", sc.failures);
        assert_eq!(sc.failed, 0, "{name}");
        assert_eq!(sc.total_output_tokens, 2 * e.output_tokens, "{name}");
        assert_eq!(
            sc.output_token_sources.get(&CountSource::Usage),
            Some(&2),
            "{name}: totals come from the server's usage"
        );
        assert_eq!(
            sc.chunk_token_sources.get(&e.chunk_source),
            Some(&2),
            "{name}: {:?}",
            sc.chunk_token_sources
        );
        // Prompts of exactly 64 tokens as the engine counts them (usage.prompt_tokens).
        assert_eq!(sc.mean_input_tokens, Some(64.0), "{name}");
        // Per event, the fixture's tokens whatever the load (a client that counted events
        // instead of tokens fails here); per delivery, the mean over the chunks the run saw:
        // events the kernel handed over together (a busy machine reads late) are one delivery.
        let (mut tokens, mut events, mut per_delivery) = (0u64, 0u64, Vec::new());
        for r in &records {
            for c in r.chunks.iter().skip(1) {
                tokens += u64::from(c.tokens);
                events += u64::from(c.events);
                per_delivery.push(f64::from(c.tokens));
            }
        }
        let per_event = tokens as f64 / events as f64;
        assert!(
            (per_event - e.tokens_per_event).abs() < 1e-9,
            "{name}: tokens per event {per_event}, fixture says {}",
            e.tokens_per_event
        );
        let want = per_delivery.iter().sum::<f64>() / per_delivery.len() as f64;
        let tpc = sc.accept_length_client.unwrap();
        assert!(
            (tpc - want).abs() < 1e-9,
            "{name}: tokens per chunk {tpc}, the records' deliveries {want}"
        );
        // The summary names the engine it identified.
        assert_eq!(
            s.summary.server.as_ref().map(|i| i.engine.name()),
            Some(engine_name(name)),
            "{name}"
        );
        // What servetop asked for, as the engine saw it.
        let bodies = srv.posts("/v1/completions");
        let streamed: Vec<_> = bodies.iter().filter(|b| b["stream"] == true).collect();
        assert_eq!(streamed.len(), 3, "{name}: warmup + 2 measured");
        for b in streamed {
            assert_eq!(b["stream_options"]["include_usage"], true, "{name}");
            assert_eq!(
                b["stream_options"]["continuous_usage_stats"] == true,
                e.continuous_usage,
                "{name}: {b}"
            );
            assert_eq!(b["ignore_eos"], true, "{name}");
            // llama-server alone reuses cached prompts unless asked not to.
            assert_eq!(
                b.get("cache_prompt").is_some_and(|v| v == false),
                name == "llamacpp",
                "{name}: {b}"
            );
            assert_eq!(
                b["model"],
                s.summary.server.as_ref().unwrap().model,
                "{name}"
            );
        }
    }
}

fn engine_name(fixture: &str) -> &'static str {
    match fixture {
        "vllm" => Engine::Vllm.name(),
        "sglang" => Engine::Sglang.name(),
        "llamacpp" => Engine::Llamacpp.name(),
        _ => Engine::Tgi.name(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_streams_count_reasoning_and_ignore_the_role_chunk() {
    // (engine, output tokens, chunk source, whether a 40 ms pause follows the role-only chunk)
    let cases = [
        ("vllm", 6, CountSource::PerChunkUsage, true),
        ("sglang", 7, CountSource::PerChunkUsage, true),
        ("llamacpp", 16, CountSource::ChunkEstimate, true),
        ("tgi", 3, CountSource::ChunkEstimate, false),
    ];
    for (name, out, src, role_pause) in cases {
        let srv = serve(name).await;
        let s = run(&srv.url, BackendChoice::OpenaiChat).await;
        let st = stats(&s);
        let sc = &st.scalars;
        assert_eq!(sc.completed, 2, "{name}: {:?}", sc.failures);
        assert_eq!(sc.total_output_tokens, 2 * out, "{name}");
        assert_eq!(sc.chunk_token_sources.get(&src), Some(&2), "{name}");
        // The chat template's tokens were learned from the warmup (or, for TGI, which has no
        // /tokenize servetop can use, from probe requests): prompts still total 64, within the
        // probes' estimate for TGI.
        let mean_in = sc.mean_input_tokens.unwrap();
        if name == "tgi" {
            assert!((mean_in - 64.0).abs() <= 1.0, "{name}: {mean_in}");
        } else {
            assert!((mean_in - 64.0).abs() < 1e-9, "{name}: {mean_in}");
        }
        if role_pause {
            // The role-only chunk arrives at once; the first token 40 ms later. TTFT is the
            // first token's time, not the role chunk's.
            let ttft = st.dists.ttft_ms.as_ref().unwrap();
            assert!(ttft.min >= 40.0, "{name}: TTFT {} ms", ttft.min);
        }
        let bodies = srv.posts("/v1/chat/completions");
        assert!(bodies.iter().all(|b| b["messages"][0]["role"] == "user"));
    }
}

/// `--backend anthropic`: vLLM's and llama-server's `/v1/messages` streams, as recorded from
/// each (see the fixtures' README). Tokens are one a content-block delta (neither engine counts
/// per delta) and the closing usage's output; the prompt is `input_tokens` plus the cache's
/// share; every request carries `anthropic-version` and the key both as `x-api-key` and as a
/// bearer token (vLLM reads only the latter), and no `ignore_eos`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_streams_count_each_engines_usage() {
    for name in ["vllm", "llamacpp"] {
        let srv = serve(name).await;
        let mut cfg = run_config(&srv.url);
        cfg.backend = BackendChoice::Anthropic;
        let key = "sk-fixture";
        let prepared = servetop::runner::prepare(&cfg, Some(key.into()))
            .await
            .unwrap();
        let (state, s) = servetop::run::run_prepared(
            &cfg,
            prepared,
            servetop::summary::RunSummary::new(cfg.clone(), None),
            servetop::run::sink::Sink::none(),
            true,
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
        assert_eq!(state, RunState::Finished, "{name}: {:?}", s.summary.error);
        let sc = &stats(&s).scalars;
        assert_eq!(sc.completed, 2, "{name}: {:?}", sc.failures);
        assert_eq!(sc.total_output_tokens, 2 * 6, "{name}");
        assert_eq!(
            sc.chunk_token_sources.get(&CountSource::ChunkEstimate),
            Some(&2),
            "{name}"
        );
        assert_eq!(sc.mean_input_tokens, Some(64.0), "{name}");
        let seen = srv.requests("/v1/messages");
        assert!(seen.len() >= 3, "{name}: warmup and 2 requests");
        for r in &seen {
            let h = |k: &str| r.headers.get(k).and_then(|v| v.to_str().ok());
            assert_eq!(h("anthropic-version"), Some("2023-06-01"), "{name}");
            assert_eq!(h("x-api-key"), Some(key), "{name}");
            assert_eq!(h("authorization"), Some(format!("Bearer {key}").as_str()));
            assert_eq!(r.body["stream"], true);
            assert_eq!(r.body.get("ignore_eos"), None, "{name}");
            assert_eq!(r.body["messages"][0]["role"], "user", "{name}");
        }
        assert!(srv.posts("/v1/chat/completions").is_empty(), "{name}");
    }
}

/// `--header`: a gateway's headers on every request the run sends — detection, `/tokenize`,
/// the warmup and the measured requests, whichever HTTP client sends them — and in the run's
/// files only where their names say they are no secret: the key's value is in none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_go_with_every_request_and_a_secret_into_no_file() {
    let srv = serve("vllm").await;
    let dir = std::env::temp_dir().join(format!("servetop-headers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (url, out) = (srv.url.clone(), dir.clone());
    let ran = tokio::task::spawn_blocking(move || {
        std::process::Command::new(run_files::bin())
            .args(["run", "--base-url", &url, "--headless", "--no-gpu"])
            .args(["--concurrency", "1", "--requests-per-level", "2"])
            .args([
                "--input-len",
                "64",
                "--output-len",
                "16",
                "--long-context",
                "none",
            ])
            .args([
                "--header",
                "X-Tenant: team-a",
                "--header",
                "X-Gateway-Key:s3cret-k",
            ])
            .arg("--out")
            .arg(&out)
            .env_remove("SERVETOP_API_KEY")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let seen = srv.seen.lock().unwrap().clone();
    let paths: std::collections::BTreeSet<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    for p in ["/v1/models", "/tokenize", "/v1/completions"] {
        assert!(paths.contains(p), "no request to {p}: {paths:?}");
    }
    for r in &seen {
        let h = |k: &str| r.headers.get(k).and_then(|v| v.to_str().ok());
        assert_eq!(
            (h("x-tenant"), h("x-gateway-key")),
            (Some("team-a"), Some("s3cret-k")),
            "{}",
            r.path
        );
    }
    let v = run_files::results(&dir);
    assert_eq!(
        v["config"]["headers"],
        json!([{"name": "X-Tenant", "value": "team-a"}, {"name": "X-Gateway-Key", "value": "***"}])
    );
    let mut files = vec![dir.clone()];
    let mut read = 0;
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        assert!(
            !bytes.windows(8).any(|w| w == b"s3cret-k"),
            "{} holds the key's value",
            p.display()
        );
        read += 1;
    }
    assert!(read >= 5, "only {read} files in the run directory");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_native_generate_counts_from_cumulative_meta_info() {
    let srv = serve("sglang").await;
    let s = run(&srv.url, BackendChoice::Sglang).await;
    let sc = &stats(&s).scalars;
    assert_eq!(sc.completed, 2, "{:?}", sc.failures);
    assert_eq!(sc.total_output_tokens, 2 * 6);
    assert_eq!(
        sc.chunk_token_sources.get(&CountSource::EngineNative),
        Some(&2)
    );
    assert_eq!(sc.mean_input_tokens, Some(64.0));
    // meta_info counts 1, 3, 5, 6: chunks of 1, 2, 2, 1 tokens.
    assert!((sc.accept_length_client.unwrap() - 5.0 / 3.0).abs() < 1e-9);
    let body = &srv.posts("/generate")[0];
    assert_eq!(body["sampling_params"]["ignore_eos"], true);
    assert_eq!(body["stream"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_before_its_end_is_a_failure_for_every_engine() {
    for name in ["vllm", "sglang", "llamacpp", "tgi"] {
        let srv = serve(name).await;
        let mut cfg = run_config(&srv.url);
        cfg.warmup_requests = 0;
        // Prompt sizing and probes run first; then every stream stops after two events,
        // before its finish reason and [DONE] (TGI's "" finish_reason must not read as done).
        let prepared = servetop::runner::prepare(&cfg, None).await.unwrap();
        srv.cut_after.store(2, Ordering::SeqCst);
        let (state, s) = servetop::run::run_prepared(
            &cfg,
            prepared,
            servetop::summary::RunSummary::new(cfg.clone(), None),
            servetop::run::sink::Sink::none(),
            true,
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
        assert_eq!(state, RunState::Finished, "{name}");
        let sc = &stats(&s).scalars;
        assert_eq!(sc.completed, 0, "{name}");
        assert_eq!(
            sc.failures["stream_cut"].count, 2,
            "{name}: {:?}",
            sc.failures
        );
    }
}

#[test]
fn every_fixture_event_parses_and_finishes_where_the_engine_says() {
    for (engine, file, d) in [
        ("vllm", "completions.sse", Dialect::Completions),
        ("vllm", "chat.sse", Dialect::Chat),
        ("sglang", "completions.sse", Dialect::Completions),
        ("sglang", "chat.sse", Dialect::Chat),
        ("sglang", "generate.sse", Dialect::SglangNative),
        ("llamacpp", "completions.sse", Dialect::Completions),
        ("llamacpp", "chat.sse", Dialect::Chat),
        ("tgi", "completions.sse", Dialect::Completions),
        ("tgi", "chat.sse", Dialect::Chat),
        ("vllm", "messages.sse", Dialect::Messages),
        ("llamacpp", "messages.sse", Dialect::Messages),
    ] {
        let text = fill(
            &std::fs::read_to_string(fixture_dir(engine).join(file)).unwrap(),
            10,
        );
        let events = sse_events(&text);
        // Each event's `data:` line (a Messages event names itself on an `event:` line first).
        let datas: Vec<&str> = events
            .iter()
            .map(|(_, e)| e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap())
            .filter(|d| *d != "[DONE]")
            .collect();
        for data in &datas {
            let c = dialect::parse(d, data);
            assert!(c.is_ok(), "{engine}/{file}: {data}: {c:?}");
            assert!(c.unwrap().error.is_none(), "{engine}/{file}: {data}");
        }
        let finished: Vec<bool> = datas
            .iter()
            .map(|data| dialect::parse(d, data).unwrap().finished)
            .collect();
        // Exactly one event carries the finish reason, and nothing after it carries text.
        assert_eq!(
            finished.iter().filter(|f| **f).count(),
            1,
            "{engine}/{file}: {finished:?}"
        );
        let at = finished.iter().position(|f| *f).unwrap();
        for data in &datas[at + 1..] {
            assert_eq!(dialect::parse(d, data).unwrap().text, "", "{engine}/{file}");
        }
        if d == Dialect::Messages {
            let ends: Vec<bool> = datas
                .iter()
                .map(|data| dialect::parse(d, data).unwrap().end)
                .collect();
            assert_eq!(
                ends.iter().position(|e| *e),
                Some(datas.len() - 1),
                "{engine}/{file} ends with message_stop, and only there"
            );
        } else {
            assert_eq!(
                events.last().unwrap().1.trim(),
                "data: [DONE]",
                "{engine}/{file} ends with [DONE]"
            );
        }
    }
}
