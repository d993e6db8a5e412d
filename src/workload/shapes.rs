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
}
