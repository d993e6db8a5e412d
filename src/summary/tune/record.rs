//! A tune's own results.json, in the tune's directory (each configuration's run has its own in
//! its sub-directory): written when the tune starts and after every configuration
//! (`export::tune::save`), so an interrupted tune can be resumed from it.

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
    /// Marks it updated now (before it is written: `export::tune::save`).
    pub fn touch(&mut self) {
        self.updated_at = crate::summary::now_rfc3339();
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
