//! Which engine is on the other end, what it calls its model and how long a prompt it accepts,
//! learned from what the server itself answers (`--backend auto`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A serving engine servetop knows the dialect and flags of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// servetop's own simulated server (always labelled simulated).
    Sim,
    Sglang,
    Vllm,
    Llamacpp,
    Tgi,
    Unknown,
}

impl Engine {
    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sim => "servetop-sim (simulated)",
            Engine::Sglang => "SGLang",
            Engine::Vllm => "vLLM",
            Engine::Llamacpp => "llama.cpp",
            Engine::Tgi => "TGI",
            Engine::Unknown => "unknown engine",
        }
    }

    /// The server flag that raises the context limit, as a user would type it.
    pub fn context_flag(self) -> &'static str {
        match self {
            Engine::Sim => "servetop sim --context-length",
            Engine::Sglang => "--context-length",
            Engine::Vllm => "--max-model-len",
            Engine::Llamacpp => "--ctx-size (-c; divided among -np slots)",
            Engine::Tgi => "--max-input-tokens / --max-total-tokens",
            Engine::Unknown => "the server's context-length setting",
        }
    }

    /// The chat request field that carries a thinking budget (`--thinking-budget`), where the
    /// engine takes one per request (docs/real-servers.md "Thinking models and tool calls").
    pub fn thinking_budget_field(self) -> Option<&'static str> {
        match self {
            // The simulator reads vLLM's field.
            Engine::Sim | Engine::Vllm => Some("thinking_token_budget"),
            Engine::Llamacpp => Some("thinking_budget_tokens"),
            // SGLang's budget is a pickled custom logit processor; TGI has none.
            Engine::Sglang | Engine::Tgi | Engine::Unknown => None,
        }
    }

    /// Whether the OpenAI stream accepts `stream_options.continuous_usage_stats`.
    pub fn has_continuous_usage(self) -> bool {
        matches!(self, Engine::Sim | Engine::Vllm | Engine::Sglang)
    }
}

/// What the server said about itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub base_url: String,
    pub engine: Engine,
    pub engine_version: Option<String>,
    /// The model requests name (`--model`, else the server's first model).
    pub model: String,
    /// Every model the server lists.
    pub models: Vec<String>,
    /// Longest prompt + output the server accepts per request, if it says.
    pub context_limit: Option<u64>,
    /// Where `context_limit` came from (endpoint and field).
    pub context_limit_source: Option<String>,
    /// True when the engine is servetop's simulator: every number is from a simulation.
    pub simulated: bool,
    /// The reasoning parser the server says it runs (SGLang's `/get_server_info`
    /// `reasoning_parser`); None where it does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_parser: Option<String>,
}

/// Probes answered by the server, gathered concurrently.
#[derive(Debug, Default)]
pub struct Probes {
    pub models: Option<(Value, Option<String>)>,
    /// The HTTP status `/v1/models` answered when it was not a success (401: a key is needed).
    pub models_status: Option<u16>,
    pub server_info: Option<Value>,
    pub props: Option<Value>,
    pub version: Option<Value>,
    pub tgi_info: Option<Value>,
}

/// Fetches the identification endpoints (each with a short timeout; absent ones are `None`).
pub async fn probe(http: &reqwest::Client, base: &str, api_key: Option<&str>) -> Probes {
    let get = |path: &'static str| {
        let mut req = http
            .get(format!("{base}{path}"))
            .timeout(Duration::from_secs(5));
        if let Some(k) = api_key {
            req = req.bearer_auth(k);
        }
        async move {
            let Ok(resp) = req.send().await else {
                return (None, None);
            };
            if !resp.status().is_success() {
                return (None, Some(resp.status().as_u16()));
            }
            let server = resp
                .headers()
                .get(reqwest::header::SERVER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            (resp.json::<Value>().await.ok().map(|v| (v, server)), None)
        }
    };
    let (models, server_info, get_server_info, props, version, tgi_info) = tokio::join!(
        get("/v1/models"),
        get("/server_info"),
        get("/get_server_info"),
        get("/props"),
        get("/version"),
        get("/info"),
    );
    Probes {
        models_status: models.1,
        models: models.0,
        server_info: server_info.0.or(get_server_info.0).map(|v| v.0),
        props: props.0.map(|v| v.0),
        version: version.0.map(|v| v.0),
        tgi_info: tgi_info.0.map(|v| v.0),
    }
}

/// The engine, from its model card's owner, the `Server` header of its answer and which probes it
/// answered.
fn engine_of(p: &Probes, owned_by: &str, server_header: &str) -> Engine {
    // vLLM in its development mode (VLLM_SERVER_DEV_MODE=1) serves a /server_info of its own,
    // with its `vllm_config`: that is not SGLang's.
    let vllm_info = p
        .server_info
        .as_ref()
        .is_some_and(|v| v.get("vllm_config").is_some());
    if owned_by == "servetop-sim" {
        Engine::Sim
    } else if owned_by == "vllm" || vllm_info {
        Engine::Vllm
    } else if owned_by == "sglang" || p.server_info.is_some() {
        Engine::Sglang
    } else if owned_by == "llamacpp"
        || server_header.starts_with("llama.cpp")
        || p.props
            .as_ref()
            .is_some_and(|v| v.get("default_generation_settings").is_some())
    {
        Engine::Llamacpp
    } else if p
        .tgi_info
        .as_ref()
        .is_some_and(|v| v.get("model_id").is_some())
    {
        Engine::Tgi
    } else {
        Engine::Unknown
    }
}

/// Decides engine, model and context limit from the probes (pure, fixture-tested).
pub fn identify(
    base_url: &str,
    p: &Probes,
    want_model: Option<&str>,
) -> Result<ServerInfo, String> {
    let cards: Vec<&Value> = p
        .models
        .as_ref()
        .and_then(|(v, _)| v.get("data"))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let owned_by = cards
        .first()
        .and_then(|c| c.get("owned_by"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let server_header = p
        .models
        .as_ref()
        .and_then(|(_, h)| h.as_deref())
        .unwrap_or("");
    let engine = engine_of(p, owned_by, server_header);

    let mut models: Vec<String> = cards
        .iter()
        .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    if models.is_empty()
        && let Some(id) = p
            .tgi_info
            .as_ref()
            .and_then(|v| v.get("model_id"))
            .and_then(Value::as_str)
    {
        models.push(id.to_string());
    }
    if p.models.is_none() && p.props.is_none() && p.tgi_info.is_none() && p.server_info.is_none() {
        return Err(format!(
            "{base_url} answered none of /v1/models, /props, /info, /server_info: is it an LLM server, and is the URL its root (without /v1)?"
        ));
    }
    let model = match want_model {
        Some(m) => {
            if !models.is_empty() && !models.iter().any(|x| x == m) {
                return Err(format!(
                    "model '{m}' is not served at {base_url}; it serves: {}",
                    models.join(", ")
                ));
            }
            m.to_string()
        }
        None => models
            .first()
            .cloned()
            .ok_or_else(|| format!("{base_url} lists no model; pass --model NAME"))?,
    };

    let card = cards
        .iter()
        .find(|c| c.get("id").and_then(Value::as_str) == Some(model.as_str()))
        .or(cards.first());
    let (context_limit, context_limit_source) = context_limit(engine, card.copied(), p);
    let engine_version = p
        .server_info
        .as_ref()
        .and_then(|v| v.get("version"))
        .or_else(|| p.version.as_ref().and_then(|v| v.get("version")))
        .or_else(|| p.tgi_info.as_ref().and_then(|v| v.get("version")))
        .or_else(|| p.props.as_ref().and_then(|v| v.get("build_info")))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(ServerInfo {
        base_url: base_url.to_string(),
        engine,
        engine_version,
        model,
        models,
        context_limit,
        context_limit_source,
        simulated: engine == Engine::Sim,
        reasoning_parser: reasoning_parser(p),
    })
}

/// The reasoning parser SGLang says it runs (`/get_server_info` `reasoning_parser`).
fn reasoning_parser(p: &Probes) -> Option<String> {
    p.server_info
        .as_ref()
        .and_then(|v| v.get("reasoning_parser"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn context_limit(
    engine: Engine,
    card: Option<&Value>,
    p: &Probes,
) -> (Option<u64>, Option<String>) {
    let num = |v: Option<&Value>| v.and_then(Value::as_u64).filter(|n| *n > 0);
    // llama.cpp: the per-slot context (-c divided among -np slots) is what one request gets.
    if engine == Engine::Llamacpp {
        if let Some(n) = num(p
            .props
            .as_ref()
            .and_then(|v| v.pointer("/default_generation_settings/n_ctx")))
        {
            return (
                Some(n),
                Some("/props default_generation_settings.n_ctx (per slot)".into()),
            );
        }
        if let Some(n) = num(card.and_then(|c| c.pointer("/meta/n_ctx"))) {
            return (Some(n), Some("/v1/models meta.n_ctx".into()));
        }
    }
    if let Some(n) = num(card.and_then(|c| c.get("max_model_len"))) {
        return (Some(n), Some("/v1/models max_model_len".into()));
    }
    if let Some(info) = &p.tgi_info
        && let Some(n) = num(info.get("max_total_tokens"))
    {
        return (Some(n), Some("/info max_total_tokens".into()));
    }
    if let Some(si) = &p.server_info
        && let Some(n) = num(si.get("context_length"))
    {
        return (Some(n), Some("/server_info context_length".into()));
    }
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn probes_models(v: Value) -> Probes {
        Probes {
            models: Some((v, None)),
            ..Probes::default()
        }
    }

    #[test]
    fn vllm_models_card() {
        let p = probes_models(
            json!({"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","created":1,"owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":40960,"permission":[]}]}),
        );
        let s = identify("http://h:8000", &p, None).unwrap();
        assert_eq!(s.engine, Engine::Vllm);
        assert_eq!(s.model, "Qwen/Qwen3-8B");
        assert_eq!(s.context_limit, Some(40960));
        assert!(!s.simulated);
    }

    /// vLLM started with `VLLM_SERVER_DEV_MODE=1` answers /`server_info` too (its config, its
    /// environment): still vLLM, by its card and by that answer's shape.
    #[test]
    fn vllm_in_development_mode_is_not_sglang() {
        let mut p = probes_models(
            json!({"object":"list","data":[{"id":"tiny","object":"model","created":1,"owned_by":"vllm","root":"tiny","max_model_len":4096}]}),
        );
        p.server_info = Some(json!({"vllm_config":"model='tiny'","vllm_env":{},"system_env":{}}));
        let s = identify("http://h", &p, None).unwrap();
        assert_eq!(s.engine, Engine::Vllm);
        assert_eq!(s.context_limit, Some(4096));
        assert_eq!(s.reasoning_parser, None);
        // Behind a proxy that renames the card's owner, the answer's shape still says vLLM.
        p.models = Some((
            json!({"object":"list","data":[{"id":"tiny","object":"model","owned_by":"proxy"}]}),
            None,
        ));
        assert_eq!(identify("http://h", &p, None).unwrap().engine, Engine::Vllm);
    }

    #[test]
    fn sglang_by_owner_or_server_info() {
        let mut p = probes_models(
            json!({"object":"list","data":[{"id":"m","object":"model","created":1,"owned_by":"sglang","root":"m","max_model_len":32768}]}),
        );
        p.server_info = Some(
            json!({"version":"0.5.4","context_length":null,"internal_states":[{"avg_spec_accept_length":3.1}]}),
        );
        let s = identify("http://h", &p, Some("m")).unwrap();
        assert_eq!(s.engine, Engine::Sglang);
        assert_eq!(s.engine_version.as_deref(), Some("0.5.4"));
        assert_eq!(s.context_limit, Some(32768));
        assert_eq!(s.engine.context_flag(), "--context-length");
        assert_eq!(s.reasoning_parser, None);
        // Its server arguments name the reasoning parser it runs (null when none).
        p.server_info =
            Some(json!({"version":"0.5.4","reasoning_parser":"qwen3","tool_call_parser":"qwen25"}));
        let s = identify("http://h", &p, Some("m")).unwrap();
        assert_eq!(s.reasoning_parser.as_deref(), Some("qwen3"));
        p.server_info = Some(json!({"version":"0.5.4","reasoning_parser":null}));
        let s = identify("http://h", &p, Some("m")).unwrap();
        assert_eq!(s.reasoning_parser, None);
    }

    #[test]
    fn llamacpp_per_slot_context_from_props() {
        let mut p = Probes {
            models: Some((
                json!({"object":"list","data":[{"id":"tiny.gguf","object":"model","created":1,"owned_by":"llamacpp","meta":{"n_ctx_train":4096}}]}),
                Some("llama.cpp".into()),
            )),
            ..Probes::default()
        };
        p.props = Some(
            json!({"default_generation_settings":{"n_ctx":2048},"total_slots":4,"build_info":"b6000-abc"}),
        );
        let s = identify("http://h", &p, None).unwrap();
        assert_eq!(s.engine, Engine::Llamacpp);
        assert_eq!(s.context_limit, Some(2048));
        assert!(s.context_limit_source.unwrap().contains("per slot"));
    }

    #[test]
    fn tgi_info() {
        let p = Probes {
            tgi_info: Some(
                json!({"model_id":"bigscience/bloom","max_input_tokens":4095,"max_total_tokens":4096,"version":"3.0.0"}),
            ),
            ..Probes::default()
        };
        let s = identify("http://h", &p, None).unwrap();
        assert_eq!(s.engine, Engine::Tgi);
        assert_eq!(s.model, "bigscience/bloom");
        assert_eq!(s.context_limit, Some(4096));
    }

    #[test]
    fn wrong_model_lists_what_is_served_and_non_llm_is_refused() {
        let p = probes_models(
            json!({"data":[{"id":"a","owned_by":"vllm"},{"id":"b","owned_by":"vllm"}]}),
        );
        let e = identify("http://h", &p, Some("c")).unwrap_err();
        assert!(e.contains("it serves: a, b"), "{e}");
        let e = identify("http://h", &Probes::default(), None).unwrap_err();
        assert!(e.contains("is it an LLM server"), "{e}");
    }
}
