//! The firehose: a lean simulated server for measuring the client itself (`servetop sim
//! --firehose`), on OpenAI's completions and chat completions (the latter for sessions). No
//! engine, no scheduler, no prefix cache: every request streams its tokens as fast as the socket
//! takes them, or one write every `--decode-step-ms`, with `--events-per-write` SSE events in each
//! socket write (1 = one flush per token, as engines do at low load; 16 = batched, as under load).
//!
//! It speaks just enough HTTP/1.1 by hand (keep-alive, chunked streams) to control each write
//! exactly, which a framework's buffered writer does not, and to stay far cheaper per token than
//! the client it feeds. Every event is pre-rendered but the token count, so a core can push
//! millions of events a second.
//!
//! Ground truth: with `record_writes`, the time of every write (µs since the Unix epoch, taken
//! just before and just after the write) and how many token events it held are kept per
//! `X-Request-Id` and
//! served, then cleared, at `GET /firehose/writes`.
//!
//! Paced, a stream's writes are due a step apart; one written more than [`STEP_SLACK`] after
//! it was due (the firehose's core was busy: more streams than it can write at that pace) puts
//! the next a whole step after it, as an engine whose decode step ran late emits one token a
//! stream, not the missed ones at once. How late each write was is served, then cleared, at
//! `GET /firehose/pace`: where it is more than a few ms, the load was more than this firehose
//! can pace on its core, and the case ran at a lower rate than asked.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::tokenizer;
use crate::metrics::{Dist, unix_us};

/// How late a paced write may be and keep the schedule: tokio's timers wake on millisecond
/// ticks, so a write on time is up to about a millisecond late. Later than this, the next write
/// is a step after this one (the module's comment).
pub const STEP_SLACK: Duration = Duration::from_millis(2);

/// What the firehose serves.
#[derive(Clone, Debug)]
pub struct FirehoseConfig {
    pub model: String,
    pub context_length: u64,
    /// SSE token events per socket write (at least 1).
    pub events_per_write: u32,
    /// Time between writes of one stream; `None` writes as fast as the socket takes them.
    pub pace: Option<Duration>,
    /// Keep the time of every write for `GET /firehose/writes`.
    pub record_writes: bool,
}

/// Per request id: `(µs since the epoch just before the write, token events in it, µs just
/// after it)`. Over loopback the bytes reach the reader's socket within the write call.
pub type Writes = HashMap<String, Vec<(u64, u32, u64)>>;

struct State {
    cfg: FirehoseConfig,
    writes: Mutex<Writes>,
    /// Paced: how late each write was against when it was due, µs.
    late: Mutex<Dist>,
    next_id: AtomicU64,
    tokens: AtomicU64,
}

/// A running firehose.
pub struct FirehoseHandle {
    pub addr: SocketAddr,
    state: Arc<State>,
    shutdown: CancellationToken,
}

impl FirehoseHandle {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Token events written so far.
    pub fn tokens(&self) -> u64 {
        self.state.tokens.load(Ordering::Relaxed)
    }

    /// Takes the recorded writes.
    pub fn take_writes(&self) -> Writes {
        take(&self.state.writes).unwrap_or_default()
    }
}

impl Drop for FirehoseHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Binds `addr` and serves until the handle is dropped.
pub async fn start(cfg: FirehoseConfig, addr: SocketAddr) -> std::io::Result<FirehoseHandle> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let state = Arc::new(State {
        cfg: FirehoseConfig {
            events_per_write: cfg.events_per_write.max(1),
            ..cfg
        },
        writes: Mutex::new(HashMap::new()),
        late: Mutex::new(Dist::new()),
        next_id: AtomicU64::new(0),
        tokens: AtomicU64::new(0),
    });
    let shutdown = CancellationToken::new();
    let (st, stop) = (state.clone(), shutdown.clone());
    tokio::spawn(async move {
        loop {
            let sock = tokio::select! {
                () = stop.cancelled() => return,
                r = listener.accept() => match r {
                    Ok((s, _)) => s,
                    Err(_) => continue,
                },
            };
            let (st, stop) = (st.clone(), stop.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    _ = connection(sock, st) => {}
                }
            });
        }
    });
    Ok(FirehoseHandle {
        addr,
        state,
        shutdown,
    })
}

/// One parsed request.
struct Request {
    method: String,
    path: String,
    id: Option<String>,
    body: BytesMut,
    close: bool,
}

/// Reads one request; `None` when the peer closed.
async fn read_request(
    sock: &mut TcpStream,
    buf: &mut BytesMut,
) -> std::io::Result<Option<Request>> {
    loop {
        let parsed = {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let header = |name: &str| {
                        req.headers
                            .iter()
                            .find(|h| h.name.eq_ignore_ascii_case(name))
                            .and_then(|h| std::str::from_utf8(h.value).ok())
                            .map(str::to_string)
                    };
                    let len: usize = header("content-length")
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    Some((
                        n,
                        len,
                        req.method.unwrap_or("").to_string(),
                        req.path.unwrap_or("").to_string(),
                        header("x-request-id"),
                        header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")),
                    ))
                }
                Ok(httparse::Status::Partial) => None,
                Err(e) => return Err(std::io::Error::other(format!("bad request: {e}"))),
            }
        };
        if let Some((head, len, method, path, id, close)) = parsed {
            while buf.len() < head + len {
                if sock.read_buf(buf).await? == 0 {
                    return Ok(None);
                }
            }
            buf.advance(head);
            let body = buf.split_to(len);
            return Ok(Some(Request {
                method,
                path,
                id,
                body,
                close,
            }));
        }
        if sock.read_buf(buf).await? == 0 {
            return Ok(None);
        }
    }
}

async fn respond_json(sock: &mut TcpStream, status: &str, v: &Value) -> std::io::Result<()> {
    let body = v.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body.as_bytes());
    sock.write_all(&out).await
}

/// A record served, then cleared.
fn take<T: Default>(m: &Mutex<T>) -> std::io::Result<T> {
    m.lock()
        .map(|mut v| std::mem::take(&mut *v))
        .map_err(|_| std::io::Error::other("poisoned"))
}

async fn connection(mut sock: TcpStream, st: Arc<State>) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    let mut buf = BytesMut::with_capacity(64 * 1024);
    while let Some(req) = read_request(&mut sock, &mut buf).await? {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/health") => respond_json(&mut sock, "200 OK", &json!("ok")).await?,
            ("GET", "/v1/models") => {
                let v = json!({"object": "list", "data": [{
                    "id": st.cfg.model, "object": "model", "created": 0, "owned_by": "servetop-sim",
                    "root": st.cfg.model, "max_model_len": st.cfg.context_length,
                    "simulated": true, "preset": "firehose"}]});
                respond_json(&mut sock, "200 OK", &v).await?;
            }
            ("POST", "/tokenize") => {
                let text = body
                    .get("prompt")
                    .or_else(|| body.get("content"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let v = json!({"count": tokenizer::count(text), "max_model_len": st.cfg.context_length,
                    "tokens": tokenizer::ids(text)});
                respond_json(&mut sock, "200 OK", &v).await?;
            }
            ("GET", "/firehose/pace") => {
                let late = take(&st.late)?;
                respond_json(&mut sock, "200 OK", &json!(pace_report(&late))).await?;
            }
            ("GET", "/firehose/writes") => {
                respond_json(&mut sock, "200 OK", &json!(take(&st.writes)?)).await?;
            }
            ("POST", "/v1/completions") => {
                completion(&mut sock, &st, &body, req.id, Api::Completions).await?;
            }
            ("POST", "/v1/chat/completions") => {
                completion(&mut sock, &st, &body, req.id, Api::Chat).await?;
            }
            _ => {
                respond_json(
                    &mut sock,
                    "404 Not Found",
                    &json!({"error": "the firehose serves /v1/completions, /v1/chat/completions, /v1/models, /tokenize, /health"}),
                )
                .await?;
            }
        }
        if req.close {
            return Ok(());
        }
    }
    Ok(())
}

/// A paced stream's schedule: a write a step after the last was due, or, where that one was
/// written more than [`STEP_SLACK`] late, a step after it was written (the module's comment).
struct Pacer {
    step: Duration,
    due: tokio::time::Instant,
}

impl Pacer {
    fn new(step: Duration) -> Self {
        Self {
            step,
            due: tokio::time::Instant::now(),
        }
    }

    /// Waits for the next write's time; how late it is against when it was due.
    async fn wait(&mut self) -> Duration {
        let want = self.due + self.step;
        tokio::time::sleep_until(want).await;
        let now = tokio::time::Instant::now();
        let behind = now.saturating_duration_since(want);
        // Behind its step: the next write a step after this one, not at once.
        self.due = if behind > STEP_SLACK { now } else { want };
        behind
    }
}

/// What `GET /firehose/pace` serves: the paced writes since the last call and how late they
/// were against when each was due.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Pace {
    pub writes: u64,
    pub late_p50_ms: Option<f64>,
    pub late_p99_ms: Option<f64>,
    pub late_max_ms: Option<f64>,
}

fn pace_report(late: &Dist) -> Pace {
    let s = late.stats(1e-3);
    Pace {
        writes: late.count(),
        late_p50_ms: s.as_ref().map(|s| s.p50),
        late_p99_ms: s.as_ref().map(|s| s.p99),
        late_max_ms: s.as_ref().map(|s| s.max),
    }
}

/// OpenAI's usage object (its field names).
#[derive(Serialize)]
#[allow(clippy::struct_field_names)]
struct Usage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

/// The two streams the firehose writes: OpenAI completions (`choices[0].text`) and chat
/// completions (`choices[0].delta.content`, for sessions and multi-turn chats).
#[derive(Clone, Copy, PartialEq)]
enum Api {
    Completions,
    Chat,
}

impl Api {
    /// The answer's id prefix and its object names, streamed and whole.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::Completions => ("cmpl", "text_completion", "text_completion"),
            Self::Chat => ("chatcmpl", "chat.completion.chunk", "chat.completion"),
        }
    }

    /// A token event of answer `n` up to its finish reason (the rest is pre-rendered too).
    fn event_head(self, n: u64, model: &str) -> String {
        let (id_prefix, object, _) = self.names();
        let token = match self {
            Self::Completions => "\"text\":\" the\"",
            Self::Chat => "\"delta\":{\"content\":\" the\"}",
        };
        format!(
            "data: {{\"id\":\"{id_prefix}-{n}\",\"object\":\"{object}\",\"created\":0,\"model\":{},\"choices\":[{{\"index\":0,{token},\"logprobs\":null,\"finish_reason\":",
            Value::String(model.to_string())
        )
    }

    /// The prompt's tokens as the firehose's tokenizer counts them: the prompt, or the text
    /// of every message (no chat template: it adds no token here).
    fn prompt_tokens(self, body: &Value) -> u64 {
        match self {
            Self::Completions => {
                tokenizer::count(body.get("prompt").and_then(Value::as_str).unwrap_or(""))
            }
            Self::Chat => body
                .get("messages")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|m| match m.get("content") {
                    Some(Value::String(t)) => tokenizer::count(t),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .map(tokenizer::count)
                        .sum(),
                    _ => 0,
                })
                .sum(),
        }
    }
}

/// A whole (not streamed) answer of `max_tokens` tokens.
fn whole(st: &State, api: Api, n: u64, max_tokens: u64, prompt_tokens: u64) -> Value {
    let (id_prefix, _, object) = api.names();
    let text = " the".repeat(max_tokens as usize);
    let choice = match api {
        Api::Completions => {
            json!({"index": 0, "text": text, "logprobs": null, "finish_reason": "length"})
        }
        Api::Chat => json!({"index": 0, "message": {"role": "assistant", "content": text},
            "logprobs": null, "finish_reason": "length"}),
    };
    json!({"id": format!("{id_prefix}-{n}"), "object": object, "created": 0, "model": st.cfg.model,
        "choices": [choice],
        "usage": Usage { prompt_tokens, completion_tokens: max_tokens, total_tokens: prompt_tokens + max_tokens }})
}

async fn completion(
    sock: &mut TcpStream,
    st: &State,
    body: &Value,
    id: Option<String>,
    api: Api,
) -> std::io::Result<()> {
    let max_tokens = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(16)
        .max(1);
    let prompt_tokens = api.prompt_tokens(body);
    let (id_prefix, object, _) = api.names();
    let opts = body.get("stream_options");
    let flag = |k: &str| opts.and_then(|o| o.get(k)).and_then(Value::as_bool) == Some(true);
    let (include_usage, continuous) = (flag("include_usage"), flag("continuous_usage_stats"));
    let n = st.next_id.fetch_add(1, Ordering::Relaxed);
    if body.get("stream").and_then(Value::as_bool) != Some(true) {
        st.tokens.fetch_add(max_tokens, Ordering::Relaxed);
        let v = whole(st, api, n, max_tokens, prompt_tokens);
        return respond_json(sock, "200 OK", &v).await;
    }
    sock.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .await?;
    let head = api.event_head(n, &st.cfg.model);
    let per = u64::from(st.cfg.events_per_write);
    let mut payload: Vec<u8> = Vec::with_capacity(512 * per as usize);
    let mut chunk: Vec<u8> = Vec::with_capacity(512 * per as usize + 16);
    let mut times = st
        .cfg
        .record_writes
        .then(|| Vec::with_capacity((max_tokens / per + 1) as usize));
    let mut pacer = st.cfg.pace.map(Pacer::new);
    let mut k = 0u64;
    let mut num = itoa::Buffer::new();
    while k < max_tokens {
        payload.clear();
        let events = per.min(max_tokens - k);
        for _ in 0..events {
            k += 1;
            payload.extend_from_slice(head.as_bytes());
            payload.extend_from_slice(if k == max_tokens {
                b"\"length\"}]"
            } else {
                b"null}]"
            });
            if continuous {
                payload.extend_from_slice(b",\"usage\":{\"prompt_tokens\":");
                payload.extend_from_slice(num.format(prompt_tokens).as_bytes());
                payload.extend_from_slice(b",\"completion_tokens\":");
                payload.extend_from_slice(num.format(k).as_bytes());
                payload.extend_from_slice(b",\"total_tokens\":");
                payload.extend_from_slice(num.format(prompt_tokens + k).as_bytes());
                payload.push(b'}');
            }
            payload.extend_from_slice(b"}\n\n");
        }
        let last = k == max_tokens;
        if last {
            if include_usage {
                payload.extend_from_slice(
                    format!(
                        "data: {{\"id\":\"{id_prefix}-{n}\",\"object\":\"{object}\",\"created\":0,\"model\":{},\"choices\":[],\"usage\":{}}}\n\n",
                        Value::String(st.cfg.model.clone()),
                        json!(Usage { prompt_tokens, completion_tokens: max_tokens, total_tokens: prompt_tokens + max_tokens })
                    )
                    .as_bytes(),
                );
            }
            payload.extend_from_slice(b"data: [DONE]\n\n");
        }
        chunk.clear();
        chunk.extend_from_slice(format!("{:x}\r\n", payload.len()).as_bytes());
        chunk.extend_from_slice(&payload);
        chunk.extend_from_slice(b"\r\n");
        if last {
            chunk.extend_from_slice(b"0\r\n\r\n");
        }
        let late = match pacer.as_mut() {
            Some(p) => Some(p.wait().await),
            None => None,
        };
        let before = unix_us();
        sock.write_all(&chunk).await?;
        if let Some(t) = times.as_mut() {
            t.push((before, events as u32, unix_us()));
        }
        if let Some(l) = late
            && let Ok(mut d) = st.late.lock()
        {
            d.record(u64::try_from(l.as_micros()).unwrap_or(u64::MAX));
        }
        st.tokens.fetch_add(events, Ordering::Relaxed);
    }
    if let (Some(t), Some(id)) = (times, id)
        && let Ok(mut w) = st.writes.lock()
    {
        w.insert(id, t);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One HTTP/1.1 exchange with `connection: close`; the response's body.
    async fn exchange(addr: SocketAddr, head: &str, body: &str) -> String {
        let mut sock = TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "{head}\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        sock.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        sock.read_to_end(&mut out).await.unwrap();
        let text = String::from_utf8(out).unwrap();
        text.split_once("\r\n\r\n").unwrap().1.to_string()
    }

    /// A paced stream whose firehose was held for six steps writes its next token late, then
    /// keeps a step between writes instead of writing the missed ones at once; the pace record
    /// says how late it was.
    #[tokio::test(flavor = "current_thread")]
    async fn a_late_paced_stream_keeps_a_step_between_writes() {
        let step = Duration::from_millis(50);
        let fh = start(
            FirehoseConfig {
                model: "m".into(),
                context_length: 4096,
                events_per_write: 1,
                pace: Some(step),
                record_writes: true,
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let addr = fh.addr;
        let reader = tokio::spawn(async move {
            exchange(
                addr,
                "POST /v1/completions HTTP/1.1\r\nx-request-id: t",
                r#"{"prompt":"a","max_tokens":10,"stream":true}"#,
            )
            .await
        });
        tokio::time::sleep(Duration::from_millis(120)).await;
        // The firehose shares this thread: nothing of it runs for 300 ms (six steps).
        std::thread::sleep(Duration::from_millis(300));
        let stream = reader.await.unwrap();
        assert_eq!(stream.matches("data: {").count(), 10, "{stream}");
        let writes: Writes =
            serde_json::from_str(&exchange(addr, "GET /firehose/writes HTTP/1.1", "").await)
                .unwrap();
        let before: Vec<u64> = writes["t"].iter().map(|w| w.0).collect();
        assert_eq!(before.len(), 10);
        let gaps: Vec<u64> = before.windows(2).map(|w| w[1] - w[0]).collect();
        // A step is 50 ms; written at once, the missed ones would be microseconds apart.
        assert!(gaps.iter().all(|&g| g >= 25_000), "gaps µs {gaps:?}");
        assert!(gaps.iter().any(|&g| g >= 300_000), "gaps µs {gaps:?}");
        let pace: Pace =
            serde_json::from_str(&exchange(addr, "GET /firehose/pace HTTP/1.1", "").await).unwrap();
        assert_eq!(pace.writes, 10);
        assert!(pace.late_max_ms.is_some_and(|m| m >= 250.0), "{pace:?}");
        // Served, then cleared.
        let again: Pace =
            serde_json::from_str(&exchange(addr, "GET /firehose/pace HTTP/1.1", "").await).unwrap();
        assert_eq!(again, Pace::default());
    }
}
