//! Numbers as servetop writes them, the same on screen and in files: a measured value, a rate,
//! a token count.

/// A number with precision that suits its size: 73.2, 512, 0.42, or `-` when absent.
pub fn num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if !v.is_finite() => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
    }
}

/// `4` -> `4`, `0.5` -> `0.5`, `2.25` -> `2.25` (at most three decimals, no trailing zeros).
pub fn fmt_rate(r: f64) -> String {
    let s = format!("{r:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// `30000` -> `30K`, `1500` -> `1.5K`, `512` -> `512`.
pub fn fmt_tokens(n: u64) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}K", n / 1000)
    } else if n >= 1000 {
        format!("{:.1}K", n as f64 / 1000.0)
    } else {
        n.to_string()
    }
}
