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
mod repeat;

use super::{ChunkData, Dialect, Usage};
use choice::choice;
pub use repeat::RepeatedBytes;

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
mod tests;
