//! Agent sessions (`--sessions`): the unit of load is a user's session, not a request. A session
//! opens with the shared system prompt and tool definitions (`--shared-prefix-len`) and the
//! user's task (`--input-len`); each turn the model answers (`--output-len` tokens) and a tool's
//! result (`--tool-result-len` tokens) is appended, sent as the next turn after the tool's wait
//! (`--tool-wait`). The turn count is the plan's: the tool result is appended whatever the model
//! answered. N users at once each start a new session when one ends, so a level is a closed loop
//! in sessions; it ends after `--sessions-per-level` sessions.
//!
//! A session runs on the multi-turn machinery (a conversation whose follow-ups are the tool
//! results): this module says what is drawn for it, the tool waits.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::RequestCount;

/// How long a tool takes before the next turn is sent, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case")]
pub enum ToolWaitDist {
    /// Always `s`.
    Fixed { s: f64 },
    /// Exponential with mean `mean_s`.
    Exp { mean_s: f64 },
    /// Log-normal: `median_s · e^(σZ)`, Z standard normal.
    Lognormal { median_s: f64, sigma: f64 },
}

/// The tool wait before each turn after the first: a distribution, at most `cap_s`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolWait {
    #[serde(flatten)]
    pub dist: ToolWaitDist,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_s: Option<f64>,
}

/// Seeds the tool waits apart from every other draw of the run.
const SALT: u64 = 0x7001_3a17_5e55_1035;
/// Seeds the think times apart from the tool waits.
const THINK_SALT: u64 = 0x7411_4c0f_fee5_0001;

fn positive(flag: &str, s: &str, what: &str, v: &str) -> Result<f64, String> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| format!("{flag} '{s}': {what} must be a number of seconds, 0 or more"))
}

impl ToolWaitDist {
    /// `2` (seconds, fixed), `exp:MEAN` or `lognormal:MEDIAN,SIGMA` (`--tool-wait`).
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::parse_for("--tool-wait", s)
    }

    /// [`ToolWaitDist::parse`] of `flag`'s value (its errors name the flag).
    pub fn parse_for(flag: &str, s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Some(mean) = t.strip_prefix("exp:") {
            return Ok(Self::Exp {
                mean_s: positive(flag, s, "the mean", mean)?,
            });
        }
        if let Some(rest) = t.strip_prefix("lognormal:") {
            let (median, sigma) = rest.split_once(',').ok_or_else(|| {
                format!("{flag} '{s}': lognormal takes MEDIAN,SIGMA (e.g. lognormal:2,0.8)")
            })?;
            return Ok(Self::Lognormal {
                median_s: positive(flag, s, "the median", median)?,
                sigma: positive(flag, s, "sigma", sigma)?,
            });
        }
        if t.contains(':') {
            return Err(format!(
                "{flag} '{s}': use S (fixed seconds), exp:MEAN or lognormal:MEDIAN,SIGMA"
            ));
        }
        Ok(Self::Fixed {
            s: positive(flag, s, "the wait", t)?,
        })
    }

    /// The distribution's mean, in seconds (before any cap).
    pub fn mean_s(self) -> f64 {
        match self {
            Self::Fixed { s } => s,
            Self::Exp { mean_s } => mean_s,
            Self::Lognormal { median_s, sigma } => median_s * (sigma * sigma / 2.0).exp(),
        }
    }
}

impl ToolWait {
    /// A user's think time before session `session` (drawn apart from its tool waits).
    pub fn draw_think(self, seed: u64, session: u32) -> f64 {
        self.draw(seed ^ THINK_SALT, session, u32::MAX)
    }

    /// The wait before turn `turn` (from 0; turn 0 has none) of session `session` (over the
    /// whole plan, so every shard and resume draws the same): the same for a given seed.
    pub fn draw(self, seed: u64, session: u32, turn: u32) -> f64 {
        if turn == 0 {
            return 0.0;
        }
        let key = (u64::from(session) << 32) | u64::from(turn);
        let mut rng =
            SmallRng::seed_from_u64(seed ^ SALT ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let w = match self.dist {
            ToolWaitDist::Fixed { s } => s,
            ToolWaitDist::Exp { mean_s } => {
                let u: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
                -mean_s * u.ln()
            }
            ToolWaitDist::Lognormal { median_s, sigma } => {
                median_s * (sigma * super::arrivals::normal(&mut rng)).exp()
            }
        };
        self.cap_s.map_or(w, |cap| w.min(cap))
    }

    /// The mean wait with the cap: exact for a fixed and an exponential wait (`E[min(W, c)] =
    /// mean·(1 − e^(−c/mean))`); for a log-normal one the smaller of its mean and the cap, which
    /// is at least the capped mean.
    pub fn capped_mean_s(self) -> f64 {
        let mean = self.dist.mean_s();
        match (self.dist, self.cap_s) {
            (_, None) => mean,
            (ToolWaitDist::Exp { mean_s }, Some(c)) if mean_s > 0.0 => {
                mean_s * (1.0 - (-c / mean_s).exp())
            }
            (_, Some(c)) => mean.min(c),
        }
    }

    /// `2 s`, `exp:2 s` or `lognormal:2 s,0.8`, with ` ≤ 30 s` for a cap.
    pub fn describe(&self) -> String {
        let f = crate::fmt::fmt_rate;
        let d = match self.dist {
            ToolWaitDist::Fixed { s } => format!("{} s", f(s)),
            ToolWaitDist::Exp { mean_s } => format!("exp:{} s", f(mean_s)),
            ToolWaitDist::Lognormal { median_s, sigma } => {
                format!("lognormal:{} s,{}", f(median_s), f(sigma))
            }
        };
        match self.cap_s {
            Some(cap) => format!("{d} ≤ {} s", f(cap)),
            None => d,
        }
    }
}

/// The session levels of a run (`--sessions`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sessions {
    /// Concurrent users, one level each.
    pub levels: Vec<u32>,
    /// Sessions each level runs (`--sessions-per-level N|Fx`, x: times its users).
    pub per_level: RequestCount,
    /// Turns per session.
    pub turns: u32,
    pub tool_wait: ToolWait,
    /// Tokens of each tool result appended after an answer.
    pub tool_result_len: u64,
    /// Sub-agents each session starts after its first turn (`--fan-out`; 0: none), and the
    /// turns each of them runs (`--sub-agent-turns`).
    #[serde(default, skip_serializing_if = "super::is_zero_u32")]
    pub fan_out: u32,
    #[serde(default = "default_sub_agent_turns")]
    pub sub_agent_turns: u32,
    /// A user's think time before each of its sessions after its first (`--think-time`;
    /// none: the next session starts at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<ToolWait>,
    /// Open-loop levels: sessions started at these rates (sessions/s, `--session-rate`), one
    /// level each, after the levels of users.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
}

/// Seconds of starts a rate level's `Fx` counts: `2x` at 0.5 sessions/s is 2 × 0.5 × 10 = 10
/// sessions.
pub const RATE_SESSIONS_SECONDS: f64 = 10.0;

fn default_sub_agent_turns() -> u32 {
    DEFAULT_SUB_AGENT_TURNS
}

impl Sessions {
    /// One session's shape: its turns, tool results and sub-agents.
    pub fn conversation(&self) -> super::Conversation {
        super::Conversation {
            turns: self.turns,
            followup_tokens: self.tool_result_len,
            fan_out: self.fan_out,
            sub_agent_turns: if self.fan_out > 0 {
                self.sub_agent_turns
            } else {
                0
            },
        }
    }
}

/// Defaults that look like a coding agent's session (docs/workloads.md says where they come
/// from): 8 turns, tool results of 1,000 tokens, tool waits log-normal around 2 s, at most 30 s.
pub const DEFAULT_TURNS: u32 = 8;
pub const DEFAULT_TOOL_RESULT_LEN: u64 = 1000;
pub const DEFAULT_TOOL_WAIT: &str = "lognormal:2,0.8";
pub const DEFAULT_TOOL_WAIT_CAP_S: f64 = 30.0;
/// A sub-agent's turns: a short search-and-read task.
pub const DEFAULT_SUB_AGENT_TURNS: u32 = 3;

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    fn wait(dist: ToolWaitDist, cap_s: Option<f64>) -> ToolWait {
        ToolWait { dist, cap_s }
    }

    #[test]
    fn parses_each_form_and_refuses_the_rest() {
        assert_eq!(
            ToolWaitDist::parse("2.5"),
            Ok(ToolWaitDist::Fixed { s: 2.5 })
        );
        assert_eq!(
            ToolWaitDist::parse("exp:3"),
            Ok(ToolWaitDist::Exp { mean_s: 3.0 })
        );
        assert_eq!(
            ToolWaitDist::parse("lognormal:2,0.8"),
            Ok(ToolWaitDist::Lognormal {
                median_s: 2.0,
                sigma: 0.8
            })
        );
        for bad in ["-1", "exp:", "exp:x", "lognormal:2", "gamma:2", "soon"] {
            let e = ToolWaitDist::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--tool-wait '{bad}'")), "{e}");
        }
    }

    #[test]
    fn draws_are_the_seeds_and_turn_zero_waits_nothing() {
        let w = wait(ToolWaitDist::Exp { mean_s: 2.0 }, None);
        assert_eq!(w.draw(7, 3, 0), 0.0);
        assert_eq!(w.draw(7, 3, 1), w.draw(7, 3, 1));
        assert_ne!(w.draw(7, 3, 1), w.draw(7, 3, 2));
        assert_ne!(w.draw(7, 3, 1), w.draw(7, 4, 1));
        assert_ne!(w.draw(7, 3, 1), w.draw(8, 3, 1));
        assert_eq!(
            wait(ToolWaitDist::Fixed { s: 1.5 }, None).draw(1, 0, 5),
            1.5
        );
    }

    #[test]
    fn the_cap_bounds_every_draw() {
        let w = wait(ToolWaitDist::Exp { mean_s: 5.0 }, Some(2.0));
        let draws: Vec<f64> = (0..2000).map(|s| w.draw(1, s, 1)).collect();
        assert!(draws.iter().all(|d| *d <= 2.0));
        // P(exp(5) > 2) = e^(−0.4) ≈ 0.67: most draws are cut to the cap.
        let at_cap = draws.iter().filter(|d| **d == 2.0).count();
        assert!((1200..1480).contains(&at_cap), "{at_cap}");
    }

    #[test]
    fn exp_and_lognormal_draws_follow_their_distributions() {
        // 20,000 sessions' first waits. Exponential: mean 2, and P(W ≤ 2·ln 2) = ½. The mean's
        // standard error is 2/√20000 ≈ 0.014; 0.06 is four of them.
        let n = 20_000;
        let exp = wait(ToolWaitDist::Exp { mean_s: 2.0 }, None);
        let d: Vec<f64> = (0..n).map(|s| exp.draw(11, s, 1)).collect();
        let mean = d.iter().sum::<f64>() / f64::from(n);
        assert!((mean - 2.0).abs() < 0.06, "{mean}");
        let below = d.iter().filter(|x| **x <= 2.0 * 2f64.ln()).count() as f64 / f64::from(n);
        assert!((below - 0.5).abs() < 0.015, "{below}");
        // Log-normal: the median is median_s; ln W has standard deviation σ.
        let ln = wait(
            ToolWaitDist::Lognormal {
                median_s: 2.0,
                sigma: 0.8,
            },
            None,
        );
        let mut d: Vec<f64> = (0..n).map(|s| ln.draw(11, s, 1)).collect();
        d.sort_by(f64::total_cmp);
        let median = d[d.len() / 2];
        assert!((median / 2.0 - 1.0).abs() < 0.03, "{median}");
        let logs: Vec<f64> = d.iter().map(|x| x.ln()).collect();
        let m = logs.iter().sum::<f64>() / f64::from(n);
        let sd = (logs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / f64::from(n)).sqrt();
        assert!((sd - 0.8).abs() < 0.02, "{sd}");
    }

    #[test]
    fn descriptions_name_the_distribution_and_the_cap() {
        assert_eq!(
            wait(ToolWaitDist::Exp { mean_s: 2.0 }, Some(30.0)).describe(),
            "exp:2 s ≤ 30 s"
        );
        assert_eq!(
            wait(ToolWaitDist::Fixed { s: 0.5 }, None).describe(),
            "0.5 s"
        );
    }
}
