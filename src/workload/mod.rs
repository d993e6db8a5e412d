//! What to send: the concurrency sweep, the request-rate sweep, the long-context ladder, and
//! prompts of exact length.

mod agent_trace;
pub mod arrivals;
pub mod clock;
pub mod content;
pub mod dataset;
pub mod images;
pub mod levels;
pub mod mix;
pub mod plan;
pub mod prompt;
pub mod requests;
pub mod search;
pub mod sessions;
pub mod shapes;
pub mod shard;
pub mod trace;

use serde::{Deserialize, Serialize};

use crate::grammar::parse_count;
pub use arrivals::{Arrival, Schedule};
pub use levels::{Place, budget_suffix, format_suffix, repeat_suffix, trace_label};

/// Which tab/table a level belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelKind {
    /// One concurrency value of the closed-loop sweep.
    Sweep,
    /// One input length of the long-context ladder.
    LongContext,
    /// One request rate of the open-loop sweep.
    Rate,
    /// Multi-turn chats: conversations whose history grows turn by turn.
    MultiTurn,
    /// A production trace replayed at its recorded times (`--trace`).
    Trace,
    /// Agent sessions (`--sessions`): N users at once, each session's turns separated by tool
    /// waits, its context growing by each answer and tool result.
    Sessions,
}

impl LevelKind {
    /// The kind as results.json's `kind` spells it (`sweep`, `long_context`, …).
    pub fn name(self) -> &'static str {
        match self {
            LevelKind::Sweep => "sweep",
            LevelKind::LongContext => "long_context",
            LevelKind::Rate => "rate",
            LevelKind::MultiTurn => "multi_turn",
            LevelKind::Trace => "trace",
            LevelKind::Sessions => "sessions",
        }
    }
}

/// One planned level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelSpec {
    /// Position in the run (0-based), also the `level` of its records.
    pub index: u32,
    pub kind: LevelKind,
    /// Closed-loop workers; for a rate level, its `--max-concurrency` (0: no cap).
    pub concurrency: u32,
    /// Planned input tokens per request.
    pub input_tokens: u64,
    /// Output tokens per request (`max_tokens`, with `ignore_eos`).
    pub output_tokens: u32,
    /// Measured requests (warmup excluded).
    pub requests: u32,
    /// How requests arrive at a rate level (None: closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<Arrival>,
    /// Leading tokens of `input_tokens` that every prompt of the level shares
    /// (`--shared-prefix-len`; at a multi-turn level, the system message).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_prefix_tokens: u64,
    /// The conversations of a multi-turn level (`input_tokens` is then the first turn's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Conversation>,
    /// The tool waits before a session's turns after the first (a session level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_wait: Option<sessions::ToolWait>,
    /// A user's think time before each of its sessions after its first (a session level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<sessions::ToolWait>,
    /// The trace a trace level replays (`input_tokens`, `output_tokens`: its means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<trace::TraceLevel>,
    /// Which run of its level this is (`--repeat N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
    /// What its prompts are (`--content`): the kind of this level's pass; None where the
    /// run has no `--content`, or the level runs once with prompts of its own (chats,
    /// sessions, traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<content::ContentKind>,
    /// The input/output pair of its shape's pass (`--shapes`); `input_tokens` and
    /// `output_tokens` are then its lengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<shapes::Shape>,
    /// The dataset category its requests are drawn from (`--categories`): the category of this
    /// level's pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Reasoning tokens each request may think for (`--thinking-budget`), sent the way the
    /// engine takes it; None: no budget sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// This process's share of the level when the run is split over machines (`--shard`):
    /// which of the shards the level is dealt over it is (a closed-loop level with fewer
    /// workers than shards is dealt over the first C only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<shard::Shard>,
    /// Seconds the level sends requests for (`--level-seconds`); None: until its request count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// What the level mixes into its requests (spread lengths); plain text of fixed length
    /// when empty.
    #[serde(default, skip_serializing_if = "mix::RequestMix::is_plain")]
    pub mix: mix::RequestMix,
}

/// One of a level's `--repeat` runs: the plan runs every level once, then again, so drift over
/// the run shows between the repeats of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repeat {
    /// This run, from 1.
    pub n: u32,
    /// Runs of the level in all.
    pub of: u32,
    /// The index of the level's first run: what its runs have in common.
    pub first: u32,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The shape of a multi-turn level's conversations (`--multi-turn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// Turns per conversation: turn k sends the whole history (k − 1 user messages, the
    /// assistant's k − 1 real replies) plus a new user message.
    pub turns: u32,
    /// Tokens of each follow-up user message (turns 2 and later).
    pub followup_tokens: u64,
    /// A session's sub-agents (`--fan-out`): after the first turn, this many sessions start at
    /// once, each sharing the parent's system prefix, and the parent's next turn waits for all
    /// of them. 0: none.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub fan_out: u32,
    /// Turns of each sub-agent's session (`--sub-agent-turns`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub sub_agent_turns: u32,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// Where a request of a conversation stands in it: the parent's turn, or a sub-agent's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnPlace {
    /// The conversation's own turn (from 0).
    Parent { turn: u32 },
    /// Sub-agent `agent`'s turn (both from 0).
    SubAgent { agent: u32, turn: u32 },
}

impl Conversation {
    /// A plain conversation of `turns` turns, its follow-ups `followup_tokens` long.
    pub fn new(turns: u32, followup_tokens: u64) -> Self {
        Self {
            turns,
            followup_tokens,
            fan_out: 0,
            sub_agent_turns: 0,
        }
    }

    /// Requests a session sends where one session can fail more than once (with sub-agents,
    /// which run side by side); 0 where its first failure ends it.
    pub fn failing_requests(&self) -> u32 {
        if self.fan_out > 0 { self.requests() } else { 0 }
    }

    /// Requests one conversation sends: its turns, and its sub-agents' (at least 1).
    pub fn requests(&self) -> u32 {
        self.turns
            .saturating_add(self.fan_out.saturating_mul(self.sub_agent_turns))
            .max(1)
    }

    /// Where the `j`-th request of a conversation (from 0) stands: the parent's turns come
    /// first, then each sub-agent's turns in order.
    pub fn place(&self, j: u32) -> TurnPlace {
        let turns = self.turns.max(1);
        if j < turns || self.fan_out == 0 || self.sub_agent_turns == 0 {
            return TurnPlace::Parent { turn: j };
        }
        let k = j - turns;
        TurnPlace::SubAgent {
            agent: k / self.sub_agent_turns,
            turn: k % self.sub_agent_turns,
        }
    }
}

/// The fold of a level's records, for what the level is: a session level's by session and
/// turn (its SLO judged on every turn), a trace's over its timeline, each tier judged. The one
/// place a level's accumulator is made, for the run, the search's probes and a merge of shards.
pub fn accumulator(
    kind: LevelKind,
    conversation: Option<Conversation>,
    trace_s: Option<f64>,
    slo: Option<crate::metrics::Slo>,
    tiers: Vec<crate::metrics::slo_tiers::SloTier>,
) -> crate::metrics::LevelAccumulator {
    let mut acc = crate::metrics::LevelAccumulator::new(slo).with_tiers(tiers);
    if let (LevelKind::Sessions, Some(c)) = (kind, conversation) {
        acc = acc.with_sessions(c.turns, c.failing_requests());
    }
    if let Some(s) = trace_s {
        acc = acc.with_timeline(crate::metrics::timeline::TimelineFold::width_for(s));
    }
    acc
}

impl LevelSpec {
    /// The most requests this level can have in flight at once, each an open connection: its
    /// closed-loop workers (a session level's users, each with its sub-agents), an open-loop
    /// level's `--max-concurrency`, or all of its requests when they are sent at once; None
    /// where nothing bounds it (a rate without a cap: rate × latency, which no plan knows).
    pub fn most_in_flight(&self) -> Option<u64> {
        let c = u64::from(self.concurrency);
        if let Some(a) = &self.arrival {
            return match a.max_concurrency {
                Some(m) => Some(u64::from(m)),
                None if a.request_rate.is_infinite() => Some(u64::from(self.requests)),
                None => None,
            };
        }
        if self.trace.is_some() {
            return (c > 0).then_some(c);
        }
        let fan_out = self.conversation.map_or(0, |cv| u64::from(cv.fan_out));
        Some(c * (1 + fan_out))
    }

    /// [`accumulator`] for this level, knowing its closed-loop workers.
    pub fn accumulator(
        &self,
        slo: Option<crate::metrics::Slo>,
        tiers: Vec<crate::metrics::slo_tiers::SloTier>,
    ) -> crate::metrics::LevelAccumulator {
        accumulator(
            self.kind,
            self.conversation,
            self.trace.as_ref().map(|t| t.duration_s),
            slo,
            tiers,
        )
        .with_slots(self.workers())
    }

    /// Closed-loop workers that send the level's requests (0 at a rate level: a pool of slots).
    pub fn workers(&self) -> u32 {
        if self.is_open_loop() {
            return 0;
        }
        match self.conversation {
            Some(c) => self.concurrency.min(self.requests.div_ceil(c.requests())),
            None => self.concurrency.min(self.requests),
        }
    }

    /// About how many tokens (prompt + output) the last turn of a multi-turn or session
    /// level's conversations holds with synthetic messages: the first message, then per later
    /// turn the reply, the new message and two message openings (a few tokens each in common
    /// templates), plus the last reply. `None` for other levels; dataset conversations and
    /// agent traces vary and are not estimated.
    pub fn last_turn_tokens(&self) -> Option<u64> {
        const TEMPLATE_PER_MESSAGE: u64 = 4;
        let c = self.conversation.filter(|_| self.trace.is_none())?;
        let per_turn = u64::from(self.output_tokens) + c.followup_tokens + 2 * TEMPLATE_PER_MESSAGE;
        Some(
            self.input_tokens
                + u64::from(c.turns.saturating_sub(1)) * per_turn
                + u64::from(self.output_tokens),
        )
    }

    /// Whether requests go out on a schedule (a rate or trace level), not from workers.
    pub fn is_open_loop(&self) -> bool {
        self.arrival.is_some() || self.trace.is_some()
    }

    /// Most requests in flight at an open-loop level (`--max-concurrency`).
    pub fn max_in_flight(&self) -> Option<u32> {
        match (&self.arrival, &self.trace) {
            (Some(a), _) => a.max_concurrency,
            (None, Some(t)) => t.max_concurrency,
            (None, None) => None,
        }
    }

    /// The conversation (from 0) of request `i` of a multi-turn or session level, and where
    /// the request stands in it.
    pub fn turn_of(&self, i: u32) -> Option<(u32, TurnPlace)> {
        let c = self.conversation?;
        let k = c.requests();
        Some((i / k, c.place(i % k)))
    }
}

/// The open-loop part of a run: request rates and how requests arrive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// Request rates (requests/s) of the rate levels, run after the concurrency sweep;
    /// infinite: every request of the level at once (`--request-rate inf`).
    #[serde(with = "arrivals::rates_serde")]
    pub request_rates: Vec<f64>,
    /// Gamma shape of the gaps between arrivals: 1 is Poisson, below 1 burstier.
    pub burstiness: f64,
    /// Seconds over which each rate level's rate rises linearly from 0 (0: none).
    pub ramp_up_s: f64,
    /// Most requests in flight at once at a rate level (None: no cap).
    pub max_concurrency: Option<u32>,
}

impl Default for OpenLoop {
    fn default() -> Self {
        Self {
            request_rates: Vec::new(),
            burstiness: 1.0,
            ramp_up_s: 0.0,
            max_concurrency: None,
        }
    }
}

/// How many measured requests a sweep level sends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestCount {
    /// The same number at every level.
    Fixed(u32),
    /// `ceil(factor × C)`, but at least `min`.
    PerConcurrency { factor: f64, min: u32 },
}

impl Default for RequestCount {
    /// At least 3×C and at least 10: enough for stable percentiles at every level.
    fn default() -> Self {
        RequestCount::PerConcurrency {
            factor: 3.0,
            min: 10,
        }
    }
}

impl RequestCount {
    /// Parses `50` (fixed) or `3x` (3×C, with `min`).
    pub fn parse(s: &str, min: u32) -> Result<Self, String> {
        let t = s.trim();
        if let Some(f) = t.strip_suffix(['x', 'X']) {
            let factor: f64 = f
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v > 0.0)
                .ok_or_else(|| format!("'{s}': the factor before x must be a positive number"))?;
            return Ok(RequestCount::PerConcurrency { factor, min });
        }
        let n = parse_count(t)?;
        match u32::try_from(n) {
            Ok(n) if n > 0 => Ok(RequestCount::Fixed(n)),
            _ => Err(format!(
                "'{s}' must be between 1 and 4294967295 requests, or like 3x"
            )),
        }
    }

    /// The measured requests at concurrency `c`.
    pub fn at(self, c: u32) -> u32 {
        match self {
            RequestCount::Fixed(n) => n,
            RequestCount::PerConcurrency { factor, min } => {
                ((factor * f64::from(c)).ceil() as u32).max(min).max(1)
            }
        }
    }

    /// The measured requests at request rate `rate`: a multiple `F` means `F` seconds' worth,
    /// `ceil(F × rate)`, but at least `min`.
    pub fn at_rate(self, rate: f64) -> u32 {
        match self {
            RequestCount::Fixed(n) => n,
            RequestCount::PerConcurrency { factor, min } => {
                ((factor * rate).ceil().min(f64::from(u32::MAX)) as u32)
                    .max(min)
                    .max(1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fmt::fmt_rate;

    #[test]
    fn a_sessions_requests_are_its_turns_then_each_sub_agents() {
        let c = Conversation {
            fan_out: 2,
            sub_agent_turns: 3,
            ..Conversation::new(4, 10)
        };
        assert_eq!(c.requests(), 4 + 2 * 3);
        let places: Vec<TurnPlace> = (0..c.requests()).map(|j| c.place(j)).collect();
        assert_eq!(places[3], TurnPlace::Parent { turn: 3 });
        assert_eq!(places[4], TurnPlace::SubAgent { agent: 0, turn: 0 });
        assert_eq!(places[6], TurnPlace::SubAgent { agent: 0, turn: 2 });
        assert_eq!(places[7], TurnPlace::SubAgent { agent: 1, turn: 0 });
        assert_eq!(places[9], TurnPlace::SubAgent { agent: 1, turn: 2 });
        // Without sub-agents, every request is the conversation's own turn.
        let plain = Conversation::new(3, 10);
        assert_eq!(plain.requests(), 3);
        assert_eq!(plain.place(2), TurnPlace::Parent { turn: 2 });
        let spec = LevelSpec {
            conversation: Some(c),
            ..LevelSpec::new(0, LevelKind::Sessions, 2, (100, 10), 30)
        };
        assert_eq!(
            spec.turn_of(17),
            Some((1, TurnPlace::SubAgent { agent: 1, turn: 0 }))
        );
        assert_eq!(spec.workers(), 2);
    }

    #[test]
    fn request_counts() {
        let d = RequestCount::default();
        assert_eq!((d.at(1), d.at(4), d.at(100)), (10, 12, 300));
        assert_eq!(RequestCount::parse("50", 10).unwrap().at(100), 50);
        let x = RequestCount::parse("1x", 5).unwrap();
        assert_eq!((x.at(1), x.at(8), x.at(100)), (5, 8, 100));
        assert!(RequestCount::parse("0", 1).is_err());
        assert!(RequestCount::parse("-2x", 1).is_err());
    }

    #[test]
    fn rates_are_labelled_plainly() {
        assert_eq!(fmt_rate(4.0), "4");
        assert_eq!(fmt_rate(0.25), "0.25");
        assert_eq!(fmt_rate(12.5), "12.5");
    }
}
