//! Agent traces (`--trace` of Mooncake lines with `session_id`, the multi-turn form NVIDIA
//! AIPerf reads): each session's first turn at its `timestamp` (ms), each later turn its
//! `delay` (ms) after the turn before ended, `input_length` the turn's new tokens. Read here
//! into the trace's requests, session after session, and made into a session level.

use std::collections::HashMap;

use super::trace::{MooncakeLine, Trace, TraceConfig, TraceRequest};

impl Trace {
    /// An agent trace: its lines are turns of sessions.
    pub fn is_sessions(&self) -> bool {
        self.requests.first().is_some_and(|r| r.session.is_some())
    }

    /// An agent trace's own turns a session, in order (empty for a trace of requests).
    pub fn session_lengths(&self) -> Vec<u32> {
        self.per_session(|r| r.sub_agent.is_none())
    }

    /// An agent trace's requests a session, its sub-agents' included, in order: the sizes of
    /// the level's jobs (empty for a trace of requests).
    pub fn job_sizes(&self) -> Vec<u32> {
        self.per_session(|_| true)
    }

    /// When each session starts, in order (s from the trace's first).
    pub fn session_starts_s(&self) -> Vec<f64> {
        self.requests
            .iter()
            .filter(|r| starts_session(r))
            .map(|r| r.at_ms / 1000.0)
            .collect()
    }

    /// The most sub-agents one session starts, and the most turns one of them runs.
    pub fn sub_agents(&self) -> (u32, u32) {
        let k = self
            .requests
            .iter()
            .filter_map(|r| r.sub_agent)
            .max()
            .map_or(0, |k| k + 1);
        let turns = self
            .requests
            .iter()
            .filter(|r| r.sub_agent.is_some())
            .map(|r| r.turn + 1)
            .max()
            .unwrap_or(0);
        (k, turns)
    }

    /// The requests of each session that `counts` counts.
    fn per_session(&self, counts: impl Fn(&TraceRequest) -> bool) -> Vec<u32> {
        if !self.is_sessions() {
            return Vec::new();
        }
        let mut out: Vec<u32> = Vec::new();
        for r in &self.requests {
            if starts_session(r) || out.is_empty() {
                out.push(0);
            }
            if let Some(n) = out.last_mut() {
                *n += u32::from(counts(r));
            }
        }
        out
    }
}

impl TraceConfig {
    /// An agent trace's level: a session level whose sessions start at their recorded times
    /// and whose turns wait their recorded delays (at most `wait_cap_s`).
    pub(super) fn sessions_level(
        &self,
        t: &Trace,
        index: u32,
        name: &str,
        max_concurrency: Option<u32>,
    ) -> super::LevelSpec {
        let (input, output) = t.mean_lengths();
        let lengths = t.session_lengths();
        // The tool results: the sessions' own later turns' new tokens.
        let later: Vec<&TraceRequest> = t
            .requests
            .iter()
            .filter(|r| r.turn > 0 && r.sub_agent.is_none())
            .collect();
        let followup = if later.is_empty() {
            0
        } else {
            later.iter().map(|r| r.input_len).sum::<u64>() / later.len() as u64
        };
        let mut level = t.level(name, self.speedup, max_concurrency);
        level.sessions = Some(lengths.len() as u32);
        level.wait_cap_s = Some(self.wait_cap_s);
        // Every recorded wait: a later turn's, and a sub-agent's before its first turn.
        level.waits_capped = t
            .requests
            .iter()
            .filter(|r| (r.turn > 0 || r.sub_agent.is_some()) && r.delay_ms > self.wait_cap_s * 1e3)
            .count() as u32;
        let (fan_out, sub_agent_turns) = t.sub_agents();
        level.sub_agent_turns = t.requests.iter().filter(|r| r.sub_agent.is_some()).count() as u32;
        level.sub_agents = t
            .requests
            .iter()
            .filter(|r| r.sub_agent.is_some() && r.turn == 0)
            .count() as u32;
        super::LevelSpec {
            trace: Some(level),
            conversation: Some(super::Conversation {
                fan_out,
                sub_agent_turns,
                ..super::Conversation::new(lengths.iter().copied().max().unwrap_or(1), followup)
            }),
            ..super::LevelSpec::new(
                index,
                super::LevelKind::Sessions,
                max_concurrency.unwrap_or(0),
                (input, output),
                t.requests.len() as u32,
            )
        }
    }
}

/// A line's `session_id` (or `parent_session_id`, `field`) as text (a string, or a number
/// written as one).
fn id_of(
    v: Option<&serde_json::Value>,
    field: &str,
    (source, line): (&str, usize),
) -> Result<Option<String>, String> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
        Some(serde_json::Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(format!(
            "--trace {source} line {line}: {field} {other} is neither a string nor a number"
        )),
    }
}

/// Where a line of an agent trace stands: the session it is grouped with (a sub-agent's
/// parent's; none for a line of no session), when it is sent and after what wait, its turn,
/// and for a sub-agent's line which sub-agent and after how many of its parent's turns.
pub(super) struct Placed {
    pub key: Option<String>,
    pub at_ms: f64,
    pub delay_ms: f64,
    pub turn: u32,
    pub sub_agent: Option<u32>,
    pub after_turn: u32,
}

/// A sub-agent's session: its parent's, which of the parent's sub-agents it is, and how many
/// of the parent's turns came before its first line (on line `line`).
#[derive(Clone)]
struct SubAgent {
    parent: String,
    index: u32,
    after_turn: u32,
    line: usize,
}

/// What an agent trace's lines so far say of their sessions: each session's start and turns,
/// and which sessions are sub-agents of which.
#[derive(Default)]
pub(super) struct SessionBook {
    start: HashMap<String, f64>,
    turns: HashMap<String, u32>,
    subs: HashMap<String, SubAgent>,
    sub_agents_of: HashMap<String, u32>,
}

impl SessionBook {
    /// Places line `line` of `source`.
    pub(super) fn place(
        &mut self,
        m: &MooncakeLine,
        (source, line): (&str, usize),
    ) -> Result<Placed, String> {
        let at = (source, line);
        let session = id_of(m.session_id.as_ref(), "session_id", at)?;
        let parent = id_of(m.parent_session_id.as_ref(), "parent_session_id", at)?;
        let sub = match (&session, parent) {
            (None, Some(p)) => {
                return Err(format!(
                    "--trace {source} line {line}: parent_session_id {p} without a session_id; a sub-agent's lines name its own session too"
                ));
            }
            (Some(s), p) => self.sub_agent(s, p, at)?,
            (None, None) => None,
        };
        let key = match &sub {
            Some(a) => Some(a.parent.clone()),
            None => session.clone(),
        };
        // A session's later turns, and its sub-agents' turns, wait their delay after the
        // turn before; its first is sent at its timestamp.
        let later = key.as_ref().and_then(|k| self.start.get(k)).copied();
        let (at_ms, delay_ms) = timing(m, later, session.as_deref(), at)?;
        if let Some(k) = &key {
            self.start.entry(k.clone()).or_insert(at_ms);
        }
        let turn = session.map_or(0, |s| {
            let t = self.turns.entry(s).or_insert(0);
            *t += 1;
            *t - 1
        });
        Ok(Placed {
            key,
            at_ms,
            delay_ms,
            turn,
            sub_agent: sub.as_ref().map(|a| a.index),
            after_turn: sub.map_or(0, |a| a.after_turn),
        })
    }

    /// Session `s`'s sub-agent standing, where it is a sub-agent: registered at its first line
    /// that names a parent (`p`), which must be a session of earlier lines and no sub-agent.
    fn sub_agent(
        &mut self,
        s: &str,
        p: Option<String>,
        (source, line): (&str, usize),
    ) -> Result<Option<SubAgent>, String> {
        if let Some(a) = self.subs.get(s) {
            if let Some(p) = p.filter(|p| *p != a.parent) {
                return Err(format!(
                    "--trace {source} line {line}: session {s} names parent {p}, but its line {} named {}",
                    a.line, a.parent
                ));
            }
            return Ok(Some(a.clone()));
        }
        let Some(p) = p else { return Ok(None) };
        if self.turns.contains_key(s) {
            return Err(format!(
                "--trace {source} line {line}: session {s} names parent {p} after turns of its own; a sub-agent's first line names its parent"
            ));
        }
        if self.subs.contains_key(&p) {
            return Err(format!(
                "--trace {source} line {line}: parent {p} of session {s} is itself a sub-agent; sub-agents of sub-agents are not read"
            ));
        }
        let Some(&after_turn) = self.turns.get(&p) else {
            return Err(format!(
                "--trace {source} line {line}: parent_session_id {p} names no session of an earlier line; a sub-agent starts after a turn of its parent"
            ));
        };
        let n = self.sub_agents_of.entry(p.clone()).or_insert(0);
        let a = SubAgent {
            parent: p,
            index: *n,
            after_turn,
            line,
        };
        *n += 1;
        self.subs.insert(s.to_string(), a.clone());
        Ok(Some(a))
    }

    /// Refuses a sub-agent with no turn of its parent after it to return to.
    pub(super) fn finish(&self, source: &str) -> Result<(), String> {
        let mut subs: Vec<(&String, &SubAgent)> = self.subs.iter().collect();
        subs.sort_by_key(|(_, a)| a.line);
        for (s, a) in subs {
            if self.turns.get(&a.parent).copied().unwrap_or(0) <= a.after_turn {
                return Err(format!(
                    "--trace {source} line {}: sub-agent {s} starts after the last turn of its parent {}; a parent's next turn takes its sub-agents' results, so one must follow",
                    a.line, a.parent
                ));
            }
        }
        Ok(())
    }
}

/// When a line is sent (ms: its timestamp, or its session's start for a later turn) and the
/// wait before it (a later turn's `delay`, ms; 0 for the rest). `later`: its session's start,
/// where it is not the session's first line.
fn timing(
    m: &MooncakeLine,
    later: Option<f64>,
    session: Option<&str>,
    (source, line): (&str, usize),
) -> Result<(f64, f64), String> {
    let at_ms = match (later, m.timestamp, m.delay) {
        (Some(_), Some(_), None) => {
            return Err(format!(
                "--trace {source} line {line}: a later turn of session {} with a timestamp and no delay; servetop sends a session's later turns their delay (ms) after the turn before ended",
                session.unwrap_or_default()
            ));
        }
        (Some(start), _, _) => start,
        (None, Some(t), _) => t,
        (None, None, _) => {
            return Err(format!(
                "--trace {source} line {line}: no timestamp (ms); a request, or a session's first turn, needs one"
            ));
        }
    };
    if !at_ms.is_finite() || at_ms < 0.0 {
        return Err(format!(
            "--trace {source} line {line}: timestamp {at_ms} is not a time in ms"
        ));
    }
    if later.is_none() {
        return Ok((at_ms, 0.0));
    }
    let d = m.delay.unwrap_or(0.0);
    if !d.is_finite() || d < 0.0 {
        return Err(format!(
            "--trace {source} line {line}: delay {d} is not a wait in ms"
        ));
    }
    Ok((at_ms, d))
}

/// The lines in order; where any names a session (an agent trace), each session's turns
/// together in the order the sessions first appear (the sort by time then orders them by their
/// starts), a line with no session being a session of one turn.
pub(super) fn grouped(out: Vec<(Option<String>, TraceRequest)>) -> Vec<TraceRequest> {
    if !out.iter().any(|(s, _)| s.is_some()) {
        return out.into_iter().map(|(_, r)| r).collect();
    }
    let mut order: Vec<String> = Vec::new();
    let mut by: HashMap<String, Vec<TraceRequest>> = HashMap::new();
    for (k, (s, r)) in out.into_iter().enumerate() {
        let key = s.unwrap_or_else(|| format!("\u{0}line {k}"));
        if !by.contains_key(&key) {
            order.push(key.clone());
        }
        by.entry(key).or_default().push(TraceRequest {
            session: Some(0),
            ..r
        });
    }
    order
        .into_iter()
        .flat_map(|k| by.remove(&k).unwrap_or_default())
        .collect()
}

/// A session's first own turn (a sub-agent's first turn is its parent session's).
fn starts_session(r: &TraceRequest) -> bool {
    r.turn == 0 && r.sub_agent.is_none()
}

/// Numbers an agent trace's sessions from 0 in the order they start (requests already in
/// that order, a session's turns together).
pub(super) fn number_sessions(requests: &mut [TraceRequest]) {
    let mut n = 0u32;
    let mut prev: Option<usize> = None;
    for (i, r) in requests.iter_mut().enumerate() {
        if r.session.is_none() {
            continue;
        }
        if starts_session(r) && prev.is_some() {
            n += 1;
        }
        prev = Some(i);
        r.session = Some(n);
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use super::super::trace::{TraceFormat, parse};

    const AGENTS: &str = include_str!("../../tests/fixtures/agent-trace.jsonl");

    #[test]
    fn sessions_are_read_together_in_the_order_they_start() {
        let t = parse(AGENTS, None, "a").unwrap();
        assert_eq!(t.format, TraceFormat::Mooncake);
        assert!(t.is_sessions());
        assert_eq!(t.session_lengths(), [3, 2, 4, 2, 3]);
        let s: Vec<(u32, u32, f64, f64)> = t
            .requests
            .iter()
            .map(|r| (r.session.unwrap(), r.turn, r.at_ms, r.delay_ms))
            .collect();
        // Session 3 (agent-3): starts at 450 ms, then waits of 100, 250 and 120 ms.
        assert_eq!(s[5], (2, 0, 450.0, 0.0));
        assert_eq!(s[6], (2, 1, 450.0, 100.0));
        assert_eq!(s[8], (2, 3, 450.0, 120.0));
        assert_eq!(t.requests[6].input_len, 40);
    }

    #[test]
    fn slicing_and_speed_keep_whole_sessions() {
        let mut t = parse(AGENTS, None, "a").unwrap();
        t.speed_up(2.0);
        assert_eq!((t.requests[6].at_ms, t.requests[6].delay_ms), (225.0, 50.0));
        t.window(0.2, 0.5);
        // Sessions starting at 450 and 700 ms, now 225 and 350: numbered again from 0.
        assert_eq!(t.session_lengths(), [4, 2]);
        assert_eq!(t.requests[0].session, Some(0));
        assert_eq!(t.requests[0].at_ms, 0.0);
        t.limit(1);
        assert_eq!(t.session_lengths(), [4]);
    }

    #[test]
    fn a_later_turn_needs_a_delay_and_a_first_turn_a_timestamp() {
        let e = parse(
            "{\"session_id\":\"a\",\"timestamp\":0,\"input_length\":5,\"output_length\":2}\n{\"session_id\":\"a\",\"timestamp\":9,\"input_length\":5,\"output_length\":2}\n",
            None,
            "t.jsonl",
        )
        .unwrap_err();
        assert!(
            e.starts_with(
                "--trace t.jsonl line 2: a later turn of session a with a timestamp and no delay"
            ),
            "{e}"
        );
        let e = parse(
            "{\"session_id\":7,\"delay\":5,\"input_length\":5,\"output_length\":2}\n",
            None,
            "t.jsonl",
        )
        .unwrap_err();
        assert!(e.starts_with("--trace t.jsonl line 1: no timestamp"), "{e}");
        let e = parse(
            "{\"session_id\":[1],\"timestamp\":0,\"input_length\":5,\"output_length\":2}\n",
            None,
            "t.jsonl",
        )
        .unwrap_err();
        assert!(e.contains("neither a string nor a number"), "{e}");
    }

    const SUB_AGENTS: &str = include_str!("../../tests/fixtures/agent-trace-sub-agents.jsonl");

    /// lead-1 starts sub-agents a and b after its first turn and c after its second; lead-2
    /// starts a after its second. Each session's lines stay together, in file order.
    #[test]
    fn sub_agents_go_with_their_parent_after_the_turn_they_follow() {
        let t = parse(SUB_AGENTS, None, "s").unwrap();
        assert_eq!(t.session_lengths(), [3, 3]);
        assert_eq!(t.job_sizes(), [7, 4]);
        assert_eq!(t.sub_agents(), (3, 2));
        // (session, sub-agent, its own turn, after how many parent turns, at, delay)
        let got: Vec<(u32, Option<u32>, u32, u32, f64, f64)> = t
            .requests
            .iter()
            .map(|r| {
                let s = r.session.unwrap();
                (s, r.sub_agent, r.turn, r.after_turn, r.at_ms, r.delay_ms)
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, None, 0, 0, 0.0, 0.0),
                (0, Some(0), 0, 1, 0.0, 40.0),
                (0, Some(1), 0, 1, 0.0, 0.0),
                (0, Some(0), 1, 1, 0.0, 150.0),
                (0, None, 1, 0, 0.0, 80.0),
                (0, Some(2), 0, 2, 0.0, 30.0),
                (0, None, 2, 0, 0.0, 60.0),
                (1, None, 0, 0, 250.0, 0.0),
                (1, None, 1, 0, 250.0, 100.0),
                (1, Some(0), 0, 2, 250.0, 20.0),
                (1, None, 2, 0, 250.0, 50.0),
            ]
        );
        // Slicing keeps a session with its sub-agents.
        let mut t = parse(SUB_AGENTS, None, "s").unwrap();
        t.window(0.1, 1.0);
        assert_eq!((t.session_lengths(), t.job_sizes()), (vec![3], vec![4]));
        let mut t = parse(SUB_AGENTS, None, "s").unwrap();
        t.limit(1);
        assert_eq!(t.job_sizes(), [7]);
    }

    #[test]
    fn a_sub_agent_needs_a_parent_before_it_and_a_turn_after_it() {
        let line = |fields: &str| format!("{{{fields},\"input_length\":5,\"output_length\":2}}\n");
        let lead = line("\"session_id\":\"p\",\"timestamp\":0");
        let sub = line("\"session_id\":\"s\",\"parent_session_id\":\"p\"");
        let next = line("\"session_id\":\"p\",\"delay\":5");
        let cases = [
            (
                sub.clone() + &lead,
                "line 1: parent_session_id p names no session of an earlier line",
            ),
            (
                lead.clone() + &sub,
                "line 2: sub-agent s starts after the last turn of its parent p",
            ),
            (
                lead.clone()
                    + &sub
                    + &line("\"session_id\":\"t\",\"parent_session_id\":\"s\"")
                    + &next,
                "line 3: parent s of session t is itself a sub-agent",
            ),
            (
                lead.clone() + &line("\"parent_session_id\":\"p\"") + &next,
                "line 2: parent_session_id p without a session_id",
            ),
            (
                lead.clone()
                    + &line("\"session_id\":\"q\",\"timestamp\":1")
                    + &sub
                    + &line("\"session_id\":\"s\",\"parent_session_id\":\"q\"")
                    + &next,
                "line 4: session s names parent q, but its line 3 named p",
            ),
            (
                lead.clone()
                    + &line("\"session_id\":\"q\",\"timestamp\":1")
                    + &line("\"session_id\":\"q\",\"parent_session_id\":\"p\"")
                    + &next,
                "line 3: session q names parent p after turns of its own",
            ),
        ];
        for (text, want) in cases {
            let e = parse(&text, None, "t.jsonl").unwrap_err();
            assert!(e.starts_with(&format!("--trace t.jsonl {want}")), "{e}");
        }
        // With a turn of its parent after it, it is read.
        assert!(parse(&(lead + &sub + &next), None, "t.jsonl").is_ok());
    }
}
