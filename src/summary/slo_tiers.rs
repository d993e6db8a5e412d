//! What the SLO tiers (`--slo-tier`) answer over a run: for each tier, the most users (session
//! levels) or concurrent requests (the sweep) whose levels all met it, from each level's own
//! verdict ([`crate::metrics::slo_tiers::TierCheck`]).

use serde::{Deserialize, Serialize};

use super::{LevelSummary, RunSummary};
use crate::metrics::Slo;

/// One tier's answer (results.json `slo_tiers`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierAnswer {
    pub tier: String,
    pub slo: Slo,
    /// `users` (session levels) or `concurrency` (the sweep's levels).
    pub of: String,
    /// The largest users or concurrency at which this level and every one below met the tier
    /// (none: not even the first).
    pub most: Option<u32>,
    /// Every level up to `most` met it, and the one above failed it, at the confidence level.
    pub certain: bool,
    /// The largest tried: with `most` equal to it, every level met the tier and the answer is
    /// at least this.
    pub most_tried: u32,
    /// Each level in order: its users or concurrency and its verdict (`pass`, `pass?`,
    /// `fail`, `fail?`).
    pub levels: Vec<TierLevel>,
    /// Over session levels: the turns that missed the tier on their own at the first level that
    /// failed it (empty where none did, or the turns together missed it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missed_turns: Vec<u32>,
}

impl TierAnswer {
    /// `users` or `concurrent requests`.
    pub fn unit(&self) -> &'static str {
        if self.of == "users" {
            "users"
        } else {
            "concurrent requests"
        }
    }

    /// `4 users`, `none (not even 1 user)`, or `16 users or more (every level met it)`, with
    /// `?` after the answer where a verdict it rests on is uncertain (`4 users?`), and the turns
    /// that missed it at the first level that failed: `none (not even 1 user: turns 3, 4
    /// missed it)`, `4 users (turn 6 missed it at 5)`.
    pub fn most_text(&self) -> String {
        let units = |n: u32| {
            let unit = self.unit();
            if n == 1 {
                unit.trim_end_matches('s')
            } else {
                unit
            }
        };
        let missed = (!self.missed_turns.is_empty()).then(|| {
            let list: Vec<String> = self.missed_turns.iter().map(u32::to_string).collect();
            let word = if list.len() == 1 { "turn" } else { "turns" };
            format!("{word} {} missed it", list.join(", "))
        });
        // The answer, then what it rests on in parentheses; `?` marks the answer itself.
        let (head, note) = match self.most {
            None => {
                let first = self.levels.first().map_or(0, |l| l.concurrency);
                let even = format!("not even {first} {}", units(first));
                let note = match missed {
                    Some(t) => format!("{even}: {t}"),
                    None => even,
                };
                ("none".to_string(), Some(note))
            }
            Some(m) if m == self.most_tried => (
                format!("{m} {} or more", units(m)),
                Some("every level met it".to_string()),
            ),
            Some(m) => {
                let next = self.levels.iter().find(|l| l.concurrency > m);
                let note = missed
                    .zip(next)
                    .map(|(t, l)| format!("{t} at {}", l.concurrency));
                (format!("{m} {}", units(m)), note)
            }
        };
        let mark = if self.certain { "" } else { "?" };
        match note {
            Some(n) => format!("{head}{mark} ({n})"),
            None => format!("{head}{mark}"),
        }
    }
}

/// One level's verdict for a tier.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierLevel {
    pub concurrency: u32,
    pub verdict: String,
}

/// The levels the tiers are answered over: the measured session levels of users (not an agent
/// trace's), else the sweep's closed-loop levels, by users or concurrency.
fn ladder(s: &RunSummary) -> (&'static str, Vec<&LevelSummary>) {
    let done = |l: &&LevelSummary| l.stats.is_some() && !l.slo_tiers.is_empty();
    let sessions: Vec<&LevelSummary> = s
        .sessions
        .iter()
        .filter(|l| l.trace.is_none() && l.arrival.is_none())
        .filter(done)
        .collect();
    let (of, mut v) = if sessions.is_empty() {
        let sweep = s
            .sweep
            .iter()
            .filter(|l| l.kind == crate::workload::LevelKind::Sweep)
            .filter(done)
            .collect();
        ("concurrency", sweep)
    } else {
        ("users", sessions)
    };
    v.sort_by_key(|l| l.concurrency);
    (of, v)
}

/// Every tier's answer, in the order the tiers were given (empty without tiers or levels).
pub fn answers(s: &RunSummary) -> Vec<TierAnswer> {
    let (of, levels) = ladder(s);
    if levels.is_empty() {
        return Vec::new();
    }
    s.config
        .slo_tiers
        .iter()
        .map(|t| {
            let checks: Vec<(u32, &crate::metrics::SloCheck)> = levels
                .iter()
                .filter_map(|l| {
                    let c = l.slo_tiers.iter().find(|c| c.tier == t.name)?;
                    Some((l.concurrency, &c.check))
                })
                .collect();
            let passing = checks.iter().take_while(|(_, c)| c.meets).count();
            let most = passing.checked_sub(1).map(|i| checks[i].0);
            let certain = checks[..passing].iter().all(|(_, c)| c.certain)
                && checks.get(passing).is_none_or(|(_, c)| c.certain);
            let missed_turns = checks.get(passing).map_or_else(Vec::new, |(_, c)| {
                c.turns
                    .iter()
                    .filter(|t| !t.check.meets)
                    .map(|t| t.turn)
                    .collect()
            });
            TierAnswer {
                tier: t.name.clone(),
                slo: t.slo,
                of: of.into(),
                most,
                certain,
                missed_turns,
                most_tried: checks.last().map_or(0, |c| c.0),
                levels: checks
                    .iter()
                    .map(|(c, k)| TierLevel {
                        concurrency: *c,
                        verdict: k.verdict().into(),
                    })
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(most: Option<u32>, certain: bool, missed_turns: Vec<u32>) -> TierAnswer {
        TierAnswer {
            tier: "t".into(),
            slo: Slo::default(),
            of: "users".into(),
            most,
            certain,
            most_tried: 8,
            levels: [1, 2, 4, 8]
                .iter()
                .map(|&c| TierLevel {
                    concurrency: c,
                    verdict: "pass".into(),
                })
                .collect(),
            missed_turns,
        }
    }

    #[test]
    fn the_answer_says_its_doubt_and_the_turns_that_missed() {
        assert_eq!(answer(Some(4), true, vec![]).most_text(), "4 users");
        assert_eq!(
            answer(Some(4), false, vec![1]).most_text(),
            "4 users? (turn 1 missed it at 8)"
        );
        assert_eq!(
            answer(Some(8), false, vec![]).most_text(),
            "8 users or more? (every level met it)"
        );
        assert_eq!(
            answer(None, true, vec![3, 4]).most_text(),
            "none (not even 1 user: turns 3, 4 missed it)"
        );
        assert_eq!(answer(Some(1), true, vec![]).most_text(), "1 user");
    }
}
