//! Production traces to replay (`--trace FILE`): Mooncake's JSONL (`timestamp` in ms,
//! `input_length`, `output_length`, `hash_ids` naming 512-token prefix blocks) and Azure's LLM
//! inference trace CSV (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`), read into one list of
//! requests at their offsets from the trace's first, in time order. The format is detected from
//! the content unless given. Every error is one line naming the file, the line and the fix.

use serde::Deserialize;

/// Tokens of one Mooncake prefix block (`hash_ids` name blocks of this size).
pub const BLOCK_TOKENS: u64 = 512;

/// How a trace file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

/// A trace read from a file, in time order.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub format: TraceFormat,
    pub requests: Vec<TraceRequest>,
}

#[derive(Deserialize)]
struct MooncakeLine {
    timestamp: f64,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u64>,
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
    // Time order (stable: requests recorded at the same moment keep their order), from 0.
    requests.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    let t0 = requests[0].at_ms;
    for r in &mut requests {
        r.at_ms -= t0;
    }
    Ok(Trace { format, requests })
}

fn output_len(n: u64, source: &str, line: usize) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(0) | Err(_) => Err(format!(
            "--trace {source} line {line}: {n} output tokens; a request asks for 1 to {}",
            u32::MAX
        )),
        Ok(v) => Ok(v),
    }
}

fn mooncake(text: &str, source: &str) -> Result<Vec<TraceRequest>, String> {
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        if l.trim().is_empty() {
            continue;
        }
        let m: MooncakeLine = serde_json::from_str(l).map_err(|e| {
            format!("--trace {source} line {line}: not a Mooncake record ({e}); each line is {{\"timestamp\": ms, \"input_length\": N, \"output_length\": N, \"hash_ids\": [...]}}")
        })?;
        if !m.timestamp.is_finite() || m.timestamp < 0.0 {
            return Err(format!(
                "--trace {source} line {line}: timestamp {} is not a time in ms",
                m.timestamp
            ));
        }
        if m.input_length == 0 {
            return Err(format!(
                "--trace {source} line {line}: input_length 0; a prompt has at least 1 token"
            ));
        }
        out.push(TraceRequest {
            at_ms: m.timestamp,
            input_len: m.input_length,
            output_len: output_len(m.output_length, source, line)?,
            hash_ids: m.hash_ids,
        });
    }
    Ok(out)
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
            }
        }
    }

    /// Keeps the first `n` requests.
    pub fn limit(&mut self, n: usize) {
        self.requests.truncate(n);
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
        // 512-token blocks, capped at its prompt (request 5: two blocks, 700 tokens).
        let want = {
            let hits: u64 = [0, 1536, 0, 2048, 700, 3072, 0, 1536, 512, 2200]
                .iter()
                .sum();
            let total: u64 = m.requests.iter().map(|r| r.input_len).sum();
            hits as f64 / total as f64
        };
        assert_eq!(m.expected_cache_hit_rate(), Some(want));
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
