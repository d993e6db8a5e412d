//! One machine's share of a run split over several (`--shard I/N`): each shard runs every level
//! of the same plan with its part of the load, and `report --merge` folds their records back
//! into one run (docs/metrics.md "Sharded runs").
//!
//! Shard `s` of `N` takes, at every level: `C / N` closed-loop workers (the first `C mod N`
//! shards one more), `rate / N` of a rate level with its own arrival draws, and request `i`
//! of the level is request `i·N + s` of the whole plan — the same prompt, dataset entry or
//! trace request one process would send as that request, so `N` shards with one `--seed` send
//! exactly what one process would.

use serde::{Deserialize, Serialize};

use super::LevelSpec;

/// Which share of the run this process is: shard `index` (from 0) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// `I/N`, as `--shard` takes it (I from 0).
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("--shard {s}: expected I/N with 0 ≤ I < N, e.g. 0/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }

    /// `--shards N` with the index from `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job's).
    pub fn from_env(count: u32, job_index: Option<&str>) -> Result<Self, String> {
        let Some(v) = job_index else {
            return Err(format!(
                "--shards {count}: JOB_COMPLETION_INDEX is not set (a Kubernetes Indexed Job sets it); give the index with --shard I/{count}"
            ));
        };
        Self::parse(&format!("{}/{count}", v.trim())).map_err(|_| {
            format!("--shards {count}: JOB_COMPLETION_INDEX={v} is not an index below {count}")
        })
    }

    /// `2/4` (from 0, as given).
    pub fn label(self) -> String {
        format!("{}/{}", self.index, self.count)
    }

    /// This shard's part of `total` things dealt one by one: `total / N`, and one more for
    /// the first `total mod N` shards.
    pub fn part(self, total: u32) -> u32 {
        total / self.count + u32::from(self.index < total % self.count)
    }

    /// Request `i` of this shard is request `global(i)` of the whole plan.
    pub fn global(self, i: u32) -> u32 {
        i.saturating_mul(self.count).saturating_add(self.index)
    }

    /// [`Shard::global`] at a level whose conversations have `turns` turns (None: single
    /// requests): whole conversations are dealt, so turn `t` of this shard's conversation `c`
    /// is turn `t` of the plan's conversation `global(c)`.
    pub fn global_request(self, i: u32, turns: Option<u32>) -> u32 {
        match turns {
            Some(k) => {
                let k = k.max(1);
                self.global(i / k).saturating_mul(k).saturating_add(i % k)
            }
            None => self.global(i),
        }
    }

    /// Mixed into a rate level's arrival seed: each shard draws its own arrivals.
    pub fn seed_mix(self) -> u64 {
        u64::from(self.index).wrapping_mul(0xD1B5_4A32_D192_ED03)
    }

    /// `spec` cut to this shard's share (see the module's description).
    pub fn share(self, spec: &mut LevelSpec) {
        spec.shard = Some(self);
        if self.count == 1 {
            return;
        }
        if let Some(a) = spec.arrival.as_mut() {
            a.request_rate /= f64::from(self.count);
            a.max_concurrency = a.max_concurrency.map(|c| self.part(c).max(1));
            spec.concurrency = a.max_concurrency.unwrap_or(0);
        } else if let Some(t) = spec.trace.as_mut() {
            t.offered_rate = t.offered_rate.map(|r| r / f64::from(self.count));
            t.max_concurrency = t.max_concurrency.map(|c| self.part(c).max(1));
            spec.concurrency = t.max_concurrency.unwrap_or(0);
        } else {
            // The requests go to the shards that have workers (C=1: shard 0 sends them all);
            // at a multi-turn level whole conversations are dealt, not their turns.
            let turns = spec.conversation.map_or(1, |c| c.turns.max(1));
            let active = spec.concurrency.min(self.count);
            spec.concurrency = self.part(spec.concurrency);
            spec.requests = share_among(spec.requests / turns, self.index, active) * turns;
            if self.index < active {
                // Dealt over the first `active` shards: their requests interleave by that.
                spec.shard = Some(Shard {
                    index: self.index,
                    count: active,
                });
            }
            return;
        }
        spec.requests = self.part(spec.requests);
    }
}

/// Shard `index`'s part of `total` dealt over the first `among` shards (none past them).
fn share_among(total: u32, index: u32, among: u32) -> u32 {
    if index >= among {
        return 0;
    }
    total / among + u32::from(index < total % among)
}

impl LevelSpec {
    /// Request `i` of this level as the whole plan numbers it (`i` itself unless sharded).
    /// At a multi-turn level whole conversations are dealt: turn `t` of this shard's
    /// conversation `c` is turn `t` of the plan's conversation `global(c)`.
    pub fn global_index(&self, i: u32) -> u32 {
        self.shard.map_or(i, |s| {
            s.global_request(i, self.conversation.map(|c| c.turns))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(Shard::parse("1/4").unwrap(), Shard { index: 1, count: 4 });
        for bad in ["4/4", "1", "a/4", "0/0", "-1/4"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Shard::from_env(4, Some("3")).unwrap(),
            Shard { index: 3, count: 4 }
        );
        assert!(Shard::from_env(4, Some("4")).is_err());
        assert!(Shard::from_env(4, None).is_err());
    }

    /// A level of the plan, `C` workers and `n` requests (`turns` a conversation).
    fn level(c: u32, n: u32, turns: Option<u32>) -> LevelSpec {
        LevelSpec {
            index: 0,
            kind: if turns.is_some() {
                super::super::LevelKind::MultiTurn
            } else {
                super::super::LevelKind::Sweep
            },
            concurrency: c,
            input_tokens: 100,
            output_tokens: 10,
            requests: n,
            arrival: None,
            shared_prefix_tokens: 0,
            conversation: turns.map(|turns| super::super::Conversation::new(turns, 8)),
            tool_wait: None,
            think_time: None,
            trace: None,
            repeat: None,
            shape: None,
            content: None,
            category: None,
            thinking_budget: None,
            shard: None,
            seconds: None,
            mix: crate::workload::mix::RequestMix::default(),
        }
    }

    #[test]
    fn shares_of_a_level_are_the_level() {
        // C=1 over 4 shards: shard 0 sends every request, the others none.
        let shares: Vec<LevelSpec> = (0..4)
            .map(|i| {
                let mut l = level(1, 3, None);
                Shard { index: i, count: 4 }.share(&mut l);
                l
            })
            .collect();
        assert_eq!(
            shares.iter().map(|l| l.concurrency).collect::<Vec<_>>(),
            [1, 0, 0, 0]
        );
        assert_eq!(
            shares.iter().map(|l| l.requests).collect::<Vec<_>>(),
            [3, 0, 0, 0]
        );
        assert_eq!(
            (0..3)
                .map(|i| shares[0].global_index(i))
                .collect::<Vec<_>>(),
            [0, 1, 2],
            "the prompts one process would send"
        );
        // C=2 over 4 shards: two shards send, interleaved by two, every request once.
        let mut sent: Vec<u32> = (0..4)
            .flat_map(|i| {
                let mut l = level(2, 7, None);
                Shard { index: i, count: 4 }.share(&mut l);
                (0..l.requests).map(move |r| l.global_index(r))
            })
            .collect();
        sent.sort_unstable();
        assert_eq!(sent, (0..7).collect::<Vec<_>>());
        // 5 chats of 3 turns at C=2 over 2 shards: whole conversations, each turn sent once.
        let mut all: Vec<u32> = (0..2)
            .flat_map(|i| {
                let mut l = level(2, 15, Some(3));
                Shard { index: i, count: 2 }.share(&mut l);
                assert_eq!(l.requests % 3, 0, "whole conversations");
                (0..l.requests).map(move |r| l.global_index(r))
            })
            .collect();
        all.sort_unstable();
        let want: Vec<u32> = (0..15).collect();
        assert_eq!(all, want);
    }

    #[test]
    fn parts_add_up_and_globals_cover_once() {
        for n in 1..6 {
            for total in [0, 1, 3, 7, 64, 100] {
                let parts: u32 = (0..n)
                    .map(|i| Shard { index: i, count: n }.part(total))
                    .sum();
                assert_eq!(parts, total, "{total} over {n}");
            }
            let mut seen: Vec<u32> = (0..n)
                .flat_map(|s| {
                    let sh = Shard { index: s, count: n };
                    (0..sh.part(20)).map(move |i| sh.global(i))
                })
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..20).collect::<Vec<_>>(), "over {n}");
        }
    }
}
