//! The Pareto front of a tune: each configuration at each load it was measured at, as
//! (per-user tokens/s, aggregate tokens/s). A point is on the front when no other point is at
//! least as good on both and better on one — the loads and configurations worth choosing
//! between; every other point gives up one speed for nothing.

use serde::{Deserialize, Serialize};

use super::TuneConfig;

/// One configuration at one load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParetoPoint {
    /// The configuration's index in `tune.configs`.
    pub config: usize,
    /// Its level (`C=1`, `3.1 req/s`).
    pub level: String,
    pub per_user_tokens_per_s: f64,
    pub aggregate_tokens_per_s: f64,
    /// No other point is as fast per user and in aggregate, and faster in one.
    pub on_front: bool,
}

/// Every configuration's points, the front marked.
pub fn points(configs: &[TuneConfig]) -> Vec<ParetoPoint> {
    let mut all: Vec<ParetoPoint> = configs
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            c.points.iter().map(move |p| ParetoPoint {
                config: i,
                level: p.level.clone(),
                per_user_tokens_per_s: p.per_user_tokens_per_s,
                aggregate_tokens_per_s: p.aggregate_tokens_per_s,
                on_front: false,
            })
        })
        .filter(|p| p.per_user_tokens_per_s.is_finite() && p.aggregate_tokens_per_s.is_finite())
        .collect();
    let dominated: Vec<bool> = all
        .iter()
        .map(|p| all.iter().any(|q| dominates(q, p)))
        .collect();
    for (p, d) in all.iter_mut().zip(dominated) {
        p.on_front = !d;
    }
    all
}

/// `q` is at least as good as `p` on both speeds and better on one.
fn dominates(q: &ParetoPoint, p: &ParetoPoint) -> bool {
    q.per_user_tokens_per_s >= p.per_user_tokens_per_s
        && q.aggregate_tokens_per_s >= p.aggregate_tokens_per_s
        && (q.per_user_tokens_per_s > p.per_user_tokens_per_s
            || q.aggregate_tokens_per_s > p.aggregate_tokens_per_s)
}

/// The front's points, by per-user speed (the line the chart draws).
pub fn front(points: &[ParetoPoint]) -> Vec<&ParetoPoint> {
    let mut f: Vec<&ParetoPoint> = points.iter().filter(|p| p.on_front).collect();
    f.sort_by(|a, b| a.per_user_tokens_per_s.total_cmp(&b.per_user_tokens_per_s));
    f
}
