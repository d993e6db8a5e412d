//! `--trace` and the flags that slice it, shared by `run` and `demo`.

use std::path::PathBuf;

use clap::Args;

use crate::grammar::parse_window;
use crate::workload::trace::{TraceConfig, TraceFormat};

/// A production trace to replay.
#[derive(Debug, Args, Clone)]
pub struct TraceArgs {
    /// Replay a production trace at its recorded times, alone (no sweep or ladder): Mooncake
    /// JSONL (`timestamp` ms, `input_length`, `output_length`, `hash_ids`) or the Azure LLM
    /// inference CSV (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`). Prompts have the recorded
    /// lengths; requests naming the same `hash_ids` share those 512-token blocks of text, so the
    /// server's prefix cache sees what production did. --max-concurrency caps it.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub trace: Option<PathBuf>,
    /// The trace's format: mooncake or azure [default: detected from the content].
    #[arg(
        long,
        value_name = "FORMAT",
        requires = "trace",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub trace_format: Option<String>,
    /// Replay the trace X times faster (recorded gaps divided by X).
    #[arg(
        long,
        value_name = "X",
        default_value = "1",
        requires = "trace",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub trace_speedup: f64,
    /// Replay only the trace's first N requests (of the window, with --trace-window).
    #[arg(
        long,
        value_name = "N",
        requires = "trace",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub trace_limit: Option<u32>,
    /// Replay only the requests recorded FROM to TO seconds after the trace's first (0:600).
    #[arg(
        long,
        value_name = "FROM:TO",
        requires = "trace",
        help_heading = "Workload",
        hide_short_help = true
    )]
    pub trace_window: Option<String>,
}

impl TraceArgs {
    /// The trace read and sliced (bad files and values are one-line errors here, before
    /// anything runs); None without `--trace`.
    pub fn load(&self) -> Result<Option<TraceConfig>, String> {
        let Some(path) = self.trace.clone() else {
            return Ok(None);
        };
        let format = self
            .trace_format
            .as_deref()
            .map(TraceFormat::parse)
            .transpose()?;
        let window = self.trace_window.as_deref().map(parse_window).transpose()?;
        TraceConfig::load(path, format, self.trace_speedup, window, self.trace_limit).map(Some)
    }
}
