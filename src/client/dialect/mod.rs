//! Parsing one SSE `data:` payload of each engine dialect into what the timing loop needs.
//!
//! Pure functions over borrowed text: no allocation for the common case of a plain token chunk,
//! so the worker's hot loop stays cheap (the per-chunk text is only looked at for its length,
//! or counted with a tokenizer when one is configured).

mod fast;
mod messages;
pub use fast::RepeatedBytes;

use std::borrow::Cow;

use serde::Deserialize;

/// The wire format of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI `/v1/completions`: `choices[0].text`.
    Completions,
    /// OpenAI `/v1/chat/completions`: `choices[0].delta.content` (+ reasoning deltas).
    Chat,
    /// SGLang native `/generate`: `text` plus cumulative `meta_info`.
    SglangNative,
    /// Anthropic Messages `/v1/messages`: typed events (`message_start`, content-block deltas,
    /// `message_delta`, `message_stop`), usage at the start and the end.
    Messages,
}

/// Token usage as reported by the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// `prompt_tokens_details.cached_tokens` (OpenAI, vLLM with `--enable-prompt-tokens-details`,
    /// llama-server), or SGLang's `meta_info.cached_tokens`: prompt tokens served from the
    /// server's prefix cache.
    #[serde(default, rename = "prompt_tokens_details", deserialize_with = "cached")]
    pub cached_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens` (vLLM with a reasoning parser; OpenAI):
    /// how many of the completion tokens were thinking.
    #[serde(
        default,
        rename = "completion_tokens_details",
        deserialize_with = "reasoning"
    )]
    pub reasoning_tokens: Option<u64>,
}

/// `{"reasoning_tokens": N}` (or null, or without it) → `Some(N)`.
fn reasoning<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        reasoning_tokens: Option<u64>,
    }
    Ok(Option::<Details>::deserialize(d)?.and_then(|x| x.reasoning_tokens))
}

/// What a chat event's delta carried (docs/metrics.md "Reasoning and tool calls").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeltaKind {
    /// Answer text (also an event with answer and reasoning text together), or any event of
    /// a dialect without reasoning fields.
    #[default]
    Content,
    /// A `reasoning_content` / `reasoning` field (even empty) and no answer text.
    Reasoning,
    /// A `tool_calls` delta.
    ToolCall,
    /// A delta with no text at all that still counts tokens (a reasoning parser holding back
    /// `</think>`): its tokens belong with the kind before it.
    Silent,
}

/// `{"cached_tokens": N}` (or null, or without it) → `Some(N)`.
fn cached<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        cached_tokens: Option<u64>,
    }
    Ok(Option::<Details>::deserialize(d)?.and_then(|x| x.cached_tokens))
}

/// What one SSE payload says.
// Independent facts of one payload (a choice, a finish, a length finish, the last event).
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Default, PartialEq)]
pub struct ChunkData<'a> {
    /// New generated text in this chunk (content, reasoning and tool-call arguments together:
    /// what is counted as output).
    pub text: Cow<'a, str>,
    /// Of that, the answer alone (`delta.content`, or all of `text` without a chat delta): what
    /// a chat client keeps in its history.
    pub content: Cow<'a, str>,
    /// What the delta carried.
    pub kind: DeltaKind,
    /// The `tool_calls[].index` values this delta names (a new one opens a call).
    pub tool_indices: Vec<u32>,
    /// The chunk had at least one choice (a usage-only chunk has none).
    pub has_choice: bool,
    /// A finish reason was given.
    pub finished: bool,
    /// The finish reason was `length`: the token limit, or the context filled up.
    pub length_stop: bool,
    /// Usage attached to this chunk.
    pub usage: Option<Usage>,
    /// Cumulative completion tokens reported on a content chunk (exact per-chunk counting).
    pub cumulative_completion: Option<u64>,
    /// An error object sent inside the stream.
    pub error: Option<String>,
    /// The stream's last event (Messages' `message_stop`, as `[DONE]` elsewhere).
    pub end: bool,
}

/// `Option<Cow<str>>` that borrows from the input when the JSON string has no escapes (serde's
/// plain `Option<Cow>` always allocates).
fn opt_cow<'de: 'a, 'a, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    Option::<Borrowed<'a>>::deserialize(d).map(|o| o.map(|b| b.0))
}

#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(default, borrow)]
    choices: Vec<WireChoice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    message: Option<String>,
    // SGLang native.
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    meta_info: Option<MetaInfo>,
}

#[derive(Deserialize)]
struct WireChoice<'a> {
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    finish_reason: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct MetaInfo {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    finish_reason: Option<serde_json::Value>,
}

/// Parses one `data:` payload (not `[DONE]`). `Err` carries a short description of bad JSON.
pub fn parse(dialect: Dialect, data: &str) -> Result<ChunkData<'_>, String> {
    parse_in_stream(dialect, data, &mut RepeatedBytes::default())
}

/// [`parse`] for the next event of a stream: `repeat` keeps what its events repeat, so that
/// the next one skips it ([`RepeatedBytes`]).
pub fn parse_in_stream<'a>(
    dialect: Dialect,
    data: &'a str,
    repeat: &mut RepeatedBytes,
) -> Result<ChunkData<'a>, String> {
    if let Some(chat) = fast::openai(dialect)
        && let Some(c) = fast::completions(data, chat, repeat)
    {
        return Ok(c);
    }
    if dialect == Dialect::Messages {
        return messages::parse(data);
    }
    parse_general(dialect, data)
}

/// One event of a stream, from its `data` bytes as they came.
#[derive(Debug, PartialEq)]
pub enum Raw<'a> {
    /// Nothing but white space.
    Empty,
    /// `[DONE]`.
    Done,
    Chunk(ChunkData<'a>),
}

/// [`parse_in_stream`] from the event's bytes as they came: what the client reads. An event
/// with the last one's shape ([`RepeatedBytes`]) is read without checking all of it as UTF-8;
/// any other is checked, trimmed and parsed. `Err` says what was wrong, as [`parse`] does.
pub fn parse_raw_in_stream<'a>(
    dialect: Dialect,
    raw: &'a [u8],
    repeat: &mut RepeatedBytes,
) -> Result<Raw<'a>, String> {
    if fast::openai(dialect).is_some()
        && let Some(c) = repeat.same_shape(raw)
    {
        return Ok(Raw::Chunk(c));
    }
    let data = std::str::from_utf8(raw)
        .map_err(|_| "the stream is not valid UTF-8".to_string())?
        .trim();
    match data {
        "" => Ok(Raw::Empty),
        "[DONE]" => Ok(Raw::Done),
        _ => parse_in_stream(dialect, data, repeat).map(Raw::Chunk),
    }
}

/// The next event of an SSE stream read from its framed bytes, where it has the shape of the
/// stream's last event (`RepeatedBytes::framed`): its parse and the bytes it took, or `None`
/// (the SSE decoder and [`parse_raw_in_stream`] then read it). `b` starts at an event's start.
///
/// Inlined, with `RepeatedBytes::framed` and `shape_at`, into the stream's fold: as calls, the
/// parse (a `ChunkData`, about 200 bytes) was copied on its way back up (measured: `memmove`
/// was 3.3 % of the client's CPU at C=1 against the firehose; inlined, 3.8 % less CPU per token,
/// lower in each of five alternating rounds).
#[inline]
pub fn framed_in_stream<'a>(
    dialect: Dialect,
    b: &'a [u8],
    repeat: &RepeatedBytes,
) -> Option<(ChunkData<'a>, usize)> {
    fast::openai(dialect)?;
    repeat.framed(b)
}

/// [`parse`] through serde alone: every payload the fast path leaves goes here (public for the
/// parse benchmark, which compares the two).
#[doc(hidden)]
pub fn parse_general<'a>(dialect: Dialect, data: &'a str) -> Result<ChunkData<'a>, String> {
    let w: Wire<'a> = serde_json::from_str(data).map_err(|e| {
        let head: String = data.chars().take(120).collect();
        format!("unparseable stream payload ({e}): {head}")
    })?;
    if let Some(e) = w.error {
        return Ok(ChunkData {
            error: Some(error_message(&e)),
            ..ChunkData::default()
        });
    }
    if w.object.as_deref() == Some("error") {
        return Ok(ChunkData {
            error: Some(w.message.unwrap_or_else(|| "error object in stream".into())),
            ..ChunkData::default()
        });
    }
    let mut out = ChunkData {
        usage: w.usage,
        ..ChunkData::default()
    };
    match dialect {
        Dialect::SglangNative => {
            out.has_choice = true;
            out.text = w.text.unwrap_or_default();
            out.content.clone_from(&out.text);
            if let Some(m) = w.meta_info {
                out.cumulative_completion = m.completion_tokens;
                out.finished = m.finish_reason.as_ref().is_some_and(is_finish);
                out.length_stop = m.finish_reason.as_ref().is_some_and(is_length);
                out.usage = Some(Usage {
                    prompt_tokens: m.prompt_tokens,
                    completion_tokens: m.completion_tokens,
                    cached_tokens: m.cached_tokens,
                    reasoning_tokens: None,
                });
            }
        }
        // Not reached: [`parse_in_stream`] sends these to [`messages::parse`].
        Dialect::Messages => return messages::parse(data),
        Dialect::Completions | Dialect::Chat => {
            if let Some(c) = w.choices.into_iter().next() {
                out.has_choice = true;
                out.finished = c.finish_reason.as_ref().is_some_and(is_finish);
                out.length_stop = c.finish_reason.as_ref().is_some_and(is_length);
                match (c.text, c.delta) {
                    (Some(t), _) => {
                        out.content.clone_from(&t);
                        out.text = t;
                    }
                    (None, Some(d)) => chat_delta(&mut out, d),
                    (None, None) => {}
                }
                // A content chunk that carries usage is vLLM/SGLang `continuous_usage_stats`.
                out.cumulative_completion = out.usage.and_then(|u| u.completion_tokens);
            }
        }
    }
    Ok(out)
}

/// Whether a `finish_reason` value says the stream is over: `null` and TGI's `""` (sent on every
/// token of its OpenAI completions stream) do not.
fn is_finish(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// Whether a `finish_reason` is `length` (OpenAI, vLLM, llama.cpp) or SGLang's
/// `{"type": "length", ...}`.
fn is_length(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => s == "length",
        serde_json::Value::Object(o) => o.get("type").and_then(|t| t.as_str()) == Some("length"),
        _ => false,
    }
}

/// A chat delta into `out`: its text, the answer part, its kind and tool-call indices.
fn chat_delta<'a>(out: &mut ChunkData<'a>, d: Delta<'a>) {
    let nonempty = |c: &Option<Cow<'a, str>>| c.as_deref().is_some_and(|t| !t.is_empty());
    // A reasoning field, even empty, is a thinking token: vLLM streams one whose text its
    // detokenizer still holds as `"reasoning": ""`.
    let thinking = d.reasoning_content.is_some() || d.reasoning.is_some();
    let answer = nonempty(&d.content);
    let mut tool_text: Option<Cow<'a, str>> = None;
    if let Some(calls) = d.tool_calls.filter(|c| !c.is_empty()) {
        let mut text = String::new();
        for (i, call) in calls.into_iter().enumerate() {
            out.tool_indices
                .push(call.index.unwrap_or(u32::try_from(i).unwrap_or(u32::MAX)));
            if let Some(f) = call.function {
                text.push_str(f.name.as_deref().unwrap_or_default());
                text.push_str(f.arguments.as_deref().unwrap_or_default());
            }
        }
        tool_text = Some(Cow::Owned(text));
    }
    out.kind = if out.tool_indices.is_empty() {
        delta_kind(answer, thinking, d.content.is_some())
    } else {
        DeltaKind::ToolCall
    };
    if let Some(c) = &d.content {
        out.content.clone_from(c);
    }
    out.text = join3(
        join3(d.reasoning_content, d.reasoning, None).into(),
        d.content,
        tool_text,
    );
}

/// What a chat delta without tool calls carried: `answer` (non-empty `content`), `thinking` (a
/// reasoning field, even empty) and `content` (a `content` field, even empty).
fn delta_kind(answer: bool, thinking: bool, content: bool) -> DeltaKind {
    if answer {
        DeltaKind::Content
    } else if thinking {
        DeltaKind::Reasoning
    } else if content {
        // An answer token whose text is still held (`"content": ""`).
        DeltaKind::Content
    } else {
        DeltaKind::Silent
    }
}

fn join3<'a>(
    a: Option<Cow<'a, str>>,
    b: Option<Cow<'a, str>>,
    c: Option<Cow<'a, str>>,
) -> Cow<'a, str> {
    let mut parts = [a, b, c].into_iter().flatten().filter(|s| !s.is_empty());
    match (parts.next(), parts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(one), None) => one,
        (Some(first), Some(second)) => {
            let mut s = first.into_owned();
            s.push_str(&second);
            for p in parts {
                s.push_str(&p);
            }
            Cow::Owned(s)
        }
    }
}

/// The human message of an error JSON value (`{"message":..}`, a string, or the whole value).
pub fn error_message(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(o) => o
            .get("message")
            .or_else(|| o.get("error"))
            .or_else(|| o.get("detail"))
            .map_or_else(|| v.to_string(), error_message),
        _ => v.to_string(),
    }
}

/// The message of an HTTP error body: OpenAI (`{"error":{"message"}}`), vLLM/SGLang
/// (`{"object":"error","message"}`), FastAPI (`{"detail"}`), TGI (`{"error":"..."}`), or text.
pub fn http_error_message(body: &str) -> String {
    let trimmed = body.trim();
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(v) => error_message(&v),
        Err(_) => trimmed.chars().take(300).collect(),
    }
}

/// Whether an error message says the prompt does not fit the server's context.
pub fn is_context_error(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    const NEEDLES: [&str; 11] = [
        "maximum context length",
        "context length",
        "context_length",
        "context size",
        "context window",
        "exceed_context_size",
        "exceeds the available context",
        "prompt is too long",
        "input is too long",
        "too many tokens",
        "input is too large",
    ];
    NEEDLES.iter().any(|n| m.contains(n))
        || (m.contains("must be <=") && m.contains("tokens"))
        || (m.contains("longer than") && m.contains("token"))
}

#[cfg(test)]
mod tests;
