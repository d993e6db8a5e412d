//! Open-loop arrival schedules: when each request of a request-rate level is due.
//!
//! Times are absolute offsets from the level's origin, computed one after the other from a
//! seeded generator. The dispatcher sleeps until `origin + t_i` for request `i`, so a send that
//! runs late does not push the later ones back (no drift): the lateness shows up as client queue
//! time (`t_send - t_sched`, docs/metrics.md) and nowhere else.
//!
//! Gaps follow vLLM `bench serve`: gamma with shape `B` (the burstiness) and mean `1 / rate`.
//! `B = 1` is a Poisson process (exponential gaps); `B < 1` is burstier (more variance, the
//! coefficient of variation of a gap is `1 / sqrt(B)`); `B > 1` is more even.
//!
//! A ramp-up of `S` seconds lets the rate rise linearly from 0 to the target over the first `S`
//! seconds. That is done by time rescaling: the gamma process runs in "operational time" with
//! mean gap 1, and operational time `u` maps to wall time `t` through the inverse of
//! `Λ(t) = ∫₀ᵗ λ(s) ds`, with `λ(s) = rate · min(1, s / S)`. The burstiness keeps its meaning
//! throughout, and the number of arrivals by time `t` has mean `Λ(t)`.
//!
//! The schedule is an iterator rather than a vector, so a level of a million requests costs no
//! memory; it is deterministic for a given seed, and restarting it gives the same times.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// How requests of a request-rate level arrive.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Arrival {
    /// Target requests per second (after the ramp-up); infinite: every request at once
    /// (written `"inf"`, see [`rate_serde`]).
    #[serde(with = "rate_serde")]
    pub request_rate: f64,
    /// Gamma shape of the gaps: 1 is Poisson, below 1 burstier.
    pub burstiness: f64,
    /// Seconds over which the rate rises linearly from 0 to `request_rate` (0: none).
    pub ramp_up_s: f64,
    /// Most requests in flight at once; requests due beyond it wait in the client queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
}

/// A request rate in JSON: a number, or `"inf"` for every request at once (JSON has no
/// infinity; serde would write null and fail to read it back).
pub mod rate_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &f64, s: S) -> Result<S::Ok, S::Error> {
        if r.is_finite() {
            s.serialize_f64(*r)
        } else {
            s.serialize_str("inf")
        }
    }

    /// A rate as written: a number or `"inf"`.
    #[derive(Deserialize)]
    #[serde(untagged)]
    pub(super) enum Written {
        Number(f64),
        Text(String),
    }

    impl Written {
        pub(super) fn rate<E: serde::de::Error>(self) -> Result<f64, E> {
            match self {
                Self::Number(v) => Ok(v),
                Self::Text(t) if t.eq_ignore_ascii_case("inf") => Ok(f64::INFINITY),
                Self::Text(t) => Err(E::custom(format!(
                    "request rate {t:?}: a number or \"inf\""
                ))),
            }
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Written::deserialize(d)?.rate()
    }
}

/// A list of request rates in JSON, each as [`rate_serde`] writes it.
pub mod rates_serde {
    use serde::{Deserialize, Deserializer, Serializer, ser::SerializeSeq};

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(v.len()))?;
        for r in v {
            if r.is_finite() {
                seq.serialize_element(r)?;
            } else {
                seq.serialize_element("inf")?;
            }
        }
        seq.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Vec::<super::rate_serde::Written>::deserialize(d)?
            .into_iter()
            .map(super::rate_serde::Written::rate)
            .collect()
    }
}

/// The absolute send times (seconds from the level's origin) of an open-loop level.
#[derive(Clone, Debug)]
pub struct Schedule {
    rate: f64,
    shape: f64,
    ramp_up_s: f64,
    rng: SmallRng,
    /// Operational time of the next arrival (mean gap 1).
    u: f64,
}

impl Schedule {
    /// The schedule of `arrival`, drawn from `seed`. The first request is due at time 0 (as in
    /// vLLM), or after the first gap when there is a ramp-up (the rate starts at 0 then).
    pub fn new(arrival: &Arrival, seed: u64) -> Self {
        let mut s = Self {
            rate: arrival.request_rate,
            shape: arrival.burstiness,
            ramp_up_s: arrival.ramp_up_s.max(0.0),
            rng: SmallRng::seed_from_u64(seed),
            u: 0.0,
        };
        if s.ramp_up_s > 0.0 {
            s.u = s.gap();
        }
        s
    }

    /// The seed of level `index` of a run seeded with `run_seed` (distinct from the prompt
    /// text's seeds, so changing one never changes the other).
    pub fn level_seed(run_seed: u64, index: u32) -> u64 {
        run_seed ^ 0xA5A5_0F0F_1234_5678 ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }

    /// One gap in operational time: gamma(shape, scale 1 / shape), mean 1.
    fn gap(&mut self) -> f64 {
        gamma(&mut self.rng, self.shape) / self.shape
    }

    /// Wall time (s) of operational time `u`: the inverse of `Λ`.
    fn wall(&self, u: f64) -> f64 {
        let (r, s) = (self.rate, self.ramp_up_s);
        if r.is_infinite() {
            // `--request-rate inf`: every request is due at the level's start.
            return 0.0;
        }
        let ramp_area = r * s / 2.0;
        if s > 0.0 && u <= ramp_area {
            (2.0 * s * u / r).sqrt()
        } else {
            s + (u - ramp_area.min(u)) / r
        }
    }
}

impl Iterator for Schedule {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        let t = self.wall(self.u);
        self.u += self.gap();
        Some(t)
    }
}

/// A standard normal draw (Box–Muller).
pub(super) fn normal(rng: &mut SmallRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A gamma(shape, scale 1) draw: Marsaglia and Tsang (2000); shapes below 1 through
/// `gamma(k) = gamma(k + 1) · U^(1/k)`.
fn gamma(rng: &mut SmallRng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u: f64 = 1.0 - rng.random::<f64>();
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u: f64 = 1.0 - rng.random::<f64>();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `inf`: every request due at 0; written `"inf"` and read back, as a list too.
    #[test]
    fn an_infinite_rate_sends_everything_at_once_and_survives_json() {
        let a = arrival(f64::INFINITY, 1.0, 0.0);
        assert!(Schedule::new(&a, 7).take(100).all(|t| t == 0.0));
        let json = serde_json::to_value(a).unwrap();
        assert_eq!(json["request_rate"], "inf");
        let back: Arrival = serde_json::from_value(json).unwrap();
        assert_eq!(back, a);
        let finite = serde_json::to_value(arrival(2.5, 1.0, 0.0)).unwrap();
        assert_eq!(finite["request_rate"], 2.5);
        let open = crate::workload::OpenLoop {
            request_rates: vec![1.0, f64::INFINITY],
            ..crate::workload::OpenLoop::default()
        };
        let json = serde_json::to_value(&open).unwrap();
        assert_eq!(json["request_rates"], serde_json::json!([1.0, "inf"]));
        let back: crate::workload::OpenLoop = serde_json::from_value(json).unwrap();
        assert_eq!(back, open);
        let bad = serde_json::from_value::<Arrival>(serde_json::json!({
            "request_rate": "soon", "burstiness": 1.0, "ramp_up_s": 0.0
        }));
        assert!(bad.is_err());
    }

    fn arrival(rate: f64, burstiness: f64, ramp_up_s: f64) -> Arrival {
        Arrival {
            request_rate: rate,
            burstiness,
            ramp_up_s,
            max_concurrency: None,
        }
    }

    /// Mean and variance of the gaps between consecutive times.
    fn gap_moments(times: &[f64]) -> (f64, f64) {
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var)
    }

    #[test]
    fn poisson_gaps_have_mean_one_over_rate_and_exponential_variance() {
        let n = 200_000;
        let times: Vec<f64> = Schedule::new(&arrival(8.0, 1.0, 0.0), 7).take(n).collect();
        assert!(
            times[0].abs() < 1e-12,
            "the first request is due at the origin"
        );
        let (mean, var) = gap_moments(&times);
        // Exponential: mean 1/8 = 0.125 s, variance 1/64. Standard error of the mean is
        // 0.125 / sqrt(n) = 0.00028 s; 5 standard errors of slack.
        assert!((mean - 0.125).abs() < 0.0014, "mean gap {mean}");
        let cv2 = var / (mean * mean);
        assert!((cv2 - 1.0).abs() < 0.03, "squared CV {cv2}, Poisson has 1");
    }

    #[test]
    fn burstiness_is_the_gamma_shape_seen_in_the_variance() {
        // Gamma(shape B, mean m): variance m² / B, so the squared CV of a gap is 1 / B.
        for b in [0.25, 0.5, 2.0, 4.0] {
            let times: Vec<f64> = Schedule::new(&arrival(4.0, b, 0.0), 11)
                .take(200_000)
                .collect();
            let (mean, var) = gap_moments(&times);
            assert!((mean - 0.25).abs() < 0.25 * 0.02, "B={b}: mean gap {mean}");
            let cv2 = var / (mean * mean);
            assert!(
                (cv2 * b - 1.0).abs() < 0.06,
                "B={b}: squared CV {cv2}, expected {}",
                1.0 / b
            );
        }
    }

    #[test]
    fn times_are_absolute_from_the_seed_and_never_drift() {
        let a = arrival(2.0, 1.0, 0.0);
        let full: Vec<f64> = Schedule::new(&a, 3).take(10_000).collect();
        // Same seed, same times: the 10,000th request is due when it was due, however late the
        // earlier ones went out.
        let again: Vec<f64> = Schedule::new(&a, 3).take(10_000).collect();
        assert_eq!(full, again);
        assert!(full.windows(2).all(|w| w[1] > w[0]), "strictly increasing");
        // The n-th arrival of a rate-2 Poisson process is due at about n / 2 s (Gamma(n, 1/2)
        // has standard deviation sqrt(n) / 2 = 50 s at n = 10,000).
        let last = full[9_999];
        assert!((last - 9_999.0 / 2.0).abs() < 250.0, "last at {last} s");
        let other: Vec<f64> = Schedule::new(&a, 4).take(3).collect();
        assert!(
            (full[1] - other[1]).abs() > 1e-9,
            "another seed, other times"
        );
        assert_ne!(Schedule::level_seed(1, 0), Schedule::level_seed(1, 1));
    }

    #[test]
    fn ramp_up_rises_linearly_then_holds_the_rate() {
        // Rate 20/s reached after 10 s: Λ(10) = 100 arrivals expected during the ramp, and the
        // first half of the ramp holds a quarter of them (Λ(5) = 25).
        let a = arrival(20.0, 1.0, 10.0);
        let (mut in_first_half, mut in_ramp, mut in_next_10) = (0.0, 0.0, 0.0);
        let runs = 200;
        for seed in 0..runs {
            for t in Schedule::new(&a, seed).take_while(|&t| t < 20.0) {
                if t < 5.0 {
                    in_first_half += 1.0;
                }
                if t < 10.0 {
                    in_ramp += 1.0;
                } else {
                    in_next_10 += 1.0;
                }
            }
        }
        let runs = runs as f64;
        assert!((in_first_half / runs - 25.0).abs() < 1.5, "{in_first_half}");
        assert!((in_ramp / runs - 100.0).abs() < 3.0, "{in_ramp}");
        assert!((in_next_10 / runs - 200.0).abs() < 4.0, "{in_next_10}");
    }
}
