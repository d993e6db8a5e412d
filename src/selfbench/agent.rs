//! The agent case: users each holding a session on the chat endpoint, a turn streamed at the
//! accuracy cases' pace, then a tool wait before the next; with the default waits most users
//! are waiting on a tool at any moment, as agents' users are. What it measures is what the
//! other cases do — every token event's timing error against the firehose's record of its
//! write, the held reads, the failures, the peak RSS of thousands of open sessions — on the
//! path sessions take (the multi-turn machinery, chat deltas, contexts that grow each turn).

use std::path::PathBuf;

use super::{Case, CaseResult, paced_case, print_case};
use crate::cli::BenchClientArgs;
use crate::workload::sessions::{DEFAULT_SUB_AGENT_TURNS, Sessions, ToolWait, ToolWaitDist};

/// The case's kind in its rows.
pub const KIND: &str = "agent";
/// Tokens of each tool result appended to a session's context.
const TOOL_RESULT_LEN: u64 = 16;
/// The longest tool wait, as `run --tool-wait-cap` defaults.
const TOOL_WAIT_CAP_S: f64 = 30.0;

/// One level of `users` users at once, each running one session of `turns` turns with `wait`
/// (as `--agent-tool-wait` says it) before each turn after the first.
pub(super) fn sessions(users: u32, turns: u32, wait: &str) -> Result<Sessions, String> {
    Ok(Sessions {
        levels: vec![users],
        per_level: crate::workload::RequestCount::Fixed(users),
        turns,
        tool_wait: ToolWait {
            dist: ToolWaitDist::parse_for("--agent-tool-wait", wait)?,
            cap_s: Some(TOOL_WAIT_CAP_S),
        },
        tool_result_len: TOOL_RESULT_LEN,
        fan_out: 0,
        sub_agent_turns: DEFAULT_SUB_AGENT_TURNS,
        think_time: None,
        rates: Vec::new(),
    })
}

/// The agent cases of one repeat: each number of users of `--agent-sessions`, with each `--ui`,
/// on the firehose paced at `--pace-ms` (firehose and client on the CPUs given).
pub(super) fn cases(
    a: &BenchClientArgs,
    cpus: (Option<&str>, Option<&str>),
    next_dir: &mut dyn FnMut() -> PathBuf,
) -> Result<Vec<CaseResult>, String> {
    let mut out = Vec::new();
    for &users in &a.agent_sessions.0 {
        let users = u32::try_from(users).map_err(|_| format!("--agent-sessions {users}"))?;
        for ui in &a.ui {
            let case = Case {
                kind: KIND,
                concurrency: users,
                ui,
                events_per_write: 1,
                input_len: a.input_len,
                output_len: a.accuracy_output_len,
                requests: users.saturating_mul(a.agent_turns),
                record_chunks: true,
                turns: a.agent_turns,
                tool_wait: Some(&a.agent_tool_wait),
            };
            let (r, _) = paced_case(a, cpus, &case, &next_dir())?;
            print_case(&r);
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The level the case runs: its users, one session each, the turns and the wait asked; a
    /// wait `run --tool-wait` would refuse is refused, naming the bench flag.
    #[test]
    fn the_case_runs_one_session_a_user() {
        let s = sessions(10_000, 4, "exp:4").unwrap();
        assert_eq!(s.levels, [10_000]);
        assert_eq!(s.per_level, crate::workload::RequestCount::Fixed(10_000));
        assert_eq!(s.turns, 4);
        assert_eq!(s.tool_wait.dist, ToolWaitDist::Exp { mean_s: 4.0 });
        assert_eq!((s.fan_out, s.think_time), (0, None));
        let e = sessions(10, 4, "soon").unwrap_err();
        assert!(e.starts_with("--agent-tool-wait 'soon'"), "{e}");
    }
}
