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
}

pub(super) fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

impl StreamState {
    pub(super) fn words(&mut self, n: u32) -> String {
        let mut s = String::with_capacity(n as usize * 5);
        for _ in 0..n {
            s.push(' ');
            s.push_str(
                tokenizer::OUTPUT_WORDS[self.rng.random_range(0..tokenizer::OUTPUT_WORDS.len())],
            );
        }
        s
    }

    pub(super) fn usage(&self) -> Value {
        let mut u = json!({"prompt_tokens": self.prompt_tokens, "completion_tokens": self.generated, "total_tokens": self.prompt_tokens + self.generated});
        if self.cache.is_some() {
            // OpenAI's (and vLLM's, with --enable-prompt-tokens-details) report of cache hits.
            u["prompt_tokens_details"] = json!({"cached_tokens": self.cached});
        }
        u
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
        if let Ok(mut c) = cache.lock() {
            c.insert(&blocks);
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
            Kind::Chat => {
                let mut v = json!({"id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
                    "choices": [{"index": 0, "delta": {"content": piece}, "logprobs": null, "finish_reason": finish}]});
                if self.continuous_usage {
                    v["usage"] = self.usage();
                }
                v
            }
            Kind::Native => {
                let finish = finish.map(|_| json!({"type": "length", "length": self.generated}));
                json!({"text": self.text, "meta_info": {"id": self.id, "prompt_tokens": self.prompt_tokens,
                    "completion_tokens": self.generated, "finish_reason": finish, "cached_tokens": self.cached}})
            }
        }
    }

    /// One step's tokens as an SSE event (the last one moves the stream on to its usage).
    pub(super) fn token_event(&mut self, emit: Emit) -> Vec<u8> {
        let Emit {
            tokens: n,
            last,
            cached,
        } = emit;
        self.generated += u64::from(n);
        self.cached = self.cached.max(cached);
        let piece = self.words(n);
        if self.kind == Kind::Native || self.cache.is_some() {
            self.text.push_str(&piece);
        }
        if last {
            self.phase = Phase::Usage;
            self.cache_reply();
        }
        self.sent_first = true;
        sse(&self.chunk(&piece, last.then_some("length"))).to_vec()
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
                        // vLLM opens a chat stream with the role and empty content.
                        let v = json!({"id": self.id, "object": "chat.completion.chunk", "created": 0, "model": self.model,
                            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}]});
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
                    let mut frame = self.token_event(emit);
                    for _ in 1..batch {
                        if self.phase != Phase::Tokens {
                            break;
                        }
                        // A closed channel is seen (and the stream cut) on the next call.
                        let Some(emit) = self.rx.recv().await else {
                            break;
                        };
                        frame.extend_from_slice(&self.token_event(emit));
                    }
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
        }) = self.rx.recv().await
        {
            self.generated += u64::from(tokens);
            self.cached = self.cached.max(cached);
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
                "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": "length"}], "usage": self.usage()})
            }
            Kind::Chat => {
                json!({"id": self.id, "object": "chat.completion", "created": 0, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}], "usage": self.usage()})
            }
            Kind::Native => {
                json!({"text": text, "meta_info": {"id": self.id, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.generated, "finish_reason": {"type": "length", "length": self.generated}}})
            }
        };
        Bytes::from(v.to_string())
    }
}
