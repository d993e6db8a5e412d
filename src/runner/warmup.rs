//! The unmeasured requests before the first level; the first also measures the tokens the
//! server adds to every prompt.

use std::time::Instant;

use crate::client::{ChatMessage, RequestSpec, RequestTag};
use crate::event::Event;
use crate::metrics::{CountSource, FailureKind, Outcome};

use super::Runner;

impl Runner {
    /// The warmup requests, then the session primer when the plan has session levels.
    pub(super) async fn warmup(&mut self) -> Result<(), String> {
        self.warm().await?;
        self.prime_sessions().await;
        Ok(())
    }

    async fn warm(&mut self) -> Result<(), String> {
        if self.warmup_requests == 0 {
            return Ok(());
        }
        self.emit(Event::Phase("warming up".into()));
        let origin = Instant::now();
        let mut any_ok = false;
        let mut last_err = String::new();
        for i in 0..self.warmup_requests {
            if self.cancel.is_cancelled() {
                return Ok(());
            }
            let prompt = self
                .prepared
                .factory
                .make(self.warmup_input_tokens, u32::MAX, i)
                .await
                .map_err(|e| format!("preparing the warmup prompt: {e}"))?;
            let spec = RequestSpec::prompt(
                prompt.text,
                self.warmup_input_tokens,
                prompt
                    .counted_tokens
                    .map(|n| (n, CountSource::ServerTokenize)),
                self.warmup_output_tokens,
            );
            let tag = RequestTag {
                level: 0,
                index: i,
                warmup: true,
                origin,
                sched: Instant::now(),
            };
            let rec = self.prepared.client.send(&spec, tag).await;
            match &rec.outcome {
                Outcome::Ok => {
                    // Calibrate: tokens the server adds (BOS, chat template) to what we count.
                    if !any_ok
                        && rec.input_source == CountSource::Usage
                        && self.prepared.factory.counter().is_exact()
                        && let Some(counted) = prompt.counted_tokens
                    {
                        self.prepared.factory.offset_tokens =
                            rec.input_tokens as i64 - counted as i64;
                        self.emit(Event::Calibrated(self.prepared.factory.method()));
                    }
                    any_ok = true;
                }
                Outcome::Failed { kind, message, .. } => {
                    last_err.clone_from(message);
                    if *kind == FailureKind::Connect {
                        return Err(format!("warmup request could not connect: {message}"));
                    }
                }
                Outcome::Cancelled => {}
            }
            self.emit(Event::Request(Box::new(rec)));
        }
        if !any_ok {
            self.emit(Event::Warning(format!(
                "every warmup request failed: {last_err}"
            )));
        }
        Ok(())
    }
}

/// Content tokens of each primer message.
const PRIMER_MESSAGE_TOKENS: u64 = 16;

impl Runner {
    /// Before session levels, two unmeasured chats (recorded as warmup requests): the opening
    /// of every session (the shared prefix as a system message, when there is one) with one
    /// user message, then with two. Their prompts' difference less the second message's
    /// content is what the chat template adds to a message, which a session turn's cache
    /// ceiling leaves out with its newest message; and the first chat puts the shared prefix
    /// through prefill, so every session's first turn finds it finished. Without an exact
    /// count of both prompts the ceiling is not worked out, and the run says so.
    async fn prime_sessions(&mut self) {
        self.template_tokens = None;
        let planned = self
            .prepared
            .levels
            .iter()
            .find(|l| l.kind == crate::workload::LevelKind::Sessions)
            .map(|l| l.shared_prefix_tokens);
        // A concurrency search in sessions probes session levels.
        let searched = self
            .prepared
            .search
            .as_ref()
            .filter(|s| s.sessions.is_some())
            .map(|s| s.shared_prefix_tokens);
        let Some(prefix) = planned.or(searched) else {
            return;
        };
        match self.primer(prefix).await {
            Ok(m) => self.template_tokens = Some(m),
            Err(why) => self.emit(Event::Warning(format!(
                "session levels: the cache ceiling is not worked out ({why})"
            ))),
        }
    }

    /// The primer's two chats; the template tokens a message costs.
    async fn primer(&mut self, prefix: u64) -> Result<u64, String> {
        if !self.prepared.factory.counter().is_exact() {
            return Err("prompts are not counted exactly: no tokenizer".into());
        }
        let mut history = Vec::with_capacity(3);
        if prefix > 0 {
            history.push(ChatMessage {
                role: "system",
                content: self.prepared.factory.shared_prefix(prefix).await?.text,
            });
        }
        let mut prompts = [0u64; 2];
        let mut second = 0;
        let origin = Instant::now();
        for (k, slot) in prompts.iter_mut().enumerate() {
            // A digit first: no task or tool result (words) begins as a primer message does, so
            // the primer has finished nothing of a session beyond its opening.
            let words = self
                .prepared
                .factory
                .make_text(PRIMER_MESSAGE_TOKENS, u32::MAX - 1, k as u32)
                .await?
                .text;
            let text: std::sync::Arc<str> = format!("{k} {words}").into();
            second = self.prepared.factory.counter().count(&text).await?;
            history.push(ChatMessage {
                role: "user",
                content: text.clone(),
            });
            let mut spec = RequestSpec::prompt(text, PRIMER_MESSAGE_TOKENS, None, 1);
            spec.messages = Some(history.clone().into());
            spec.cache_prompt = true;
            let tag = RequestTag {
                level: 0,
                index: self.warmup_requests + k as u32,
                warmup: true,
                origin,
                sched: Instant::now(),
            };
            let rec = self.prepared.client.send(&spec, tag).await;
            let counted = rec.is_ok() && rec.input_source == CountSource::Usage;
            *slot = rec.input_tokens;
            let failed = match &rec.outcome {
                Outcome::Failed { message, .. } => Some(message.clone()),
                _ => None,
            };
            self.emit(Event::Request(Box::new(rec)));
            if let Some(message) = failed {
                return Err(format!("a primer chat failed: {message}"));
            }
            if !counted {
                return Err("the server did not count the primer's prompt".into());
            }
        }
        prompts[1].checked_sub(prompts[0] + second).ok_or_else(|| {
            format!(
                "a second message of {second} tokens added only {}",
                prompts[1].saturating_sub(prompts[0])
            )
        })
    }
}

impl Runner {
    /// With `--reset-cache`, asks the server to clear its prefix cache before level `level` and
    /// says what came of it; once the server offers no way to, it is not asked again.
    pub(super) async fn reset_cache(&self, level: u32) {
        use std::sync::atomic::Ordering;
        if !self.reset_cache.load(Ordering::Relaxed) {
            return;
        }
        self.emit(Event::Phase("clearing the server's prefix cache".into()));
        let outcome = self.prepared.client.reset_prefix_cache().await;
        if matches!(outcome, crate::client::CacheReset::NotOffered(_)) {
            self.reset_cache.store(false, Ordering::Relaxed);
        }
        self.emit(Event::CacheReset { level, outcome });
    }
}
