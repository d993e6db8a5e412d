//! Each session of a session level on its own (`session_list`, `session_list.csv`): its clock
//! while it runs, and its row once it ends.

use serde::{Deserialize, Serialize};

use super::record::RequestRecord;

/// A session's own turns so far: first send, last end, and the time in the server (Σ E2E) and
/// on its tools (Σ waits), µs; whether each met the SLO; what its requests (its sub-agents'
/// included) sent and got.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SessionClock {
    pub(super) first_send_us: u64,
    pub(super) last_end_us: u64,
    pub(super) server_us: u64,
    pub(super) tool_us: u64,
    pub(super) met: bool,
    pub(super) turns: u32,
    pub(super) sub_agent_turns: u32,
    pub(super) input_tokens: u64,
    pub(super) output_tokens: u64,
    pub(super) cached_tokens: Option<u64>,
    pub(super) cache_ceiling_tokens: Option<u64>,
    pub(super) max_ttft_us: Option<u64>,
}

impl SessionClock {
    pub(super) fn opened(r: &RequestRecord) -> Self {
        Self {
            first_send_us: r.send_at_us,
            met: true,
            ..Self::default()
        }
    }

    /// Adds a completed request of the session (its own turn or a sub-agent's) to its sums.
    pub(super) fn count(&mut self, r: &RequestRecord) {
        if r.sub_agent.is_some() {
            self.sub_agent_turns += 1;
        } else {
            self.turns += 1;
        }
        self.input_tokens += r.input_tokens;
        self.output_tokens += r.output_tokens;
        if let Some(c) = r.cached_tokens {
            *self.cached_tokens.get_or_insert(0) += c.min(r.input_tokens);
        }
        if let Some(c) = r.cache_ceiling_tokens {
            *self.cache_ceiling_tokens.get_or_insert(0) += c;
        }
        if let Some(t) = r.ttft_us {
            self.max_ttft_us = Some(self.max_ttft_us.map_or(t, |m| m.max(t)));
        }
    }

    /// Its row, as it ended (`None` while under way), numbered `session`; `slo`: whether the
    /// level was judged against one.
    pub(super) fn row(&self, session: u32, end: SessionEnd, slo: bool) -> SessionRow {
        let s = |us: u64| us as f64 / 1e6;
        SessionRow {
            session,
            end,
            turns: self.turns,
            sub_agent_turns: self.sub_agent_turns,
            start_s: s(self.first_send_us),
            duration_s: s(self.last_end_us.saturating_sub(self.first_send_us)),
            server_s: s(self.server_us),
            tool_s: s(self.tool_us),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_tokens: self.cached_tokens,
            cache_ceiling_tokens: self.cache_ceiling_tokens,
            max_ttft_ms: self.max_ttft_us.map(|t| t as f64 / 1e3),
            met_slo: slo.then_some(self.met),
        }
    }
}

/// How a session ended (`session_list`'s `end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "kind")]
pub enum SessionEnd {
    /// Its every own turn completed.
    Completed,
    /// A failed request (its own or a sub-agent's) ended it; the first failure's kind.
    Failed(super::record::FailureKind),
    /// Still under way when the level ended (a level stopped or cut at its time limit).
    Unfinished,
}

impl SessionEnd {
    /// A word for a table: `completed`, `unfinished` or the failure's kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Failed(kind) => kind.name(),
            Self::Unfinished => "unfinished",
        }
    }
}

/// One session of a level (results.json `session_list`, `session_list.csv`): its own turns
/// completed, its sub-agents' requests completed, when it started (s from the level's origin),
/// how long it took from its first send to its last token and, of that, its time in the server
/// (Σ its own turns' E2E) and on its tools (Σ their waits), s; the tokens of all its completed
/// requests, its sub-agents' included; its slowest TTFT; with `--slo`, whether its every own
/// turn met it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRow {
    pub session: u32,
    #[serde(flatten)]
    pub end: SessionEnd,
    pub turns: u32,
    pub sub_agent_turns: u32,
    pub start_s: f64,
    pub duration_s: f64,
    pub server_s: f64,
    pub tool_s: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_ceiling_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met_slo: Option<bool>,
}
