//! The simulator's prefix cache, modelled on vLLM's automatic prefix caching: the prompt is cut
//! into blocks of [`BLOCK`] tokens, each block named by a hash chained over every token before
//! it, so a block hit means the whole prefix up to it matches. A request's cached tokens are the
//! leading blocks already held, and the engine prefills only the rest. Blocks are kept up to a
//! capacity and the least recently used go first.
//!
//! What gets cached: a request's prompt blocks once its prefill is done, and, when it finishes,
//! the blocks of its prompt followed by its reply as the next turn of a chat will render them
//! (see [`crate::sim::tokenizer::chat_ids`]), as vLLM and SGLang keep generated tokens' KV too.
//! Beside the blocks it holds, it keeps the marks of every chat sequence it was handed, beyond
//! its capacity ([`super::finished`]): what the server had finished, against what it still holds.

use std::collections::{BTreeMap, HashMap};

use super::finished::FinishedPrefixes;

/// Tokens per cache block (vLLM's default block size).
pub const BLOCK: usize = 16;

/// Chained hashes of the full blocks of `ids`: `h[i]` names `ids[..(i + 1) * BLOCK]`.
pub fn block_hashes(ids: &[u32]) -> Vec<u64> {
    let mut out = Vec::with_capacity(ids.len() / BLOCK);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for block in ids.chunks_exact(BLOCK) {
        for &t in block {
            h = (h ^ u64::from(t)).wrapping_mul(0x0000_0100_0000_01b3);
            h ^= h >> 29;
        }
        out.push(h);
    }
    out
}

/// Blocks held, with least-recently-used eviction.
#[derive(Debug)]
pub struct PrefixCache {
    capacity_blocks: usize,
    /// Block hash → the tick it was last used.
    used: HashMap<u64, u64>,
    /// Tick → block hash (ticks are unique), oldest first.
    by_age: BTreeMap<u64, u64>,
    tick: u64,
    /// Every chat sequence handed to it (prompts at the end of their prefill, replies when
    /// finished), without eviction.
    pub finished: FinishedPrefixes,
}

impl PrefixCache {
    /// A cache holding at most `capacity_tokens` tokens (at least one block).
    pub fn new(capacity_tokens: u64) -> Self {
        Self {
            capacity_blocks: (capacity_tokens as usize / BLOCK).max(1),
            used: HashMap::new(),
            by_age: BTreeMap::new(),
            tick: 0,
            finished: FinishedPrefixes::default(),
        }
    }

    /// Blocks held now.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether no block is held.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    fn touch(&mut self, h: u64) {
        self.tick += 1;
        if let Some(old) = self.used.insert(h, self.tick) {
            self.by_age.remove(&old);
        }
        self.by_age.insert(self.tick, h);
    }

    /// How many leading blocks of `hashes` are held; they count as used now.
    pub fn lookup(&mut self, hashes: &[u64]) -> usize {
        let n = hashes
            .iter()
            .take_while(|h| self.used.contains_key(h))
            .count();
        for &h in &hashes[..n] {
            self.touch(h);
        }
        n
    }

    /// Drops every block (SGLang's `/flush_cache`); what was finished stays finished.
    pub fn clear(&mut self) {
        self.used.clear();
        self.by_age.clear();
    }

    /// Holds every block of `hashes`, evicting the least recently used beyond capacity.
    pub fn insert(&mut self, hashes: &[u64]) {
        for &h in hashes {
            self.touch(h);
        }
        while self.used.len() > self.capacity_blocks {
            let Some((_, h)) = self.by_age.pop_first() else {
                break;
            };
            self.used.remove(&h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u32, salt: u32) -> Vec<u32> {
        (0..n).map(|i| i.wrapping_mul(7919) ^ salt).collect()
    }

    #[test]
    fn a_shared_prefix_hits_up_to_the_first_differing_block() {
        let mut c = PrefixCache::new(10_000);
        let a = ids(100, 0);
        c.insert(&block_hashes(&a));
        // Same first 40 tokens, then different: two full blocks (32 tokens) match.
        let mut b = a[..40].to_vec();
        b.extend(ids(60, 99));
        assert_eq!(c.lookup(&block_hashes(&b)), 2);
        // The whole prompt again: all six full blocks.
        assert_eq!(c.lookup(&block_hashes(&a)), 100 / BLOCK);
        // A different first token changes every block's name.
        let mut d = a.clone();
        d[0] ^= 1;
        assert_eq!(c.lookup(&block_hashes(&d)), 0);
    }

    #[test]
    fn the_least_recently_used_blocks_go_first() {
        let mut c = PrefixCache::new(4 * BLOCK as u64);
        let a = block_hashes(&ids(64, 1));
        let b = block_hashes(&ids(64, 2));
        c.insert(&a);
        assert_eq!(c.len(), 4);
        c.insert(&b[..2]);
        // a's first two blocks were the oldest.
        assert_eq!(c.lookup(&a), 0);
        assert_eq!(c.lookup(&b), 2);
        assert_eq!(c.len(), 4);
    }
}
