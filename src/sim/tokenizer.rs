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

/// The template's own tokens: the conversation's opening, and a message's opening around its role.
const CONVERSATION_OPEN: [u32; 3] = [32_001, 32_002, 32_003];

/// The first of a message's opening tokens: no content token is one (content ids are below
/// 32000), so it marks where each message begins in a rendered chat.
pub const MESSAGE_START: u32 = 32_004;

/// The simulated model's end-of-sequence token (beside the template's own), which SGLang's
/// finish reason names when an answer ends on its own.
pub const EOS_ID: u32 = 32_000;

/// The opening tokens of a message from `role` (four, [`CHAT_TOKENS_PER_MESSAGE`]).
pub fn message_open(role: &str) -> [u32; 4] {
    let r = match role {
        "system" => 32_010,
        "user" => 32_011,
        "assistant" => 32_012,
        _ => 32_013,
    };
    [MESSAGE_START, r, 32_005, 32_006]
}

/// Token ids of a chat rendered through the simulated template: the conversation's opening, then
/// each message's opening and content. As long as its count (`CHAT_TOKENS_PER_CONVERSATION` +
/// Σ(`CHAT_TOKENS_PER_MESSAGE` + content)), so a prefix cache sees what the count charges for.
pub fn chat_ids<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u32> {
    let mut out = CONVERSATION_OPEN.to_vec();
    for (role, content) in messages {
        out.extend(message_open(role));
        out.extend(ids(content));
    }
    out
}

/// Output vocabulary: short words that are exactly one simulated token each.
pub const OUTPUT_WORDS: [&str; 16] = [
    "the", "and", "of", "to", "in", "is", "it", "that", "was", "for", "on", "are", "with", "as",
    "be", "at",
];

/// Thinking vocabulary: one token each, and none of them an output word, so a test can tell
/// a reasoning text from an answer.
pub const REASONING_WORDS: [&str; 8] = ["hmm", "so", "if", "then", "but", "why", "we", "let"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_four_char_pieces() {
        assert_eq!(count("the people"), 1 + 2);
        assert_eq!(count("  information  a "), 3 + 1);
        assert_eq!(count(""), 0);
        assert_eq!(ids("the people").len(), 3);
        let chat = chat_ids([("system", "be brief"), ("user", "the people")]);
        assert_eq!(
            chat.len() as u64,
            CHAT_TOKENS_PER_CONVERSATION
                + 2 * CHAT_TOKENS_PER_MESSAGE
                + count("be brief the people")
        );
        assert!(OUTPUT_WORDS.iter().all(|w| count(w) == 1));
        assert!(REASONING_WORDS.iter().all(|w| count(w) == 1));
        assert!(REASONING_WORDS.iter().all(|w| !OUTPUT_WORDS.contains(w)));
    }
}
