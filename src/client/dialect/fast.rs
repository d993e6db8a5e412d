//! The fast path for the most common payloads: an OpenAI completions event (`choices[0].text`,
//! optional `finish_reason` and `usage`) or chat event (`choices[0].delta` with one text field),
//! scanned in one pass without building serde's structs. At thousands of events a second the
//! general parse was a third of the client's CPU (completions), and 13 % of it in a 10,000-user
//! agent case on the chat endpoint.
//!
//! It only answers when it is sure to give what [`super::parse`] gives: any string with an escape
//! or a control character, any field it does not handle exactly as serde would (tool calls, a
//! delta with more than one text, SGLang fields, error objects, usage details, more than one
//! choice), any odd number or duplicate field makes it step aside (`None`) and the general parse
//! decides. Property tests hold it to the general parse on random events of both endpoints.

use std::borrow::Cow;

mod choice;

use super::{ChunkData, Dialect, Usage};
use choice::{Choice, Said, choice};

/// Whether the fast path reads `dialect`, and if so whether as chat.
pub(super) fn openai(dialect: Dialect) -> Option<bool> {
    match dialect {
        Dialect::Completions => Some(false),
        Dialect::Chat => Some(true),
        Dialect::SglangNative | Dialect::Messages => None,
    }
}

/// The fast path steps aside: the general parse decides.
struct Aside;

/// Nesting deeper than this is left to serde (its own limit is 128).
const MAX_DEPTH: usize = 64;

struct Scan<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// A string with no escape and no control character, borrowed.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let rest = &self.s[start..];
        let end = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[end] != b'"' {
            return None;
        }
        self.i = start + end + 1;
        // Quotes are ASCII, so both ends are char boundaries of the original text.
        self.text.get(start..start + end)
    }

    /// A JSON number in its strict grammar; its text.
    fn number(&mut self) -> Option<&'a str> {
        self.ws();
        let start = self.i;
        let digits = |sc: &mut Self| {
            let from = sc.i;
            while sc.s.get(sc.i).is_some_and(u8::is_ascii_digit) {
                sc.i += 1;
            }
            sc.i > from
        };
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return None,
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if !digits(self) {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.s.get(self.i) {
            self.i += 1;
            if let Some(b'+' | b'-') = self.s.get(self.i) {
                self.i += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        self.text.get(start..self.i)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.ws();
        self.s[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// `null`: true; anything else: false, nothing consumed.
    fn null(&mut self) -> bool {
        self.literal(b"null").is_some()
    }

    /// Skips any value, checking it as serde would.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => {
                self.i += 1;
                if self.eat(b'}').is_some() {
                    return Some(());
                }
                loop {
                    self.string()?;
                    self.eat(b':')?;
                    self.skip(depth + 1)?;
                    if self.eat(b',').is_none() {
                        return self.eat(b'}');
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.skip(depth + 1)?;
                    if self.eat(b',').is_none() {
                        return self.eat(b']');
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }

    /// An unsigned integer (or null) as serde reads it into `Option<u64>`.
    fn opt_u64(&mut self) -> Result<Option<u64>, Aside> {
        if self.null() {
            return Ok(None);
        }
        let n = self.number().ok_or(Aside)?;
        n.parse::<u64>().map(Some).map_err(|_| Aside)
    }

    /// The members of an object: `f` handles each key (its value still to be read).
    fn object(&mut self, mut f: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        self.members(|sc, _, key| f(sc, key))
    }

    /// The members of an object from the next key on: `f` is given where the key starts (its
    /// opening quote) and the key.
    fn members(
        &mut self,
        mut f: impl FnMut(&mut Self, usize, &'a str) -> Option<()>,
    ) -> Option<()> {
        loop {
            self.ws();
            let at = self.i;
            let key = self.string()?;
            self.eat(b':')?;
            f(self, at, key)?;
            if self.eat(b',').is_none() {
                return self.eat(b'}');
            }
        }
    }
}

/// Fails on a second sighting of a field (serde refuses duplicate fields).
fn once(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}

/// `usage`: an object with plain counts (details objects are left to serde), or null.
fn usage(sc: &mut Scan<'_>) -> Result<Option<Usage>, Aside> {
    if sc.null() {
        return Ok(None);
    }
    let mut u = Usage::default();
    let (mut p, mut c) = (false, false);
    sc.object(|sc, key| match key {
        "prompt_tokens" => {
            once(&mut p)?;
            u.prompt_tokens = sc.opt_u64().ok()?;
            Some(())
        }
        "completion_tokens" => {
            once(&mut c)?;
            u.completion_tokens = sc.opt_u64().ok()?;
            Some(())
        }
        "prompt_tokens_details" | "completion_tokens_details" => None,
        _ => sc.skip(1),
    })
    .ok_or(Aside)?;
    Ok(Some(u))
}

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
    prefix: Vec<u8>,
    /// `object` was among them.
    object: bool,
    /// The last event the fast path read with a choice, around that choice's text.
    shape: Option<Shape>,
}

/// An event as its text's and usage's surroundings ([`RepeatedBytes`]): most events of a stream
/// differ from the one before only in the text and, where the engine counts every event
/// (vLLM's `continuous_usage_stats`), the counts of its usage: `{…"text":"`, `",…,
/// "usage":` and `}` repeat. An event with the same bytes around a plain text and a usage
/// object parses as the last one did, with its own text and usage.
///
/// Why that is the parse: the text is a string token with no escape, quote or control
/// character, so it ends at the first quote after it, where the kept bytes resume; the usage
/// is the kept one's bytes but for its plain integer counts ([`same_counts`]), each read as
/// [`usage`] reads it (measured: reading the whole usage object again was a fifth of the
/// client's CPU at C=10,000 against the firehose, which counts every event); the event is then the same tokens as the last one but for
/// those two values, and nothing else depends on them (the finish reason and every check of
/// the last event's parse came from the same bytes).
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
    /// Another member's (`total_tokens`), which [`usage`] skips.
    Other,
}

/// The members of the usage object `u` (its bytes, from `base` in the event) whose values are
/// plain integers: `"key":123` followed by `,` or `}`, at the object's own level. A usage the
/// fast path kept has no escape anywhere ([`Scan::string`] refuses them), so a quote always
/// opens or closes a string.
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
    pub(super) fn same_shape<'a>(&self, b: &'a [u8]) -> Option<ChunkData<'a>> {
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
    pub(super) fn framed<'a>(&self, b: &'a [u8]) -> Option<(ChunkData<'a>, usize)> {
        const OPEN: &[u8] = b"data: ";
        if !self.shape.as_ref().is_some_and(|sh| sh.one_line) || !b.starts_with(OPEN) {
            return None;
        }
        let (c, end) = self.shape_at(&b[OPEN.len()..])?;
        let end = OPEN.len() + end;
        (b.get(end..end + 2) == Some(b"\n\n")).then_some((c, end + 2))
    }

    /// The kept shape's event at the start of `b`, and where it ends in `b`.
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
    fn keep_shape(
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

/// Reads a usage object from `b[j..]` against the kept one at `u` in `sh.event`: the same bytes
/// but for the plain counts, each any integer a u64 holds (no leading zero), which [`usage`]
/// would read the same way (and skip, for another member). Where its value ends in `b`, with
/// `usage_now` its counts; `None` where it differs otherwise (the full scan then decides).
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

/// `{}`: what the general parse makes of it, if nothing follows.
fn empty_object<'a>(sc: &mut Scan<'a>) -> Option<ChunkData<'a>> {
    sc.ws();
    (sc.i == sc.s.len()).then(ChunkData::default)
}

/// An OpenAI completions (or `chat`) event, or `None` to leave it to the general parse;
/// `repeat` holds what the stream's earlier events began with ([`RepeatedBytes`]).
pub(super) fn completions<'a>(
    data: &'a str,
    chat: bool,
    repeat: &mut RepeatedBytes,
) -> Option<ChunkData<'a>> {
    if let Some(out) = repeat.same_shape(data.as_bytes()) {
        return Some(out);
    }
    let mut sc = Scan {
        s: data.as_bytes(),
        text: data,
        i: 0,
    };
    let mut first = None;
    let mut use_ = None;
    let mut usage_at = None;
    let (mut ch, mut us, mut ob, mut er) = (false, false, false, false);
    let resumed = !repeat.prefix.is_empty() && sc.s.starts_with(&repeat.prefix);
    // Where `"choices"` starts when only plain members came before it.
    let (mut plain, mut mark) = (!resumed, None);
    if resumed {
        sc.i = repeat.prefix.len();
        ob = repeat.object;
    } else {
        sc.eat(b'{')?;
        if sc.eat(b'}').is_some() {
            return empty_object(&mut sc);
        }
    }
    let read = sc.members(|sc, at, key| match key {
        "choices" => {
            if std::mem::take(&mut plain) {
                mark = Some((at, ob));
            }
            once(&mut ch)?;
            sc.eat(b'[')?;
            if sc.eat(b']').is_none() {
                first = Some(choice(sc, chat)?);
                sc.eat(b']')?;
            }
            Some(())
        }
        "usage" => {
            plain = false;
            once(&mut us)?;
            let at = sc.i;
            use_ = usage(sc).ok()?;
            usage_at = Some(at..sc.i);
            Some(())
        }
        "object" => {
            once(&mut ob)?;
            if sc.null() {
                return Some(());
            }
            (sc.string()? != "error").then_some(())
        }
        "error" => {
            plain = false;
            once(&mut er)?;
            sc.null().then_some(())
        }
        "message" | "text" | "meta_info" => None,
        _ => sc.skip(1),
    });
    // What came before `"choices"` was read whatever follows it.
    if let Some((at, object)) = mark {
        repeat.prefix.clear();
        repeat.prefix.extend_from_slice(&sc.s[..at]);
        repeat.object = object;
    }
    read?;
    sc.ws();
    if sc.i != sc.s.len() {
        return None;
    }
    let mut out = ChunkData {
        usage: use_,
        ..ChunkData::default()
    };
    if let Some(c) = first {
        if c.said.slot {
            repeat.keep_shape(data, &c, use_, usage_at);
        }
        let (kind, content) = c.said.read(c.text);
        out.has_choice = true;
        out.kind = kind;
        out.finished = c.finished;
        out.length_stop = c.length;
        out.text = Cow::Borrowed(c.text);
        out.content = Cow::Borrowed(content);
        out.cumulative_completion = use_.and_then(|u| u.completion_tokens);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::super::{DeltaKind, Dialect, parse};
    use super::*;
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    /// The general parse, without the fast path.
    fn general(data: &str) -> Result<ChunkData<'_>, String> {
        super::super::parse_general(Dialect::Completions, data)
    }

    #[test]
    fn the_engines_usual_events_take_the_fast_path() {
        let events = [
            // The firehose, vLLM (with a stop_reason and usage null), vLLM's last chunks.
            r#"{"id":"cmpl-1","object":"text_completion","created":0,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"cmpl-9","object":"text_completion","created":1733,"model":"x/y","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
            r#"{"id":"cmpl-9","object":"text_completion","created":1733,"model":"x/y","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":32,"total_tokens":288,"completion_tokens":256}}"#,
            r#"{"id":"cmpl-9","object":"text_completion","created":1733,"model":"x/y","choices":[],"usage":{"prompt_tokens":32,"total_tokens":288,"completion_tokens":256}}"#,
        ];
        for e in events {
            let fast = completions(e, false, &mut RepeatedBytes::default())
                .unwrap_or_else(|| panic!("not taken: {e}"));
            assert_eq!(Ok(fast), general(e), "{e}");
        }
        let last = completions(events[2], false, &mut RepeatedBytes::default()).unwrap();
        assert!(last.finished && last.length_stop && last.has_choice);
        assert_eq!(last.cumulative_completion, Some(256));
        // What it leaves to the general parse.
        for e in [
            r#"{"choices":[{"text":"a\"b"}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}]}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"object":"error","message":"too long"}"#,
            r#"{"choices":[{"text":"a"},{"text":"b"}]}"#,
            r#"{"choices":[{"text":"a"}],"usage":{"prompt_tokens_details":{"cached_tokens":3}}}"#,
            r#"{"choices":[{"text":"a"}],"choices":[]}"#,
            r#"{"choices":[{"text":"a"}]} x"#,
        ] {
            assert_eq!(
                completions(e, false, &mut RepeatedBytes::default()),
                None,
                "{e}"
            );
        }
        assert_eq!(
            parse(Dialect::Completions, r#"{"error":{"message":"boom"}}"#)
                .unwrap()
                .error
                .as_deref(),
            Some("boom")
        );
    }

    /// A JSON value of the kinds extra fields carry, sometimes malformed.
    fn junk() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            Just("nul".to_string()),
            (0u64..100_000).prop_map(|n| n.to_string()),
            Just("-1.5e3".to_string()),
            Just("01".to_string()),
            Just("1.".to_string()),
            Just("18446744073709551616".to_string()),
            "[a-z \\\\\"]{0,6}".prop_map(|s| format!("\"{s}\"")),
        ];
        leaf.prop_recursive(3, 12, 3, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec(("[a-z_]{1,6}", inner), 0..3).prop_map(|v| {
                    let m: Vec<String> = v.iter().map(|(k, x)| format!("\"{k}\":{x}")).collect();
                    format!("{{{}}}", m.join(","))
                }),
            ]
        })
    }

    fn member() -> impl Strategy<Value = String> {
        let text = "[a-z \\\\\"é]{0,5}".prop_map(|s| format!("\"{s}\""));
        let reason = prop_oneof![
            Just("null".to_string()),
            Just("\"length\"".to_string()),
            Just("\"stop\"".to_string()),
            Just("\"\"".to_string()),
            Just("{\"type\":\"length\"}".to_string()),
        ];
        let choice_member = prop_oneof![
            text.clone().prop_map(|t| format!("\"text\":{t}")),
            reason.prop_map(|r| format!("\"finish_reason\":{r}")),
            junk().prop_map(|j| format!("\"logprobs\":{j}")),
            Just("\"index\":0".to_string()),
            Just("\"delta\":{\"content\":\"x\"}".to_string()),
        ];
        let choice = proptest::collection::vec(choice_member, 0..5)
            .prop_map(|m| format!("{{{}}}", m.join(" , ")));
        let count = prop_oneof![
            Just("null".to_string()),
            (0u64..5000).prop_map(|n| n.to_string()),
            Just("2.0".to_string()),
        ];
        let usage_member = prop_oneof![
            count.clone().prop_map(|n| format!("\"prompt_tokens\":{n}")),
            count
                .clone()
                .prop_map(|n| format!("\"completion_tokens\":{n}")),
            count.prop_map(|n| format!("\"total_tokens\":{n}")),
            Just("\"prompt_tokens_details\":null".to_string()),
        ];
        let usage = prop_oneof![
            Just("null".to_string()),
            proptest::collection::vec(usage_member, 0..4)
                .prop_map(|m| format!("{{{}}}", m.join(","))),
        ];
        prop_oneof![
            3 => proptest::collection::vec(choice, 0..3)
                .prop_map(|c| format!("\"choices\":[{}]", c.join(","))),
            2 => usage.prop_map(|u| format!("\"usage\":{u}")),
            1 => text.prop_map(|t| format!("\"object\":{t}")),
            1 => Just("\"object\":\"error\"".to_string()),
            1 => junk().prop_map(|j| format!("\"error\":{j}")),
            2 => junk().prop_map(|j| format!("\"model\":{j}")),
            1 => Just("\"id\":\"cmpl-3\"".to_string()),
        ]
    }

    /// Wherever the fast path answers, it answers what the general parse does; and on random
    /// events it does answer often (it is not a path that always steps aside).
    #[test]
    fn the_fast_path_agrees_with_the_general_parse() {
        let event = (
            proptest::collection::vec(member(), 0..6),
            prop_oneof![Just(""), Just(" "), Just("\n")],
            prop_oneof![Just(""), Just(" "), Just("x")],
        )
            .prop_map(|(members, pad, tail)| {
                format!("{pad}{{{}}}{tail}", members.join(&format!(",{pad}")))
            });
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut taken, mut valid) = (0, 0);
        for _ in 0..4000 {
            let data = event.new_tree(&mut runner).unwrap().current();
            let want = general(&data);
            valid += usize::from(want.is_ok());
            if let Some(fast) = completions(&data, false, &mut RepeatedBytes::default()) {
                taken += 1;
                assert_eq!(Ok(fast), want, "{data}");
            }
        }
        assert!(
            taken * 4 > valid,
            "fast path taken {taken} times of {valid} valid events"
        );
    }

    /// An event read after another that opened with the same members (skipped, [`RepeatedBytes`])
    /// gives what the general parse gives, whatever came before and after `"choices"`; and the
    /// skip is taken often.
    #[test]
    fn an_event_that_repeats_the_last_ones_opening_parses_the_same() {
        // Mostly what engines open with, sometimes any member (a duplicate, usage, an error).
        let opening = prop_oneof![
            2 => Just("\"id\":\"cmpl-3\"".to_string()),
            2 => junk().prop_map(|j| format!("\"model\":{j}")),
            1 => Just("\"object\":\"text_completion\"".to_string()),
            1 => Just(" \"created\" : 17".to_string()),
            1 => member(),
        ];
        let members = || proptest::collection::vec(member(), 0..3);
        let pair = (
            proptest::collection::vec(opening, 0..5),
            members(),
            members(),
            member(),
            member(),
        )
            .prop_map(|(head, a, b, first, other)| {
                // Two events of a stream: the same members before their choices, then each
                // its own; or (when the member drawn is not choices) two that differ.
                let join = |m: &[String]| m.join(",");
                let choices = if first.starts_with("\"choices\"") {
                    first
                } else {
                    "\"choices\":[{\"text\":\"x\"}]".to_string()
                };
                let e1 = format!(
                    "{{{}}}",
                    join(&[head.clone(), vec![choices.clone()], a].concat())
                );
                let e2 = format!("{{{}}}", join(&[head, vec![choices, other], b].concat()));
                (e1, e2)
            });
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut resumed = 0;
        for _ in 0..4000 {
            let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
            let mut repeat = RepeatedBytes::default();
            let _ = completions(&e1, false, &mut repeat);
            let kept = !repeat.prefix.is_empty() && e2.as_bytes().starts_with(&repeat.prefix);
            if let Some(fast) = completions(&e2, false, &mut repeat) {
                resumed += usize::from(kept);
                assert_eq!(Ok(fast), general(&e2), "{e1} then {e2}");
            }
        }
        assert!(resumed > 300, "resumed {resumed} times of 4000");
    }

    /// An event that differs from one read before only in its text (any text: quotes,
    /// escapes, non-ASCII) and its usage gives what the general parse gives, whatever surrounds
    /// them; and the kept shape is used often.
    #[test]
    fn an_event_that_differs_only_in_its_text_and_usage_parses_the_same() {
        // Mostly plain texts and the members engines send, sometimes any.
        let text = || prop_oneof![3 => "[a-z é]{0,5}", 1 => "[a-z \\\\\"é]{0,5}"];
        let members = || {
            proptest::collection::vec(
                prop_oneof![
                    2 => Just("\"id\":\"cmpl-3\"".to_string()),
                    2 => Just("\"object\":\"text_completion\"".to_string()),
                    1 => Just("\"usage\":null".to_string()),
                    1 => member(),
                ],
                0..3,
            )
        };
        // A usage as vLLM counts every event, sometimes odd (null, a float, details).
        let usage = || {
            prop_oneof![
                4 => (0u64..5000, 0u64..5000).prop_map(|(p, c)| format!(
                    "{{\"prompt_tokens\":{p},\"completion_tokens\":{c},\"total_tokens\":{}}}",
                    p + c
                )),
                // Keys that differ from the last event's in their last byte only.
                2 => (
                    0u64..5000,
                    proptest::sample::select(vec!["completion_tokens", "completion_tokenX"]),
                    proptest::sample::select(vec!["total_tokens", "total_tokenX"]),
                ).prop_map(|(c, ck, tk)| format!(
                    "{{\"prompt_tokens\":3,\"{ck}\":{c},\"{tk}\":{}}}",
                    c + 3
                )),
                1 => Just("null".to_string()),
                1 => Just("{\"completion_tokens\":2.0}".to_string()),
                1 => Just("{\"prompt_tokens_details\":null}".to_string()),
                // Counts the shape must not take as counts: a leading zero, past u64, nested,
                // in a string, negative, null.
                2 => (0u64..30, prop_oneof![
                    Just("0{}"), Just("18446744073709551616{}"), Just("-{}"), Just("{}0"),
                ]).prop_map(|(n, f)| format!(
                    "{{\"prompt_tokens\":3,\"completion_tokens\":{}}}",
                    f.replace("{}", &n.to_string())
                )),
                1 => (0u64..30).prop_map(|n| format!(
                    "{{\"x\":{{\"completion_tokens\":{n}}},\"note\":\"a:{n},\",\"prompt_tokens\":null}}"
                )),
            ]
        };
        let choice_members = || {
            proptest::collection::vec(
                prop_oneof![
                    2 => Just("\"index\":0".to_string()),
                    2 => Just("\"logprobs\":null".to_string()),
                    2 => Just("\"finish_reason\":null".to_string()),
                    1 => Just("\"finish_reason\":\"length\"".to_string()),
                    1 => member(),
                ],
                0..3,
            )
        };
        let pair = (
            (members(), choice_members(), choice_members(), members()),
            (text(), text()),
            (usage(), usage(), any::<bool>()),
        )
            .prop_map(
                |((head, before, after, tail), (t1, t2), (u1, u2, counted))| {
                    // Each event its own text and, where the engine counts every event, usage.
                    let event = |t: &str, u: &str| {
                        let choice = [
                            before.clone(),
                            vec![format!("\"text\":\"{t}\"")],
                            after.clone(),
                        ]
                        .concat()
                        .join(",");
                        let usage = if counted {
                            vec![format!("\"usage\" : {u}")]
                        } else {
                            vec![]
                        };
                        let all = [
                            head.clone(),
                            vec![format!("\"choices\":[{{{choice}}}]")],
                            usage,
                            tail.clone(),
                        ];
                        format!("{{{}}}", all.concat().join(","))
                    };
                    (event(&t1, &u1), event(&t2, &u2))
                },
            );
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut shaped = 0;
        for _ in 0..4000 {
            let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
            let mut repeat = RepeatedBytes::default();
            let _ = completions(&e1, false, &mut repeat);
            let kept = repeat.same_shape(e2.as_bytes()).is_some();
            if let Some(fast) = completions(&e2, false, &mut repeat) {
                shaped += usize::from(kept);
                assert_eq!(Ok(fast), general(&e2), "{e1} then {e2}");
            } else {
                assert!(!kept, "{e1} then {e2}");
            }
        }
        assert!(shaped > 500, "the shape was used {shaped} times of 4000");
    }

    /// The client reads an event from its bytes as they came ([`super::super::parse_raw_in_stream`]):
    /// wherever the last event's shape is taken, what it gives is what checking the whole event
    /// as UTF-8, trimming it and parsing it gives, with white space (ASCII or not) around it and
    /// bytes that are not UTF-8 in its text; and the shape is taken often.
    #[test]
    fn an_event_read_from_its_bytes_parses_as_its_checked_text() {
        for (dialect, head, close) in [
            (
                Dialect::Completions,
                r#"{"id":"cmpl-1","object":"text_completion","created":0,"model":"m","choices":[{"index":0,"text":""#,
                r#"","finish_reason":null}]"#,
            ),
            (
                Dialect::Chat,
                r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":""#,
                r#""},"finish_reason":null}]"#,
            ),
        ] {
            let shaped = events_read_from_their_bytes(dialect, head, close);
            assert!(
                shaped > 300,
                "{dialect:?}: the shape was taken {shaped} times of 4000"
            );
        }
    }

    /// 4,000 pairs of `dialect` events (`head`, a text, `close`, a usage) read from their
    /// bytes and from their checked text; how many took the kept shape.
    fn events_read_from_their_bytes(
        dialect: Dialect,
        head: &'static str,
        close: &'static str,
    ) -> usize {
        use super::super::{Raw, parse_in_stream, parse_raw_in_stream};
        // Both events of a pair count usage, or neither (an engine does one or the other).
        let event = move |counted: bool| {
            (
            prop_oneof![3 => "[a-z é]{0,5}", 1 => "[a-z \\\\\"é]{0,5}"],
            (0u64..100_000).prop_map(move |n| counted.then_some(n)),
            prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\n"), 1 => Just("\u{a0}"), 1 => Just("\u{2003}")],
            prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\r"), 1 => Just("\u{a0}")],
            prop_oneof![6 => Just(None), 1 => Just(Some(0xffu8)), 1 => Just(Some(0xc3u8))],
        )
            .prop_map(move |(text, usage, pad, tail, bad)| {
                let usage = usage.map_or(String::new(), |n| {
                    format!(r#","usage":{{"prompt_tokens":7,"total_tokens":{},"completion_tokens":{n}}}"#, n + 7)
                });
                let mut b = pad.as_bytes().to_vec();
                b.extend_from_slice(head.as_bytes());
                b.extend_from_slice(text.as_bytes());
                if let Some(x) = bad {
                    b.push(x);
                }
                b.extend_from_slice(format!("{close}{usage}}}{tail}").as_bytes());
                b
            })
        };
        let pair = any::<bool>().prop_flat_map(move |counted| (event(counted), event(counted)));
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut shaped = 0;
        let by_text = |e: &'_ [u8], r: &mut RepeatedBytes| -> Result<String, String> {
            match std::str::from_utf8(e) {
                Err(_) => Err("the stream is not valid UTF-8".to_string()),
                Ok(d) => parse_in_stream(dialect, d.trim(), r)
                    .map(Raw::Chunk)
                    .map(|c| format!("{c:?}")),
            }
        };
        for _ in 0..4000 {
            let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
            let (mut raw, mut checked) = (RepeatedBytes::default(), RepeatedBytes::default());
            let first = parse_raw_in_stream(dialect, &e1, &mut raw).map(|c| format!("{c:?}"));
            assert_eq!(first, by_text(&e1, &mut checked), "{e1:?}");
            shaped += usize::from(raw.same_shape(&e2).is_some());
            let want = by_text(&e2, &mut checked);
            assert_eq!(
                parse_raw_in_stream(dialect, &e2, &mut raw).map(|c| format!("{c:?}")),
                want,
                "{e1:?} then {e2:?}"
            );
        }
        shaped
    }

    /// The general parse of a chat event, without the fast path.
    fn general_chat(data: &str) -> Result<ChunkData<'_>, String> {
        super::super::parse_general(Dialect::Chat, data)
    }

    #[test]
    fn the_engines_usual_chat_events_take_the_fast_path() {
        let events = [
            // The firehose; vLLM's opening role delta, a token, a reasoning token (both field
            // names), its last with usage; SGLang's nulls; llama.cpp's order of members.
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"content":" a"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":32,"total_tokens":33,"completion_tokens":1}}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"reasoning_content":" hm"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"reasoning":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":32,"total_tokens":288,"completion_tokens":256}}"#,
            r#"{"id":"5","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":" the","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" x"}}],"created":1,"id":"chatcmpl-a","model":"m","system_fingerprint":"b1","object":"chat.completion.chunk"}"#,
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ];
        for e in events {
            let fast = completions(e, true, &mut RepeatedBytes::default())
                .unwrap_or_else(|| panic!("not taken: {e}"));
            assert_eq!(Ok(fast), general_chat(e), "{e}");
        }
        let thought = completions(events[3], true, &mut RepeatedBytes::default()).unwrap();
        assert_eq!(
            (thought.kind, &*thought.text, &*thought.content),
            (DeltaKind::Reasoning, " hm", "")
        );
        let done = completions(events[8], true, &mut RepeatedBytes::default()).unwrap();
        assert_eq!((done.kind, done.finished), (DeltaKind::Silent, true));
        // What it leaves to the general parse: a tool call, two texts, an escape, a delta that
        // is not an object, a completions text, a duplicate field.
        for e in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}"#,
            r#"{"choices":[{"delta":{"reasoning_content":"a","content":"b"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a\nb"}}]}"#,
            r#"{"choices":[{"delta":null}]}"#,
            r#"{"choices":[{"text":"a"}]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
        ] {
            assert_eq!(
                completions(e, true, &mut RepeatedBytes::default()),
                None,
                "{e}"
            );
        }
    }

    /// A chat delta's members as engines send them, sometimes odd: each text field null,
    /// empty, plain or escaped; tool calls none, empty, one or junk; a role; other members.
    fn delta_member() -> impl Strategy<Value = String> {
        let text = prop_oneof![
            1 => Just("null".to_string()),
            1 => Just("\"\"".to_string()),
            3 => "[a-z é]{1,5}".prop_map(|s| format!("\"{s}\"")),
            1 => "[a-z \\\\\"]{0,4}".prop_map(|s| format!("\"{s}\"")),
        ];
        prop_oneof![
            3 => text.clone().prop_map(|t| format!("\"content\":{t}")),
            2 => text.clone().prop_map(|t| format!("\"reasoning_content\":{t}")),
            2 => text.prop_map(|t| format!("\"reasoning\":{t}")),
            1 => prop_oneof![
                Just("null"),
                Just("[]"),
                Just("[{\"index\":0,\"function\":{\"arguments\":\"x\"}}]"),
                Just("{}"),
            ]
            .prop_map(|t| format!("\"tool_calls\":{t}")),
            1 => prop_oneof![Just("\"assistant\""), Just("null")]
                .prop_map(|r| format!("\"role\":{r}")),
            1 => junk().prop_map(|j| format!("\"refusal\":{j}")),
        ]
    }

    /// A chat event's top-level member: mostly one choice with a delta, sometimes anything.
    fn chat_member() -> impl Strategy<Value = String> {
        let choice_member = prop_oneof![
            4 => proptest::collection::vec(delta_member(), 0..4)
                .prop_map(|m| format!("\"delta\":{{{}}}", m.join(","))),
            1 => Just("\"delta\":null".to_string()),
            1 => Just("\"text\":\"x\"".to_string()),
            2 => prop_oneof![Just("null"), Just("\"length\""), Just("\"stop\""), Just("\"\"")]
                .prop_map(|r| format!("\"finish_reason\":{r}")),
            1 => junk().prop_map(|j| format!("\"logprobs\":{j}")),
            1 => Just("\"index\":0".to_string()),
        ];
        let choice = proptest::collection::vec(choice_member, 0..4)
            .prop_map(|m| format!("{{{}}}", m.join(",")));
        prop_oneof![
            4 => proptest::collection::vec(choice, 0..3)
                .prop_map(|c| format!("\"choices\":[{}]", c.join(","))),
            1 => member(),
            1 => Just("\"object\":\"chat.completion.chunk\"".to_string()),
            1 => Just("\"id\":\"chatcmpl-3\"".to_string()),
        ]
    }

    /// Wherever the fast path answers a chat event, it answers what the general parse does
    /// (text, answer text, kind, tool-call indices, finish, usage); and it answers often.
    #[test]
    fn the_chat_fast_path_agrees_with_the_general_parse() {
        let event = proptest::collection::vec(chat_member(), 0..5)
            .prop_map(|members| format!("{{{}}}", members.join(",")));
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut taken, mut valid) = (0, 0);
        let mut kinds = std::collections::HashSet::new();
        for _ in 0..4000 {
            let data = event.new_tree(&mut runner).unwrap().current();
            let want = general_chat(&data);
            valid += usize::from(want.is_ok());
            if let Some(fast) = completions(&data, true, &mut RepeatedBytes::default()) {
                taken += 1;
                kinds.insert(format!("{:?}", fast.kind));
                assert_eq!(Ok(fast), want, "{data}");
            }
        }
        assert!(
            taken * 4 > valid,
            "fast path taken {taken} times of {valid} valid events"
        );
        assert_eq!(kinds.len(), 3, "kinds answered: {kinds:?}");
    }

    /// A chat event that differs from one read before only in one delta field's text (any:
    /// empty, quotes, non-ASCII) and its usage gives what the general parse gives, whatever
    /// else the delta holds; an emptied text changes the kind as the general parse says; and
    /// the kept shape is used often.
    #[test]
    fn a_chat_event_that_differs_only_in_its_text_parses_the_same() {
        let text = || prop_oneof![1 => Just(String::new()), 3 => "[a-z é]{1,5}", 1 => "[a-z \\\\\"é]{0,5}"];
        let other = || {
            prop_oneof![
                2 => Just(None),
                1 => Just(Some("null".to_string())),
                2 => Just(Some("\"\"".to_string())),
                1 => Just(Some("\"x\"".to_string())),
            ]
        };
        let fields = ["content", "reasoning_content", "reasoning"];
        let pair = (
            (0..3usize, other(), other(), any::<bool>()),
            (text(), text()),
            (0u64..5000, 0u64..5000, any::<bool>()),
            proptest::collection::vec(delta_member(), 0..2),
        )
            .prop_map(
                move |((slot, o1, o2, role), (t1, t2), (c1, c2, counted), extra)| {
                    let event = |t: &str, c: u64| {
                        let mut d = Vec::new();
                        if role {
                            d.push("\"role\":\"assistant\"".to_string());
                        }
                        d.push(format!("\"{}\":\"{t}\"", fields[slot]));
                        let others = fields.iter().filter(|f| **f != fields[slot]);
                        for (f, v) in others.zip([&o1, &o2]) {
                            if let Some(v) = v {
                                d.push(format!("\"{f}\":{v}"));
                            }
                        }
                        d.extend(extra.iter().cloned());
                        let usage = if counted {
                            format!(",\"usage\":{{\"prompt_tokens\":9,\"total_tokens\":{},\"completion_tokens\":{c}}}", c + 9)
                        } else {
                            String::new()
                        };
                        format!(
                            "{{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{{}}},\"logprobs\":null,\"finish_reason\":null}}]{usage}}}",
                            d.join(",")
                        )
                    };
                    (event(&t1, c1), event(&t2, c2))
                },
            );
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut shaped, mut kinds) = (0, std::collections::HashSet::new());
        for _ in 0..4000 {
            let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
            let mut repeat = RepeatedBytes::default();
            let _ = completions(&e1, true, &mut repeat);
            let kept = repeat.same_shape(e2.as_bytes());
            if let Some(fast) = completions(&e2, true, &mut repeat) {
                if let Some(k) = kept {
                    shaped += 1;
                    kinds.insert(format!("{:?}", k.kind));
                    assert_eq!(k, fast, "{e1} then {e2}");
                }
                assert_eq!(Ok(fast), general_chat(&e2), "{e1} then {e2}");
            } else {
                assert!(kept.is_none(), "{e1} then {e2}");
            }
        }
        assert!(shaped > 500, "the shape was used {shaped} times of 4000");
        assert_eq!(kinds.len(), 2, "kinds read from a kept shape: {kinds:?}");
    }
}
