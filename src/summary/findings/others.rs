//! The findings that need a part of the run not every run has: failures (over every pass), energy, the
//! multi-turn cache, the agent sessions' (in [`super::sessions`]), reasoning, the baseline.

use std::fmt::Write;

use super::{
    ENERGY_COUNTER_STEP_S, ENERGY_DISAGREEMENT, ENERGY_RESOLUTION, Finding, measured, ms_text, num,
};
use super::{Strength, words};
use crate::summary::{LevelStatus, LevelSummary, RunSummary};
use crate::workload::LevelKind;

pub(super) fn findings(s: &RunSummary) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(energy(s));
    out.extend(multi_turn(s));
    out.extend(super::sessions::cache(s));
    out.extend(super::sessions::time(s));
    out.extend(slo_tiers(s));
    out.extend(reasoning(s));
    out.extend(baseline(s));
    out
}

/// Failures over every pass of the plan (plain and constrained twins, each thinking budget).
pub(super) fn failures(s: &RunSummary) -> Option<Finding> {
    let ran: Vec<&LevelSummary> = s
        .levels()
        .filter(|l| l.stats.is_some() && l.status != LevelStatus::Skipped)
        .collect();
    if ran.is_empty() {
        return None;
    }
    let requests: u64 = ran
        .iter()
        .filter_map(|l| l.stats.as_ref())
        .map(|st| st.scalars.completed + st.scalars.failed)
        .sum();
    let mut failed_total = 0;
    let mut by_kind: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    let mut parts = Vec::new();
    let mut failing = Vec::new();
    for l in &ran {
        let st = l.stats.as_ref().expect("filtered");
        if st.scalars.failed == 0 {
            continue;
        }
        failed_total += st.scalars.failed;
        let kinds: Vec<String> = st
            .scalars
            .failures
            .iter()
            .map(|(k, c)| {
                *by_kind.entry(k.clone()).or_default() += c.count;
                format!("{} {k}", c.count)
            })
            .collect();
        parts.push(format!("{}: {}", l.label(), kinds.join(", ")));
        failing.push(*l);
    }
    // Nothing ended: nothing to say about failures (a level whose requests were all
    // cancelled).
    if requests == 0 {
        return None;
    }
    let text = if failed_total == 0 {
        format!("No failures in {}.", words::count(requests, "request"))
    } else {
        format!(
            "{failed_total} of {} failed — {}.",
            words::count(requests, "request"),
            parts.join("; ")
        )
    };
    let mut f = Finding::new("failures", text, &failing)
        .value("failed", Some(failed_total as f64))
        .value("requests", Some(requests as f64));
    for (k, n) in by_kind {
        f = f.value(&format!("failed_{k}"), Some(n as f64));
    }
    Some(f)
}

fn energy(s: &RunSummary) -> Option<Finding> {
    let best = s
        .sweep
        .iter()
        .filter(|l| measured(l))
        .filter(|l| l.energy.output_tokens_per_joule.is_some())
        .max_by(|a, b| {
            a.energy
                .output_tokens_per_joule
                .unwrap_or(0.0)
                .total_cmp(&b.energy.output_tokens_per_joule.unwrap_or(0.0))
        })?;
    let tpj = best.energy.output_tokens_per_joule?;
    let mut text = format!(
        "Most output tokens per joule at {}: {} tokens/J",
        best.label(),
        num(tpj)
    );
    if let Some(w) = best.energy.mean_power_w {
        let _ = write!(text, " at {} W", num(w));
    }
    if let Some(c) = best.energy.cost_per_million_output_tokens {
        let _ = write!(text, ", {} per million output tokens", num(c));
    }
    text.push('.');
    let mut f = Finding::new("energy", text, &[best]);
    f.caveats.extend(energy_disagreement(best));
    f.caveats
        .extend(energy_resolution(best, s.config.gpu_interval_s));
    Some(
        f.value("output_tokens_per_joule", Some(tpj))
            .value("mean_power_w", best.energy.mean_power_w)
            .value(
                "cost_per_million_output_tokens",
                best.energy.cost_per_million_output_tokens,
            ),
    )
}

/// A level whose energy window is too short for how finely it was measured: a counter's step,
/// or power sampled every `interval_s`, over the window is more than [`ENERGY_RESOLUTION`].
pub(super) fn energy_resolution(l: &LevelSummary, interval_s: f64) -> Option<String> {
    let window = l.energy.energy_window_s.filter(|w| *w > 0.0)?;
    let counter = l.energy.energy_source.as_deref() == Some(crate::telemetry::energy::FROM_COUNTER);
    let (step, how) = if counter {
        (
            ENERGY_COUNTER_STEP_S,
            format!(
                "the energy counter moves in steps of about {ENERGY_COUNTER_STEP_S} s of power"
            ),
        )
    } else {
        (interval_s, format!("power was read every {interval_s} s"))
    };
    let share = step / window;
    (share > ENERGY_RESOLUTION).then(|| {
        format!(
            "{}'s energy spans only {} s and {how}, so it is uncertain by up to ±{:.0} %; run longer levels",
            l.label(),
            num(window),
            share * 100.0
        )
    })
}

/// A level whose energy counter and sampled power disagree by more than
/// [`ENERGY_DISAGREEMENT`]: which one is wrong the run cannot tell.
pub(super) fn energy_disagreement(l: &LevelSummary) -> Option<String> {
    if l.energy.energy_source.as_deref() != Some(crate::telemetry::energy::FROM_COUNTER) {
        return None;
    }
    let counter = l.energy.mean_power_w?;
    let sampled = l
        .gpus
        .iter()
        .map(|g| g.mean_power_w)
        .sum::<Option<f64>>()
        .filter(|_| !l.gpus.is_empty())?;
    let off = sampled / counter - 1.0;
    (off.abs() > ENERGY_DISAGREEMENT).then(|| {
        format!(
            "{}'s energy counter gives {} W but its sampled power averaged {} W ({:+.0} %): one of them is wrong (a counter reset or wrapped, or power sampled too seldom for the load's bursts), so its energy figures are doubtful",
            l.label(),
            num(counter),
            num(sampled),
            off * 100.0
        )
    })
}

fn multi_turn(s: &RunSummary) -> Vec<Finding> {
    s.multi_turn
        .iter()
        .filter(|l| measured(l))
        .filter_map(|l| {
            let st = l.stats.as_ref()?;
            let share = st.scalars.prefix_cache_hit_rate?;
            let by_turn: Vec<String> = st
                .scalars
                .turns
                .iter()
                .filter_map(|t| Some(format!("{:.0} %", t.cache_hit_rate? * 100.0)))
                .collect();
            let mut text = format!(
                "{}: the prefix cache served {:.1} % of prompt tokens",
                l.label(),
                share * 100.0
            );
            if by_turn.len() > 1 {
                let _ = write!(text, " (by turn: {})", by_turn.join(", "));
            }
            text.push('.');
            Some(Finding::new("multi_turn_cache", text, &[l]).value("cache_hit_rate", Some(share)))
        })
        .collect()
}

/// The SLO tiers' answers in one sentence: how many users (or concurrent requests) each holds.
fn slo_tiers(s: &RunSummary) -> Option<Finding> {
    let first = s.slo_tiers.first()?;
    let parts: Vec<String> = s
        .slo_tiers
        .iter()
        .map(|a| format!("{} ({}) holds {}", a.tier, a.slo.describe(), a.most_text()))
        .collect();
    let text = format!("SLO tiers: {}.", parts.join("; "));
    let levels: Vec<&LevelSummary> = s
        .sessions
        .iter()
        .chain(&s.sweep)
        .filter(|l| !l.slo_tiers.is_empty() && l.trace.is_none())
        .filter(|l| (first.of == "users") == (l.kind == LevelKind::Sessions))
        .collect();
    let mut f = Finding::new("slo_tiers", text, &levels);
    for a in &s.slo_tiers {
        f = f.value(&format!("most_{}", a.tier), a.most.map(f64::from));
    }
    if s.slo_tiers.iter().any(|a| !a.certain) {
        f = f.weakened(
            Strength::Thin,
            "a verdict it rests on could go the other way on another run (its confidence interval straddles a limit; marked ?): run more requests a level".into(),
        );
    }
    Some(f)
}

fn reasoning(s: &RunSummary) -> Option<Finding> {
    let l = s
        .sweep
        .iter()
        .filter(|l| measured(l) && l.kind == LevelKind::Sweep)
        .min_by_key(|l| l.concurrency)?;
    let st = l.stats.as_ref()?;
    let share = st.scalars.reasoning_share.filter(|x| *x > 0.0)?;
    let mut text = format!(
        "Reasoning: {:.0} % of output tokens were thinking at {}",
        share * 100.0,
        l.label()
    );
    let ttfc = st.dists.ttfc_ms.as_ref().map(|d| d.p50);
    if let Some(t) = ttfc {
        let _ = write!(
            text,
            "; the first answer token came after {} (p50)",
            ms_text(t)
        );
    }
    text.push('.');
    Some(
        Finding::new("reasoning", text, &[l])
            .value("reasoning_share", Some(share))
            .value("ttfc_p50_ms", ttfc),
    )
}

/// With several thinking budgets: what each cost at the lowest concurrency all of them ran.
pub(super) fn thinking_budgets(s: &RunSummary) -> Option<Finding> {
    let budgets = &s.config.thinking_budgets;
    let at = |c: u32, b: u32| {
        s.sweep
            .iter()
            .find(|l| measured(l) && l.concurrency == c && l.thinking_budget == Some(b))
    };
    let c = s
        .sweep
        .iter()
        .filter(|l| measured(l))
        .map(|l| l.concurrency)
        .filter(|&c| budgets.iter().all(|&b| at(c, b).is_some()))
        .min()?;
    if budgets.len() < 2 {
        return None;
    }
    let levels: Vec<&LevelSummary> = budgets.iter().filter_map(|&b| at(c, b)).collect();
    // Budgets compare by what was thought: where nothing was, there is nothing to compare (the
    // run's warning says the reasoning did not stream).
    let thought_any = levels.iter().any(|l| {
        l.stats
            .as_ref()
            .and_then(|st| st.scalars.mean_reasoning_tokens)
            .is_some_and(|t| t > 0.0)
    });
    if !thought_any {
        return None;
    }
    let mut parts = Vec::new();
    let mut f = Finding::new("thinking_budgets", String::new(), &levels);
    for (l, b) in levels.iter().zip(budgets) {
        let st = l.stats.as_ref()?;
        let ttfc = st.dists.ttfc_ms.as_ref().map(|d| d.p50);
        let thought = st.scalars.mean_reasoning_tokens;
        parts.push(format!(
            "{b} tokens: TTFC p50 {} ({} thinking tokens a request)",
            ttfc.map_or_else(|| "never".into(), ms_text),
            num(thought.unwrap_or(0.0))
        ));
        f = f
            .value(&format!("ttfc_p50_ms_think_{b}"), ttfc)
            .value(&format!("reasoning_tokens_think_{b}"), thought);
    }
    f.text = format!("Thinking budgets at C={c}: {}.", parts.join("; "));
    Some(f)
}

fn baseline(s: &RunSummary) -> Option<Finding> {
    let b = s.baseline.as_ref()?;
    // The change that matters most: the largest in size of any figure at any level.
    let (c, what, pct) = b
        .comparisons
        .iter()
        .flat_map(|c| {
            [
                (c, "output tok/s", c.output_throughput_pct),
                (c, "TTFT p50", c.ttft_p50_pct),
                (c, "TPOT p50", c.tpot_p50_pct),
            ]
        })
        .filter_map(|(c, w, p)| Some((c, w, p?)))
        .max_by(|a, b| a.2.abs().total_cmp(&b.2.abs()))?;
    let levels: Vec<&LevelSummary> = s.levels().filter(|l| l.index == c.index).collect();
    Some(
        Finding::new(
            "baseline",
            format!(
                "Against the baseline ({}): the largest change is {what} at {}, {pct:+.1} %.",
                b.label, c.label
            ),
            &levels,
        )
        .value("change_pct", Some(pct)),
    )
}
