//! The validated configuration of a run, written into every result file.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use chat::ChatExtras;

use crate::metrics::Slo;
use crate::workload::clock::LevelClock;
use crate::workload::levels::Dimensions;
pub use crate::workload::levels::{MultiTurn, TIME_BOUND_CEILING};
use crate::workload::search::SearchConfig;
use crate::workload::shard::Shard;
use crate::workload::{LevelSpec, OpenLoop, RequestCount};

mod chat;
pub mod header;
mod validate;

/// Which protocol to speak; `auto` picks from what the server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    Auto,
    Openai,
    OpenaiChat,
    Sglang,
    /// Anthropic Messages (`/v1/messages`): the chat template, no `ignore_eos`.
    Anthropic,
}

/// Everything that shapes a run's measurements.
// Its switches are independent flags of the command line, each its own bool in results.json.
#[allow(clippy::struct_excessive_bools)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// Server root, without `/v1`.
    pub base_url: String,
    pub backend: BackendChoice,
    pub model: Option<String>,
    /// Concurrency levels of the sweep (empty: no sweep).
    pub concurrency: Vec<u64>,
    pub input_len: u64,
    pub output_len: u32,
    /// Leading tokens of `input_len` every sweep, rate and multi-turn prompt shares (0: none).
    #[serde(default)]
    pub shared_prefix_len: u64,
    /// Spread of the sweep's and rate levels' input and output lengths around `input_len` and
    /// `output_len` (`--range-ratio`; none: every request the same).
    #[serde(default)]
    pub range_ratio: Option<f64>,
    /// Let the model end its answers (`--natural-stop`): no request asks to ignore the end of
    /// sequence, so `output_len` (and the ladder's) is a cap, not a length.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub natural_stop: bool,
    /// The percentiles (in %) the tables give for TTFT, TPOT, ITL and E2E, and results.json
    /// besides its own (`--metric-percentiles`; empty: the tables' usual p50 and p99).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metric_percentiles: Vec<f64>,
    /// LoRA adapters each request names, one per request (`--lora-modules`; none: the base
    /// model), dealt as `lora_dist` says.
    #[serde(default)]
    pub lora_modules: Vec<String>,
    #[serde(default)]
    pub lora_dist: crate::workload::mix::LoraDist,
    /// Structured output (`--response-format`): every sweep, rate and long-context level runs
    /// twice, without and then with the constraint.
    #[serde(default)]
    pub response_format: Option<crate::client::structured::ResponseFormat>,
    /// Kinds of prompt (`--content`): every sweep, rate and long-context level runs once per
    /// kind, in the order given (empty: the default prompts, once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<crate::workload::content::ContentKind>,
    /// Dataset categories (`--categories`, `all` resolved to the file's): every sweep and rate
    /// level runs once per category, its requests drawn from that category's entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// Input/output pairs (`--shapes`): the sweep and rate levels run once per pair, in place
    /// of `input_len` and `output_len` (which chats and sessions keep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes: Vec<crate::workload::shapes::Shape>,
    /// A weighted mix of input/output pairs inside each sweep and rate level (`--shape-mix`):
    /// each request draws one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape_mix: Vec<crate::workload::shapes::WeightedShape>,
    /// Each sweep and rate request's lengths drawn log-normal around the level's, σ of the log
    /// (`--length-dist lognormal:S`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lognormal_sigma: Option<f64>,
    /// Images in each sweep, rate and search request (`--images`; 0: text only), of a size
    /// drawn from `image_sizes`; they go through the chat endpoint.
    #[serde(default)]
    pub images: u32,
    #[serde(default)]
    pub image_sizes: crate::workload::images::ImageSizes,
    /// The multi-turn level, run last (none by default).
    #[serde(default)]
    pub multi_turn: Option<MultiTurn>,
    /// The agent-session levels, after the multi-turn level (none by default).
    #[serde(default)]
    pub sessions: Option<crate::workload::sessions::Sessions>,
    /// Prompts (and output lengths) of the sweep, rate and multi-turn levels from this file
    /// instead of random text of `input_len`/`output_len` tokens.
    #[serde(default)]
    pub dataset: Option<PathBuf>,
    /// Measured requests per sweep level (per rate level, `Fx` is F seconds' worth).
    pub requests_per_level: RequestCount,
    /// Open-loop request-rate levels, run after the concurrency sweep (none by default).
    #[serde(default)]
    pub open_loop: OpenLoop,
    /// Unmeasured requests before the first level.
    pub warmup_requests: u32,
    /// Input lengths of the long-context ladder (empty: none).
    pub long_context: Vec<u64>,
    pub long_context_output_len: u32,
    pub long_context_repeats: u32,
    pub tokenizer: Option<PathBuf>,
    pub temperature: f64,
    pub first_token_timeout_s: f64,
    pub idle_timeout_s: f64,
    /// Seconds in-flight requests get to finish after quit or skip.
    pub grace_s: f64,
    pub slo: Option<Slo>,
    /// `--slo-tier`: named objectives each level is judged against too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo_tiers: Vec<crate::metrics::slo_tiers::SloTier>,
    /// Seed of the prompt text.
    pub seed: u64,
    pub out_dir: PathBuf,
    /// Name of the environment variable the API key is read from (never the key itself).
    pub api_key_env: String,
    /// Keep per-chunk timings in requests.jsonl.
    pub record_chunks: bool,
    /// The engine's Prometheus endpoint (default: `<base-url>/metrics`).
    #[serde(default)]
    pub metrics_url: Option<String>,
    /// Do not scrape the engine's metrics.
    #[serde(default)]
    pub no_metrics: bool,
    /// A DCGM exporter's Prometheus endpoint, for GPUs on another host (instead of NVML).
    #[serde(default)]
    pub dcgm_url: Option<String>,
    /// Do not sample GPUs.
    #[serde(default)]
    pub no_gpu: bool,
    /// Seconds between GPU samples (engine metrics are scraped every second).
    #[serde(default = "one_second")]
    pub gpu_interval_s: f64,
    /// Seconds to wait for a server that stopped accepting connections before aborting.
    #[serde(default = "sixty_seconds")]
    pub server_wait_s: f64,
    /// Clear the server's prefix cache before each level (`--reset-cache`).
    #[serde(default)]
    pub reset_cache: bool,
    /// The SLO capacity search, run after the planned levels (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchConfig>,
    /// The server servetop starts itself (`--serve`); none: a server already running at
    /// `base_url`, never touched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeConfig>,
    /// What chat requests carry besides their messages (`--tools`, `--tool-choice`,
    /// `--chat-template-kwargs`).
    #[serde(default, skip_serializing_if = "ChatExtras::is_empty")]
    pub chat: ChatExtras,
    /// USD per GPU hour (`--gpu-hour-cost`), or per hour for the whole deployment
    /// (`--cost-per-hour`): each level's cost per million tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour: Option<f64>,
    /// The deployment's GPU count (`--gpus`): the per-GPU figures' divisor when servetop saw
    /// no GPU (a GPU it saw counts first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    /// The production trace to replay (`--trace`), alone: the run's one level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::workload::trace::TraceConfig>,
    /// Runs of every level (`--repeat N`): the plan once, then again, N times in all.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub repeat: u32,
    /// Fields added to every request's body (`--extra-body`), a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<serde_json::Value>,
    /// Headers sent with every request to the server (`--header`), a secret one's value
    /// written `***` (see [`RunConfig::header_pairs`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<header::HttpHeader>,
    /// Thinking budgets (`--thinking-budget`): the plan once per budget, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking_budgets: Vec<u32>,
    /// Time-bounded levels and when each starts (`--level-seconds`, `--drain-seconds`,
    /// `--start-at`).
    #[serde(default, skip_serializing_if = "LevelClock::is_off")]
    pub clock: LevelClock,
    /// This process's share of a run split over machines (`--shard I/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
}

fn one() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_one(v: &u32) -> bool {
    *v == 1
}

impl ServeConfig {
    /// `-np 2 · --max-num-seqs 64`: the configuration a parameter sweep is running, or "".
    pub fn params_label(&self) -> String {
        self.params
            .iter()
            .map(|(n, v)| format!("{n} {v}"))
            .collect::<Vec<_>>()
            .join(" · ")
    }

    fn validate(&self) -> Result<(), String> {
        if self.command.trim().is_empty() {
            return Err("--serve needs the command that starts the server".into());
        }
        if self.command.contains("{context_len}") && self.context_len.is_none() {
            return Err("the --serve command uses {context_len}: give the first server's context with --context-len N".into());
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err("--serve-timeout must be more than zero seconds".into());
        }
        Ok(())
    }
}

/// `--serve "CMD"`: how servetop starts the server it measures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServeConfig {
    /// The command, with `{port}` and `{context_len}` still in it.
    pub command: String,
    /// The first server's context limit, filled into `{context_len}` (`--context-len`).
    pub context_len: Option<u64>,
    /// Contexts a restart may pick from, ascending (`--context-steps`); empty: the smallest
    /// multiple of 1024 that holds the length.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_steps: Vec<u64>,
    /// Seconds to wait for it to answer `/health` and `/v1/models` (`--serve-timeout`).
    pub timeout_s: f64,
    /// Restart it once when it crashes during a level (`--restart-on-crash`).
    #[serde(default)]
    pub restart_on_crash: bool,
    /// The server configuration this run measures, one value of each `--serve-param` (already
    /// in `command`): option name to value, for the dashboard, the summary and a comparison.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub params: Vec<(String, String)>,
}

fn sixty_seconds() -> f64 {
    60.0
}

fn one_second() -> f64 {
    1.0
}

impl RunConfig {
    /// `--header`s as the HTTP clients take them: (name in lower case, value).
    pub fn header_pairs(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.clone()))
            .collect()
    }

    /// Whether the run asks for something only chat requests carry: tools, template switches,
    /// a thinking budget.
    pub fn wants_chat(&self) -> bool {
        !self.chat.is_empty() || !self.thinking_budgets.is_empty() || self.images > 0
    }

    /// The demo's plan: the brief's deployment, shortened so it finishes in under 3 minutes.
    #[must_use]
    pub fn demo() -> Self {
        Self {
            concurrency: vec![1, 4, 8, 16, 64, 100],
            input_len: 1000,
            output_len: 100,
            requests_per_level: RequestCount::PerConcurrency {
                factor: 1.0,
                min: 5,
            },
            long_context: vec![8_000, 16_000, 30_000, 60_000, 100_000],
            long_context_output_len: 256,
            first_token_timeout_s: 600.0,
            idle_timeout_s: 60.0,
            grace_s: 3.0,
            no_gpu: false,
            ..Self::minimal("")
        }
    }

    /// A small plan against `base_url` for use as a library (tests, benchmarks): one level at
    /// C=1 of 8 requests (100 in / 64 out), one warmup, no long-context ladder, no GPU sampling,
    /// fixed seed 0, 30 s timeouts. Set the fields you need with struct update syntax, so a
    /// setting added later keeps its default here instead of breaking every caller.
    pub fn minimal(base_url: &str) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_string(),
            backend: BackendChoice::Auto,
            model: None,
            concurrency: vec![1],
            input_len: 100,
            output_len: 64,
            shared_prefix_len: 0,
            range_ratio: None,
            natural_stop: false,
            metric_percentiles: Vec::new(),
            lora_modules: Vec::new(),
            lora_dist: crate::workload::mix::LoraDist::Uniform,
            response_format: None,
            content: Vec::new(),
            categories: Vec::new(),
            shapes: Vec::new(),
            shape_mix: Vec::new(),
            lognormal_sigma: None,
            images: 0,
            image_sizes: crate::workload::images::ImageSizes::default(),
            multi_turn: None,
            sessions: None,
            dataset: None,
            requests_per_level: RequestCount::Fixed(8),
            open_loop: OpenLoop::default(),
            warmup_requests: 1,
            long_context: vec![],
            long_context_output_len: 16,
            long_context_repeats: 1,
            tokenizer: None,
            temperature: 0.0,
            first_token_timeout_s: 30.0,
            idle_timeout_s: 30.0,
            grace_s: 1.0,
            slo: None,
            slo_tiers: Vec::new(),
            seed: 0,
            out_dir: PathBuf::new(),
            api_key_env: "SERVETOP_API_KEY".into(),
            record_chunks: false,
            metrics_url: None,
            no_metrics: false,
            dcgm_url: None,
            no_gpu: true,
            gpu_interval_s: 1.0,
            server_wait_s: 60.0,
            reset_cache: false,
            search: None,
            serve: None,
            chat: ChatExtras::default(),
            gpu_hour_cost: None,
            cost_per_hour: None,
            gpus: None,
            trace: None,
            repeat: 1,
            thinking_budgets: Vec::new(),
            extra_body: None,
            headers: Vec::new(),
            clock: LevelClock::default(),
            shard: None,
        }
    }

    /// The SLO search this run asks for, with the shape of its probes' requests.
    pub fn search_plan(&self) -> Option<crate::workload::search::SearchPlan> {
        use crate::workload::search::SearchTarget;
        let (config, slo) = self.search.clone().zip(self.slo)?;
        let sessions = self
            .sessions
            .clone()
            .filter(|_| config.target == SearchTarget::Concurrency);
        Some(crate::workload::search::SearchPlan {
            config,
            slo,
            input_tokens: self.input_len,
            output_tokens: self.output_len,
            shared_prefix_tokens: self.shared_prefix_len,
            mix: self.request_mix(),
            open_loop: self.open_loop.clone(),
            sessions,
        })
    }

    /// What the sweep's, rate and search levels mix into their requests.
    pub fn request_mix(&self) -> crate::workload::mix::RequestMix {
        crate::workload::mix::RequestMix {
            range_ratio: self.range_ratio.filter(|&r| r > 0.0),
            lora: self.lora_mix(),
            // Constrained twins are added to the plan level by level (`levels::twins`).
            response_format: None,
            images: self.image_mix(),
            shape_mix: self.shape_mix.clone(),
            lognormal_sigma: self.lognormal_sigma,
        }
    }

    /// The images every sweep, rate and search request carries (`--images`), if any.
    pub fn image_mix(&self) -> Option<crate::workload::images::ImageMix> {
        (self.images > 0).then(|| crate::workload::images::ImageMix {
            per_request: self.images,
            sizes: self.image_sizes.clone(),
        })
    }

    /// The adapters every level's requests name (`--lora-modules`), if any.
    pub fn lora_mix(&self) -> Option<crate::workload::mix::LoraMix> {
        (!self.lora_modules.is_empty()).then(|| crate::workload::mix::LoraMix {
            modules: self.lora_modules.clone(),
            dist: self.lora_dist,
        })
    }

    /// The planned levels ([`crate::workload::levels::build`]).
    pub fn levels(&self) -> Vec<LevelSpec> {
        let mix = self.request_mix();
        let lora = self.lora_mix();
        crate::workload::levels::build(&Dimensions {
            concurrency: &self.concurrency,
            open_loop: &self.open_loop,
            input_len: self.input_len,
            output_len: self.output_len,
            requests: self.requests_per_level,
            long_context: &self.long_context,
            long_context_output: self.long_context_output_len,
            long_context_repeats: self.long_context_repeats,
            shared_prefix_len: self.shared_prefix_len,
            mix: &mix,
            lora: lora.as_ref(),
            multi_turn: self.multi_turn,
            sessions: self.sessions.as_ref(),
            trace: self.trace.as_ref(),
            response_format: self.response_format.as_ref(),
            content: &self.content,
            categories: &self.categories,
            shapes: &self.shapes,
            thinking_budgets: &self.thinking_budgets,
            repeat: self.repeat,
            level_seconds: self.clock.level_seconds,
            shard: self.shard,
        })
    }

    /// `1000 in / 500 out tokens`, or where the prompts come from when a dataset sets them;
    /// with `--images`, what each request carries besides.
    pub fn lengths_label(&self) -> String {
        let label = match self.image_mix() {
            Some(m) => format!(
                "{}, {} image{} of {} a request",
                self.text_lengths_label(),
                m.per_request,
                if m.per_request == 1 { "" } else { "s" },
                m.sizes.describe()
            ),
            None => self.text_lengths_label(),
        };
        if self.natural_stop {
            format!("{label}; natural stops: the output length a cap")
        } else {
            label
        }
    }

    /// ` ±50%` or `, log-normal σ 0.5`: how each drawn shape is spread, if it is.
    fn spread_label(&self) -> String {
        match (self.lognormal_sigma, self.request_mix().range_ratio) {
            (Some(s), _) => format!(", log-normal σ {}", crate::fmt::fmt_rate(s)),
            (None, Some(r)) => format!(" ±{}%", crate::fmt::fmt_rate(r * 100.0)),
            (None, None) => String::new(),
        }
    }

    /// The fewest input tokens a sweep or rate request may have: the shortest shape (or
    /// `input_len`), less a spread's lowest draw.
    pub fn shortest_sweep_input(&self) -> u64 {
        let base = self
            .shapes
            .iter()
            .copied()
            .chain(self.shape_mix.iter().map(|w| w.shape))
            .map(|s| s.input_len)
            .min()
            .unwrap_or(self.input_len);
        match (self.lognormal_sigma, self.request_mix().range_ratio) {
            (Some(s), _) => crate::workload::mix::lognormal_bounds(base, s, 1).0,
            (None, Some(r)) => crate::workload::mix::bounds(base, r, 1).0,
            (None, None) => base,
        }
    }

    fn text_lengths_label(&self) -> String {
        if let Some(t) = &self.trace {
            let name = t.path.file_name().map_or_else(
                || t.path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            // Read back from results.json, the trace itself is not there: its name only.
            return match t.loaded.as_ref().map(|l| l.mean_lengths()) {
                Some((i, o)) => format!("trace {name}, mean {i} in / {o} out tokens"),
                None => format!("trace {name}"),
            };
        }
        if !self.shapes.is_empty() {
            let list: Vec<String> = self.shapes.iter().map(|s| s.label()).collect();
            let spread = self
                .request_mix()
                .range_ratio
                .map_or_else(String::new, |r| {
                    format!(" ±{}%", crate::fmt::fmt_rate(r * 100.0))
                });
            return format!("shapes {} in/out tokens{spread}", list.join(", "));
        }
        if !self.shape_mix.is_empty() {
            let spread = self.spread_label();
            return format!(
                "a mix of {} in/out tokens{spread}",
                crate::workload::shapes::WeightedShape::describe(&self.shape_mix)
            );
        }
        if let Some(s) = self.lognormal_sigma {
            let (il, ih) = crate::workload::mix::lognormal_bounds(
                self.input_len,
                s,
                self.shared_prefix_len + 1,
            );
            let (ol, oh) = crate::workload::mix::lognormal_bounds(u64::from(self.output_len), s, 1);
            return format!(
                "{} in / {} out tokens, log-normal σ {}: {il}-{ih} in, {ol}-{oh} out",
                self.input_len,
                self.output_len,
                crate::fmt::fmt_rate(s)
            );
        }
        match &self.dataset {
            Some(p) => format!(
                "prompts from {}",
                p.file_name().map_or_else(
                    || p.display().to_string(),
                    |n| n.to_string_lossy().into_owned()
                )
            ),
            None => match self.request_mix().range_ratio {
                Some(r) => {
                    let (il, ih) =
                        crate::workload::mix::bounds(self.input_len, r, self.shared_prefix_len + 1);
                    let (ol, oh) = crate::workload::mix::bounds(u64::from(self.output_len), r, 1);
                    format!(
                        "{} in / {} out tokens ±{}%: {il}-{ih} in, {ol}-{oh} out",
                        self.input_len,
                        self.output_len,
                        crate::fmt::fmt_rate(r * 100.0)
                    )
                }
                None => format!("{} in / {} out tokens", self.input_len, self.output_len),
            },
        }
    }
}
