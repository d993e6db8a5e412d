//! The agent-session levels' table: per number of users, the sessions that completed, the
//! time to first token turn by turn, and the prefix cache against its ceiling.

use std::fmt::Write as _;

use crate::summary::RunSummary;

/// summary.md's "Agent sessions" section (nothing without session levels).
pub fn sessions_section(s: &RunSummary) -> String {
    if s.sessions.is_empty() {
        return String::new();
    }
    format!(
        "\n## Agent sessions\n\n{}\nEach turn resends the whole session so far (the shared prefix, the task, every answer and tool result). cached: prompt tokens the server says it served from its prefix cache; ceiling: the prompt tokens it had finished (prefilled, or generated as an answer) for the session or the shared prefix before the turn was sent, so ceiling − cached is what the cache lost (docs/metrics.md \"Agent sessions\").\n",
        sessions_table(s)
    )
}

/// `| C | sessions done | turns ok / failed | TTFT p50 by turn (ms) | cached / ceiling | out tok/s |`
/// per session level, and the session's shape above it.
pub fn sessions_table(s: &RunSummary) -> String {
    let mut out = String::new();
    let fan_out = s
        .sessions
        .first()
        .and_then(|l| l.conversation)
        .map_or(0, |c| c.fan_out);
    out.push_str(&heading(s));
    if fan_out > 0 {
        out.push_str("| C | sessions done | turns ok / failed | TTFT p50 by turn (ms) | sub-agents' TTFT p50 by turn (ms) | cached / ceiling (tokens) | out tok/s | status |\n|---:|---:|---:|---|---|---:|---:|---|\n");
    } else {
        out.push_str("| C | sessions done | turns ok / failed | TTFT p50 by turn (ms) | cached / ceiling (tokens) | out tok/s | status |\n|---:|---:|---:|---|---:|---:|---|\n");
    }
    for l in &s.sessions {
        let st = l.stats.as_ref();
        let sc = st.map(|s| &s.scalars);
        let session = sc.and_then(|s| s.session.as_ref());
        let by_turn = session.map_or_else(
            || "–".into(),
            |x| {
                x.ttft_by_turn_ms
                    .iter()
                    .map(|t| t.map_or_else(|| "–".into(), ms))
                    .collect::<Vec<String>>()
                    .join(", ")
            },
        );
        let cache = match session.map(|x| (x.cached_tokens, x.cache_ceiling_tokens)) {
            Some((Some(c), Some(ceiling))) if ceiling > 0 => format!(
                "{c} / {ceiling} ({:.0} %)",
                c as f64 / ceiling as f64 * 100.0
            ),
            Some((Some(c), Some(ceiling))) => format!("{c} / {ceiling}"),
            _ => "not worked out".into(),
        };
        let sub = if fan_out > 0 {
            let by_turn = session.map_or_else(
                || "–".into(),
                |x| {
                    x.sub_agent_turns
                        .iter()
                        .map(|t| t.median_ttft_ms.map_or_else(|| "–".into(), ms))
                        .collect::<Vec<String>>()
                        .join(", ")
                },
            );
            format!(" {by_turn} |")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} / {} | {by_turn} |{sub} {cache} | {} | {} |",
            l.users_cell(),
            session.map_or_else(|| "–".into(), |x| x.sessions_completed.to_string()),
            sc.map_or(0, |s| s.completed),
            sc.map_or(0, |s| s.failures.values().map(|f| f.count).sum::<u64>()),
            sc.map_or_else(|| "–".into(), |s| format!("{:.0}", s.output_throughput)),
            l.status.name(),
        );
    }
    out
}

/// The sentence above the sessions table: what a session is, or the agent trace replayed.
fn heading(s: &RunSummary) -> String {
    let mut out = String::new();
    if let Some((l, t)) = s
        .sessions
        .first()
        .and_then(|l| Some((l, l.trace.as_ref()?)))
    {
        let _ = writeln!(
            out,
            "Sessions replayed from the agent trace {}: {} sessions of up to {} turns{} starting over {} s, each turn after its recorded wait (at most {} s{}).\n",
            t.source,
            t.sessions.unwrap_or(0),
            l.conversation.map_or(0, |c| c.turns),
            match l.conversation.filter(|_| t.sub_agents > 0) {
                Some(c) => format!(
                    " and {} sub-agents of up to {} turns (each started after the turn of its session it follows, the next turn waiting for them)",
                    t.sub_agents, c.sub_agent_turns
                ),
                None => String::new(),
            },
            crate::fmt::fmt_rate(t.duration_s),
            crate::fmt::fmt_rate(t.wait_cap_s.unwrap_or(0.0)),
            if t.waits_capped > 0 {
                format!("; {} recorded waits cut to it", t.waits_capped)
            } else {
                String::new()
            }
        );
    } else if let Some(l) = s.sessions.first() {
        let sub = l.conversation.filter(|c| c.fan_out > 0).map_or_else(String::new, |c| {
            format!(
                "; after the first turn, {} sub-agents of {} turns each at once (a task of {} tokens after the shared prefix), the next turn waiting for the last",
                c.fan_out, c.sub_agent_turns, c.followup_tokens
            )
        });
        let _ = writeln!(
            out,
            "Sessions of {} turns: {} tokens of shared prefix, a task of {} tokens, answers of {} tokens, tool results of {} tokens after a tool wait of {}{sub}.\n",
            l.conversation.map_or(0, |c| c.turns),
            l.shared_prefix_tokens,
            l.input_len.saturating_sub(l.shared_prefix_tokens),
            l.output_len,
            l.conversation.map_or(0, |c| c.followup_tokens),
            l.tool_wait.map_or_else(|| "none".into(), |w| w.describe()),
        );
    }
    out
}

/// Milliseconds to three significant digits (`2.07`, `35.1`, `1250`).
fn ms(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}
