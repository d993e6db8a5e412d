//! `servetop run`'s Agent sessions flags: users running sessions of turns, each turn's context
//! grown by the answer and a tool's result, the turns apart by the tool's wait.

use clap::Args;

use crate::cli::values::{List, Rates, count, list, rates};
use crate::workload::sessions;

/// Agent sessions (`--sessions`).
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Agent sessions")]
pub struct SessionArgs {
    /// Add agent-session levels: N concurrent users each (a list, like --concurrency).
    ///
    /// Each user runs a session, then the next: the shared prefix (--shared-prefix-len, the
    /// system prompt and tool definitions) and the task (--input-len), then --turns turns, each
    /// answered in --output-len tokens and followed by a tool's result of --tool-result-len
    /// tokens after the tool's wait (--tool-wait). Every turn resends the whole context.
    #[arg(long, value_name = "LIST", value_parser = list)]
    pub sessions: Option<List>,
    /// Sessions each session level runs: N, or Fx (F times its users).
    #[arg(
        long,
        value_name = "N|Fx",
        default_value = "2x",
        hide_short_help = true
    )]
    pub sessions_per_level: String,
    /// Turns per session.
    #[arg(long, value_name = "N", default_value_t = sessions::DEFAULT_TURNS, hide_short_help = true)]
    pub turns: u32,
    /// The tool's wait before each turn after the first, in seconds: S, exp:MEAN or
    /// lognormal:MEDIAN,SIGMA.
    #[arg(long, value_name = "DIST", default_value = sessions::DEFAULT_TOOL_WAIT, hide_short_help = true)]
    pub tool_wait: String,
    /// The longest tool wait, in seconds (longer draws are cut to it).
    #[arg(long, value_name = "S", default_value_t = sessions::DEFAULT_TOOL_WAIT_CAP_S, hide_short_help = true)]
    pub tool_wait_cap: f64,
    /// Tokens of each tool result appended to the context.
    #[arg(long, value_name = "N", default_value_t = sessions::DEFAULT_TOOL_RESULT_LEN, value_parser = count, hide_short_help = true)]
    pub tool_result_len: u64,
    /// Sub-agents each session starts after its first turn, all at once; the session's next
    /// turn waits for the last of them (0: none).
    ///
    /// Each sub-agent runs its own session: the shared prefix, a task of --tool-result-len
    /// tokens, then --sub-agent-turns turns with tool results and waits as the parent's.
    #[arg(long, value_name = "K", default_value_t = 0, hide_short_help = true)]
    pub fan_out: u32,
    /// A user's think time before each of its sessions after its first, in seconds: S,
    /// exp:MEAN or lognormal:MEDIAN,SIGMA (none: the next session starts at once).
    #[arg(long, value_name = "DIST", hide_short_help = true)]
    pub think_time: Option<String>,
    /// Add open-loop session levels: sessions started at these rates (sessions/s, a list like
    /// --request-rate), whatever the earlier ones are doing.
    ///
    /// Each level runs --sessions-per-level sessions (Fx: F × rate × 10 s of starts), their
    /// starts spaced as --burstiness says; --max-concurrency caps the sessions running at once.
    #[arg(long, value_name = "LIST", value_parser = rates, hide_short_help = true)]
    pub session_rate: Option<Rates>,
    /// Turns each sub-agent runs (with --fan-out).
    #[arg(long, value_name = "N", default_value_t = sessions::DEFAULT_SUB_AGENT_TURNS, hide_short_help = true)]
    pub sub_agent_turns: u32,
}

impl SessionArgs {
    /// The session levels the flags ask for, if any.
    pub fn sessions(&self) -> Result<Option<sessions::Sessions>, String> {
        let rates = self
            .session_rate
            .as_ref()
            .map(|r| r.0.clone())
            .unwrap_or_default();
        let levels = self
            .sessions
            .as_ref()
            .map(|l| l.0.clone())
            .unwrap_or_default();
        if levels.is_empty() && rates.is_empty() {
            return Ok(None);
        }
        let levels = levels
            .iter()
            .map(|&n| {
                u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("--sessions {n}: users must be between 1 and 4294967295")
                })
            })
            .collect::<Result<Vec<u32>, String>>()?;
        if !(self.tool_wait_cap.is_finite() && self.tool_wait_cap > 0.0) {
            return Err(format!(
                "--tool-wait-cap {}: must be a positive number of seconds",
                self.tool_wait_cap
            ));
        }
        Ok(Some(sessions::Sessions {
            levels,
            per_level: crate::workload::RequestCount::parse(&self.sessions_per_level, 1)
                .map_err(|e| format!("--sessions-per-level {e}"))?,
            turns: self.turns,
            tool_wait: sessions::ToolWait {
                dist: sessions::ToolWaitDist::parse(&self.tool_wait)?,
                cap_s: Some(self.tool_wait_cap),
            },
            tool_result_len: self.tool_result_len,
            fan_out: self.fan_out,
            sub_agent_turns: self.sub_agent_turns,
            rates,
            think_time: self
                .think_time
                .as_deref()
                .map(|t| {
                    sessions::ToolWaitDist::parse_for("--think-time", t)
                        .map(|dist| sessions::ToolWait { dist, cap_s: None })
                })
                .transpose()?,
        }))
    }
}
