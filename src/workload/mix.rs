//! What a level sends besides plain text of one fixed length: input and output lengths spread
//! around the planned ones (`--range-ratio`), and LoRA adapters named per request
//! (`--lora-modules`, `--lora-dist`).

use serde::{Deserialize, Serialize};

use super::dataset::splitmix;

/// The kinds of requests a level mixes; all absent for fixed-length text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestMix {
    /// Each request's input and output lengths are drawn uniformly from
    /// `[⌊(1−R)·L⌋, ⌈(1+R)·L⌉]` around the level's (`--range-ratio R`, as vLLM's
    /// `--random-range-ratio`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_ratio: Option<f64>,
    /// The LoRA adapters its requests name, and how each request's is chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<LoraMix>,
    /// The structured-output constraint its requests carry (`--response-format`): the level
    /// is the constrained twin of the level before it, which sends the same without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<crate::client::structured::ResponseFormat>,
    /// The images each request carries (`--images`, `--image-size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<super::images::ImageMix>,
    /// A weighted mix of input/output pairs (`--shape-mix`): each request draws one, and its
    /// lengths are that pair's (spread around it by `range_ratio` or `lognormal_sigma`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shape_mix: Vec<super::shapes::WeightedShape>,
    /// Each request's input and output lengths drawn apart from a log-normal distribution
    /// whose median is the level's (or its drawn shape's) and whose σ (of the log) this is,
    /// cut at 3σ either way (`--length-dist lognormal:S`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lognormal_sigma: Option<f64>,
}

/// `--lora-modules` with `--lora-dist`: which adapter each request names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoraMix {
    /// The adapters' names as the server knows them, in the order given.
    pub modules: Vec<String>,
    pub dist: LoraDist,
}

/// How requests are dealt over the adapters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoraDist {
    /// Each request's adapter drawn with equal chances (vLLM's `--lora-modules` does this).
    #[default]
    Uniform,
    /// Request `i` names adapter `i mod n`.
    RoundRobin,
    /// The `k`-th adapter given (from 1) drawn with a chance proportional to `1 / k^s`: the
    /// first ones hot, the rest a long tail (SGLang's bench skews its LoRA traffic so).
    Zipf(f64),
}

impl LoraDist {
    /// `uniform`, `round-robin` or `zipf:S` (S > 0).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "uniform" => Ok(Self::Uniform),
            "round-robin" | "round_robin" => Ok(Self::RoundRobin),
            z => {
                let bad = || {
                    format!(
                        "'{s}' is not uniform, round-robin or zipf:S (S a skew above 0, e.g. zipf:1.1)"
                    )
                };
                let v = z.strip_prefix("zipf:").ok_or_else(bad)?;
                match v.parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 && v <= 100.0 => Ok(Self::Zipf(v)),
                    _ => Err(bad()),
                }
            }
        }
    }

    /// The chance of each of `n` adapters.
    pub fn shares(self, n: usize) -> Vec<f64> {
        let weights: Vec<f64> = match self {
            Self::Uniform | Self::RoundRobin => vec![1.0; n],
            Self::Zipf(s) => (1..=n).map(|k| 1.0 / (k as f64).powf(s)).collect(),
        };
        let total: f64 = weights.iter().sum();
        weights.iter().map(|w| w / total).collect()
    }

    /// `uniform`, `round-robin`, `zipf:1.1`.
    pub fn label(self) -> String {
        match self {
            Self::Uniform => "uniform".into(),
            Self::RoundRobin => "round-robin".into(),
            Self::Zipf(s) => format!("zipf:{s}"),
        }
    }
}

impl LoraMix {
    /// The adapter of request (or conversation) `key`, the same for a given seed at every level.
    pub fn pick(&self, seed: u64, key: u32) -> &str {
        let n = self.modules.len();
        if n == 0 {
            return "";
        }
        let k = match self.dist {
            LoraDist::RoundRobin => key as usize % n,
            dist => {
                let h = splitmix(
                    seed ^ 0x10AA_D15C_0000_0000
                        ^ u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                );
                // 53 random bits: a uniform in [0, 1).
                let u = (h >> 11) as f64 / (1u64 << 53) as f64;
                let mut acc = 0.0;
                dist.shares(n)
                    .iter()
                    .position(|p| {
                        acc += p;
                        u < acc
                    })
                    .unwrap_or(n - 1)
            }
        };
        &self.modules[k]
    }
}

impl RequestMix {
    /// Nothing mixed in: every request of the level is the same kind and length.
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }

    /// The weighted mean input and output tokens of a shape mix (rounded); none without one.
    pub fn mean_lengths(&self) -> Option<(u64, u32)> {
        if self.shape_mix.is_empty() {
            return None;
        }
        let shares = super::shapes::WeightedShape::shares(&self.shape_mix);
        let (mut i, mut o) = (0.0, 0.0);
        for (w, s) in self.shape_mix.iter().zip(shares) {
            i += s * w.shape.input_len as f64;
            o += s * f64::from(w.shape.output_len);
        }
        Some((i.round() as u64, o.round() as u32))
    }
}

impl super::LevelSpec {
    /// Request `i`'s input and output tokens (`i` counted over the whole plan, not a shard's
    /// share): the level's, or drawn around them with a range ratio.
    pub fn request_lengths(&self, seed: u64, i: u32) -> (u64, u32) {
        // Adapters dealt round-robin each get the same draws: the k-th request of every adapter
        // is drawn as the k-th draw, so the adapters compare like with like.
        let i = match &self.mix.lora {
            Some(l) if l.dist == LoraDist::RoundRobin && !l.modules.is_empty() => {
                i / u32::try_from(l.modules.len()).unwrap_or(u32::MAX)
            }
            _ => i,
        };
        let (input_tokens, output_tokens) = if self.mix.shape_mix.is_empty() {
            (self.input_tokens, self.output_tokens)
        } else {
            let s = super::shapes::WeightedShape::pick(&self.mix.shape_mix, seed, i);
            (s.input_len, s.output_len)
        };
        if let Some(sigma) = self.mix.lognormal_sigma {
            let input = lognormal(
                input_tokens,
                sigma,
                self.shared_prefix_tokens + 1,
                (seed, Length::Input, i),
            );
            let output = lognormal(
                u64::from(output_tokens),
                sigma,
                1,
                (seed, Length::Output, i),
            );
            return (input, u32::try_from(output).unwrap_or(u32::MAX));
        }
        let Some(r) = self.mix.range_ratio else {
            return (input_tokens, output_tokens);
        };
        let input = draw(
            input_tokens,
            r,
            self.shared_prefix_tokens + 1,
            seed,
            Length::Input,
            i,
        );
        let output = draw(u64::from(output_tokens), r, 1, seed, Length::Output, i);
        (input, u32::try_from(output).unwrap_or(u32::MAX))
    }

    /// The input/output pairs its requests draw around: the mix's, or the level's own.
    fn base_shapes(&self) -> Vec<(u64, u32)> {
        if self.mix.shape_mix.is_empty() {
            vec![(self.input_tokens, self.output_tokens)]
        } else {
            self.mix
                .shape_mix
                .iter()
                .map(|w| (w.shape.input_len, w.shape.output_len))
                .collect()
        }
    }

    /// The fewest and most input and output tokens a request drawn around `(input, output)`
    /// may have.
    fn spread_of(&self, (input, output): (u64, u32)) -> ((u64, u64), (u64, u64)) {
        let floor = self.shared_prefix_tokens + 1;
        match (self.mix.lognormal_sigma, self.mix.range_ratio) {
            (Some(s), _) => (
                lognormal_bounds(input, s, floor),
                lognormal_bounds(u64::from(output), s, 1),
            ),
            (None, Some(r)) => (bounds(input, r, floor), bounds(u64::from(output), r, 1)),
            (None, None) => ((input, input), (u64::from(output), u64::from(output))),
        }
    }

    /// The most input and output tokens one of its requests may have: what must fit the
    /// server's context.
    pub fn longest_request(&self) -> (u64, u32) {
        let (mut input, mut output) = (0u64, 0u64);
        for base in self.base_shapes() {
            let ((_, i), (_, o)) = self.spread_of(base);
            input = input.max(i);
            output = output.max(o);
        }
        (input, u32::try_from(output).unwrap_or(u32::MAX))
    }

    /// Its requests' input tokens: `1000`, or `500-1500` when they are spread or mixed.
    pub fn input_span(&self) -> String {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for base in self.base_shapes() {
            let ((l, h), _) = self.spread_of(base);
            lo = lo.min(l);
            hi = hi.max(h);
        }
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    }

    /// The adapter request `i` names (`i` over the whole plan); a multi-turn chat's turns all
    /// name their conversation's.
    pub fn adapter_of(&self, seed: u64, i: u32) -> Option<&str> {
        let lora = self.mix.lora.as_ref()?;
        let key = self.turn_of(i).map_or(i, |(conversation, _)| conversation);
        Some(lora.pick(seed, key))
    }

    /// The context its longest request needs: input plus output tokens.
    pub fn context_needed(&self) -> u64 {
        let (input, output) = self.longest_request();
        input + u64::from(output)
    }
}

/// Which length a draw is for: a request's input and output lengths are drawn apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    Input,
    Output,
}

/// The lowest and highest lengths `--range-ratio ratio` draws around `base`: `⌊(1−R)·L⌋` and
/// `⌈(1+R)·L⌉`, never below `floor` (a prompt must hold its shared prefix and a token more; an
/// answer a token).
pub fn bounds(base: u64, ratio: f64, floor: u64) -> (u64, u64) {
    let lo = ((1.0 - ratio) * base as f64).floor() as u64;
    let hi = ((1.0 + ratio) * base as f64).ceil() as u64;
    (lo.max(floor), hi.max(floor))
}

/// Request `i`'s length drawn uniformly from [`bounds`], the same for a given `seed` and `i`
/// at every level (so levels that differ in load alone send the same lengths).
pub fn draw(base: u64, ratio: f64, floor: u64, seed: u64, which: Length, i: u32) -> u64 {
    let (lo, hi) = bounds(base, ratio, floor);
    let salt = match which {
        Length::Input => 0x1E46_7A11_0000_0000,
        Length::Output => 0x0A75_0E11_0000_0000,
    };
    let h = splitmix(seed ^ salt ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // `hi − lo + 1` values: the remainder's bias is below 2^-40 for any length that fits a
    // context window.
    lo + h % (hi - lo + 1)
}

/// The lowest and highest lengths a log-normal draw of σ `sigma` around `base` may give: the
/// draw is cut at 3σ either way, `base·e^(±3σ)`, never below `floor`.
pub fn lognormal_bounds(base: u64, sigma: f64, floor: u64) -> (u64, u64) {
    let lo = (base as f64 * (-3.0 * sigma).exp()).round() as u64;
    let hi = (base as f64 * (3.0 * sigma).exp()).round() as u64;
    (lo.max(floor), hi.max(floor))
}

/// Request `i`'s length drawn log-normal with median `base` and σ `sigma` of its log, cut at
/// 3σ ([`lognormal_bounds`]), the same for a given `seed` and `i` at every level.
pub fn lognormal(base: u64, sigma: f64, floor: u64, (seed, which, i): (u64, Length, u32)) -> u64 {
    let salt = match which {
        Length::Input => 0x106E_0A11_0000_0000,
        Length::Output => 0x106E_0B22_0000_0000,
    };
    let h = splitmix(seed ^ salt ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let h2 = splitmix(h);
    let u1 = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u2 = (h2 >> 11) as f64 / (1u64 << 53) as f64;
    // Box-Muller: one standard normal from two uniforms, cut at 3σ.
    let z = ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()).clamp(-3.0, 3.0);
    let (lo, hi) = lognormal_bounds(base, sigma, floor);
    ((base as f64 * (sigma * z).exp()).round() as u64).clamp(lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lognormal_lengths_have_their_median_and_stay_within_3_sigma() {
        let mut v: Vec<u64> = (0..4001)
            .map(|i| lognormal(1000, 0.5, 1, (9, Length::Input, i)))
            .collect();
        let (lo, hi) = lognormal_bounds(1000, 0.5, 1);
        assert_eq!((lo, hi), (223, 4482));
        assert!(v.iter().all(|&x| (lo..=hi).contains(&x)));
        v.sort_unstable();
        // The sample median of 4001 draws: within 4 standard errors (1.2533·σ·m/√n ≈ 9.9).
        assert!((v[2000] as f64 - 1000.0).abs() < 40.0, "{}", v[2000]);
        // The middle half within e^(±0.674σ): about 714 to 1400.
        assert!((v[1000] as f64 - 714.0).abs() < 40.0, "{}", v[1000]);
        assert!((v[3000] as f64 - 1400.0).abs() < 70.0, "{}", v[3000]);
        // The same request draws the same length; its output is drawn apart.
        let again = lognormal(1000, 0.5, 1, (9, Length::Input, 17));
        assert_eq!(again, lognormal(1000, 0.5, 1, (9, Length::Input, 17)));
        assert_ne!(
            (0..50)
                .map(|i| lognormal(1000, 0.5, 1, (9, Length::Input, i)))
                .collect::<Vec<_>>(),
            (0..50)
                .map(|i| lognormal(1000, 0.5, 1, (9, Length::Output, i)))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn bounds_are_vllms() {
        assert_eq!(bounds(1000, 0.5, 1), (500, 1500));
        assert_eq!(bounds(1001, 0.25, 1), (750, 1252));
        assert_eq!(bounds(3, 0.9, 1), (1, 6));
        assert_eq!(bounds(100, 0.0, 1), (100, 100));
        assert_eq!(bounds(100, 0.5, 60), (60, 150));
    }

    #[test]
    fn draws_are_uniform_over_the_bounds_and_reproducible() {
        let n = 20_000u32;
        let draws: Vec<u64> = (0..n)
            .map(|i| draw(1000, 0.5, 1, 7, Length::Input, i))
            .collect();
        assert!(draws.iter().all(|&d| (500..=1500).contains(&d)));
        let mean = draws.iter().sum::<u64>() as f64 / f64::from(n);
        // A uniform over 500..=1500 has mean 1000 and standard deviation 288.97; the mean of
        // 20,000 draws has a standard error of 2.04: 10 is five of them.
        assert!((mean - 1000.0).abs() < 10.0, "mean {mean}");
        let var = draws
            .iter()
            .map(|&d| (d as f64 - mean).powi(2))
            .sum::<f64>()
            / f64::from(n - 1);
        assert!((var.sqrt() - 288.97).abs() < 5.0, "std {}", var.sqrt());
        assert!(draws.contains(&500) && draws.contains(&1500));
        let again: Vec<u64> = (0..n)
            .map(|i| draw(1000, 0.5, 1, 7, Length::Input, i))
            .collect();
        assert_eq!(draws, again);
        let other_seed: Vec<u64> = (0..8)
            .map(|i| draw(1000, 0.5, 1, 8, Length::Input, i))
            .collect();
        assert_ne!(draws[..8], other_seed[..], "the seed moves the draws");
        let outputs: Vec<u64> = (0..8)
            .map(|i| draw(1000, 0.5, 1, 7, Length::Output, i))
            .collect();
        assert_ne!(draws[..8], outputs[..], "input and output drawn apart");
    }

    fn counts(mix: &LoraMix, n: u32) -> Vec<u32> {
        let mut c = vec![0u32; mix.modules.len()];
        for i in 0..n {
            let name = mix.pick(3, i);
            let k = mix.modules.iter().position(|m| m == name).unwrap();
            c[k] += 1;
        }
        c
    }

    #[test]
    fn adapters_are_dealt_as_the_distribution_says() {
        let modules: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let rr = LoraMix {
            modules: modules.clone(),
            dist: LoraDist::RoundRobin,
        };
        assert_eq!(counts(&rr, 10), vec![3, 3, 2, 2]);
        assert_eq!(rr.pick(0, 5), "b");
        // 40,000 draws: each share's standard error is under 0.25 %; 1.2 % is five of them.
        let n = 40_000;
        let uniform = LoraMix {
            modules: modules.clone(),
            dist: LoraDist::Uniform,
        };
        for c in counts(&uniform, n) {
            assert!((f64::from(c) / f64::from(n) - 0.25).abs() < 0.012, "{c}");
        }
        let zipf = LoraMix {
            modules,
            dist: LoraDist::Zipf(1.0),
        };
        // 1/k over k = 1..4: 12/25, 6/25, 4/25, 3/25.
        let want = [0.48, 0.24, 0.16, 0.12];
        for (c, w) in counts(&zipf, n).into_iter().zip(want) {
            assert!(
                (f64::from(c) / f64::from(n) - w).abs() < 0.012,
                "{c} vs {w}"
            );
        }
    }

    #[test]
    fn lora_dist_parses_the_three_forms_and_refuses_others() {
        assert_eq!(LoraDist::parse("uniform"), Ok(LoraDist::Uniform));
        assert_eq!(LoraDist::parse("round-robin"), Ok(LoraDist::RoundRobin));
        assert_eq!(LoraDist::parse("zipf:1.5"), Ok(LoraDist::Zipf(1.5)));
        for bad in ["zipf:0", "zipf:-1", "zipf", "random", "zipf:x"] {
            assert!(LoraDist::parse(bad).is_err(), "{bad}");
        }
    }
}
