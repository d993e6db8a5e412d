//! A baseline to beat (`--baseline`): a previous run's levels reduced to what the comparison
//! reads, each level of this run matched to the baseline's level that measured the same thing,
//! and the change against it (Δ%, docs/metrics.md) with the verdict `--fail-on-regression` gates
//! on; and the same notion of a level's identity for two saved runs side by side (`report A B`:
//! [`level_differences`]). Data and arithmetic only: which run it came from is the caller's
//! business.

use serde::{Deserialize, Serialize};

use super::{LevelStatus, LevelSummary, RunSummary};
use crate::metrics::LevelStats;
use crate::metrics::curves::{self, at};
use crate::workload::LevelKind;
use crate::workload::content::ContentKind;

/// The previous run compared against, as results.json records it under `baseline`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// The run directory or results.json it was read from, as given.
    pub source: String,
    /// `model · engine · started_at` of the baseline run.
    pub label: String,
    /// The baseline's numbers came from servetop's simulator.
    pub simulated: bool,
    /// The baseline let the model end its answers (`--natural-stop`): its levels match only a
    /// run that did too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub natural_stop: bool,
    /// `--fail-on-regression`: the largest change for the worse, in %, a level may show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_on_regression_pct: Option<f64>,
    /// The baseline's levels that have results.
    pub levels: Vec<BaselineLevel>,
    /// This run's levels against their matches, filled in as they end.
    #[serde(default)]
    pub comparisons: Vec<LevelComparison>,
}

/// What one baseline level measured, and what identifies it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineLevel {
    pub kind: LevelKind,
    pub label: String,
    pub concurrency: u32,
    pub input_len: u64,
    pub output_len: u32,
    /// Measured requests the level planned.
    pub requests: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
    /// The kind of its prompts (`--content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<ContentKind>,
    /// The dataset category its requests were drawn from (`--categories`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub output_throughput: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub tpot_p50_ms: Option<f64>,
    /// The chart values: mean decode and prefill speed, mean TTFT in seconds.
    pub decode_tok_s: Option<f64>,
    pub prefill_tok_s: Option<f64>,
    pub ttft_mean_s: Option<f64>,
}

/// Identifies a level across runs: what it sent, not where it sat in the plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelKey {
    pub kind: LevelKind,
    pub concurrency: u32,
    pub input_len: u64,
    pub output_len: u32,
    /// Measured requests: a level's throughput over 8 requests is not its throughput over 10
    /// (the last wave of a closed loop runs part-empty).
    pub requests: u32,
    pub request_rate: Option<f64>,
    /// The kind of its prompts (`--content`; None: the default, `random`).
    pub content: Option<ContentKind>,
}

/// A level's content kind as compared: none is the default prompt, `random`.
fn content_name(k: Option<ContentKind>) -> &'static str {
    k.unwrap_or(ContentKind::Random).name()
}

impl BaselineLevel {
    /// A level's key and results as a baseline level (`None` without a completed request).
    pub fn new(key: LevelKey, label: String, stats: Option<&LevelStats>) -> Option<Self> {
        stats.filter(|s| s.scalars.completed > 0)?;
        Some(Self {
            kind: key.kind,
            label,
            concurrency: key.concurrency,
            input_len: key.input_len,
            output_len: key.output_len,
            requests: key.requests,
            request_rate: key.request_rate,
            content: key.content,
            category: None,
            output_throughput: at(stats, curves::OUTPUT_TOK_S),
            ttft_p50_ms: at(stats, curves::TTFT_MS.p50),
            tpot_p50_ms: at(stats, curves::TPOT_MS.p50),
            decode_tok_s: at(stats, curves::DECODE_TOK_S),
            prefill_tok_s: at(stats, curves::PREFILL_TOK_S),
            ttft_mean_s: at(stats, curves::TTFT_MEAN_S),
        })
    }

    /// What identifies this level (its [`LevelKey`]).
    pub fn key(&self) -> LevelKey {
        LevelKey {
            kind: self.kind,
            concurrency: self.concurrency,
            input_len: self.input_len,
            output_len: self.output_len,
            requests: self.requests,
            request_rate: self.request_rate,
            content: self.content,
        }
    }

    /// Whether this level measured what `key` describes: no [`LevelKey::differences`].
    /// Multi-turn levels are not compared.
    pub fn matches(&self, key: &LevelKey) -> bool {
        key.kind != LevelKind::MultiTurn && self.key().differences(key).is_empty()
    }

    /// [`matches`](Self::matches) but for the number of requests (to say why nothing matched).
    pub fn matches_but_requests(&self, key: &LevelKey) -> bool {
        self.matches(&LevelKey {
            requests: self.requests,
            ..*key
        })
    }
}

/// One key on which two levels differ, with each one's value: `input_len 200 vs 2000`.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyDifference {
    /// The key, as results.json names it.
    pub key: &'static str,
    /// Its value in the first level and in the other.
    pub values: (String, String),
}

impl KeyDifference {
    /// `key`'s values `a` and `b` when they differ.
    pub fn of<T: PartialEq + std::fmt::Display>(key: &'static str, a: &T, b: &T) -> Option<Self> {
        (a != b).then(|| Self {
            key,
            values: (a.to_string(), b.to_string()),
        })
    }
}

impl std::fmt::Display for KeyDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} vs {}", self.key, self.values.0, self.values.1)
    }
}

/// Two offered rates close enough to be the same setting (a rate read back from JSON).
pub fn same_rate(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()),
        _ => false,
    }
}

impl LevelKey {
    /// Where `self` and `other` measured different things, each key with both values: the
    /// kind (when it differs, nothing else is said), the place (a sweep level's concurrency,
    /// a rate or trace level's offered rate; a long-context level's place is its input
    /// length), the input and output lengths and the number of measured requests. Empty: the
    /// same measurement.
    pub fn differences(&self, other: &LevelKey) -> Vec<KeyDifference> {
        if self.kind != other.kind {
            return KeyDifference::of("kind", &self.kind.name(), &other.kind.name())
                .into_iter()
                .collect();
        }
        let place = match self.kind {
            LevelKind::Sweep | LevelKind::MultiTurn | LevelKind::Sessions => {
                KeyDifference::of("concurrency", &self.concurrency, &other.concurrency)
            }
            LevelKind::LongContext => None,
            LevelKind::Rate | LevelKind::Trace => {
                (!same_rate(self.request_rate, other.request_rate)).then(|| KeyDifference {
                    key: "request_rate",
                    values: (rate_text(self.request_rate), rate_text(other.request_rate)),
                })
            }
        };
        [
            place,
            KeyDifference::of("input_len", &self.input_len, &other.input_len),
            KeyDifference::of("output_len", &self.output_len, &other.output_len),
            KeyDifference::of("requests", &self.requests, &other.requests),
            KeyDifference::of(
                "content",
                &content_name(self.content),
                &content_name(other.content),
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// Where level `a` of run `ra` and level `b` of run `rb` sent different requests, each key
/// with both values (`input_len 200 vs 2000`): their [`LevelKey::differences`] (a level of a
/// `--level-seconds` run, whose `requests` is what it sent, by its seconds instead), then what
/// else shapes a request: the levels' shared prefix, length spread (`range_ratio`),
/// `response_format` and `thinking_budget`, and the runs' `backend`, `dataset`, `images`,
/// LoRA adapters and natural stops. Empty: the two measured the same thing and their change means something.
pub fn level_differences(
    (ra, a): (&RunSummary, &LevelSummary),
    (rb, b): (&RunSummary, &LevelSummary),
) -> Vec<KeyDifference> {
    let mut out = a.key().differences(&b.key());
    if out.first().is_some_and(|d| d.key == "kind") {
        return out;
    }
    if a.seconds.is_some() || b.seconds.is_some() {
        out.retain(|d| d.key != "requests");
        out.extend(KeyDifference::of(
            "seconds",
            &opt(a.seconds.map(crate::fmt::fmt_rate)),
            &opt(b.seconds.map(crate::fmt::fmt_rate)),
        ));
    }
    let format = |l: &LevelSummary| l.response_format.clone().unwrap_or_else(|| "plain".into());
    let backend = |s: &RunSummary| opt(s.backend.map(crate::client::Backend::path));
    let dataset = |s: &RunSummary| opt(s.config.dataset.as_ref().map(|p| p.display()));
    let images = |s: &RunSummary| {
        s.config.image_mix().map_or_else(
            || "none".into(),
            |m| format!("{} of {}", m.per_request, m.sizes.describe()),
        )
    };
    let lora = |s: &RunSummary| {
        if s.config.lora_modules.is_empty() {
            "none".into()
        } else {
            format!(
                "{} ({})",
                s.config.lora_modules.join(","),
                s.config.lora_dist.label()
            )
        }
    };
    out.extend(
        [
            KeyDifference::of(
                "shared_prefix_tokens",
                &a.shared_prefix_tokens,
                &b.shared_prefix_tokens,
            ),
            KeyDifference::of(
                "range_ratio",
                &opt(a.range_ratio.map(crate::fmt::fmt_rate)),
                &opt(b.range_ratio.map(crate::fmt::fmt_rate)),
            ),
            KeyDifference::of("response_format", &format(a), &format(b)),
            KeyDifference::of(
                "category",
                &opt(a.category.as_ref()),
                &opt(b.category.as_ref()),
            ),
            KeyDifference::of(
                "thinking_budget",
                &opt(a.thinking_budget),
                &opt(b.thinking_budget),
            ),
            KeyDifference::of("backend", &backend(ra), &backend(rb)),
            KeyDifference::of("dataset", &dataset(ra), &dataset(rb)),
            KeyDifference::of("images", &images(ra), &images(rb)),
            KeyDifference::of("lora_modules", &lora(ra), &lora(rb)),
            KeyDifference::of(
                "natural_stop",
                &ra.config.natural_stop,
                &rb.config.natural_stop,
            ),
            KeyDifference::of("length_dist", &length_dist(ra), &length_dist(rb)),
            KeyDifference::of("shape_mix", &shape_mix(ra), &shape_mix(rb)),
        ]
        .into_iter()
        .flatten(),
    );
    out
}

/// How a run drew its requests' lengths around a level's: `lognormal:0.5`, or `none`.
fn length_dist(s: &RunSummary) -> String {
    opt(s
        .config
        .lognormal_sigma
        .map(|v| format!("lognormal:{}", crate::fmt::fmt_rate(v))))
}

/// A run's mix of shapes inside each level, or `none`.
fn shape_mix(s: &RunSummary) -> String {
    if s.config.shape_mix.is_empty() {
        "none".into()
    } else {
        crate::workload::shapes::WeightedShape::describe(&s.config.shape_mix)
    }
}

/// A value, or `none`.
fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "none".into(), |v| v.to_string())
}

fn rate_text(r: Option<f64>) -> String {
    r.map_or_else(
        || "none".into(),
        |r| format!("{} req/s", crate::fmt::fmt_rate(r)),
    )
}

/// Of `planned` (label and key of each level of this run), those that match a baseline level
/// but for their number of requests, as `C=8: 8 there, 10 here`: why they are not compared.
pub fn other_request_counts(
    levels: &[BaselineLevel],
    planned: &[(String, LevelKey)],
) -> Vec<String> {
    planned
        .iter()
        .filter(|(_, k)| !levels.iter().any(|b| b.matches(k)))
        .filter_map(|(label, k)| {
            let b = levels.iter().find(|b| b.matches_but_requests(k))?;
            Some(format!(
                "{label}: {} there, {} here",
                b.requests, k.requests
            ))
        })
        .collect()
}

/// Whether a plan (`planned`: the label and key of each of its levels; `simulated`: against
/// servetop's simulator) can be compared with `b`, decided before the run starts. `Ok(None)`:
/// it can. `Ok(Some(warning))`: the run goes on but compares nothing, or not like with like.
/// `Err`: a gate (`--fail-on-regression`) that would compare nothing, which is bad input.
pub fn check_plan(
    b: &Baseline,
    planned: &[(String, LevelKey)],
    simulated: bool,
) -> Result<Option<String>, String> {
    let shared = planned
        .iter()
        .filter(|(_, key)| b.levels.iter().any(|l| l.matches(key)))
        .count();
    let counts = other_request_counts(&b.levels, planned);
    if shared == 0 {
        let msg = no_match(b, &counts);
        return if b.fail_on_regression_pct.is_some() {
            Err(msg)
        } else {
            Ok(Some(msg))
        };
    }
    if !counts.is_empty() {
        return Ok(Some(format!(
            "--baseline {}: not compared, other request counts ({}); a throughput over another number of requests is not the same measurement",
            b.source,
            counts.join("; ")
        )));
    }
    if b.simulated != simulated {
        return Ok(Some(format!(
            "--baseline {}: one run is against servetop's simulator and the other is not",
            b.source
        )));
    }
    Ok(None)
}

/// Why no level of a plan can be compared with the baseline's, in one line (`counts`: the
/// levels that match but for their number of requests, [`other_request_counts`]).
pub fn no_match(b: &Baseline, counts: &[String]) -> String {
    if counts.is_empty() {
        let theirs: Vec<&str> = b.levels.iter().map(|l| l.label.as_str()).collect();
        format!(
            "--baseline {}: no level of this plan matches one of the baseline's ({}; levels match by kind, concurrency, context or rate, input/output lengths and number of requests)",
            b.source,
            theirs.join(", ")
        )
    } else {
        format!(
            "--baseline {}: the baseline's levels sent other numbers of requests ({}); run with the same --requests-per-level and --min-requests",
            b.source,
            counts.join("; ")
        )
    }
}

/// One level of this run against its baseline level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelComparison {
    pub index: u32,
    pub label: String,
    /// Δ% of aggregate output tokens per second (positive: faster).
    pub output_throughput_pct: Option<f64>,
    /// Δ% of TTFT p50 (positive: slower).
    pub ttft_p50_pct: Option<f64>,
    /// Δ% of TPOT p50 (positive: slower).
    pub tpot_p50_pct: Option<f64>,
    /// Why the level is worse than the baseline by more than `--fail-on-regression`; none when
    /// within it or when no limit was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regression: Option<String>,
}

/// The change from `base` to `now` in percent of `base` (none when either is missing or the
/// base is not positive).
pub fn pct(base: Option<f64>, now: Option<f64>) -> Option<f64> {
    match (base, now) {
        (Some(b), Some(n)) if b > 0.0 && b.is_finite() && n.is_finite() => {
            Some((n - b) / b * 100.0)
        }
        _ => None,
    }
}

/// `stats` (a level of this run, `None` when it measured nothing) against `base`, judged against
/// `limit` (%). A level the baseline measured and this run did not is a regression whenever a
/// limit is set: a gate must not pass an engine that stopped answering at C=64.
pub fn compare(
    index: u32,
    label: String,
    base: &BaselineLevel,
    stats: Option<&LevelStats>,
    limit: Option<f64>,
) -> LevelComparison {
    let measured = stats.is_some_and(|s| s.scalars.completed > 0);
    let throughput_d = pct(base.output_throughput, at(stats, curves::OUTPUT_TOK_S));
    let first_token_d = pct(base.ttft_p50_ms, at(stats, curves::TTFT_MS.p50));
    let per_token_d = pct(base.tpot_p50_ms, at(stats, curves::TPOT_MS.p50));
    let regression = limit.and_then(|lim| {
        if !measured {
            return Some(format!("{label}: not measured (the baseline measured it)"));
        }
        // Worse is lower throughput, higher latency.
        let worse: Vec<String> = [
            ("out tok/s", throughput_d.map(|d| -d), throughput_d),
            ("TTFT p50", first_token_d, first_token_d),
            ("TPOT p50", per_token_d, per_token_d),
        ]
        .into_iter()
        .filter_map(|(name, worse_by, d)| {
            let (w, d) = (worse_by?, d?);
            (w > lim).then(|| format!("{name} {}", fmt_pct(d)))
        })
        .collect();
        (!worse.is_empty()).then(|| format!("{label}: {} (limit {lim}%)", worse.join(", ")))
    });
    LevelComparison {
        index,
        label,
        output_throughput_pct: throughput_d,
        ttft_p50_pct: first_token_d,
        tpot_p50_pct: per_token_d,
        regression,
    }
}

/// A change as the tables write it: `+12%`, `-3.4%`, `0%` (two significant digits under 10).
pub fn fmt_pct(d: f64) -> String {
    let r = if d.abs() < 9.95 {
        (d * 10.0).round() / 10.0
    } else {
        d.round()
    };
    if r == 0.0 {
        "0%".into()
    } else if r.abs() < 9.95 && r.fract() != 0.0 {
        format!("{r:+.1}%")
    } else {
        format!("{r:+.0}%")
    }
}

impl RunSummary {
    /// This run as a baseline for another: its levels with results (`source`: where it was
    /// read from).
    pub fn as_baseline(&self, source: String) -> Baseline {
        let label = format!(
            "{} · {} · {}",
            self.server
                .as_ref()
                .map_or("unknown model", |s| s.model.as_str()),
            self.server
                .as_ref()
                .map_or("unknown engine", |s| s.engine.name()),
            self.started_at
        );
        Baseline {
            source,
            label,
            simulated: self.simulated,
            natural_stop: self.config.natural_stop,
            fail_on_regression_pct: None,
            levels: self
                .levels()
                .filter_map(|l| {
                    BaselineLevel::new(l.key(), l.label(), l.stats.as_ref()).map(|b| {
                        BaselineLevel {
                            category: l.category.clone(),
                            ..b
                        }
                    })
                })
                .collect(),
            comparisons: Vec::new(),
        }
    }

    /// The baseline's level that measured what `l` measures (none where one of the two runs let
    /// the model end its answers and the other did not).
    pub fn baseline_for(&self, l: &LevelSummary) -> Option<&BaselineLevel> {
        let key = l.key();
        self.baseline
            .as_ref()
            .filter(|b| b.natural_stop == self.config.natural_stop)?
            .levels
            .iter()
            .find(|b| b.matches(&key) && b.category == l.category)
    }

    /// Compares every ended level that has a baseline match (called as levels end; the
    /// comparisons are what results.json and the exit code read).
    pub fn compare_to_baseline(&mut self) {
        let Some(limit) = self.baseline.as_ref().map(|b| b.fail_on_regression_pct) else {
            return;
        };
        let ended =
            |l: &LevelSummary| !matches!(l.status, LevelStatus::Waiting | LevelStatus::Running);
        let comparisons: Vec<LevelComparison> = self
            .levels()
            .filter(|l| ended(l))
            .filter_map(|l| {
                let base = self.baseline_for(l)?;
                Some(crate::summary::baseline::compare(
                    l.index,
                    l.label(),
                    base,
                    l.stats.as_ref(),
                    limit,
                ))
            })
            .collect();
        if let Some(b) = self.baseline.as_mut() {
            b.comparisons = comparisons;
        }
    }

    /// The levels worse than the baseline by more than `--fail-on-regression`, each with why.
    pub fn regressions(&self) -> Vec<&str> {
        self.baseline.as_ref().map_or_else(Vec::new, |b| {
            b.comparisons
                .iter()
                .filter_map(|c| c.regression.as_deref())
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(tok_s: f64, ttft: f64, per_token: f64) -> BaselineLevel {
        BaselineLevel {
            kind: LevelKind::Sweep,
            label: "C=8".into(),
            concurrency: 8,
            input_len: 1000,
            output_len: 500,
            requests: 24,
            request_rate: None,
            content: None,
            category: None,
            output_throughput: Some(tok_s),
            ttft_p50_ms: Some(ttft),
            tpot_p50_ms: Some(per_token),
            decode_tok_s: None,
            prefill_tok_s: None,
            ttft_mean_s: None,
        }
    }

    fn stats(tok_s: f64, ttft: f64, per_token: f64) -> LevelStats {
        let mut s = LevelStats::default();
        s.scalars.completed = 10;
        s.scalars.output_throughput = tok_s;
        let d = |p50: f64| crate::metrics::DistStats {
            count: 10,
            mean: p50,
            std: 0.0,
            min: p50,
            p50,
            p90: p50,
            p95: p50,
            p99: p50,
            p999: p50,
            max: p50,
            extra: Vec::new(),
        };
        s.dists.ttft_ms = Some(d(ttft));
        s.dists.tpot_ms = Some(d(per_token));
        s
    }

    #[test]
    fn deltas_are_percent_of_the_baseline() {
        let c = compare(
            3,
            "C=8".into(),
            &level(500.0, 200.0, 20.0),
            Some(&stats(450.0, 250.0, 19.0)),
            None,
        );
        assert_eq!(c.output_throughput_pct, Some(-10.0));
        assert_eq!(c.ttft_p50_pct, Some(25.0));
        assert!((c.tpot_p50_pct.unwrap() + 5.0).abs() < 1e-9);
        assert_eq!(c.regression, None, "no limit, no verdict");
    }

    #[test]
    fn a_level_worse_than_the_limit_is_a_regression_and_says_why() {
        let base = level(500.0, 200.0, 20.0);
        let now = stats(450.0, 250.0, 19.0);
        // Throughput 10% down and TTFT 25% up: over a 20% limit only by TTFT.
        let c = compare(3, "C=8".into(), &base, Some(&now), Some(20.0));
        assert_eq!(
            c.regression.as_deref(),
            Some("C=8: TTFT p50 +25% (limit 20%)")
        );
        let c = compare(3, "C=8".into(), &base, Some(&now), Some(5.0));
        assert_eq!(
            c.regression.as_deref(),
            Some("C=8: out tok/s -10%, TTFT p50 +25% (limit 5%)")
        );
        assert_eq!(
            compare(3, "C=8".into(), &base, Some(&now), Some(30.0)).regression,
            None
        );
        // Better is never a regression, however large the change.
        let better = stats(5000.0, 20.0, 2.0);
        assert_eq!(
            compare(3, "C=8".into(), &base, Some(&better), Some(1.0)).regression,
            None
        );
        // Measured before, not now: a regression.
        assert!(
            compare(3, "C=8".into(), &base, None, Some(50.0))
                .regression
                .is_some_and(|r| r.contains("not measured"))
        );
    }

    #[test]
    fn levels_match_by_what_they_sent() {
        let base = level(1.0, 1.0, 1.0);
        let key = LevelKey {
            kind: LevelKind::Sweep,
            concurrency: 8,
            input_len: 1000,
            output_len: 500,
            requests: 24,
            request_rate: None,
            content: None,
        };
        assert!(base.matches(&key));
        // The default prompts are random's; another kind is another measurement.
        assert!(base.matches(&LevelKey {
            content: Some(ContentKind::Random),
            ..key
        }));
        let code = LevelKey {
            content: Some(ContentKind::Code),
            ..key
        };
        assert!(!base.matches(&code));
        assert_eq!(
            base.key().differences(&code)[0].to_string(),
            "content random vs code"
        );
        let fewer = LevelKey {
            requests: 16,
            ..key
        };
        assert!(!base.matches(&fewer) && base.matches_but_requests(&fewer));
        assert!(!base.matches(&LevelKey {
            concurrency: 16,
            ..key
        }));
        assert!(!base.matches(&LevelKey {
            output_len: 128,
            ..key
        }));
        assert!(!base.matches(&LevelKey {
            kind: LevelKind::LongContext,
            ..key
        }));
    }

    #[test]
    fn changes_print_compactly() {
        assert_eq!(fmt_pct(0.04), "0%");
        assert_eq!(fmt_pct(3.44), "+3.4%");
        assert_eq!(fmt_pct(-3.0), "-3%");
        assert_eq!(fmt_pct(-12.4), "-12%");
        assert_eq!(fmt_pct(150.0), "+150%");
    }
}
