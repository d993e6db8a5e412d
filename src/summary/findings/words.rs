//! How the findings write numbers: one formatter for all of them (docs/metrics.md "Findings",
//! wording): counts that agree with their nouns, ranges whose equal ends are one figure, changes
//! said as rises and falls, and none below what the run can measure.

use super::MEASURABLE_PCT;

/// A figure as the tables write it: `4.25`, `73.0`, `1520`.
pub fn num(v: f64) -> String {
    crate::fmt::num(Some(v))
}

/// A time in ms as a person writes it: `22 ms`, `480 ms`, `1.4 s`, `61 s`.
pub fn ms_text(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{} ms", num(ms))
    } else {
        format!("{} s", num(ms / 1000.0))
    }
}

/// `1 request`, `5 requests`: the noun (singular) made to agree with the count.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {}", plural(noun))
    }
}

/// A noun's plural, for the nouns the findings count.
fn plural(noun: &str) -> String {
    if let Some(stem) = noun.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'o', 'u'])
    {
        return format!("{stem}ies");
    }
    if noun.ends_with('s') || noun.ends_with("ch") || noun.ends_with("sh") {
        return format!("{noun}es");
    }
    format!("{noun}s")
}

/// `+0.46 ms to +1.2 ms`, or one figure when the two ends read the same.
pub fn range(lo: &str, hi: &str) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo} to {hi}")
    }
}

/// A change in % said in words: `rose 12 %`, `fell 3.4 %`, or `did not change measurably`
/// when it is no larger than `floor` (at least [`MEASURABLE_PCT`]).
pub fn change(pct: f64, floor: f64) -> String {
    if !measurable(pct, floor) {
        return "did not change measurably".into();
    }
    if pct > 0.0 {
        format!("rose {}", pct_text(pct))
    } else {
        format!("fell {}", pct_text(-pct))
    }
}

/// Whether a change of `pct` is larger than `floor` and [`MEASURABLE_PCT`].
pub fn measurable(pct: f64, floor: f64) -> bool {
    pct.abs() > floor.max(MEASURABLE_PCT)
}

/// `12 %`, `3.4 %`, `0.6 %`: whole percents from ten, one decimal below.
pub fn pct_text(pct: f64) -> String {
    if pct.abs() >= 9.95 {
        format!("{pct:.0} %")
    } else {
        format!("{pct:.1} %")
    }
}

/// A signed share: `+12 %`, `-3.4 %`.
pub fn signed_pct(pct: f64) -> String {
    if pct >= 0.0 {
        format!("+{}", pct_text(pct))
    } else {
        pct_text(pct)
    }
}

/// `×4`, `×2.2`, `×53`: a ratio of growth.
pub fn times(r: f64) -> String {
    if r >= 9.95 {
        format!("×{r:.0}")
    } else {
        format!("×{}", crate::fmt::fmt_rate((r * 10.0).round() / 10.0))
    }
}

/// A queue's mean length: `23.2`, `0.4`.
pub fn queued_mean(v: f64) -> String {
    format!("{v:.1}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_their_nouns() {
        assert_eq!(count(1, "request"), "1 request");
        assert_eq!(count(0, "request"), "0 requests");
        assert_eq!(count(3, "completed request"), "3 completed requests");
        assert_eq!(count(2, "reply"), "2 replies");
        assert_eq!(count(2, "day"), "2 days");
        assert_eq!(count(2, "pass"), "2 passes");
    }

    #[test]
    fn growth_reads_as_a_factor() {
        assert_eq!(times(2.0), "×2");
        assert_eq!(times(2.24), "×2.2");
        assert_eq!(times(53.3), "×53");
        assert_eq!(times(9.96), "×10");
    }

    #[test]
    fn equal_ends_are_one_figure() {
        assert_eq!(range("+0.46 ms", "+0.46 ms"), "+0.46 ms");
        assert_eq!(range("+0.46 ms", "+1.2 ms"), "+0.46 ms to +1.2 ms");
    }

    #[test]
    fn changes_are_rises_and_falls_and_small_ones_none() {
        assert_eq!(change(12.0, 0.0), "rose 12 %");
        assert_eq!(change(-3.4, 0.0), "fell 3.4 %");
        assert_eq!(change(-1.0, 0.0), "did not change measurably");
        assert_eq!(change(1.9, 0.0), "did not change measurably");
        // A series that scatters by 5 % measures no change of 4 %.
        assert_eq!(change(4.0, 5.0), "did not change measurably");
        assert_eq!(change(6.0, 5.0), "rose 6.0 %");
        assert_eq!(signed_pct(-0.57), "-0.6 %");
        assert_eq!(signed_pct(12.0), "+12 %");
    }
}
