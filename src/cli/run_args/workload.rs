//! `servetop run`'s Workload flags: what each request carries besides its lengths (shared
//! prefixes, adapters, images, structured output, datasets, chats, tools, extra fields).

use std::path::PathBuf;

use clap::Args;

use crate::cli::values::{
    Budgets, Contents, Names, ShapeMix, budgets, contents, count, length_dist, names, range_ratio,
    shape_mix,
};

/// The workload: what the requests carry.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Workload")]
pub struct WorkloadArgs {
    /// Leading tokens of --input-len that every sweep, rate and multi-turn prompt shares (a
    /// common system prompt), so the server's prefix cache can serve them; the rest of each
    /// prompt stays unique. 0: every prompt is unique from its first token.
    #[arg(long, value_name = "N", default_value = "0", value_parser = count, hide_short_help = true)]
    pub shared_prefix_len: u64,
    /// Spread each request's input and output lengths by ±R (0 ≤ R < 1).
    ///
    /// Sweep and rate requests draw them uniformly from [⌊(1−R)·L⌋, ⌈(1+R)·L⌉] around
    /// --input-len and --output-len, as vLLM's --random-range-ratio does; prompts stay exact,
    /// and the draws are the same for a given --seed at every level. The long-context ladder
    /// and multi-turn chats keep their lengths.
    #[arg(long, value_name = "R", value_parser = range_ratio, hide_short_help = true)]
    pub range_ratio: Option<f64>,
    /// Spread each request's lengths log-normally instead: lognormal:S (σ of the log).
    ///
    /// Sweep and rate requests draw their input and output lengths apart, each from a
    /// log-normal distribution whose median is --input-len and --output-len (or the shape a
    /// --shape-mix request drew) and whose log has σ S, cut at 3σ either way: a long tail of
    /// long prompts and answers, as real traffic has. Prompts stay exact.
    #[arg(long, value_name = "lognormal:S", value_parser = length_dist, conflicts_with = "range_ratio", hide_short_help = true)]
    pub length_dist: Option<f64>,
    /// A weighted mix of input/output shapes inside each level: IN/OUT:W,… (W 1 if left out).
    ///
    /// Each sweep and rate request draws one shape, with a chance proportional to its weight
    /// (the same draws at every level for a given --seed), e.g. `1000/500:3,8000/1000:1`; two
    /// shapes make a bimodal mix. In place of --input-len and --output-len; --range-ratio or
    /// --length-dist spread each drawn shape. The level plans the weighted means.
    #[arg(long, value_name = "IN/OUT:W,...", value_parser = shape_mix, conflicts_with_all = ["input_len", "output_len", "shapes"], hide_short_help = true)]
    pub shape_mix: Option<ShapeMix>,
    /// Let the model end its answers: no `ignore_eos`, --output-len (and the ladder's) a cap.
    ///
    /// Every request is sent without `ignore_eos`, so the model stops at its end of sequence
    /// and --output-len is only the most it may write. Each level reports the lengths its
    /// answers reached and how many reached the cap, and a finding says when they stopped far
    /// short of it: throughput and TPOT are then of answers that long.
    #[arg(long, hide_short_help = true)]
    pub natural_stop: bool,
    /// LoRA adapters to name, one per request (NAME,NAME,…).
    ///
    /// Names as the server knows them (vLLM's --lora-modules names), dealt by --lora-dist and
    /// sent in the field the engine reads (vLLM and others: `model`; SGLang: `lora_path`).
    /// Every level's figures are then also given per adapter.
    #[arg(long, value_name = "NAMES", default_value = "", value_parser = names, hide_short_help = true)]
    pub lora_modules: Names,
    /// How requests are dealt over --lora-modules: uniform, round-robin or zipf:S.
    ///
    /// `uniform`: each adapter drawn with equal chances, as vLLM's bench does; `round-robin`:
    /// request i names adapter i mod n; `zipf:S`: the k-th adapter given drawn with a chance
    /// proportional to 1/k^S (a few hot, a long tail). The same requests name the same
    /// adapters at every level for a given --seed.
    #[arg(long, value_name = "DIST", default_value = "uniform", value_parser = crate::workload::mix::LoraDist::parse, hide_short_help = true)]
    pub lora_dist: crate::workload::mix::LoraDist,
    /// Images in each request (through the chat endpoint); 0: text only.
    ///
    /// Sweep, rate and search requests carry them as base64 PNG data URLs in the user message
    /// (as vLLM, SGLang and llama-server take them): random pixels, generated from --seed and
    /// the request's number, no two alike. The prompt's text stays exact; the image tokens are
    /// read from the server's usage and reported apart.
    #[arg(long, value_name = "N", default_value = "0", hide_short_help = true)]
    pub images: u32,
    /// The images' size: `WxH`, a list (each request draws one), or a range `WxH-WxH`.
    ///
    /// From a list, all of a request's images have the size it drew, with equal chances for
    /// each. In a range, each request's width and height are drawn uniformly between the two
    /// ends, and TTFT is reported in four bands of pixel count.
    #[arg(
        long,
        value_name = "WxH[,WxH...]|WxH-WxH",
        default_value = "512x512",
        hide_short_help = true
    )]
    pub image_size: String,
    /// Run each level twice, without and with a constraint: json, json-schema FILE or regex P.
    ///
    /// Structured output: every sweep, rate and long-context level runs first as planned, then
    /// with each request constrained to `json` (any JSON object), `json-schema FILE` (valid
    /// against the schema in FILE) or `regex PATTERN` (text the pattern matches whole), sent as
    /// the engine takes it (`response_format`, vLLM's `structured_outputs`, SGLang's `regex`).
    /// The constrained twin shows its overhead over the plain one (TTFT, TPOT, throughput) and
    /// the share of answers that comply.
    #[arg(long, value_name = "KIND [ARG]", num_args = 1..=2, hide_short_help = true)]
    pub response_format: Option<Vec<String>>,
    /// Prompts of these kinds, each level once per kind: code, math, chat, summary, json, random.
    ///
    /// Every sweep, rate and long-context level runs once per kind, in a row (C=1 · code, C=1 ·
    /// chat, C=8 · code, …), so the server's counters give each kind's figures: its accept
    /// length (speculative decoding), speed and latency. Each prompt is made by servetop from
    /// its own seeded templates, exact in length, and asks for an answer of its kind (a Python
    /// function, worked problems, a chat reply, a summary, a JSON object); `random` is the
    /// default prompt of common words. The first kind is the headline the findings are about.
    #[arg(long, value_name = "KINDS", value_parser = contents, hide_short_help = true)]
    pub content: Option<Contents>,
    /// With --dataset: each sweep and rate level once per category of its entries (all, or
    /// NAME,NAME,…).
    ///
    /// A pass per category, as --content's per kind: each level's requests are drawn from that
    /// category's entries only, so the server's counters give each category's accept length,
    /// speed and latency. The category is each entry's `category` field (SPEED-Bench,
    /// Spec-Bench, MT-Bench, your own JSONL), else its `subject` (MATH-500). `all`: every
    /// category in the file, in the order they first appear.
    #[arg(
        long,
        value_name = "all|NAMES",
        requires = "dataset",
        hide_short_help = true
    )]
    pub categories: Option<String>,
    /// Prompts from a ShareGPT or JSONL file, not random text.
    ///
    /// ShareGPT conversations (a JSON array or JSON Lines, as `vllm bench serve` reads them), or
    /// `{"prompt": ..., "output_len": N}` per line. The first user message is the prompt and
    /// the reply's length the output length (else --output-len); a multi-turn level sends the
    /// conversation's user messages as its turns. Applies to the sweep, rate and multi-turn
    /// levels; the long-context ladder stays exact.
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Add chats of K turns (what the prefix cache saves).
    ///
    /// A multi-turn level after the others: each turn is sent with the whole history (the
    /// earlier user messages and the server's real replies), so the savings show turn by turn.
    /// The first message has --input-len tokens (the shared prefix becomes a system message),
    /// the later ones --followup-len.
    #[arg(long, value_name = "K")]
    pub multi_turn: Option<u32>,
    /// Multi-turn: conversations to run.
    #[arg(long, value_name = "N", default_value = "16", hide_short_help = true)]
    pub conversations: u32,
    /// Multi-turn: conversations in progress at once (each sends its next turn as soon as the
    /// last reply ends).
    #[arg(long, value_name = "C", default_value = "4", hide_short_help = true)]
    pub conversation_concurrency: u32,
    /// Multi-turn: tokens of each follow-up user message.
    #[arg(long, value_name = "N", default_value = "64", value_parser = count, hide_short_help = true)]
    pub followup_len: u64,
    /// Sampling temperature.
    #[arg(long, default_value = "0", hide_short_help = true)]
    pub temperature: f64,
    /// Offer these tools with every chat request: a JSON file of OpenAI tools (a list, or
    /// {"tools": [...]}), or `builtin` for three small ones. The streamed tool calls count as
    /// output; each request's calls and time to the first are recorded.
    #[arg(long, value_name = "FILE|builtin", hide_short_help = true)]
    pub tools: Option<String>,
    /// `tool_choice` sent with --tools: auto (default), required or none.
    #[arg(long, value_name = "CHOICE", requires = "tools", value_parser = ["auto", "required", "none"], hide_short_help = true)]
    pub tool_choice: Option<String>,
    /// `chat_template_kwargs` for every chat request (SGLang, vLLM), e.g.
    /// `'{"enable_thinking": true}'`.
    #[arg(long, value_name = "JSON", hide_short_help = true)]
    pub chat_template_kwargs: Option<String>,
    /// Reasoning tokens a request may think for before the server closes its thinking, sent
    /// the way the engine takes it (vLLM `thinking_token_budget`, llama.cpp's
    /// `thinking_budget_tokens`). A list runs the whole plan once per budget, each budget's
    /// levels labelled with it, e.g. `0,256,1024`.
    #[arg(
        long,
        value_name = "LIST",
        value_parser = budgets,
        hide_short_help = true
    )]
    pub thinking_budget: Option<Budgets>,
    /// Fields added to every request's body, over servetop's own, e.g.
    /// `'{"parallel_tool_calls": false}'` or an engine's sampling switch.
    #[arg(long, value_name = "JSON", hide_short_help = true)]
    pub extra_body: Option<String>,
}
