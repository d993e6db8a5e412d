//! What a stream's last event began with, and its shape around its text and usage: an event
//! that repeats them is read from its differences only ([`RepeatedBytes`]), the client's
//! commonest path (every engine writes each event of a stream like the one before).

use std::borrow::Cow;

use super::super::{ChunkData, Usage};
use super::choice::{Choice, Said};

/// The members before `"choices"` in a stream's last event, when they were only fields the
/// fast path skips (and a plain `object`): an event that opens with the same bytes is read from
/// `"choices"` on. Every engine repeats `id`, `object`, `created` and `model` in each event of
/// a stream, about half of its bytes.
///
/// Skipping them gives what reading them would: the scan is left to right, and where a key
/// starts in the top-level object, all it carries from before is whether `object` was seen.
#[derive(Debug, Default)]
pub struct RepeatedBytes {
    /// The last event's bytes up to the opening quote of `"choices"` (empty: none kept).
    pub(super) prefix: Vec<u8>,
    /// `object` was among them.
    pub(super) object: bool,
    /// The last event the fast path read with a choice, around that choice's text.
    shape: Option<Shape>,
}

/// An event as its text's and usage's surroundings ([`RepeatedBytes`]): most events of a stream
/// differ from the one before only in the text and, where the engine counts every event (vLLM's
/// `continuous_usage_stats`), the counts of its usage: `{…"text":"`, `",…, "usage":` and `}`
/// repeat. An event with the same bytes around a plain text and a usage object parses as the last
/// one did, with its own text and usage.
///
/// Why that is the parse: the text is a string token with no escape, quote or control character, so
/// it ends at the first quote after it, where the kept bytes resume; the usage is the kept one's
/// bytes but for its plain integer counts ([`same_counts`]), each read as [`usage`](super::usage)
/// reads it (measured: reading the whole usage object again was a fifth of the client's CPU at
/// C=10,000 against the firehose, which counts every event); the event is then the same tokens as
/// the last one but for those two values, and nothing else depends on them (the finish reason and
/// every check of the last event's parse came from the same bytes).
#[derive(Debug)]
struct Shape {
    /// The event's bytes...
    event: Vec<u8>,
    /// ...where its text lies in them, between its quotes...
    text: std::ops::Range<usize>,
    /// ...and its usage's value (from after the colon), when it came after the text.
    usage_at: Option<std::ops::Range<usize>>,
    said: Said,
    finished: bool,
    length: bool,
    /// The usage, when it is not read again (it came before the text, or there was none).
    usage: Option<Usage>,
    /// The plain counts of the usage at `usage_at`: where each lies in `event` and which it is.
    counts: Vec<(std::ops::Range<usize>, Count)>,
    /// `event` has no line end (CR or LF) in it: framed as server-sent events, it is one line.
    /// A kept event that came as two data lines (joined with LF) would otherwise match the
    /// bytes of an event whose second line is not a data line, whose data is its first line.
    one_line: bool,
}

/// Which count of a usage object a number is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Count {
    Prompt,
    Completion,
    /// Another member's (`total_tokens`), which [`usage`](super::usage) skips.
    Other,
}

/// The members of the usage object `u` (its bytes, from `base` in the event) whose values are plain
/// integers: `"key":123` followed by `,` or `}`, at the object's own level. A usage the fast path
/// kept has no escape anywhere ([`Scan::string`](super::Scan::string) refuses them), so a quote
/// always opens or closes a string.
fn counts_of(u: &[u8], base: usize) -> Vec<(std::ops::Range<usize>, Count)> {
    let (mut depth, mut in_str, mut str_start) = (0u32, false, 0);
    let mut key = 0..0;
    let mut out = Vec::new();
    let mut i = 0;
    while i < u.len() {
        let b = u[i];
        if in_str {
            if b == b'"' {
                in_str = false;
                key = str_start..i;
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_str = true;
                str_start = i + 1;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b':' if depth == 1 => {
                let from = i + 1;
                let end = from + u[from..].iter().take_while(|c| c.is_ascii_digit()).count();
                if end > from && matches!(u.get(end), Some(b',' | b'}')) {
                    let count = match &u[key.clone()] {
                        b"prompt_tokens" => Count::Prompt,
                        b"completion_tokens" => Count::Completion,
                        _ => Count::Other,
                    };
                    out.push((base + from..base + end, count));
                    i = end;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

impl RepeatedBytes {
    /// `b` (an event's bytes as they came, neither checked as UTF-8 nor trimmed) read as the
    /// last event with a choice was, if it has that event's shape.
    ///
    /// Only the text is checked as UTF-8 (measured: checking each whole event was 7-8 % of the
    /// client's CPU at C=100 against the firehose): the bytes around it are the kept event's,
    /// which was valid UTF-8, and a count is ASCII digits; pieces of valid UTF-8 cut at ASCII
    /// bytes make valid UTF-8. White space: the kept bytes open with `{` and close the event,
    /// so an event with white space around it does not match, and takes the full path (trimmed
    /// there).
    pub(in crate::client::dialect) fn same_shape<'a>(&self, b: &'a [u8]) -> Option<ChunkData<'a>> {
        self.shape_at(b)
            .and_then(|(c, end)| (end == b.len()).then_some(c))
    }

    /// An event framed as server-sent events at the start of `b` (an SSE decoder's bytes at
    /// an event's start): `data: `, an event with the kept shape ([`Self::same_shape`]), and
    /// the blank line after it (`\n\n`). Its parse and the bytes it took, or `None` (the
    /// decoder and [`Self::same_shape`] then read it as before).
    ///
    /// Why that is what the decoder would hand out: the kept event has no line end in it
    /// ([`Shape::one_line`]), the text stops at any control byte and a count is digits, so
    /// the bytes up to the `\n` are one line, a `data` field whose value (one space after the
    /// colon dropped) is the event, and the blank line dispatches it alone. Measured: finding
    /// each event's line ends and fields first was about a tenth of the client's CPU at
    /// C=100 against the firehose (`memchr2` and `SseDecoder::next_data`).
    #[inline]
    pub(in crate::client::dialect) fn framed<'a>(
        &self,
        b: &'a [u8],
    ) -> Option<(ChunkData<'a>, usize)> {
        const OPEN: &[u8] = b"data: ";
        if !self.shape.as_ref().is_some_and(|sh| sh.one_line) || !b.starts_with(OPEN) {
            return None;
        }
        let (c, end) = self.shape_at(&b[OPEN.len()..])?;
        let end = OPEN.len() + end;
        (b.get(end..end + 2) == Some(b"\n\n")).then_some((c, end + 2))
    }

    /// The kept shape's event at the start of `b`, and where it ends in `b`.
    #[inline]
    fn shape_at<'a>(&self, b: &'a [u8]) -> Option<(ChunkData<'a>, usize)> {
        let sh = self.shape.as_ref()?;
        let from = sh.text.start;
        if !b.starts_with(&sh.event[..from]) {
            return None;
        }
        let len = b
            .get(from..)?
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if b[from + len] != b'"' {
            return None;
        }
        let text = std::str::from_utf8(&b[from..from + len]).ok()?;
        let (mut at, mut rest) = (from + len, sh.text.end);
        let mut usage_now = sh.usage;
        if let Some(u) = &sh.usage_at {
            let mid = &sh.event[sh.text.end..u.start];
            if !has_at(b, at, mid) {
                return None;
            }
            let end = same_counts(sh, u, b, at + mid.len(), &mut usage_now)?;
            (at, rest) = (end, u.end);
        }
        let close = &sh.event[rest..];
        if !has_at(b, at, close) {
            return None;
        }
        let (kind, content) = sh.said.read(text);
        let c = ChunkData {
            text: Cow::Borrowed(text),
            content: Cow::Borrowed(content),
            kind,
            has_choice: true,
            finished: sh.finished,
            length_stop: sh.length,
            usage: usage_now,
            cumulative_completion: usage_now.and_then(|u| u.completion_tokens),
            ..ChunkData::default()
        };
        Some((c, at + close.len()))
    }

    /// Keeps `data`'s shape around `c`'s text (a slice of it) and the usage value at
    /// `usage_at`.
    pub(super) fn keep_shape(
        &mut self,
        data: &str,
        c: &Choice<'_>,
        usage: Option<Usage>,
        usage_at: Option<std::ops::Range<usize>>,
    ) {
        let start = c.text.as_ptr() as usize - data.as_ptr() as usize;
        let text = start..start + c.text.len();
        let sh = self.shape.get_or_insert_with(|| Shape {
            event: Vec::with_capacity(data.len()),
            text: 0..0,
            usage_at: None,
            said: c.said,
            finished: false,
            length: false,
            usage: None,
            counts: Vec::new(),
            one_line: false,
        });
        sh.event.clear();
        sh.event.extend_from_slice(data.as_bytes());
        sh.one_line = memchr::memchr2(b'\n', b'\r', &sh.event).is_none();
        sh.usage_at = usage_at.filter(|u| u.start >= text.end);
        sh.text = text;
        sh.said = c.said;
        sh.finished = c.finished;
        sh.length = c.length;
        sh.usage = usage;
        sh.counts = match &sh.usage_at {
            Some(u) => counts_of(&sh.event[u.clone()], u.start),
            None => Vec::new(),
        };
    }
}

/// Reads a usage object from `b[j..]` against the kept one at `u` in `sh.event`: the same bytes but
/// for the plain counts, each any integer a u64 holds (no leading zero), which
/// [`usage`](super::usage) would read the same way (and skip, for another member). Where its value
/// ends in `b`, with `usage_now` its counts; `None` where it differs otherwise (the full scan then
/// decides).
fn same_counts(
    sh: &Shape,
    u: &std::ops::Range<usize>,
    b: &[u8],
    mut j: usize,
    usage_now: &mut Option<Usage>,
) -> Option<usize> {
    let mut filled = Usage::default();
    let mut k = u.start;
    for (r, count) in &sh.counts {
        if !has_at(b, j, &sh.event[k..r.start]) {
            return None;
        }
        j += r.start - k;
        // The count read here, in one pass, not through `str::parse` (measured: that was a
        // third of this function's time); a leading zero or a count past u64 is left to the
        // full scan, as `usage` leaves them. Up to 19 digits cannot pass u64.
        let (mut v, mut n) = (0u64, 0);
        while let Some(d) = b.get(j + n).map(|d| d.wrapping_sub(b'0'))
            && d <= 9
        {
            if n >= 19 {
                v = v.checked_mul(10)?.checked_add(u64::from(d))?;
            } else {
                v = v * 10 + u64::from(d);
            }
            n += 1;
        }
        if n == 0 || (n > 1 && b[j] == b'0') {
            return None;
        }
        j += n;
        match count {
            Count::Prompt => filled.prompt_tokens = Some(v),
            Count::Completion => filled.completion_tokens = Some(v),
            Count::Other => {}
        }
        k = r.end;
    }
    if !has_at(b, j, &sh.event[k..u.end]) {
        return None;
    }
    *usage_now = sh.usage.map(|_| filled);
    Some(j + u.end - k)
}

/// `b` holds `lit` at `at`. The literals between a kept event's counts are a dozen bytes or two:
/// compared here eight at a time, not through a call to `memcmp` each (measured: those calls
/// were about a third of reading the firehose's usage).
#[inline]
fn has_at(b: &[u8], at: usize, lit: &[u8]) -> bool {
    let Some(b) = b.get(at..at + lit.len()) else {
        return false;
    };
    if lit.len() > 32 {
        return b == lit;
    }
    let n = lit.len();
    if n < 8 {
        return b.iter().zip(lit).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or([0; 8]));
    let mut i = 0;
    while i + 8 < n {
        if word(b, i) != word(lit, i) {
            return false;
        }
        i += 8;
    }
    // The last eight bytes, overlapping the words before where the length is not a multiple.
    word(b, n - 8) == word(lit, n - 8)
}
