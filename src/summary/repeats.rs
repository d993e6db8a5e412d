//! `--repeat N`: each level's figures across its runs — their mean, a 95 % confidence interval
//! (Student's t over the runs' values), and whether the runs disagree beyond their own
//! sampling intervals (docs/metrics.md "Repeated runs").

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::metrics::LevelStats;
use crate::summary::{LevelStatus, RunSummary};

/// The figures given a mean and an interval, under their results.json names.
pub const FIGURES: [&str; 12] = [
    "output_throughput",
    "request_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
];

/// Means whose runs are checked against each other: each run's own 95 % interval is
/// `mean ± 1.96 · std / √count` over its requests.
const CHECKED: [(&str, &str, &str); 2] = [
    ("mean_ttft_ms", "std_ttft_ms", "ttft_ms_count"),
    ("mean_tpot_ms", "std_tpot_ms", "tpot_ms_count"),
];

/// The 0.975 quantile of Student's t with `df` degrees of freedom (tabulated to 30, then
/// `1.96 + 2.4 / df`, within 0.002 of the exact value).
pub fn t975(df: u32) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df as usize - 1],
        _ => 1.96 + 2.4 / f64::from(df),
    }
}

/// Mean and 95 % interval of `xs`: `mean ± t(n − 1) · s / √n` (None for fewer than two).
pub fn interval(xs: &[f64]) -> Option<(f64, [f64; 2])> {
    let n = xs.len();
    if n < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t975(n as u32 - 1) * (var / n as f64).sqrt();
    Some((mean, [mean - half, mean + half]))
}

/// What the runs of one level say together.
#[derive(Debug, Default, PartialEq)]
pub struct Across {
    pub mean: BTreeMap<String, f64>,
    pub ci95: BTreeMap<String, [f64; 2]>,
    pub disagree: Vec<String>,
}

fn flat(s: &LevelStats) -> Map<String, Value> {
    Map::from(s.clone())
}

/// The runs' figures together: means from one run on, intervals and the check from two.
pub fn across(runs: &[&LevelStats]) -> Across {
    let flats: Vec<Map<String, Value>> = runs.iter().map(|s| flat(s)).collect();
    let get = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_f64);
    let mut out = Across::default();
    for k in FIGURES {
        let xs: Vec<f64> = flats.iter().filter_map(|m| get(m, k)).collect();
        if xs.is_empty() {
            continue;
        }
        out.mean
            .insert(k.into(), xs.iter().sum::<f64>() / xs.len() as f64);
        if let Some((_, ci)) = interval(&xs) {
            out.ci95.insert(k.into(), ci);
        }
    }
    for (mean, std, count) in CHECKED {
        let own: Vec<[f64; 2]> = flats
            .iter()
            .filter_map(|m| {
                let (x, s, n) = (get(m, mean)?, get(m, std)?, get(m, count)?);
                let half = 1.96 * s / n.max(1.0).sqrt();
                Some([x - half, x + half])
            })
            .collect();
        let highest_low = own.iter().map(|c| c[0]).fold(f64::NEG_INFINITY, f64::max);
        let lowest_high = own.iter().map(|c| c[1]).fold(f64::INFINITY, f64::min);
        if own.len() >= 2 && highest_low > lowest_high {
            out.disagree.push(mean.into());
        }
    }
    out
}

impl RunSummary {
    /// The levels that ran more than once, each by its first run (which carries the level's
    /// mean and interval, as every run does).
    pub fn repeated_levels(&self) -> impl Iterator<Item = &crate::summary::LevelSummary> {
        self.levels()
            .filter(|l| l.repeat.is_some_and(|r| r.n == 1 && r.of > 1))
    }

    /// How many runs of the level whose first run is `first` finished.
    pub fn runs_done(&self, first: u32) -> usize {
        self.levels()
            .filter(|m| m.repeat.is_some_and(|r| r.first == first) && m.status == LevelStatus::Done)
            .count()
    }

    /// Sets each repeated level's mean, interval and disagreement over its finished runs (on
    /// every one of its runs), after a level ends.
    pub fn summarize_repeats(&mut self) {
        let mut groups: BTreeMap<u32, Vec<LevelStats>> = BTreeMap::new();
        for l in self.levels() {
            let Some(r) = l.repeat else { continue };
            let done = groups.entry(r.first).or_default();
            if l.status == LevelStatus::Done
                && let Some(s) = l.stats.as_ref().filter(|s| s.scalars.completed > 0)
            {
                done.push(s.clone());
            }
        }
        let across: BTreeMap<u32, Across> = groups
            .into_iter()
            .map(|(k, v)| (k, across(&v.iter().collect::<Vec<_>>())))
            .collect();
        for l in self.levels_mut() {
            if let Some(a) = l.repeat.and_then(|r| across.get(&r.first)) {
                l.repeat_mean.clone_from(&a.mean);
                l.ci95.clone_from(&a.ci95);
                l.repeats_disagree.clone_from(&a.disagree);
            }
        }
    }
}

/// `215 ± 4.1`: a mean with its interval's half width (`-` without a mean).
pub fn plus_minus(mean: Option<f64>, ci: Option<&[f64; 2]>) -> String {
    match (mean, ci) {
        (Some(m), Some(c)) => format!(
            "{} ± {}",
            crate::fmt::num(Some(m)),
            crate::fmt::num(Some((c[1] - c[0]) / 2.0))
        ),
        (Some(m), None) => crate::fmt::num(Some(m)),
        (None, _) => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{DistStats, LevelDists, LevelScalars};

    fn run(tok_s: f64, ttft_mean: f64, ttft_std: f64, n: u64) -> LevelStats {
        let d = DistStats {
            count: n,
            mean: ttft_mean,
            std: ttft_std,
            min: ttft_mean,
            p50: ttft_mean,
            p90: ttft_mean,
            p95: ttft_mean,
            p99: ttft_mean,
            p999: ttft_mean,
            max: ttft_mean,
            extra: Vec::new(),
        };
        LevelStats {
            scalars: LevelScalars {
                completed: n,
                output_throughput: tok_s,
                ..LevelScalars::default()
            },
            dists: LevelDists {
                ttft_ms: Some(d),
                ..LevelDists::default()
            },
        }
    }

    #[test]
    fn the_interval_is_students_t_over_the_runs() {
        // Mean 2, s = 1, n = 3: 2 ± 4.303 / √3.
        let (m, ci) = interval(&[1.0, 2.0, 3.0]).unwrap();
        let half = 4.303 / 3f64.sqrt();
        assert!((m - 2.0).abs() < 1e-12);
        assert!((ci[0] - (2.0 - half)).abs() < 1e-12 && (ci[1] - (2.0 + half)).abs() < 1e-12);
        assert!(interval(&[5.0]).is_none());
        assert!((t975(40) - 2.021).abs() < 0.002);
        assert!((t975(120) - 1.980).abs() < 0.002);
    }

    #[test]
    fn runs_give_means_intervals_and_disagreement() {
        let (a, b, c) = (
            run(100.0, 50.0, 10.0, 100),
            run(104.0, 51.0, 10.0, 100),
            run(102.0, 49.0, 10.0, 100),
        );
        let x = across(&[&a, &b, &c]);
        assert!((x.mean["output_throughput"] - 102.0).abs() < 1e-12);
        let ci = x.ci95["output_throughput"];
        assert!(ci[0] < 102.0 && ci[1] > 102.0);
        // Each run's mean TTFT ± 1.96 · 10 / √100 = ± 1.96 ms: 49, 50 and 51 overlap.
        assert!(x.disagree.is_empty(), "{:?}", x.disagree);
        // A run 10 ms slower with the same spread does not overlap.
        let d = run(101.0, 60.0, 10.0, 100);
        let y = across(&[&a, &b, &d]);
        assert_eq!(y.disagree, ["mean_ttft_ms"]);
        // One run: a mean, no interval.
        let one = across(&[&a]);
        assert!(one.ci95.is_empty() && one.mean.contains_key("median_ttft_ms"));
        assert_eq!(plus_minus(Some(102.0), Some(&[100.0, 104.0])), "102 ± 2.00");
    }
}
