//! `servetop tune`: which server configuration serves the most requests within an SLO.
//!
//! Each configuration (one value of each `--serve-param`) gets one server and one run: its
//! planned levels (single stream by default), then the SLO capacity search
//! ([`crate::workload::search`]). This module is the pure part: what one configuration's run
//! says ([`TuneConfig::read_run`]), the leaderboard with its tie rule, the Pareto front, and
//! the rate to beat that the early stop hands the next configuration's search.
//!
//! **The early stop.** Once a configuration has a capacity, the best so far is the rate every
//! later configuration must beat: its search probes that rate first (after its throughput
//! probe), and a fail there ends it — `stopped early`, "below B req/s" — because the
//! bisection already assumes that a server failing at a rate fails at every higher one. A
//! pass there goes on to an ordinary bisection above it. `--no-early-stop` searches every
//! configuration in full.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::fmt::fmt_rate;
use crate::summary::{LevelStatus, LevelSummary, RunSummary};
use crate::workload::search::SearchStatus;

pub mod pareto;
pub mod progress;
pub mod record;

/// Where one configuration stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigStatus {
    /// Not run yet (or interrupted part-way: `--resume` runs it again).
    #[serde(rename = "pending")]
    Pending,
    /// Its server is up and its plan running.
    #[serde(rename = "running")]
    Running,
    /// Its search ran to its end: `capacity` is its answer (null when no rate met the SLO).
    #[serde(rename = "measured")]
    Measured,
    /// It failed at the rate to beat: `below` is the bound it proved.
    #[serde(rename = "stopped early")]
    StoppedEarly,
    /// Its server did not start, ran out of memory or crashed: `reason` says which.
    #[serde(rename = "failed")]
    Failed,
}

impl ConfigStatus {
    /// `measured`, `stopped early`, …
    pub fn word(self) -> &'static str {
        match self {
            ConfigStatus::Pending => "pending",
            ConfigStatus::Running => "running",
            ConfigStatus::Measured => "measured",
            ConfigStatus::StoppedEarly => "stopped early",
            ConfigStatus::Failed => "failed",
        }
    }

    /// Whether it needs no more running.
    pub fn settled(self) -> bool {
        matches!(
            self,
            ConfigStatus::Measured | ConfigStatus::StoppedEarly | ConfigStatus::Failed
        )
    }
}

/// One load a configuration was measured at: a point of the Pareto chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadPoint {
    /// The level as the tables write it (`C=1`, `3.1 req/s`).
    pub level: String,
    /// Median output tokens/s of one request's decode: what one user sees.
    pub per_user_tokens_per_s: f64,
    /// Output tokens/s of the whole level.
    pub aggregate_tokens_per_s: f64,
    /// The level against the SLO, when it was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meets_slo: Option<bool>,
}

/// One configuration of the grid and what its run found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneConfig {
    /// Each `--serve-param` NAME and its value as given.
    pub params: BTreeMap<String, String>,
    /// The highest request rate (requests/s) found to meet the SLO; null when not measured.
    pub capacity: Option<f64>,
    pub status: ConfigStatus,
    /// `-np 2 · --threads 1`: the parameters in the order given.
    pub label: String,
    /// The server command this configuration ran.
    pub command: String,
    /// Its run directory, relative to the tune's.
    pub dir: String,
    /// The lowest rate found to fail the SLO: the capacity lies in `[capacity, fail_rate)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_rate: Option<f64>,
    /// Stopped early: the capacity is below this rate (it failed there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
    /// How its search ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_status: Option<SearchStatus>,
    /// Why it failed, or what qualifies its capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The highest output tokens/s of any of its levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_output_tokens_per_s: Option<f64>,
    /// Median decode tokens/s of one request at C=1 (when the plan has a C=1 level).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_stream_tokens_per_s: Option<f64>,
    /// Output tokens per joule at its peak-throughput level, where energy was sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_joule: Option<f64>,
    /// Every level it finished, for the Pareto chart.
    #[serde(default)]
    pub points: Vec<LoadPoint>,
    /// Its run's findings, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
    /// Wall-clock seconds its server and run took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

impl TuneConfig {
    /// A configuration not run yet.
    pub fn pending(params: &[(String, String)], command: String, dir: String) -> Self {
        Self {
            params: params.iter().cloned().collect(),
            capacity: None,
            status: ConfigStatus::Pending,
            label: params
                .iter()
                .map(|(n, v)| format!("{n} {v}"))
                .collect::<Vec<_>>()
                .join(" · "),
            command,
            dir,
            fail_rate: None,
            below: None,
            search_status: None,
            reason: None,
            peak_output_tokens_per_s: None,
            single_stream_tokens_per_s: None,
            output_tokens_per_joule: None,
            points: Vec::new(),
            findings: Vec::new(),
            seconds: None,
        }
    }

    /// Fills in what the configuration's run says: its search's answer or early stop, its
    /// speeds, and its status (`Pending` again when the run was stopped part-way).
    pub fn read_run(&mut self, run: &RunSummary) {
        let levels: Vec<&LevelSummary> = run.levels().collect();
        self.points = levels.iter().filter_map(|l| point(l)).collect();
        let peak = levels
            .iter()
            .filter(|l| l.status == LevelStatus::Done)
            .filter_map(|l| Some((l, l.stats.as_ref()?.scalars.output_throughput)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        self.peak_output_tokens_per_s = peak.map(|(_, t)| t);
        self.output_tokens_per_joule = peak.and_then(|(l, _)| l.energy.output_tokens_per_joule);
        self.single_stream_tokens_per_s = run
            .sweep
            .iter()
            .filter(|l| l.concurrency == 1 && l.status == LevelStatus::Done)
            .find_map(|l| Some(l.stats.as_ref()?.dists.decode_tokens_per_s.as_ref()?.p50));
        self.findings = run.findings.iter().map(|f| f.text.clone()).collect();
        let Some(s) = run.search.as_ref() else {
            // Ended before its search began: by an error (a crash), or by the user.
            if let Some(e) = run.error.clone() {
                self.fail(e);
            } else {
                self.status = ConfigStatus::Pending;
                self.reason = Some("interrupted".into());
            }
            return;
        };
        self.search_status = Some(s.status);
        self.fail_rate = s.fail_rate;
        self.capacity = None;
        self.below = None;
        self.reason = None;
        match s.status {
            SearchStatus::StoppedEarly => {
                self.status = ConfigStatus::StoppedEarly;
                self.below = s.fail_rate;
            }
            SearchStatus::Converged => {
                self.status = ConfigStatus::Measured;
                self.capacity = s.pass_rate;
            }
            SearchStatus::NoThroughput => {
                // The server completed nothing at the throughput probe: no capacity to rank.
                self.fail(s.status.describe(s.target).to_string());
            }
            SearchStatus::OutOfProbes
            | SearchStatus::NoPassingRate
            | SearchStatus::NoFailingRate => {
                self.status = ConfigStatus::Measured;
                self.capacity = s.pass_rate;
                self.reason = Some(s.status.describe(s.target).to_string());
            }
            SearchStatus::Stopped | SearchStatus::Probing | SearchStatus::Searching => {
                // Stopped by an error (a crash) is a failure; by the user, not run yet.
                if let Some(e) = run.error.clone() {
                    self.status = ConfigStatus::Failed;
                    self.reason = Some(e);
                } else {
                    self.status = ConfigStatus::Pending;
                    self.reason = Some("interrupted".into());
                }
            }
        }
    }

    /// Marks it failed for `reason` (its server did not come up, …).
    pub fn fail(&mut self, reason: String) {
        self.status = ConfigStatus::Failed;
        self.capacity = None;
        self.reason = Some(reason);
    }

    /// `3.1 req/s`, `below 3.1 req/s`, `failed`, `-`.
    pub fn capacity_text(&self) -> String {
        match (self.status, self.capacity, self.below) {
            (ConfigStatus::Measured, Some(c), _) => format!("{} req/s", fmt_rate(c)),
            (ConfigStatus::Measured, None, _) => "none meets it".into(),
            (ConfigStatus::StoppedEarly, _, Some(b)) => format!("below {} req/s", fmt_rate(b)),
            (s, _, _) => s.word().into(),
        }
    }
}

/// A level's point of the Pareto chart, when it finished with a decode speed.
fn point(l: &LevelSummary) -> Option<LoadPoint> {
    if l.status != LevelStatus::Done {
        return None;
    }
    let s = l.stats.as_ref()?;
    Some(LoadPoint {
        level: l.label(),
        per_user_tokens_per_s: s.dists.decode_tokens_per_s.as_ref()?.p50,
        aggregate_tokens_per_s: s.scalars.output_throughput,
        meets_slo: l.slo.as_ref().map(|c| c.meets),
    })
}

/// The rate a configuration's search must beat: the best capacity measured so far (none yet,
/// or with the early stop off: none).
pub fn rate_to_beat(configs: &[TuneConfig], early_stop: bool) -> Option<f64> {
    if !early_stop {
        return None;
    }
    configs
        .iter()
        .filter(|c| c.status == ConfigStatus::Measured)
        .filter_map(|c| c.capacity)
        .max_by(f64::total_cmp)
}

/// The configurations best first: measured by capacity (then peak throughput), then those
/// stopped early by their bound, then the rest; the order given among equals.
pub fn ranked(configs: &[TuneConfig]) -> Vec<usize> {
    let key = |c: &TuneConfig| -> (u8, f64, f64) {
        let peak = c.peak_output_tokens_per_s.unwrap_or(0.0);
        match (c.status, c.capacity, c.below) {
            (ConfigStatus::Measured, Some(x), _) => (0, x, peak),
            (ConfigStatus::Measured, None, _) => (1, 0.0, peak),
            (ConfigStatus::StoppedEarly, _, b) => (1, b.unwrap_or(0.0), peak),
            (ConfigStatus::Running | ConfigStatus::Pending, _, _) => (2, 0.0, 0.0),
            (ConfigStatus::Failed, _, _) => (3, 0.0, 0.0),
        }
    };
    let mut order: Vec<usize> = (0..configs.len()).collect();
    order.sort_by(|&a, &b| {
        let (ka, kb) = (key(&configs[a]), key(&configs[b]));
        ka.0.cmp(&kb.0)
            .then(kb.1.total_cmp(&ka.1))
            .then(kb.2.total_cmp(&ka.2))
    });
    order
}

/// The runner-up against the best.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunnerUp {
    pub params: BTreeMap<String, String>,
    pub label: String,
    pub capacity: f64,
    /// How much more the best serves, in % of the runner-up's capacity.
    pub margin_pct: f64,
    /// Within the searches' precision: the runner-up's bracket reaches the best's capacity
    /// (its lowest failing rate is above it, or none was found), so either may be the better.
    pub tie: bool,
    /// A configuration stopped early may lie above this runner-up (its bound is higher than
    /// the runner-up's capacity): the best's margin over the true runner-up is then at most
    /// `margin_pct`, not known.
    #[serde(default)]
    pub margin_unknown: bool,
}

/// The runner-up (the second measured configuration with a capacity), if any.
pub fn runner_up(configs: &[TuneConfig]) -> Option<RunnerUp> {
    let mut measured = ranked(configs)
        .into_iter()
        .map(|i| &configs[i])
        .filter(|c| c.status == ConfigStatus::Measured && c.capacity.is_some());
    let best = measured.next()?;
    let second = measured.next()?;
    let (b, s) = (best.capacity?, second.capacity?);
    let margin_unknown = configs
        .iter()
        .filter(|c| c.status == ConfigStatus::StoppedEarly)
        .any(|c| c.below.is_some_and(|bound| bound > s));
    Some(RunnerUp {
        params: second.params.clone(),
        label: second.label.clone(),
        capacity: s,
        margin_pct: if s > 0.0 { (b / s - 1.0) * 100.0 } else { 0.0 },
        tie: second.fail_rate.is_none_or(|f| f > b),
        margin_unknown,
    })
}

/// A tune as results.json's `tune` section holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TuneSummary {
    /// The SLO every configuration's search ran against, as `--slo` reads.
    pub slo: String,
    /// What `capacity` measures: `request_rate` (requests/s).
    pub capacity_of: String,
    /// Whether a configuration that fails at the best capacity so far was stopped there.
    pub early_stop: bool,
    /// Every configuration, in the order run.
    pub configs: Vec<TuneConfig>,
    /// The recommended configuration: the highest capacity (one of `configs`).
    pub best: Option<TuneConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_up: Option<RunnerUp>,
    /// Every configuration's loads, with those on the Pareto front marked.
    #[serde(default)]
    pub pareto: Vec<pareto::ParetoPoint>,
}

impl TuneSummary {
    /// A tune about to start.
    pub fn new(slo: String, early_stop: bool, configs: Vec<TuneConfig>) -> Self {
        let mut t = Self {
            slo,
            capacity_of: "request_rate".into(),
            early_stop,
            configs,
            best: None,
            runner_up: None,
            pareto: Vec::new(),
        };
        t.settle();
        t
    }

    /// Recomputes the best, the runner-up and the front from the configurations.
    pub fn settle(&mut self) {
        self.best = ranked(&self.configs)
            .first()
            .map(|&i| &self.configs[i])
            .filter(|c| c.status == ConfigStatus::Measured && c.capacity.is_some())
            .cloned();
        self.runner_up = runner_up(&self.configs);
        self.pareto = pareto::points(&self.configs);
    }

    /// What configuration `config`'s run shows of the tune (its dashboard's tune table).
    pub fn progress(
        &self,
        dir: &str,
        config: usize,
    ) -> crate::summary::tune::progress::TuneProgress {
        crate::summary::tune::progress::TuneProgress {
            dir: dir.to_string(),
            slo: self.slo.clone(),
            config,
            beat: self.rate_to_beat(),
            rows: self
                .configs
                .iter()
                .map(|c| crate::summary::tune::progress::TuneRow {
                    label: c.label.clone(),
                    status: c.status.word().to_string(),
                    capacity: c.capacity_text(),
                    peak_output_tokens_per_s: c.peak_output_tokens_per_s,
                    single_stream_tokens_per_s: c.single_stream_tokens_per_s,
                })
                .collect(),
        }
    }

    /// The rate the next configuration's search must beat.
    pub fn rate_to_beat(&self) -> Option<f64> {
        rate_to_beat(&self.configs, self.early_stop)
    }

    /// One line: the recommendation and its margin, or that there is none.
    pub fn headline(&self) -> String {
        let Some(b) = &self.best else {
            return format!("no configuration met {} at any rate measured", self.slo);
        };
        let cap = b.capacity.map_or("-".into(), fmt_rate);
        let margin = match &self.runner_up {
            Some(r) if r.tie => format!(
                "; a tie with {} ({} req/s) within the search's precision",
                r.label,
                fmt_rate(r.capacity)
            ),
            Some(r) if r.margin_unknown => format!(
                "; at most {:.0} % more than the next measured, {} ({} req/s): one stopped early may be closer",
                r.margin_pct,
                r.label,
                fmt_rate(r.capacity)
            ),
            Some(r) => format!(
                "; {:.0} % more than the runner-up, {} ({} req/s)",
                r.margin_pct,
                r.label,
                fmt_rate(r.capacity)
            ),
            None => String::new(),
        };
        let stopped: Vec<f64> = self
            .configs
            .iter()
            .filter(|c| c.status == ConfigStatus::StoppedEarly)
            .filter_map(|c| c.below)
            .collect();
        let early = match stopped.iter().copied().max_by(f64::total_cmp) {
            Some(b) => format!(
                "; {} stopped early, each below {} req/s",
                stopped.len(),
                fmt_rate(b)
            ),
            None => String::new(),
        };
        format!(
            "best: {} — {cap} req/s within {}{margin}{early}",
            b.label, self.slo
        )
    }
}

#[cfg(test)]
mod tests;
