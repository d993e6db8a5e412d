//! Production traces to replay (`--trace FILE`): Mooncake's JSONL (`timestamp` in ms,
//! `input_length`, `output_length`, `hash_ids` naming 512-token prefix blocks) and Azure's LLM
//! inference trace CSV (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`), read into one list of
//! requests at their offsets from the trace's first, in time order. The format is detected from
//! the content unless given. Every error is one line naming the file, the line and the fix.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::agent_trace::{SessionBook, grouped, number_sessions};

/// Tokens of one Mooncake prefix block (`hash_ids` name blocks of this size).
pub const BLOCK_TOKENS: u64 = 512;

/// How a trace file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    Mooncake,
    Azure,
}

impl TraceFormat {
    /// `mooncake` or `azure` (`--trace-format`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "mooncake" => Ok(Self::Mooncake),
            "azure" => Ok(Self::Azure),
            other => Err(format!(
                "--trace-format {other:?}: use mooncake (JSONL) or azure (CSV)"
            )),
        }
    }

    /// `mooncake` or `azure`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mooncake => "mooncake",
            Self::Azure => "azure",
        }
    }
}

/// What a trace level replays, as written into the plan and results.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceLevel {
    /// The trace file's name.
    pub source: String,
    pub format: TraceFormat,
    /// `--trace-speedup`: recorded time divided by this.
    pub speedup: f64,
    /// Seconds from the first request to the last, as replayed (after the speedup).
    pub duration_s: f64,
    /// Requests per second the trace offers: (requests − 1) / `duration_s`, the estimator of
    /// the achieved `scheduled_request_rate` and `achieved_request_rate` (None for a single
    /// request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_rate: Option<f64>,
    /// The largest prompt and output of the replayed requests (their means are the level's
    /// `input_len` and `output_len`).
    pub max_input_len: u64,
    pub max_output_len: u32,
    /// The prefix-cache hit rate the `hash_ids` imply ([`Trace::expected_cache_hit_rate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_prefix_cache_hit_rate: Option<f64>,
    /// `--max-concurrency`: most requests in flight; later ones wait in the client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// An agent trace (lines with `session_id`): its sessions, the cap on their recorded
    /// waits (`--tool-wait-cap`, s), and how many waits it cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sessions: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_cap_s: Option<f64>,
    #[serde(default, skip_serializing_if = "super::is_zero_u32")]
    pub waits_capped: u32,
    /// An agent trace's sub-agents (`parent_session_id`), over all its sessions, and the turns
    /// they send.
    #[serde(default, skip_serializing_if = "super::is_zero_u32")]
    pub sub_agents: u32,
    #[serde(default, skip_serializing_if = "super::is_zero_u32")]
    pub sub_agent_turns: u32,
}

/// One recorded request.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// Milliseconds after the trace's first request.
    pub at_ms: f64,
    pub input_len: u64,
    pub output_len: u32,
    /// Prefix blocks (Mooncake): requests naming the same block share its text.
    pub hash_ids: Vec<u64>,
    /// In an agent trace (lines with `session_id`): its session (from 0, in the order the
    /// sessions start) and its turn in it (from 0), and the recorded wait before it, after the
    /// session's turn before it ended (`delay`, ms; 0 for a first turn).
    pub session: Option<u32>,
    pub turn: u32,
    pub delay_ms: f64,
    /// A sub-agent's turn (`parent_session_id`): which of its session's sub-agents (from 0, in
    /// the order they first appear), its `turn` being the sub-agent's own; and how many of the
    /// session's own turns came before the sub-agent's first line (it starts once they are
    /// answered). None and 0 for a session's own turns.
    pub sub_agent: Option<u32>,
    pub after_turn: u32,
}

/// A trace read from a file, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub format: TraceFormat,
    /// In time order; in an agent trace, session after session (in the order they start), each
    /// one's turns in order, every turn at its session's start.
    pub requests: Vec<TraceRequest>,
}

/// `--trace` and the flags that slice it: what to replay, read once as the run is configured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceConfig {
    pub path: PathBuf,
    pub format: TraceFormat,
    /// `--trace-speedup`: recorded time is divided by this.
    pub speedup: f64,
    /// `--trace-window FROM:TO`: the requests recorded from FROM to TO seconds after the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_s: Option<(f64, f64)>,
    /// `--trace-limit N`: the first N requests (of the window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The requests to replay, sliced and sped up; read from `path`, not written to files.
    #[serde(skip)]
    pub loaded: Option<Arc<Trace>>,
    /// An agent trace's recorded waits are cut to this (`--tool-wait-cap`, s).
    #[serde(default = "default_wait_cap_s")]
    pub wait_cap_s: f64,
}

fn default_wait_cap_s() -> f64 {
    super::sessions::DEFAULT_TOOL_WAIT_CAP_S
}

impl TraceConfig {
    /// Reads the trace at `path` (in `format`, else the one its content shows) and slices it:
    /// the window (recorded seconds), then the limit, then the speedup. One-line errors.
    pub fn load(
        path: PathBuf,
        format: Option<TraceFormat>,
        speedup: f64,
        window_s: Option<(f64, f64)>,
        limit: Option<u32>,
    ) -> Result<Self, String> {
        if !(speedup.is_finite() && speedup > 0.0 && speedup <= 1e6) {
            return Err(format!(
                "--trace-speedup {speedup}: a factor above 0 (2 replays twice as fast) and at most 10^6"
            ));
        }
        if limit == Some(0) {
            return Err("--trace-limit must be at least 1 request".into());
        }
        let source = path.display().to_string();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("--trace {source}: cannot read it: {e}"))?;
        let mut trace = parse(&text, format, &source)?;
        if let Some((from, to)) = window_s {
            trace.window(from, to);
            if trace.requests.is_empty() {
                return Err(format!(
                    "--trace-window {from}:{to}: no request of {source} was recorded in it"
                ));
            }
        }
        if let Some(n) = limit {
            trace.limit(n as usize);
        }
        if u32::try_from(trace.requests.len()).is_err() {
            return Err(format!(
                "--trace {source}: more than {} requests; take a slice with --trace-limit",
                u32::MAX
            ));
        }
        trace.speed_up(speedup);
        Ok(Self {
            path,
            format: trace.format,
            speedup,
            window_s,
            limit,
            loaded: Some(Arc::new(trace)),
            wait_cap_s: default_wait_cap_s(),
        })
    }

    /// With an agent trace's waits cut to `cap_s`.
    #[must_use]
    pub fn with_wait_cap(mut self, cap_s: f64) -> Self {
        self.wait_cap_s = cap_s;
        self
    }

    /// The trace level's plan (None before the trace is read).
    pub fn level(&self, index: u32, max_concurrency: Option<u32>) -> Option<super::LevelSpec> {
        let t = self.loaded.as_ref()?;
        let (input, output) = t.mean_lengths();
        let name = self.path.file_name().map_or_else(
            || self.path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        if t.is_sessions() {
            return Some(self.sessions_level(t, index, &name, max_concurrency));
        }
        Some(super::LevelSpec {
            trace: Some(t.level(&name, self.speedup, max_concurrency)),
            ..super::LevelSpec::new(
                index,
                super::LevelKind::Trace,
                max_concurrency.unwrap_or(0),
                (input, output),
                t.requests.len() as u32,
            )
        })
    }
}

#[derive(Deserialize)]
pub(super) struct MooncakeLine {
    #[serde(default)]
    pub(super) timestamp: Option<f64>,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
    /// AIPerf's multi-turn trace: the session a line is a turn of, and the ms to wait after
    /// the session's turn before it ended.
    #[serde(default)]
    pub(super) session_id: Option<serde_json::Value>,
    #[serde(default)]
    pub(super) delay: Option<f64>,
    /// servetop's agent traces: the session that started this one as its sub-agent.
    #[serde(default)]
    pub(super) parent_session_id: Option<serde_json::Value>,
}

/// The format of `text`: JSON lines are Mooncake's, a CSV header naming `TIMESTAMP` is Azure's.
pub fn detect(text: &str) -> Option<TraceFormat> {
    let first = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    if first.starts_with('{') {
        Some(TraceFormat::Mooncake)
    } else if first
        .split(',')
        .any(|c| c.trim().eq_ignore_ascii_case("timestamp"))
    {
        Some(TraceFormat::Azure)
    } else {
        None
    }
}

/// Reads the trace in `text` (from `source`, for errors) in `format`, or the detected one.
pub fn parse(text: &str, format: Option<TraceFormat>, source: &str) -> Result<Trace, String> {
    let Some(format) = format.or_else(|| detect(text)) else {
        return Err(format!(
            "--trace {source}: neither Mooncake JSONL (one JSON object a line) nor an Azure CSV (a header with TIMESTAMP, ContextTokens, GeneratedTokens); name it with --trace-format"
        ));
    };
    let mut requests = match format {
        TraceFormat::Mooncake => mooncake(text, source)?,
        TraceFormat::Azure => azure(text, source)?,
    };
    if requests.is_empty() {
        return Err(format!("--trace {source}: no request in it"));
    }
    // Time order (stable: requests recorded at the same moment keep their order, and a
    // session's turns, all at its start, stay together in order), from 0.
    requests.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    number_sessions(&mut requests);
    let t0 = requests[0].at_ms;
    for r in &mut requests {
        r.at_ms -= t0;
    }
    Ok(Trace { format, requests })
}

pub(super) fn output_len(n: u64, source: &str, line: usize) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(0) | Err(_) => Err(format!(
            "--trace {source} line {line}: {n} output tokens; a request asks for 1 to {}",
            u32::MAX
        )),
        Ok(v) => Ok(v),
    }
}

fn mooncake(text: &str, source: &str) -> Result<Vec<TraceRequest>, String> {
    let mut out: Vec<(Option<String>, TraceRequest)> = Vec::new();
    let mut book = SessionBook::default();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        let m: MooncakeLine = serde_json::from_str(l).map_err(|e| {
            format!("--trace {source} line {line}: not a Mooncake record ({e}); each line is {{\"timestamp\": ms, \"input_length\": N, \"output_length\": N, \"hash_ids\": [...]}}")
        })?;
        let at = book.place(&m, (source, line))?;
        if m.input_length == 0 {
            return Err(format!(
                "--trace {source} line {line}: input_length 0; a prompt has at least 1 token"
            ));
        }
        out.push((
            at.key,
            TraceRequest {
                at_ms: at.at_ms,
                input_len: m.input_length,
                output_len: output_len(m.output_length, source, line)?,
                hash_ids: m.hash_ids,
                session: None,
                turn: at.turn,
                delay_ms: at.delay_ms,
                sub_agent: at.sub_agent,
                after_turn: at.after_turn,
            },
        ));
    }
    book.finish(source)?;
    Ok(grouped(out))
}

fn azure(text: &str, source: &str) -> Result<Vec<TraceRequest>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let cols: Vec<String> = header
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let col = |name: &str| {
        cols.iter().position(|c| c == name).ok_or_else(|| {
            format!(
                "--trace {source}: the header has no {name} column (an Azure trace has TIMESTAMP, ContextTokens, GeneratedTokens)"
            )
        })
    };
    let (t, input, output) = (
        col("timestamp")?,
        col("contexttokens")?,
        col("generatedtokens")?,
    );
    let mut out = Vec::new();
    let mut first_ns: Option<i128> = None;
    for (i, l) in lines {
        let line = i + 1;
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        let field = |k: usize| {
            f.get(k).copied().ok_or_else(|| {
                format!(
                    "--trace {source} line {line}: {} fields, the header has {}",
                    f.len(),
                    cols.len()
                )
            })
        };
        let at = field(t)?;
        let when: jiff::civil::DateTime = at.parse().map_err(|e| {
            format!("--trace {source} line {line}: TIMESTAMP {at:?} is not a date and time ({e})")
        })?;
        let num = |k: usize, what: &str| -> Result<u64, String> {
            let v = field(k)?;
            v.parse().map_err(|_| {
                format!("--trace {source} line {line}: {what} {v:?} is not a token count")
            })
        };
        let input_len = num(input, "ContextTokens")?;
        if input_len == 0 {
            return Err(format!(
                "--trace {source} line {line}: ContextTokens 0; a prompt has at least 1 token"
            ));
        }
        let ns = when
            .to_zoned(jiff::tz::TimeZone::UTC)
            .map_err(|e| format!("--trace {source} line {line}: {e}"))?
            .timestamp()
            .as_nanosecond();
        // Offsets from the file's first line, in integers: epoch milliseconds as f64 keep
        // only a quarter of a microsecond.
        let t0 = *first_ns.get_or_insert(ns);
        let ms = (ns - t0) as f64 / 1e6;
        out.push(TraceRequest {
            at_ms: ms,
            input_len,
            output_len: output_len(num(output, "GeneratedTokens")?, source, line)?,
            hash_ids: Vec::new(),
            session: None,
            turn: 0,
            delay_ms: 0.0,
            sub_agent: None,
            after_turn: 0,
        });
    }
    Ok(out)
}

impl Trace {
    /// Compresses time by `x` (`--trace-speedup`): a request recorded at t goes out at t / x.
    pub fn speed_up(&mut self, x: f64) {
        if x > 0.0 && x.is_finite() {
            for r in &mut self.requests {
                r.at_ms /= x;
                r.delay_ms /= x;
            }
        }
    }

    /// Keeps the first `n` requests (of an agent trace, its first `n` sessions).
    pub fn limit(&mut self, n: usize) {
        if self.is_sessions() {
            self.requests
                .retain(|r| r.session.is_some_and(|s| (s as usize) < n));
        } else {
            self.requests.truncate(n);
        }
    }

    /// Keeps the requests recorded from `from_s` (inclusive) to `to_s` (exclusive) seconds
    /// after the first, their offsets counted again from the first kept.
    pub fn window(&mut self, from_s: f64, to_s: f64) {
        let (from, to) = (from_s * 1000.0, to_s * 1000.0);
        self.requests.retain(|r| r.at_ms >= from && r.at_ms < to);
        if let Some(t0) = self.requests.first().map(|r| r.at_ms) {
            for r in &mut self.requests {
                r.at_ms -= t0;
            }
        }
        number_sessions(&mut self.requests);
    }

    /// Mean prompt and output lengths, rounded (a level's `input_len` and `output_len`).
    pub fn mean_lengths(&self) -> (u64, u32) {
        let n = self.requests.len().max(1) as f64;
        let input: f64 = self.requests.iter().map(|r| r.input_len as f64).sum();
        let output: f64 = self.requests.iter().map(|r| f64::from(r.output_len)).sum();
        (
            (input / n).round().max(1.0) as u64,
            (output / n).round().max(1.0) as u32,
        )
    }

    /// The plan's description of replaying this trace, read from `source` at `speedup`.
    pub fn level(&self, source: &str, speedup: f64, max_concurrency: Option<u32>) -> TraceLevel {
        let duration_s = self.duration_s();
        TraceLevel {
            source: source.to_string(),
            format: self.format,
            speedup,
            duration_s,
            offered_rate: (duration_s > 0.0 && self.requests.len() >= 2)
                .then(|| (self.requests.len() - 1) as f64 / duration_s),
            max_input_len: self.requests.iter().map(|r| r.input_len).max().unwrap_or(0),
            max_output_len: self
                .requests
                .iter()
                .map(|r| r.output_len)
                .max()
                .unwrap_or(0),
            expected_prefix_cache_hit_rate: self
                .requests
                .iter()
                .any(|r| !r.hash_ids.is_empty())
                .then(|| self.expected_cache_hit_rate())
                .flatten(),
            max_concurrency,
            sessions: None,
            wait_cap_s: None,
            waits_capped: 0,
            sub_agents: 0,
            sub_agent_turns: 0,
        }
    }

    /// Seconds from the first request to the last.
    pub fn duration_s(&self) -> f64 {
        self.requests.last().map_or(0.0, |r| r.at_ms / 1000.0)
    }

    /// The share of prompt tokens a prefix cache holding every block it has seen would serve:
    /// each request's leading run of blocks named by an earlier request, in whole blocks
    /// (capped at its prompt), over all prompt tokens. What a replay should see the server
    /// report when its cache keeps everything.
    pub fn expected_cache_hit_rate(&self) -> Option<f64> {
        let mut seen = std::collections::HashSet::new();
        let (mut hit, mut total) = (0u64, 0u64);
        for r in &self.requests {
            let lead = r.hash_ids.iter().take_while(|h| seen.contains(*h)).count() as u64;
            hit += (lead * BLOCK_TOKENS).min(r.input_len);
            total += r.input_len;
            seen.extend(r.hash_ids.iter().copied());
        }
        (total > 0).then(|| hit as f64 / total as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOONCAKE: &str = include_str!("../../examples/data/trace-mooncake.jsonl");
    const AZURE: &str = include_str!("../../examples/data/trace-azure.csv");

    #[test]
    fn the_samples_read_as_their_formats() {
        let m = parse(MOONCAKE, None, "m").unwrap();
        assert_eq!(m.format, TraceFormat::Mooncake);
        assert_eq!(m.requests.len(), 10);
        let at: Vec<f64> = m.requests.iter().map(|r| r.at_ms).collect();
        assert!(at[0].abs() < 1e-9 && (at[1] - 300.0).abs() < 1e-9, "{at:?}");
        assert_eq!(m.requests[1].hash_ids, [0, 1, 2, 4]);
        assert!(m.requests.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        let a = parse(AZURE, None, "a").unwrap();
        assert_eq!(a.format, TraceFormat::Azure);
        assert_eq!(a.requests.len(), 10);
        // 18:15:46.6805900 then 18:15:46.9306180: 250.028 ms apart.
        assert!(
            (a.requests[1].at_ms - 250.028).abs() < 1e-6,
            "{}",
            a.requests[1].at_ms
        );
        assert_eq!(
            (a.requests[0].input_len, a.requests[0].output_len),
            (374, 44)
        );
    }

    #[test]
    fn speedup_limit_and_the_expected_cache_hits() {
        let mut m = parse(MOONCAKE, Some(TraceFormat::Mooncake), "m").unwrap();
        let last = m.requests[9].at_ms;
        m.speed_up(2.0);
        assert!((m.requests[9].at_ms - last / 2.0).abs() < 1e-9);
        // Counted by hand over the sample: each request's leading blocks named before it, in
        // 512-token blocks, capped at its prompt (a block used whole by one request is whole in
        // every request naming it; a last, partial block is named by no other).
        let want = {
            let hits: u64 = [0, 1536, 0, 2048, 512, 3072, 0, 1024, 512, 2048]
                .iter()
                .sum();
            let total: u64 = m.requests.iter().map(|r| r.input_len).sum();
            hits as f64 / total as f64
        };
        assert_eq!(m.expected_cache_hit_rate(), Some(want));
        assert!((want - 10_752.0 / 17_432.0).abs() < 1e-12);
        let l = m.level("t.jsonl", 2.0, Some(4));
        assert_eq!((l.max_input_len, l.max_output_len), (3300, 256));
        assert_eq!(l.expected_prefix_cache_hit_rate, Some(want));
        assert!((l.duration_s - 2.0).abs() < 1e-9);
        // Nine gaps over the 2 s the sped-up trace spans.
        assert!((l.offered_rate.unwrap() - 4.5).abs() < 1e-9);
        // 17432 / 10 prompt tokens, 792 / 10 output tokens.
        assert_eq!(m.mean_lengths(), (1743, 79));
        let mut w = m.clone();
        // Offsets now halved: the requests at 0.5 s to 1.5 s, counted from 0 again.
        w.window(0.5, 1.5);
        let at: Vec<f64> = w.requests.iter().map(|r| r.at_ms).collect();
        assert_eq!(at, [0.0, 100.0, 550.0, 575.0, 950.0]);
        m.limit(3);
        assert_eq!(m.requests.len(), 3);
    }

    #[test]
    fn bad_traces_are_one_line_errors() {
        for (text, want) in [
            ("hello\n", "neither Mooncake JSONL"),
            (
                "{\"timestamp\": 0, \"input_length\": 5}\n",
                "line 1: not a Mooncake record",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 4}\n",
                "input_length 0",
            ),
            (
                "{\"timestamp\": 0, \"input_length\": 9, \"output_length\": 0}\n",
                "0 output tokens",
            ),
            ("TIMESTAMP,ContextTokens\n", "no generatedtokens column"),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,5\n",
                "line 2: TIMESTAMP \"yesterday\"",
            ),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,x,5\n",
                "ContextTokens \"x\"",
            ),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n",
                "no request in it",
            ),
        ] {
            let e = parse(text, None, "t.txt").unwrap_err();
            assert!(e.contains(want), "{e}");
            assert!(e.starts_with("--trace t.txt"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert!(TraceFormat::parse("csv").is_err());
    }
}
