//! What to send: the concurrency sweep, the request-rate sweep, the long-context ladder, and
//! prompts of exact length.

pub mod arrivals;
pub mod clock;
pub mod dataset;
pub mod images;
pub mod mix;
pub mod plan;
pub mod prompt;
pub mod requests;
pub mod search;
pub mod shard;
pub mod trace;

use serde::{Deserialize, Serialize};

use crate::fmt::{fmt_rate, fmt_tokens};
use crate::grammar::parse_count;
pub use arrivals::{Arrival, Schedule};

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
    /// The trace a trace level replays (`input_tokens`, `output_tokens`: its means).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<trace::TraceLevel>,
    /// Which run of its level this is (`--repeat N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
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

/// ` #2` for the second run of a repeated level, nothing otherwise.
pub fn repeat_suffix(r: Option<Repeat>) -> String {
    r.map_or(String::new(), |r| format!(" #{}", r.n))
}

/// ` · json` for a structured-output level (`--response-format`), nothing otherwise.
pub fn format_suffix(f: Option<&str>) -> String {
    f.map_or(String::new(), |f| format!(" · {f}"))
}

/// ` (think 256)` for a level run with a thinking budget, nothing otherwise.
pub fn budget_suffix(b: Option<u32>) -> String {
    b.map_or(String::new(), |b| format!(" (think {b})"))
}

/// The plan once per thinking budget (`--thinking-budget`), in the order given: every level
/// with the first budget, then every level with the next, each a level of its own.
pub fn budget_plan(levels: Vec<LevelSpec>, budgets: &[u32]) -> Vec<LevelSpec> {
    if budgets.is_empty() {
        return levels;
    }
    let per_pass = levels.len() as u32;
    budgets
        .iter()
        .enumerate()
        .flat_map(|(pass, &b)| {
            levels.iter().map(move |l| LevelSpec {
                index: pass as u32 * per_pass + l.index,
                thinking_budget: Some(b),
                ..l.clone()
            })
        })
        .collect()
}

/// The plan run `n` times over (`--repeat`): every level once, then again, each run a level
/// of its own (its own index, prompts and arrival draws), knowing which level it repeats.
pub fn repeat_plan(levels: Vec<LevelSpec>, n: u32) -> Vec<LevelSpec> {
    if n <= 1 {
        return levels;
    }
    let per_pass = levels.len() as u32;
    (0..n)
        .flat_map(|pass| {
            levels.iter().map(move |l| LevelSpec {
                index: pass * per_pass + l.index,
                repeat: Some(Repeat {
                    n: pass + 1,
                    of: n,
                    first: l.index,
                }),
                ..l.clone()
            })
        })
        .collect()
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
}

impl LevelSpec {
    /// Closed-loop workers that send the level's requests (0 at a rate level: a pool of slots).
    pub fn workers(&self) -> u32 {
        if self.is_open_loop() {
            return 0;
        }
        match self.conversation {
            Some(c) => self.concurrency.min(self.requests.div_ceil(c.turns.max(1))),
            None => self.concurrency.min(self.requests),
        }
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

    /// The conversation and turn (both from 0) of request `i` of a multi-turn level.
    pub fn turn_of(&self, i: u32) -> Option<(u32, u32)> {
        let k = self.conversation?.turns.max(1);
        Some((i / k, i % k))
    }
}

impl LevelSpec {
    /// Short label: `C=8`, `4 req/s` or `30K ctx`.
    pub fn label(&self) -> String {
        self.base_label() + &repeat_suffix(self.repeat)
    }

    /// The label without the repeat's number (with the thinking budget's).
    pub fn base_label(&self) -> String {
        self.plain_label()
            + &format_suffix(
                self.mix
                    .response_format
                    .as_ref()
                    .map(crate::client::structured::ResponseFormat::label),
            )
            + &budget_suffix(self.thinking_budget)
    }

    fn plain_label(&self) -> String {
        match self.kind {
            LevelKind::Sweep => format!("C={}", self.concurrency),
            LevelKind::LongContext => format!("{} ctx", fmt_tokens(self.input_tokens)),
            LevelKind::Rate => format!(
                "{} req/s",
                fmt_rate(self.arrival.map_or(0.0, |a| a.request_rate))
            ),
            LevelKind::MultiTurn => format!(
                "{}-turn chats, C={}",
                self.conversation.map_or(0, |c| c.turns),
                self.concurrency
            ),
            LevelKind::Trace => trace_label(self.trace.as_ref()),
        }
    }
}

/// `trace`, or `trace ×4` when sped up.
pub fn trace_label(t: Option<&trace::TraceLevel>) -> String {
    match t.map(|t| t.speedup) {
        Some(x) if (x - 1.0).abs() > 1e-9 => format!("trace ×{}", fmt_rate(x)),
        _ => "trace".into(),
    }
}

/// The open-loop part of a run: request rates and how requests arrive.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpenLoop {
    /// Request rates (requests/s) of the rate levels, run after the concurrency sweep.
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

/// Builds the level list: the concurrency sweep first, then the request-rate sweep, then the
/// long-context ladder.
#[allow(clippy::too_many_arguments)]
pub fn build_plan(
    concurrency: &[u64],
    input_len: u64,
    output_len: u32,
    requests: RequestCount,
    open_loop: &OpenLoop,
    long_context: &[u64],
    long_context_output: u32,
    long_context_repeats: u32,
) -> Vec<LevelSpec> {
    let mut levels = Vec::new();
    for &c in concurrency {
        let c = c.min(u64::from(u32::MAX)) as u32;
        levels.push(LevelSpec {
            index: levels.len() as u32,
            kind: LevelKind::Sweep,
            concurrency: c,
            input_tokens: input_len,
            output_tokens: output_len,
            requests: requests.at(c),
            arrival: None,
            shared_prefix_tokens: 0,
            conversation: None,
            trace: None,
            repeat: None,
            thinking_budget: None,
            shard: None,
            seconds: None,
            mix: crate::workload::mix::RequestMix::default(),
        });
    }
    for &rate in &open_loop.request_rates {
        levels.push(LevelSpec {
            index: levels.len() as u32,
            kind: LevelKind::Rate,
            concurrency: open_loop.max_concurrency.unwrap_or(0),
            input_tokens: input_len,
            output_tokens: output_len,
            requests: requests.at_rate(rate),
            arrival: Some(Arrival {
                request_rate: rate,
                burstiness: open_loop.burstiness,
                ramp_up_s: open_loop.ramp_up_s,
                max_concurrency: open_loop.max_concurrency,
            }),
            shared_prefix_tokens: 0,
            conversation: None,
            trace: None,
            repeat: None,
            thinking_budget: None,
            shard: None,
            seconds: None,
            mix: crate::workload::mix::RequestMix::default(),
        });
    }
    for &n in long_context {
        levels.push(LevelSpec {
            index: levels.len() as u32,
            kind: LevelKind::LongContext,
            concurrency: 1,
            input_tokens: n,
            output_tokens: long_context_output,
            requests: long_context_repeats.max(1),
            arrival: None,
            shared_prefix_tokens: 0,
            conversation: None,
            trace: None,
            repeat: None,
            thinking_budget: None,
            shard: None,
            seconds: None,
            mix: crate::workload::mix::RequestMix::default(),
        });
    }
    levels
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn plan_orders_sweep_then_ladder() {
        let p = build_plan(
            &[1, 8],
            1000,
            500,
            RequestCount::default(),
            &OpenLoop::default(),
            &[30_000, 60_000],
            256,
            2,
        );
        assert_eq!(p.len(), 4);
        assert_eq!(p[1].label(), "C=8");
        assert_eq!(p[1].requests, 24);
        assert_eq!(p[2].kind, LevelKind::LongContext);
        assert_eq!(p[3].label(), "60K ctx");
        assert_eq!(p[3].index, 3);
        assert_eq!(
            (p[3].concurrency, p[3].requests, p[3].output_tokens),
            (1, 2, 256)
        );
    }

    #[test]
    fn rate_levels_follow_the_sweep_with_seconds_worth_of_requests() {
        let ol = OpenLoop {
            request_rates: vec![0.5, 4.0, 20.0],
            burstiness: 0.5,
            ramp_up_s: 2.0,
            max_concurrency: Some(8),
        };
        let p = build_plan(&[1], 100, 10, RequestCount::default(), &ol, &[1000], 5, 1);
        assert_eq!(p.len(), 5);
        assert_eq!(p[1].kind, LevelKind::Rate);
        assert_eq!(p[1].label(), "0.5 req/s");
        assert_eq!(p[2].label(), "4 req/s");
        // 3x: three seconds' worth, at least 10.
        assert_eq!((p[1].requests, p[2].requests, p[3].requests), (10, 12, 60));
        let a = p[3].arrival.unwrap();
        assert_eq!(
            (a.burstiness, a.ramp_up_s, a.max_concurrency),
            (0.5, 2.0, Some(8))
        );
        assert_eq!(p[3].concurrency, 8);
        assert_eq!(p[4].kind, LevelKind::LongContext);
        assert_eq!(RequestCount::Fixed(7).at_rate(100.0), 7);
    }

    #[test]
    fn rates_are_labelled_plainly() {
        assert_eq!(fmt_rate(4.0), "4");
        assert_eq!(fmt_rate(0.25), "0.25");
        assert_eq!(fmt_rate(12.5), "12.5");
    }
}
