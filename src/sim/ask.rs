//! What a simulated request asks for: its prompt's tokens (as the engine counts them, and their
//! ids for the prefix cache), its output limit, streaming and usage options, tools, thinking
//! budget, adapter, constraint and images — and the engine's refusals (an unknown adapter, a
//! prompt beyond the context) — and how a chat answer is made up from it.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::Value;

use super::http::{SimState, error};
use super::stream::{AnswerPlan, Kind};
use super::tokenizer;
use crate::workload::content::ContentKind;

/// What a request asks for (its streaming options and `ignore_eos` are flags of the request).
#[allow(clippy::struct_excessive_bools)]
pub(super) struct Ask {
    pub(super) input_tokens: u64,
    /// The prompt's token ids as the engine sees them (empty when the prefix cache is off).
    pub(super) prompt_ids: Vec<u32>,
    pub(super) max_tokens: u64,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    /// The names of the tools a chat request offers (none when `tool_choice` is "none").
    pub(super) tools: Vec<String>,
    /// vLLM's `thinking_token_budget`: thinking stops after this many tokens.
    pub(super) thinking_budget: Option<u64>,
    /// The LoRA adapter it names.
    pub(super) lora: Option<super::SimLora>,
    /// Its structured-output constraint.
    pub(super) structured: Option<super::structured::SimConstraint>,
    /// The sizes of the images in its messages.
    pub(super) images: Vec<(u32, u32)>,
    /// It asks to run to `max_tokens` past any end of sequence (`ignore_eos`).
    pub(super) ignore_eos: bool,
    /// The kind its prompt's marker names (`Task (code):`), if it has one.
    pub(super) content: Option<crate::workload::content::ContentKind>,
}

/// The adapter a request names: its `model` (vLLM), or `lora_path` (SGLang, on any endpoint);
/// an unknown name is vLLM's 404.
fn adapter_of<'a>(
    s: &'a SimState,
    kind: Kind,
    body: &Value,
) -> Result<Option<&'a super::SimLora>, Box<Response>> {
    let unknown = |m: &str| {
        Box::new(error(
            StatusCode::NOT_FOUND,
            &format!("The model `{m}` does not exist."),
        ))
    };
    let find = |m: &str| s.config.lora.iter().find(|a| a.name == m);
    if let Some(p) = body.get("lora_path").and_then(Value::as_str) {
        return find(p).map(Some).ok_or_else(|| unknown(p));
    }
    match body.get("model").and_then(Value::as_str) {
        Some(m) if kind != Kind::Native && m != s.config.model => {
            find(m).map(Some).ok_or_else(|| unknown(m))
        }
        _ => Ok(None),
    }
}

/// A request's prompt as the engine reads it: its tokens (a chat's with its template's and its
/// images'), their ids (for the prefix cache; empty with it off), its images' sizes and the
/// kind its marker names.
struct PromptRead {
    tokens: u64,
    ids: Vec<u32>,
    images: Vec<(u32, u32)>,
    content: Option<ContentKind>,
}

fn read_prompt(s: &SimState, kind: Kind, body: &Value) -> Result<PromptRead, Box<Response>> {
    let caching = s.cache.is_some();
    let mut ids = Vec::new();
    match kind {
        Kind::Completions | Kind::Native => {
            let field = if kind == Kind::Native {
                "text"
            } else {
                "prompt"
            };
            let text = body.get(field).and_then(Value::as_str).ok_or_else(|| {
                Box::new(error(
                    StatusCode::BAD_REQUEST,
                    &format!("'{field}' must be a string"),
                ))
            })?;
            if caching {
                ids = tokenizer::ids(text);
            }
            Ok(PromptRead {
                tokens: tokenizer::count(text),
                ids,
                images: Vec::new(),
                content: ContentKind::of_text(text),
            })
        }
        Kind::Chat => {
            let msgs = body
                .get("messages")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    Box::new(error(StatusCode::BAD_REQUEST, "'messages' must be a list"))
                })?;
            note_assistant_messages(s, msgs);
            let texts: Vec<(&str, String)> = msgs
                .iter()
                .map(|m| {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                    (role, super::images::content_text(m.get("content")))
                })
                .collect();
            if caching {
                ids = tokenizer::chat_ids(texts.iter().map(|(r, t)| (*r, t.as_str())));
            }
            let images = super::images::of_messages(msgs)
                .map_err(|e| Box::new(error(StatusCode::BAD_REQUEST, &e)))?;
            let tokens = tokenizer::CHAT_TOKENS_PER_CONVERSATION
                + texts
                    .iter()
                    .map(|(_, t)| tokenizer::CHAT_TOKENS_PER_MESSAGE + tokenizer::count(t))
                    .sum::<u64>()
                + images
                    .iter()
                    .map(|&(w, h)| super::images::tokens(w, h))
                    .sum::<u64>();
            Ok(PromptRead {
                tokens,
                ids,
                images,
                content: texts.iter().find_map(|(_, t)| ContentKind::of_text(t)),
            })
        }
    }
}

pub(super) fn parse_ask(s: &SimState, kind: Kind, body: &Value) -> Result<Ask, Box<Response>> {
    let lora = adapter_of(s, kind, body)?.cloned();
    let PromptRead {
        tokens: input_tokens,
        ids: prompt_ids,
        images,
        content,
    } = read_prompt(s, kind, body)?;
    let max_tokens = if kind == Kind::Native {
        body.pointer("/sampling_params/max_new_tokens")
            .and_then(Value::as_u64)
    } else {
        body.get("max_tokens")
            .or_else(|| body.get("max_completion_tokens"))
            .and_then(Value::as_u64)
    }
    .unwrap_or(16)
    .max(1);
    if input_tokens + max_tokens > s.config.context_length {
        return Err(Box::new(too_long(s, kind, input_tokens, max_tokens)));
    }
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let continuous_usage = s.config.continuous_usage
        && body
            .pointer("/stream_options/continuous_usage_stats")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    let tools = offered_tools(body);
    let ignore_eos = if kind == Kind::Native {
        body.pointer("/sampling_params/ignore_eos")
    } else {
        body.get("ignore_eos")
    }
    .and_then(Value::as_bool)
    .unwrap_or(false);
    let thinking_budget = body.get("thinking_token_budget").and_then(Value::as_u64);
    Ok(Ask {
        input_tokens,
        prompt_ids,
        max_tokens,
        stream,
        include_usage,
        continuous_usage,
        tools,
        thinking_budget,
        lora,
        structured: super::structured::of(body, kind == Kind::Native),
        images,
        ignore_eos,
        content,
    })
}

/// Where `ask`, the simulator's request number `id`, ends on its own, if before its
/// `max_tokens`: a length drawn from the log-normal around [`super::SimConfig::natural_len`]
/// (none where that is 0, or the request ignores the end of sequence or carries a
/// constraint, which ends where its document does). The engine then generates that many:
/// `ask.max_tokens` becomes it. Returns the `max_tokens` asked for and the stop, if any.
pub(super) fn natural_stop(cfg: &super::SimConfig, id: u64, ask: &mut Ask) -> (u64, Option<u64>) {
    let asked = ask.max_tokens;
    let stop = natural_length(cfg, id, ask).filter(|&n| n < asked);
    if let Some(n) = stop {
        ask.max_tokens = n;
    }
    (asked, stop)
}

/// The length `ask` would end at on its own, if it may end on its own.
fn natural_length(cfg: &super::SimConfig, id: u64, ask: &Ask) -> Option<u64> {
    use rand::{Rng, SeedableRng};
    if cfg.natural_len == 0 || ask.ignore_eos || ask.structured.is_some() {
        return None;
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(
        cfg.seed ^ 0x6E61_7475_7261_6C00 ^ id.wrapping_mul(0xD1B5_4A32_D192_ED03),
    );
    // Box-Muller: one standard normal draw from two uniform ones.
    let (u1, u2): (f64, f64) = (rng.random(), rng.random());
    let z = (-2.0 * (1.0 - u1).ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    Some(
        (cfg.natural_len as f64 * (super::NATURAL_SIGMA * z).exp())
            .round()
            .max(1.0) as u64,
    )
}

/// vLLM's (or SGLang's, on `/generate`) 400 for a request beyond the context length.
fn too_long(s: &SimState, kind: Kind, input_tokens: u64, max_tokens: u64) -> Response {
    let total = input_tokens + max_tokens;
    let msg = if kind == Kind::Native {
        format!(
            "Requested token count exceeds the model's maximum context length of {} tokens. You requested a total of {total} tokens: {input_tokens} tokens from the input messages and {max_tokens} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
            s.config.context_length
        )
    } else {
        format!(
            "This model's maximum context length is {} tokens. However, you requested {total} tokens ({input_tokens} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.",
            s.config.context_length
        )
    };
    error(StatusCode::BAD_REQUEST, &msg)
}

/// Keeps the assistant messages a chat request sent back, for tests to read.
fn note_assistant_messages(s: &SimState, msgs: &[Value]) {
    if let Ok(mut l) = s.log.lock() {
        for m in msgs
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        {
            let text = m.get("content").and_then(Value::as_str).unwrap_or_default();
            l.push_received_assistant(text.to_string());
        }
    }
}

/// The names of the tools a chat request offers (none when `tool_choice` is "none").
fn offered_tools(body: &Value) -> Vec<String> {
    if body.get("tool_choice").and_then(Value::as_str) == Some("none") {
        return Vec::new();
    }
    body.get("tools")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// How a chat answer is made up under `cfg` for `ask` (nothing but content elsewhere).
pub(super) fn answer_plan(cfg: &super::SimConfig, kind: Kind, ask: &Ask) -> AnswerPlan {
    if kind != Kind::Chat {
        return AnswerPlan::default();
    }
    let think = cfg
        .reasoning_tokens
        .min(ask.thinking_budget.unwrap_or(u64::MAX))
        .min(ask.max_tokens);
    let vllm = cfg.metrics == Some(super::MetricsFlavor::Vllm);
    AnswerPlan {
        think,
        reasoning_field: if vllm {
            "reasoning"
        } else {
            "reasoning_content"
        },
        reasoning_usage: vllm,
        calls: if ask.tools.is_empty() {
            0
        } else {
            cfg.tool_calls
        },
        tools: ask.tools.clone(),
        answer: ask.max_tokens - think,
        ..AnswerPlan::default()
    }
}
