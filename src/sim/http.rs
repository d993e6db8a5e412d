//! The simulator's HTTP surface: OpenAI-compatible completions and chat (vLLM-style streams),
//! Anthropic Messages (as vLLM serves it), SGLang-native `/generate`, `/v1/models`, `/tokenize`
//! and `/health`.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::SimConfig;
use super::ask::{Ask, answer_plan, natural_stop, parse_ask};
use super::batcher::SimRequest;
use super::faults::FaultKind;
use super::log::SimLog;
use super::metrics;
use super::prefix_cache::{PrefixCache, block_hashes};
use super::tokenizer;
use std::sync::Mutex;

use super::stream::{AnswerPlan, Kind, Phase, StreamState};

/// Shared state of the HTTP handlers.
pub struct SimState {
    pub config: SimConfig,
    pub engine: mpsc::UnboundedSender<SimRequest>,
    pub next_id: AtomicU64,
    /// Constrained requests read so far (which of them to break, `structured_invalid_every`).
    pub constrained: AtomicU64,
    pub log: Arc<Mutex<SimLog>>,
    /// The engine's prefix cache (`None` when it is off).
    pub cache: Option<Arc<Mutex<PrefixCache>>>,
}

pub(super) type Shared = Arc<SimState>;

/// All routes.
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/messages", post(messages))
        .route("/generate", post(generate))
        .route("/metrics", get(engine_metrics))
        .route("/server_info", get(server_info))
        .route("/get_server_info", get(server_info))
        .route("/dcgm/metrics", get(dcgm_metrics))
        .route("/sim/requests", get(super::side::sim_requests))
        .route(
            "/flush_cache",
            get(super::side::flush_cache).post(super::side::flush_cache),
        )
        // Requests with images are megabytes of base64 (a 1024x1024 PNG of noise: 4 MB);
        // axum's 2 MB default would refuse them where an engine does not.
        .layer(axum::extract::DefaultBodyLimit::max(1 << 30))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            require_key,
        ))
        .with_state(state)
}

/// vLLM's `--api-key`: `/v1/*` answers 401 without the right bearer token; `/health`,
/// `/metrics` and `/tokenize` stay open.
async fn require_key(
    State(s): State<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(key) = &s.config.api_key
        && req.uri().path().starts_with("/v1")
    {
        let sent = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if sent != Some(key.as_str()) {
            if let Ok(mut l) = s.log.lock() {
                l.unauthorized += 1;
            }
            return (
                StatusCode::UNAUTHORIZED,
                Json(json!({"error": "Unauthorized"})),
            )
                .into_response();
        }
    }
    next.run(req).await
}

pub(super) fn error(status: StatusCode, message: &str) -> Response {
    // vLLM's error body shape.
    let body = json!({"object": "error", "message": message, "type": "BadRequestError", "param": null, "code": status.as_u16()});
    (status, Json(body)).into_response()
}

async fn models(State(s): State<Shared>) -> Json<Value> {
    let base = json!({
        "id": s.config.model,
        "object": "model",
        "created": 0,
        "owned_by": "servetop-sim",
        "root": s.config.model,
        "max_model_len": s.config.context_length,
        "simulated": true,
        "preset": s.config.preset,
    });
    // Adapters after the base model, with it as their parent, as vLLM lists them.
    let adapters = s.config.lora.iter().map(|a| {
        json!({
            "id": a.name,
            "object": "model",
            "created": 0,
            "owned_by": "servetop-sim",
            "root": a.name,
            "parent": s.config.model,
            "max_model_len": s.config.context_length,
            "simulated": true,
        })
    });
    Json(json!({
        "object": "list",
        "data": std::iter::once(base).chain(adapters).collect::<Vec<_>>(),
    }))
}

fn prometheus(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

async fn engine_metrics(State(s): State<Shared>) -> Response {
    let Some(flavor) = s.config.metrics else {
        return (
            StatusCode::NOT_FOUND,
            "metrics are off (servetop sim --flavor none)",
        )
            .into_response();
    };
    let page = match s.log.lock() {
        Ok(mut l) => {
            l.metrics_reads.push_back(crate::metrics::unix_us());
            if l.metrics_reads.len() > super::log::LOG_CAP {
                l.metrics_reads.pop_front();
            }
            metrics::engine_page(&s.config, &l, flavor, Instant::now())
        }
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    prometheus(page)
}

async fn server_info(State(s): State<Shared>) -> Response {
    if s.config.metrics != Some(super::MetricsFlavor::Sglang) {
        return StatusCode::NOT_FOUND.into_response();
    }
    match s.log.lock() {
        Ok(l) => Json(metrics::server_info(&s.config, &l)).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn dcgm_metrics(State(s): State<Shared>) -> Response {
    if s.config.gpus == 0 {
        return (
            StatusCode::NOT_FOUND,
            "no simulated GPUs (servetop sim --gpus N)",
        )
            .into_response();
    }
    match s.log.lock() {
        Ok(l) => prometheus(metrics::dcgm_page(&s.config, &l, Instant::now())),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn tokenize(State(s): State<Shared>, Json(body): Json<Value>) -> Response {
    let text = body
        .get("prompt")
        .or_else(|| body.get("content"))
        .and_then(Value::as_str);
    match text {
        Some(t) => Json(json!({
            "count": tokenizer::count(t),
            "max_model_len": s.config.context_length,
            "tokens": tokenizer::ids(t),
        }))
        .into_response(),
        None => error(
            StatusCode::BAD_REQUEST,
            "body needs a string 'prompt' (or 'content')",
        ),
    }
}

async fn completions(
    State(s): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    serve(&s, Kind::Completions, &body, request_id(&headers))
}

async fn chat(State(s): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    serve(&s, Kind::Chat, &body, request_id(&headers))
}

/// `/v1/messages`: served as vLLM serves it, through the chat endpoint ([`super::messages`]).
async fn messages(
    State(s): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let chat = match super::messages::chat_body(&body) {
        Ok(c) => c,
        Err(e) => {
            let v = json!({"message": e, "type": "BadRequestError"});
            return (
                StatusCode::BAD_REQUEST,
                Json(super::messages::error_body(&v)),
            )
                .into_response();
        }
    };
    let stream = chat["stream"].as_bool().unwrap_or(false);
    let (parts, body) = serve(&s, Kind::Chat, &chat, request_id(&headers)).into_parts();
    if parts.status.is_success() && stream {
        let mut conv = super::messages::Converter::default();
        let events = body
            .into_data_stream()
            .map(move |r| r.map(|b| conv.write(&b)));
        return Response::from_parts(parts, Body::from_stream(events));
    }
    let whole = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let v: Value = serde_json::from_slice(&whole).unwrap_or(Value::Null);
    let out = if parts.status.is_success() {
        super::messages::whole(&v)
    } else {
        super::messages::error_body(&v)
    };
    // The status and headers (a 429's Retry-After) are the chat answer's.
    Response::from_parts(parts, Body::from(out.to_string()))
}

async fn generate(
    State(s): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    serve(&s, Kind::Native, &body, request_id(&headers))
}

fn request_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// The whole answer of an injected fault that answers at once (500, 429, a context error);
/// `None` for the faults that happen mid-stream.
fn fault_response(s: &Shared, f: FaultKind, ask: &Ask) -> Option<Response> {
    match f {
        FaultKind::Http500 => Some(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "simulated internal server error (injected fault)",
        )),
        FaultKind::Http429 => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "simulated rate limit (injected fault)",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            Some(r)
        }
        FaultKind::Ctx400 => Some(error(
            StatusCode::BAD_REQUEST,
            &format!(
                "This model's maximum context length is {} tokens. However, you requested {} tokens (injected fault).",
                s.config.context_length,
                ask.input_tokens + ask.max_tokens
            ),
        )),
        _ => None,
    }
}

/// The fault request `id` draws, if any; `Err` with the whole answer of one that answers at
/// once.
fn injected_fault(s: &Shared, id: u64, ask: &Ask) -> Result<Option<FaultKind>, Box<Response>> {
    let draw: f64 =
        SmallRng::seed_from_u64(s.config.seed ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15)).random();
    let fault = s
        .config
        .faults
        .pick(draw)
        // Stream faults need a stream.
        .filter(|f| {
            ask.stream
                || matches!(
                    f,
                    FaultKind::Http500 | FaultKind::Http429 | FaultKind::Ctx400
                )
        });
    if let Some(f) = fault {
        if let Ok(mut l) = s.log.lock() {
            *l.injected.entry(f).or_default() += 1;
        }
        if let Some(r) = fault_response(s, f, ask) {
            return Err(Box::new(r));
        }
    }
    Ok(fault)
}

/// A constrained request's whole answer: a chat's follows its thinking, elsewhere the whole
/// output is the answer; every `structured_invalid_every`-th one fails its constraint.
fn constrained_answer(
    s: &SimState,
    kind: Kind,
    ask: &Ask,
    answer: &AnswerPlan,
) -> Option<super::structured::Planned> {
    let tokens = if kind == Kind::Chat {
        answer.answer
    } else {
        ask.max_tokens
    };
    let c = ask.structured.as_ref()?;
    let broken = super::structured::breaks_next(s.config.structured_invalid_every, &s.constrained);
    Some(super::structured::answer(c, tokens, broken))
}

/// A chat prompt's marks, and what had been finished of it, looked up before its own prefill
/// can end (none but for a chat with the prefix cache on).
fn finished_of(s: &SimState, kind: Kind, ids: &[u32]) -> (Vec<super::finished::Mark>, Option<u64>) {
    let Some(cache) = s.cache.as_ref().filter(|_| kind == Kind::Chat) else {
        return (Vec::new(), None);
    };
    let marks = super::finished::marks(ids);
    let finished = cache.lock().ok().map(|c| c.finished.longest(&marks));
    (marks, finished)
}

/// Engine time a request's prefill costs beyond its tokens': its adapter swapped in, its
/// images encoded.
fn extra_prefill(cfg: &super::SimConfig, ask: &super::ask::Ask) -> std::time::Duration {
    std::time::Duration::from_secs_f64(
        (ask.lora.as_ref().map_or(0.0, |a| a.switch_ms) + cfg.image_ms * ask.images.len() as f64)
            / 1000.0,
    )
}

fn serve(s: &Shared, kind: Kind, body: &Value, request_id: Option<String>) -> Response {
    // Arrival: the request as read, before its prompt is tokenized (a long prompt takes a
    // while, and that is the engine's time, not the client's lateness).
    let arrived = Instant::now();
    let received_unix_us = crate::metrics::unix_us();
    let mut ask = match parse_ask(s, kind, body) {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let id = s.next_id.fetch_add(1, Ordering::Relaxed);
    let fault = match injected_fault(s, id, &ask) {
        Ok(f) => f,
        Err(r) => return *r,
    };
    let (asked_max_tokens, natural_stop_at) = natural_stop(&s.config, id, &mut ask);
    let answer = answer_plan(&s.config, kind, &ask);
    let (marks, finished_prefix_tokens) = finished_of(s, kind, &ask.prompt_ids);
    let (tx, rx) = mpsc::unbounded_channel();
    let req = SimRequest {
        input_tokens: ask.input_tokens,
        max_tokens: ask.max_tokens,
        tx,
        arrived,
        blocks: block_hashes(&ask.prompt_ids),
        marks,
        extra_prefill: extra_prefill(&s.config, &ask),
        constrained: ask.structured.is_some(),
        accept: s.config.accept_for(ask.content),
    };
    if s.engine.send(req).is_err() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "simulated engine is shutting down",
        );
    }
    let planned = constrained_answer(s, kind, &ask, &answer);
    let trace = super::truth::SimRequestTrace {
        request_id,
        received_unix_us,
        finished_prefix_tokens,
        prompt_tokens: ask.input_tokens,
        max_tokens: asked_max_tokens,
        natural_stop_at,
        lora: ask.lora.as_ref().map(|a| a.name.clone()),
        structured: ask.structured.is_some(),
        content: ask.content,
        structured_invalid: planned.as_ref().is_some_and(|p| p.invalid),
        image_tokens: ask
            .images
            .iter()
            .map(|&(w, h)| super::images::tokens(w, h))
            .sum(),
        ..super::truth::SimRequestTrace::default()
    };
    let st = StreamState {
        rx,
        kind,
        model: s.config.model.clone(),
        id: format!("sim-{id}"),
        prompt_tokens: ask.input_tokens,
        cached: 0,
        generated: 0,
        text: String::new(),
        prompt_ids: ask.prompt_ids,
        cache: s.cache.clone(),
        rng: SmallRng::seed_from_u64(id),
        include_usage: ask.include_usage,
        continuous_usage: ask.continuous_usage,
        phase: Phase::Start,
        fault,
        fault_done: false,
        sent_first: false,
        engine_gone: false,
        stall_s: s.config.faults.stall_s,
        slow_first_s: s.config.faults.slow_first_s,
        write_batch: s.config.write_batch.max(1),
        trailer_delay: std::time::Duration::from_secs_f64(s.config.trailer_delay_ms / 1000.0),
        doc: planned.and_then(|p| p.text),
        doc_at: 0,
        eos: natural_stop_at.is_some(),
        answer,
        log: s.log.clone(),
        arrived,
        trace,
    };
    if ask.stream {
        let stream = futures_util::stream::unfold(st, |mut st| async move {
            st.next_frame().await.map(|b| (b, st))
        });
        Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(stream))
            .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "response build failed"))
    } else {
        Body::from_stream(futures_util::stream::once(async move {
            Ok::<Bytes, Infallible>(st.whole().await)
        }))
        .into_response()
    }
}
