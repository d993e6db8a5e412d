//! `servetop run`'s Server flags: the server to benchmark, or the one servetop starts
//! (`--serve`), and how to talk to it.

use std::path::PathBuf;

use clap::Args;

use crate::cli::values::{List, count, list};
use crate::config::BackendChoice;

/// The server: its URL or the command that starts it, the protocol, the model, the key.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Server")]
pub struct ServerArgs {
    /// Server root URL, without /v1 (`http://127.0.0.1:30000`).
    #[arg(long, value_name = "URL", required_unless_present_any = ["resume", "serve"])]
    pub base_url: Option<String>,
    /// Start the server too: `vllm serve M --port {port} …`.
    ///
    /// The command runs under `sh`, with `{port}` (a free port, unless the command fixes one
    /// with --port N) and `{context_len}` (--context-len) filled in, e.g.
    /// `vllm serve MODEL --port {port} --max-model-len {context_len}`. Its output goes to
    /// server.log in the run directory; it is stopped, with its whole process group, when
    /// servetop ends.
    #[arg(long, value_name = "CMD", conflicts_with = "base_url")]
    pub serve: Option<String>,
    /// Context limit of the --serve server, filled into `{context_len}`.
    #[arg(long, value_name = "N", requires = "serve", value_parser = count)]
    pub context_len: Option<u64>,
    /// Contexts a --serve server may be restarted with when a long-context length does not fit
    /// (65536,131072 or 64k,128k): the first that holds the length. Without it, the smallest
    /// multiple of 1024 that does.
    #[arg(long, value_name = "LIST", requires = "serve", value_parser = list, hide_short_help = true)]
    pub context_steps: Option<List>,
    /// Seconds to wait for the server --serve started to answer /health and /v1/models.
    #[arg(
        long,
        value_name = "S",
        default_value = "600",
        requires = "serve",
        hide_short_help = true
    )]
    pub serve_timeout: f64,
    /// When the --serve server crashes or runs out of memory during a level, restart it once
    /// (same context) and go on; the level's requests stay failed. Without it the run stops
    /// there, saying how the server exited and its last log lines.
    #[arg(long, requires = "serve", hide_short_help = true)]
    pub restart_on_crash: bool,
    /// Run the whole plan once per server configuration: NAME=V1,V2,... sets the --serve
    /// command's option NAME (replaced if the command has it, added if not) to each value;
    /// repeated, every combination. E.g. --serve-param=--max-num-seqs=64,128
    /// --serve-param=-np=1,2. A value may be a range: 1..8 (step 1), 0.80..0.90:0.05 (step),
    /// 1..64*2 (doubling). Each run gets a sub-directory, and the overlay comparison of all of
    /// them is written to the run directory.
    #[arg(
        hide_short_help = true,
        long,
        value_name = "NAME=V1,V2",
        requires = "serve",
        allow_hyphen_values = true
    )]
    pub serve_param: Vec<String>,
    /// Request protocol (auto: /v1/completions, exact prompt lengths).
    ///
    /// /v1/completions sends the prompt with no chat template. anthropic sends Anthropic Messages
    /// (`/v1/messages`, served by vLLM and llama-server) with `x-api-key` and
    /// `anthropic-version`; its answers end where the model stops (no `ignore_eos`).
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendChoice,
    /// Model name to request (default: the server's first).
    #[arg(long)]
    pub model: Option<String>,
    /// A local tokenizer.json to size prompts and count chunk tokens when the server has no
    /// /tokenize.
    #[arg(long, value_name = "PATH", hide_short_help = true)]
    pub tokenizer: Option<PathBuf>,
    /// Seconds to wait, with a countdown, for a server that stopped accepting connections before
    /// the rest of the run is aborted.
    #[arg(long, value_name = "S", default_value = "60", hide_short_help = true)]
    pub server_wait: f64,
    /// Clear the server's prefix cache before each level, so none starts warm.
    ///
    /// vLLM: POST /reset_prefix_cache (only with VLLM_SERVER_DEV_MODE=1 set for the server);
    /// SGLang: POST /flush_cache; llama.cpp: each slot's erase (only with --slot-save-path).
    /// Where the server offers none, the run says so and goes on.
    #[allow(clippy::doc_markdown)] // Help text: shown as typed, not as Markdown.
    #[arg(long, hide_short_help = true)]
    pub reset_cache: bool,
    /// A header sent with every request to the server, NAME:VALUE (repeat it for more), e.g. a
    /// gateway's tenant. Written to the run's files, except the value of one whose name holds
    /// key, token, auth, secret, password or cookie: that is written ***, and --resume needs it
    /// again.
    #[arg(long, value_name = "NAME:VALUE", hide_short_help = true)]
    pub header: Vec<String>,
    /// Environment variable holding the API key (sent as a Bearer token, never written).
    #[arg(
        long,
        value_name = "NAME",
        default_value = "SERVETOP_API_KEY",
        hide_short_help = true
    )]
    pub api_key_env: String,
}
