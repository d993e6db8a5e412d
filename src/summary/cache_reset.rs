//! `--reset-cache` in the summary: what clearing the prefix cache before each level came to.

use crate::client::CacheReset;

use super::RunSummary;

impl RunSummary {
    /// What clearing the prefix cache before `level` came to: kept with the level; a reset that
    /// did not happen, or a partial one, is said once among the warnings.
    pub fn note_cache_reset(&mut self, level: u32, outcome: CacheReset) {
        let warning = match &outcome {
            CacheReset::Cleared { note: None, .. } => None,
            CacheReset::Cleared { note: Some(n), .. } => Some(format!("--reset-cache: {n}")),
            CacheReset::NotOffered(why) => Some(format!(
                "--reset-cache: the prefix cache was not cleared ({why}); the levels may start warm"
            )),
            CacheReset::Failed(why) => Some(format!(
                "--reset-cache: clearing the prefix cache failed before a level ({why}); it may start warm"
            )),
        };
        if let Some(w) = warning
            && !self.warnings.contains(&w)
        {
            self.warnings.push(w);
        }
        if let Some(l) = self.level_mut(level) {
            l.cache_reset = Some(outcome);
        }
    }
}
