//! Where the model ended its answers (`--natural-stop`): how long they were against the cap
//! they were allowed, and whether that makes the run's figures those of short answers or of
//! answers that ran to the cap.

use super::words::{count, num, pct_text};
use super::{Finding, measured};
use crate::summary::{LevelSummary, RunSummary};

/// Natural-stop answers ended far short of their cap when every level's median length is
/// under this share of it.
pub const FAR_SHORT_SHARE: f64 = 0.5;
/// …and mostly ran to it when more than this share of them reached it.
pub const MOSTLY_CAPPED_SHARE: f64 = 0.5;

/// The `natural_stop` finding: per output cap, the range of the levels' median answer lengths
/// (nearest rank over each level's completed requests) and how many answers reached the cap.
pub(super) fn natural_stop(s: &RunSummary) -> Option<Finding> {
    let levels: Vec<&LevelSummary> = s
        .levels()
        .filter(|l| measured(l))
        .filter(|l| median_output(l).is_some() && capped(l).is_some())
        .collect();
    if levels.is_empty() {
        return None;
    }
    let mut caps: Vec<u32> = Vec::new();
    for l in &levels {
        if !caps.contains(&l.output_len) {
            caps.push(l.output_len);
        }
    }
    let mut parts = Vec::new();
    let (mut far, mut mostly) = (true, true);
    let (mut share_lo, mut share_hi) = (f64::INFINITY, 0.0_f64);
    let (mut reached, mut completed) = (0u64, 0u64);
    for cap in &caps {
        let group: Vec<&&LevelSummary> = levels.iter().filter(|l| l.output_len == *cap).collect();
        let medians: Vec<f64> = group.iter().filter_map(|l| median_output(l)).collect();
        let lo = medians.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = medians.iter().copied().fold(0.0, f64::max);
        let (at_cap, done) = group
            .iter()
            .filter_map(|l| capped(l))
            .fold((0, 0), |(a, d), (x, y)| (a + x, d + y));
        let cap_f = f64::from(*cap).max(1.0);
        share_lo = share_lo.min(lo / cap_f);
        share_hi = share_hi.max(hi / cap_f);
        reached += at_cap;
        completed += done;
        far &= hi < FAR_SHORT_SHARE * cap_f;
        mostly &= at_cap as f64 > MOSTLY_CAPPED_SHARE * done as f64;
        let span = if num(lo) == num(hi) {
            format!("{} tokens ({})", num(lo), pct_text(100.0 * lo / cap_f))
        } else {
            format!(
                "{}–{} tokens ({}–{})",
                num(lo),
                num(hi),
                pct_text(100.0 * lo / cap_f),
                pct_text(100.0 * hi / cap_f)
            )
        };
        parts.push(format!(
            "a median of {span} of the {cap} allowed over {}, {} of {done} reaching the cap",
            count(group.len() as u64, "level"),
            at_cap
        ));
    }
    let mut text = format!("Natural stops: answers ended at {}.", parts.join("; "));
    if far {
        text.push_str(
            " They ended far short of the cap: throughput, TPOT and E2E here are those of answers that long, not of answers as long as the cap (without --natural-stop every answer runs to it).",
        );
    } else if mostly {
        text.push_str(
            " Most reached the cap: the model seldom ended its answers within it, so these figures are close to those without --natural-stop.",
        );
    }
    Some(
        Finding::new("natural_stop", text, &levels)
            .value("median_share_min", Some(share_lo))
            .value("median_share_max", Some(share_hi))
            .value("reached_output_cap", Some(reached as f64))
            .value("completed", Some(completed as f64))
            .value("far_short", Some(f64::from(u8::from(far))))
            .value("mostly_capped", Some(f64::from(u8::from(mostly && !far)))),
    )
}

/// A level's median answer length (nearest rank, its completed requests).
fn median_output(l: &LevelSummary) -> Option<f64> {
    Some(
        l.stats
            .as_ref()?
            .dists
            .output_tokens_per_request
            .as_ref()?
            .p50,
    )
}

/// A natural-stop level's answers that reached the cap, and its completed requests.
fn capped(l: &LevelSummary) -> Option<(u64, u64)> {
    let sc = &l.stats.as_ref()?.scalars;
    Some((sc.reached_output_cap?, sc.completed))
}

#[cfg(test)]
#[allow(clippy::float_cmp)] // the values are counts and 0/1 flags, exact on purpose
mod tests {
    use super::*;
    use crate::metrics::{DistStats, LevelStats};
    use crate::summary::LevelStatus;
    use crate::workload::{LevelKind, LevelSpec};

    /// A finished sweep level asking for `cap` tokens whose `completed` answers had the
    /// `median` length, `at_cap` of them reaching the cap.
    fn level(index: u32, cap: u32, median: f64, at_cap: u64, completed: u64) -> LevelSummary {
        let spec = LevelSpec::new(
            index,
            LevelKind::Sweep,
            index + 1,
            (100, cap),
            completed as u32,
        );
        let mut l = LevelSummary::planned(&spec);
        l.status = LevelStatus::Done;
        let mut st = LevelStats::default();
        st.scalars.completed = completed;
        st.scalars.reached_output_cap = Some(at_cap);
        st.scalars.ended_by_model = Some(completed - at_cap);
        st.dists.output_tokens_per_request = Some(DistStats {
            count: completed,
            p50: median,
            ..DistStats::default()
        });
        l.stats = Some(st);
        l
    }

    fn run(levels: Vec<LevelSummary>) -> RunSummary {
        let mut s = RunSummary::new(crate::config::RunConfig::minimal("http://x"), None);
        s.sweep = levels;
        s
    }

    /// Far short where every median is under half the cap; the range of medians and the
    /// answers at the cap summed over the levels.
    #[test]
    fn answers_far_short_of_the_cap_are_said_to_be() {
        let f = natural_stop(&run(vec![
            level(0, 500, 140.0, 0, 10),
            level(1, 500, 152.0, 1, 20),
        ]))
        .unwrap();
        assert!(
            f.text.starts_with("Natural stops: answers ended at a median of 140–152 tokens (28 %–30 %) of the 500 allowed over 2 levels, 1 of 30 reaching the cap. They ended far short"),
            "{}",
            f.text
        );
        assert_eq!(f.values["far_short"], 1.0);
        assert_eq!(f.values["reached_output_cap"], 1.0);
        assert!((f.values["median_share_max"] - 152.0 / 500.0).abs() < 1e-12);
    }

    /// A median at half the cap or more is not far short; most at the cap is said instead.
    #[test]
    fn answers_mostly_at_the_cap_are_said_to_be() {
        let f = natural_stop(&run(vec![level(0, 100, 100.0, 9, 10)])).unwrap();
        assert!(f.text.contains("Most reached the cap"), "{}", f.text);
        assert_eq!(
            (f.values["far_short"], f.values["mostly_capped"]),
            (0.0, 1.0)
        );
        let f = natural_stop(&run(vec![level(0, 100, 50.0, 2, 10)])).unwrap();
        assert!(!f.text.contains("far short") && !f.text.contains("Most reached"));
    }

    /// Levels sent with `ignore_eos` carry no cap count: no finding.
    #[test]
    fn no_finding_without_natural_stops() {
        let mut l = level(0, 100, 100.0, 10, 10);
        l.stats.as_mut().unwrap().scalars.reached_output_cap = None;
        assert!(natural_stop(&run(vec![l])).is_none());
    }
}
