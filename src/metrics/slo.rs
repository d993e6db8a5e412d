//! Service-level objectives: per-request goodput (docs/metrics.md "Per level", `goodput`) and
//! the per-level verdict at a chosen percentile, with its order-statistics confidence interval.
//!
//! Two questions, kept apart on purpose:
//! - **Goodput** asks, request by request, whether each one met every per-request objective
//!   (TTFT, TPOT, E2E) and counts those per second. ITL is a per-token quantity with no single
//!   value per request, so it is not part of goodput.
//! - **A level meets the SLO** when, for every metric given, the chosen percentile (say p90) is
//!   within its limit. Request-weighted metrics (TTFT, TPOT, E2E) take failed requests into the
//!   percentile as values above every limit: a failure is a miss, never silently dropped. ITL is
//!   token-weighted over successful requests; failures still count, through the rule that a
//!   level where more than `100 − p` % of the requests failed cannot meet the SLO.
//!
//! The percentile of a finite level is an estimate. Its distribution-free confidence interval
//! comes from order statistics: the number `B` of samples below the true p-quantile is
//! Binomial(n, p), so `[X_(l), X_(u)]` covers it with probability `P(l ≤ B < u)`. When that
//! interval straddles the limit, the verdict could go the other way on a second run of the same
//! level, and it is flagged as uncertain.

use serde::{Deserialize, Serialize};

use super::dist::Dist;
use super::record::RequestRecord;

/// Percentile at which a level is judged when `--slo-percentile` is not given.
pub const DEFAULT_PERCENTILE: f64 = 90.0;
/// Confidence level of the interval around a level's percentile.
pub const CONFIDENCE: f64 = 0.95;

fn default_percentile() -> f64 {
    DEFAULT_PERCENTILE
}

/// Service-level objectives, in milliseconds, and the percentile a level must meet them at.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    /// Inter-token latency (token-weighted); judged per level only, not per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e2el_ms: Option<f64>,
    /// The percentile (0–100, exclusive) each metric of a level must be within its limit at.
    #[serde(default = "default_percentile")]
    pub percentile: f64,
}

impl Default for Slo {
    fn default() -> Self {
        Self {
            ttft_ms: None,
            tpot_ms: None,
            itl_ms: None,
            e2el_ms: None,
            percentile: DEFAULT_PERCENTILE,
        }
    }
}

/// The metrics an SLO can name, in display order.
const METRICS: [&str; 4] = ["ttft", "tpot", "itl", "e2el"];

impl Slo {
    /// Parses `ttft:2000,tpot:50,itl:100,e2el:10000` (milliseconds; `e2e` is accepted for
    /// `e2el`), at the default percentile.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut slo = Slo::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once(':')
                .ok_or_else(|| format!("SLO '{part}' must look like ttft:2000"))?;
            let v: f64 = v
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v > 0.0)
                .ok_or_else(|| format!("SLO '{part}': '{v}' is not a positive number of ms"))?;
            match k.trim() {
                "ttft" => slo.ttft_ms = Some(v),
                "tpot" => slo.tpot_ms = Some(v),
                "itl" => slo.itl_ms = Some(v),
                "e2el" | "e2e" => slo.e2el_ms = Some(v),
                other => {
                    return Err(format!(
                        "unknown SLO metric '{other}' (use ttft, tpot, itl, e2el)"
                    ));
                }
            }
        }
        if slo.is_empty() {
            return Err("empty SLO".into());
        }
        Ok(slo)
    }

    /// Checks a percentile given on the command line (`--slo-percentile`).
    pub fn parse_percentile(s: &str) -> Result<f64, String> {
        let t = s.trim();
        let t = t.strip_prefix(['p', 'P']).unwrap_or(t);
        t.parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && *p > 0.0 && *p < 100.0)
            .ok_or_else(|| {
                format!("'{s}' is not a percentile between 0 and 100 (e.g. 90, 99, p99.9)")
            })
    }

    /// Whether no objective is set.
    pub fn is_empty(&self) -> bool {
        self.limits().next().is_none()
    }

    /// `(metric, limit in ms)` of every objective set, in display order.
    pub fn limits(&self) -> impl Iterator<Item = (&'static str, f64)> + '_ {
        METRICS
            .into_iter()
            .zip([self.ttft_ms, self.tpot_ms, self.itl_ms, self.e2el_ms])
            .filter_map(|(m, l)| Some((m, l?)))
    }

    /// `ttft:2000,tpot:50 at p90`.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .limits()
            .map(|(m, l)| format!("{m}:{}", crate::fmt::fmt_rate(l)))
            .collect();
        format!("{} at p{}", parts.join(","), fmt_pct(self.percentile))
    }

    /// Whether a successful request meets every per-request objective (TTFT, TPOT, E2E; ITL
    /// has no single value per request).
    pub fn met_by(&self, r: &RequestRecord) -> bool {
        let ok = |limit: Option<f64>, got_us: Option<f64>| match (limit, got_us) {
            (None, _) => true,
            (Some(l), Some(g)) => g * 1e-3 <= l,
            (Some(_), None) => false,
        };
        r.is_ok()
            && ok(self.ttft_ms, r.ttft_us.map(|v| v as f64))
            && ok(self.tpot_ms, r.tpot_us().or(Some(0.0)))
            && ok(self.e2el_ms, r.e2e_us.map(|v| v as f64))
    }
}

/// `90` -> `90`, `99.9` -> `99.9`.
pub fn fmt_pct(p: f64) -> String {
    crate::fmt::fmt_rate(p)
}

/// One metric of a level against its limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricCheck {
    /// `ttft`, `tpot`, `itl` or `e2el`.
    pub metric: String,
    pub limit_ms: f64,
    /// The percentile's value; `None` when it falls on failed requests (above every limit).
    pub value_ms: Option<f64>,
    /// Samples behind the percentile: requests (failed ones included), or tokens for ITL.
    pub samples: u64,
    /// The confidence interval of the percentile. The low end is 0 when too few samples lie
    /// below it to bound it, and `None` when it falls on failed requests (above every limit);
    /// the high end is `None` when too few samples lie above it, or failures do.
    pub ci_low_ms: Option<f64>,
    pub ci_high_ms: Option<f64>,
    pub meets: bool,
    /// The interval lies entirely on one side of the limit.
    pub certain: bool,
}

impl MetricCheck {
    /// `TPOT p90 19.5 ms [19.2, 19.8] ≤ 20 ms (63 requests)`; `∞` marks a bound on failures.
    pub fn describe(&self, percentile: f64) -> String {
        let v = |x: Option<f64>| x.map_or("∞".to_string(), |x| format!("{x:.1}"));
        format!(
            "{} p{} {} ms [{}, {}] {} {} ms ({} {})",
            self.metric.to_uppercase(),
            fmt_pct(percentile),
            v(self.value_ms),
            v(self.ci_low_ms),
            v(self.ci_high_ms),
            if self.meets { "≤" } else { ">" },
            crate::fmt::fmt_rate(self.limit_ms),
            self.samples,
            if self.metric == "itl" {
                "tokens"
            } else {
                "requests"
            }
        )
    }
}

/// A level judged against the SLO at its percentile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloCheck {
    pub percentile: f64,
    /// Confidence level of every interval (0.95).
    pub confidence: f64,
    /// Requests that ended (completed or failed).
    pub requests: u64,
    pub failed: u64,
    pub metrics: Vec<MetricCheck>,
    /// Every metric within its limit, and no more than `100 − p` % of requests failed.
    pub meets: bool,
    /// Whether the verdict stands at the confidence level: a pass needs every metric certain;
    /// a fail needs one metric (or the failure count) certainly over.
    pub certain: bool,
    /// A session level: each turn judged on its own ([`check_every_turn`]); `metrics`,
    /// `requests` and `failed` are then over all its turns together, and `meets` and `certain`
    /// the verdict on every turn. Empty for other levels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnSloCheck>,
}

/// One turn of a session level (over that turn of every session) against the SLO.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TurnSloCheck {
    /// 1 for the first turn.
    pub turn: u32,
    #[serde(flatten)]
    pub check: SloCheck,
}

impl SloCheck {
    /// Every metric, `; `-separated (see [`MetricCheck::describe`]).
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .metrics
            .iter()
            .map(|m| m.describe(self.percentile))
            .collect();
        if self.failed > 0 {
            parts.push(format!(
                "{} of {} requests failed",
                self.failed, self.requests
            ));
        }
        for t in self.turns.iter().filter(|t| !t.check.meets) {
            let mut missed: Vec<String> = t
                .check
                .metrics
                .iter()
                .filter(|m| !m.meets)
                .map(|m| m.describe(self.percentile))
                .collect();
            if missed.is_empty() {
                missed.push(format!(
                    "{} of {} requests failed",
                    t.check.failed, t.check.requests
                ));
            }
            parts.push(format!("turn {}: {}", t.turn, missed.join(", ")));
        }
        parts.join("; ")
    }

    /// `pass`, `fail`, `pass?` or `fail?` (uncertain).
    pub fn verdict(&self) -> &'static str {
        match (self.meets, self.certain) {
            (true, true) => "pass",
            (true, false) => "pass?",
            (false, true) => "fail",
            (false, false) => "fail?",
        }
    }
}

/// The 1-based ranks `(l, u)` of the order statistics bracketing the `p`-quantile of `n`
/// samples with probability at least `conf`: `P(X_(l) ≤ ξ_p ≤ X_(u)) ≥ conf`. `l` is 0 when no
/// sample is low enough to bound it below, `u` is `n + 1` when none bounds it above.
///
/// `B`, the number of samples below `ξ_p`, is Binomial(n, p); `X_(l) ≤ ξ_p` exactly when
/// `B ≥ l` and `X_(u) ≥ ξ_p` when `B < u`, so `l` is the largest rank with `P(B < l) ≤ α/2`
/// and `u` the smallest with `P(B ≥ u) ≤ α/2`.
pub fn quantile_ci_ranks(n: u64, p: f64, conf: f64) -> (u64, u64) {
    let half = (1.0 - conf) / 2.0;
    let (mut l, mut u) = (0, n + 1);
    let mut found_u = false;
    let mut cdf = 0.0; // P(B ≤ k − 1) at the top of the loop
    for (k, pmf) in (0..=n).zip(BinomialPmf::new(n, p)) {
        if cdf <= half {
            l = k;
        }
        if !found_u && cdf >= 1.0 - half {
            u = k;
            found_u = true;
        }
        cdf += pmf;
    }
    // k = n + 1: P(B ≤ n) = 1.
    if cdf <= half {
        l = n + 1;
    }
    (l.min(n), u)
}

/// The probabilities `P(B = 0), P(B = 1), …, P(B = n)` of Binomial(n, p), computed in log
/// space so large `n` does not underflow the terms that matter.
struct BinomialPmf {
    n: u64,
    k: u64,
    ln_pmf: f64,
    ln_ratio: f64,
}

impl BinomialPmf {
    fn new(n: u64, p: f64) -> Self {
        let p = p.clamp(1e-12, 1.0 - 1e-12);
        Self {
            n,
            k: 0,
            ln_pmf: n as f64 * (1.0 - p).ln(),
            ln_ratio: (p / (1.0 - p)).ln(),
        }
    }
}

impl Iterator for BinomialPmf {
    type Item = f64;
    fn next(&mut self) -> Option<f64> {
        if self.k > self.n {
            return None;
        }
        let v = self.ln_pmf.exp();
        // pmf(k + 1) = pmf(k) · (n − k) / (k + 1) · p / (1 − p)
        self.ln_pmf += ((self.n - self.k) as f64 / (self.k + 1) as f64).ln() + self.ln_ratio;
        self.k += 1;
        Some(v)
    }
}

/// The 1-based rank of the `p`-quantile (p in 0..1) of `n` samples: `ceil(p · n)`, at least 1.
fn point_rank(n: u64, p: f64) -> u64 {
    // A hair below 1 absorbs float error (0.9 × 10 = 9.000000000000002 must stay rank 9).
    ((p * n as f64) - 1e-9).ceil().max(1.0) as u64
}

/// One metric's samples: the successful values (µs) plus `misses` values above every limit.
fn check_metric(metric: &str, limit_ms: f64, dist: &Dist, misses: u64, p: f64) -> MetricCheck {
    let n = dist.count() + misses;
    // The value at 1-based rank k of the combined sample, in ms; None beyond the successes.
    let at = |k: u64| dist.value_at_rank(k).map(|v| v * 1e-3);
    if n == 0 {
        return MetricCheck {
            metric: metric.into(),
            limit_ms,
            value_ms: None,
            samples: 0,
            ci_low_ms: Some(0.0),
            ci_high_ms: None,
            meets: false,
            certain: false,
        };
    }
    let k = point_rank(n, p);
    let (l, u) = quantile_ci_ranks(n, p, CONFIDENCE);
    let value_ms = at(k);
    let ci_low_ms = if l == 0 { Some(0.0) } else { at(l) };
    let ci_high_ms = if u > n { None } else { at(u) };
    let meets = value_ms.is_some_and(|v| v <= limit_ms);
    let certain = if meets {
        ci_high_ms.is_some_and(|h| h <= limit_ms)
    } else {
        ci_low_ms.is_none_or(|lo| lo > limit_ms)
    };
    MetricCheck {
        metric: metric.into(),
        limit_ms,
        value_ms,
        samples: n,
        ci_low_ms,
        ci_high_ms,
        meets,
        certain,
    }
}

/// The distributions a level verdict reads (µs), and its request counts.
pub struct LevelSamples<'a> {
    pub ttft: &'a Dist,
    pub tpot: &'a Dist,
    pub itl: &'a Dist,
    pub e2el: &'a Dist,
    pub completed: u64,
    pub failed: u64,
}

/// Judges a level against `slo` at its percentile.
pub fn check(slo: &Slo, s: &LevelSamples<'_>) -> SloCheck {
    let p = slo.percentile / 100.0;
    let metrics: Vec<MetricCheck> = slo
        .limits()
        .map(|(m, limit)| match m {
            "ttft" => check_metric(m, limit, s.ttft, s.failed, p),
            "tpot" => check_metric(m, limit, s.tpot, s.failed, p),
            "e2el" => check_metric(m, limit, s.e2el, s.failed, p),
            // Token-weighted: failures count through the failed share below.
            _ => check_metric(m, limit, s.itl, 0, p),
        })
        .collect();
    let requests = s.completed + s.failed;
    // At most 100 − p % of requests may fail; with more, no percentile can be met.
    let allowed = requests - point_rank(requests, p).min(requests);
    let too_many_failed = requests == 0 || s.failed > allowed;
    let meets = !too_many_failed && metrics.iter().all(|m| m.meets);
    let certain = if meets {
        metrics.iter().all(|m| m.certain)
    } else {
        (requests > 0 && too_many_failed && s.completed == 0)
            || metrics.iter().any(|m| !m.meets && m.certain)
            || (too_many_failed && requests > 0 && failed_share_certain(requests, s.failed, p))
    };
    SloCheck {
        percentile: slo.percentile,
        confidence: CONFIDENCE,
        requests,
        failed: s.failed,
        metrics,
        meets,
        certain,
        turns: Vec::new(),
    }
}

/// Judges a session level: it meets the SLO when all its requests together do (its sub-agents'
/// among them) and so does each turn on its own, over that turn of every session — a user
/// waits on every turn, and the later turns' longer prompts and lost cache must not hide among
/// the earlier ones. The verdict stands when every check it rests on does (a pass), or when one
/// certainly failing check does (a fail).
pub fn check_every_turn(
    slo: &Slo,
    all: &LevelSamples<'_>,
    turns: &[(u32, LevelSamples<'_>)],
) -> SloCheck {
    let mut c = check(slo, all);
    c.turns = turns
        .iter()
        .map(|(turn, s)| TurnSloCheck {
            turn: *turn,
            check: check(slo, s),
        })
        .collect();
    let checks = || {
        std::iter::once((c.meets, c.certain))
            .chain(c.turns.iter().map(|t| (t.check.meets, t.check.certain)))
    };
    let meets = checks().all(|(m, _)| m);
    let certain = if meets {
        checks().all(|(_, sure)| sure)
    } else {
        checks().any(|(m, sure)| !m && sure)
    };
    c.meets = meets;
    c.certain = certain;
    c
}

/// Whether `failed` of `n` requests shows, at the confidence level, that more than `1 − p` of
/// requests fail (the failure count is above the binomial interval's top at share `1 − p`).
fn failed_share_certain(n: u64, failed: u64, p: f64) -> bool {
    // Failures are Binomial(n, q); q ≤ 1 − p is rejected when P(B ≥ failed | q = 1 − p) ≤ α/2.
    let tail: f64 = BinomialPmf::new(n, 1.0 - p).skip(failed as usize).sum();
    tail <= (1.0 - CONFIDENCE) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist_ms(values: &[f64]) -> Dist {
        let mut d = Dist::new();
        for v in values {
            d.record((v * 1000.0).round() as u64);
        }
        d
    }

    #[test]
    fn parses_every_metric_and_refuses_nonsense() {
        let s = Slo::parse("ttft:2000, tpot:50,itl:30,e2e:9000").unwrap();
        assert_eq!(
            (s.ttft_ms, s.tpot_ms, s.itl_ms, s.e2el_ms),
            (Some(2000.0), Some(50.0), Some(30.0), Some(9000.0))
        );
        assert!((s.percentile - DEFAULT_PERCENTILE).abs() < 1e-12);
        assert_eq!(s.describe(), "ttft:2000,tpot:50,itl:30,e2el:9000 at p90");
        for bad in ["ttft", "ttft:0", "ttft:-1", "speed:3", "", "ttft:nan"] {
            assert!(Slo::parse(bad).is_err(), "{bad}");
        }
        assert!((Slo::parse_percentile("p99.9").unwrap() - 99.9).abs() < 1e-12);
        assert!((Slo::parse_percentile("50").unwrap() - 50.0).abs() < 1e-12);
        for bad in ["0", "100", "101", "x", "-5"] {
            assert!(Slo::parse_percentile(bad).is_err(), "{bad}");
        }
        // Files written before the percentile existed read back at the default.
        let old: Slo = serde_json::from_str(r#"{"ttft_ms":100.0}"#).unwrap();
        assert_eq!((old.ttft_ms, old.percentile), (Some(100.0), 90.0));
    }

    /// The textbook table: for n = 100 and the median, the 95 % interval is [X_(40), X_(61)];
    /// exact binomial sums checked by hand against the definition.
    #[test]
    fn order_statistic_ranks_match_the_binomial_definition() {
        assert_eq!(quantile_ci_ranks(100, 0.5, 0.95), (40, 61));
        // Too few samples for a p99 upper bound: u = n + 1.
        let (l, u) = quantile_ci_ranks(100, 0.99, 0.95);
        assert_eq!(u, 101);
        assert!((96..=98).contains(&l), "{l}");
        // Brute-force: the coverage P(l ≤ B < u) is at least 95 %, and moving either end
        // inwards drops it below 97.5 % on that side.
        for &(n, p) in &[(20u64, 0.9), (57, 0.5), (300, 0.95), (1000, 0.99), (5, 0.5)] {
            let pmf: Vec<f64> = BinomialPmf::new(n, p).collect();
            assert!((pmf.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            let cdf_below = |k: u64| pmf.iter().take(k as usize).sum::<f64>(); // P(B < k)
            let (l, u) = quantile_ci_ranks(n, p, 0.95);
            assert!(cdf_below(l) <= 0.025 + 1e-12, "n {n} p {p}: l {l}");
            if l < n {
                assert!(
                    cdf_below(l + 1) > 0.025,
                    "n {n} p {p}: l {l} could be higher"
                );
            }
            if u <= n {
                assert!(1.0 - cdf_below(u) <= 0.025 + 1e-12, "n {n} p {p}: u {u}");
                assert!(
                    1.0 - cdf_below(u - 1) > 0.025,
                    "n {n} p {p}: u {u} could be lower"
                );
            }
            let coverage = cdf_below(u) - cdf_below(l);
            assert!(coverage >= 0.95 - 1e-9, "n {n} p {p}: coverage {coverage}");
        }
    }

    fn samples<'a>(
        ttft: &'a Dist,
        empty: &'a Dist,
        completed: u64,
        failed: u64,
    ) -> LevelSamples<'a> {
        LevelSamples {
            ttft,
            tpot: empty,
            itl: empty,
            e2el: empty,
            completed,
            failed,
        }
    }

    #[test]
    fn verdict_reads_the_percentile_and_flags_an_interval_across_the_limit() {
        let slo = Slo {
            ttft_ms: Some(100.0),
            percentile: 50.0,
            ..Slo::default()
        };
        let empty = Dist::new();
        // 1..=100 ms: the median is 50 ms (rank 50), its interval [X_40, X_61] = [40, 61] ms.
        let d = dist_ms(&(1..=100).map(f64::from).collect::<Vec<_>>());
        let c = check(&slo, &samples(&d, &empty, 100, 0));
        let m = &c.metrics[0];
        // (HDR keeps 3 significant digits: a value reads back as the middle of its bucket.)
        let near = |a: f64, b: f64| (a - b).abs() <= b * 1e-3;
        assert_eq!(m.samples, 100);
        assert!(near(m.value_ms.unwrap(), 50.0), "{m:?}");
        assert!(
            near(m.ci_low_ms.unwrap(), 40.0) && near(m.ci_high_ms.unwrap(), 61.0),
            "{m:?}"
        );
        assert!(c.meets && c.certain, "{c:?}");
        assert_eq!(c.verdict(), "pass");
        // A limit of 55 ms: the median passes but its interval reaches 61 ms.
        let tight = Slo {
            ttft_ms: Some(55.0),
            ..slo
        };
        let c = check(&tight, &samples(&d, &empty, 100, 0));
        assert_eq!(c.verdict(), "pass?");
        // 45 ms: fails, interval from 40 ms: uncertain fail.
        let c = check(
            &Slo {
                ttft_ms: Some(45.0),
                ..slo
            },
            &samples(&d, &empty, 100, 0),
        );
        assert_eq!(c.verdict(), "fail?");
        // 30 ms: certainly over.
        let c = check(
            &Slo {
                ttft_ms: Some(30.0),
                ..slo
            },
            &samples(&d, &empty, 100, 0),
        );
        assert_eq!(c.verdict(), "fail");
    }

    #[test]
    fn failed_requests_are_misses_above_every_limit() {
        let slo = Slo {
            ttft_ms: Some(1000.0),
            percentile: 90.0,
            ..Slo::default()
        };
        let empty = Dist::new();
        // 85 fast successes and 15 failures: the p90 (rank 90) lies on a failure.
        let d = dist_ms(&[10.0; 85]);
        let c = check(&slo, &samples(&d, &empty, 85, 15));
        assert_eq!(c.metrics[0].value_ms, None);
        assert!(!c.meets);
        // …but 85 % good of 100 is within sampling noise of 90 %: the interval reaches down to
        // the successes, so the fail is uncertain.
        assert_eq!(c.verdict(), "fail?");
        // Half failed: even the interval's low end lies on failures, a certain miss.
        let d = dist_ms(&[10.0; 50]);
        let c = check(&slo, &samples(&d, &empty, 50, 50));
        assert_eq!((c.metrics[0].ci_low_ms, c.verdict()), (None, "fail"));
        // 95 successes and 5 failures: the p90 is a success.
        let d = dist_ms(&[10.0; 95]);
        let c = check(&slo, &samples(&d, &empty, 95, 5));
        assert!((c.metrics[0].value_ms.unwrap() - 10.0).abs() < 0.01);
        assert!(c.meets);
        // ITL alone (token-weighted, no failures inside): too many failed requests still fail.
        let itl = Slo {
            itl_ms: Some(50.0),
            percentile: 90.0,
            ..Slo::default()
        };
        let toks = dist_ms(&[5.0; 1000]);
        let s = LevelSamples {
            ttft: &empty,
            tpot: &empty,
            itl: &toks,
            e2el: &empty,
            completed: 50,
            failed: 50,
        };
        let c = check(&itl, &s);
        assert!(!c.meets && c.certain, "{c:?}");
        let s = LevelSamples {
            completed: 100,
            failed: 0,
            ..s
        };
        assert!(check(&itl, &s).meets);
    }

    /// TTFT p50 ≤ 200 ms on sessions of four turns whose TTFTs grow 25, 125, 225, 325 ms: all
    /// turns together pass (their p50 is 125 ms), turns 3 and 4 each certainly fail, so the
    /// level fails, certainly, naming both.
    #[test]
    fn a_session_level_meets_the_slo_only_on_every_turn() {
        let slo = Slo {
            ttft_ms: Some(200.0),
            percentile: 50.0,
            ..Slo::default()
        };
        let empty = Dist::new();
        let n = 20;
        let turns: Vec<Dist> = [25.0, 125.0, 225.0, 325.0]
            .iter()
            .map(|&ms| dist_ms(&vec![ms; n]))
            .collect();
        let all = dist_ms(
            &[25.0, 125.0, 225.0, 325.0]
                .iter()
                .flat_map(|&ms| vec![ms; n])
                .collect::<Vec<_>>(),
        );
        let pooled = samples(&all, &empty, 4 * n as u64, 0);
        let by_turn: Vec<(u32, LevelSamples<'_>)> = turns
            .iter()
            .zip(1u32..)
            .map(|(d, t)| (t, samples(d, &empty, n as u64, 0)))
            .collect();
        assert!(check(&slo, &pooled).meets, "together they pass");
        let c = check_every_turn(&slo, &pooled, &by_turn);
        assert!(!c.meets && c.certain, "{c:?}");
        assert_eq!(
            c.turns.iter().map(|t| t.check.meets).collect::<Vec<_>>(),
            [true, true, false, false]
        );
        let text = c.describe();
        assert!(
            text.contains("turn 3: TTFT p50 225.0 ms")
                && text.contains("turn 4: TTFT p50 325.0 ms"),
            "{text}"
        );
        assert!(!text.contains("turn 2:"), "{text}");
        // A looser limit holds on every turn: a certain pass.
        let loose = Slo {
            ttft_ms: Some(400.0),
            ..slo
        };
        let c = check_every_turn(&loose, &pooled, &by_turn);
        assert!(c.meets && c.certain, "{c:?}");
        // A turn that fails on two requests alone: failed, but not certainly.
        let few = dist_ms(&[210.0, 250.0]);
        let by_turn = vec![
            (1, samples(&all, &empty, 4 * n as u64, 0)),
            (2, samples(&few, &empty, 2, 0)),
        ];
        let c = check_every_turn(&slo, &pooled, &by_turn);
        assert!(!c.meets && !c.certain, "{c:?}");
        assert_eq!(c.verdict(), "fail?");
    }
}
