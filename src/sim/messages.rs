//! The simulator's Anthropic Messages endpoint (`/v1/messages`), made as vLLM 0.32 makes its own:
//! the request becomes a chat request ([`chat_body`]), and the chat stream's events become
//! Messages events ([`Converter`]), each write of the chat stream one write of the Messages
//! stream, so the timing is the chat stream's.
//!
//! As vLLM: `message_start` carries the first chunk's usage (the prompt's count, under continuous
//! usage stats), content-block deltas carry none, and `message_delta` carries the closing usage
//! with the prompt split at the cache (`input_tokens` = prompt − `cache_read_input_tokens`).

use axum::body::Bytes;
use serde_json::{Value, json};

/// A Messages request as the chat request vLLM turns it into: the system prompt first, text and
/// image blocks as chat content parts, tools in the OpenAI form, the thinking budget as vLLM's
/// `thinking_token_budget`, and usage in the stream (continuous, as vLLM asks of itself).
pub(super) fn chat_body(body: &Value) -> Result<Value, String> {
    let msgs = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("'messages' must be a list")?;
    let max_tokens = body
        .get("max_tokens")
        .and_then(Value::as_u64)
        .ok_or("'max_tokens' is required")?;
    let mut chat: Vec<Value> = Vec::new();
    match body.get("system") {
        Some(Value::String(s)) => chat.push(json!({"role": "system", "content": s})),
        Some(Value::Array(blocks)) => {
            chat.push(json!({"role": "system", "content": text_of(blocks)}));
        }
        _ => {}
    }
    for m in msgs {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let content = match m.get("content") {
            Some(Value::Array(blocks)) => Value::Array(blocks.iter().filter_map(part).collect()),
            Some(c) => c.clone(),
            None => Value::Null,
        };
        chat.push(json!({"role": role, "content": content}));
    }
    let mut out = json!({
        "model": body.get("model").cloned().unwrap_or(Value::Null),
        "messages": chat,
        "max_tokens": max_tokens,
        "stream": body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
    });
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        out["tools"] = tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.get("name"), "parameters": t.get("input_schema")}}))
            .collect();
    }
    if let Some(c) = body.pointer("/tool_choice/type").and_then(Value::as_str) {
        out["tool_choice"] = json!(match c {
            "any" | "tool" => "required",
            "none" => "none",
            _ => "auto",
        });
    }
    if let Some(n) = body.pointer("/thinking/budget_tokens") {
        out["thinking_token_budget"] = n.clone();
    }
    Ok(out)
}

fn text_of(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect()
}

/// A Messages content block as a chat content part (text, or an image as a data URL).
fn part(block: &Value) -> Option<Value> {
    match block.get("type").and_then(Value::as_str)? {
        "text" => Some(json!({"type": "text", "text": block.get("text")?})),
        "image" => {
            let src = block.get("source")?;
            let url = match src.get("type").and_then(Value::as_str)? {
                "base64" => format!(
                    "data:{};base64,{}",
                    src.get("media_type")?.as_str()?,
                    src.get("data")?.as_str()?
                ),
                _ => src.get("url")?.as_str()?.to_string(),
            };
            Some(json!({"type": "image_url", "image_url": {"url": url}}))
        }
        "tool_result" => Some(json!({"type": "text", "text": match block.get("content")? {
            Value::String(s) => s.clone(),
            Value::Array(b) => text_of(b),
            _ => String::new(),
        }})),
        _ => None,
    }
}

/// The chat stream's `finish_reason` as a Messages `stop_reason`.
fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("tool_calls") => "tool_use",
        _ => "end_turn",
    }
}

/// The Messages usage of a chat usage object.
fn usage(u: Option<&Value>) -> Value {
    let Some(u) = u else {
        return json!({"input_tokens": 0, "output_tokens": 0});
    };
    let prompt = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
    let mut out =
        json!({"output_tokens": u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0)});
    match u
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
    {
        Some(cached) => {
            out["input_tokens"] = json!(prompt.saturating_sub(cached));
            out["cache_read_input_tokens"] = json!(cached);
        }
        None => out["input_tokens"] = json!(prompt),
    }
    out
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Turns a chat stream into a Messages stream, write by write.
#[derive(Default)]
pub(super) struct Converter {
    started: bool,
    /// The open block's type and index.
    open: Option<(&'static str, u32)>,
    next_index: u32,
    finish: Option<String>,
}

impl Converter {
    /// One write of the chat stream (whole `data:` events) as Messages events; a payload that is
    /// not JSON (an injected malformed event) goes through as it is.
    pub(super) fn write(&mut self, bytes: &[u8]) -> Bytes {
        let text = String::from_utf8_lossy(bytes);
        let mut out = String::new();
        for frame in text.split_inclusive("\n\n") {
            let Some(data) = frame.trim_end().strip_prefix("data: ") else {
                out.push_str(frame);
                continue;
            };
            if data == "[DONE]" {
                self.close_block(&mut out);
                out.push_str(&event("message_stop", &json!({"type": "message_stop"})));
                continue;
            }
            match serde_json::from_str::<Value>(data) {
                Ok(v) => self.chunk(&v, &mut out),
                Err(_) => out.push_str(frame),
            }
        }
        Bytes::from(out)
    }

    fn chunk(&mut self, v: &Value, out: &mut String) {
        if let Some(e) = v.get("error") {
            let message = e.get("message").cloned().unwrap_or_else(|| e.clone());
            out.push_str(&event(
                "error",
                &json!({"type": "error", "error": {"type": "internal_error", "message": message}}),
            ));
            return;
        }
        if !self.started {
            self.started = true;
            let message = json!({"id": v.get("id"), "type": "message", "role": "assistant", "content": [],
                "model": v.get("model"), "stop_reason": null, "stop_sequence": null, "usage": usage(v.get("usage"))});
            out.push_str(&event(
                "message_start",
                &json!({"type": "message_start", "message": message}),
            ));
            return;
        }
        let Some(choice) = v.pointer("/choices/0") else {
            // The closing usage chunk.
            self.close_block(out);
            let delta =
                json!({"stop_reason": stop_reason(self.finish.as_deref()), "stop_sequence": null});
            out.push_str(&event(
                "message_delta",
                &json!({"type": "message_delta", "delta": delta, "usage": usage(v.get("usage"))}),
            ));
            return;
        };
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        let delta = &choice["delta"];
        let thinking = delta
            .get("reasoning")
            .or_else(|| delta.get("reasoning_content"))
            .and_then(Value::as_str);
        if let Some(t) = thinking.filter(|t| !t.is_empty()) {
            let i = self.block(
                "thinking",
                &json!({"type": "thinking", "thinking": ""}),
                out,
            );
            out.push_str(&delta_event(
                i,
                &json!({"type": "thinking_delta", "thinking": t}),
            ));
        }
        if let Some(t) = delta
            .get("content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            let i = self.block("text", &json!({"type": "text", "text": ""}), out);
            out.push_str(&delta_event(i, &json!({"type": "text_delta", "text": t})));
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(id), Some(name)) = (call.get("id"), call.pointer("/function/name")) {
                self.close_block(out);
                self.open_block(
                    "tool_use",
                    &json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    out,
                );
            }
            if let (Some((_, i)), Some(args)) = (
                self.open,
                call.pointer("/function/arguments")
                    .and_then(Value::as_str)
                    .filter(|a| !a.is_empty()),
            ) {
                out.push_str(&delta_event(
                    i,
                    &json!({"type": "input_json_delta", "partial_json": args}),
                ));
            }
        }
    }

    /// The open block if it is of `kind`, else a new one (the open one closed first).
    fn block(&mut self, kind: &'static str, start: &Value, out: &mut String) -> u32 {
        match self.open {
            Some((k, i)) if k == kind => i,
            _ => {
                self.close_block(out);
                self.open_block(kind, start, out)
            }
        }
    }

    fn open_block(&mut self, kind: &'static str, start: &Value, out: &mut String) -> u32 {
        let i = self.next_index;
        self.next_index += 1;
        self.open = Some((kind, i));
        out.push_str(&event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": i, "content_block": start}),
        ));
        i
    }

    fn close_block(&mut self, out: &mut String) {
        if let Some((kind, i)) = self.open.take() {
            if kind == "thinking" {
                out.push_str(&delta_event(
                    i,
                    &json!({"type": "signature_delta", "signature": "simulated"}),
                ));
            }
            out.push_str(&event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": i}),
            ));
        }
    }
}

fn delta_event(index: u32, delta: &Value) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

/// A whole (not streamed) chat completion as a Messages response.
pub(super) fn whole(chat: &Value) -> Value {
    let choice = &chat["choices"][0];
    let text = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    json!({"id": chat.get("id"), "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": text}], "model": chat.get("model"),
        "stop_reason": stop_reason(choice.get("finish_reason").and_then(Value::as_str)),
        "stop_sequence": null, "usage": usage(chat.get("usage"))})
}

/// vLLM's Messages error body: `{"type": "error", "error": {"type", "message"}}`.
pub(super) fn error_body(chat_error: &Value) -> Value {
    let message = chat_error
        .get("message")
        .or_else(|| chat_error.pointer("/error/message"))
        .or_else(|| chat_error.get("error"))
        .cloned()
        .unwrap_or_else(|| chat_error.clone());
    let kind = chat_error
        .get("type")
        .cloned()
        .unwrap_or_else(|| json!("BadRequestError"));
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(v: &Value) -> String {
        format!("data: {v}\n\n")
    }

    /// The events of `out`, as (event name, data).
    fn events(out: &Bytes) -> Vec<(String, Value)> {
        let text = String::from_utf8_lossy(out);
        text.split("\n\n")
            .filter(|f| !f.is_empty())
            .map(|f| {
                let (name, d) = f.split_once('\n').unwrap();
                (
                    name.trim_start_matches("event: ").to_string(),
                    serde_json::from_str(d.trim_start_matches("data: ")).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn a_chat_stream_becomes_the_messages_events_vllm_writes() {
        let mut c = Converter::default();
        let role = json!({"id": "sim-1", "model": "m", "choices": [{"delta": {"role": "assistant", "content": ""}}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 0}});
        let e = events(&c.write(data(&role).as_bytes()));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].0, "message_start");
        assert_eq!(
            e[0].1["message"]["usage"],
            json!({"input_tokens": 40, "output_tokens": 0})
        );
        // One write of two chunks: thinking then content is one write of four events and more.
        let think = json!({"choices": [{"delta": {"reasoning": " hm"}}]});
        let text = json!({"choices": [{"delta": {"content": " a"}, "finish_reason": "length"}]});
        let e = events(&c.write(format!("{}{}", data(&think), data(&text)).as_bytes()));
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta"
            ]
        );
        assert_eq!(e[2].1["delta"]["type"], "signature_delta");
        assert_eq!(e[5].1["index"], 1);
        assert_eq!(e[5].1["delta"], json!({"type": "text_delta", "text": " a"}));
        let closing = json!({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 2,
            "prompt_tokens_details": {"cached_tokens": 32}}});
        let e = events(&c.write(format!("{}data: [DONE]\n\n", data(&closing)).as_bytes()));
        let names: Vec<&str> = e.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["content_block_stop", "message_delta", "message_stop"]
        );
        assert_eq!(e[1].1["delta"]["stop_reason"], "max_tokens");
        assert_eq!(
            e[1].1["usage"],
            json!({"input_tokens": 8, "cache_read_input_tokens": 32, "output_tokens": 2})
        );
    }

    #[test]
    fn tool_calls_open_blocks_and_errors_and_garbage_keep_their_meaning() {
        let mut c = Converter {
            started: true,
            ..Converter::default()
        };
        let open = json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_0", "function": {"name": "grep", "arguments": "{\"q"}}]}}]});
        let more = json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "\":1}"}}]}}]});
        let e = events(&c.write(format!("{}{}", data(&open), data(&more)).as_bytes()));
        assert_eq!(e[0].1["content_block"]["name"], "grep");
        assert_eq!(e[1].1["delta"]["partial_json"], "{\"q");
        assert_eq!(e[2].1["delta"]["partial_json"], "\":1}");
        let err = json!({"error": {"message": "boom", "code": 500}});
        let e = events(&c.write(data(&err).as_bytes()));
        assert_eq!(e[0].0, "error");
        assert_eq!(e[0].1["error"]["message"], "boom");
        let garbage = b"data: {\"choices\": [{\"text\": \"broken\n\n";
        assert_eq!(&c.write(garbage)[..], &garbage[..]);
    }

    #[test]
    fn a_request_becomes_the_chat_request_vllm_makes_of_it() {
        let body = json!({"model": "m", "max_tokens": 9, "stream": true, "system": "rules",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QQ=="}}]},
                {"role": "assistant", "content": "ok"}],
            "tools": [{"name": "grep", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"},
            "thinking": {"type": "enabled", "budget_tokens": 5}});
        let c = chat_body(&body).unwrap();
        assert_eq!(
            c["messages"][0],
            json!({"role": "system", "content": "rules"})
        );
        assert_eq!(
            c["messages"][1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,QQ=="
        );
        assert_eq!(c["messages"][2]["content"], "ok");
        assert_eq!(c["tools"][0]["function"]["name"], "grep");
        assert_eq!(c["tool_choice"], "required");
        assert_eq!(c["thinking_token_budget"], 5);
        assert_eq!(c["stream_options"]["continuous_usage_stats"], true);
        assert!(chat_body(&json!({"messages": []})).is_err());
    }
}
