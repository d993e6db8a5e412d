//! What to send: the concurrency sweep, the request-rate sweep, the long-context ladder, and
//! prompts of exact length.

pub mod arrivals;
pub mod clock;
pub mod dataset;
pub mod images;
pub mod levels;
pub mod mix;
pub mod plan;
pub mod prompt;
pub mod requests;
pub mod search;
pub mod shard;
pub mod trace;

use serde::{Deserialize, Serialize};

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

/// Parses request rates: `1,2,4,8`, decimals like `0.5,1.5`, or the integer ranges of
/// [`parse_list`] (`1-8`, `2-16*2`); `none` means no rate levels. Strictly increasing, positive.
pub fn parse_rates(s: &str) -> Result<Vec<f64>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for item in t.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("'{s}' has an empty item"));
        }
        if item.contains(['-', '*', '/']) {
            out.extend(parse_list(item)?.into_iter().map(|v| v as f64));
            continue;
        }
        let v: f64 = item
            .parse()
            .map_err(|_| format!("'{item}' is not a request rate (examples: 0.5, 4, 1-16*2)"))?;
        if !(v.is_finite() && v > 0.0 && v <= 1e6) {
            return Err(format!(
                "'{item}': a request rate must be above 0 and at most 10^6 requests/s"
            ));
        }
        out.push(v);
    }
    if out.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("'{s}' must be strictly increasing (no repeats)"));
    }
    if out.len() > 10_000 {
        return Err(format!("'{s}' expands to more than 10,000 levels"));
    }
    Ok(out)
}

/// Parses a number with an optional `k` (×1000) or `m` (×1,000,000) suffix.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix('k') {
        (n, 1_000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1_000_000.0)
    } else {
        (t.as_str(), 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number (examples: 8, 30k, 1.5k)"))?;
    let v = v * mult;
    if !v.is_finite() || v < 0.0 || v.fract() != 0.0 || v > 1e12 {
        return Err(format!("'{s}' is not a whole number of at most 10^12"));
    }
    Ok(v as u64)
}

/// Parses a list like `1,2,4,8`, `30k,60k,100k`, a range `1-8` (step 1), `10-100/10` (step 10)
/// or `1-128*2` (doubling). `none` (or an empty string) means no levels. The result must be
/// strictly increasing and every value positive.
pub fn parse_list(s: &str) -> Result<Vec<u64>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for item in t.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("'{s}' has an empty item"));
        }
        if let Some((a, b)) = item.split_once('-') {
            let (b, step, geometric) = if let Some((b, f)) = b.split_once('*') {
                (b, parse_count(f)?, true)
            } else if let Some((b, st)) = b.split_once('/') {
                (b, parse_count(st)?, false)
            } else {
                (b, 1, false)
            };
            let (a, b) = (parse_count(a)?, parse_count(b)?);
            if a == 0 || b < a {
                return Err(format!("range '{item}' must go up from a positive start"));
            }
            if (geometric && step < 2) || step == 0 {
                return Err(format!("range '{item}' has a step that never advances"));
            }
            let mut v = a;
            while v <= b {
                out.push(v);
                v = if geometric { v * step } else { v + step };
            }
            if out.last() != Some(&b) && geometric {
                out.push(b);
            }
        } else {
            out.push(parse_count(item)?);
        }
    }
    if out.contains(&0) {
        return Err(format!("'{s}': every value must be at least 1"));
    }
    if out.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("'{s}' must be strictly increasing (no repeats)"));
    }
    if out.len() > 10_000 {
        return Err(format!("'{s}' expands to more than 10,000 levels"));
    }
    Ok(out)
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
    fn lists_ranges_and_suffixes() {
        assert_eq!(parse_list("1,2,4,8").unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(
            parse_list("30k,60k,100K").unwrap(),
            vec![30_000, 60_000, 100_000]
        );
        assert_eq!(parse_list("1.5k").unwrap(), vec![1500]);
        assert_eq!(parse_list("1-4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_list("10-40/10").unwrap(), vec![10, 20, 30, 40]);
        assert_eq!(
            parse_list("1-100*2").unwrap(),
            vec![1, 2, 4, 8, 16, 32, 64, 100]
        );
        assert_eq!(parse_list("1-64*2").unwrap(), vec![1, 2, 4, 8, 16, 32, 64]);
        assert!(parse_list("none").unwrap().is_empty());
    }

    #[test]
    fn bad_lists_are_refused_with_a_reason() {
        for (bad, why) in [
            ("4,2", "strictly increasing"),
            ("0,1", "at least 1"),
            ("1,,2", "empty item"),
            ("a", "not a number"),
            ("8-1", "go up"),
            ("1-8*1", "never advances"),
            ("1,1", "strictly increasing"),
            ("1.5", "whole number"),
        ] {
            let e = parse_list(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
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
    fn rate_lists() {
        assert_eq!(parse_rates("1,2,4").unwrap(), vec![1.0, 2.0, 4.0]);
        assert_eq!(parse_rates("0.5, 1.5,8").unwrap(), vec![0.5, 1.5, 8.0]);
        assert_eq!(parse_rates("1-8*2").unwrap(), vec![1.0, 2.0, 4.0, 8.0]);
        assert_eq!(parse_rates("0.5,1-3").unwrap(), vec![0.5, 1.0, 2.0, 3.0]);
        assert!(parse_rates("none").unwrap().is_empty());
        for (bad, why) in [
            ("2,1", "strictly increasing"),
            ("0", "above 0"),
            ("x", "not a request rate"),
            ("1,,2", "empty item"),
            ("inf", "above 0"),
        ] {
            let e = parse_rates(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(fmt_rate(4.0), "4");
        assert_eq!(fmt_rate(0.25), "0.25");
        assert_eq!(fmt_rate(12.5), "12.5");
    }
}
