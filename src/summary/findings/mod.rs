//! Findings: the sentences a colleague would write after the run, each a pure function of the
//! run summary (docs/metrics.md "Findings"). The session recomputes them as levels end;
//! `report` recomputes them for a saved run; every output shows the same list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{LevelStatus, LevelSummary, RunSummary};
use crate::workload::LevelKind;

pub use numbers::CaveatNumbers;

pub mod compare;
mod content;
mod lengths;
pub(crate) mod long_context;
mod mixes;
mod numbers;
mod others;
mod sessions;
mod structured;
mod sweep;
mod validity;
pub mod words;

/// A level within this share of the peak output tok/s has reached it.
pub const SATURATION_SHARE: f64 = 0.9;
/// The largest C is still rising when it added more than this over the level below it.
pub const STILL_RISING: f64 = 0.1;
/// The latency finding: the largest C whose TTFT p50 stays under this (ms).
pub const TTFT_GOOD_MS: f64 = 500.0;
/// A knee: TTFT p50 grew more than this times as much as the load between two adjacent
/// levels…
pub const KNEE_LOAD_FACTOR: f64 = 1.25;
/// …and rose by more than this (ms).
pub const KNEE_MIN_MS: f64 = 100.0;
/// The batch's own prefills account for a level's TTFT p50 when C/2 times C=1's is within this
/// share of it.
pub const PREFILL_ACCOUNTS: f64 = 0.25;
/// A level's server queued requests: its queued gauge reached this.
pub const QUEUED_MIN: f64 = 1.0;
/// The smallest change (%) stated as a rise or a fall, and the least spread a series has.
pub const MEASURABLE_PCT: f64 = 2.0;
/// A decode change across lengths is measured when it is over this many standard errors of its
/// two ends (each from its own chunk gaps).
pub const DECODE_SPREAD_Z: f64 = 2.0;
/// A fit through fewer points is thin and has no R².
pub const FIT_MIN_POINTS: usize = 3;
/// Two passes whose accept lengths differ by more than this share are not like with like.
pub const ACCEPT_CONFOUND: f64 = 0.05;
/// Adapters or image sizes whose mean prompts differ by more than this share are not like with
/// like.
pub const INPUT_CONFOUND: f64 = 0.1;
/// The latency finding: the largest C whose TPOT p50 stays within this times the smallest
/// level's.
pub const TPOT_FACTOR: f64 = 2.0;
/// TTFT grows faster than linear with input when its slope between the two longest lengths is
/// more than this times its slope between the two shortest.
pub const LINEAR_SLOPE_RATIO: f64 = 1.25;
/// servetop may have been the limit at a level where it used this share of one core…
pub const CLIENT_CPU_BOUND: f64 = 0.8;
/// …or where its runtime's timer woke later than this at the p99 (ms).
pub const TIMER_LAG_BOUND_MS: f64 = 5.0;
/// …or where more than this share of its deliveries, or of its first tokens, came in held reads
/// (docs/metrics.md "Held reads").
pub const HELD_SHARE: f64 = 0.01;
/// Fewer completed requests than this: a level's percentiles are rough.
pub const FEW_REQUESTS: u64 = 10;
/// More than this share of a no-prefix plan's prompt tokens from the prefix cache: its TTFT is
/// a cache hit's.
pub const CACHED_SHARE: f64 = 0.5;

/// A level's energy counter and the mean of its sampled power disagree beyond this share.
pub const ENERGY_DISAGREEMENT: f64 = 0.2;
/// A level's energy is uncertain by more than this share: its counter's step, or its power
/// sampling interval, over its window.
pub const ENERGY_RESOLUTION: f64 = 0.05;
/// How often an energy counter moves: NVML's grew by 7.6 J at a time on an H200 drawing 76 W.
pub const ENERGY_COUNTER_STEP_S: f64 = 0.1;

/// How far a finding can be trusted, the most severe reason first (docs/metrics.md "Findings",
/// how far to trust a finding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    #[default]
    Solid,
    /// It rests on little: few requests, few points, a series that is not monotone.
    Thin,
    /// It compares things that differ in more than what is compared.
    Confounded,
    /// It rests on a level the server's outage disturbed.
    Disturbed,
}

impl Strength {
    /// As results.json writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Solid => "solid",
            Self::Thin => "thin",
            Self::Confounded => "confounded",
            Self::Disturbed => "disturbed",
        }
    }
}

/// One finding (results.json `findings`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Finding {
    pub id: String,
    pub text: String,
    /// The labels of the levels it rests on, as the tables write them.
    pub levels: Vec<String>,
    /// Its numbers, by name.
    pub values: BTreeMap<String, f64>,
    /// Why it should not be taken at face value, found in the run itself.
    pub caveats: Vec<String>,
    /// The most severe reason that applies, and each reason in a sentence.
    #[serde(default)]
    pub strength: Strength,
    #[serde(default)]
    pub strength_reasons: Vec<String>,
    /// The indices of the levels it rests on (for its caveats, found once all are made).
    #[serde(skip)]
    rests_on: Vec<u32>,
}

/// Equal when what the files hold is equal (`rests_on` is not written).
impl PartialEq for Finding {
    fn eq(&self, o: &Self) -> bool {
        (
            &self.id,
            &self.text,
            &self.levels,
            &self.values,
            &self.caveats,
            self.strength,
            &self.strength_reasons,
        ) == (
            &o.id,
            &o.text,
            &o.levels,
            &o.values,
            &o.caveats,
            o.strength,
            &o.strength_reasons,
        )
    }
}

impl Finding {
    fn new(id: &str, text: String, levels: &[&LevelSummary]) -> Self {
        Self {
            id: id.into(),
            text,
            levels: levels.iter().map(|l| l.label()).collect(),
            values: BTreeMap::new(),
            caveats: Vec::new(),
            strength: Strength::Solid,
            strength_reasons: Vec::new(),
            rests_on: levels.iter().map(|l| l.index).collect(),
        }
    }

    /// Marks it `strength` (if that is more severe than it is) for `reason`.
    fn weaken(&mut self, strength: Strength, reason: String) {
        self.strength = self.strength.max(strength);
        if !self.strength_reasons.contains(&reason) {
            self.strength_reasons.push(reason);
        }
    }

    /// [`Finding::weaken`], by value.
    fn weakened(mut self, strength: Strength, reason: String) -> Self {
        self.weaken(strength, reason);
        self
    }

    fn value(mut self, name: &str, v: Option<f64>) -> Self {
        if let Some(v) = v.filter(|v| v.is_finite()) {
            self.values.insert(name.into(), v);
        }
        self
    }
}

/// Every finding the run supports, in reading order: the sweep's, long context's, then the
/// rest.
pub fn of(whole: &RunSummary) -> Vec<Finding> {
    // The findings of the headline pass (docs/outputs.md "Passes"): the plain levels of the
    // first thinking budget. The other budgets' levels are the same plan again, not more
    // points of one curve, and the constrained twins the same plan constrained: what each
    // budget and each constraint cost are findings of their own.
    let full = whole;
    let passes = full.passes();
    // The plain levels of every budget: what the budgets' finding compares.
    let plain;
    let whole = if full.config.response_format.is_some() {
        plain = full.only_plain();
        &plain
    } else {
        full
    };
    let headline;
    let s = if passes.several_series() {
        headline = full.only(passes.headline());
        &headline
    } else {
        full
    };
    let mut out: Vec<Finding> = outage(full).into_iter().collect();
    out.extend(sweep::findings(s));
    out.extend(long_context::findings(s));
    out.extend(others::failures(full));
    out.extend(others::findings(s));
    out.extend(lengths::natural_stop(s));
    out.extend(mixes::lora(s));
    out.extend(mixes::images(s));
    out.extend(validity::finding(s));
    out.extend(others::thinking_budgets(whole));
    out.extend(structured::finding(full));
    out.extend(content::accept_by_content(full));
    let by_level = level_caveats(full);
    let strength: BTreeMap<u32, Vec<(Strength, String)>> = full
        .levels()
        .map(|l| (l.index, strength_of(l)))
        .filter(|(_, r)| !r.is_empty())
        .collect();
    for f in &mut out {
        for c in f.rests_on.iter().filter_map(|i| by_level.get(i)).flatten() {
            if !f.caveats.contains(c) {
                f.caveats.push(c.clone());
            }
        }
        // A finding that states what happened (a restart, a skip, a count) is not weakened by
        // how few requests a level had; only by an outage.
        let states_facts = FACTS.contains(&f.id.as_str());
        let reasons: Vec<(Strength, String)> = f
            .rests_on
            .iter()
            .filter_map(|i| strength.get(i))
            .flatten()
            .filter(|(st, _)| !states_facts || *st == Strength::Disturbed)
            .cloned()
            .collect();
        for (st, why) in reasons {
            f.weaken(st, why);
        }
    }
    out
}

/// Findings that state what happened rather than measure it.
const FACTS: [&str; 4] = [
    "long_context_servers",
    "long_context_skipped",
    "failures",
    "outage",
];

/// What a level itself says about the strength of any finding resting on it.
fn strength_of(l: &LevelSummary) -> Vec<(Strength, String)> {
    let Some(st) = l.stats.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let completed = st.scalars.completed;
    if st.scalars.outage_s > 0.0 {
        out.push((
            Strength::Disturbed,
            format!(
                "{} includes {} s when the server was unreachable",
                l.label(),
                num(st.scalars.outage_s)
            ),
        ));
    }
    if l.kind == LevelKind::LongContext {
        if completed == 1 {
            out.push((
                Strength::Thin,
                format!("{} was measured by one request", l.label()),
            ));
        }
    } else if completed > 0 && completed < FEW_REQUESTS {
        out.push((
            Strength::Thin,
            format!(
                "{} rests on {}",
                l.label(),
                words::count(completed, "completed request")
            ),
        ));
    }
    out
}

pub use validity::bursts_explain_held;

/// The run's warning for a level where servetop may have been the limit (its CPU near a core,
/// or its timer late), saying what to do; `None` where it was not.
pub fn client_bound_warning(l: &LevelSummary) -> Option<String> {
    validity::client_bound(l).map(|c| format!("{}: {c}", l.label()))
}

/// Each level's own caveats by its index (levels with none left out): what every finding
/// resting on the level carries, and what summary.md's tables number beside its row.
pub fn level_caveats(s: &RunSummary) -> BTreeMap<u32, Vec<String>> {
    // A caveat every sweep level shares is the run's, said once in its own words.
    let sweep: Vec<&LevelSummary> = s.sweep.iter().filter(|l| measured(l)).collect();
    let all_short = sweep.len() > 1 && sweep.iter().all(|l| short(l));
    s.levels()
        .map(|l| (l.index, caveats_of(l, all_short)))
        .filter(|(_, c)| !c.is_empty())
        .collect()
}

/// A concurrency or rate level too short for a steady state ("Per level").
fn short(l: &LevelSummary) -> bool {
    matches!(l.kind, LevelKind::Sweep | LevelKind::Rate)
        && l.stats
            .as_ref()
            .is_some_and(|st| crate::metrics::steady::short_level("", st).is_some())
}

/// A level that ended with results: done, with completed requests, and no outage inside it (a
/// disturbed level is not a point of any curve; the `outage` finding names it); with
/// `--repeat`, its first run only (the figures then the means across its runs, see [`fig`]).
fn measured(l: &LevelSummary) -> bool {
    l.status == LevelStatus::Done
        && l.repeat.is_none_or(|r| r.n == 1)
        && l.stats
            .as_ref()
            .is_some_and(|s| s.scalars.completed > 0 && s.scalars.outage_s <= 0.0)
}

/// The levels the server's outages disturbed, each with how long, left out of every other
/// finding's figures.
fn outage(s: &RunSummary) -> Option<Finding> {
    let hit: Vec<&LevelSummary> = s
        .levels()
        .filter(|l| l.stats.as_ref().is_some_and(|st| st.scalars.outage_s > 0.0))
        .collect();
    if hit.is_empty() {
        return None;
    }
    let total: f64 = hit
        .iter()
        .filter_map(|l| l.stats.as_ref())
        .map(|st| st.scalars.outage_s)
        .sum();
    let parts: Vec<String> = hit
        .iter()
        .map(|l| {
            let st = l.stats.as_ref().expect("filtered");
            format!("{} ({} s)", l.label(), num(st.scalars.outage_s))
        })
        .collect();
    let again: Vec<String> = hit.iter().map(|l| rerun_flag(l)).collect();
    Some(
        Finding::new(
            "outage",
            format!(
                "The server was unreachable during {}: {} left out of the other findings; run {} again ({}).",
                parts.join(", "),
                if hit.len() == 1 { "it is" } else { "they are" },
                if hit.len() == 1 { "it" } else { "them" },
                again.join("; ")
            ),
            &hit,
        )
        .value("outage_s", Some(total))
        .value("levels", Some(hit.len() as f64)),
    )
}

/// A level figure by its results.json key: the mean across the level's runs when it has one
/// (`--repeat`), else its own value, read by `own`.
fn fig(
    l: &LevelSummary,
    key: &str,
    own: impl Fn(&crate::metrics::LevelStats) -> Option<f64>,
) -> Option<f64> {
    l.repeat_mean
        .get(key)
        .copied()
        .or_else(|| own(l.stats.as_ref()?))
}

fn output_tput(l: &LevelSummary) -> Option<f64> {
    fig(l, "output_throughput", |s| {
        Some(s.scalars.output_throughput)
    })
}

fn ttft_p50(l: &LevelSummary) -> Option<f64> {
    fig(l, "median_ttft_ms", |s| {
        s.dists.ttft_ms.as_ref().map(|d| d.p50)
    })
}

fn tpot_p50(l: &LevelSummary) -> Option<f64> {
    fig(l, "median_tpot_ms", |s| {
        s.dists.tpot_ms.as_ref().map(|d| d.p50)
    })
}

fn decode_mean(l: &LevelSummary) -> Option<f64> {
    l.stats
        .as_ref()?
        .dists
        .decode_tokens_per_s
        .as_ref()
        .map(|d| d.mean)
}

use words::{ms_text, num};

/// The flag that runs level `l` alone again.
fn rerun_flag(l: &LevelSummary) -> String {
    match l.kind {
        LevelKind::Rate => l.arrival.as_ref().map_or_else(
            || "the same --request-rate".into(),
            |a| format!("--request-rate {}", crate::fmt::fmt_rate(a.request_rate)),
        ),
        LevelKind::LongContext => format!("--long-context {}", l.input_len),
        _ => format!("--concurrency {}", l.concurrency),
    }
}

/// Why a finding resting on `l` should not be taken at face value (docs/metrics.md
/// "Findings", caveats).
/// `all_short`: every sweep level is too short for a steady state, said once for the run.
fn caveats_of(l: &LevelSummary, all_short: bool) -> Vec<String> {
    let Some(st) = l.stats.as_ref() else {
        return Vec::new();
    };
    let label = l.label();
    let mut out: Vec<String> = validity::client_bound(l).into_iter().collect();
    if st.scalars.outage_s > 0.0 {
        out.push(format!(
            "{label} was disturbed: the server was unreachable for {} s of it, which its throughput and latency count (its steady window leaves it out); run it again ({})",
            num(st.scalars.outage_s),
            rerun_flag(l)
        ));
    }
    let completed = st.scalars.completed;
    // A long-context length is one request at a time by design; its figures are means.
    if completed > 0 && completed < FEW_REQUESTS && l.kind != LevelKind::LongContext {
        out.push(format!(
            "{label} rests on {}: its percentiles are rough",
            words::count(completed, "completed request")
        ));
    }
    if l.delivery_bursts {
        let per = st.dists.tokens_per_chunk.as_ref().map_or(0.0, |d| d.mean);
        out.push(format!(
            "{label}'s tokens arrived in bursts its server's decoding does not explain ({} tokens a delivery): a buffering hop between servetop and the server (a reverse proxy; nginx: proxy_buffering off) is the likely cause, and TTFT and TPOT include it; point servetop at the server itself to check",
            num(per)
        ));
    }
    let no_prefix = l.shared_prefix_tokens == 0
        && matches!(
            l.kind,
            LevelKind::Sweep | LevelKind::Rate | LevelKind::LongContext
        );
    if let Some(hit) = st
        .scalars
        .prefix_cache_hit_rate
        .filter(|h| no_prefix && *h > CACHED_SHARE)
    {
        out.push(format!(
            "{label}'s prompts came {:.0} % from the server's prefix cache although the plan shares no prefix (a repeated run with one --seed?): its TTFT is a cache hit's, not a prefill's",
            hit * 100.0
        ));
    }
    if all_short && l.kind == LevelKind::Sweep {
        out.push("every sweep level is too short for a steady state (it sent its last request about when its first finished): ramp-up and drain dominate the latency; run more requests a level (--requests-per-level 5x)".into());
    } else if short(l) {
        out.push(format!(
            "{label} is too short for a steady state: ramp-up and drain dominate its latency"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> RunSummary {
        crate::tui::fixtures::finished_run().session.summary
    }

    /// With `--response-format` the findings are the headline pass's (docs/outputs.md
    /// "Passes"): each rests on plain levels alone and reads as the plain run's own, but for
    /// those that count or compare every pass.
    #[test]
    fn the_findings_of_a_twin_run_are_the_plain_passs() {
        let s = crate::tui::fixtures::finished_twins().session.summary;
        let all = of(&s);
        let plain = of(&s.headline_run());
        let every_pass = [
            "failures",
            "outage",
            "structured_output",
            "thinking_budgets",
        ];
        assert!(all.iter().any(|f| f.id == "structured_output"));
        let mut compared = 0;
        for f in all.iter().filter(|f| !every_pass.contains(&f.id.as_str())) {
            assert!(
                f.levels.iter().all(|l| !l.contains("json")),
                "{}: {:?}",
                f.id,
                f.levels
            );
            let alone = plain.iter().find(|p| p.id == f.id);
            assert_eq!(alone, Some(f), "{}", f.id);
            compared += 1;
        }
        assert!(compared >= 3, "{compared} findings compared");
        // The same with two budgets: the first budget's.
        let s = crate::tui::fixtures::mid_budgets().session.summary;
        for f in of(&s)
            .iter()
            .filter(|f| !every_pass.contains(&f.id.as_str()))
        {
            assert!(
                f.levels.iter().all(|l| l.contains("(think 16)")),
                "{}: {:?}",
                f.id,
                f.levels
            );
        }
    }

    fn caveats_on(s: &RunSummary, id: &str) -> Vec<String> {
        of(s)
            .into_iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no {id}"))
            .caveats
    }

    #[test]
    fn bursts_the_server_does_not_explain_name_a_buffering_hop() {
        let mut s = fixture();
        assert!(
            !caveats_on(&s, "single_stream")
                .iter()
                .any(|c| c.contains("buffering")),
        );
        s.sweep[0].delivery_bursts = true;
        let c = caveats_on(&s, "single_stream");
        assert!(
            c.iter()
                .any(|c| c.contains("buffering hop") && c.contains("proxy_buffering off")),
            "{c:?}"
        );
    }

    /// Reads a proxy's bursts merged are the proxy's, not servetop's, while servetop's runtime
    /// never stalled; a runtime that stalled (a stopped client) keeps the client's caveat.
    #[test]
    fn held_reads_in_a_proxys_bursts_are_blamed_on_a_stall_only() {
        let mut s = fixture();
        let l = &mut s.sweep[1];
        l.delivery_bursts = true;
        let st = l.stats.as_mut().unwrap();
        st.scalars.held_reads = 30;
        st.scalars.held_read_share = Some(0.05);
        l.client.client_cpu_share = Some(0.05);
        l.client.client_timer_lag_p99_ms = Some(1.9);
        l.client.client_timer_lag_max_ms = Some(2.4);
        assert!(bursts_explain_held(l));
        assert_eq!(client_bound_warning(l), None);
        l.client.client_timer_lag_max_ms = Some(24.0);
        assert!(!bursts_explain_held(l));
        assert!(
            client_bound_warning(l).is_some_and(|w| w.contains("30 of its reads")),
            "{:?}",
            client_bound_warning(l)
        );
        // Without bursts the held reads are the client's, stall or not.
        l.client.client_timer_lag_max_ms = Some(2.4);
        l.delivery_bursts = false;
        assert!(client_bound_warning(l).is_some());
    }

    #[test]
    fn a_no_prefix_level_served_from_the_cache_is_named() {
        let mut s = fixture();
        let st = s.sweep[0].stats.as_mut().unwrap();
        st.scalars.prefix_cache_hit_rate = Some(0.97);
        let c = caveats_on(&s, "single_stream");
        assert!(
            c.iter()
                .any(|c| c.contains("97 % from the server's prefix cache")),
            "{c:?}"
        );
        // A plan that shares a prefix expects its hits.
        s.sweep[0].shared_prefix_tokens = 500;
        let c = caveats_on(&s, "single_stream");
        assert!(!c.iter().any(|c| c.contains("prefix cache")), "{c:?}");
    }

    #[test]
    fn an_energy_counter_the_sampled_power_disagrees_with_is_doubted() {
        let mut s = fixture();
        let ([g0, g1], e) = (
            [465.0 / 2.0, 465.0 / 2.0],
            crate::telemetry::energy::LevelEnergy {
                energy_source: Some("counter".into()),
                energy_j: Some(7000.0),
                energy_window_s: Some(10.0),
                mean_power_w: Some(700.0),
                output_tokens_per_joule: Some(0.5),
                ..Default::default()
            },
        );
        for l in &mut s.sweep {
            l.energy = e.clone();
            l.gpus = vec![
                crate::telemetry::per_level::GpuLevelStats {
                    index: 0,
                    mean_power_w: Some(g0),
                    ..Default::default()
                },
                crate::telemetry::per_level::GpuLevelStats {
                    index: 1,
                    mean_power_w: Some(g1),
                    ..Default::default()
                },
            ];
        }
        let c = caveats_on(&s, "energy");
        assert!(
            c.iter()
                .any(|c| c
                    .contains("counter gives 700 W but its sampled power averaged 465 W (-34 %)")),
            "{c:?}"
        );
        // Within a fifth: no doubt. Power samples as the source: nothing to compare.
        for l in &mut s.sweep {
            l.gpus[0].mean_power_w = Some(290.0);
            l.gpus[1].mean_power_w = Some(290.0);
        }
        assert!(
            !caveats_on(&s, "energy")
                .iter()
                .any(|c| c.contains("sampled power"))
        );
        for l in &mut s.sweep {
            l.gpus[0].mean_power_w = Some(100.0);
            l.energy.energy_source = Some("power samples".into());
        }
        assert!(
            !caveats_on(&s, "energy")
                .iter()
                .any(|c| c.contains("sampled power"))
        );
    }

    /// The `client_validity` finding's sentence for `s`.
    fn validity_text(s: &RunSummary) -> String {
        of(s)
            .into_iter()
            .find(|f| f.id == "client_validity")
            .expect("client_validity")
            .text
    }

    /// vLLM's n-gram speculator drafts only at some steps: its accept length (over drafted
    /// steps) is about twice the tokens a step the client sees, and the client is held to the
    /// engine's tokens per step where its counters give them.
    #[test]
    fn the_clients_tokens_per_chunk_are_held_to_the_engines_tokens_per_step() {
        let text = validity_text;
        let mut s = fixture();
        for l in s.levels_mut() {
            if let Some(st) = l.stats.as_mut() {
                st.scalars.accept_length_client = Some(1.60);
            }
            l.delivery_bursts = false;
            l.accept_length_server = Some(3.2);
            l.spec_server = Some(crate::telemetry::per_level::SpecLevelStats {
                accept_length: 3.2,
                source: "counters".into(),
                tokens_per_step: Some(1.62),
                ..Default::default()
            });
        }
        let t = text(&s);
        assert!(
            t.contains("its accept length within 2 % of the engine's"),
            "{t}"
        );
        assert!(t.contains(": 1.60 against 1.62)"), "{t}");
        // Without the engine's step count, its accept length is all there is to compare.
        for l in s.levels_mut() {
            if let Some(sp) = l.spec_server.as_mut() {
                sp.tokens_per_step = None;
            }
        }
        let t = text(&s);
        assert!(
            t.contains("its accept length differs from the engine's by up to 50 %"),
            "{t}"
        );
        // SGLang's gauge carries steps from before the level: not held to it, and said so.
        for l in s.levels_mut() {
            if let Some(sp) = l.spec_server.as_mut() {
                sp.source = "gauge".into();
            }
        }
        let t = text(&s);
        assert!(
            t.contains(
                "its accept length is not held to the engine's: the engine's is a recent-window gauge"
            ),
            "{t}"
        );
        assert!(!t.contains("differs from the engine's"), "{t}");
    }

    #[test]
    fn a_run_whose_levels_all_ended_within_a_second_says_so_not_that_it_is_old() {
        let text = validity_text;
        let mut s = fixture();
        for l in s.levels_mut() {
            l.client = crate::telemetry::per_level::ClientLevelStats::default();
        }
        // Levels that lasted over a second and still have no load: saved before it was measured.
        assert!(text(&s).contains("saved by a servetop before it was"));
        for l in s.levels_mut() {
            if let Some(st) = l.stats.as_mut() {
                st.scalars.duration_s = st.scalars.duration_s.min(0.25);
            }
        }
        s.sweep[1].stats.as_mut().unwrap().scalars.duration_s = 0.61;
        for l in s.levels_mut() {
            let tokens = l
                .stats
                .as_ref()
                .map(|st| st.scalars.total_output_tokens as f64);
            l.server_metrics = Some(crate::telemetry::per_level::ServerLevelStats {
                generation_tokens: tokens,
                ..Default::default()
            });
        }
        let t = text(&s);
        assert!(
            t.contains("no level lasted that long (the longest 0.61 s")
                && !t.contains("saved by a servetop before"),
            "{t}"
        );
        // The comparisons with the engine's own counters still follow.
        assert!(
            t.contains("; its output token count equals the engine's counter"),
            "{t}"
        );
    }

    /// The H200's two levels (tests/fixtures/gpu): C=1's energy by its counter over 8.206 s,
    /// C=8's over 1.044 s; then the static build's, from power read every 0.5 s.
    #[test]
    fn energy_over_a_window_too_short_for_its_resolution_is_doubted() {
        let mut s = fixture();
        s.sweep.truncate(2);
        let set = |s: &mut RunSummary, source: &str, windows: [f64; 2]| {
            // The second level has the more tokens a joule: the finding's level.
            for ((l, w), tpj) in s.sweep.iter_mut().zip(windows).zip([6.5, 53.7]) {
                l.energy = crate::telemetry::energy::LevelEnergy {
                    energy_source: Some(source.into()),
                    energy_j: Some(76.3 * w),
                    energy_window_s: Some(w),
                    mean_power_w: Some(76.3),
                    output_tokens_per_joule: Some(tpj),
                    ..Default::default()
                };
            }
        };
        set(&mut s, "counter", [8.206, 1.044]);
        let best = s.sweep[1].label();
        let c = caveats_on(&s, "energy");
        assert!(
            c.iter().any(|c| c.contains(&format!(
                "{best}'s energy spans only 1.04 s and the energy counter moves in steps of about 0.1 s of power, so it is uncertain by up to ±10 %"
            ))),
            "{c:?}"
        );
        // Over 8.2 s the counter's step is 1.2 %: nothing to say.
        set(&mut s, "counter", [1.044, 8.206]);
        assert!(
            !caveats_on(&s, "energy")
                .iter()
                .any(|c| c.contains("spans only")),
            "{:?}",
            caveats_on(&s, "energy")
        );
        // Power read every 0.5 s over 8.2 s: ±6 %.
        s.config.gpu_interval_s = 0.5;
        set(&mut s, "power samples", [1.044, 8.206]);
        let c = caveats_on(&s, "energy");
        assert!(
            c.iter().any(|c| c.contains(
                "energy spans only 8.21 s and power was read every 0.5 s, so it is uncertain by up to ±6 %"
            )),
            "{c:?}"
        );
    }

    #[test]
    fn a_least_squares_line_through_known_points() {
        // y = 0.5 + 2x exactly, then with a bend.
        let (a, b, r2) = long_context::fit(&[(1.0, 2.5), (2.0, 4.5), (4.0, 8.5)]).unwrap();
        assert!((a - 0.5).abs() < 1e-12 && (b - 2.0).abs() < 1e-12 && (r2 - 1.0).abs() < 1e-12);
        let (_, b, r2) = long_context::fit(&[(0.0, 0.0), (1.0, 1.0), (2.0, 4.0)]).unwrap();
        // Slope Σ(x−x̄)(y−ȳ)/Σ(x−x̄)² = 4 / 2; R² = 16 / (2 · 8.6667).
        assert!((b - 2.0).abs() < 1e-12, "{b}");
        assert!((r2 - 16.0 / (2.0 * 26.0 / 3.0)).abs() < 1e-12, "{r2}");
        assert!(long_context::fit(&[(1.0, 1.0)]).is_none());
    }
}
