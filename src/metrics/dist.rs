//! One latency (or count) distribution: an HDR histogram for percentiles plus exact running sums.
//!
//! Percentiles come from the histogram (3 significant digits, docs/metrics.md); mean, min, max and
//! standard deviation are kept exactly beside it, so a mean in a report is never off by the
//! histogram's bucket width and unit tests can check exact numbers.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A distribution of non-negative integer values in some base unit (µs, tokens, milli-tok/s).
#[derive(Clone, Debug)]
pub struct Dist {
    hist: Histogram<u64>,
    count: u64,
    sum: f64,
    sum_sq: f64,
    min: u64,
    max: u64,
}

impl Default for Dist {
    fn default() -> Self {
        Self::new()
    }
}

impl Dist {
    /// An empty distribution (auto-resizing histogram, 3 significant digits).
    pub fn new() -> Self {
        Self {
            hist: Histogram::new(3).expect("3 significant digits is a valid HDR precision"),
            count: 0,
            sum: 0.0,
            sum_sq: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records `value` once.
    pub fn record(&mut self, value: u64) {
        self.record_n(value, 1);
    }

    /// Records `value` `n` times (token-weighted ITL records one value per token).
    pub fn record_n(&mut self, value: u64, n: u64) {
        if n == 0 {
            return;
        }
        if self.hist.record_n(value, n).is_err() {
            // Only possible for values beyond u64::MAX / 2; clamp rather than lose the sample.
            for _ in 0..n {
                self.hist.saturating_record(value);
            }
        }
        self.count += n;
        let v = value as f64;
        self.sum += v * n as f64;
        self.sum_sq += v * v * n as f64;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// Number of recorded values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean in base units, if anything was recorded.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// Merges another distribution into this one.
    pub fn merge(&mut self, other: &Dist) {
        if other.count == 0 {
            return;
        }
        let _ = self.hist.add(&other.hist);
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The value at quantile `q` (0..=1), as the middle of its HDR bucket, in base units.
    fn quantile(&self, q: f64) -> f64 {
        let v = self.hist.value_at_quantile(q);
        // The middle of the bucket is unbiased; clamp into the exact observed range.
        let mid = self.hist.median_equivalent(v);
        mid.clamp(self.min, self.max) as f64
    }

    /// The value of 1-based rank `rank` in sorted order (the middle of its HDR bucket, in the
    /// exact observed range), in base units; `None` for rank 0 or beyond the count.
    pub fn value_at_rank(&self, rank: u64) -> Option<f64> {
        if rank == 0 || rank > self.count {
            return None;
        }
        let mut seen = 0;
        for v in self.hist.iter_recorded() {
            seen += v.count_since_last_iteration();
            if seen >= rank {
                let mid = self.hist.median_equivalent(v.value_iterated_to());
                return Some(mid.clamp(self.min, self.max) as f64);
            }
        }
        Some(self.max as f64)
    }

    /// The values in `n` equal bins from the least to the greatest, multiplied by `scale`
    /// (each HDR bucket counted at the middle of its bucket, in the exact observed range);
    /// `None` if empty.
    pub fn bins(&self, n: usize, scale: f64) -> Option<Bins> {
        if self.count == 0 || n == 0 {
            return None;
        }
        let (lo, hi) = (self.min as f64, self.max as f64);
        let width = (hi - lo) / n as f64;
        let mut counts = vec![0u64; n];
        for v in self.hist.iter_recorded() {
            let x = self.hist.median_equivalent(v.value_iterated_to()) as f64;
            let x = x.clamp(lo, hi);
            let i = if width > 0.0 {
                (((x - lo) / width) as usize).min(n - 1)
            } else {
                0
            };
            counts[i] += v.count_at_value();
        }
        Some(Bins {
            lo: lo * scale,
            hi: hi * scale,
            counts,
        })
    }

    /// [`Dist::stats`] with the percentiles `extra` (in %) among them where they are not
    /// [`FIXED_PERCENTILES`] (`--metric-percentiles`).
    pub fn stats_at(&self, scale: f64, extra: &[f64]) -> Option<DistStats> {
        let mut s = self.stats(scale)?;
        s.extra = extra
            .iter()
            .filter(|&&p| !is_fixed(p))
            .map(|&p| (p, self.quantile(p / 100.0) * scale))
            .collect();
        Some(s)
    }

    /// Summary statistics multiplied by `scale` (e.g. 1e-3 to turn µs into ms); `None` if empty.
    pub fn stats(&self, scale: f64) -> Option<DistStats> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = (self.sum_sq / n - mean * mean).max(0.0);
        Some(DistStats {
            count: self.count,
            mean: mean * scale,
            std: var.sqrt() * scale,
            min: self.min as f64 * scale,
            p50: self.quantile(0.5) * scale,
            p90: self.quantile(0.9) * scale,
            p95: self.quantile(0.95) * scale,
            p99: self.quantile(0.99) * scale,
            p999: self.quantile(0.999) * scale,
            max: self.max as f64 * scale,
            extra: Vec::new(),
        })
    }
}

/// The percentiles (in %) every distribution's statistics carry: [`DistStats`]'s own fields.
pub const FIXED_PERCENTILES: [f64; 5] = [50.0, 90.0, 95.0, 99.0, 99.9];

/// Whether percentile `p` (in %) is one of [`FIXED_PERCENTILES`].
pub fn is_fixed(p: f64) -> bool {
    FIXED_PERCENTILES.iter().any(|&q| (q - p).abs() < 1e-9)
}

/// A percentile as result keys and tables write it (vLLM's way): `75`, `99.9`.
pub fn percentile_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

/// A distribution in equal bins from `lo` to `hi` (display units): the latency panel's bars.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bins {
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
}

/// Summary statistics of one distribution, already in display units.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DistStats {
    pub count: u64,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// Percentiles asked for beyond the fixed ones (`--metric-percentiles`): `(p in %, value)`,
    /// ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra: Vec<(f64, f64)>,
}

impl DistStats {
    /// The value at percentile `p` (in %): a fixed one, or one asked for (`extra`).
    pub fn percentile(&self, p: f64) -> Option<f64> {
        let fixed = [self.p50, self.p90, self.p95, self.p99, self.p999];
        FIXED_PERCENTILES
            .iter()
            .zip(fixed)
            .chain(self.extra.iter().map(|(q, v)| (q, *v)))
            .find(|(q, _)| (*q - p).abs() < 1e-9)
            .map(|(_, v)| v)
    }

    /// [`DistStats::named`] and the percentiles asked for beyond them (`p75`, `p99.99`).
    pub fn named_all(&self) -> Vec<(String, f64)> {
        self.named()
            .iter()
            .map(|&(k, v)| (k.to_string(), v))
            .chain(
                self.extra
                    .iter()
                    .map(|&(p, v)| (format!("p{}", percentile_word(p)), v)),
            )
            .collect()
    }

    /// The statistic names as they appear in result keys (`mean_ttft_ms`, `p99.9_ttft_ms`, …), with
    /// their values. `median` is vLLM's name for p50.
    pub fn named(&self) -> [(&'static str, f64); 9] {
        [
            ("mean", self.mean),
            ("median", self.p50),
            ("std", self.std),
            ("min", self.min),
            ("p90", self.p90),
            ("p95", self.p95),
            ("p99", self.p99),
            ("p99.9", self.p999),
            ("max", self.max),
        ]
    }

    /// Rebuilds from the values returned by [`DistStats::named`] (in any order) plus a count.
    pub fn from_named(count: u64, get: impl Fn(&str) -> Option<f64>) -> Option<Self> {
        Some(Self {
            count,
            mean: get("mean")?,
            p50: get("median")?,
            std: get("std").unwrap_or(0.0),
            min: get("min").unwrap_or(f64::NAN),
            p90: get("p90")?,
            p95: get("p95")?,
            p99: get("p99")?,
            p999: get("p99.9")?,
            max: get("max")?,
            extra: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bins span the exact least and greatest value, hold every value once, and put each where
    /// it belongs: 1000 µs ×3 and 2000 ×1 in the first bin's and last bin's places.
    #[test]
    fn bins_hold_every_value_where_it_belongs() {
        let mut d = Dist::new();
        for v in [1000, 1000, 1000, 2000, 1500] {
            d.record(v);
        }
        let b = d.bins(10, 1e-3).unwrap();
        assert_eq!((b.lo, b.hi), (1.0, 2.0));
        assert_eq!(b.counts.iter().sum::<u64>(), 5);
        assert_eq!(b.counts[0], 3);
        assert_eq!(b.counts[5], 1, "1500 sits half-way: {:?}", b.counts);
        assert_eq!(b.counts[9], 1);
        // One value only: everything in the first bin.
        let mut one = Dist::new();
        one.record(7);
        assert_eq!(one.bins(4, 1.0).unwrap().counts, [1, 0, 0, 0]);
        assert!(Dist::new().bins(4, 1.0).is_none());
    }

    #[test]
    fn exact_mean_min_max_and_std() {
        let mut d = Dist::new();
        for v in [1000, 2000, 3000, 4000] {
            d.record(v);
        }
        let s = d.stats(1e-3).unwrap();
        assert_eq!(s.count, 4);
        assert!((s.mean - 2.5).abs() < 1e-12);
        assert!((s.min - 1.0).abs() < 1e-12);
        assert!((s.max - 4.0).abs() < 1e-12);
        // population std of 1,2,3,4 = sqrt(1.25)
        assert!((s.std - 1.25f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn weighted_records_count_each_token() {
        let mut d = Dist::new();
        d.record_n(5000, 4);
        d.record_n(20000, 1);
        let s = d.stats(1.0).unwrap();
        assert_eq!(s.count, 5);
        assert!((s.mean - 8000.0).abs() < 1e-9);
        // p50 sits in the 5000 bucket (within 0.1 %).
        assert!((s.p50 - 5000.0).abs() / 5000.0 < 1e-3, "p50 {}", s.p50);
        assert!((s.p99 - 20000.0).abs() / 20000.0 < 1e-3, "p99 {}", s.p99);
    }

    #[test]
    fn percentiles_within_three_significant_digits() {
        let mut d = Dist::new();
        for v in 1..=100_000u64 {
            d.record(v);
        }
        let s = d.stats(1.0).unwrap();
        for (got, want) in [(s.p50, 50_000.0), (s.p90, 90_000.0), (s.p99, 99_000.0)] {
            assert!((got - want).abs() / want < 1.5e-3, "{got} vs {want}");
        }
    }

    /// Percentiles asked for beyond the fixed ones are the values of their nearest rank (to
    /// three digits), fixed ones asked for are not repeated, and each is found by its
    /// percentile: 1..=1000 at p25 is 250, at p99.99 the 1000th value.
    #[test]
    fn percentiles_asked_for_are_their_nearest_rank() {
        let mut d = Dist::new();
        for v in 1..=1000u64 {
            d.record(v);
        }
        let s = d.stats_at(1.0, &[25.0, 50.0, 75.0, 99.99]).unwrap();
        assert_eq!(
            s.extra.iter().map(|e| e.0).collect::<Vec<_>>(),
            [25.0, 75.0, 99.99]
        );
        for (p, want) in [(25.0, 250.0), (50.0, 500.0), (75.0, 750.0), (99.99, 1000.0)] {
            let got = s.percentile(p).unwrap();
            assert!((got - want).abs() / want < 1.5e-3, "p{p}: {got} vs {want}");
        }
        assert_eq!(s.percentile(99.0), Some(s.p99));
        assert_eq!(s.percentile(60.0), None);
        let keys: Vec<String> = s.named_all().into_iter().map(|(k, _)| k).collect();
        assert!(
            keys.ends_with(&["p25".into(), "p75".into(), "p99.99".into()]),
            "{keys:?}"
        );
        assert_eq!(percentile_word(99.9), "99.9");
        assert_eq!(percentile_word(50.0), "50");
    }

    #[test]
    fn empty_has_no_stats_and_merge_adds() {
        let mut a = Dist::new();
        assert!(a.stats(1.0).is_none());
        let mut b = Dist::new();
        b.record(7);
        a.merge(&b);
        a.record(9);
        let s = a.stats(1.0).unwrap();
        assert_eq!(s.count, 2);
        assert!((s.mean - 8.0).abs() < 1e-12);
    }

    #[test]
    fn named_round_trip() {
        let mut d = Dist::new();
        d.record(3);
        d.record(5);
        let s = d.stats(1.0).unwrap();
        let named = s.named();
        let back =
            DistStats::from_named(2, |k| named.iter().find(|(n, _)| *n == k).map(|p| p.1)).unwrap();
        assert_eq!(back, s);
    }
}
