//! Shape grids (`--shapes 1000/500,8000/1000`): the sweep (and the rate levels) once per input
//! and output length pair, a pass per shape.

use serde::{Deserialize, Serialize};

use crate::grammar::parse_count;

/// One input/output pair: every request of its levels has exactly these lengths (up to
/// `--range-ratio`'s spread around them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Shape {
    pub input_len: u64,
    pub output_len: u32,
}

impl Shape {
    /// `1000/500`.
    pub fn label(self) -> String {
        format!("{}/{}", self.input_len, self.output_len)
    }

    /// `1000/500` or `8K/1K`: input tokens, then output tokens, each at least 1.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let (i, o) = t
            .split_once('/')
            .ok_or_else(|| format!("'{t}': a shape is IN/OUT tokens, e.g. 1000/500"))?;
        let input_len = parse_count(i.trim()).map_err(|e| format!("'{t}': {e}"))?;
        let output = parse_count(o.trim()).map_err(|e| format!("'{t}': {e}"))?;
        let output_len = u32::try_from(output)
            .map_err(|_| format!("'{t}': at most 4294967295 output tokens"))?;
        if input_len == 0 || output_len == 0 {
            return Err(format!("'{t}': both lengths must be at least 1 token"));
        }
        Ok(Self {
            input_len,
            output_len,
        })
    }

    /// `1000/500,8000/1000`: the shapes in the order given, each once.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        let mut out: Vec<Self> = Vec::new();
        for part in s.split(',') {
            let shape = Self::parse(part)?;
            if out.contains(&shape) {
                return Err(format!("shape {} is given twice", shape.label()));
            }
            out.push(shape);
        }
        Ok(out)
    }
}

/// A shape and its weight in a mix (`--shape-mix 1000/500:3,8000/1000:1`): each request of a
/// level draws one, with a chance proportional to its weight.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightedShape {
    pub shape: Shape,
    pub weight: f64,
}

impl WeightedShape {
    /// `1000/500:3,8000/1000` (a weight of 1 where none is given): the shapes in the order
    /// given, each once, two at least, each weight above 0.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        let mut out: Vec<Self> = Vec::new();
        for part in s.split(',') {
            let t = part.trim();
            let (shape, weight) = match t.split_once(':') {
                Some((sh, w)) => {
                    let w: f64 = w
                        .trim()
                        .parse()
                        .ok()
                        .filter(|w: &f64| w.is_finite() && *w > 0.0)
                        .ok_or_else(|| format!("'{t}': the weight after ':' must be above 0"))?;
                    (Shape::parse(sh)?, w)
                }
                None => (Shape::parse(t)?, 1.0),
            };
            if out.iter().any(|o| o.shape == shape) {
                return Err(format!("shape {} is given twice", shape.label()));
            }
            out.push(Self { shape, weight });
        }
        if out.len() < 2 {
            return Err(
                "a mix needs two shapes or more (one shape: --input-len and --output-len)".into(),
            );
        }
        Ok(out)
    }

    /// Each shape's share of the mix (its weight over the sum).
    pub fn shares(mix: &[Self]) -> Vec<f64> {
        let total: f64 = mix.iter().map(|w| w.weight).sum();
        mix.iter().map(|w| w.weight / total).collect()
    }

    /// The shape request `i` draws, the same for a given `seed` and `i` at every level.
    pub fn pick(mix: &[Self], seed: u64, i: u32) -> Shape {
        let h = crate::workload::dataset::splitmix(
            seed ^ 0x5AA9_E000_0000_0000 ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        let mut acc = 0.0;
        for (w, share) in mix.iter().zip(Self::shares(mix)) {
            acc += share;
            if u < acc {
                return w.shape;
            }
        }
        mix[mix.len() - 1].shape
    }

    /// `1000/500 (75 %), 8000/1000 (25 %)`.
    pub fn describe(mix: &[Self]) -> String {
        mix.iter()
            .zip(Self::shares(mix))
            .map(|(w, s)| {
                format!(
                    "{} ({} %)",
                    w.shape.label(),
                    crate::fmt::fmt_rate((s * 1000.0).round() / 10.0)
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl From<Shape> for String {
    fn from(s: Shape) -> Self {
        s.label()
    }
}

impl TryFrom<String> for Shape {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::parse(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_as_people_write_them() {
        let v = Shape::parse_list("1000/500, 8K/1K,200/2000").unwrap();
        assert_eq!(
            v.iter().map(|s| s.label()).collect::<Vec<_>>(),
            ["1000/500", "8000/1000", "200/2000"]
        );
        for (bad, why) in [
            ("1000", "a shape is IN/OUT"),
            ("1000/0", "at least 1"),
            ("x/5", "'x/5'"),
            ("10/5,10/5", "given twice"),
        ] {
            let e = Shape::parse_list(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        // In files, a shape is its label.
        let s = Shape::parse("8K/1K").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"8000/1000\"");
        assert_eq!(serde_json::from_str::<Shape>("\"8000/1000\"").unwrap(), s);
    }

    #[test]
    fn a_mix_draws_each_shape_its_share() {
        let mix = WeightedShape::parse_list("1000/500:3, 8000/1000").unwrap();
        assert_eq!(WeightedShape::shares(&mix), [0.75, 0.25]);
        assert_eq!(
            WeightedShape::describe(&mix),
            "1000/500 (75 %), 8000/1000 (25 %)"
        );
        let n = 20_000;
        let long = (0..n)
            .filter(|&i| WeightedShape::pick(&mix, 7, i).input_len == 8000)
            .count();
        // 4 standard deviations of a binomial count: √(n·p·(1−p)) ≈ 61.
        assert!((long as f64 - 5000.0).abs() < 4.0 * 61.3, "{long}");
        assert_eq!(
            WeightedShape::pick(&mix, 7, 12),
            WeightedShape::pick(&mix, 7, 12)
        );
        for (bad, why) in [
            ("1000/500", "two shapes or more"),
            ("1000/500:0,10/1", "above 0"),
            ("1000/500,1000/500:2", "given twice"),
        ] {
            let e = WeightedShape::parse_list(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
