//! A small parser for the Prometheus text exposition format (version 0.0.4), the format every
//! engine's `/metrics` and NVIDIA's DCGM exporter speak.
//!
//! Written here rather than taken from a crate: the crates on offer either pull in a regex engine
//! and chrono for a 100-line job, or reject whole pages over one odd line. This one skips a line
//! it cannot read (and counts it) instead, since one engine's quirk must never blank a panel.

/// One sample line: `name{labels} value [timestamp]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    pub samples: Vec<Sample>,
    /// Lines that were neither comments nor readable samples.
    pub skipped_lines: usize,
}

impl Page {
    /// Every sample named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    /// The sum of every finite sample named `name` (series of several ranks or engines add up).
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut it = self.all(name).filter(|s| s.value.is_finite()).peekable();
        it.peek()?;
        Some(it.map(|s| s.value).sum())
    }

    /// The mean of every finite sample named `name`.
    pub fn mean(&self, name: &str) -> Option<f64> {
        let v: Vec<f64> = self
            .all(name)
            .map(|s| s.value)
            .filter(|v| v.is_finite())
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// Parses a whole page. Never fails: unreadable lines are counted in `skipped_lines`.
pub fn parse(text: &str) -> Page {
    let mut page = Page::default();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Some(s) => page.samples.push(s),
            None => page.skipped_lines += 1,
        }
    }
    page
}

fn is_name_char(c: char, first: bool) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':' || (!first && c.is_ascii_digit())
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line
        .char_indices()
        .find(|&(i, c)| !is_name_char(c, i == 0))
        .map_or(line.len(), |(i, _)| i);
    if name_end == 0 {
        return None;
    }
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let (l, after) = parse_labels(r)?;
        labels = l;
        rest = after;
    }
    let mut parts = rest.split_whitespace();
    let value = parse_value(parts.next()?)?;
    // An optional integer timestamp; anything more is junk.
    if let Some(ts) = parts.next() {
        ts.parse::<i64>().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `key="value",...}` and returns the labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        if key.is_empty()
            || !key
                .chars()
                .enumerate()
                .all(|(i, c)| is_name_char(c, i == 0) && c != ':')
        {
            return None;
        }
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    other => {
                        value.push('\\');
                        value.push(other);
                    }
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((key.to_string(), value));
        s = s[end + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return None;
        }
    }
}

fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => v.parse::<f64>().ok(),
    }
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // parsed values are compared exactly on purpose
mod tests {
    use super::*;

    #[test]
    fn samples_labels_comments_and_special_values() {
        let text = r#"
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 12.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 1.5e3
plain_metric 42 1712345678000
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 7
nan_metric NaN
neg{a="b"} -Inf
"#;
        let p = parse(text);
        assert_eq!(p.skipped_lines, 0);
        assert_eq!(p.samples.len(), 6);
        assert_eq!(p.sum("vllm:num_requests_running"), Some(12.0));
        let pos = p
            .all("vllm:spec_decode_num_accepted_tokens_per_pos_total")
            .next()
            .unwrap();
        assert_eq!(pos.label("position"), Some("2"));
        assert_eq!(pos.value, 1500.0);
        assert_eq!(p.sum("plain_metric"), Some(42.0));
        assert_eq!(
            p.all("vllm:time_to_first_token_seconds_bucket")
                .next()
                .unwrap()
                .label("le"),
            Some("+Inf")
        );
        assert!(p.all("nan_metric").next().unwrap().value.is_nan());
        assert_eq!(p.sum("nan_metric"), None, "NaN is not summed");
    }

    #[test]
    fn escaped_label_values() {
        let p = parse(r#"m{model_name="a \"quoted\" back\\slash\nnewline",x="y"} 1"#);
        assert_eq!(
            p.samples[0].label("model_name"),
            Some("a \"quoted\" back\\slash\nnewline")
        );
        assert_eq!(p.samples[0].label("x"), Some("y"));
    }

    #[test]
    fn junk_lines_are_skipped_and_counted() {
        let p = parse(
            "good 1\n{bad} 2\nno_value\nname{a=\"unterminated} 3\nname{a=b} 4\nx 1 2 3\ny notanumber\nok{a=\"1\",} 5\n",
        );
        assert_eq!(
            p.samples
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>(),
            vec!["good", "ok"]
        );
        assert_eq!(p.skipped_lines, 6);
    }

    #[test]
    fn sums_and_means_over_series() {
        let p = parse("g{r=\"0\"} 0.25\ng{r=\"1\"} 0.75\n");
        assert_eq!(p.sum("g"), Some(1.0));
        assert_eq!(p.mean("g"), Some(0.5));
        assert_eq!(p.sum("missing"), None);
    }
}
