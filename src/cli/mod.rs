//! Command line (clap derive). Each flag's doc says what it does to the measurement.
//!
//! `run`'s flags are one struct per `--help` heading (`run_args/`, `outputs.rs`, `trace.rs`,
//! `shard.rs`), flattened into `RunArgs`; `tune` flattens `RunArgs` in turn.
//!
//! The doc comments here are `--help` text, written for a terminal: `<run dir>` and `[DONE]`
//! mean what they say there, not HTML tags or links.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

pub mod config;
mod outputs;
mod run_args;
mod serve_param;
mod shard;
mod trace;
mod values;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::grammar::parse_percent as percent;
pub use outputs::OutputArgs;
pub use run_args::{
    PlanArgs, RunArgs, ServerArgs, SloArgs, TelemetryArgs, TimeoutArgs, WorkloadArgs,
};
pub use shard::ShardArgs;
pub use trace::TraceArgs;
pub use values::{Budgets, List, Names, Rates, parse_size};
use values::{count, list, names, parse_cells};

/// servetop: live dashboard and headless runner for LLM-serving benchmarks.
#[derive(Debug, Parser)]
#[command(name = "servetop", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// `run -h` and `--help` end with these: the default plan against each engine.
const RUN_EXAMPLES: &str = "\
Examples (the default plan: C=1..100, 1000 in / 500 out, then 30K, 60K, 100K):
  servetop run --base-url http://127.0.0.1:30000   # SGLang (--enable-metrics)
  servetop run --base-url http://127.0.0.1:8000    # vLLM
  servetop run --base-url http://127.0.0.1:8080    # llama-server --metrics
  servetop run --base-url URL --dry-run            # the plan only
  servetop demo                                    # no server: the simulator
  # servetop starts vLLM, restarted with more context for lengths that need it:
  servetop run --serve \\
      'vllm serve M --port {port} --max-model-len {context_len}'
--help lists every flag, grouped.";

/// `tune -h` ends with these.
const TUNE_EXAMPLES: &str = "\
Examples:
  # which slot count and batch size serve the most requests with TTFT p90 under 2 s?
  servetop tune --serve 'vllm serve M --port {port}' \\
      --serve-param=--max-num-seqs=16,32,64 --serve-param=--max-num-batched-tokens=2048,8192 \\
      --slo ttft:2000,tpot:50
  servetop tune --serve 'llama-server -m m.gguf --port {port}' --serve-param=-np=1..4 \\
      --slo ttft:1000 --input-len 512 --output-len 128
  servetop tune --resume runs/tune-…           # go on with an interrupted tune
Each configuration: one server start, a C=1 level (--concurrency), then the search for the
highest request rate meeting --slo; a configuration failing at the best rate so far is
stopped there (--no-early-stop measures every one).";

/// `attach -h` ends with these.
const ATTACH_EXAMPLES: &str = "\
Examples:
  servetop attach                      # the newest run going on for this user
  servetop attach --list               # every run going on
  servetop attach runs/20261203-…      # a run going on, or a finished one to browse
  # from a laptop, over SSH, to a run's socket on the server:
  ssh -N -L 7700:/path/to/run/live.sock user@server &
  servetop attach --connect 127.0.0.1:7700
In the viewer q, Ctrl-C and d leave it (the run goes on); X stops the run, asking first.";

// Parsed once at startup: the size of the `run` flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark a running server: concurrency sweep, request-rate sweep (when asked), then
    /// long-context ladder.
    #[command(after_help = RUN_EXAMPLES, after_long_help = RUN_EXAMPLES)]
    Run(RunArgs),
    /// Serve the built-in simulated inference server (OpenAI-compatible, labelled simulated).
    Sim(SimArgs),
    /// Start the simulator as a child process and benchmark it: the whole tool with no GPU or
    /// model.
    Demo(DemoArgs),
    /// Print what the GPU sampler sees (NVML on this host).
    Gpu(GpuArgs),
    /// Re-render charts, CSV and summary.md from saved run directories; several overlay.
    Report(ReportArgs),
    /// Watch a run going on (started anywhere, headless or detached) in the dashboard, or
    /// browse a finished one. Leaving the viewer never stops the run.
    #[command(after_help = ATTACH_EXAMPLES)]
    Attach(AttachArgs),
    /// Find the server configuration that serves the most requests within an SLO: one server
    /// per --serve-param combination, each searched for its SLO capacity.
    #[command(after_help = TUNE_EXAMPLES, after_long_help = TUNE_EXAMPLES)]
    Tune(TuneArgs),
    /// Benchmark: a long run against the simulator with mixed faults, sampling the memory of
    /// the client and the simulator (for developers; not part of the tests).
    Soak(SoakArgs),
    /// Benchmark: the client's capacity, timing accuracy and memory against the firehose
    /// simulator on this machine (for developers; not part of the tests).
    BenchClient(BenchClientArgs),
    /// One case of bench-client, in its own process (internal).
    #[command(hide = true)]
    BenchCase(BenchCaseArgs),
}

/// `servetop tune`: `run`'s flags (its plan, SLO, outputs and server), with a C=1 level and no
/// long-context ladder by default, and the tune's own.
#[derive(Debug, Args, Clone)]
#[command(
    mut_arg("concurrency", |a| a.default_value("1")),
    mut_arg("long_context", |a| a.default_value("none")),
    mut_arg("slo", |a| a.required_unless_present("resume")),
    mut_arg("serve", |a| a.required_unless_present("resume")),
)]
pub struct TuneArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Search every configuration to its end, even one that fails at the best capacity so
    /// far (slower; each capacity then stands alone).
    #[arg(long, help_heading = "Tune")]
    pub no_early_stop: bool,
}

#[derive(Debug, Args, Clone)]
pub struct AttachArgs {
    /// The run directory [default: the newest run going on for this user].
    #[arg(value_name = "RUN_DIR", conflicts_with_all = ["list", "connect"])]
    pub run_dir: Option<PathBuf>,
    /// List the runs going on for this user, newest first.
    #[arg(long)]
    pub list: bool,
    /// Read a run's live feed at ADDR (`HOST:PORT`): a run's `--live-listen`, or its
    /// live.sock forwarded with `ssh -L PORT:/path/live.sock`. Such a viewer only watches.
    #[arg(long, value_name = "ADDR")]
    pub connect: Option<String>,
    /// Dashboard frames per second.
    #[arg(long, default_value = "10")]
    pub fps: f64,
}

#[derive(Debug, Args, Clone)]
pub struct BenchClientArgs {
    /// Capacity cases: concurrent streams.
    #[arg(long, value_name = "LIST", default_value = "1,100,1000,4000", value_parser = list)]
    pub concurrency: List,
    /// Capacity cases: SSE events per socket write.
    #[arg(long, value_name = "LIST", default_value = "1,16", value_parser = list)]
    pub events_per_write: List,
    /// With the dashboard drawing at 10 fps (off screen), headless, or both.
    #[arg(long, value_delimiter = ',', default_value = "headless,dashboard", value_parser = ["headless", "dashboard"])]
    pub ui: Vec<String>,
    /// Prompt tokens per request.
    #[arg(long, default_value = "32")]
    pub input_len: u64,
    /// Capacity cases: output tokens per request.
    #[arg(long, default_value = "256")]
    pub output_len: u32,
    /// Capacity cases: requests per stream (C × this, at least --min-requests and enough for
    /// --min-tokens).
    #[arg(long, default_value = "4")]
    pub requests_per_stream: u32,
    #[arg(long, default_value = "400")]
    pub min_requests: u32,
    /// Capacity cases: output tokens each case reads at least (a case of a tenth of a second
    /// measures the machine's hiccups more than the client).
    #[arg(long, default_value = "4000000")]
    pub min_tokens: u64,
    /// Accuracy cases: concurrent streams, paced by --pace-ms.
    #[arg(long, value_name = "LIST", default_value = "100,1000", value_parser = list)]
    pub accuracy_concurrency: List,
    /// Accuracy cases: milliseconds between one stream's writes (a decode step).
    #[arg(long, default_value = "20")]
    pub pace_ms: f64,
    /// Accuracy cases: output tokens per request.
    #[arg(long, default_value = "50")]
    pub accuracy_output_len: u32,
    /// Wave cases: concurrent streams paced like the accuracy cases, run for --waves closed-loop
    /// waves that end and start together ("none" skips them).
    #[arg(long, value_name = "LIST", default_value = "1000", value_parser = list)]
    pub wave_concurrency: List,
    /// Wave cases: waves per case.
    #[arg(long, default_value = "3")]
    pub waves: u32,
    /// Agent cases: users at once, each running one session of --agent-turns turns on the chat
    /// endpoint, paced like the accuracy cases, with a tool wait before each turn after the
    /// first ("none" skips them).
    #[arg(long, value_name = "LIST", default_value = "1000", value_parser = list)]
    pub agent_sessions: List,
    /// Agent cases: turns a session.
    #[arg(long, default_value = "4", value_parser = clap::value_parser!(u32).range(1..))]
    pub agent_turns: u32,
    /// Agent cases: the tool wait before each turn after the first, as `run --tool-wait` takes
    /// it (the default keeps most users waiting on a tool at any moment: a turn streams for
    /// about a second).
    #[arg(long, value_name = "DIST", default_value = "exp:4")]
    pub agent_tool_wait: String,
    /// Memory case: prompt tokens at C=100 (0 skips it).
    #[arg(long, default_value = "100000")]
    pub long_context_tokens: u64,
    /// Run everything this many times; the table shows medians.
    #[arg(long, default_value = "1")]
    pub repeat: u32,
    /// Do not pin the firehose and the client to separate CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// Print the table's rows as JSON objects instead.
    #[arg(long)]
    pub json: bool,
    /// Where each case's run directory and bench-client.json go, not where a bench-client run
    /// is already [default: runs/<UTC time>-bench-client/].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct BenchCaseArgs {
    #[arg(long)]
    pub url: String,
    #[arg(long)]
    pub kind: String,
    #[arg(long)]
    pub ui: String,
    #[arg(long)]
    pub concurrency: u32,
    #[arg(long)]
    pub events_per_write: u32,
    #[arg(long)]
    pub input_len: u64,
    #[arg(long)]
    pub output_len: u32,
    #[arg(long)]
    pub requests: u32,
    #[arg(long)]
    pub record_chunks: bool,
    /// Agent cases: turns a session (0: not an agent case).
    #[arg(long, default_value = "0")]
    pub turns: u32,
    /// Agent cases: the tool wait before each turn after the first.
    #[arg(long)]
    pub tool_wait: Option<String>,
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, Args, Clone)]
pub struct SoakArgs {
    /// How long the run goes on.
    #[arg(long, default_value = "60")]
    pub minutes: f64,
    /// Concurrent requests.
    #[arg(long, default_value = "100")]
    pub concurrency: u32,
    /// Faults for the simulator, as for `servetop sim --inject`.
    #[arg(
        long,
        default_value = "http500=0.01,http429=0.01,ctx400=0.005,reset-mid=0.01,malformed=0.005,stall=0.005,stall-s=3,slow-first=0.005,slow-first-s=3,error-event=0.005,reset-before=0.005,restart=900,down-s=5"
    )]
    pub inject: String,
    /// Seconds between memory readings.
    #[arg(long, default_value = "30")]
    pub sample_s: f64,
    /// Prompt tokens per request.
    #[arg(long, default_value = "256")]
    pub input_len: u64,
    /// Output tokens per request.
    #[arg(long, default_value = "64")]
    pub output_len: u32,
    /// The simulator's decode step.
    #[arg(long, default_value = "20")]
    pub decode_step_ms: f64,
    /// Where sim.log, run/ and soak.json go [default: runs/<UTC time>-soak/].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// Run directories (each with results.json).
    #[arg(required_unless_present = "merge", value_name = "DIR")]
    pub dirs: Vec<std::path::PathBuf>,
    /// Make one run of the shards of a sharded run (`run --shard I/N`), each one's run
    /// directory: every level's percentiles from the union of their request records, its
    /// throughput over their common window, into --out [default: runs/<time>-merged/].
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with_all = ["dirs", "baseline", "screenshots"])]
    pub merge: Vec<std::path::PathBuf>,
    /// Legend label for each directory, in order [default: the directory name].
    #[arg(long = "label", value_name = "LABEL")]
    pub labels: Vec<String>,
    /// Where a comparison goes [default: the run directory itself for one run,
    /// runs/<time>-compare/ for several].
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    /// Chart size in pixels.
    #[arg(long, value_name = "WxH", default_value = "1600x900", value_parser = parse_size)]
    pub chart_size: (u32, u32),
    /// Write report.html alone: one self-contained page (findings, tables, interactive
    /// charts, the requests over time) into --out [default: the run directory for one run,
    /// runs/<time>-compare/ for several]; no chart, CSV or summary.md is rewritten.
    #[arg(long, conflicts_with_all = ["merge", "baseline", "screenshots"])]
    pub html: bool,
    /// The deployment's GPU count, for the per-GPU figures of runs where servetop saw no GPU
    /// (the trade-off chart); a GPU count servetop saw counts first.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus: Option<u32>,
    /// Also write PNG screenshots of every dashboard tab into <DIR>/screenshots/ (one run).
    #[arg(long)]
    pub screenshots: bool,
    /// Terminal size of the screenshots, in cells.
    #[arg(long, value_name = "COLSxROWS", default_value = "160x48", value_parser = parse_cells)]
    pub screenshot_size: (u16, u16),
    /// Compare the run (one directory) with a previous one instead: print each level's change
    /// (out tok/s, TTFT p50, TPOT p50); nothing is rewritten.
    #[arg(
        long,
        value_name = "RUN_DIR_OR_RESULTS_JSON",
        conflicts_with = "screenshots"
    )]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit with code 3 when a level is worse than the baseline's by more
    /// than PCT percent.
    #[arg(long, value_name = "PCT", requires = "baseline", value_parser = percent)]
    pub fail_on_regression: Option<f64>,
}

#[derive(Debug, Args, Clone)]
pub struct GpuArgs {
    /// One reading, then exit (otherwise one per --interval until Ctrl-C).
    #[arg(long)]
    pub once: bool,
    /// JSON: {"available", "reason", "source", "gpus": [...]}.
    #[arg(long)]
    pub json: bool,
    /// Seconds between readings.
    #[arg(long, value_name = "S", default_value = "1")]
    pub interval: f64,
}

// Each bool is an on/off command-line switch, not state.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args, Clone)]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0 picks a free one).
    #[arg(long, default_value = "8000")]
    pub port: u16,
    /// Starting point for every number below: hybrid-27b-2x48g-mtp (alias brief) or fast.
    #[arg(long, default_value = "hybrid-27b-2x48g-mtp")]
    pub preset: String,
    /// Model name served.
    #[arg(long)]
    pub model: Option<String>,
    /// Requests decoded at once; more wait in a FIFO queue (their wait shows up as TTFT).
    #[arg(long, value_name = "N")]
    pub max_running: Option<u32>,
    /// Prefill speed: a prompt of N tokens takes N / X seconds before its first token.
    #[arg(long, value_name = "X")]
    pub prefill_tokens_per_s: Option<f64>,
    /// Decode step at batch 1 and short context (one chunk per step).
    #[arg(long, value_name = "MS")]
    pub decode_step_ms: Option<f64>,
    /// Step growth per extra running request, as a fraction of the step: ×(1 + G·(B−1)).
    #[arg(long, value_name = "G")]
    pub batch_growth: Option<f64>,
    /// Step growth per 1000 tokens of context held by the running batch.
    #[arg(long, value_name = "MS")]
    pub context_ms_per_1k: Option<f64>,
    /// Tokens per decode step: 4 (exactly 4 every step), 3.5 (3 or 4, mean 3.5), or per-position
    /// draft acceptance rates 0.9,0.8,0.6.
    #[arg(long, value_name = "X")]
    pub accept_length: Option<String>,
    /// Longest prompt + output per request; longer ones get a 400 like vLLM's.
    #[arg(long, value_name = "N", value_parser = count)]
    pub context_length: Option<u64>,
    /// Ignore `stream_options.continuous_usage_stats` (forces the client's chunk estimate).
    #[arg(long)]
    pub no_continuous_usage: bool,
    /// Seed of the accept-length draws.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Metric names on /metrics: sglang, vllm, or none (no endpoint).
    #[arg(long, value_name = "NAME")]
    pub flavor: Option<String>,
    /// Simulated GPUs served on /dcgm/metrics in DCGM-exporter format (0: none).
    #[arg(long, value_name = "N")]
    pub gpus: Option<u32>,
    /// Memory of each simulated GPU.
    #[arg(long, value_name = "GB")]
    pub gpu_mem_gb: Option<f64>,
    /// KV-cache capacity in tokens, shared by the running requests' KV and the prefix cache:
    /// the cached blocks no request holds are evicted least recently used first when a running
    /// request or the cache needs room (each eviction recorded on /sim/requests).
    #[arg(long, value_name = "N", value_parser = count)]
    pub kv_capacity_tokens: Option<u64>,
    /// Turn the simulated prefix cache off (on by default, as in vLLM and SGLang): every prompt
    /// is prefilled whole, however much of it an earlier request shared.
    #[arg(long)]
    pub no_prefix_cache: bool,
    /// Write the events of K decode steps to a stream together, after its first token (default
    /// 1), as a busy API server does: the client then receives runs of events at once.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub write_batch: Option<u32>,
    /// Hold each stream this long after its last token, before the usage chunk and [DONE]
    /// (default 0): latency ends at the last token, so E2E and TPOT must not move.
    #[arg(long, value_name = "MS")]
    pub trailer_delay_ms: Option<f64>,
    /// Chat answers think N tokens first (streamed as `reasoning_content` with SGLang's
    /// flavor, as vLLM's `reasoning` with `completion_tokens_details.reasoning_tokens`
    /// otherwise), then answer; a request's `thinking_token_budget` (vLLM's field) thinks at
    /// most that. Default 0: no reasoning.
    #[arg(long, value_name = "N")]
    pub reasoning_tokens: Option<u64>,
    /// A chat request that offers `tools` gets N tool calls (`tool_calls` deltas) after any
    /// reasoning, its answer tokens split over them. Default 0.
    #[arg(long, value_name = "N")]
    pub tool_calls: Option<u32>,
    /// LoRA adapters to serve besides the base model (NAME,NAME,…): a request names one as its
    /// `model` (vLLM) or `lora_path` (SGLang); an unknown name gets vLLM's 404.
    #[arg(long, value_name = "NAMES", default_value = "", value_parser = names)]
    pub lora_modules: Names,
    /// Engine time each request of an adapter costs at its prefill, in ms (NAME=MS,…): its
    /// first token comes that much later and the batch waits with it.
    #[arg(long, value_name = "NAME=MS,...")]
    pub lora_switch_ms: Option<String>,
    /// Structured output's cost: each decode step carrying a constrained request (JSON object,
    /// schema or regex) takes MS more. Constrained answers are the schema's smallest instance,
    /// padded to the tokens asked for (a regex's: plain words).
    #[arg(long, value_name = "MS")]
    pub structured_step_ms: Option<f64>,
    /// A constrained request's mean accept length with speculative decoding (its grammar
    /// rejects drafts), in place of --accept-length's. Default: the same.
    #[arg(long, value_name = "N")]
    pub structured_accept_length: Option<f64>,
    /// Mean accept length by the kind of a request's prompt (KIND=N,…: code, math, chat,
    /// summary, json, random), in place of --accept-length's. The kind is told from the marker
    /// `servetop run --content` prompts open with (`Task (code):`); a prompt without one is
    /// `random`'s. The draft is as wide as the largest needs.
    #[arg(long, value_name = "KIND=N,...")]
    pub accept_by_content: Option<String>,
    /// Simulated non-compliance: every K-th constrained request is answered with one that fails
    /// its constraint (`[]` for a JSON object, a schema's instance less a required property, a
    /// `!` before a regex's plain words), marked `structured_invalid` in /sim/requests.
    /// Default 0: every answer complies.
    #[arg(long, value_name = "K")]
    pub structured_invalid_every: Option<u32>,
    /// Images in chat messages (PNG data URLs) take ⌈W/28⌉·⌈H/28⌉ prompt tokens each, and each
    /// costs MS of engine time at its request's prefill (the vision encoder). Default 0.
    #[arg(long, value_name = "MS")]
    pub image_ms: Option<f64>,
    /// Answers end on their own: a request without `ignore_eos` (and without a constraint)
    /// ends at a length drawn around this median (log-normal, σ 0.5), finish reason `stop`, or
    /// at its `max_tokens` if that comes first. Default 0: the model never ends on its own.
    #[arg(long, value_name = "TOKENS")]
    pub natural_len: Option<u64>,
    /// Watts each simulated GPU (--gpus) draws while the engine waits (default 80); the
    /// reported power follows the load, the energy counter integrates it exactly.
    #[arg(long, value_name = "W")]
    pub gpu_idle_w: Option<f64>,
    /// Watts each simulated GPU (--gpus) draws while the engine steps (default 350).
    #[arg(long, value_name = "W")]
    pub gpu_busy_w: Option<f64>,
    /// Require this key as `Authorization: Bearer KEY` on /v1/* (as vLLM's --api-key), read
    /// from the environment variable named here.
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Inject faults, each a probability per request: http500, http429, ctx400, reset-mid,
    /// malformed, stall, slow-first, error-event; per new connection: reset-before; durations
    /// stall-s and slow-first-s. restart=S takes the server down every S seconds (listener
    /// closed, streams cut) for down-s seconds, as a crashed and restarted process would.
    /// Example: http500=0.05,stall=0.02,stall-s=10,restart=120,down-s=5
    #[arg(long, value_name = "KIND=RATE,...")]
    pub inject: Option<String>,
    /// Serve the firehose instead of the engine model: tokens as fast as the socket takes them
    /// (or one write every --decode-step-ms), for measuring the client itself. Serves
    /// /v1/completions, /v1/models, /tokenize and /health only.
    #[arg(long)]
    pub firehose: bool,
    /// Firehose: SSE token events per socket write (1 = a flush per token; 16 = batched).
    #[arg(long, value_name = "N", default_value = "1")]
    pub events_per_write: u32,
    /// Firehose: keep the time of every write per X-Request-Id, served at GET /firehose/writes.
    #[arg(long)]
    pub record_writes: bool,
}

#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    #[command(flatten)]
    pub output: OutputArgs,
    /// `--trace` replays the trace against the simulator instead of the demo's plan
    /// (examples/data has a Mooncake and an Azure sample).
    #[command(flatten)]
    pub trace: TraceArgs,
}
