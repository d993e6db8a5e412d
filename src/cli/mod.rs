//! Command line (clap derive). Each flag's doc says what it does to the measurement.
//!
//! The doc comments here are `--help` text, written for a terminal: `<run dir>` and `[DONE]`
//! mean what they say there, not HTML tags or links.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

pub mod config;
mod shard;
mod trace;
mod values;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::BackendChoice;
use crate::grammar::parse_percent as percent;
pub use shard::ShardArgs;
pub use trace::TraceArgs;
pub use values::{Budgets, List, Names, Rates, parse_size};
use values::{budgets, count, count_u32, list, names, parse_cells, range_ratio, rates};

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
    /// Start the simulator in-process and benchmark it: the whole tool with no GPU or model.
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
    /// Where each case's run directory and bench-client.json go [default: runs/<UTC time>-bench-client/].
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

/// Options shared by `run` and `demo`.
#[derive(Debug, Args, Clone)]
pub struct OutputArgs {
    /// Run directory (default: runs/<UTC time>-<model>/).
    ///
    /// Run directory for requests.jsonl, results.json and summary.md
    /// [default: runs/<UTC time>-<model>/].
    #[arg(long, value_name = "DIR", help_heading = "Outputs")]
    pub out: Option<PathBuf>,
    /// Progress lines instead of the dashboard.
    ///
    /// Print progress lines and tables instead of the dashboard (automatic when stdout is not a
    /// terminal).
    #[arg(long, help_heading = "Outputs")]
    pub headless: bool,
    /// Dashboard frames per second (lower it over a slow link).
    #[arg(
        long,
        default_value = "10",
        help_heading = "Outputs",
        hide_short_help = true
    )]
    pub fps: f64,
    /// Serve servetop's own Prometheus metrics at `http://ADDR/metrics` while the run goes
    /// (`servetop_` requests by outcome, tokens, TTFT/ITL/TPOT/E2E histograms, in flight,
    /// level), e.g. 0.0.0.0:9464 or just 9464.
    #[arg(
        long,
        value_name = "ADDR",
        help_heading = "Outputs",
        hide_short_help = true
    )]
    pub metrics_listen: Option<String>,
    /// Also serve the run's live feed on TCP at ADDR (`HOST:PORT`, or a port on 127.0.0.1), for
    /// `servetop attach --connect ADDR`. Read-only: stopping, pausing and skipping are for
    /// viewers on the run directory's live.sock. The feed has no API key in it; anyone who can
    /// reach ADDR can watch the run.
    #[arg(
        long,
        value_name = "ADDR",
        help_heading = "Outputs",
        hide_short_help = true
    )]
    pub live_listen: Option<String>,
    /// Size of the PNG charts written into <run dir>/charts/.
    #[arg(long, value_name = "WxH", default_value = "1600x900", value_parser = parse_size, help_heading = "Outputs", hide_short_help = true)]
    pub chart_size: (u32, u32),
    /// Compare with a previous run (directory or results.json).
    ///
    /// Compare against a previous run: its run directory or its results.json. Its curves are
    /// drawn dimmed beside this run's, the tables get Δ% columns (out tok/s, TTFT p50, TPOT
    /// p50) for the levels both runs measured, and results.json and summary.md keep each
    /// level's change.
    #[arg(long, value_name = "RUN_DIR_OR_RESULTS_JSON", help_heading = "Outputs")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit with code 3 when a level is worse than the baseline's by more
    /// than PCT percent (out tok/s lower, or TTFT or TPOT p50 higher), or the baseline
    /// measured it and this run did not.
    #[arg(long, value_name = "PCT", requires = "baseline", value_parser = percent, help_heading = "Outputs", hide_short_help = true)]
    pub fail_on_regression: Option<f64>,
}

// Each bool is an on/off command-line switch, not state.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Server root URL, without /v1 (`http://127.0.0.1:30000`).
    ///
    /// Server root URL, without /v1 (e.g. `http://127.0.0.1:30000`).
    #[arg(long, value_name = "URL", required_unless_present_any = ["resume", "serve"], help_heading = "Server")]
    pub base_url: Option<String>,
    /// Start the server too: `vllm serve M --port {port} …`.
    ///
    /// Start the server too: this command (run by `sh`), with `{port}` (a free port, unless the
    /// command fixes one with --port N) and `{context_len}` (--context-len) filled in, e.g.
    /// `vllm serve MODEL --port {port} --max-model-len {context_len}`. Its output goes to
    /// server.log in the run directory; it is stopped, with its whole process group, when
    /// servetop ends.
    #[arg(
        long,
        value_name = "CMD",
        conflicts_with = "base_url",
        help_heading = "Server"
    )]
    pub serve: Option<String>,
    /// Context limit of the --serve server, filled into `{context_len}`.
    ///
    /// The context limit of the server --serve starts, filled into `{context_len}`.
    #[arg(long, value_name = "N", requires = "serve", value_parser = count, help_heading = "Server")]
    pub context_len: Option<u64>,
    /// Contexts a --serve server may be restarted with when a long-context length does not fit
    /// (65536,131072 or 64k,128k): the first that holds the length. Without it, the smallest
    /// multiple of 1024 that does.
    #[arg(long, value_name = "LIST", requires = "serve", value_parser = list, help_heading = "Server", hide_short_help = true)]
    pub context_steps: Option<List>,
    /// Seconds to wait for the server --serve started to answer /health and /v1/models.
    #[arg(
        long,
        value_name = "S",
        default_value = "600",
        requires = "serve",
        help_heading = "Server",
        hide_short_help = true
    )]
    pub serve_timeout: f64,
    /// When the --serve server crashes or runs out of memory during a level, restart it once
    /// (same context) and go on; the level's requests stay failed. Without it the run stops
    /// there, saying how the server exited and its last log lines.
    #[arg(
        long,
        requires = "serve",
        help_heading = "Server",
        hide_short_help = true
    )]
    pub restart_on_crash: bool,
    /// Run the whole plan once per server configuration: NAME=V1,V2,... sets the --serve
    /// command's option NAME (replaced if the command has it, added if not) to each value;
    /// repeated, every combination. E.g. --serve-param=--max-num-seqs=64,128
    /// --serve-param=-np=1,2. A value may be a range: 1..8 (step 1), 0.80..0.90:0.05 (step),
    /// 1..64*2 (doubling). Each run gets a sub-directory, and the overlay comparison of all of
    /// them is written to the run directory.
    #[arg(
        help_heading = "Server",
        hide_short_help = true,
        long,
        value_name = "NAME=V1,V2",
        requires = "serve",
        allow_hyphen_values = true
    )]
    pub serve_param: Vec<String>,
    /// Request protocol (auto: /v1/completions, exact prompt lengths).
    ///
    /// Request protocol: auto picks /v1/completions (exact prompt lengths, no chat template).
    #[arg(long, value_enum, default_value = "auto", help_heading = "Server")]
    pub backend: BackendChoice,
    /// Model name to request (default: the server's first).
    ///
    /// Model name to request [default: the server's first model].
    #[arg(long, help_heading = "Server")]
    pub model: Option<String>,
    /// Closed-loop levels: 1,2,4 or 1-8 or 1-128*2, or none.
    ///
    /// Concurrency levels of the closed-loop sweep: a list (1,2,4,8), a range (1-8, 10-100/10,
    /// 1-128*2), or none.
    #[arg(long, value_name = "LIST", default_value = "1,2,4,8,16,32,64,100", value_parser = list, help_heading = "Plan")]
    pub concurrency: List,
    /// Open-loop request rates after the sweep (req/s), or none.
    ///
    /// Open-loop levels after the concurrency sweep, in requests/s: requests are sent on a
    /// precomputed schedule whether or not earlier ones finished (1,2,4,8; 0.5,1.5; 1-16*2; or
    /// none). Use `--concurrency none` for a rate sweep alone.
    #[arg(long, value_name = "LIST", default_value = "none", value_parser = rates, help_heading = "Plan")]
    pub request_rate: Rates,
    /// Gaps between arrivals at a rate level: gamma with this shape and mean 1/rate. 1 is
    /// Poisson; below 1 burstier (0.5 doubles the gap variance); above 1 more even.
    #[arg(
        long,
        value_name = "B",
        default_value = "1",
        help_heading = "Plan",
        hide_short_help = true
    )]
    pub burstiness: f64,
    /// Seconds over which each rate level's rate rises linearly from 0 to its target.
    #[arg(
        long,
        value_name = "S",
        default_value = "0",
        help_heading = "Plan",
        hide_short_help = true
    )]
    pub ramp_up: f64,
    /// Most requests in flight at a rate level; requests due beyond it wait in the client, and
    /// that wait is measured as client queue time (`t_send - t_sched`) [default: no cap].
    #[arg(long, value_name = "N", help_heading = "Plan", hide_short_help = true)]
    pub max_concurrency: Option<u32>,
    /// Run every level N times, interleaved (the whole plan, then again), and report each
    /// figure's mean and 95 % confidence interval across the runs (`ci95` in results.json, ±
    /// in the tables); a level whose runs disagree beyond their own intervals is flagged.
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        help_heading = "Plan",
        hide_short_help = true
    )]
    pub repeat: u32,
    #[command(flatten)]
    pub trace: TraceArgs,
    #[command(flatten)]
    pub clock: ShardArgs,
    /// Input tokens per sweep request (exact).
    ///
    /// Input tokens per sweep request (exact, counted with the server's tokenizer).
    #[arg(long, value_name = "N", default_value = "1000", value_parser = count, help_heading = "Plan")]
    pub input_len: u64,
    /// Leading tokens of --input-len that every sweep, rate and multi-turn prompt shares (a
    /// common system prompt), so the server's prefix cache can serve them; the rest of each
    /// prompt stays unique. 0: every prompt is unique from its first token.
    #[arg(long, value_name = "N", default_value = "0", value_parser = count, help_heading = "Workload", hide_short_help = true)]
    pub shared_prefix_len: u64,
    /// Spread each request's input and output lengths by ±R (0 ≤ R < 1).
    ///
    /// Draw each sweep and rate request's input and output lengths uniformly from
    /// [⌊(1−R)·L⌋, ⌈(1+R)·L⌉] around --input-len and --output-len, as vLLM's
    /// --random-range-ratio does; prompts stay exact, and the lengths are the same for a given
    /// --seed at every level. The long-context ladder and multi-turn chats keep their lengths.
    #[arg(long, value_name = "R", value_parser = range_ratio, help_heading = "Workload", hide_short_help = true)]
    pub range_ratio: Option<f64>,
    /// LoRA adapters to name, one per request (NAME,NAME,…).
    ///
    /// LoRA adapters the server serves, named as it knows them (vLLM's --lora-modules names):
    /// each request names one, dealt by --lora-dist, in the field the engine reads (vLLM and
    /// others: `model`; SGLang: `lora_path`). Every level's figures are then also given per
    /// adapter.
    #[arg(long, value_name = "NAMES", default_value = "", value_parser = names, help_heading = "Workload", hide_short_help = true)]
    pub lora_modules: Names,
    /// How requests are dealt over --lora-modules: uniform, round-robin or zipf:S.
    ///
    /// How requests are dealt over --lora-modules: `uniform` (each drawn with equal chances, as
    /// vLLM's bench does), `round-robin` (request i names adapter i mod n) or `zipf:S` (the k-th
    /// adapter given drawn with a chance proportional to 1/k^S: a few hot, a long tail). The
    /// same requests name the same adapters at every level for a given --seed.
    #[arg(long, value_name = "DIST", default_value = "uniform", value_parser = crate::workload::mix::LoraDist::parse, help_heading = "Workload", hide_short_help = true)]
    pub lora_dist: crate::workload::mix::LoraDist,
    /// Images in each request (through the chat endpoint); 0: text only.
    ///
    /// Images in each sweep, rate and search request, sent through the chat endpoint as base64
    /// PNG data URLs in the user message (as vLLM, SGLang and llama-server take them): random
    /// pixels, generated from --seed and the request's number, no two alike. The prompt's text
    /// stays exact; the image tokens are read from the server's usage and reported apart.
    #[arg(
        long,
        value_name = "N",
        default_value = "0",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub images: u32,
    /// The images' size: `WxH`, a list (each request draws one), or a range `WxH-WxH`.
    ///
    /// The images' size: `WxH`; a list `WxH,WxH,…` (each request's images all of one size,
    /// drawn with equal chances); or a range `WxH-WxH` (each request's width and height drawn
    /// uniformly between the two, its TTFT reported in four bands of pixel count).
    #[arg(
        long,
        value_name = "WxH[,WxH...]|WxH-WxH",
        default_value = "512x512",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub image_size: String,
    /// Run each level twice, without and with a constraint: json, json-schema FILE or regex P.
    ///
    /// Structured output: every sweep, rate and long-context level runs twice, first as
    /// planned and then with each request constrained to `json` (any JSON object),
    /// `json-schema FILE` (valid against the schema in FILE) or `regex PATTERN` (text the
    /// pattern matches whole), sent as the engine takes it (`response_format`, vLLM's
    /// `structured_outputs`, SGLang's `regex`). The constrained twin shows its overhead over the
    /// plain one (TTFT, TPOT, throughput) and the share of answers that comply.
    #[arg(long, value_name = "KIND [ARG]", num_args = 1..=2, help_heading = "Workload", hide_short_help = true)]
    pub response_format: Option<Vec<String>>,
    /// Prompts from a ShareGPT or JSONL file, not random text.
    ///
    /// Prompts from a file instead of random text: ShareGPT conversations (JSON array or JSON
    /// Lines, as `vllm bench serve` reads them) or `{"prompt": ..., "output_len": N}` per line.
    /// The first user message is the prompt and the reply's length the output length (else
    /// --output-len); a multi-turn level sends the conversation's user messages as its turns.
    /// Applies to the sweep, rate and multi-turn levels; the long-context ladder stays exact.
    #[arg(long, value_name = "PATH", help_heading = "Workload")]
    pub dataset: Option<PathBuf>,
    /// Add chats of K turns (what the prefix cache saves).
    ///
    /// Add a multi-turn level after the others: chats of K turns, each turn sent with the whole
    /// history (the earlier user messages and the server's real replies), to see what the prefix
    /// cache saves turn by turn. The first message has --input-len tokens (the shared prefix
    /// becomes a system message), the later ones --followup-len.
    #[arg(long, value_name = "K", help_heading = "Workload")]
    pub multi_turn: Option<u32>,
    /// Multi-turn: conversations to run.
    #[arg(
        long,
        value_name = "N",
        default_value = "16",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub conversations: u32,
    /// Multi-turn: conversations in progress at once (each sends its next turn as soon as the
    /// last reply ends).
    #[arg(
        long,
        value_name = "C",
        default_value = "4",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub conversation_concurrency: u32,
    /// Multi-turn: tokens of each follow-up user message.
    #[arg(long, value_name = "N", default_value = "64", value_parser = count, help_heading = "Workload", hide_short_help = true)]
    pub followup_len: u64,
    /// Output tokens per sweep request (`ignore_eos`).
    ///
    /// Output tokens per sweep request (sent with `ignore_eos` so every request generates them all).
    #[arg(long, value_name = "N", default_value = "500", value_parser = count_u32, help_heading = "Plan")]
    pub output_len: u32,
    /// Measured requests a level: N, or Fx for F × C.
    ///
    /// Measured requests per sweep level: a number, or a multiple of C like 3x (at least
    /// --min-requests); at a rate level Fx means F seconds' worth (F × rate requests).
    #[arg(long, value_name = "N|Fx", default_value = "3x", help_heading = "Plan")]
    pub requests_per_level: String,
    /// Fewest measured requests per level when --requests-per-level is a multiple of C.
    #[arg(
        long,
        value_name = "N",
        default_value = "10",
        help_heading = "Plan",
        hide_short_help = true
    )]
    pub min_requests: u32,
    /// Unmeasured warmup requests before the first level (also calibrate prompt lengths).
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        help_heading = "Plan",
        hide_short_help = true
    )]
    pub warmup: u32,
    /// Long-context lengths, one request at a time, or none.
    ///
    /// Input lengths of the long-context ladder, one request at a time (k = ×1000), or none.
    #[arg(long, value_name = "LIST", default_value = "30k,60k,100k", value_parser = list, help_heading = "Plan")]
    pub long_context: List,
    /// Output tokens per long-context request.
    ///
    /// Output tokens per long-context request.
    #[arg(long, value_name = "N", default_value = "256", value_parser = count_u32, help_heading = "Plan")]
    pub long_context_output_len: u32,
    /// Continue an interrupted run in DIR (new prompts).
    ///
    /// Continue an interrupted run in DIR from its first unfinished level, with the
    /// configuration it was started with (other measurement flags are ignored).
    #[arg(long, value_name = "DIR", help_heading = "Plan")]
    pub resume: Option<PathBuf>,
    /// Print the plan and exit without sending a request.
    ///
    /// Print the plan (levels, requests, lengths, and the lengths the server's context cannot
    /// hold) and exit without sending a request.
    #[arg(long, conflicts_with = "resume", help_heading = "Plan")]
    pub dry_run: bool,
    /// Start a plan of more than 20 levels without asking.
    ///
    /// Start a plan of more than 20 levels without asking (on a terminal servetop asks first;
    /// headless it only warns).
    #[arg(long, help_heading = "Plan")]
    pub yes: bool,
    /// Run in the background, with no terminal: it survives this SSH session, its output goes
    /// to <run dir>/run.log, and `servetop attach` watches it. Returns once the run has started.
    #[arg(long, conflicts_with = "dry_run", help_heading = "Outputs")]
    pub detach: bool,
    /// Requests per long-context length.
    #[arg(
        long,
        value_name = "N",
        default_value = "3",
        help_heading = "Plan",
        hide_short_help = true
    )]
    pub long_context_repeats: u32,
    /// A local tokenizer.json to size prompts and count chunk tokens when the server has no
    /// /tokenize.
    #[arg(
        long,
        value_name = "PATH",
        help_heading = "Server",
        hide_short_help = true
    )]
    pub tokenizer: Option<PathBuf>,
    /// Sampling temperature.
    #[arg(
        long,
        default_value = "0",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub temperature: f64,
    /// Offer these tools with every chat request: a JSON file of OpenAI tools (a list, or
    /// {"tools": [...]}), or `builtin` for three small ones. The streamed tool calls count as
    /// output; each request's calls and time to the first are recorded.
    #[arg(
        long,
        value_name = "FILE|builtin",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub tools: Option<String>,
    /// `tool_choice` sent with --tools: auto (default), required or none.
    #[arg(long, value_name = "CHOICE", requires = "tools", value_parser = ["auto", "required", "none"], help_heading = "Workload", hide_short_help = true)]
    pub tool_choice: Option<String>,
    /// USD per GPU hour: each level's cost per million output (and total) tokens, from its
    /// wall time and the GPUs sampled.
    #[arg(
        long,
        value_name = "USD",
        conflicts_with = "cost_per_hour",
        help_heading = "Telemetry and cost",
        hide_short_help = true
    )]
    pub gpu_hour_cost: Option<f64>,
    /// USD per hour for the whole deployment, instead of per GPU.
    #[arg(
        long,
        value_name = "USD",
        help_heading = "Telemetry and cost",
        hide_short_help = true
    )]
    pub cost_per_hour: Option<f64>,
    /// `chat_template_kwargs` for every chat request (SGLang, vLLM), e.g.
    /// `'{"enable_thinking": true}'`.
    #[arg(
        long,
        value_name = "JSON",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub chat_template_kwargs: Option<String>,
    /// Reasoning tokens a request may think for before the server closes its thinking, sent
    /// the way the engine takes it (vLLM `thinking_token_budget`, llama.cpp's
    /// `thinking_budget_tokens`). A list runs the whole plan once per budget, each budget's
    /// levels labelled with it, e.g. `0,256,1024`.
    #[arg(
        long,
        value_name = "LIST",
        value_parser = budgets,
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub thinking_budget: Option<Budgets>,
    /// Fields added to every request's body, over servetop's own, e.g.
    /// `'{"parallel_tool_calls": false}'` or an engine's sampling switch.
    #[arg(
        long,
        value_name = "JSON",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub extra_body: Option<String>,
    /// Seconds from sending to the first token before a request counts as a timeout.
    #[arg(
        long,
        value_name = "S",
        default_value = "600",
        help_heading = "Timeouts",
        hide_short_help = true
    )]
    pub first_token_timeout: f64,
    /// Seconds of stream silence after the first token before a request counts as a timeout.
    #[arg(
        long,
        value_name = "S",
        default_value = "60",
        help_heading = "Timeouts",
        hide_short_help = true
    )]
    pub idle_timeout: f64,
    /// Seconds to wait, with a countdown, for a server that stopped accepting connections before
    /// the rest of the run is aborted.
    #[arg(
        long,
        value_name = "S",
        default_value = "60",
        help_heading = "Server",
        hide_short_help = true
    )]
    pub server_wait: f64,
    /// Seconds in-flight requests get to finish after quit or skip.
    #[arg(
        long,
        value_name = "S",
        default_value = "3",
        help_heading = "Timeouts",
        hide_short_help = true
    )]
    pub grace: f64,
    /// SLOs in ms, e.g. ttft:2000,tpot:50.
    ///
    /// Service-level objectives in ms: ttft:2000,tpot:50,itl:100,e2el:30000. Goodput counts the
    /// requests meeting each of TTFT, TPOT and E2E; a level meets the SLO when every metric's
    /// --slo-percentile is within its limit (failed requests count as misses).
    #[arg(long, value_name = "SPEC", help_heading = "SLO and capacity search")]
    pub slo: Option<String>,
    /// The percentile a level must meet every --slo limit at (90, 99, p99.9).
    #[arg(
        long,
        value_name = "P",
        default_value = "90",
        help_heading = "SLO and capacity search",
        hide_short_help = true
    )]
    pub slo_percentile: String,
    /// Find the highest request rate meeting --slo.
    ///
    /// Find the highest request rate meeting --slo: a closed-loop throughput probe, then
    /// open-loop rate levels bisecting between a passing and a failing rate. Runs the search
    /// alone (no concurrency sweep, rate levels or long-context ladder).
    #[arg(long, value_name = "rate", help_heading = "SLO and capacity search")]
    pub search: Option<String>,
    /// Stop bisecting when the bracket [pass, fail] is this narrow: 5% (of the passing rate)
    /// or 0.5 (requests/s).
    #[arg(
        long,
        value_name = "X%|X",
        default_value = "5%",
        help_heading = "SLO and capacity search",
        hide_short_help = true
    )]
    pub search_precision: String,
    /// Seconds' worth of requests per search probe (rate × S requests).
    #[arg(
        long,
        value_name = "S",
        default_value = "30",
        help_heading = "SLO and capacity search",
        hide_short_help = true
    )]
    pub search_seconds: f64,
    /// Fewest measured requests per search probe, so its percentile rests on enough of them.
    #[arg(
        long,
        value_name = "N",
        default_value = "100",
        help_heading = "SLO and capacity search",
        hide_short_help = true
    )]
    pub search_min_requests: u32,
    /// Closed-loop workers of the search's throughput probe [default: --max-concurrency, else 64].
    #[arg(
        long,
        value_name = "N",
        help_heading = "SLO and capacity search",
        hide_short_help = true
    )]
    pub search_probe_concurrency: Option<u32>,
    /// Seed of the random prompt text (same seed, same prompts) [default: a new one each run,
    /// written to results.json, so a second run is not answered from the server's prefix cache].
    #[arg(long, value_name = "N", help_heading = "Plan", hide_short_help = true)]
    pub seed: Option<u64>,
    /// Environment variable holding the API key (sent as a Bearer token, never written).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "SERVETOP_API_KEY",
        help_heading = "Server",
        hide_short_help = true
    )]
    pub api_key_env: String,
    /// Keep every chunk's arrival time and token count in requests.jsonl.
    #[arg(long, help_heading = "Telemetry and cost", hide_short_help = true)]
    pub record_chunks: bool,
    /// The engine's Prometheus endpoint [default: <base-url>/metrics].
    #[arg(
        long,
        value_name = "URL",
        help_heading = "Telemetry and cost",
        hide_short_help = true
    )]
    pub metrics_url: Option<String>,
    /// Do not scrape the engine's metrics.
    #[arg(long, help_heading = "Telemetry and cost", hide_short_help = true)]
    pub no_metrics: bool,
    /// A DCGM exporter endpoint (e.g. `http://gpu-host:9400/metrics`) for GPUs on another host.
    #[arg(
        long,
        value_name = "URL",
        help_heading = "Telemetry and cost",
        hide_short_help = true
    )]
    pub dcgm_url: Option<String>,
    /// Do not sample GPUs.
    #[arg(long, help_heading = "Telemetry and cost", hide_short_help = true)]
    pub no_gpu: bool,
    /// Seconds between GPU samples.
    #[arg(
        long,
        value_name = "S",
        default_value = "1",
        help_heading = "Telemetry and cost",
        hide_short_help = true
    )]
    pub gpu_interval: f64,
    #[command(flatten)]
    pub output: OutputArgs,
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
    /// KV-cache capacity in tokens (for the KV usage gauge).
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
    /// Images in chat messages (PNG data URLs) take ⌈W/28⌉·⌈H/28⌉ prompt tokens each, and each
    /// costs MS of engine time at its request's prefill (the vision encoder). Default 0.
    #[arg(long, value_name = "MS")]
    pub image_ms: Option<f64>,
    /// Watts each simulated GPU (--gpus) draws while the engine waits (default 80) and while it
    /// steps (default 350); the reported power follows the load, the energy counter integrates
    /// it exactly.
    #[arg(long, value_name = "W")]
    pub gpu_idle_w: Option<f64>,
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
