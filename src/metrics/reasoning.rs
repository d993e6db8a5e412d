//! A level's reasoning and tool-call figures (docs/metrics.md "Reasoning and tool calls"),
//! folded request by request beside the rest of the level.

use super::dist::{Dist, DistStats};
use super::record::RequestRecord;

/// What a level's successful requests said of their thinking, answers and tool calls.
#[derive(Clone, Debug, Default)]
pub struct ReasoningFold {
    ttfc: Dist,
    thinking: Dist,
    /// milli-tokens/s, as the other speeds.
    content_decode: Dist,
    first_tool: Dist,
    completed: u64,
    output_tokens: u64,
    reasoning_tokens: u64,
    /// Requests that reasoned at all.
    reasoned: u64,
    tool_calls: u64,
    unanswered: u64,
    unanswered_stopped: u64,
    think_tags: u64,
}

/// The figures of a level, in the units results.json uses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReasoningStats {
    pub ttfc_ms: Option<DistStats>,
    pub thinking_ms: Option<DistStats>,
    pub content_decode_tokens_per_s: Option<DistStats>,
    pub first_tool_call_ms: Option<DistStats>,
    pub mean_reasoning_tokens: Option<f64>,
    pub mean_content_tokens: Option<f64>,
    /// Σ reasoning / Σ output tokens.
    pub reasoning_share: Option<f64>,
    pub mean_tool_calls: Option<f64>,
    /// Requests that thought and never began an answer.
    pub unanswered_requests: u64,
    /// Of those, the ones that ended with a finish reason other than `length`.
    pub unanswered_stopped: u64,
    /// Requests whose answer held a literal `<think>` / `</think>`.
    pub think_tag_requests: u64,
}

impl ReasoningFold {
    /// Folds a successful request.
    pub fn add(&mut self, r: &RequestRecord) {
        self.completed += 1;
        self.output_tokens += r.output_tokens;
        let reasoning = r.reasoning_tokens.unwrap_or(0).min(r.output_tokens);
        self.reasoning_tokens += reasoning;
        self.reasoned += u64::from(reasoning > 0);
        self.tool_calls += u64::from(r.tool_calls);
        if reasoning > 0 && r.ttfc_us.is_none() && r.first_tool_call_us.is_none() {
            self.unanswered += 1;
            self.unanswered_stopped += u64::from(r.finish == Some(super::record::Finish::Stop));
        }
        self.think_tags += u64::from(r.think_tags);
        if let Some(v) = r.ttfc_or_ttft_us() {
            self.ttfc.record(v);
        }
        if reasoning > 0
            && let Some(v) = r.thinking_us()
        {
            self.thinking.record(v);
        }
        if let Some(v) = r.content_decode_tokens_per_s() {
            self.content_decode.record((v * 1000.0).round() as u64);
        }
        if let Some(v) = r.first_tool_call_us {
            self.first_tool.record(v);
        }
    }

    /// The level's figures so far.
    pub fn stats(&self) -> ReasoningStats {
        let per_request = |x: u64| (self.completed > 0).then(|| x as f64 / self.completed as f64);
        ReasoningStats {
            ttfc_ms: self.ttfc.stats(1e-3),
            thinking_ms: self.thinking.stats(1e-3),
            content_decode_tokens_per_s: self.content_decode.stats(1e-3),
            first_tool_call_ms: self.first_tool.stats(1e-3),
            mean_reasoning_tokens: per_request(self.reasoning_tokens),
            mean_content_tokens: per_request(self.output_tokens - self.reasoning_tokens),
            reasoning_share: (self.output_tokens > 0)
                .then(|| self.reasoning_tokens as f64 / self.output_tokens as f64),
            mean_tool_calls: per_request(self.tool_calls),
            unanswered_requests: self.unanswered,
            unanswered_stopped: self.unanswered_stopped,
            think_tag_requests: self.think_tags,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::{CountSource, Outcome};

    /// A request that thought for `reasoning` tokens, one every `step_us` after a TTFT of
    /// `ttft_us`, then answered `content` tokens at the same pace.
    fn thinker(ttft_us: u64, step_us: u64, reasoning: u64, content: u64) -> RequestRecord {
        let out = reasoning + content;
        RequestRecord {
            level: 1,
            index: 0,
            warmup: false,
            sched_at_us: 0,
            send_at_us: 0,
            end_at_us: ttft_us + step_us * out,
            outcome: Outcome::Ok,
            planned_input_tokens: 100,
            input_tokens: 100,
            input_source: CountSource::Usage,
            output_tokens: out,
            output_source: CountSource::Usage,
            chunk_source: CountSource::PerChunkUsage,
            ttft_us: Some(ttft_us),
            e2e_us: Some(ttft_us + step_us * (out - 1)),
            chunks: Vec::new(),
            retries: 0,
            slot: None,
            cached_tokens: None,
            turn: None,
            session: None,
            sub_agent: None,
            session_turns: None,
            tool_wait_ms: None,
            cache_ceiling_tokens: None,
            ttfc_us: (content > 0).then_some(ttft_us + step_us * reasoning),
            reasoning_tokens: (reasoning > 0).then_some(reasoning),
            reasoning_source: (reasoning > 0).then_some(CountSource::Usage),
            first_tool_call_us: None,
            tool_calls: 0,
            held_reads: 0,
            first_held: false,
            finish: None,
            think_tags: false,
            lora: None,
            schema_valid: None,
            images: None,
            image_tokens: None,
        }
    }

    #[test]
    fn thinking_answers_and_shares_have_their_known_values() {
        let mut f = ReasoningFold::default();
        // 200 thinking tokens then 100 answer tokens, 10 ms a token after a 50 ms TTFT.
        f.add(&thinker(50_000, 10_000, 200, 100));
        f.add(&thinker(50_000, 10_000, 200, 100));
        let s = f.stats();
        assert!((s.ttfc_ms.as_ref().unwrap().mean - 2050.0).abs() < 1e-9);
        assert!((s.thinking_ms.as_ref().unwrap().mean - 2000.0).abs() < 1e-9);
        // 99 tokens over 99 steps of 10 ms.
        let speed = s.content_decode_tokens_per_s.as_ref().unwrap().mean;
        assert!((speed - 100.0).abs() < 0.01, "{speed}");
        assert_eq!(s.mean_reasoning_tokens, Some(200.0));
        assert_eq!(s.mean_content_tokens, Some(100.0));
        assert_eq!(s.reasoning_share, Some(200.0 / 300.0));
    }

    #[test]
    fn without_reasoning_ttfc_is_ttft_and_there_is_no_thinking() {
        let mut f = ReasoningFold::default();
        let mut r = thinker(40_000, 5_000, 0, 50);
        r.ttfc_us = None;
        f.add(&r);
        let s = f.stats();
        assert!((s.ttfc_ms.as_ref().unwrap().mean - 40.0).abs() < 1e-9);
        assert!(s.thinking_ms.is_none());
        assert_eq!(s.reasoning_share, Some(0.0));
        assert_eq!(s.mean_content_tokens, Some(50.0));
    }

    #[test]
    fn a_request_that_never_answered_has_no_ttfc() {
        let mut f = ReasoningFold::default();
        f.add(&thinker(40_000, 5_000, 64, 0));
        let s = f.stats();
        assert!(s.ttfc_ms.is_none(), "{:?}", s.ttfc_ms);
        assert_eq!(s.reasoning_share, Some(1.0));
    }
}
