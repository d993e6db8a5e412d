//! Parsing one SSE `data:` payload of each engine dialect into what the timing loop needs.
//!
//! Pure functions over borrowed text: no allocation for the common case of a plain token chunk,
//! so the worker's hot loop stays cheap (the per-chunk text is only looked at for its length,
//! or counted with a tokenizer when one is configured).

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
#[derive(Debug, Default, PartialEq)]
pub struct ChunkData<'a> {
    /// New generated text in this chunk (content and reasoning together).
    pub text: Cow<'a, str>,
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
pub fn parse<'a>(dialect: Dialect, data: &'a str) -> Result<ChunkData<'a>, String> {
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
            if let Some(m) = w.meta_info {
                out.cumulative_completion = m.completion_tokens;
                out.finished = m.finish_reason.as_ref().is_some_and(is_finish);
                out.length_stop = m.finish_reason.as_ref().is_some_and(is_length);
                out.usage = Some(Usage {
                    prompt_tokens: m.prompt_tokens,
                    completion_tokens: m.completion_tokens,
                    cached_tokens: m.cached_tokens,
                });
            }
        }
        Dialect::Completions | Dialect::Chat => {
            if let Some(c) = w.choices.into_iter().next() {
                out.has_choice = true;
                out.finished = c.finish_reason.as_ref().is_some_and(is_finish);
                out.length_stop = c.finish_reason.as_ref().is_some_and(is_length);
                out.text = match (c.text, c.delta) {
                    (Some(t), _) => t,
                    (None, Some(d)) => join3(d.reasoning_content, d.reasoning, d.content),
                    (None, None) => Cow::Borrowed(""),
                };
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
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn parsing_never_panics(data in ".{0,300}") {
            for d in [Dialect::Completions, Dialect::Chat, Dialect::SglangNative] {
                let _ = parse(d, &data);
            }
            let _ = http_error_message(&data);
            let _ = is_context_error(&data);
        }

        #[test]
        fn json_shaped_chunks_never_panic(text in ".{0,40}", n in proptest::option::of(0u64..10_000), fin in proptest::bool::ANY) {
            let v = serde_json::json!({"choices": [{"text": text, "delta": {"content": text}, "finish_reason": if fin { serde_json::json!("length") } else { serde_json::Value::Null }}], "usage": n.map(|n| serde_json::json!({"completion_tokens": n}))});
            let s = v.to_string();
            let c = parse(Dialect::Completions, &s).unwrap();
            proptest::prop_assert_eq!(c.text.as_ref(), text.as_str());
            proptest::prop_assert_eq!(c.finished, fin);
            proptest::prop_assert_eq!(c.cumulative_completion, n);
        }
    }

    #[test]
    fn completions_token_chunk_borrows_text() {
        let d = parse(
            Dialect::Completions,
            r#"{"id":"x","object":"text_completion","choices":[{"index":0,"text":" hello","finish_reason":null}]}"#,
        )
        .unwrap();
        assert_eq!(d.text, " hello");
        assert!(matches!(d.text, Cow::Borrowed(_)));
        assert!(d.has_choice && !d.finished);
        assert_eq!(d.cumulative_completion, None);
    }

    #[test]
    fn a_length_finish_is_told_apart_from_other_finishes() {
        let chunk = |reason: &str| {
            format!(
                r#"{{"choices":[{{"index":0,"text":"ns","finish_reason":{reason}}}],"usage":{{"prompt_tokens":4000,"total_tokens":4096,"completion_tokens":96}}}}"#
            )
        };
        let length = chunk(r#""length""#);
        let d = parse(Dialect::Completions, &length).unwrap();
        assert!(d.finished && d.length_stop);
        let stop = chunk(r#""stop""#);
        let d = parse(Dialect::Completions, &stop).unwrap();
        assert!(d.finished && !d.length_stop);
        let null = chunk("null");
        let d = parse(Dialect::Completions, &null).unwrap();
        assert!(!d.finished && !d.length_stop);
        let sglang = r#"{"text":"abc","meta_info":{"completion_tokens":3,"finish_reason":{"type":"length","length":3}}}"#;
        let d = parse(Dialect::SglangNative, sglang).unwrap();
        assert!(d.finished && d.length_stop);
    }

    #[test]
    fn continuous_usage_gives_cumulative_count() {
        let d = parse(
            Dialect::Completions,
            r#"{"choices":[{"index":0,"text":" a b c d","finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#,
        )
        .unwrap();
        assert_eq!(d.cumulative_completion, Some(5));
        assert_eq!(d.usage.unwrap().prompt_tokens, Some(10));
    }

    #[test]
    fn cached_tokens_are_read_where_each_engine_puts_them() {
        // OpenAI / vLLM / llama-server: usage.prompt_tokens_details.cached_tokens.
        let d = parse(
            Dialect::Chat,
            r#"{"choices":[],"usage":{"prompt_tokens":900,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":768}}}"#,
        )
        .unwrap();
        assert_eq!(d.usage.unwrap().cached_tokens, Some(768));
        // A null details object, or none: unknown, not zero.
        for body in [
            r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":9}}"#,
        ] {
            assert_eq!(
                parse(Dialect::Chat, body)
                    .unwrap()
                    .usage
                    .unwrap()
                    .cached_tokens,
                None
            );
        }
        // SGLang native: meta_info.cached_tokens.
        let d = parse(
            Dialect::SglangNative,
            r#"{"text":"x","meta_info":{"prompt_tokens":7,"completion_tokens":1,"cached_tokens":4,"finish_reason":null}}"#,
        )
        .unwrap();
        assert_eq!(d.usage.unwrap().cached_tokens, Some(4));
    }

    #[test]
    fn usage_only_final_chunk_has_no_choice_and_no_per_chunk_count() {
        let d = parse(
            Dialect::Completions,
            r#"{"id":"x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":500,"total_tokens":510}}"#,
        )
        .unwrap();
        assert!(!d.has_choice);
        assert_eq!(d.cumulative_completion, None);
        assert_eq!(d.usage.unwrap().completion_tokens, Some(500));
    }

    #[test]
    fn chat_role_chunk_is_empty_and_reasoning_counts_as_text() {
        let role = parse(
            Dialect::Chat,
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}"#,
        )
        .unwrap();
        assert_eq!(role.text, "");
        let r = parse(
            Dialect::Chat,
            r#"{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think"},"finish_reason":null}]}"#,
        )
        .unwrap();
        assert_eq!(r.text, "Let me think");
        let both = parse(
            Dialect::Chat,
            r#"{"choices":[{"delta":{"reasoning":"a","content":"b"}}]}"#,
        )
        .unwrap();
        assert_eq!(both.text, "ab");
    }

    #[test]
    fn escaped_text_is_owned_and_decoded() {
        let d = parse(
            Dialect::Completions,
            r#"{"choices":[{"text":"a\nb\u00e9"}]}"#,
        )
        .unwrap();
        assert_eq!(d.text, "a\nbé");
    }

    #[test]
    fn finish_chunk_with_empty_text() {
        let d = parse(
            Dialect::Completions,
            r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"timings":{"prompt_n":5}}"#,
        )
        .unwrap();
        assert!(d.finished);
        assert_eq!(d.text, "");
    }

    #[test]
    fn tgi_empty_finish_reason_is_not_a_finish() {
        let d = parse(
            Dialect::Completions,
            r#"{"object":"text_completion","id":"","choices":[{"finish_reason":"","index":0,"logprobs":null,"text":" upon"}]}"#,
        )
        .unwrap();
        assert!(!d.finished);
        assert_eq!(d.text, " upon");
    }

    #[test]
    fn sglang_native_meta_info() {
        let d = parse(
            Dialect::SglangNative,
            r#"{"text":"Hello world","meta_info":{"id":"a","prompt_tokens":7,"completion_tokens":3,"finish_reason":null}}"#,
        )
        .unwrap();
        assert_eq!(d.cumulative_completion, Some(3));
        assert!(!d.finished);
        let end = parse(
            Dialect::SglangNative,
            r#"{"text":"Hello world!","meta_info":{"prompt_tokens":7,"completion_tokens":4,"finish_reason":{"type":"length","length":4}}}"#,
        )
        .unwrap();
        assert!(end.finished);
    }

    #[test]
    fn errors_in_stream() {
        let a = parse(
            Dialect::Completions,
            r#"{"error":{"message":"boom","type":"server_error","code":500}}"#,
        )
        .unwrap();
        assert_eq!(a.error.as_deref(), Some("boom"));
        let b = parse(
            Dialect::Completions,
            r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#,
        )
        .unwrap();
        assert_eq!(b.error.as_deref(), Some("bad"));
        assert!(parse(Dialect::Completions, "{not json").is_err());
    }

    #[test]
    fn http_error_bodies() {
        assert_eq!(
            http_error_message(r#"{"error":{"message":"m1","type":"t"}}"#),
            "m1"
        );
        assert_eq!(
            http_error_message(r#"{"object":"error","message":"m2"}"#),
            "m2"
        );
        assert_eq!(http_error_message(r#"{"detail":"m3"}"#), "m3");
        assert_eq!(
            http_error_message(r#"{"error":"m4","error_type":"validation"}"#),
            "m4"
        );
        assert_eq!(http_error_message("plain text"), "plain text");
    }

    #[test]
    fn context_errors_of_each_engine() {
        for m in [
            "This model's maximum context length is 32768 tokens. However, you requested 60256 tokens (60000 in the messages, 256 in the completion).",
            "The input (60001 tokens) is longer than the model's context length (32768 tokens).",
            "the request exceeds the available context size, try increasing it",
            // vLLM 0.32's wording, read from its 400 body (`http_error_message` of the JSON).
            "This model's maximum context length is 4096 tokens. However, your prompt contains at least 4097 input tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=4097)",
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 60000 `inputs` tokens and 256 `max_new_tokens`",
        ] {
            assert!(is_context_error(m), "{m}");
        }
        assert!(!is_context_error("Internal Server Error"));
        assert!(!is_context_error("rate limited, retry later"));
    }
}
