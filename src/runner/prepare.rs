//! Before a run: identify the server, pick the protocol, size the prompts, and check that
//! the plan fits the server's context.

use std::sync::Arc;
use std::time::Duration;

use crate::client::{self, Backend, Client, ClientOptions, Engine, ServerInfo, detect};
use crate::config::{BackendChoice, RunConfig};
use crate::workload::prompt::{Counter, PromptFactory};
use crate::workload::{LevelKind, LevelSpec};

use super::SearchPlan;

/// Everything needed to run, after talking to the server.
pub struct Prepared {
    pub server: ServerInfo,
    pub backend: Backend,
    pub client: Client,
    pub factory: PromptFactory,
    pub levels: Vec<LevelSpec>,
    /// The run seed: prompt text and rate levels' arrival schedules derive from it.
    pub seed: u64,
    /// The SLO capacity search to run after the planned levels, and the SLO it searches for.
    pub search: Option<SearchPlan>,
    /// The server servetop started (`--serve`), which the runner may restart with a larger
    /// context; none for a server it did not start.
    pub serve: Option<crate::serve::ServeHandle>,
}

impl Prepared {
    /// What the run will do, said before its first request: the `plan:` line with its `time`
    /// part, and the `limits:` line when a planned length does not fit the server's context
    /// (restarted for, when servetop started the server; skipped, naming the flag, when not).
    pub fn plan(&self, time: &str) -> Vec<String> {
        use crate::workload::plan;
        let search = self.search.as_ref().map(plan::search_text);
        let mut out = vec![plan::plan_line(&self.levels, search.as_deref(), time)];
        let restart = |need: u64| self.serve.as_ref()?.context_for(need);
        if let Some(tokens) = self.server.context_limit {
            let limit = plan::Limit {
                tokens,
                flag: self.server.engine.context_flag(),
                restart: self
                    .serve
                    .is_some()
                    .then_some(&restart as &dyn Fn(u64) -> Option<u64>),
            };
            out.extend(plan::limits_line(&self.levels, &limit));
        }
        out
    }
}

/// Identifies the server, picks the protocol and the prompt counter, and builds the plan.
/// Every error is one line a user can act on.
pub async fn prepare(cfg: &RunConfig, api_key: Option<String>) -> Result<Prepared, String> {
    if let (Some(_), Some(h)) = (
        &api_key,
        cfg.headers.iter().find(|h| {
            ["authorization", "x-api-key"].contains(&h.name.to_ascii_lowercase().as_str())
        }),
    ) {
        return Err(format!(
            "--header {} and the key in {}: both would go as the key; use one",
            h.name, cfg.api_key_env
        ));
    }
    let http = client::http_client(&cfg.header_pairs())?;
    let base = cfg.base_url.trim_end_matches('/').to_string();
    let tokenizer = match &cfg.tokenizer {
        Some(path) => Some(Arc::new(
            tokenizers::Tokenizer::from_file(path)
                .map_err(|e| format!("cannot read tokenizer {}: {e}", path.display()))?,
        )),
        None => None,
    };
    let probes = detect::probe(&http, &base, api_key.as_deref()).await;
    if let Some(status @ (401 | 403)) = probes.models_status {
        return Err(match api_key {
            Some(_) => format!(
                "{base} refused the API key (HTTP {status} on /v1/models): put the key the server was started with in ${}",
                cfg.api_key_env
            ),
            None => format!(
                "{base} needs an API key (HTTP {status} on /v1/models): put it in ${} (or name another variable with --api-key-env)",
                cfg.api_key_env
            ),
        });
    }
    if probes.models.is_none()
        && probes.props.is_none()
        && probes.tgi_info.is_none()
        && probes.server_info.is_none()
    {
        // Tell "nothing listens there" from "something that is not an LLM server".
        if let Err(e) = http.get(&base).timeout(Duration::from_secs(5)).send().await {
            return Err(format!(
                "cannot reach {base}: {} (is the server running, and is the URL right?)",
                client::error_chain(&e)
            ));
        }
    }
    let server = detect::identify(&base, &probes, cfg.model.as_deref())?;
    adapters_served(&server, cfg)?;
    if let (Engine::Llamacpp, Some(crate::client::structured::ResponseFormat::Regex { .. })) =
        (server.engine, &cfg.response_format)
    {
        return Err(
            "--response-format regex: llama-server takes grammars and JSON schemas, not regular expressions; use json or json-schema FILE against it"
                .into(),
        );
    }
    let backend = match cfg.backend {
        // Tools, template switches and thinking budgets exist only in chat requests.
        BackendChoice::Auto if cfg.wants_chat() => Backend::OpenaiChat,
        BackendChoice::Auto | BackendChoice::Openai => Backend::Openai,
        BackendChoice::OpenaiChat => Backend::OpenaiChat,
        BackendChoice::Sglang => Backend::Sglang,
        BackendChoice::Anthropic => Backend::Anthropic,
    };
    let opts = client_options(cfg, tokenizer.clone());
    let client = Client::new(http.clone(), &server, backend, api_key.clone(), opts);
    let counter = match tokenizer {
        Some(t) => Counter::Local(t),
        None => match Counter::server(http, &base, server.engine, &server.model, api_key).await {
            Ok(c) => c,
            Err(_) => Counter::calibrate_with_probes(&client, cfg.seed).await.map_err(|e| {
                format!("no way to size prompts: the server has no usable /tokenize and {e}; pass --tokenizer PATH/tokenizer.json")
            })?,
        },
    };
    let levels = cfg.levels();
    // A server servetop started is restarted with a larger context when a length needs it.
    let fits = if cfg.serve.is_some() {
        None
    } else {
        nothing_fits(&server, &levels)
    };
    if let Some(why) = fits.or_else(|| search_fits(&server, cfg)) {
        return Err(why);
    }
    let factory = factory_of(counter, cfg)?;
    Ok(Prepared {
        server,
        backend,
        client,
        factory,
        levels,
        seed: cfg.seed,
        search: cfg.search_plan(),
        serve: None,
    })
}

/// What makes the run's prompts: the counter, and the dataset, trace and structured-output
/// constraint the run has.
fn factory_of(counter: Counter, cfg: &RunConfig) -> Result<PromptFactory, String> {
    let mut factory = PromptFactory::new(counter, cfg.seed);
    if let Some(path) = &cfg.dataset {
        let d = crate::workload::dataset::Dataset::load(path)?;
        factory = factory.with_dataset(Arc::new(d));
    }
    if let Some(t) = cfg.trace.as_ref().and_then(|t| t.loaded.clone()) {
        factory = factory.with_trace(t);
    }
    if let Some(f) = &cfg.response_format {
        factory = factory.with_constraint(Arc::new(crate::client::structured::Constraint::new(
            f.clone(),
        )?));
    }
    Ok(factory)
}

/// `--lora-modules` against the server, before anything is sent: llama-server applies adapters
/// by id (its `/lora-adapters`), not by name; a server that lists its adapters at `/v1/models`
/// (vLLM, the simulator) must list each name. SGLang lists its base model only: its names are
/// checked by its answers.
fn adapters_served(server: &ServerInfo, cfg: &RunConfig) -> Result<(), String> {
    if cfg.lora_modules.is_empty() {
        return Ok(());
    }
    match server.engine {
        Engine::Llamacpp => Err(
            "--lora-modules names an adapter per request, and llama-server applies adapters by id (its /lora-adapters), not by name: leave it out against llama-server"
                .into(),
        ),
        Engine::Vllm | Engine::Sim if !server.models.is_empty() => {
            match cfg.lora_modules.iter().find(|n| !server.models.contains(n)) {
                Some(name) => Err(format!(
                    "--lora-modules {name}: {} does not serve it (it lists {}); start vLLM with --enable-lora --lora-modules {name}=PATH",
                    cfg.base_url,
                    server.models.join(", ")
                )),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// When the server's context limit is known and not one planned level fits in it, the run would
/// only skip: that is a configuration error, said before anything is written. (When some levels
/// fit, the others are skipped one by one with the flag to raise.)
pub(super) fn nothing_fits(server: &ServerInfo, levels: &[LevelSpec]) -> Option<String> {
    let limit = server.context_limit?;
    let smallest = levels.iter().map(LevelSpec::context_needed).min()?;
    // The flags that set the lengths that do not fit.
    let lengths = if levels.iter().all(|l| l.kind == LevelKind::LongContext) {
        "--long-context/--long-context-output-len"
    } else {
        "--input-len/--output-len"
    };
    (smallest > limit).then(|| {
        format!(
            "no planned level fits the server's context limit of {limit} tokens ({}): the smallest needs {smallest} (prompt + output); raise it with {} to at least {smallest} and restart the server, or lower {lengths}",
            server
                .context_limit_source
                .as_deref()
                .unwrap_or("reported by the server"),
            server.engine.context_flag()
        )
    })
}

/// A search whose probes cannot fit the server's context is refused before it starts.
pub(super) fn search_fits(server: &ServerInfo, cfg: &RunConfig) -> Option<String> {
    let search = cfg.search.as_ref()?;
    let lengths = (cfg.input_len, cfg.output_len);
    let probe = match &cfg.sessions {
        // A session probe's last turn holds the whole session.
        Some(s) if search.target == crate::workload::search::SearchTarget::Concurrency => {
            crate::workload::levels::session_level_of(0, 1, s, lengths, cfg.shared_prefix_len, 1)
        }
        _ => LevelSpec::new(0, LevelKind::Rate, 0, lengths, 1),
    };
    nothing_fits(server, &[probe])
}

/// Input tokens of the warmup request: the sweep's length, kept well inside the context.
pub fn warmup_input(cfg: &RunConfig, prepared: &Prepared) -> u64 {
    match prepared.server.context_limit {
        Some(limit) => cfg.input_len.min(limit / 2).max(1),
        None => cfg.input_len.max(1),
    }
}

/// The client's timeouts, counting and request ids, from the run's configuration.
fn client_options(
    cfg: &RunConfig,
    tokenizer: Option<std::sync::Arc<tokenizers::Tokenizer>>,
) -> ClientOptions {
    ClientOptions {
        first_token_timeout: Duration::from_secs_f64(cfg.first_token_timeout_s),
        idle_timeout: Duration::from_secs_f64(cfg.idle_timeout_s),
        tokenizer,
        temperature: cfg.temperature,
        chat_extras: std::sync::Arc::new(cfg.chat.fields()),
        extra_body: std::sync::Arc::new(
            cfg.extra_body
                .as_ref()
                .and_then(serde_json::Value::as_object)
                .cloned()
                .unwrap_or_default(),
        ),
        headers: cfg.header_pairs().into(),
        natural_stop: cfg.natural_stop,
        request_id_prefix: cfg.shard.map_or_else(
            || "servetop".into(),
            |s| format!("servetop-shard{}of{}", s.index, s.count).into(),
        ),
    }
}
