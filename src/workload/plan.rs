//! What a run is about to do, said before its first request (the warmup included): the plan
//! line (`plan: …`: levels, requests, lengths, the context each long-context length needs,
//! the time once a level has measured it) and the limits that can be checked before the sweep
//! (a length the server's context cannot hold, and what servetop will do about it).

use std::fmt::Write;

use super::shapes::Shape;
use super::{LevelKind, LevelSpec};
use crate::fmt::{fmt_rate, fmt_tokens};

/// Plans with more levels than this ask for confirmation on a terminal (`--yes` skips it).
pub const CONFIRM_LEVELS: usize = 20;

/// The server's context limit as the plan checks it.
pub struct Limit<'a> {
    pub tokens: u64,
    /// The flag that raises it (`--context-length`).
    pub flag: &'a str,
    /// Where the run restarts a server it started: the context it restarts with for a need.
    pub restart: Option<&'a dyn Fn(u64) -> Option<u64>>,
}

/// The context a level's longest request needs (its spread or mix of lengths included).
fn need(l: &LevelSpec) -> u64 {
    l.context_needed()
}

fn list<T: ToString>(xs: impl IntoIterator<Item = T>) -> String {
    xs.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Concurrencies as a person writes them: runs of 4 or more consecutive values as `1–100`.
fn concurrencies(cs: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cs.len() {
        let mut j = i;
        while j + 1 < cs.len() && cs[j + 1] == cs[j] + 1 {
            j += 1;
        }
        if j - i >= 3 {
            out.push(format!("{}–{}", cs[i], cs[j]));
        } else {
            out.extend(cs[i..=j].iter().map(ToString::to_string));
        }
        i = j + 1;
    }
    out.join(", ")
}

/// The session levels as the plan says them: `sessions C=2, 8 (4 sessions a level of 8 turns,
/// tool results of 1K tokens after a tool wait of lognormal:2 s,0.8 ≤ 30 s)`.
fn sessions_part(levels: &[LevelSpec]) -> Option<String> {
    let all = of_kind(levels, LevelKind::Sessions);
    // An agent trace's sessions are said on their own.
    let sessions: Vec<&LevelSpec> = all.iter().copied().filter(|l| l.trace.is_none()).collect();
    let first = sessions.first()?;
    let c = first.conversation?;
    let users: Vec<u32> = sessions
        .iter()
        .filter(|l| l.arrival.is_none())
        .map(|l| l.concurrency)
        .collect();
    let rates: Vec<String> = sessions
        .iter()
        .filter_map(|l| l.arrival.map(|a| fmt_rate(a.request_rate)))
        .collect();
    let load = match (users.is_empty(), rates.is_empty()) {
        (false, true) => format!("C={}", concurrencies(&users)),
        (true, false) => format!("started at {}/s", rates.join(", ")),
        _ => format!(
            "C={} and started at {}/s",
            concurrencies(&users),
            rates.join(", ")
        ),
    };
    let counts: Vec<u32> = sessions.iter().map(|l| l.requests / c.requests()).collect();
    let (lo, hi) = (
        counts.iter().min().copied().unwrap_or(0),
        counts.iter().max().copied().unwrap_or(0),
    );
    let fan_out = if c.fan_out > 0 {
        format!(
            "; after the first, {} sub-agent{} of {} turns at once, the next turn waiting for the last",
            c.fan_out,
            if c.fan_out == 1 { "" } else { "s" },
            c.sub_agent_turns
        )
    } else {
        String::new()
    };
    let think = first.think_time.map_or_else(String::new, |t| {
        format!(
            "; a think time of {} before a user's next session",
            t.describe()
        )
    });
    Some(format!(
        "sessions {load} ({} sessions a level of {} turns, tool results of {} tokens after a tool wait of {}{fan_out}{think})",
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo} to {hi}")
        },
        c.turns,
        fmt_tokens(c.followup_tokens),
        first.tool_wait.map_or_else(String::new, |w| w.describe())
    ))
}

/// An agent trace's level as the plan says it: `an agent trace of 5 sessions (14 turns) over
/// 1 s, each turn after its recorded wait (at most 30 s; 2 cut)`.
fn agent_trace_part(l: &LevelSpec) -> Option<String> {
    let t = l.trace.as_ref()?;
    let cut = if t.waits_capped > 0 {
        format!("; {} cut", t.waits_capped)
    } else {
        String::new()
    };
    let subs = if t.sub_agents > 0 {
        format!(
            ", {} of them by {} sub-agent{}",
            t.sub_agent_turns,
            t.sub_agents,
            if t.sub_agents == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    Some(format!(
        "an agent trace of {} sessions ({} turns{subs}) starting over {} s, each turn after its recorded wait (at most {} s{cut})",
        t.sessions.unwrap_or(0),
        l.requests,
        crate::fmt::fmt_rate(t.duration_s),
        crate::fmt::fmt_rate(t.wait_cap_s.unwrap_or(0.0)),
    ))
}

/// Each value once, in the order first given.
fn distinct(xs: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in xs {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// `, each with code, chat prompts` where `levels` run once per content kind (`--content`) or
/// dataset category (`--categories`).
fn kinds_part(levels: &[&LevelSpec]) -> String {
    let kinds = distinct(levels.iter().filter_map(|l| {
        l.content
            .map(|k| k.name().to_string())
            .or(l.category.clone())
    }));
    if kinds.len() > 1 {
        format!(", each with {} prompts", list(kinds))
    } else if let Some(k) = kinds.first() {
        format!(", {k} prompts")
    } else {
        String::new()
    }
}

/// `levels` of one kind, first runs only (with `--repeat`, the repeats are counted apart).
fn of_kind(levels: &[LevelSpec], kind: LevelKind) -> Vec<&LevelSpec> {
    levels
        .iter()
        .filter(|l| l.kind == kind && l.repeat.is_none_or(|r| r.n == 1))
        .collect()
}

/// The plan line: `plan: 11 levels, 235 requests — sweep C=1, 4, 8 (…); long context …;
/// time: about 3–5 min (from …)`, its time part given (`time: …`).
pub fn plan_line(levels: &[LevelSpec], search: Option<&str>, time: &str) -> String {
    match search {
        None => format!("{}; {time}", plan_text(levels)),
        Some(search) if levels.is_empty() => format!("plan: {search}; {time}"),
        Some(search) => format!("{}; then {search}; {time}", plan_text(levels)),
    }
}

/// An SLO capacity search as the plan line says it: `an SLO capacity search (ttft:500 at p99):
/// a throughput probe at C=64 (256 requests), then rate probes of 30 s (100 requests at least)`,
/// or `an SLO concurrency search (tpot:50 at p90): closed-loop probes from C=16 up to C=128 at
/// most, 30 s each (100 requests at least)`.
pub fn search_text(plan: &crate::workload::search::SearchPlan) -> String {
    use crate::workload::search::SearchTarget;
    let search = &plan.config;
    let slo = plan.slo.describe();
    let seconds = crate::fmt::fmt_rate(search.probe_seconds);
    match (search.target, &plan.sessions) {
        (SearchTarget::Rate, _) => format!(
            "an SLO capacity search ({slo}): a throughput probe at C={} ({} requests), then rate probes of {seconds} s ({} requests at least)",
            search.probe_concurrency,
            search.throughput_requests(),
            search.min_requests
        ),
        (SearchTarget::Concurrency, None) => format!(
            "an SLO concurrency search ({slo}): closed-loop probes from C={} up to C={} at most, {seconds} s each ({} requests at least)",
            search.probe_concurrency,
            search.concurrency_cap(),
            search.min_requests
        ),
        (SearchTarget::Concurrency, Some(s)) => format!(
            "an SLO search in users ({slo}): session levels from {} users up to {} at most, sessions of {} turns, tool waits {}, {seconds} s each ({} turns at least)",
            search.probe_concurrency,
            search.concurrency_cap(),
            s.turns,
            s.tool_wait.describe(),
            search.min_requests
        ),
    }
}

/// The sweep as the plan line says it: `sweep C=1, 4 (1000 in / 500 out tokens, 12 requests a
/// level, each with code, chat prompts, …)`; none without sweep levels.
fn sweep_part(levels: &[LevelSpec]) -> Option<String> {
    let sweep = of_kind(levels, LevelKind::Sweep);
    let first = sweep.first()?;
    let (lo, hi) = sweep.iter().fold((u32::MAX, 0), |(lo, hi), l| {
        (lo.min(l.requests), hi.max(l.requests))
    });
    let each = if lo == hi {
        format!("{lo} request{} a level", if lo == 1 { "" } else { "s" })
    } else {
        format!("{lo} to {hi} requests a level")
    };
    // Each concurrency once: its passes (a thinking budget each, a constrained twin) are
    // said after.
    let mut cs: Vec<u32> = Vec::new();
    for l in &sweep {
        if !cs.contains(&l.concurrency) {
            cs.push(l.concurrency);
        }
    }
    let mut budgets: Vec<u32> = Vec::new();
    for b in sweep.iter().filter_map(|l| l.thinking_budget) {
        if !budgets.contains(&b) {
            budgets.push(b);
        }
    }
    let mut passes = kinds_part(&sweep);
    if budgets.len() > 1 {
        let _ = write!(
            passes,
            ", each with thinking budget {}",
            list(budgets.iter().map(ToString::to_string))
        );
    }
    if let Some(f) = sweep.iter().find_map(|l| l.mix.response_format.as_ref()) {
        passes.push_str(", each plain then constrained (");
        passes.push_str(f.label());
        passes.push(')');
    }
    let shapes = distinct(sweep.iter().filter_map(|l| l.shape).map(Shape::label));
    let lengths = if let Some(mix) = sweep
        .iter()
        .map(|l| &l.mix.shape_mix)
        .find(|m| !m.is_empty())
    {
        format!(
            "each request one of {} in/out tokens",
            crate::workload::shapes::WeightedShape::describe(mix)
        )
    } else if shapes.is_empty() {
        format!(
            "{} in / {} out tokens",
            first.input_tokens, first.output_tokens
        )
    } else {
        format!("each of the shapes {} in/out tokens", list(shapes))
    };
    Some(format!(
        "sweep C={} ({lengths}, {each}{passes})",
        concurrencies(&cs),
    ))
}

/// The plan line without its time: `plan: 11 levels, 235 requests — sweep C=1, 4, 8 (…); …`.
pub fn plan_text(levels: &[LevelSpec]) -> String {
    let requests: u64 = levels.iter().map(|l| u64::from(l.requests)).sum();
    let mut parts = Vec::new();
    parts.extend(sweep_part(levels));
    let rates = of_kind(levels, LevelKind::Rate);
    if !rates.is_empty() {
        parts.push(format!(
            "rates {} req/s{}",
            list(distinct(
                rates
                    .iter()
                    .filter_map(|l| l.arrival)
                    .map(|a| crate::fmt::fmt_rate(a.request_rate))
            )),
            kinds_part(&rates)
        ));
    }
    let long = of_kind(levels, LevelKind::LongContext);
    if let Some(first) = long.first() {
        parts.push(format!(
            "long context {} (each + {} output tokens: up to {} tokens of context{})",
            list(distinct(long.iter().map(|l| fmt_tokens(l.input_tokens)))),
            first.output_tokens,
            long.iter().map(|l| need(l)).max().unwrap_or(0),
            kinds_part(&long)
        ));
    }
    for l in of_kind(levels, LevelKind::MultiTurn) {
        if let Some(c) = l.conversation {
            parts.push(format!(
                "{} chats of {} turns at C={}",
                l.requests / c.turns.max(1),
                c.turns,
                l.concurrency
            ));
        }
    }
    parts.extend(sessions_part(levels));
    parts.extend(
        of_kind(levels, LevelKind::Sessions)
            .into_iter()
            .filter_map(agent_trace_part),
    );
    if !of_kind(levels, LevelKind::Trace).is_empty() {
        parts.push("a trace replay".into());
    }
    let runs = levels
        .iter()
        .filter_map(|l| l.repeat.map(|r| r.of))
        .max()
        .filter(|n| *n > 1)
        .map_or(String::new(), |n| format!(" ({n} runs of each)"));
    format!(
        "plan: {} level{}{runs}, {requests} requests — {}",
        levels.len(),
        if levels.len() == 1 { "" } else { "s" },
        parts.join("; ")
    )
}

/// The lengths the server's context cannot hold, and what the run will do: restart the server
/// it started with a larger context, or skip them (naming the flag). `None`: everything fits,
/// or the limit is not known.
pub fn limits_line(levels: &[LevelSpec], limit: &Limit<'_>) -> Option<String> {
    let over: Vec<&LevelSpec> = levels
        .iter()
        .filter(|l| l.repeat.is_none_or(|r| r.n == 1) && need(l) > limit.tokens)
        .collect();
    if over.is_empty() {
        return None;
    }
    let names = list(over.iter().map(|l| match l.kind {
        LevelKind::LongContext => format!("{} ctx", fmt_tokens(l.input_tokens)),
        LevelKind::Sweep => format!("C={}", l.concurrency),
        _ => format!("{} in + {} out", l.input_tokens, l.output_tokens),
    }));
    let most = over.iter().map(|l| need(l)).max().unwrap_or(0);
    let head = format!(
        "limits: {names} need{} more than the server's {}-token context",
        if over.len() == 1 { "s" } else { "" },
        limit.tokens
    );
    let restartable = |l: &&LevelSpec| l.kind == LevelKind::LongContext;
    let text = match limit.restart {
        Some(f) if over.iter().all(restartable) => {
            let contexts: Vec<String> = over
                .iter()
                .map(|l| f(need(l)).map_or("-".into(), |c| c.to_string()))
                .collect();
            format!(
                "{head}: servetop restarts the server it started with {} {} for {}",
                limit.flag,
                contexts.join(", "),
                if over.len() == 1 { "it" } else { "them" }
            )
        }
        _ => format!(
            "{head}: {} will be skipped; to measure {}, restart the server with {} of at least {most}{}",
            if over.len() == 1 { "it" } else { "they" },
            if over.len() == 1 { "it" } else { "them" },
            limit.flag,
            if over.iter().any(|l| l.kind == LevelKind::LongContext) {
                if over.len() == 1 {
                    " (or leave it out: --long-context)"
                } else {
                    " (or leave them out: --long-context)"
                }
            } else {
                " (or lower --input-len/--output-len)"
            }
        ),
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::levels::{budgets, plain, twins};
    use crate::workload::{OpenLoop, RequestCount};

    fn demo_levels() -> Vec<LevelSpec> {
        plain(
            &[1, 4, 8, 16, 64, 100],
            (1000, 100),
            RequestCount::PerConcurrency {
                factor: 1.0,
                min: 5,
            },
            &OpenLoop::default(),
            (&[8000, 16000, 30000, 60000, 100_000], 512, 1),
        )
    }

    #[test]
    fn the_plan_line_counts_levels_and_requests_and_names_the_lengths() {
        let line = plan_text(&demo_levels());
        assert_eq!(
            line,
            "plan: 11 levels, 203 requests — sweep C=1, 4, 8, 16, 64, 100 (1000 in / 100 out tokens, 5 to 100 requests a level); long context 8K, 16K, 30K, 60K, 100K (each + 512 output tokens: up to 100512 tokens of context)"
        );
    }

    /// Each concurrency once, whatever its passes: a budget each, a constrained twin each.
    #[test]
    fn the_plan_line_names_each_concurrency_once_and_its_passes() {
        let levels = plain(
            &[1, 4],
            (100, 64),
            RequestCount::Fixed(8),
            &OpenLoop::default(),
            (&[], 16, 1),
        );
        let levels = twins(
            levels,
            Some(&crate::client::structured::ResponseFormat::Json),
        );
        let line = plan_text(&budgets(levels.clone(), &[16, 64]));
        let kinds = plan_text(&crate::workload::levels::contents(
            levels,
            &[
                crate::workload::content::ContentKind::Code,
                crate::workload::content::ContentKind::Chat,
            ],
        ));
        assert!(
            kinds.contains(
                "sweep C=1, 4 (100 in / 64 out tokens, 8 requests a level, each with code, chat prompts, each plain then constrained (json))"
            ),
            "{kinds}"
        );
        assert!(
            line.contains(
                "sweep C=1, 4 (100 in / 64 out tokens, 8 requests a level, each with thinking budget 16, 64, each plain then constrained (json))"
            ),
            "{line}"
        );
    }

    #[test]
    fn consecutive_concurrencies_are_a_range() {
        let cs: Vec<u32> = (1..=100).collect();
        assert_eq!(concurrencies(&cs), "1–100");
        assert_eq!(
            concurrencies(&[1, 2, 3, 8, 9, 10, 11, 64]),
            "1, 2, 3, 8–11, 64"
        );
    }

    #[test]
    fn lengths_over_the_limit_are_named_with_what_happens_to_them() {
        let levels = demo_levels();
        let skip = Limit {
            tokens: 32768,
            flag: "--context-length",
            restart: None,
        };
        assert_eq!(
            limits_line(&levels, &skip).unwrap(),
            "limits: 60K ctx, 100K ctx need more than the server's 32768-token context: they will be skipped; to measure them, restart the server with --context-length of at least 100512 (or leave them out: --long-context)"
        );
        let pow2 = |need: u64| Some(need.next_power_of_two());
        let restart = Limit {
            restart: Some(&pow2),
            ..skip
        };
        assert_eq!(
            limits_line(&levels, &restart).unwrap(),
            "limits: 60K ctx, 100K ctx need more than the server's 32768-token context: servetop restarts the server it started with --context-length 65536, 131072 for them"
        );
        let roomy = Limit {
            tokens: 200_000,
            flag: "--context-length",
            restart: None,
        };
        assert!(limits_line(&levels, &roomy).is_none());
    }
}
