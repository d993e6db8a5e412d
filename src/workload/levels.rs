//! The level list, built in one place. A level's identity is its place on each dimension of the
//! plan: its load (a concurrency, a request rate, a context length, chats, a trace), its pass
//! (plain or constrained by a response format, a thinking budget) and its run (`--repeat`);
//! what it mixes into its requests (spread lengths, adapters, images) and this machine's share
//! (`--shard`) travel with it. [`build`] makes the list in one sequence of steps, every level
//! through one constructor ([`LevelSpec::new`]), and every label comes from one function of
//! the dimensions ([`Place`]).
//!
//! Adding a dimension (docs/architecture.md, "Adding a workload dimension"): a field on
//! [`Dimensions`] and on [`LevelSpec`], one step in [`build`], its own module for what it
//! sends, and, if it names a level, a field of [`Place`].

use serde::{Deserialize, Serialize};

use super::content::ContentKind;
use super::mix::{LoraMix, RequestMix};
use super::sessions::Sessions;
use super::shapes::Shape;
use super::shard::Shard;
use super::trace::{TraceConfig, TraceLevel};
use super::{Conversation, LevelKind, LevelSpec, OpenLoop, Repeat, RequestCount};
use crate::client::structured::ResponseFormat;
use crate::fmt::{fmt_rate, fmt_tokens};

/// The request ceiling of a time-bounded level: it ends at its time, long before this.
pub const TIME_BOUND_CEILING: u32 = 1_000_000;

/// Multi-turn conversations (`--multi-turn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiTurn {
    /// Turns per conversation.
    pub turns: u32,
    /// Conversations in all.
    pub conversations: u32,
    /// Conversations in progress at once.
    pub concurrency: u32,
    /// Tokens of each follow-up user message.
    pub followup_len: u64,
}

/// What a plan is made of: each dimension as the run's configuration gives it.
#[derive(Clone, Copy, Debug)]
pub struct Dimensions<'a> {
    /// The closed-loop sweep's concurrencies.
    pub concurrency: &'a [u64],
    /// The rate sweep and how its requests arrive.
    pub open_loop: &'a OpenLoop,
    pub input_len: u64,
    pub output_len: u32,
    pub requests: RequestCount,
    /// The long-context ladder's input lengths, output length and requests per length.
    pub long_context: &'a [u64],
    pub long_context_output: u32,
    pub long_context_repeats: u32,
    /// Leading tokens every prompt of a sweep, rate or multi-turn level shares.
    pub shared_prefix_len: u64,
    /// What the sweep's and rate levels' requests mix in (spread lengths, images).
    pub mix: &'a RequestMix,
    /// The adapters every level's requests name.
    pub lora: Option<&'a LoraMix>,
    pub multi_turn: Option<MultiTurn>,
    /// Agent sessions, a level per number of concurrent users.
    pub sessions: Option<&'a Sessions>,
    pub trace: Option<&'a TraceConfig>,
    /// Each sweep, rate and long-context level again, constrained (its twin).
    pub response_format: Option<&'a ResponseFormat>,
    /// Each sweep, rate and long-context level once per kind of prompt (`--content`).
    pub content: &'a [ContentKind],
    /// Each sweep and rate level once per dataset category (`--categories`).
    pub categories: &'a [String],
    /// The sweep and rate levels once per input/output pair (`--shapes`).
    pub shapes: &'a [Shape],
    /// The plan once per budget.
    pub thinking_budgets: &'a [u32],
    /// The plan this many times over.
    pub repeat: u32,
    /// Seconds each level sends for (`--level-seconds`).
    pub level_seconds: Option<f64>,
    pub shard: Option<Shard>,
}

/// The planned levels, in the order they run: the concurrency sweep, the rate sweep, the
/// long-context ladder, the multi-turn level and the trace; each once per kind of prompt, each
/// with its twin; the whole plan
/// once per thinking budget, then again per repeat.
pub fn build(d: &Dimensions<'_>) -> Vec<LevelSpec> {
    let mut levels = loads(d);
    if let Some(mt) = d.multi_turn {
        levels.push(chats(levels.len() as u32, mt, d));
    }
    if let Some(s) = d.sessions {
        for &users in &s.levels {
            levels.push(session_level(levels.len() as u32, users, s, d));
        }
        for &rate in &s.rates {
            levels.push(session_rate_level(levels.len() as u32, rate, s, d));
        }
    }
    if let Some(t) = d
        .trace
        .and_then(|t| t.level(levels.len() as u32, d.open_loop.max_concurrency))
    {
        levels.push(t);
    }
    // Every level's requests name the adapters, the ladder's and the chats' too.
    for l in &mut levels {
        l.mix.lora = d.lora.cloned();
    }
    let levels = shapes(levels, d.shapes);
    let levels = contents(levels, d.content);
    let levels = categories(levels, d.categories);
    let levels = twins(levels, d.response_format);
    let levels = budgets(levels, d.thinking_budgets);
    let mut levels = repeats(levels, d.repeat);
    for l in &mut levels {
        if let Some(s) = d.level_seconds {
            bound_in_time(l, s);
        }
        if let Some(s) = d.shard {
            s.share(l);
        }
    }
    levels
}

impl LevelSpec {
    /// A level of `kind`, its place on every other dimension plain: no prefix, no mix, no
    /// pass, no repeat, no shard, no time bound.
    pub fn new(
        index: u32,
        kind: LevelKind,
        concurrency: u32,
        (input_tokens, output_tokens): (u64, u32),
        requests: u32,
    ) -> Self {
        Self {
            index,
            kind,
            concurrency,
            input_tokens,
            output_tokens,
            requests,
            arrival: None,
            shared_prefix_tokens: 0,
            conversation: None,
            tool_wait: None,
            think_time: None,
            trace: None,
            repeat: None,
            shape: None,
            content: None,
            category: None,
            thinking_budget: None,
            shard: None,
            seconds: None,
            mix: RequestMix::default(),
        }
    }
}

/// The load levels: the concurrency sweep, the request-rate sweep, then the long-context
/// ladder. The sweep's and rate levels carry the shared prefix and the request mix.
fn loads(d: &Dimensions<'_>) -> Vec<LevelSpec> {
    // A level of a shape mix plans its shapes' weighted means (each request draws its own).
    let lengths = d.mix.mean_lengths().unwrap_or((d.input_len, d.output_len));
    let mut levels = Vec::new();
    for &c in d.concurrency {
        let c = c.min(u64::from(u32::MAX)) as u32;
        let i = levels.len() as u32;
        levels.push(LevelSpec::new(
            i,
            LevelKind::Sweep,
            c,
            lengths,
            d.requests.at(c),
        ));
    }
    for &rate in &d.open_loop.request_rates {
        let i = levels.len() as u32;
        let max = d.open_loop.max_concurrency;
        levels.push(LevelSpec {
            arrival: Some(super::Arrival {
                request_rate: rate,
                burstiness: d.open_loop.burstiness,
                ramp_up_s: d.open_loop.ramp_up_s,
                max_concurrency: max,
            }),
            ..LevelSpec::new(
                i,
                LevelKind::Rate,
                max.unwrap_or(0),
                lengths,
                d.requests.at_rate(rate),
            )
        });
    }
    for l in &mut levels {
        l.shared_prefix_tokens = d.shared_prefix_len;
        l.mix = d.mix.clone();
    }
    for &n in d.long_context {
        let i = levels.len() as u32;
        levels.push(LevelSpec::new(
            i,
            LevelKind::LongContext,
            1,
            (n, d.long_context_output),
            d.long_context_repeats.max(1),
        ));
    }
    levels
}

/// The multi-turn level: `mt.conversations` chats of `mt.turns` turns, `mt.concurrency` at once.
fn chats(index: u32, mt: MultiTurn, d: &Dimensions<'_>) -> LevelSpec {
    LevelSpec {
        shared_prefix_tokens: d.shared_prefix_len,
        conversation: Some(Conversation::new(mt.turns, mt.followup_len)),
        ..LevelSpec::new(
            index,
            LevelKind::MultiTurn,
            mt.concurrency,
            (d.input_len, d.output_len),
            mt.conversations.saturating_mul(mt.turns),
        )
    }
}

/// A session level: `users` at once, each running sessions of `s.turns` turns whose follow-ups
/// are the tool results, until the level has had its sessions.
fn session_level(index: u32, users: u32, s: &Sessions, d: &Dimensions<'_>) -> LevelSpec {
    session_level_of(
        index,
        users,
        s,
        (d.input_len, d.output_len),
        d.shared_prefix_len,
        s.per_level.at(users),
    )
}

/// An open-loop session level: sessions started at `rate` a second (the run's burstiness and
/// `--max-concurrency`, here a cap on sessions running at once), `--sessions-per-level` of
/// them (`Fx`: F × rate × [`super::sessions::RATE_SESSIONS_SECONDS`]).
fn session_rate_level(index: u32, rate: f64, s: &Sessions, d: &Dimensions<'_>) -> LevelSpec {
    let sessions = match s.per_level {
        RequestCount::Fixed(n) => n,
        RequestCount::PerConcurrency { factor, min } => {
            ((factor * rate * super::sessions::RATE_SESSIONS_SECONDS).ceil() as u32)
                .max(min)
                .max(1)
        }
    };
    LevelSpec {
        arrival: Some(super::Arrival {
            request_rate: rate,
            burstiness: d.open_loop.burstiness,
            ramp_up_s: 0.0,
            max_concurrency: d.open_loop.max_concurrency,
        }),
        think_time: None,
        ..session_level_of(
            index,
            d.open_loop.max_concurrency.unwrap_or(0),
            s,
            (d.input_len, d.output_len),
            d.shared_prefix_len,
            sessions,
        )
    }
}

/// A session level of `sessions` sessions, `users` at once (`s` says their turns, tool results
/// and waits), each opening with `shared_prefix` tokens every session shares.
pub fn session_level_of(
    index: u32,
    users: u32,
    s: &Sessions,
    lengths: (u64, u32),
    shared_prefix: u64,
    sessions: u32,
) -> LevelSpec {
    LevelSpec {
        shared_prefix_tokens: shared_prefix,
        conversation: Some(s.conversation()),
        tool_wait: Some(s.tool_wait),
        think_time: s.think_time,
        ..LevelSpec::new(
            index,
            LevelKind::Sessions,
            users,
            lengths,
            sessions.saturating_mul(s.conversation().requests()),
        )
    }
}

/// With a response format, each sweep, rate and long-context level twice in a row: as planned,
/// then constrained (its twin); the others once. Indices follow the new order.
pub fn twins(levels: Vec<LevelSpec>, format: Option<&ResponseFormat>) -> Vec<LevelSpec> {
    let Some(format) = format else {
        return levels;
    };
    in_a_row(levels, PLAIN_AND_LADDER, |l| {
        let mut c = l.clone();
        c.mix.response_format = Some(format.clone());
        vec![l.clone(), c]
    })
}

/// With content kinds (`--content`), each sweep, rate and long-context level once per kind in
/// a row (before the twins, so each kind's twin follows it), in the order given: `C=1 · code`,
/// `C=1 · chat`, `C=8 · code`, …; the others once, their prompts their own. Indices follow the
/// new order.
pub fn contents(levels: Vec<LevelSpec>, kinds: &[ContentKind]) -> Vec<LevelSpec> {
    if kinds.is_empty() {
        return levels;
    }
    in_a_row(levels, PLAIN_AND_LADDER, |l| {
        kinds
            .iter()
            .map(|&k| LevelSpec {
                content: Some(k),
                ..l.clone()
            })
            .collect()
    })
}

/// With shapes (`--shapes`), the sweep and rate levels once per input/output pair, a shape's
/// whole sweep (then its rates) before the next's, each with the shape's lengths; the ladder and
/// the others once, after them. Indices follow the new order.
pub fn shapes(levels: Vec<LevelSpec>, shapes: &[Shape]) -> Vec<LevelSpec> {
    if shapes.is_empty() {
        return levels;
    }
    let (loads, rest): (Vec<LevelSpec>, Vec<LevelSpec>) = levels
        .into_iter()
        .partition(|l| matches!(l.kind, LevelKind::Sweep | LevelKind::Rate));
    let mut out: Vec<LevelSpec> = shapes
        .iter()
        .flat_map(|&s| {
            loads.iter().map(move |l| LevelSpec {
                input_tokens: s.input_len,
                output_tokens: s.output_len,
                shape: Some(s),
                ..l.clone()
            })
        })
        .collect();
    out.extend(rest);
    for (i, l) in out.iter_mut().enumerate() {
        l.index = i as u32;
    }
    out
}

/// With dataset categories (`--categories`), each sweep and rate level once per category in a
/// row, in the order given, its requests drawn from that category's entries; the others once
/// (the ladder's prompts are not the dataset's, chats draw from every entry). Indices follow
/// the new order.
pub fn categories(levels: Vec<LevelSpec>, names: &[String]) -> Vec<LevelSpec> {
    if names.is_empty() {
        return levels;
    }
    in_a_row(levels, &[LevelKind::Sweep, LevelKind::Rate], |l| {
        names
            .iter()
            .map(|c| LevelSpec {
                category: Some(c.clone()),
                ..l.clone()
            })
            .collect()
    })
}

/// The kinds of level a pass run in a row repeats: the sweep, the rate levels and the ladder.
const PLAIN_AND_LADDER: &[LevelKind] = &[LevelKind::Sweep, LevelKind::Rate, LevelKind::LongContext];

/// Each level of one of `kinds` replaced where it stands by `variants` of it, in a row; the
/// others kept once. Indices follow the new order. The twins, content kinds and categories
/// are each a pass run so, level by level.
fn in_a_row(
    levels: Vec<LevelSpec>,
    kinds: &[LevelKind],
    variants: impl Fn(&LevelSpec) -> Vec<LevelSpec>,
) -> Vec<LevelSpec> {
    let mut out = Vec::with_capacity(levels.len() * 2);
    for l in levels {
        if kinds.contains(&l.kind) {
            out.extend(variants(&l));
        } else {
            out.push(l);
        }
    }
    for (i, l) in out.iter_mut().enumerate() {
        l.index = i as u32;
    }
    out
}

/// The plan once per thinking budget (`--thinking-budget`), in the order given: every level
/// with the first budget, then every level with the next, each a level of its own.
pub fn budgets(levels: Vec<LevelSpec>, budgets: &[u32]) -> Vec<LevelSpec> {
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
pub fn repeats(levels: Vec<LevelSpec>, n: u32) -> Vec<LevelSpec> {
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

/// With `--level-seconds`, a level sends for that long: the sweep, rate and multi-turn levels
/// until then (their request count is only a ceiling), a long-context length or a trace its
/// own requests, none after it.
fn bound_in_time(l: &mut LevelSpec, seconds: f64) {
    l.seconds = Some(seconds);
    if matches!(
        l.kind,
        LevelKind::Sweep | LevelKind::Rate | LevelKind::MultiTurn | LevelKind::Sessions
    ) {
        let turns = l.conversation.map_or(1, |c| c.turns.max(1));
        l.requests = TIME_BOUND_CEILING / turns * turns;
    }
}

/// A level's place on the dimensions its label names: the one source of every level label, for
/// the plan (a [`LevelSpec`]) and for its results alike.
#[derive(Clone, Copy, Debug)]
pub struct Place<'a> {
    pub kind: LevelKind,
    pub concurrency: u32,
    pub input_tokens: u64,
    /// A rate level's request rate.
    pub request_rate: Option<f64>,
    /// A multi-turn level's turns per conversation.
    pub turns: Option<u32>,
    pub trace: Option<&'a TraceLevel>,
    /// The response format of a constrained twin (`json`).
    pub response_format: Option<&'a str>,
    /// The kind of its prompts (`--content`).
    pub content: Option<ContentKind>,
    /// The dataset category its prompts are drawn from (`--categories`).
    pub category: Option<&'a str>,
    /// Its input/output pair (`--shapes`).
    pub shape: Option<Shape>,
    pub thinking_budget: Option<u32>,
    pub repeat: Option<Repeat>,
}

impl Place<'_> {
    /// `C=8`, `4 req/s`, `30K ctx` or `4-turn chats, C=4`; `C=8 · json (think 64) #2` for the
    /// second run of a constrained level with a thinking budget.
    pub fn label(&self) -> String {
        self.base_label() + &repeat_suffix(self.repeat)
    }

    /// The label without the repeat's number (with the pass's: format and thinking budget).
    pub fn base_label(&self) -> String {
        self.load_label() + &self.pass_label()
    }

    /// The pass's part of a label: ` · code · json (think 64)`, or nothing for the plain pass.
    pub fn pass_label(&self) -> String {
        shape_suffix(self.shape)
            + &content_suffix(self.content.map(ContentKind::name).or(self.category))
            + &format_suffix(self.response_format)
            + &budget_suffix(self.thinking_budget)
    }

    /// The load's part of a label: `C=8`, `4 req/s`, `30K ctx`, `4-turn chats, C=4`, `trace`.
    pub fn load_label(&self) -> String {
        match self.kind {
            LevelKind::Sweep => format!("C={}", self.concurrency),
            LevelKind::LongContext => format!("{} ctx", fmt_tokens(self.input_tokens)),
            LevelKind::Rate => format!("{} req/s", fmt_rate(self.request_rate.unwrap_or(0.0))),
            LevelKind::MultiTurn => format!(
                "{}-turn chats, C={}",
                self.turns.unwrap_or(0),
                self.concurrency
            ),
            LevelKind::Trace => trace_label(self.trace),
            // An agent trace's sessions: named by the trace.
            LevelKind::Sessions if self.trace.is_some() => {
                format!("agent {}", trace_label(self.trace))
            }
            LevelKind::Sessions if self.request_rate.is_some() => format!(
                "{}-turn sessions at {}/s",
                self.turns.unwrap_or(0),
                fmt_rate(self.request_rate.unwrap_or(0.0))
            ),
            LevelKind::Sessions => format!(
                "{}-turn sessions, C={}",
                self.turns.unwrap_or(0),
                self.concurrency
            ),
        }
    }

    /// The load in a few characters, for a tick on a chart's axis: `C=64`, `60K`, `2.5/s`,
    /// `chats`, `trace`.
    pub fn short_label(&self) -> String {
        match self.kind {
            LevelKind::Sweep => format!("C={}", self.concurrency),
            LevelKind::LongContext => fmt_tokens(self.input_tokens),
            LevelKind::Rate => format!("{}/s", fmt_rate(self.request_rate.unwrap_or(0.0))),
            LevelKind::MultiTurn => "chats".into(),
            LevelKind::Trace => "trace".into(),
            LevelKind::Sessions if self.trace.is_some() => "agents".into(),
            LevelKind::Sessions if self.request_rate.is_some() => {
                format!("{}/s", fmt_rate(self.request_rate.unwrap_or(0.0)))
            }
            LevelKind::Sessions => format!("S={}", self.concurrency),
        }
    }
}

impl LevelSpec {
    /// Where the level stands on the dimensions its label names.
    pub fn place(&self) -> Place<'_> {
        Place {
            kind: self.kind,
            concurrency: self.concurrency,
            input_tokens: self.input_tokens,
            request_rate: self.arrival.map(|a| a.request_rate),
            turns: self.conversation.map(|c| c.turns),
            trace: self.trace.as_ref(),
            response_format: self.mix.response_format.as_ref().map(ResponseFormat::label),
            content: self.content,
            category: self.category.as_deref(),
            shape: self.shape,
            thinking_budget: self.thinking_budget,
            repeat: self.repeat,
        }
    }

    /// Short label: `C=8`, `4 req/s` or `30K ctx` ([`Place::label`]).
    pub fn label(&self) -> String {
        self.place().label()
    }

    /// The label without the repeat's number ([`Place::base_label`]).
    pub fn base_label(&self) -> String {
        self.place().base_label()
    }
}

/// ` #2` for the second run of a repeated level, nothing otherwise.
pub fn repeat_suffix(r: Option<Repeat>) -> String {
    r.map_or(String::new(), |r| format!(" #{}", r.n))
}

/// ` · 1000/500` for a level of a shape's pass (`--shapes`), nothing otherwise.
pub fn shape_suffix(s: Option<Shape>) -> String {
    s.map_or(String::new(), |s| format!(" · {}", s.label()))
}

/// ` · code` for a level of a content kind's pass (`--content`) or a dataset category's
/// (`--categories`), nothing otherwise.
pub fn content_suffix(k: Option<&str>) -> String {
    k.map_or(String::new(), |k| format!(" · {k}"))
}

/// ` · json` for a structured-output level (`--response-format`), nothing otherwise.
pub fn format_suffix(f: Option<&str>) -> String {
    f.map_or(String::new(), |f| format!(" · {f}"))
}

/// ` (think 256)` for a level run with a thinking budget, nothing otherwise.
pub fn budget_suffix(b: Option<u32>) -> String {
    b.map_or(String::new(), |b| format!(" (think {b})"))
}

/// `trace`, or `trace ×4` when sped up.
pub fn trace_label(t: Option<&TraceLevel>) -> String {
    match t.map(|t| t.speedup) {
        Some(x) if (x - 1.0).abs() > 1e-9 => format!("trace ×{}", fmt_rate(x)),
        _ => "trace".into(),
    }
}

/// For tests: a plan of `concurrency`, `open_loop` and the ladder (lengths, output, requests
/// per length), plain on every other dimension.
#[cfg(test)]
pub(crate) fn plain(
    concurrency: &[u64],
    (input_len, output_len): (u64, u32),
    requests: RequestCount,
    open_loop: &OpenLoop,
    (long_context, long_context_output, long_context_repeats): (&[u64], u32, u32),
) -> Vec<LevelSpec> {
    build(&Dimensions {
        concurrency,
        open_loop,
        input_len,
        output_len,
        requests,
        long_context,
        long_context_output,
        long_context_repeats,
        shared_prefix_len: 0,
        mix: &RequestMix::default(),
        lora: None,
        multi_turn: None,
        sessions: None,
        trace: None,
        response_format: None,
        content: &[],
        categories: &[],
        shapes: &[],
        thinking_budgets: &[],
        repeat: 1,
        level_seconds: None,
        shard: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(
        concurrency: &[u64],
        lengths: (u64, u32),
        open_loop: &OpenLoop,
        ladder: (&[u64], u32, u32),
    ) -> Vec<LevelSpec> {
        plain(
            concurrency,
            lengths,
            RequestCount::default(),
            open_loop,
            ladder,
        )
    }

    #[test]
    fn plan_orders_sweep_then_ladder() {
        let p = plan(
            &[1, 8],
            (1000, 500),
            &OpenLoop::default(),
            (&[30_000, 60_000], 256, 2),
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
        let p = plan(&[1], (100, 10), &ol, (&[1000], 5, 1));
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
    fn labels_name_every_dimension_once() {
        let spec = LevelSpec {
            thinking_budget: Some(64),
            repeat: Some(Repeat {
                n: 2,
                of: 2,
                first: 0,
            }),
            ..LevelSpec::new(3, LevelKind::Sweep, 8, (100, 10), 5)
        };
        let mut place = spec.place();
        assert_eq!(place.label(), "C=8 (think 64) #2");
        place.response_format = Some("json");
        assert_eq!(place.label(), "C=8 · json (think 64) #2");
        assert_eq!(place.base_label(), "C=8 · json (think 64)");
        assert_eq!(place.pass_label(), " · json (think 64)");
        assert_eq!(place.short_label(), "C=8");
    }
}
