//! What the runner sends: a level's `i`-th request built from its prompts (synthetic text of
//! exact length, a dataset entry, or a chat turn), and the jobs its workers take from the
//! level's queue, one request or one whole conversation at a time.

use std::sync::Arc;

use crate::client::{ChatMessage, RequestSpec};

use super::prompt::PromptFactory;
use super::trace::BLOCK_TOKENS;
use super::{LevelKind, LevelSpec, TurnPlace};

/// What one worker takes from a level's queue at a time: one request, or at a multi-turn level
/// one conversation's turns in order (so no other worker gets one of them).
pub type Job = Vec<(u32, RequestSpec)>;

/// Groups a level's requests, taken in index order, into [`Job`]s.
pub struct Jobs {
    per_job: usize,
    partial: Job,
    /// An agent trace's sessions' lengths, in order: the jobs' sizes (empty: `per_job` each).
    sizes: std::collections::VecDeque<usize>,
}

impl Jobs {
    /// Jobs of `spec`: a conversation's turns at a multi-turn level, one request otherwise; at
    /// an agent trace's level, each session's turns (`trace`'s).
    pub fn new(spec: &LevelSpec, trace: Option<&super::trace::Trace>) -> Self {
        let per_job = spec.conversation.map_or(1, |c| c.requests()) as usize;
        let sizes = match trace {
            Some(t) if spec.kind == LevelKind::Sessions && spec.trace.is_some() => {
                t.job_sizes().into_iter().map(|n| n as usize).collect()
            }
            _ => std::collections::VecDeque::new(),
        };
        Self {
            per_job,
            partial: Vec::with_capacity(per_job),
            sizes,
        }
    }

    /// How many jobs `requests` requests make (the last one may be short).
    pub fn count(&self, requests: u32) -> usize {
        if self.sizes.is_empty() {
            return (requests as usize).div_ceil(self.per_job);
        }
        let mut left = requests as usize;
        let mut n = 0;
        for s in &self.sizes {
            if left == 0 {
                break;
            }
            left = left.saturating_sub(*s);
            n += 1;
        }
        n
    }

    /// Adds request `i`; returns the job it completes.
    pub fn push(&mut self, i: u32, r: RequestSpec) -> Option<Job> {
        self.partial.push((i, r));
        let size = self.sizes.front().copied().unwrap_or(self.per_job);
        if self.partial.len() < size {
            return None;
        }
        self.sizes.pop_front();
        // The next job's room, exactly: a job taken out left an empty vector that its first
        // push would grow to room for four, 860 bytes a prepared request where one is 216
        // (at C=10,000, 40,000 prepared requests held 26 MB of room that way).
        let next = self.sizes.front().copied().unwrap_or(self.per_job);
        Some(std::mem::replace(
            &mut self.partial,
            Vec::with_capacity(next),
        ))
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
    if spec.kind == LevelKind::Sessions && spec.trace.is_some() {
        return trace_turn(factory, spec, i).await;
    }
    if let Some((_, place)) = spec.turn_of(i) {
        return make_turn(factory, spec, i, place).await;
    }
    if spec.kind == LevelKind::Trace {
        return trace_request(factory, spec, i).await;
    }
    if spec.kind != LevelKind::LongContext
        && let Some(d) = factory.dataset().cloned()
    {
        let e = d.pick_in(spec.category.as_deref(), factory.seed(), spec.index, i);
        return dataset_request(factory, spec, e).await;
    }
    let (input, output) = spec.request_lengths(factory.seed(), i);
    let prompt = factory
        .make_with_prefix(
            (input, spec.shared_prefix_tokens),
            spec.content.unwrap_or(super::content::ContentKind::Random),
            spec.index,
            i,
        )
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
    let r = trace_row(factory, i)?;
    let (text, counted) = hashed_text(factory, spec.index, i, &r).await?;
    let mut req = RequestSpec::prompt(
        text,
        r.input_len,
        Some((counted, factory.counter().source())),
        r.output_len,
    );
    req.cache_prompt = !r.hash_ids.is_empty();
    Ok(req)
}

/// Row `i` of the trace the factory replays (a request, or an agent trace's turn).
fn trace_row(factory: &PromptFactory, i: u32) -> Result<super::trace::TraceRequest, String> {
    factory
        .trace()
        .ok_or("a trace level without its trace")?
        .requests
        .get(i as usize)
        .cloned()
        .ok_or_else(|| format!("the trace has no row {}", i + 1))
}

/// A prompt of `r.input_len` tokens made of its trace blocks' texts (the same text wherever a
/// block's hash id recurs), then fresh text for the rest; with the tokens as counted.
async fn hashed_text(
    factory: &mut PromptFactory,
    level: u32,
    i: u32,
    r: &super::trace::TraceRequest,
) -> Result<(Arc<str>, u64), String> {
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
        let rest = factory.make(r.input_len - covered, level, i).await?;
        counted += rest.counted_tokens.unwrap_or(r.input_len - covered);
        parts.push(rest.text);
    } else {
        counted = (counted as i64 + factory.offset_tokens).max(0) as u64;
    }
    Ok((Arc::from(parts.join(" ")), counted))
}

/// Turn `i` of an agent trace (its sessions' turns in order): the turn's new user message, of
/// its recorded tokens and hash blocks, asking for its recorded output; a later turn waits its
/// recorded delay (at most the trace's cap) after the turn before ended, and a sub-agent's
/// first turn after the session's turn that started it.
async fn trace_turn(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
) -> Result<RequestSpec, String> {
    let r = trace_row(factory, i)?;
    let (text, counted) = hashed_text(factory, spec.index, i, &r).await?;
    let mut req = RequestSpec::prompt(text.clone(), r.input_len, None, r.output_len);
    req.cache_prompt = true;
    req.session_turn = Some(crate::client::SessionTurn {
        new_message_tokens: counted,
        first: r.turn == 0,
        sub_agent: r.sub_agent,
        session: r.session.unwrap_or(0),
        after_turn: r.after_turn,
    });
    if r.turn == 0 {
        req.messages = Some(
            vec![ChatMessage {
                role: "user",
                content: text,
            }]
            .into(),
        );
    }
    // A later turn waits after the turn before it; a sub-agent's first, after the session's
    // turn that started it (the worker waits for that turn, then this).
    if r.turn > 0 || r.sub_agent.is_some() {
        let cap = spec
            .trace
            .as_ref()
            .and_then(|t| t.wait_cap_s)
            .unwrap_or(f64::INFINITY);
        req.wait_before = Some(std::time::Duration::from_secs_f64(
            (r.delay_ms / 1e3).min(cap),
        ));
    }
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

/// Request `i` of a conversation, standing at `place` in it: its new user message. The first
/// turn's request carries the opening of the chat (the shared prefix as a system message, when
/// there is one, and the first message of `input_tokens` minus the prefix); later ones a
/// follow-up of `followup_tokens`. A sub-agent's first turn opens its own chat: the same
/// system message, then a task of `followup_tokens` (what the parent handed it). Their planned
/// input counts the new message only: the worker adds the history's tokens as the server
/// reported them.
pub async fn make_turn(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
    place: TurnPlace,
) -> Result<RequestSpec, String> {
    let prefix = spec.shared_prefix_tokens;
    let (turn, sub_agent) = match place {
        TurnPlace::Parent { turn } => (turn, None),
        TurnPlace::SubAgent { agent, turn } => (turn, Some(agent)),
    };
    let followup = spec.conversation.map_or(1, |c| c.followup_tokens);
    let tokens = match (turn, sub_agent) {
        (0, None) => spec.input_tokens.saturating_sub(prefix).max(1),
        _ => followup,
    };
    // A dataset conversation's user messages, while it has them; random text after.
    let from_dataset = factory
        .dataset()
        .cloned()
        .filter(|_| sub_agent.is_none())
        .and_then(|d| {
            let k = spec.conversation.map_or(1, |c| c.requests());
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
        let k = c.requests();
        let (session, j) = (i / k, i % k);
        // The turn after the sub-agents waits for them, not for a tool.
        let joins = sub_agent.is_none() && turn == 1 && c.fan_out > 0;
        r.wait_before = Some(std::time::Duration::from_secs_f64(w.draw(
            factory.seed(),
            session,
            j,
        )))
        .filter(|_| turn > 0 && !joins);
        r.session_turn = Some(crate::client::SessionTurn {
            new_message_tokens: tokens,
            first: turn == 0,
            sub_agent,
            session,
            after_turn: u32::from(sub_agent.is_some()),
        });
        if turn == 0 && sub_agent.is_none() {
            r.think_before = spec
                .think_time
                .map(|t| std::time::Duration::from_secs_f64(t.draw_think(factory.seed(), session)));
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each job has room for its own requests and no more: a prepared level holds its jobs
    /// until they are sent, tens of thousands of them at C=10,000.
    #[test]
    fn a_job_holds_room_for_its_requests_only() {
        let spec = LevelSpec::new(0, LevelKind::Sweep, 4, (32, 8), 10);
        let mut jobs = Jobs::new(&spec, None);
        let mut out = Vec::new();
        for i in 0..10 {
            let r = crate::client::RequestSpec::prompt(Arc::from("a b c"), 3, None, 8);
            out.extend(jobs.push(i, r));
        }
        assert_eq!(out.len(), 10);
        for (k, job) in out.iter().enumerate() {
            assert_eq!(job.len(), 1, "job {k}");
            assert_eq!(job.capacity(), 1, "job {k}");
        }
        assert!(jobs.rest().is_none());
    }
}
