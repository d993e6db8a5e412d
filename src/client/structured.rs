//! Structured output (`--response-format`): the constraint a request carries, the fields each
//! engine reads it from, and whether an answer complies.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Backend, Engine};

/// What the answers must be.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum ResponseFormat {
    /// Any JSON object (OpenAI's `json_object`).
    Json,
    /// A JSON document valid against this schema (`--response-format json-schema FILE`).
    JsonSchema { file: String, schema: Value },
    /// Text the whole of which this regular expression matches.
    Regex { pattern: String },
}

impl ResponseFormat {
    /// `json`, `json-schema` or `regex`: what a level's label says.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::JsonSchema { .. } => "json-schema",
            Self::Regex { .. } => "regex",
        }
    }

    /// `--response-format json`, `json-schema FILE` (the schema read from the file) or
    /// `regex PATTERN`.
    pub fn parse(words: &[String]) -> Result<Self, String> {
        let f = match words {
            [k] if k == "json" => Self::Json,
            [k, file] if k == "json-schema" => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| format!("--response-format json-schema {file}: {e}"))?;
                let schema: Value = serde_json::from_str(&text)
                    .map_err(|e| format!("--response-format json-schema {file}: not JSON ({e})"))?;
                Self::JsonSchema {
                    file: file.clone(),
                    schema,
                }
            }
            [k, pattern] if k == "regex" => Self::Regex {
                pattern: pattern.clone(),
            },
            _ => {
                return Err(format!(
                    "--response-format takes json, json-schema FILE or regex PATTERN, not '{}'",
                    words.join(" ")
                ));
            }
        };
        Constraint::new(f.clone())?;
        Ok(f)
    }
}

/// A response format ready to check answers against (its schema or pattern compiled once).
#[derive(Debug)]
pub struct Constraint {
    pub format: ResponseFormat,
    schema: Option<jsonschema::Validator>,
    /// The pattern anchored at both ends: the whole answer must match.
    regex: Option<regex::Regex>,
}

impl Constraint {
    pub fn new(format: ResponseFormat) -> Result<Self, String> {
        let schema = match &format {
            ResponseFormat::JsonSchema { file, schema } => {
                Some(jsonschema::validator_for(schema).map_err(|e| {
                    format!("--response-format json-schema {file}: not a schema servetop can check answers against ({e})")
                })?)
            }
            _ => None,
        };
        let regex = match &format {
            ResponseFormat::Regex { pattern } => {
                Some(regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                    format!(
                        "--response-format regex: '{pattern}' is not a regular expression ({e})"
                    )
                })?)
            }
            _ => None,
        };
        Ok(Self {
            format,
            schema,
            regex,
        })
    }

    /// Whether `answer` is what the format asked for: a JSON object, a document valid against
    /// the schema, or text the pattern matches whole. Whitespace around a JSON document is
    /// allowed (it parses); around a regex answer it is part of the text.
    pub fn accepts(&self, answer: &str) -> bool {
        if let Some(re) = &self.regex {
            return re.is_match(answer);
        }
        let Ok(v) = serde_json::from_str::<Value>(answer) else {
            return false;
        };
        match &self.schema {
            Some(s) => s.is_valid(&v),
            None => v.is_object(),
        }
    }

    /// Puts the constraint in `body` where the engine reads it: SGLang's `/generate` in
    /// `sampling_params` (`json_schema` as a string, `regex`); llama-server in its own
    /// `json_schema` (its `/v1/completions` ignores `response_format`); the OpenAI endpoints of
    /// vLLM and SGLang in `response_format`, a regex in vLLM's `structured_outputs.regex` or
    /// SGLang's `regex`.
    pub fn apply(&self, body: &mut Value, backend: Backend, engine: Engine) {
        if backend == Backend::Sglang {
            let sp = &mut body["sampling_params"];
            match &self.format {
                ResponseFormat::Json => sp["json_schema"] = json!(r#"{"type": "object"}"#),
                ResponseFormat::JsonSchema { schema, .. } => {
                    sp["json_schema"] = json!(schema.to_string());
                }
                ResponseFormat::Regex { pattern } => sp["regex"] = json!(pattern),
            }
            return;
        }
        if engine == Engine::Llamacpp {
            match &self.format {
                ResponseFormat::Json => body["json_schema"] = json!({"type": "object"}),
                ResponseFormat::JsonSchema { schema, .. } => body["json_schema"] = schema.clone(),
                // Refused before the run (llama-server has no regex constraint).
                ResponseFormat::Regex { .. } => {}
            }
            return;
        }
        match &self.format {
            ResponseFormat::Json => body["response_format"] = json!({"type": "json_object"}),
            ResponseFormat::JsonSchema { schema, .. } => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": {"name": "servetop", "schema": schema},
                });
            }
            ResponseFormat::Regex { pattern } if engine == Engine::Sglang => {
                body["regex"] = json!(pattern);
            }
            ResponseFormat::Regex { pattern } => {
                body["structured_outputs"] = json!({"regex": pattern});
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> ResponseFormat {
        ResponseFormat::JsonSchema {
            file: "s.json".into(),
            schema: json!({
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
            }),
        }
    }

    #[test]
    fn answers_are_judged_by_their_format() {
        let json = Constraint::new(ResponseFormat::Json).unwrap();
        assert!(json.accepts(r#" {"a": [1, 2]}  "#));
        assert!(!json.accepts("[1, 2]"), "an array is not an object");
        assert!(!json.accepts(r#"{"a": 1"#), "cut short");
        let s = Constraint::new(schema()).unwrap();
        assert!(s.accepts(r#"{"name": "Ada", "age": 36}"#));
        assert!(
            !s.accepts(r#"{"name": "Ada"}"#),
            "a required field is missing"
        );
        assert!(
            !s.accepts(r#"{"name": "Ada", "age": "36"}"#),
            "a wrong type"
        );
        let re = Constraint::new(ResponseFormat::Regex {
            pattern: "[a-z]+ [0-9]{2}".into(),
        })
        .unwrap();
        assert!(re.accepts("abc 12"));
        assert!(!re.accepts("abc 123"), "the whole answer must match");
        assert!(!re.accepts(" abc 12"));
    }

    #[test]
    fn each_engine_gets_the_constraint_where_it_reads_it() {
        let s = Constraint::new(schema()).unwrap();
        let mut b = json!({"model": "m"});
        s.apply(&mut b, Backend::OpenaiChat, Engine::Vllm);
        assert_eq!(b["response_format"]["type"], "json_schema");
        assert_eq!(
            b["response_format"]["json_schema"]["schema"]["required"][1],
            "age"
        );
        let mut b = json!({"sampling_params": {}});
        s.apply(&mut b, Backend::Sglang, Engine::Sglang);
        let text = b["sampling_params"]["json_schema"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(text).unwrap()["type"],
            "object"
        );
        let re = Constraint::new(ResponseFormat::Regex {
            pattern: "a+".into(),
        })
        .unwrap();
        let mut b = json!({});
        re.apply(&mut b, Backend::Openai, Engine::Vllm);
        assert_eq!(b["structured_outputs"]["regex"], "a+");
        let mut b = json!({});
        re.apply(&mut b, Backend::Openai, Engine::Sglang);
        assert_eq!(b["regex"], "a+");
        let mut b = json!({});
        Constraint::new(ResponseFormat::Json).unwrap().apply(
            &mut b,
            Backend::OpenaiChat,
            Engine::Vllm,
        );
        assert_eq!(b["response_format"], json!({"type": "json_object"}));
        let mut b = json!({});
        s.apply(&mut b, Backend::Openai, Engine::Llamacpp);
        assert_eq!(b["json_schema"]["required"][0], "name");
        assert!(b.get("response_format").is_none());
    }

    #[test]
    fn bad_formats_are_one_line_errors() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        let e = ResponseFormat::parse(&words(&["yaml"])).unwrap_err();
        assert!(e.contains("json, json-schema FILE or regex PATTERN"), "{e}");
        let e = ResponseFormat::parse(&words(&["regex", "a("])).unwrap_err();
        assert!(e.contains("is not a regular expression"), "{e}");
        let e = ResponseFormat::parse(&words(&["json-schema", "/nonexistent.json"])).unwrap_err();
        assert!(
            e.starts_with("--response-format json-schema /nonexistent.json:"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}
