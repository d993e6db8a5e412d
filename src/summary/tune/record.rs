//! A tune's own results.json, in the tune's directory (each configuration's run has its own in
//! its sub-directory): written when the tune starts and after every configuration, so an
//! interrupted tune can be resumed from it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::TuneSummary;
use crate::config::RunConfig;
use crate::event::RunState;
use crate::summary::ToolInfo;

/// The tune directory's results.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneRun {
    pub tool: ToolInfo,
    /// `running` while it runs, then `finished` or `interrupted`.
    pub state: RunState,
    pub started_at: String,
    pub updated_at: String,
    /// Whether any configuration's server was servetop's simulator (a simulated tune).
    pub simulated: bool,
    /// The `--serve-param` flags as given (ranges unexpanded).
    pub serve_param: Vec<String>,
    /// The plan each configuration runs (its --serve command the template the parameters go
    /// into).
    pub config: RunConfig,
    pub tune: TuneSummary,
}

impl TuneRun {
    /// Writes it to `dir/results.json` (atomically: a reader never sees half of it).
    pub fn save(&mut self, dir: &Path) -> Result<(), String> {
        self.updated_at = crate::summary::now_rfc3339();
        let path = dir.join("results.json");
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| e.to_string())?;
        crate::export::write_atomic(&path, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// Reads `dir/results.json` back, saying so when it is not a tune's.
    pub fn load(dir: &Path) -> Result<Self, String> {
        let path = dir.join("results.json");
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{} is not the results of a servetop tune: {e}",
                path.display()
            )
        })
    }
}

/// Whether the results.json bytes are a tune's (its `tune` section at the top).
pub fn is_tune(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        tune: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(bytes).is_ok_and(|p| p.tune.is_some())
}
