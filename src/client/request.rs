//! What a request is before the client sends it: the protocol (`--backend`), the client's
//! options, a request's spec (prompt or chat history, lengths, images, structured output) and
//! the tag that says where its record goes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Dialect, structured};
use crate::metrics::CountSource;

/// The request protocol (`--backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// OpenAI `/v1/completions` (exact prompt lengths: no chat template).
    Openai,
    /// OpenAI `/v1/chat/completions` (the prompt goes through the chat template).
    OpenaiChat,
    /// SGLang's native `/generate` (exact per-chunk counts from `meta_info`).
    Sglang,
    /// Anthropic Messages `/v1/messages` (vLLM, llama-server): the prompt goes through the chat
    /// template, and answers end where the model stops (the API has no `ignore_eos`).
    Anthropic,
}

impl Backend {
    /// The endpoint path.
    pub fn path(self) -> &'static str {
        match self {
            Backend::Openai => "/v1/completions",
            Backend::OpenaiChat => "/v1/chat/completions",
            Backend::Sglang => "/generate",
            Backend::Anthropic => "/v1/messages",
        }
    }

    /// Whether requests go as chat messages (through the chat template), where tools, images
    /// and thinking budgets can go.
    pub fn is_chat(self) -> bool {
        matches!(self, Backend::OpenaiChat | Backend::Anthropic)
    }

    pub(super) fn dialect(self) -> Dialect {
        match self {
            Backend::Openai => Dialect::Completions,
            Backend::OpenaiChat => Dialect::Chat,
            Backend::Sglang => Dialect::SglangNative,
            Backend::Anthropic => Dialect::Messages,
        }
    }
}

/// Timeouts and counting options of the client.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Longest wait from `t_send` to the first token.
    pub first_token_timeout: Duration,
    /// Longest silence between two stream events after the first token.
    pub idle_timeout: Duration,
    /// Counts chunk text when the server gives no per-chunk counts.
    pub tokenizer: Option<Arc<tokenizers::Tokenizer>>,
    /// Temperature sent with every request.
    pub temperature: f64,
    /// Fields every chat request carries besides its messages (tools, template switches).
    pub chat_extras: Arc<serde_json::Map<String, serde_json::Value>>,
    /// Fields added to every request's body (`--extra-body`), over servetop's own.
    pub extra_body: Arc<serde_json::Map<String, serde_json::Value>>,
    /// Let the model end its answers (`--natural-stop`): no `ignore_eos` in any request.
    pub natural_stop: bool,
    /// Headers every request carries (`--header`; the reqwest client has them as defaults,
    /// servetop's own HTTP/1.1 client adds them to each request), names in lower case.
    pub headers: Arc<[(String, String)]>,
    /// How every request's `X-Request-Id` begins: `servetop`, or `servetop-shardIofN` on a
    /// shard, so that the shards of one run never send the same id to one server.
    pub request_id_prefix: Arc<str>,
}

/// One message of a chat history.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    pub content: Arc<str>,
}

/// One request to send.
#[derive(Clone, Debug)]
pub struct RequestSpec {
    pub prompt: Arc<str>,
    pub planned_input_tokens: u64,
    /// The prompt's length as counted before sending, and by whom.
    pub counted_input_tokens: Option<(u64, CountSource)>,
    pub max_tokens: u32,
    /// A whole chat history to send instead of `prompt` (a multi-turn conversation's turn): it
    /// goes to `/v1/chat/completions`, or to `/v1/messages` with `--backend anthropic`.
    pub messages: Option<Arc<[ChatMessage]>>,
    /// Let the server reuse a cached prefix (multi-turn, shared prefix). Off, servetop asks
    /// servers that would otherwise reuse an earlier run's prompts (llama-server) not to.
    pub cache_prompt: bool,
    /// Reasoning tokens the request may think for (`--thinking-budget`), sent in the field the
    /// engine reads (see `Client::body`).
    pub thinking_budget: Option<u32>,
    /// The LoRA adapter it names (`--lora-modules`), in the field the engine reads (see
    /// `Client::body`); None: the base model.
    pub adapter: Option<Arc<str>>,
    /// The structured-output constraint it carries (`--response-format`): sent without
    /// `ignore_eos` (the answer ends where the constraint does), its answer checked against it.
    pub structured: Option<Arc<structured::Constraint>>,
    /// Images sent with the prompt (`--images`: data URLs, chat only), and what they were
    /// (`2×512x512`), for the record.
    pub images: Vec<Arc<str>>,
    pub images_label: Option<String>,
    /// How long to wait before sending it, after the turn before it ended (a session turn's
    /// tool wait).
    pub wait_before: Option<std::time::Duration>,
    /// A session's first turn: the user's think time before it, where the user ran a session
    /// before (`--think-time`).
    pub think_before: Option<std::time::Duration>,
    /// A session turn: what its cache ceiling is worked out from.
    pub session_turn: Option<SessionTurn>,
}

/// What a session turn's cache ceiling (docs/metrics.md "Agent sessions") is worked out from:
/// its prompt as the server counted it, less its newest message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionTurn {
    /// Tokens of the newest message's content: the task on the first turn, the tool result
    /// after.
    pub new_message_tokens: u64,
    /// The session's first turn: the opening of its newest message is the primer's too, so
    /// finished; on later turns the newest message's opening follows an answer and was not.
    pub first: bool,
    /// A sub-agent's turn (which of the session's sub-agents, from 0); none for the session's
    /// own turns.
    pub sub_agent: Option<u32>,
    /// The session's number in its level (from 0), for the per-session figures.
    pub session: u32,
    /// A sub-agent's: how many of the session's own turns are answered before it starts (1
    /// with `--fan-out`; an agent trace's sub-agent, after the turn it follows). The session's
    /// next turn waits for every sub-agent started after the turn before it. 0 on its own turns.
    pub after_turn: u32,
}

impl RequestSpec {
    /// A single prompt, no history, no prefix caching asked for.
    pub fn prompt(
        prompt: Arc<str>,
        planned_input_tokens: u64,
        counted_input_tokens: Option<(u64, CountSource)>,
        max_tokens: u32,
    ) -> Self {
        Self {
            prompt,
            planned_input_tokens,
            counted_input_tokens,
            max_tokens,
            messages: None,
            cache_prompt: false,
            thinking_budget: None,
            adapter: None,
            structured: None,
            images: Vec::new(),
            images_label: None,
            wait_before: None,
            think_before: None,
            session_turn: None,
        }
    }
}

/// Where the record goes and what it is called.
#[derive(Clone, Copy, Debug)]
pub struct RequestTag {
    pub level: u32,
    pub index: u32,
    pub warmup: bool,
    /// The level's origin: every `*_at_us` is measured from here.
    pub origin: Instant,
    /// `t_sched`.
    pub sched: Instant,
}
