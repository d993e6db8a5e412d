//! One choice of an OpenAI event for the fast path: completions' `text` or a chat `delta` with
//! one text field, and what kind of text it is ([`Said`]), as the general parse reads it.

use super::super::{DeltaKind, delta_kind};
use super::{Scan, once};

/// What the one choice said: its text and finish reason (`finished`, `length`).
pub(super) struct Choice<'a> {
    /// Its text (completions' `text`, or a chat delta's one text field); a slice of the event
    /// where `said.slot` is true.
    pub(super) text: &'a str,
    pub(super) said: Said,
    pub(super) finished: bool,
    pub(super) length: bool,
}

/// What kind of text a choice's text field holds: what
/// [`ChunkData`](super::super::ChunkData) makes of any text there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // the facts a delta's kind is made of
pub(super) struct Said {
    /// A chat delta (else completions' `text`, always an answer).
    pub(super) chat: bool,
    /// The text is a field of the event (a delta with no text field has none).
    pub(super) slot: bool,
    /// The field is the delta's `content`.
    pub(super) content: bool,
    /// The delta has a reasoning field (even empty).
    pub(super) thinking: bool,
    /// The delta has `content` (even empty).
    pub(super) has_content: bool,
}

impl Said {
    /// Completions' `text`.
    pub(super) const COMPLETIONS: Said = Said {
        chat: false,
        slot: true,
        content: true,
        thinking: false,
        has_content: true,
    };

    /// The kind and the answer text of a choice whose text field holds `text`. The delta's
    /// other text fields are empty or null (a delta with two texts is left to serde), so its
    /// text is this one, as the general parse joins them.
    pub(super) fn read(self, text: &str) -> (DeltaKind, &str) {
        if !self.chat {
            return (DeltaKind::Content, text);
        }
        let answer = self.content && !text.is_empty();
        let kind = delta_kind(answer, self.thinking, self.has_content);
        (kind, if self.content { text } else { "" })
    }
}

/// A chat delta without tool calls and with at most one non-empty text: that text (or an empty
/// one, at the field that would hold it) and what it is.
fn delta<'a>(sc: &mut Scan<'a>) -> Option<(&'a str, Said)> {
    fn field<'a>(sc: &mut Scan<'a>, seen: &mut bool, v: &mut Option<&'a str>) -> Option<()> {
        once(seen)?;
        *v = if sc.null() { None } else { Some(sc.string()?) };
        Some(())
    }
    let (mut content, mut rc, mut r) = (None, None, None);
    // Each field seen: content, reasoning_content, reasoning, tool_calls.
    let mut seen = [false; 4];
    sc.object(|sc, key| match key {
        "content" => field(sc, &mut seen[0], &mut content),
        "reasoning_content" => field(sc, &mut seen[1], &mut rc),
        "reasoning" => field(sc, &mut seen[2], &mut r),
        // No call (null or none): serde's `Option<Vec<_>>`, filtered empty.
        "tool_calls" => {
            once(&mut seen[3])?;
            if sc.null() {
                return Some(());
            }
            sc.eat(b'[')?;
            sc.eat(b']')
        }
        _ => sc.skip(1),
    })?;
    let fields = [(content, true), (rc, false), (r, false)];
    let mut full = fields
        .iter()
        .filter(|(t, _)| t.is_some_and(|t| !t.is_empty()));
    let (first, second) = (full.next(), full.next());
    if second.is_some() {
        return None;
    }
    // The text's field: the one with text, else the first present, else none.
    let at = first.or_else(|| fields.iter().find(|(t, _)| t.is_some()));
    let said = Said {
        chat: true,
        slot: at.is_some(),
        content: at.is_some_and(|(_, c)| *c),
        thinking: rc.is_some() || r.is_some(),
        has_content: content.is_some(),
    };
    Some((at.and_then(|(t, _)| *t).unwrap_or(""), said))
}

pub(super) fn choice<'a>(sc: &mut Scan<'a>, chat: bool) -> Option<Choice<'a>> {
    let (mut text, mut finish) = (None, None);
    let (mut t, mut f) = (false, false);
    sc.object(|sc, key| match key {
        "text" if !chat => {
            once(&mut t)?;
            text = Some((sc.string()?, Said::COMPLETIONS));
            Some(())
        }
        "delta" if chat => {
            once(&mut t)?;
            text = Some(delta(sc)?);
            Some(())
        }
        "finish_reason" => {
            once(&mut f)?;
            finish = Some(if sc.null() { None } else { Some(sc.string()?) });
            Some(())
        }
        // The other endpoint's text: the general parse decides.
        "text" | "delta" => None,
        _ => sc.skip(1),
    })?;
    let reason = finish.flatten();
    let (text, said) = text?;
    Some(Choice {
        text,
        said,
        finished: reason.is_some_and(|r| !r.is_empty()),
        length: reason == Some("length"),
    })
}
