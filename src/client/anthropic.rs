//! The body of an Anthropic Messages request (`--backend anthropic`): the same request as a chat
//! completion, in the Messages API's form.
//!
//! - System messages go in the top-level `system`; the others stay in order, as `user` and
//!   `assistant` messages of text.
//! - Images are `image` blocks with a base64 `source` (servetop's are data URLs).
//! - OpenAI-form tools (`--tools`) become `{name, description, input_schema}`, and
//!   `--tool-choice` `auto`/`required`/`none` the Messages `{"type": "auto"|"any"|"none"}`.
//! - A thinking budget is `thinking: {"type": "enabled", "budget_tokens": N}` (vLLM reads it as
//!   its thinking-token budget, llama-server as its own).
//! - `chat_template_kwargs` goes as is: vLLM and llama-server read it on this endpoint too.
//! - No `ignore_eos`: the API has none and neither engine passes it through, so answers end
//!   where the model stops.

use serde_json::{Map, Value, json};

use super::{ClientOptions, RequestSpec};

/// The `anthropic-version` header every request carries: the API's only stable version.
pub(super) const VERSION: &str = "2023-06-01";

/// The request's body in the Messages form.
pub(super) fn body(spec: &RequestSpec, model: &str, opts: &ClientOptions) -> Value {
    let mut system: Vec<&str> = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    match &spec.messages {
        Some(history) => {
            for m in history.iter() {
                if m.role == "system" {
                    system.push(&m.content);
                } else {
                    messages.push(json!({"role": m.role, "content": &*m.content}));
                }
            }
        }
        None if spec.images.is_empty() => {
            messages.push(json!({"role": "user", "content": &*spec.prompt}));
        }
        None => {
            let mut blocks = vec![json!({"type": "text", "text": &*spec.prompt})];
            blocks.extend(spec.images.iter().map(|url| image_block(url)));
            messages.push(json!({"role": "user", "content": blocks}));
        }
    }
    let mut b = json!({
        "model": model,
        "max_tokens": spec.max_tokens,
        "temperature": opts.temperature,
        "stream": true,
        "messages": messages,
    });
    let Some(o) = b.as_object_mut() else {
        return b;
    };
    if !system.is_empty() {
        o.insert("system".into(), json!(system.join("\n\n")));
    }
    for (k, v) in opts.chat_extras.iter() {
        match k.as_str() {
            "tools" => {
                o.insert(k.clone(), tools(v));
            }
            "tool_choice" => {
                if let Some(c) = v.as_str().and_then(tool_choice) {
                    o.insert(k.clone(), c);
                }
            }
            _ => {
                o.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(n) = spec.thinking_budget {
        o.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": n}),
        );
    }
    b
}

/// A data URL (`data:image/png;base64,…`) as a Messages image block; any other URL as a `url`
/// source.
fn image_block(url: &str) -> Value {
    let parsed = url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"));
    match parsed {
        Some((media_type, data)) => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }),
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

/// OpenAI-form tools (`{"type": "function", "function": {name, description, parameters}}`) in
/// the Messages form; a tool already in that form is kept.
fn tools(v: &Value) -> Value {
    let Some(list) = v.as_array() else {
        return v.clone();
    };
    list.iter()
        .map(|t| match t.get("function") {
            Some(f) => {
                let mut m = Map::new();
                m.insert("name".into(), f.get("name").cloned().unwrap_or(Value::Null));
                if let Some(d) = f.get("description") {
                    m.insert("description".into(), d.clone());
                }
                m.insert(
                    "input_schema".into(),
                    f.get("parameters")
                        .cloned()
                        .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                );
                Value::Object(m)
            }
            None => t.clone(),
        })
        .collect()
}

/// `--tool-choice` in the Messages form (a named function is `{"type": "tool", "name": …}`).
fn tool_choice(c: &str) -> Option<Value> {
    Some(match c {
        "auto" => json!({"type": "auto"}),
        "required" => json!({"type": "any"}),
        "none" => json!({"type": "none"}),
        name if !name.is_empty() => json!({"type": "tool", "name": name}),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::client::ChatMessage;

    fn opts(extras: &Value) -> ClientOptions {
        ClientOptions {
            first_token_timeout: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
            tokenizer: None,
            temperature: 0.0,
            chat_extras: Arc::new(extras.as_object().cloned().unwrap_or_default()),
            extra_body: Arc::new(Map::new()),
            natural_stop: false,
            headers: Arc::from([]),
            request_id_prefix: "servetop".into(),
        }
    }

    #[test]
    fn a_history_puts_its_system_message_on_top_and_keeps_the_turns_in_order() {
        let mut spec = RequestSpec::prompt("unused".into(), 10, None, 7);
        let m = |role, content: &str| ChatMessage {
            role,
            content: content.into(),
        };
        spec.messages = Some(Arc::from(vec![
            m("system", "tools and rules"),
            m("user", "task"),
            m("assistant", "call"),
            m("user", "result"),
        ]));
        spec.thinking_budget = Some(64);
        let b = body(&spec, "m", &opts(&json!({})));
        assert_eq!(b["system"], "tools and rules");
        assert_eq!(b["max_tokens"], 7);
        assert_eq!(b["stream"], true);
        assert_eq!(b.get("ignore_eos"), None);
        assert_eq!(
            b["thinking"],
            json!({"type": "enabled", "budget_tokens": 64})
        );
        let roles: Vec<&str> = b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(b["messages"][2]["content"], "result");
    }

    #[test]
    fn tools_images_and_choices_take_the_messages_form() {
        let mut spec = RequestSpec::prompt("look".into(), 10, None, 5);
        spec.images = vec!["data:image/png;base64,AAAA".into()];
        let extras = json!({
            "tools": [{"type": "function", "function": {"name": "grep", "description": "d",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
            "tool_choice": "required",
            "chat_template_kwargs": {"enable_thinking": false},
        });
        let b = body(&spec, "m", &opts(&extras));
        assert_eq!(b["tools"][0]["name"], "grep");
        assert_eq!(
            b["tools"][0]["input_schema"]["properties"]["q"]["type"],
            "string"
        );
        assert_eq!(b["tool_choice"], json!({"type": "any"}));
        assert_eq!(b["chat_template_kwargs"]["enable_thinking"], false);
        let blocks = &b["messages"][0]["content"];
        assert_eq!(blocks[0], json!({"type": "text", "text": "look"}));
        assert_eq!(
            blocks[1]["source"],
            json!({"type": "base64", "media_type": "image/png", "data": "AAAA"})
        );
        assert_eq!(tool_choice("none"), Some(json!({"type": "none"})));
        assert_eq!(
            tool_choice("grep"),
            Some(json!({"type": "tool", "name": "grep"}))
        );
    }
}
