//! A level's figures per LoRA adapter (`--lora-modules`): each adapter's requests folded apart,
//! their throughput over the level's own window (the adapters share it, so their throughputs
//! add up to the level's).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::record::{Outcome, RequestRecord};

/// One adapter's figures at a level (results.json `lora.NAME`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoraStats {
    /// Its requests that completed, and that failed (cancelled ones are not counted).
    pub completed: u64,
    pub failed: u64,
    /// Its share of the level's requests that completed or failed (0..1).
    pub share: f64,
    /// Its completions and output tokens per second of the level's window.
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub mean_ttft_ms: Option<f64>,
    pub median_ttft_ms: Option<f64>,
    pub p99_ttft_ms: Option<f64>,
    pub mean_tpot_ms: Option<f64>,
    pub median_tpot_ms: Option<f64>,
    pub p99_tpot_ms: Option<f64>,
    pub median_e2el_ms: Option<f64>,
    pub p99_e2el_ms: Option<f64>,
    /// Its completed requests' mean prompt and output tokens: adapters compare like with like
    /// only over requests of like lengths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_input_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_output_tokens: Option<f64>,
}

#[derive(Clone, Debug, Default)]
struct Fold {
    completed: u64,
    failed: u64,
    input_tokens: u64,
    output_tokens: u64,
    ttft: Dist,
    tpot: Dist,
    e2el: Dist,
}

/// Folds a level's records by the adapter they named; records without one are left out.
#[derive(Clone, Debug, Default)]
pub struct LoraFold {
    by: BTreeMap<String, Fold>,
}

impl LoraFold {
    /// Folds a measured record that completed or failed.
    pub fn add(&mut self, r: &RequestRecord) {
        let Some(name) = &r.lora else {
            return;
        };
        let f = self.by.entry(name.clone()).or_default();
        match r.outcome {
            Outcome::Ok => {
                f.completed += 1;
                f.input_tokens += r.input_tokens;
                f.output_tokens += r.output_tokens;
                if let Some(v) = r.ttft_us {
                    f.ttft.record(v);
                }
                if let Some(v) = r.tpot_us() {
                    f.tpot.record(v.round() as u64);
                }
                if let Some(v) = r.e2e_us {
                    f.e2el.record(v);
                }
            }
            Outcome::Failed { .. } => f.failed += 1,
            Outcome::Cancelled => {}
        }
    }

    /// Each adapter's figures over a level window of `window_s` seconds.
    pub fn stats(&self, window_s: f64) -> BTreeMap<String, LoraStats> {
        let total: u64 = self.by.values().map(|f| f.completed + f.failed).sum();
        let per_s = |x: f64| if window_s > 0.0 { x / window_s } else { 0.0 };
        self.by
            .iter()
            .map(|(name, f)| {
                let (ttft, tpot, e2el) =
                    (f.ttft.stats(1e-3), f.tpot.stats(1e-3), f.e2el.stats(1e-3));
                let s = LoraStats {
                    completed: f.completed,
                    failed: f.failed,
                    share: if total > 0 {
                        (f.completed + f.failed) as f64 / total as f64
                    } else {
                        0.0
                    },
                    request_throughput: per_s(f.completed as f64),
                    output_throughput: per_s(f.output_tokens as f64),
                    mean_ttft_ms: ttft.as_ref().map(|d| d.mean),
                    median_ttft_ms: ttft.as_ref().map(|d| d.p50),
                    p99_ttft_ms: ttft.as_ref().map(|d| d.p99),
                    mean_tpot_ms: tpot.as_ref().map(|d| d.mean),
                    median_tpot_ms: tpot.as_ref().map(|d| d.p50),
                    p99_tpot_ms: tpot.as_ref().map(|d| d.p99),
                    median_e2el_ms: e2el.as_ref().map(|d| d.p50),
                    p99_e2el_ms: e2el.as_ref().map(|d| d.p99),
                    mean_input_tokens: (f.completed > 0)
                        .then(|| f.input_tokens as f64 / f.completed as f64),
                    mean_output_tokens: (f.completed > 0)
                        .then(|| f.output_tokens as f64 / f.completed as f64),
                };
                (name.clone(), s)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::tests::record;

    #[test]
    fn adapters_are_folded_apart_and_share_the_window() {
        let mut fold = LoraFold::default();
        for (name, ttft) in [("a", 100_000), ("a", 300_000), ("b", 50_000)] {
            let mut r = record(ttft, ttft + 1_000_000, 11);
            r.lora = Some(name.into());
            fold.add(&r);
        }
        let mut base = record(1, 2, 3);
        base.lora = None;
        fold.add(&base);
        let s = fold.stats(2.0);
        assert_eq!(s.len(), 2);
        let a = &s["a"];
        assert_eq!((a.completed, a.failed), (2, 0));
        assert!((a.share - 2.0 / 3.0).abs() < 1e-12);
        assert!((a.request_throughput - 1.0).abs() < 1e-12);
        assert!((a.output_throughput - 11.0).abs() < 1e-12);
        assert!((a.mean_ttft_ms.unwrap() - 200.0).abs() < 1e-9);
        // TPOT: (E2E − TTFT) / (11 − 1) = 100 ms for every request.
        assert!((a.median_tpot_ms.unwrap() - 100.0).abs() < 0.1);
        let b = &s["b"];
        assert!((b.mean_ttft_ms.unwrap() - 50.0).abs() < 1e-9);
        assert!((b.request_throughput - 0.5).abs() < 1e-12);
    }
}
