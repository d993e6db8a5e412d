//! The simulator's tokenizer: each whitespace-separated word is `ceil(chars / 4)` tokens.
//!
//! Deliberately not one token per word, so a client that assumes words = tokens gets prompt
//! lengths wrong and the exact-length machinery is really exercised.

/// Tokens of `text`.
pub fn count(text: &str) -> u64 {
    text.split_whitespace()
        .map(|w| w.chars().count().div_ceil(4) as u64)
        .sum()
}

/// Token ids of `text` (a stable hash of each 4-character piece into a 32000-token vocabulary).
pub fn ids(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for w in text.split_whitespace() {
        let chars: Vec<char> = w.chars().collect();
        for piece in chars.chunks(4) {
            let mut h: u32 = 2_166_136_261;
            for c in piece {
                h = (h ^ *c as u32).wrapping_mul(16_777_619);
            }
            out.push(h % 32000);
        }
    }
    out
}

/// Chat-template overhead: tokens added per message and per conversation.
pub const CHAT_TOKENS_PER_MESSAGE: u64 = 4;
pub const CHAT_TOKENS_PER_CONVERSATION: u64 = 3;

/// Output vocabulary: short words that are exactly one simulated token each.
pub const OUTPUT_WORDS: [&str; 16] = [
    "the", "and", "of", "to", "in", "is", "it", "that", "was", "for", "on", "are", "with", "as",
    "be", "at",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_four_char_pieces() {
        assert_eq!(count("the people"), 1 + 2);
        assert_eq!(count("  information  a "), 3 + 1);
        assert_eq!(count(""), 0);
        assert_eq!(ids("the people").len(), 3);
        assert!(OUTPUT_WORDS.iter().all(|w| count(w) == 1));
    }
}
