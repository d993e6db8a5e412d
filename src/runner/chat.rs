//! Multi-turn conversations: a closed loop whose unit is a conversation, not a request.
//!
//! Each worker takes one conversation's turns from the level's queue as one job (request `i` is
//! turn `i % K` of conversation `i / K`; [`crate::workload::requests`] builds them) and sends
//! them one after the other. Turn k carries the whole history as a real chat: the shared system
//! prompt (if any), every earlier user message and the server's actual replies, then the new
//! user message. That is what a chat client sends, and what lets a server's prefix cache serve
//! everything but the newest message: the effect shows as TTFT per turn beside the cached
//! tokens the server reports for each request.
//!
//! A conversation whose turn fails stops there (the next turn would need the reply); its
//! remaining turns are not sent, and the level ends with fewer requests than planned.

use std::sync::Arc;

use super::Lane;
use crate::client::{ChatMessage, RequestSpec};
use crate::workload::LevelSpec;

/// About how many tokens (prompt + output) the last turn of a multi-turn level's conversations
/// holds with synthetic messages: the first message, then per later turn the reply, the new
/// message and two message openings (a few tokens each in common templates), plus the last
/// reply. `None` for other levels; dataset conversations vary and are not estimated.
pub(super) fn last_turn_tokens(spec: &LevelSpec) -> Option<u64> {
    const TEMPLATE_PER_MESSAGE: u64 = 4;
    let c = spec.conversation?;
    let per_turn = u64::from(spec.output_tokens) + c.followup_tokens + 2 * TEMPLATE_PER_MESSAGE;
    Some(
        spec.input_tokens
            + u64::from(c.turns.saturating_sub(1)) * per_turn
            + u64::from(spec.output_tokens),
    )
}

/// One conversation at a time, turn after turn.
pub(super) struct ChatWorker {
    pub lane: Lane,
    /// The tokens a chat message costs beside its content (measured before session levels).
    pub template_tokens: Option<u64>,
}

impl ChatWorker {
    pub async fn run(mut self) {
        loop {
            self.lane.wait_while_paused().await;
            if self.lane.halted() {
                return;
            }
            // A conversation's turns come as one job, so no other worker gets one of them.
            let Some(turns) = self.lane.next_job().await else {
                return;
            };
            self.conversation(turns).await;
        }
    }

    /// A session turn's cache ceiling: its prompt as the server counted it, less its newest
    /// message's content and, after the first turn, the template tokens of that message (on the
    /// first turn the message opens as the primer's did, which the server finished). None when
    /// the prompt was not counted by the server or the template cost is not known.
    fn ceiling(&self, spec: &RequestSpec, rec: &crate::metrics::RequestRecord) -> Option<u64> {
        let turn = spec.session_turn?;
        let m = self.template_tokens?;
        if !rec.is_ok() || rec.input_source != crate::metrics::CountSource::Usage {
            return None;
        }
        let template = if turn.first { 0 } else { m };
        Some(
            rec.input_tokens
                .saturating_sub(template + turn.new_message_tokens),
        )
    }

    /// Sends a conversation's turns in order; stops at the first that does not succeed.
    async fn conversation(&mut self, turns: Vec<(u32, RequestSpec)>) {
        let mut history: Vec<ChatMessage> = Vec::new();
        // The server's count of the last turn's prompt plus its reply.
        let mut history_tokens = 0u64;
        for (turn, (i, mut spec)) in (1u32..).zip(turns) {
            // A session's tool runs between the answer and the next turn.
            if let Some(wait) = spec.wait_before
                && !self.lane.wait_for_tool(wait).await
            {
                return;
            }
            self.lane.wait_while_paused().await;
            if self.lane.halted() {
                return;
            }
            if let Some(opening) = spec.messages.take() {
                history.extend(opening.iter().cloned());
            } else {
                history.push(ChatMessage {
                    role: "user",
                    content: spec.prompt.clone(),
                });
                spec.planned_input_tokens += history_tokens;
            }
            spec.messages = Some(history.clone().into());
            let mut reply = String::new();
            let mut rec = self.lane.send(i, &spec, Some(&mut reply)).await;
            rec.turn = Some(turn);
            rec.tool_wait_ms = spec.wait_before.map(|w| w.as_secs_f64() * 1e3);
            rec.cache_ceiling_tokens = self.ceiling(&spec, &rec);
            history_tokens = rec.input_tokens + rec.output_tokens;
            let ok = rec.is_ok();
            self.lane.deliver(rec).await;
            if !ok {
                return;
            }
            history.push(ChatMessage {
                role: "assistant",
                content: Arc::from(reply),
            });
        }
    }
}
