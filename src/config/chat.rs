//! What every chat request carries besides its messages: the tools offered, how the model may
//! use them, and the chat template's switches (`--tools`, `--tool-choice`,
//! `--chat-template-kwargs`).

use serde::{Deserialize, Serialize};

/// Fields added to every chat request: the tools offered and how the model may use them, and
/// the chat template's switches (`{"enable_thinking": false}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatExtras {
    /// OpenAI `tools`: a list of `{"type": "function", "function": {"name", …}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<serde_json::Value>,
    /// OpenAI `tool_choice` ("auto", "required", "none"), sent with the tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<String>,
    /// `chat_template_kwargs` (SGLang and vLLM), e.g. `{"enable_thinking": true}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<serde_json::Value>,
}

impl ChatExtras {
    /// Nothing to add.
    pub fn is_empty(&self) -> bool {
        self.tools.is_none() && self.tool_choice.is_none() && self.chat_template_kwargs.is_none()
    }

    /// The fields as they go into a chat request's body.
    pub fn fields(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        if let Some(t) = &self.tools {
            m.insert("tools".into(), t.clone());
        }
        if let Some(c) = &self.tool_choice {
            m.insert("tool_choice".into(), serde_json::Value::from(c.as_str()));
        }
        if let Some(k) = &self.chat_template_kwargs {
            m.insert("chat_template_kwargs".into(), k.clone());
        }
        m
    }

    /// The tools of `--tools`: a file's JSON list (or `{"tools": [...]}`), or the built-in set.
    pub fn load_tools(arg: &str) -> Result<serde_json::Value, String> {
        let v: serde_json::Value = if arg == "builtin" {
            builtin_tools()
        } else {
            let text = std::fs::read_to_string(arg)
                .map_err(|e| format!("--tools {arg}: cannot read it: {e}"))?;
            serde_json::from_str(&text).map_err(|e| format!("--tools {arg}: not JSON ({e})"))?
        };
        let list = v.get("tools").cloned().unwrap_or(v);
        let Some(items) = list.as_array().filter(|a| !a.is_empty()) else {
            return Err(format!(
                "--tools {arg}: expected a non-empty JSON list of OpenAI tools ([{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}])"
            ));
        };
        for (i, t) in items.iter().enumerate() {
            if t.pointer("/function/name")
                .and_then(serde_json::Value::as_str)
                .is_none()
            {
                return Err(format!(
                    "--tools {arg}: tool {} has no function.name (OpenAI tools schema)",
                    i + 1
                ));
            }
        }
        Ok(list)
    }
}

/// A small tool set for a quick tool-call run (`--tools builtin`).
fn builtin_tools() -> serde_json::Value {
    let tool = |name: &str, description: &str, param: &str, about: &str| {
        serde_json::json!({"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": {param: {"type": "string", "description": about}}, "required": [param]}}})
    };
    serde_json::Value::Array(vec![
        tool(
            "get_weather",
            "Current weather for a city",
            "city",
            "City name, e.g. Oslo",
        ),
        tool(
            "search_web",
            "Search the web and return the top results",
            "query",
            "What to search for",
        ),
        tool(
            "run_python",
            "Run a short Python snippet and return its output",
            "code",
            "The code",
        ),
    ])
}
