//! What the simulated server had finished, as an answer key for a client's cache ceiling: the
//! sequences its prefix cache was handed (a chat prompt once its prefill completed, and a
//! finished chat reply as the next turn renders it), kept without the cache's capacity, blocks
//! or eviction. A request's trace says how long a prefix of its prompt, cut where a message's
//! content ends or where a message's opening tokens end, had been finished when it arrived
//! ([`super::truth::SimRequestTrace`]'s `finished_prefix_tokens`); its `cached_tokens` say what
//! the cache still held of it, so the gap between them is what eviction cost.
//!
//! A sequence is remembered by marks: a hash of its token ids up to each place a message opens
//! in it, up to the end of each message's opening, and up to its end. A later prompt's prefix
//! cut at one of those places equals a finished sequence's start exactly when it equals the
//! sequence up to the same place, so one set of hashes answers for every place a prompt can be
//! cut. Content tokens are not cut inside: a prompt whose message content begins as a finished
//! one's did (a reply resent cut short, a task that begins with the same words) counts only up
//! to that message's opening.

use std::collections::HashSet;

use super::tokenizer::MESSAGE_START;

/// Marks held at most, over both generations (about 20 MB). Past half of them the older
/// generation is dropped whole, so a prefix not finished again since its last half a million
/// new marks is forgotten, and a later prompt that shares it reads low.
pub const MARKS_KEPT: usize = 1 << 20;

/// The places of chat `ids` (as [`super::tokenizer::chat_ids`] renders them) where a prompt
/// may be cut: where a message's content ends (before each message's opening but the first,
/// and the end), and where each message's opening ends, in order. None when `ids` hold no
/// message.
fn cuts(ids: &[u32]) -> Vec<usize> {
    let open = super::tokenizer::CHAT_TOKENS_PER_MESSAGE as usize;
    let mut out = Vec::new();
    for (i, _) in ids.iter().enumerate().filter(|(_, t)| **t == MESSAGE_START) {
        if !out.is_empty() {
            out.push(i);
        }
        out.push((i + open).min(ids.len()));
    }
    if !out.is_empty() {
        out.push(ids.len());
    }
    out.dedup();
    out
}

/// A place in a chat's ids where a message's content ends, and the hash of the ids before it.
pub type Mark = (usize, u64);

/// The marks of chat `ids` (as [`super::tokenizer::chat_ids`] renders them, or a reply's
/// sequence after them), in order.
pub fn marks(ids: &[u32]) -> Vec<Mark> {
    let mut out = Vec::new();
    let mut h: u64 = 0x243f_6a88_85a3_08d3;
    let mut at = 0;
    for p in cuts(ids) {
        for &t in &ids[at..p] {
            h = mix(h ^ u64::from(t));
        }
        at = p;
        out.push((p, mix(h ^ (p as u64).rotate_left(32))));
    }
    out
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The marks of every sequence finished so far, in two generations.
#[derive(Debug, Default)]
pub struct FinishedPrefixes {
    now: HashSet<u64>,
    before: HashSet<u64>,
}

impl FinishedPrefixes {
    /// Notes a finished sequence by its [`marks`].
    pub fn insert(&mut self, marks: &[Mark]) {
        for &(_, m) in marks {
            if self.now.contains(&m) {
                continue;
            }
            if self.now.len() >= MARKS_KEPT / 2 {
                self.before = std::mem::take(&mut self.now);
            }
            self.now.insert(m);
        }
    }

    /// Tokens of the longest prefix of a chat prompt, given by its [`marks`], cut where a
    /// message's content ends, that equals the start of a sequence finished so far (0: none).
    pub fn longest(&self, marks: &[Mark]) -> u64 {
        marks
            .iter()
            .rev()
            .find(|(_, h)| self.now.contains(h) || self.before.contains(h))
            .map_or(0, |&(p, _)| p as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tokenizer::{chat_ids, ids, message_open};

    #[test]
    fn a_prompt_matches_up_to_the_last_message_a_finished_sequence_shared() {
        let mut f = FinishedPrefixes::default();
        let turn1 = chat_ids([("system", "be brief"), ("user", "what is here")]);
        assert_eq!(f.longest(&marks(&turn1)), 0);
        f.insert(&marks(&turn1));
        assert_eq!(f.longest(&marks(&turn1)), turn1.len() as u64);
        // Another question under the same system prompt: the system message and the user
        // message's opening match.
        let other = chat_ids([("system", "be brief"), ("user", "something else")]);
        assert_eq!(f.longest(&marks(&other)), 3 + 4 + 3 + 4);
        // The reply as the next turn renders it.
        let mut reply = turn1.clone();
        reply.extend(message_open("assistant"));
        reply.extend(ids("the and of"));
        f.insert(&marks(&reply));
        let turn2 = chat_ids([
            ("system", "be brief"),
            ("user", "what is here"),
            ("assistant", "the and of"),
            ("user", "more"),
        ]);
        assert_eq!(f.longest(&marks(&turn2)), reply.len() as u64);
        // A different reply resent: only the prompt before it had been finished.
        let edited = chat_ids([
            ("system", "be brief"),
            ("user", "what is here"),
            ("assistant", "nothing"),
            ("user", "more"),
        ]);
        assert_eq!(f.longest(&marks(&edited)), turn1.len() as u64 + 4);
        // A completions prompt holds no message.
        assert_eq!(f.longest(&marks(&ids("be brief what is here"))), 0);
    }

    #[test]
    fn past_half_its_marks_the_older_generation_goes() {
        let mut f = FinishedPrefixes::default();
        let first = chat_ids([("user", "first")]);
        f.insert(&marks(&first));
        let half = MARKS_KEPT as u64 / 2;
        f.insert(&(0..half).map(|i| (0, mix(i))).collect::<Vec<_>>());
        // The first mark is in the older generation now, and still counts.
        assert_eq!(f.longest(&marks(&first)), first.len() as u64);
        f.insert(&(half..2 * half).map(|i| (0, mix(i))).collect::<Vec<_>>());
        assert_eq!(f.longest(&marks(&first)), 0);
        assert!(f.now.len() + f.before.len() <= MARKS_KEPT);
    }
}
