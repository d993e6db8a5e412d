//! What the runner sends: a level's `i`-th request built from its prompts (synthetic text of
//! exact length, a dataset entry, or a chat turn), and the jobs its workers take from the
//! level's queue, one request or one whole conversation at a time.

use std::sync::Arc;

use crate::client::{ChatMessage, RequestSpec};

use super::prompt::PromptFactory;
use super::trace::BLOCK_TOKENS;
use super::{LevelKind, LevelSpec};

/// What one worker takes from a level's queue at a time: one request, or at a multi-turn level
/// one conversation's turns in order (so no other worker gets one of them).
pub type Job = Vec<(u32, RequestSpec)>;

/// Groups a level's requests, taken in index order, into [`Job`]s.
pub struct Jobs {
    per_job: usize,
    partial: Job,
}

impl Jobs {
    /// Jobs of `spec`: a conversation's turns at a multi-turn level, one request otherwise.
    pub fn new(spec: &LevelSpec) -> Self {
        let per_job = spec.conversation.map_or(1, |c| c.turns.max(1)) as usize;
        Self {
            per_job,
            partial: Vec::with_capacity(per_job),
        }
    }

    /// How many jobs `requests` requests make (the last one may be short).
    pub fn count(&self, requests: u32) -> usize {
        (requests as usize).div_ceil(self.per_job)
    }

    /// Adds request `i`; returns the job it completes.
    pub fn push(&mut self, i: u32, r: RequestSpec) -> Option<Job> {
        self.partial.push((i, r));
        (self.partial.len() >= self.per_job).then(|| std::mem::take(&mut self.partial))
    }

    /// The short job left at the end, if any.
    pub fn rest(&mut self) -> Option<Job> {
        (!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial))
    }
}

/// The request for `spec`'s `i`-th prompt. At a multi-turn level, a turn's new user message
/// (see [`make_turn`]). It carries the level's thinking budget.
pub async fn make_request(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
) -> Result<RequestSpec, String> {
    let mut r = build_request(factory, spec, i).await?;
    r.thinking_budget = spec.thinking_budget;
    r.adapter = spec
        .adapter_of(factory.seed(), spec.global_index(i))
        .map(Arc::from);
    if spec.mix.response_format.is_some() {
        r.structured = factory.constraint().cloned();
    }
    if let Some(m) = &spec.mix.images {
        let g = spec.global_index(i);
        r.images = m.images_of(factory.seed(), g);
        r.images_label = Some(m.label_of(m.size_of(factory.seed(), g)));
    }
    Ok(r)
}

async fn build_request(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
) -> Result<RequestSpec, String> {
    // A shard's request i is the plan's request g: the same prompt one process would send.
    let i = spec.global_index(i);
    if let Some((_, turn)) = spec.turn_of(i) {
        return make_turn(factory, spec, i, turn).await;
    }
    if spec.kind == LevelKind::Trace {
        return trace_request(factory, spec, i).await;
    }
    if spec.kind != LevelKind::LongContext
        && let Some(d) = factory.dataset().cloned()
    {
        let e = d.pick(factory.seed(), spec.index, i);
        return dataset_request(factory, spec, e).await;
    }
    let (input, output) = spec.request_lengths(factory.seed(), i);
    let prompt = factory
        .make_with_prefix(input, spec.shared_prefix_tokens, spec.index, i)
        .await?;
    let mut r = RequestSpec::prompt(
        prompt.text,
        input,
        prompt
            .counted_tokens
            .map(|n| (n, factory.counter().source())),
        output,
    );
    r.cache_prompt = spec.shared_prefix_tokens > 0;
    Ok(r)
}

/// Request `i` of the trace: its recorded prompt and output lengths, the prompt made of the
/// texts of its `hash_ids` (512-token blocks, the last one cut to the prompt's length; the same
/// text wherever a block is named) and unique text for the rest.
pub async fn trace_request(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
) -> Result<RequestSpec, String> {
    let trace = factory
        .trace()
        .cloned()
        .ok_or("a trace level without its trace")?;
    let r = trace
        .requests
        .get(i as usize)
        .ok_or_else(|| format!("the trace has no request {}", i + 1))?;
    let mut parts: Vec<Arc<str>> = Vec::with_capacity(r.hash_ids.len() + 1);
    let (mut covered, mut counted) = (0u64, 0u64);
    for &id in &r.hash_ids {
        if covered >= r.input_len {
            break;
        }
        let n = (r.input_len - covered).min(BLOCK_TOKENS);
        let b = factory.block(id, n).await?;
        counted += b.counted_tokens.unwrap_or(n);
        covered += n;
        parts.push(b.text);
    }
    if covered < r.input_len {
        // `make` takes the server's own tokens off its target and counts them in.
        let rest = factory.make(r.input_len - covered, spec.index, i).await?;
        counted += rest.counted_tokens.unwrap_or(r.input_len - covered);
        parts.push(rest.text);
    } else {
        counted = (counted as i64 + factory.offset_tokens).max(0) as u64;
    }
    let mut req = RequestSpec::prompt(
        Arc::from(parts.join(" ")),
        r.input_len,
        Some((counted, factory.counter().source())),
        r.output_len,
    );
    req.cache_prompt = !r.hash_ids.is_empty();
    Ok(req)
}

/// A request for dataset entry `e`: its first user message (after the shared prefix, if any)
/// and the output length it asks for, its reference reply's length, or the level's.
pub async fn dataset_request(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    e: &crate::workload::dataset::Entry,
) -> Result<RequestSpec, String> {
    let first = e
        .user_turns
        .first()
        .cloned()
        .unwrap_or_else(|| Arc::from(""));
    let text: Arc<str> = if spec.shared_prefix_tokens > 0 {
        let p = factory.shared_prefix(spec.shared_prefix_tokens).await?;
        Arc::from(format!("{} {first}", p.text))
    } else {
        first
    };
    let counted = factory.counter().count(&text).await?;
    let counted = (counted as i64 + factory.offset_tokens).max(0) as u64;
    let output = match (e.output_len, &e.reply) {
        (Some(n), _) => n,
        (None, Some(r)) => {
            (factory.counter().count(r).await?.max(1)).min(u64::from(u32::MAX)) as u32
        }
        (None, None) => spec.output_tokens,
    };
    let mut r = RequestSpec::prompt(
        text,
        counted,
        Some((counted, factory.counter().source())),
        output,
    );
    r.cache_prompt = spec.shared_prefix_tokens > 0;
    Ok(r)
}

/// Turn `turn` (from 0) of request `i`'s conversation: its new user message. The first turn's
/// request carries the opening of the chat (the shared prefix as a system message, when there is
/// one, and the first message of `input_tokens` minus the prefix); later ones a follow-up of
/// `followup_tokens`. Their planned input counts the new message only: the worker adds the
/// history's tokens as the server reported them.
pub async fn make_turn(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
    turn: u32,
) -> Result<RequestSpec, String> {
    let prefix = spec.shared_prefix_tokens;
    let tokens = if turn == 0 {
        spec.input_tokens.saturating_sub(prefix).max(1)
    } else {
        spec.conversation.map_or(1, |c| c.followup_tokens)
    };
    // A dataset conversation's user messages, while it has them; random text after.
    let from_dataset = factory.dataset().cloned().and_then(|d| {
        let k = spec.conversation.map_or(1, |c| c.turns.max(1));
        d.pick(factory.seed(), spec.index, i / k)
            .user_turns
            .get(turn as usize)
            .cloned()
    });
    let (text, tokens) = match from_dataset {
        Some(t) => {
            let n = factory.counter().count(&t).await?;
            (t, n)
        }
        None => (factory.make_text(tokens, spec.index, i).await?.text, tokens),
    };
    let mut r = RequestSpec::prompt(text.clone(), tokens, None, spec.output_tokens);
    r.cache_prompt = true;
    if let (Some(w), Some(c)) = (spec.tool_wait, spec.conversation) {
        let session = i / c.turns.max(1);
        r.wait_before = Some(std::time::Duration::from_secs_f64(w.draw(
            factory.seed(),
            session,
            turn,
        )))
        .filter(|_| turn > 0);
        r.session_turn = Some(crate::client::SessionTurn {
            new_message_tokens: tokens,
            first: turn == 0,
        });
    }
    if turn == 0 {
        let mut opening = Vec::with_capacity(2);
        if prefix > 0 {
            opening.push(ChatMessage {
                role: "system",
                content: factory.shared_prefix(prefix).await?.text,
            });
        }
        opening.push(ChatMessage {
            role: "user",
            content: text,
        });
        r.messages = Some(opening.into());
        r.planned_input_tokens = tokens + if prefix > 0 { prefix } else { 0 };
    }
    Ok(r)
}
