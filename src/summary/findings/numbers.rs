//! Every caveat of a run numbered once, so a finding, a table row and the list of caveats can
//! point at the same sentence: the findings' caveats in the order the findings are written,
//! then any other level's own.

use std::collections::BTreeMap;

use super::{Finding, level_caveats};
use crate::summary::RunSummary;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CaveatNumbers {
    list: Vec<String>,
    by_level: BTreeMap<u32, Vec<usize>>,
}

impl CaveatNumbers {
    pub fn of(s: &RunSummary) -> Self {
        let mut n = Self::default();
        for f in &s.findings {
            for c in &f.caveats {
                n.number(c);
            }
        }
        for (i, cs) in level_caveats(s) {
            let mut nums: Vec<usize> = cs.iter().map(|c| n.number(c)).collect();
            nums.sort_unstable();
            n.by_level.insert(i, nums);
        }
        n
    }

    /// The caveat's number (from 1), giving it the next one if it has none yet.
    fn number(&mut self, c: &str) -> usize {
        if let Some(i) = self.list.iter().position(|k| k == c) {
            return i + 1;
        }
        self.list.push(c.to_string());
        self.list.len()
    }

    /// The caveats, the first numbered 1.
    pub fn list(&self) -> &[String] {
        &self.list
    }

    /// A finding's caveats' numbers, smallest first.
    pub fn of_finding(&self, f: &Finding) -> Vec<usize> {
        let mut nums: Vec<usize> = f
            .caveats
            .iter()
            .filter_map(|c| self.list.iter().position(|k| k == c).map(|i| i + 1))
            .collect();
        nums.sort_unstable();
        nums
    }

    /// The numbers of level `index`'s own caveats, smallest first (none: `None`).
    pub fn of_level(&self, index: u32) -> Option<&[usize]> {
        self.by_level.get(&index).map(Vec::as_slice)
    }

    /// Numbers as written: `1, 3`.
    pub fn text(nums: &[usize]) -> String {
        nums.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}
