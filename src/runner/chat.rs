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
//!
//! A session with sub-agents (`--fan-out`, or an agent trace's `parent_session_id`) is one job
//! too: its own turns, then each sub-agent's. Its sub-agents run side by side on slots of their
//! own once the turn they follow is answered (with `--fan-out`, its first), and its next turn
//! waits for the last. An open-loop session (an agent trace's, or one started at a
//! `--session-rate`) runs here as well, on the slot its level's schedule gave it.

use std::sync::Arc;

use super::Lane;
use crate::client::{ChatMessage, RequestSpec};
use crate::workload::{LevelKind, LevelSpec};

impl super::Runner {
    /// A multi-turn level's first turn fits, but its history grows each turn: say before it runs
    /// when the last turns will not fit (they will fail with the server's context error, and the
    /// conversation stops there).
    pub(super) fn chat_growth_warning(&self, spec: &LevelSpec) -> Option<String> {
        let limit = self.prepared.server.context_limit?;
        if self.prepared.factory.dataset().is_some() {
            return None;
        }
        let need = spec.last_turn_tokens()?;
        let fewer = if spec.kind == LevelKind::Sessions {
            "fewer turns (--turns), shorter tool results (--tool-result-len) or answers (--output-len)"
        } else {
            "fewer turns (--multi-turn), shorter messages"
        };
        (need > limit).then(|| {
            format!(
                "{}: the last turns' history will reach about {need} tokens (prompt + output), above the server's context limit of {limit}; those turns will fail as too long. Use {fewer}, or raise {} to at least {need}",
                spec.label(),
                self.prepared.server.engine.context_flag(),
            )
        })
    }
}

/// One conversation at a time, turn after turn.
pub(super) struct ChatWorker {
    pub lane: Lane,
    /// The tokens a chat message costs beside its content (measured before session levels).
    pub template_tokens: Option<u64>,
    /// Its sub-agents' slots: sub-agent k sends on the k-th (each its own, so no slot has two
    /// requests in flight).
    pub sub_agent_slots: Vec<u32>,
}

/// One chat's history as it grows: what it has said, and the server's count of its last
/// prompt plus the reply.
#[derive(Default)]
struct Thread {
    history: Vec<ChatMessage>,
    history_tokens: u64,
    /// Turns sent so far.
    turns: u32,
}

/// A conversation's turns apart: the session's own, then each sub-agent's in order.
type Turns = Vec<(u32, RequestSpec)>;

/// How many of its session's own turns a sub-agent waits for (its first turn says).
fn after_turn(turns: &Turns) -> u32 {
    turns
        .first()
        .and_then(|(_, s)| s.session_turn)
        .map_or(1, |t| t.after_turn)
}

fn split(job: Turns) -> (Turns, Vec<Turns>) {
    let mut own = Vec::new();
    let mut agents: Vec<Turns> = Vec::new();
    for (i, spec) in job {
        match spec.session_turn.and_then(|t| t.sub_agent) {
            Some(k) => {
                let k = k as usize;
                if agents.len() <= k {
                    agents.resize_with(k + 1, Vec::new);
                }
                agents[k].push((i, spec));
            }
            None => own.push((i, spec)),
        }
    }
    (own, agents)
}

impl ChatWorker {
    pub async fn run(mut self) {
        let mut first = true;
        loop {
            self.lane.wait_while_paused().await;
            if self.lane.halted() {
                return;
            }
            // A conversation's turns come as one job, so no other worker gets one of them.
            let Some(turns) = self.lane.next_job().await else {
                return;
            };
            // The user thinks before each of its sessions but its first.
            let think = turns.first().and_then(|(_, s)| s.think_before);
            if let Some(t) = think.filter(|_| !first)
                && !self.lane.wait_for_tool(t).await
            {
                return;
            }
            first = false;
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

    /// Sends a conversation's turns in order; stops at the first that does not succeed. A
    /// session's sub-agents start once the session's turns before them are answered (with
    /// `--fan-out` all of them after its first; in an agent trace, each after the turn it
    /// follows), side by side, and its next turn waits until the last of them has ended; one
    /// that fails ends the session.
    pub(super) async fn conversation(&self, job: Turns) {
        let (own, agents) = split(job);
        let own_turns = own.len() as u32;
        let mut own = own.into_iter();
        let mut agents: Vec<(usize, Turns)> = agents.into_iter().enumerate().collect();
        let mut thread = Thread::default();
        let mut control = self.lane.control.clone();
        let mut answered = 0u32;
        loop {
            let (now, later): (Vec<_>, Vec<_>) = agents
                .into_iter()
                .partition(|(_, turns)| after_turn(turns) <= answered);
            agents = later;
            if !now.is_empty() && !self.sub_agents(now).await {
                return;
            }
            // Without sub-agents still to start, the rest of the turns go as one chat.
            let next: Turns = if agents.is_empty() {
                own.by_ref().collect()
            } else {
                own.next().into_iter().collect()
            };
            if next.is_empty() {
                return;
            }
            answered += next.len() as u32;
            if !self
                .thread(
                    self.lane.slot,
                    &mut control,
                    &mut thread,
                    next,
                    Some(own_turns),
                )
                .await
            {
                return;
            }
        }
    }

    /// Runs sub-agents (their index among the session's, and their turns) side by side, each on
    /// its slot; true when every one completed.
    async fn sub_agents(&self, agents: Vec<(usize, Turns)>) -> bool {
        let runs = agents.into_iter().map(|(k, turns)| {
            let slot = self
                .sub_agent_slots
                .get(k)
                .copied()
                .unwrap_or(self.lane.slot);
            let mut control = self.lane.control.clone();
            async move {
                self.thread(slot, &mut control, &mut Thread::default(), turns, None)
                    .await
            }
        });
        futures_util::future::join_all(runs)
            .await
            .into_iter()
            .all(|ok| ok)
    }

    /// Sends `turns` of one chat on `slot`, each after its tool wait, growing `thread`; false
    /// at the first that does not succeed, or once the level sends nothing more. A session's
    /// own turns carry how many it has (`own_turns`).
    async fn thread(
        &self,
        slot: u32,
        control: &mut tokio::sync::watch::Receiver<super::Control>,
        thread: &mut Thread,
        turns: Turns,
        own_turns: Option<u32>,
    ) -> bool {
        for (i, mut spec) in turns {
            // A session's tool runs between the answer and the next turn.
            if let Some(wait) = spec.wait_before
                && !self.lane.wait_for_tool(wait).await
            {
                return false;
            }
            super::worker::pause_gate(control, &self.lane.cancel).await;
            if self.lane.halted() {
                return false;
            }
            if let Some(opening) = spec.messages.take() {
                thread.history.extend(opening.iter().cloned());
            } else {
                thread.history.push(ChatMessage {
                    role: "user",
                    content: spec.prompt.clone(),
                });
                spec.planned_input_tokens += thread.history_tokens;
            }
            spec.messages = Some(thread.history.clone().into());
            let mut reply = String::new();
            let mut rec = self.lane.send_on(slot, i, &spec, Some(&mut reply)).await;
            thread.turns += 1;
            rec.turn = Some(thread.turns);
            rec.sub_agent = spec.session_turn.and_then(|t| t.sub_agent).map(|k| k + 1);
            rec.session = spec.session_turn.map(|t| t.session);
            rec.session_turns = own_turns.filter(|_| spec.session_turn.is_some());
            rec.tool_wait_ms = spec.wait_before.map(|w| w.as_secs_f64() * 1e3);
            rec.cache_ceiling_tokens = self.ceiling(&spec, &rec);
            thread.history_tokens = rec.input_tokens + rec.output_tokens;
            let ok = rec.is_ok();
            self.lane.deliver(rec).await;
            if !ok {
                return false;
            }
            thread.history.push(ChatMessage {
                role: "assistant",
                content: Arc::from(reply),
            });
        }
        true
    }
}
