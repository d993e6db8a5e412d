//! The unmeasured requests before the first level; the first also measures the tokens the
//! server adds to every prompt.

use std::time::Instant;

use crate::client::{RequestSpec, RequestTag};
use crate::event::Event;
use crate::metrics::{CountSource, FailureKind, Outcome};

use super::Runner;

impl Runner {
    pub(super) async fn warmup(&mut self) -> Result<(), String> {
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
