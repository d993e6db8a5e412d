//! A simulated answer as it streams: the role chunk, token events as the engine emits them,
//! the usage chunk and `[DONE]`, with injected faults where they were drawn.

use std::sync::Arc;

use axum::body::Bytes;
use rand::Rng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::batcher::Emit;
use super::faults::FaultKind;
use super::prefix_cache::{PrefixCache, block_hashes};
use super::tokenizer;
use std::sync::Mutex;

/// Which endpoint a request came to: its stream's shape.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Completions,
    Chat,
    Native,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Start,
    Tokens,
    Usage,
    Done,
    End,
}

// Stream position flags (fault applied, first token sent) beside the request options.
#[allow(clippy::struct_excessive_bools)]
pub(super) struct StreamState {
    pub(super) rx: mpsc::UnboundedReceiver<Emit>,
    pub(super) kind: Kind,
    pub(super) model: String,
    pub(super) id: String,
    pub(super) prompt_tokens: u64,
    /// Prompt tokens the engine found in its prefix cache.
    pub(super) cached: u64,
    pub(super) generated: u64,
    /// The reply so far (kept for SGLang-native streams, which resend it whole, and for the
    /// prefix cache).
    pub(super) text: String,
    /// The prompt's ids, extended with the reply into the cache at the end (empty: cache off).
    pub(super) prompt_ids: Vec<u32>,
    pub(super) cache: Option<Arc<Mutex<PrefixCache>>>,
    pub(super) rng: SmallRng,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    pub(super) phase: Phase,
    pub(super) fault: Option<FaultKind>,
    pub(super) fault_done: bool,
    pub(super) sent_first: bool,
    /// The engine stopped mid-stream (the simulated process exited).
    pub(super) engine_gone: bool,
    pub(super) stall_s: f64,
    pub(super) slow_first_s: f64,
    /// Steps written together after the first token ([`super::SimConfig::write_batch`]).
    pub(super) write_batch: u32,
    /// Held after the last token, before the usage chunk and `[DONE]`.
    pub(super) trailer_delay: std::time::Duration,
    /// Thinking first, then the answer or tool calls (chat only).
    pub(super) answer: AnswerPlan,
    /// A constrained request's whole answer ([`super::structured::answer`]), handed out four
    /// characters a token from `doc_at`.
    pub(super) doc: Option<Vec<char>>,
    pub(super) doc_at: usize,
    /// The answer ends on its own before `max_tokens` ([`super::SimConfig::natural_len`]): its
    /// finish reason is `stop`, not `length`.
    pub(super) eos: bool,
    /// Where the simulator keeps its ground truth of each stream.
    pub(super) log: Arc<Mutex<super::log::SimLog>>,
    pub(super) arrived: std::time::Instant,
    /// What was done with the request, kept in the log when the stream is dropped.
    pub(super) trace: super::truth::SimRequestTrace,
}

impl Drop for StreamState {
    fn drop(&mut self) {
        let trace = std::mem::take(&mut self.trace);
        if let Ok(mut l) = self.log.lock() {
            l.push_trace(trace);
        }
    }
}

/// How a chat answer is made up: `think` reasoning tokens, then content, or `calls` tool calls
/// over the `answer` tokens that remain (docs/metrics.md "Reasoning and tool calls").
#[derive(Clone, Debug, Default)]
pub(super) struct AnswerPlan {
    pub(super) think: u64,
    /// `reasoning_content` (SGLang) or `reasoning` (vLLM 0.32).
    pub(super) reasoning_field: &'static str,
    /// Report `completion_tokens_details.reasoning_tokens` in the usage (vLLM 0.32 does).
    pub(super) reasoning_usage: bool,
    pub(super) calls: u32,
    /// The tool names the request offered (calls cycle through them).
    pub(super) tools: Vec<String>,
    /// Tokens after the thinking (`max_tokens` − `think`).
    pub(super) answer: u64,
    // What has been streamed so far.
    pub(super) thought: u64,
    pub(super) answered: u64,
    pub(super) opened: u32,
    pub(super) first_token: Option<std::time::Duration>,
    pub(super) first_content: Option<std::time::Duration>,
    pub(super) first_tool: Option<std::time::Duration>,
}

/// What one piece of a step is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Piece {
    Reasoning,
    Content,
    /// Tool call `k`; `open` for its first piece (which names it).
    Tool {
        k: u32,
        open: bool,
    },
}

impl AnswerPlan {
    /// The kind of the next answer tokens, and how many of `left` are of it.
    fn next(&self, left: u64) -> (Piece, u64) {
        if self.thought < self.think {
            return (Piece::Reasoning, left.min(self.think - self.thought));
        }
        if self.calls == 0 || self.answer == 0 {
            return (Piece::Content, left);
        }
        let calls = u64::from(self.calls);
        // Call k holds answer tokens [k·A/calls, (k+1)·A/calls).
        let start = |k: u64| k * self.answer / calls;
        let k = (0..calls)
            .rev()
            .find(|&k| start(k) <= self.answered)
            .unwrap_or(0);
        let end = if k + 1 == calls {
            u64::MAX
        } else {
            start(k + 1)
        };
        let take = left.min(end.saturating_sub(self.answered)).max(1);
        let k32 = u32::try_from(k).unwrap_or(u32::MAX);
        (
            Piece::Tool {
                k: k32,
                open: self.answered == start(k) && self.opened <= k32,
            },
            take,
        )
    }
}

pub(super) fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

impl StreamState {
    pub(super) fn words(&mut self, n: u32) -> String {
        self.words_of(n, &tokenizer::OUTPUT_WORDS)
    }

    /// The answer's next `n` tokens: a constrained request's document, else words.
    fn answer_words(&mut self, n: u32) -> String {
        let Some(doc) = &self.doc else {
            return self.words(n);
        };
        let from = self.doc_at.min(doc.len());
        let to = (from + n as usize * 4).min(doc.len());
        self.doc_at = to;
        doc[from..to].iter().collect()
    }

    fn words_of(&mut self, n: u32, vocabulary: &[&str]) -> String {
        let mut s = String::with_capacity(n as usize * 5);
        for _ in 0..n {
            s.push(' ');
            s.push_str(vocabulary[self.rng.random_range(0..vocabulary.len())]);
        }
        s
    }

    pub(super) fn usage(&self) -> Value {
        let mut u = json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": self.generated, "total_tokens": self.prompt_tokens + self.generated});
        if self.cache.is_some() {
            // OpenAI's (and vLLM's, with --enable-prompt-tokens-details) report of cache hits.
            u["prompt_tokens_details"] = json!({"cached_tokens": self.cached});
        }
        if self.answer.reasoning_usage && self.answer.think > 0 {
            u["completion_tokens_details"] = json!({"reasoning_tokens": self.answer.thought});
        }
        u
    }

    /// The prompt tokens the engine found in its prefix cache, as the first emit says (later
    /// ones say 0), for the usage and the record.
    fn note_cached(&mut self, cached: u64) {
        self.cached = self.cached.max(cached);
        if self.cache.is_some() {
            self.trace.cached_tokens = Some(self.cached);
        }
    }

    /// The reply is complete: keep the prompt followed by it in the prefix cache, as the next
    /// turn of a conversation will send them (the assistant message's opening, then the reply).
    pub(super) fn cache_reply(&mut self) {
        let Some(cache) = &self.cache else { return };
        let mut ids = std::mem::take(&mut self.prompt_ids);
        if self.kind == Kind::Chat {
            ids.extend(tokenizer::message_open("assistant"));
        }
        ids.extend(tokenizer::ids(&self.text));
        let blocks = block_hashes(&ids);
        let marks = if self.kind == Kind::Chat {
            super::finished::marks(&ids)
        } else {
            Vec::new()
        };
        if let Ok(mut c) = cache.lock() {
            c.insert(&blocks);
            c.finished.insert(&marks);
        }
    }

    /// The finish reason of the last token: `stop` where the model ended its answer itself,
    /// else `length` (`max_tokens` cut it).
    fn finish_word(&self) -> &'static str {
        if self.eos { "stop" } else { "length" }
    }

    /// SGLang's finish reason object: its end-of-sequence match, or the length it was cut at.
    fn native_finish(&self) -> Value {
        if self.eos {
            json!({"type": "stop", "matched": super::tokenizer::EOS_ID})
        } else {
            json!({"type": "length", "length": self.generated})
        }
    }

    pub(super) fn chunk(&self, piece: &str, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Completions => {
                let mut v = json!({"id": self.id, "object": "text_completion", "created": 0, "model": self.model,
                    "choices": [{"index": 0, "text": piece, "logprobs": null, "finish_reason": finish}]});
                if self.continuous_usage {
                    v["usage"] = self.usage();
                }
                v
            }
            Kind::Chat => self.chat_chunk(&json!({"content": piece}), finish),
            Kind::Native => {
                let finish = finish.map(|_| self.native_finish());
                json!({"text": self.text, "meta_info": {"id": self.id, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.generated, "finish_reason": finish, "cached_tokens": self.cached}})
            }
        }
    }

    /// One step's tokens as SSE events: one, or one a kind where the step crosses from thinking
    /// to the answer or from one tool call to the next (written together, as one delivery).
    /// The last one moves the stream on to its usage.
    pub(super) fn token_event(&mut self, emit: Emit) -> Vec<u8> {
        let Emit {
            tokens: n,
            last,
            cached,
            admitted,
            prefix_evicted_unix_us,
            released_unix_us,
        } = emit;
        if released_unix_us.is_some() {
            self.trace.released_unix_us = released_unix_us;
        }
        if let Some(t) = admitted {
            self.trace.admitted_unix_us = Some(super::truth::unix_of(t));
            self.trace.prefix_evicted_unix_us = prefix_evicted_unix_us;
        }
        self.note_cached(cached);
        if self.kind != Kind::Chat {
            self.generated += u64::from(n);
            let piece = self.answer_words(n);
            if self.kind == Kind::Native || self.cache.is_some() {
                self.text.push_str(&piece);
            }
            let finish = last.then_some(self.finish_word());
            return self.step_end(last, |st| sse(&st.chunk(&piece, finish)));
        }
        let mut frame = Vec::new();
        let mut left = u64::from(n);
        while left > 0 {
            let (piece, take) = self.answer.next(left);
            left -= take;
            let take32 = u32::try_from(take).unwrap_or(u32::MAX);
            self.generated += take;
            let since = self.arrived.elapsed();
            self.answer.first_token.get_or_insert(since);
            let text = match piece {
                Piece::Reasoning => {
                    self.answer.thought += take;
                    self.words_of(take32, &tokenizer::REASONING_WORDS)
                }
                Piece::Content => {
                    self.answer.answered += take;
                    self.answer.first_content.get_or_insert(since);
                    self.answer_words(take32)
                }
                Piece::Tool { .. } => {
                    self.answer.answered += take;
                    self.answer.first_tool.get_or_insert(since);
                    self.words(take32)
                }
            };
            if self.cache.is_some() {
                self.text.push_str(&text);
            }
            let finish = (last && left == 0).then_some(if self.answer.calls > 0 {
                "tool_calls"
            } else {
                self.finish_word()
            });
            let delta = self.delta(piece, &text);
            frame.extend_from_slice(&sse(&self.chat_chunk(&delta, finish)));
        }
        self.step_end(last, |_| Bytes::from(frame))
    }

    /// After a step's events: the first token is out, and after the last the stream moves on
    /// to its usage and the simulator notes what it streamed.
    fn step_end(&mut self, last: bool, frame: impl FnOnce(&Self) -> Bytes) -> Vec<u8> {
        let out = frame(self).to_vec();
        self.sent_first = true;
        if last {
            self.phase = Phase::Usage;
            self.cache_reply();
            if self.kind == Kind::Chat
                && let Ok(mut l) = self.log.lock()
            {
                l.push_stream(super::log::SimStreamLog {
                    reasoning_tokens: self.answer.thought,
                    answer_tokens: self.answer.answered,
                    tool_calls: self.answer.opened,
                    first_token: self.answer.first_token,
                    first_content: self.answer.first_content,
                    first_tool_call: self.answer.first_tool,
                });
            }
        }
        out
    }

    /// The chat delta of one piece.
    fn delta(&mut self, piece: Piece, text: &str) -> Value {
        match piece {
            Piece::Reasoning => json!({ self.answer.reasoning_field: text }),
            Piece::Content => json!({"content": text}),
            Piece::Tool { k, open } => {
                if open {
                    self.answer.opened = self.answer.opened.max(k + 1);
                    let tools = &self.answer.tools;
                    let name = tools
                        .get(k as usize % tools.len().max(1))
                        .cloned()
                        .unwrap_or_else(|| "tool".into());
                    json!({"tool_calls": [{"index": k, "id": format!("call_{}_{k}", self.id), "type": "function",
                        "function": {"name": name, "arguments": text}}]})
                } else {
                    json!({"tool_calls": [{"index": k, "function": {"arguments": text}}]})
                }
            }
        }
    }

    fn chat_chunk(&self, delta: &Value, finish: Option<&str>) -> Value {
        let mut v = json!({"id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        if self.continuous_usage {
            v["usage"] = self.usage();
        }
        v
    }

    /// The next SSE frame (an error cuts the connection), or `None` when the stream is over.
    pub(super) async fn next_frame(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        if let Some(f) = self.fault.filter(|_| !self.fault_done) {
            match f {
                FaultKind::SlowFirst if !self.sent_first => {
                    self.fault_done = true;
                    tokio::time::sleep(std::time::Duration::from_secs_f64(self.slow_first_s)).await;
                }
                _ if self.sent_first && self.phase == Phase::Tokens => {
                    self.fault_done = true;
                    match f {
                        FaultKind::ResetMid => {
                            self.phase = Phase::End;
                            return Some(Err(std::io::Error::other("injected connection reset")));
                        }
                        FaultKind::Malformed => {
                            return Some(Ok(Bytes::from_static(
                                b"data: {\"choices\": [{\"text\": \"broken\n\n",
                            )));
                        }
                        FaultKind::ErrorEvent => {
                            self.phase = Phase::Done;
                            return Some(Ok(Bytes::from_static(
                                b"data: {\"error\": {\"message\": \"simulated engine error (injected fault)\", \"type\": \"server_error\", \"code\": 500}}\n\n",
                            )));
                        }
                        FaultKind::Stall => {
                            tokio::time::sleep(std::time::Duration::from_secs_f64(self.stall_s))
                                .await;
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        let frame = self.next_plain_frame().await;
        if frame.is_none() && std::mem::take(&mut self.engine_gone) {
            return Some(Err(std::io::Error::other("simulated server exited")));
        }
        frame.map(Ok)
    }

    pub(super) async fn next_plain_frame(&mut self) -> Option<Bytes> {
        loop {
            match self.phase {
                Phase::Start => {
                    self.phase = Phase::Tokens;
                    if self.kind == Kind::Chat {
                        // vLLM opens a chat stream with the role and empty content, and with
                        // continuous usage stats the prompt's count and no output yet.
                        let mut v = json!({"id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
                            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]});
                        if self.continuous_usage {
                            v["usage"] = json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": 0, "total_tokens": self.prompt_tokens});
                        }
                        return Some(sse(&v));
                    }
                }
                Phase::Tokens => {
                    let Some(emit) = self.rx.recv().await else {
                        // The engine went away: the connection is cut, as when a process exits.
                        self.phase = Phase::End;
                        self.engine_gone = true;
                        return None;
                    };
                    // After the first token, up to `write_batch` steps go out in one write.
                    let batch = if self.sent_first { self.write_batch } else { 1 };
                    let answered = self.answer.first_content.is_some();
                    let mut tokens = emit.tokens;
                    let mut frame = self.token_event(emit);
                    for _ in 1..batch {
                        if self.phase != Phase::Tokens {
                            break;
                        }
                        // A closed channel is seen (and the stream cut) on the next call.
                        let Some(emit) = self.rx.recv().await else {
                            break;
                        };
                        tokens += emit.tokens;
                        frame.extend_from_slice(&self.token_event(emit));
                    }
                    let at = crate::metrics::unix_us();
                    self.trace.writes.push((at, tokens));
                    if !answered && self.answer.first_content.is_some() {
                        self.trace.first_content_unix_us = Some(at);
                    }
                    self.trace.completed = self.phase != Phase::Tokens;
                    return Some(Bytes::from(frame));
                }
                Phase::Usage => {
                    self.phase = Phase::Done;
                    if !self.trailer_delay.is_zero() {
                        tokio::time::sleep(self.trailer_delay).await;
                    }
                    if self.include_usage && self.kind != Kind::Native {
                        let v = json!({"id": self.id, "object": if self.kind == Kind::Chat {"chat.completion.chunk"} else {"text_completion"},
                            "created": 0, "model": self.model, "choices": [], "usage": self.usage()});
                        return Some(sse(&v));
                    }
                }
                Phase::Done => {
                    self.phase = Phase::End;
                    return Some(Bytes::from_static(b"data: [DONE]\n\n"));
                }
                Phase::End => return None,
            }
        }
    }

    /// The whole non-streamed answer.
    pub(super) async fn whole(mut self) -> Bytes {
        while let Some(Emit {
            tokens,
            last,
            cached,
            ..
        }) = self.rx.recv().await
        {
            self.generated += u64::from(tokens);
            self.note_cached(cached);
            let piece = self.words(tokens);
            self.text.push_str(&piece);
            if last {
                self.cache_reply();
                break;
            }
        }
        let text = std::mem::take(&mut self.text);
        let v = match self.kind {
            Kind::Completions => {
                json!({"id": self.id, "object": "text_completion", "created": 0, "model": self.model,
                "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": self.finish_word()}], "usage": self.usage()})
            }
            Kind::Chat => {
                json!({"id": self.id, "object": "chat.completion", "created": 0, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": self.finish_word()}], "usage": self.usage()})
            }
            Kind::Native => {
                json!({"text": text, "meta_info": {"id": self.id, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.generated, "finish_reason": self.native_finish()}})
            }
        };
        Bytes::from(v.to_string())
    }
}
