//! Anthropic Messages stream events (`/v1/messages`), as vLLM 0.32 and llama-server write them
//! and as Anthropic documents them: every `data:` payload names its `type`.
//!
//! - `message_start`: the message, with the usage known at the start (the prompt's tokens);
//! - `content_block_start` / `content_block_delta` / `content_block_stop`: the answer in blocks,
//!   a delta being `text_delta`, `thinking_delta`, `input_json_delta` (a tool call's arguments:
//!   its block's index names the call) or `signature_delta` (a thinking block's signature: no
//!   token); a block's start and stop carry no token;
//! - `message_delta`: the `stop_reason` and the usage at the end (output tokens, and the prompt's
//!   on vLLM);
//! - `message_stop`: the end; `ping` and `error` at any time.
//!
//! The usage's prompt is split: `input_tokens` are the tokens not read from the cache, so the
//! whole prompt is `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`, and
//! the cached tokens are `cache_read_input_tokens`.

use std::borrow::Cow;

use serde::Deserialize;

use super::{ChunkData, DeltaKind, Usage, error_message, opt_cow};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(default, borrow, rename = "type", deserialize_with = "opt_cow")]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    index: Option<u32>,
    #[serde(default, borrow)]
    delta: Option<EventDelta<'a>>,
    #[serde(default)]
    message: Option<Message>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct EventDelta<'a> {
    #[serde(default, borrow, rename = "type", deserialize_with = "opt_cow")]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "opt_cow")]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    usage: Option<MessagesUsage>,
}

/// The Messages usage object.
// Its fields are the API's names.
#[allow(clippy::struct_field_names)]
#[derive(Clone, Copy, Debug, Default, Deserialize)]
struct MessagesUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl MessagesUsage {
    /// As OpenAI's: the whole prompt (where `input_tokens` is given), its cached part, output.
    fn openai(self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens.map(|i| {
                i + self.cache_read_input_tokens.unwrap_or(0)
                    + self.cache_creation_input_tokens.unwrap_or(0)
            }),
            completion_tokens: self.output_tokens,
            cached_tokens: self.cache_read_input_tokens,
            reasoning_tokens: None,
        }
    }
}

/// One Messages `data:` payload. An unknown event type is passed over (the API says new ones
/// may come).
pub(super) fn parse(data: &str) -> Result<ChunkData<'_>, String> {
    let e: Event<'_> = serde_json::from_str(data).map_err(|err| {
        let head: String = data.chars().take(120).collect();
        format!("unparseable stream payload ({err}): {head}")
    })?;
    let mut out = ChunkData::default();
    match e.kind.as_deref() {
        Some("message_start") => {
            out.usage = e.message.and_then(|m| m.usage).map(MessagesUsage::openai);
        }
        Some("content_block_delta") => {
            let Some(d) = e.delta else {
                return Ok(out);
            };
            let (kind, text) = match d.kind.as_deref() {
                Some("text_delta") => (DeltaKind::Content, d.text),
                Some("thinking_delta") => (DeltaKind::Reasoning, d.thinking),
                Some("input_json_delta") => (DeltaKind::ToolCall, d.partial_json),
                // A signature, or a delta of a kind not known here: no token.
                _ => return Ok(out),
            };
            out.has_choice = true;
            out.kind = kind;
            out.text = text.unwrap_or_default();
            match kind {
                DeltaKind::Content => out.content.clone_from(&out.text),
                // Blocks are numbered in order, so a tool call's block index names it.
                DeltaKind::ToolCall => out.tool_indices.push(e.index.unwrap_or(0)),
                _ => {}
            }
        }
        Some("message_delta") => {
            let stop = e.delta.and_then(|d| d.stop_reason);
            out.finished = stop.is_some();
            out.length_stop = stop.as_deref() == Some("max_tokens");
            out.usage = e.usage.map(MessagesUsage::openai);
        }
        Some("message_stop") => out.end = true,
        Some("error") => {
            out.error = Some(
                e.error
                    .as_ref()
                    .map_or_else(|| "error event in stream".into(), error_message),
            );
        }
        _ => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{Dialect, parse};
    use super::*;

    fn usage(p: Option<u64>, c: Option<u64>, cached: Option<u64>) -> Usage {
        Usage {
            prompt_tokens: p,
            completion_tokens: c,
            cached_tokens: cached,
            reasoning_tokens: None,
        }
    }

    #[test]
    fn llama_servers_usage_splits_the_prompt_at_its_cache() {
        // llama-server: the prompt's uncached and cached tokens at the start, the output at the
        // end (server-task.cpp, to_json_anthropic).
        let start = r#"{"type":"message_start","message":{"id":"chatcmpl-1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"cache_read_input_tokens":96,"input_tokens":31,"output_tokens":0}}}"#;
        let c = parse(Dialect::Messages, start).unwrap();
        assert_eq!(c.usage, Some(usage(Some(127), Some(0), Some(96))));
        assert!(!c.has_choice && !c.finished && !c.end);
        let end = r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":12}}"#;
        let c = parse(Dialect::Messages, end).unwrap();
        assert_eq!(c.usage, Some(usage(None, Some(12), None)));
        assert!(c.finished && c.length_stop && !c.end);
        let stop = parse(Dialect::Messages, r#"{"type":"message_stop"}"#).unwrap();
        assert!(stop.end && !stop.has_choice);
    }

    #[test]
    fn vllms_closing_usage_counts_the_whole_prompt() {
        // vLLM 0.32, recorded: a prompt of 833 tokens sent twice; the first wrote 768 into the
        // cache (`cache_creation_input_tokens`), the second read them.
        for (end, cached) in [
            (
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"input_tokens":65,"output_tokens":3,"cache_creation_input_tokens":768,"cache_read_input_tokens":0}}"#,
                0,
            ),
            (
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":65,"output_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":768}}"#,
                768,
            ),
        ] {
            let c = parse(Dialect::Messages, end).unwrap();
            assert_eq!(c.usage, Some(usage(Some(833), Some(3), Some(cached))));
            assert!(c.finished);
            assert_eq!(c.length_stop, cached == 0);
        }
    }

    #[test]
    fn each_delta_kind_is_its_own_kind_and_a_signature_is_no_token() {
        let text = r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" hi"}}"#;
        let c = parse(Dialect::Messages, text).unwrap();
        assert!(c.has_choice);
        assert_eq!(
            (c.kind, &*c.text, &*c.content),
            (DeltaKind::Content, " hi", " hi")
        );
        let think = r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#;
        let c = parse(Dialect::Messages, think).unwrap();
        assert_eq!(
            (c.kind, &*c.text, &*c.content),
            (DeltaKind::Reasoning, "hmm", "")
        );
        let args = r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"q\":"}}"#;
        let c = parse(Dialect::Messages, args).unwrap();
        assert_eq!((c.kind, &*c.text), (DeltaKind::ToolCall, "{\"q\":"));
        assert_eq!(c.tool_indices, [2]);
        let sig = r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#;
        let c = parse(Dialect::Messages, sig).unwrap();
        assert!(!c.has_choice && c.text.is_empty());
        for quiet in [
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"some_future_event","x":1}"#,
        ] {
            let c = parse(Dialect::Messages, quiet).unwrap();
            assert_eq!(c, ChunkData::default(), "{quiet}");
        }
    }

    #[test]
    fn an_error_event_says_its_message_and_bad_json_is_an_error() {
        let e = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            parse(Dialect::Messages, e).unwrap().error.as_deref(),
            Some("Overloaded")
        );
        assert!(parse(Dialect::Messages, "{\"type\": ").is_err());
    }
}
