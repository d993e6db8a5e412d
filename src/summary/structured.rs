//! Structured output's cost (`--response-format`): each constrained level against its plain
//! twin, the level before it, which sent the same requests without the constraint.

use serde::{Deserialize, Serialize};

use super::{LevelSummary, RunSummary};

/// A constrained level against its plain twin (results.json `structured_overhead`): each
/// figure's change in percent of the plain one's, and the added milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StructuredOverhead {
    /// The plain twin's index.
    pub plain_level: u32,
    pub ttft_p50_pct: Option<f64>,
    pub ttft_p50_added_ms: Option<f64>,
    pub tpot_p50_pct: Option<f64>,
    pub tpot_p50_added_ms: Option<f64>,
    pub output_throughput_pct: Option<f64>,
    pub request_throughput_pct: Option<f64>,
    /// Mean output tokens of each: a constrained answer ends where its constraint does, the
    /// plain one at its planned length, so throughputs compare answers of these lengths.
    pub mean_output_tokens_plain: Option<f64>,
    pub mean_output_tokens_constrained: Option<f64>,
    /// The server's step as servetop sees it, the chunk gap p50 (one delivery a step): its
    /// change in % and in ms. TPOT divides it by the accept length, which the constraint may
    /// move too; this does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_p50_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_p50_added_ms: Option<f64>,
    /// Each twin's accept length as servetop saw it (tokens a delivery).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_length_plain: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_length_constrained: Option<f64>,
}

/// `c` against `p`: `(change in %, added)`.
fn change(c: Option<f64>, p: Option<f64>) -> (Option<f64>, Option<f64>) {
    match (c, p) {
        (Some(c), Some(p)) => ((p.abs() > 0.0).then(|| (c - p) / p * 100.0), Some(c - p)),
        _ => (None, None),
    }
}

/// The overhead of `constrained` over `plain`, once both have figures.
pub fn overhead(constrained: &LevelSummary, plain: &LevelSummary) -> Option<StructuredOverhead> {
    let (c, p) = (constrained.stats.as_ref()?, plain.stats.as_ref()?);
    let p50 = |d: Option<&crate::metrics::DistStats>| d.map(|d| d.p50);
    let (ttft_pct, ttft_ms) = change(p50(c.dists.ttft_ms.as_ref()), p50(p.dists.ttft_ms.as_ref()));
    let (tpot_pct, tpot_ms) = change(p50(c.dists.tpot_ms.as_ref()), p50(p.dists.tpot_ms.as_ref()));
    let (step_pct, step_ms) = change(
        p50(c.dists.chunk_gap_ms.as_ref()),
        p50(p.dists.chunk_gap_ms.as_ref()),
    );
    Some(StructuredOverhead {
        plain_level: plain.index,
        ttft_p50_pct: ttft_pct,
        ttft_p50_added_ms: ttft_ms,
        tpot_p50_pct: tpot_pct,
        tpot_p50_added_ms: tpot_ms,
        output_throughput_pct: change(
            Some(c.scalars.output_throughput),
            Some(p.scalars.output_throughput),
        )
        .0,
        request_throughput_pct: change(
            Some(c.scalars.request_throughput),
            Some(p.scalars.request_throughput),
        )
        .0,
        mean_output_tokens_plain: p.scalars.mean_output_tokens,
        mean_output_tokens_constrained: c.scalars.mean_output_tokens,
        step_p50_pct: step_pct,
        step_p50_added_ms: step_ms,
        accept_length_plain: plain.accept_length_client(),
        accept_length_constrained: constrained.accept_length_client(),
    })
}

impl RunSummary {
    /// Sets each constrained level's overhead over its twin (the level whose index is one
    /// less, in the same part of the run).
    pub fn compare_structured(&mut self) {
        for part in [&mut self.sweep, &mut self.rates, &mut self.long_context] {
            let plain: Vec<LevelSummary> = part
                .iter()
                .filter(|l| l.response_format.is_none())
                .cloned()
                .collect();
            for l in part.iter_mut().filter(|l| l.response_format.is_some()) {
                l.structured_overhead = plain
                    .iter()
                    .find(|p| p.index + 1 == l.index)
                    .and_then(|p| overhead(l, p));
            }
        }
    }

    /// The run without its constrained twins: the plan as the user would have run it without
    /// `--response-format` (what the findings and the charts' main lines are about).
    #[must_use]
    pub fn only_plain(&self) -> RunSummary {
        self.keep(|l| l.response_format.is_none())
    }

    /// The run's constrained levels alone.
    #[must_use]
    pub fn only_constrained(&self) -> RunSummary {
        self.keep(|l| l.response_format.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_percent_of_the_plain_figure() {
        assert_eq!(change(Some(12.0), Some(10.0)), (Some(20.0), Some(2.0)));
        assert_eq!(change(Some(8.0), Some(10.0)), (Some(-20.0), Some(-2.0)));
        assert_eq!(change(Some(1.0), Some(0.0)), (None, Some(1.0)));
        assert_eq!(change(None, Some(1.0)), (None, None));
    }
}
