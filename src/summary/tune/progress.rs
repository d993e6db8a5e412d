//! What a configuration's run of a `servetop tune` knows of the tune it is part of: the
//! configurations so far, as the dashboard's tune table shows them (results.json
//! `tune_progress` of that run).

use serde::{Deserialize, Serialize};

/// The tune around this run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneProgress {
    /// The tune's directory.
    pub dir: String,
    /// The SLO every configuration is searched against.
    pub slo: String,
    /// This run's configuration: its index in `rows`.
    pub config: usize,
    /// The rate this run's search must beat (the early stop), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beat: Option<f64>,
    /// Every configuration, in the order run, as it stood when this run started.
    pub rows: Vec<TuneRow>,
}

/// One configuration as the tune table shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneRow {
    /// `-np 2 · --threads 1`.
    pub label: String,
    /// `pending`, `running`, `measured`, `stopped early`, `failed`.
    pub status: String,
    /// `3.1 req/s`, `below 3.1 req/s`, `-`.
    pub capacity: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_output_tokens_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_stream_tokens_per_s: Option<f64>,
}
