//! The grammar of flag values, as typed on the command line: counts (`64k`), lists (`1-128*2`),
//! request rates, pairs (`WxH`), percentages, windows (`FROM:TO`) and times (`--start-at`).
//! Each parses a string into its value or a one-line error that says what was wrong.
//!
//! A leaf: it imports nothing from the crate, so the command line and the workload both read
//! their values here.

/// Parses a number with an optional `k` (×1000) or `m` (×1,000,000) suffix.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix('k') {
        (n, 1_000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1_000_000.0)
    } else {
        (t.as_str(), 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number (examples: 8, 30k, 1.5k)"))?;
    let v = v * mult;
    if !v.is_finite() || v < 0.0 || v.fract() != 0.0 || v > 1e12 {
        return Err(format!("'{s}' is not a whole number of at most 10^12"));
    }
    Ok(v as u64)
}

/// Parses a list like `1,2,4,8`, `30k,60k,100k`, a range `1-8` (step 1), `10-100/10` (step 10)
/// or `1-128*2` (doubling). `none` (or an empty string) means no levels. The result must be
/// strictly increasing and every value positive.
pub fn parse_list(s: &str) -> Result<Vec<u64>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for item in t.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("'{s}' has an empty item"));
        }
        if let Some((a, b)) = item.split_once('-') {
            let (b, step, geometric) = if let Some((b, f)) = b.split_once('*') {
                (b, parse_count(f)?, true)
            } else if let Some((b, st)) = b.split_once('/') {
                (b, parse_count(st)?, false)
            } else {
                (b, 1, false)
            };
            let (a, b) = (parse_count(a)?, parse_count(b)?);
            if a == 0 || b < a {
                return Err(format!("range '{item}' must go up from a positive start"));
            }
            if (geometric && step < 2) || step == 0 {
                return Err(format!("range '{item}' has a step that never advances"));
            }
            let mut v = a;
            while v <= b {
                out.push(v);
                v = if geometric { v * step } else { v + step };
            }
            if out.last() != Some(&b) && geometric {
                out.push(b);
            }
        } else {
            out.push(parse_count(item)?);
        }
    }
    if out.contains(&0) {
        return Err(format!("'{s}': every value must be at least 1"));
    }
    if out.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("'{s}' must be strictly increasing (no repeats)"));
    }
    if out.len() > 10_000 {
        return Err(format!("'{s}' expands to more than 10,000 levels"));
    }
    Ok(out)
}

/// Parses request rates: `1,2,4,8`, decimals like `0.5,1.5`, or the integer ranges of
/// [`parse_list`] (`1-8`, `2-16*2`), and `inf` (every request at once, as vLLM's `bench serve`
/// takes it); `none` means no rate levels. Strictly increasing, positive.
pub fn parse_rates(s: &str) -> Result<Vec<f64>, String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for item in t.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!("'{s}' has an empty item"));
        }
        if item.eq_ignore_ascii_case("inf") {
            out.push(f64::INFINITY);
            continue;
        }
        if item.contains(['-', '*', '/']) {
            out.extend(parse_list(item)?.into_iter().map(|v| v as f64));
            continue;
        }
        let v: f64 = item
            .parse()
            .map_err(|_| format!("'{item}' is not a request rate (examples: 0.5, 4, 1-16*2)"))?;
        if !(v.is_finite() && v > 0.0 && v <= 1e6) {
            return Err(format!(
                "'{item}': a request rate must be above 0 and at most 10^6 requests/s"
            ));
        }
        out.push(v);
    }
    if out.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("'{s}' must be strictly increasing (no repeats)"));
    }
    if out.len() > 10_000 {
        return Err(format!("'{s}' expands to more than 10,000 levels"));
    }
    Ok(out)
}

/// Parses `--metric-percentiles`: percentiles in % above 0 and below 100 (`50,90,99.9`, or
/// with a `p` each: `p50,p99`), strictly increasing, at most 12.
pub fn parse_percentiles(s: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim) {
        let v: f64 = item
            .strip_prefix(['p', 'P'])
            .unwrap_or(item)
            .parse()
            .map_err(|_| format!("'{item}' is not a percentile (examples: 50, 99, 99.9)"))?;
        if !(v.is_finite() && v > 0.0 && v < 100.0) {
            return Err(format!(
                "'{item}': a percentile must be above 0 and below 100"
            ));
        }
        out.push(v);
    }
    if out.windows(2).any(|w| w[1] <= w[0]) {
        return Err(format!("'{s}' must be strictly increasing (no repeats)"));
    }
    if out.len() > 12 {
        return Err(format!("'{s}' has more than 12 percentiles"));
    }
    Ok(out)
}

/// Parses `AxB` into two numbers within `range` (`what` names them in errors).
pub fn parse_pair<T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display>(
    s: &str,
    range: std::ops::RangeInclusive<T>,
    what: &str,
) -> Result<(T, T), String> {
    let (a, b) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("'{s}' must look like {}x{}", range.end(), range.start()))?;
    let p = |v: &str| v.trim().parse::<T>().ok().filter(|n| range.contains(n));
    match (p(a), p(b)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!(
            "'{s}': {what} must be {} to {}",
            range.start(),
            range.end()
        )),
    }
}

/// A percentage limit: a finite number, zero or more (`5`, `2.5`, `10%`).
pub fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage (e.g. 5 or 2.5)"))?;
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(format!(
            "{s:?}: the limit must be a percentage of 0 or more"
        ))
    }
}

/// Parses `--trace-window FROM:TO` (seconds of the recorded trace, FROM < TO).
pub fn parse_window(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("--trace-window {s:?}: seconds FROM:TO of the trace, like 0:600");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let (a, b): (f64, f64) = (
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    );
    if !(a.is_finite() && b.is_finite() && a >= 0.0 && b > a) {
        return Err(bad());
    }
    Ok((a, b))
}

/// `--start-at TIME`: an RFC 3339 time (`2026-12-02T10:00:00Z`), Unix seconds (`@1796205600`),
/// or `+S` seconds from `now_ms` (one machine; shards need a shared absolute time).
pub fn parse_start_at(s: &str, now_ms: i64) -> Result<i64, String> {
    let t = s.trim();
    let bad = |why: &str| {
        format!(
            "--start-at {s}: {why}; expected an RFC 3339 time (2026-12-02T10:00:00Z), Unix seconds (@1796205600) or +S seconds from now"
        )
    };
    if let Some(rel) = t.strip_prefix('+') {
        let secs: f64 = rel
            .trim_end_matches('s')
            .parse()
            .map_err(|_| bad("not a number of seconds"))?;
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(bad("seconds must be zero or more"));
        }
        return Ok(now_ms + (secs * 1000.0).round() as i64);
    }
    if let Some(unix) = t.strip_prefix('@') {
        let secs: f64 = unix.parse().map_err(|_| bad("not a number of seconds"))?;
        if !secs.is_finite() {
            return Err(bad("not a number of seconds"));
        }
        return Ok((secs * 1000.0).round() as i64);
    }
    let ts: jiff::Timestamp = t.parse().map_err(|_| bad("not a time"))?;
    Ok(ts.as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_in_order_within_0_and_100() {
        assert_eq!(
            parse_percentiles("50,90,95,99,99.9").unwrap(),
            [50.0, 90.0, 95.0, 99.0, 99.9]
        );
        assert_eq!(parse_percentiles("p25, P75").unwrap(), [25.0, 75.0]);
        for bad in ["", "0", "100", "99,50", "50,50", "x", "-1", "nan"] {
            assert!(parse_percentiles(bad).is_err(), "{bad}");
        }
        let many = (1..=13)
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",");
        assert!(
            parse_percentiles(&many)
                .unwrap_err()
                .contains("more than 12")
        );
    }

    #[test]
    fn lists_ranges_and_suffixes() {
        assert_eq!(parse_list("1,2,4,8").unwrap(), vec![1, 2, 4, 8]);
        assert_eq!(
            parse_list("30k,60k,100K").unwrap(),
            vec![30_000, 60_000, 100_000]
        );
        assert_eq!(parse_list("1.5k").unwrap(), vec![1500]);
        assert_eq!(parse_list("1-4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_list("10-40/10").unwrap(), vec![10, 20, 30, 40]);
        assert_eq!(
            parse_list("1-100*2").unwrap(),
            vec![1, 2, 4, 8, 16, 32, 64, 100]
        );
        assert_eq!(parse_list("1-64*2").unwrap(), vec![1, 2, 4, 8, 16, 32, 64]);
        assert!(parse_list("none").unwrap().is_empty());
    }

    #[test]
    fn bad_lists_are_refused_with_a_reason() {
        for (bad, why) in [
            ("4,2", "strictly increasing"),
            ("0,1", "at least 1"),
            ("1,,2", "empty item"),
            ("a", "not a number"),
            ("8-1", "go up"),
            ("1-8*1", "never advances"),
            ("1,1", "strictly increasing"),
            ("1.5", "whole number"),
        ] {
            let e = parse_list(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn rate_lists() {
        assert_eq!(parse_rates("1,2,4").unwrap(), vec![1.0, 2.0, 4.0]);
        assert_eq!(parse_rates("0.5, 1.5,8").unwrap(), vec![0.5, 1.5, 8.0]);
        assert_eq!(parse_rates("1-8*2").unwrap(), vec![1.0, 2.0, 4.0, 8.0]);
        assert_eq!(parse_rates("0.5,1-3").unwrap(), vec![0.5, 1.0, 2.0, 3.0]);
        assert!(parse_rates("none").unwrap().is_empty());
        assert_eq!(parse_rates("4,INF").unwrap(), vec![4.0, f64::INFINITY]);
        assert!(parse_rates("inf,4").is_err(), "inf comes last");
        assert!(parse_rates("inf,inf").is_err());
        for (bad, why) in [
            ("2,1", "strictly increasing"),
            ("0", "above 0"),
            ("x", "not a request rate"),
            ("1,,2", "empty item"),
            ("-inf", "not a"),
        ] {
            let e = parse_rates(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn start_times() {
        assert_eq!(
            parse_start_at("2026-12-02T10:00:00Z", 0).unwrap(),
            1_796_205_600_000
        );
        assert_eq!(parse_start_at("@1796205600", 0).unwrap(), 1_796_205_600_000);
        assert_eq!(parse_start_at("+30", 1000).unwrap(), 31_000);
        assert_eq!(parse_start_at("+1.5s", 0).unwrap(), 1500);
        for bad in ["tomorrow", "+x", "+-3", "@abc", ""] {
            assert!(parse_start_at(bad, 0).is_err(), "{bad}");
        }
    }
}
