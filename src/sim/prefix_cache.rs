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

use std::collections::{BTreeMap, HashMap, VecDeque};

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

/// Why blocks were evicted: room for a running request's KV (admitted, or grown by its
/// output), or for blocks handed to the cache (a finished prompt or reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictedFor {
    Running,
    Cache,
}

/// One eviction: blocks dropped at once, least recently used first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Eviction {
    /// µs since the Unix epoch.
    pub unix_us: u64,
    pub tokens: u64,
    #[serde(rename = "for")]
    pub evicted_for: EvictedFor,
}

/// Evictions kept (the most recent), and evicted blocks remembered with their time.
const EVICTIONS_KEPT: usize = 100_000;
const EVICTED_REMEMBERED: usize = 1_000_000;

/// The KV cache's blocks, as vLLM keeps them: one pool of `capacity` blocks shared by the
/// running requests and the prefix cache. A running request holds its prompt's blocks (the
/// cached ones it found, pinned, and the rest once its prefill is done) and blocks of its own for
/// what is not a full prompt block (the prompt's tail, its output). When a request ends its
/// blocks stay cached, free to be evicted, least recently used first, whenever a running
/// request or the cache needs room. Pinned blocks are never evicted: if the running requests
/// alone need more than the pool, it is overcommitted (vLLM would preempt; the simulator
/// records how far).
#[derive(Debug)]
pub struct PrefixCache {
    capacity_blocks: usize,
    /// Block hash → the tick it was last used.
    used: HashMap<u64, u64>,
    /// Tick → block hash of the blocks no running request holds (ticks are unique), oldest
    /// first: the eviction order.
    by_age: BTreeMap<u64, u64>,
    /// Running requests holding each pinned block.
    pins: HashMap<u64, u32>,
    /// Blocks running requests hold outside the cache.
    private: u64,
    tick: u64,
    /// Every chat sequence handed to it (prompts at the end of their prefill, replies when
    /// finished), without eviction.
    pub finished: FinishedPrefixes,
    /// The most recent evictions, oldest first.
    pub evictions: VecDeque<Eviction>,
    /// When each recently evicted block was evicted (µs since the Unix epoch), until it is
    /// cached again.
    evicted_at: HashMap<u64, u64>,
    /// The most blocks the running requests held beyond the pool.
    pub overcommit_peak_blocks: u64,
}

/// What a request found as it was admitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// Its prompt's leading blocks held in the cache (now pinned by it).
    pub cached_blocks: usize,
    /// The first of its prompt's blocks not held had been evicted then (µs since the Unix
    /// epoch); none when it was never cached, or is remembered no longer.
    pub first_missing_evicted_unix_us: Option<u64>,
}

impl PrefixCache {
    /// A pool of `capacity_tokens` tokens (at least one block).
    pub fn new(capacity_tokens: u64) -> Self {
        Self {
            capacity_blocks: (capacity_tokens as usize / BLOCK).max(1),
            used: HashMap::new(),
            by_age: BTreeMap::new(),
            pins: HashMap::new(),
            private: 0,
            tick: 0,
            finished: FinishedPrefixes::default(),
            evictions: VecDeque::new(),
            evicted_at: HashMap::new(),
            overcommit_peak_blocks: 0,
        }
    }

    /// Blocks cached now (pinned or not).
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether no block is cached.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// Blocks of the pool in use: cached, and the running requests' own.
    pub fn in_use(&self) -> u64 {
        self.used.len() as u64 + self.private
    }

    /// Marks `h` as used now; a block no request pins goes to the back of the eviction order.
    fn touch(&mut self, h: u64) {
        self.tick += 1;
        if let Some(old) = self.used.insert(h, self.tick) {
            self.by_age.remove(&old);
        }
        if !self.pins.contains_key(&h) {
            self.by_age.insert(self.tick, h);
        }
        self.evicted_at.remove(&h);
    }

    fn pin(&mut self, h: u64) {
        if let Some(t) = self.used.get(&h) {
            self.by_age.remove(t);
        }
        *self.pins.entry(h).or_insert(0) += 1;
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

    /// A request of `hashes` (its prompt's full blocks) and `blocks` blocks in all is admitted:
    /// the leading blocks held are its (pinned), and it takes the rest of its blocks from the
    /// pool, evicting for them.
    pub fn admit(&mut self, hashes: &[u64], blocks: u64) -> Admission {
        let n = self.lookup(hashes);
        for &h in &hashes[..n] {
            self.pin(h);
        }
        let missing = hashes.get(n).and_then(|h| self.evicted_at.get(h)).copied();
        self.private += blocks.saturating_sub(n as u64);
        self.make_room(EvictedFor::Running);
        Admission {
            cached_blocks: n,
            first_missing_evicted_unix_us: missing,
        }
    }

    /// A request's prefill is done: its prompt's full blocks after the `cached` it found become
    /// cached blocks it holds (one another request cached meanwhile is shared, and its own copy
    /// freed).
    pub fn prefilled(&mut self, hashes: &[u64], cached: usize) {
        for &h in &hashes[cached.min(hashes.len())..] {
            self.private = self.private.saturating_sub(1);
            self.touch(h);
            self.pin(h);
        }
    }

    /// A running request takes `blocks` more blocks (its output grew past a block).
    pub fn grow(&mut self, blocks: u64) {
        self.private += blocks;
        self.make_room(EvictedFor::Running);
    }

    /// A request ends: it lets go of the blocks it pinned (`hashes`, still cached, now free to
    /// be evicted) and of its `private` blocks.
    pub fn release(&mut self, hashes: &[u64], private: u64) {
        // The tail first, as vLLM frees a request's blocks: its tail is evicted before the
        // prefix others may share.
        for &h in hashes.iter().rev() {
            match self.pins.get_mut(&h) {
                Some(n) if *n > 1 => *n -= 1,
                Some(_) => {
                    self.pins.remove(&h);
                    if self.used.contains_key(&h) {
                        self.touch(h);
                    }
                }
                None => {}
            }
        }
        self.private = self.private.saturating_sub(private);
    }

    /// Drops every block no running request holds (SGLang's `/flush_cache`); what was finished
    /// stays finished.
    pub fn clear(&mut self) {
        for (_, h) in std::mem::take(&mut self.by_age) {
            self.used.remove(&h);
        }
    }

    /// Holds every block of `hashes` (a finished request's, freed tail first as vLLM frees
    /// them), evicting the least recently used beyond capacity.
    pub fn insert(&mut self, hashes: &[u64]) {
        for &h in hashes.iter().rev() {
            self.touch(h);
        }
        self.make_room(EvictedFor::Cache);
    }

    /// Evicts the least recently used free blocks until the pool holds what is in use, and
    /// records the eviction; what the running requests hold beyond it is an overcommit.
    fn make_room(&mut self, evicted_for: EvictedFor) {
        let cap = self.capacity_blocks as u64;
        let mut evicted = 0u64;
        let now = crate::metrics::unix_us();
        while self.in_use() > cap {
            let Some((_, h)) = self.by_age.pop_first() else {
                break;
            };
            self.used.remove(&h);
            if self.evicted_at.len() >= EVICTED_REMEMBERED {
                self.evicted_at.clear();
            }
            self.evicted_at.insert(h, now);
            evicted += 1;
        }
        self.overcommit_peak_blocks = self
            .overcommit_peak_blocks
            .max(self.in_use().saturating_sub(cap));
        if evicted > 0 {
            if self.evictions.len() >= EVICTIONS_KEPT {
                self.evictions.pop_front();
            }
            self.evictions.push_back(Eviction {
                unix_us: now,
                tokens: evicted * BLOCK as u64,
                evicted_for,
            });
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
        // a's blocks were freed tail first, as vLLM frees them: its last two were the oldest,
        // and its first two stay.
        assert_eq!(c.lookup(&a), 2);
        assert_eq!(c.lookup(&b), 2);
        assert_eq!(c.len(), 4);
    }

    #[test]
    fn running_requests_pin_their_blocks_and_take_room_from_the_idle_ones() {
        // A pool of 8 blocks. Session a's 4-block prompt runs, then ends: its blocks stay
        // cached, free.
        let mut c = PrefixCache::new(8 * BLOCK as u64);
        let a = block_hashes(&ids(64, 1));
        assert_eq!(c.admit(&a, 4).cached_blocks, 0);
        c.prefilled(&a, 0);
        assert_eq!(c.in_use(), 4);
        c.release(&a, 0);
        // b runs with 6 blocks of its own (no hits): 4 + 6 > 8, so two of a's go, its tail.
        let b = block_hashes(&ids(64, 2));
        c.admit(&b, 6);
        assert_eq!(c.in_use(), 8);
        assert_eq!(c.evictions.len(), 1);
        assert_eq!(c.evictions[0].tokens, 2 * BLOCK as u64);
        assert_eq!(c.evictions[0].evicted_for, EvictedFor::Running);
        // a' shares a's first three blocks: it finds two, and its third was evicted then.
        let mut shared = ids(48, 1);
        shared.extend(ids(16, 9));
        let a2 = block_hashes(&shared);
        let found = c.admit(&a2, 4);
        assert_eq!(found.cached_blocks, 2);
        assert_eq!(
            found.first_missing_evicted_unix_us,
            Some(c.evictions[0].unix_us)
        );
        c.release(&a2[..2], 2);
        // b's prompt blocks are pinned once prefilled: its growth cannot evict them, only a's
        // two free blocks, and beyond that the pool is overcommitted.
        c.prefilled(&b, 0);
        c.grow(4);
        assert_eq!(c.overcommit_peak_blocks, 2);
        assert_eq!(c.lookup(&b), 4, "b's blocks held while it runs");
        assert_eq!(c.admit(&a, 4).cached_blocks, 0);
    }

    #[test]
    fn a_block_two_requests_hold_stays_until_both_let_go() {
        let mut c = PrefixCache::new(4 * BLOCK as u64);
        let a = block_hashes(&ids(32, 3));
        c.insert(&a);
        assert_eq!(c.admit(&a, 2).cached_blocks, 2);
        assert_eq!(c.admit(&a, 2).cached_blocks, 2);
        c.release(&a, 0);
        // Still pinned by the second: room for others comes from nothing else, so it overcommits.
        c.grow(4);
        assert_eq!(c.lookup(&a), 2);
        c.release(&a, 0);
        c.release(&[], 4);
        c.insert(&block_hashes(&ids(64, 4)));
        assert_eq!(c.lookup(&a), 0, "free once both ended, then evicted");
    }
}
