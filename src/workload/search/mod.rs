//! The SLO capacity search: the highest request rate (`--search rate`) or the most concurrent
//! requests (`--search concurrency`) at which a level still meets the SLO at its percentile.
//!
//! The rate search runs as a measured throughput probe followed by bisection:
//! 1. a closed-loop level at a high concurrency measures the most requests/s the server
//!    completes — no open-loop rate above that can be sustained, so it bounds the search;
//! 2. open-loop rate levels then bisect between the highest rate known to pass and the lowest
//!    known to fail. The first is at the measured throughput (normally a fail: at saturation the
//!    queue grows); a pass there doubles the rate until one fails, a fail halves it until one
//!    passes, then each probe halves the bracket until it is within the stated precision.
//!
//! The concurrency search bisects closed-loop levels (or, with `--sessions`, session levels of
//! that many users) the same way over whole numbers: its first probe at the start concurrency,
//! doubling up to its cap or halving down to 1, then halving the bracket until it is within the
//! precision or the two ends are neighbours.
//!
//! This module is the pure part — the configuration, the next-probe rules and the report that
//! results.json, summary.md, the headless printer and the dashboard read. The runner
//! (`runner::search`) runs each probe as an ordinary level and feeds its verdict back here.

use serde::{Deserialize, Serialize};

mod probes;
pub use probes::SearchPlan;

use crate::fmt::fmt_rate;
use crate::metrics::{Slo, SloCheck};

/// What the search varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchTarget {
    /// The open-loop request rate.
    Rate,
    /// The closed-loop concurrency: requests in flight, or users with `--sessions`.
    Concurrency,
}

impl SearchTarget {
    /// `rate` or `concurrency`, as `--search` names it.
    pub fn name(self) -> &'static str {
        match self {
            SearchTarget::Rate => "rate",
            SearchTarget::Concurrency => "concurrency",
        }
    }
}

/// When the bisection may stop: the bracket `[pass, fail]` is at most this wide.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// A fraction of the passing rate (0.05: 5 %).
    Relative(f64),
    /// Requests per second.
    Absolute(f64),
}

impl Precision {
    /// `5%` (relative to the passing rate) or `0.5` (requests/s).
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let bad = || {
            format!(
                "--search-precision '{s}' must be a percentage like 5% or a rate in req/s like 0.5"
            )
        };
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(v.is_finite() && v > 0.0 && v < 100.0) {
                return Err(bad());
            }
            return Ok(Precision::Relative(v / 100.0));
        }
        let v: f64 = t.parse().map_err(|_| bad())?;
        if !(v.is_finite() && v > 0.0) {
            return Err(bad());
        }
        Ok(Precision::Absolute(v))
    }

    /// `5 %` or `0.5 req/s` (`2 requests` for the concurrency search).
    pub fn describe(self, target: SearchTarget) -> String {
        match (self, target) {
            (Precision::Relative(f), _) => format!("{} %", fmt_rate(f * 100.0)),
            (Precision::Absolute(a), SearchTarget::Rate) => format!("{} req/s", fmt_rate(a)),
            (Precision::Absolute(a), SearchTarget::Concurrency) => {
                format!("{} concurrent", fmt_rate(a))
            }
        }
    }

    /// Whether the bracket `[pass, fail]` is narrow enough.
    pub fn satisfied(self, pass: f64, fail: f64) -> bool {
        let width = fail - pass;
        match self {
            Precision::Relative(f) => width <= f * pass,
            Precision::Absolute(a) => width <= a,
        }
    }
}

/// The search as configured (written into results.json with the rest of the configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    pub target: SearchTarget,
    pub precision: Precision,
    /// Each rate probe sends this many seconds' worth of requests (rate × seconds)…
    pub probe_seconds: f64,
    /// …but at least this many, so its percentile rests on enough requests.
    pub min_requests: u32,
    /// Workers of the closed-loop throughput probe; the concurrency search's first probe.
    pub probe_concurrency: u32,
    /// The most concurrent requests (or users) the concurrency search tries (`--max-concurrency`;
    /// None: 8× its first probe).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Most rate probes before the search stops unconverged.
    pub max_probes: u32,
    /// The rate to beat (`servetop tune`'s early stop): the first rate probe is at it, and a
    /// fail there ends the search `stopped_early` — its capacity is below this rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beat: Option<f64>,
}

impl SearchConfig {
    /// Defaults: 5 %, 30 s per probe and at least 100 requests, a throughput probe at C=64.
    pub fn rate() -> Self {
        Self {
            target: SearchTarget::Rate,
            precision: Precision::Relative(0.05),
            probe_seconds: 30.0,
            min_requests: 100,
            probe_concurrency: 64,
            max_concurrency: None,
            max_probes: 16,
            beat: None,
        }
    }

    /// The concurrency search with the rate search's defaults.
    pub fn concurrency() -> Self {
        Self {
            target: SearchTarget::Concurrency,
            ..Self::rate()
        }
    }

    /// The highest concurrency the concurrency search may probe.
    pub fn concurrency_cap(&self) -> u32 {
        self.max_concurrency
            .unwrap_or_else(|| self.probe_concurrency.saturating_mul(1 << MAX_DOUBLINGS))
    }

    /// Measured requests of a concurrency probe at `c`: `probe_seconds` worth at the rate `c`
    /// streams reach when each takes `e2e_s` a request (the last probe's mean, when there was
    /// one), at least `min_requests` and two a stream.
    pub fn requests_at_concurrency(&self, c: u32, e2e_s: Option<f64>) -> u32 {
        let floor = self.min_requests.max(c.saturating_mul(2));
        let Some(e2e) = e2e_s.filter(|e| e.is_finite() && *e > 0.0) else {
            return floor;
        };
        let worth = (self.probe_seconds * f64::from(c) / e2e).ceil();
        (worth.min(f64::from(u32::MAX)) as u32).max(floor)
    }
    /// Measured requests of the rate probe at `rate`.
    pub fn requests_at(&self, rate: f64) -> u32 {
        ((rate * self.probe_seconds).ceil().min(f64::from(u32::MAX)) as u32).max(self.min_requests)
    }

    /// Measured requests of the closed-loop throughput probe: every worker sends several, so
    /// the window is mostly the saturated middle, not the ramp-up and drain.
    pub fn throughput_requests(&self) -> u32 {
        self.probe_concurrency
            .saturating_mul(4)
            .max(self.min_requests)
    }

    /// Checks what the flags cannot.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.probe_seconds.is_finite() && self.probe_seconds > 0.0) {
            return Err("--search-seconds must be a positive number of seconds".into());
        }
        if self.min_requests == 0 || self.probe_concurrency == 0 {
            return Err(
                "--search-min-requests and --search-probe-concurrency must be at least 1".into(),
            );
        }
        Ok(())
    }
}

/// How far a rate may be doubled above the measured throughput before the search gives up
/// looking for a failing rate (2^3 = 8×).
const MAX_DOUBLINGS: i32 = 3;
/// How far a rate may be halved below the measured throughput before the search decides no
/// rate meets the SLO (2^-10 ≈ 0.1 %).
const MAX_HALVINGS: i32 = 10;

/// Why the search stopped (or that it has not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchStatus {
    /// Measuring the throughput bound.
    Probing,
    /// Bisecting.
    Searching,
    /// The bracket is within the precision.
    Converged,
    /// The probe budget ran out first; the bracket is as narrow as it got.
    OutOfProbes,
    /// Even a rate far below the measured throughput failed (a single stream, for the
    /// concurrency search).
    NoPassingRate,
    /// Every rate up to well above the measured throughput passed (every concurrency up to
    /// the cap).
    NoFailingRate,
    /// The throughput probe completed no request; nothing to search.
    NoThroughput,
    /// Stopped by the user or by an error part-way.
    Stopped,
    /// The first probe, at the rate to beat (`SearchConfig::beat`), failed: the capacity is
    /// below it, and not searched further.
    StoppedEarly,
}

impl SearchStatus {
    /// Words for the screen and the report.
    pub fn describe(self, target: SearchTarget) -> &'static str {
        match (self, target) {
            (SearchStatus::NoPassingRate, SearchTarget::Concurrency) => {
                return "not even one request at a time meets the SLO";
            }
            (SearchStatus::NoFailingRate, SearchTarget::Concurrency) => {
                return "every concurrency up to the cap meets the SLO";
            }
            _ => {}
        }
        match self {
            SearchStatus::Probing => "measuring the throughput bound",
            SearchStatus::Searching => "bisecting",
            SearchStatus::Converged => "converged",
            SearchStatus::OutOfProbes => {
                "stopped: probe budget used up before the precision was reached"
            }
            SearchStatus::NoPassingRate => "no rate meets the SLO",
            SearchStatus::NoFailingRate => "every rate tried meets the SLO",
            SearchStatus::NoThroughput => "the throughput probe completed no request",
            SearchStatus::Stopped => "stopped before the end",
            SearchStatus::StoppedEarly => "stopped early: fails at the rate to beat",
        }
    }

    /// Whether the search is over.
    pub fn finished(self) -> bool {
        !matches!(self, SearchStatus::Probing | SearchStatus::Searching)
    }
}

/// The next step of the search, given the bracket so far: a rate to probe, or why to stop.
///
/// `pass` is the highest rate that met the SLO, `fail` the lowest that did not (`None`: not
/// found yet); `throughput` the measured bound; `probes` the rate probes run so far; `beat`
/// the rate to beat, if any: the first probe is at it, and a fail at or below it stops the
/// search early (no rate above it can pass, if passing falls with the rate as the bisection
/// assumes).
pub fn next_rate(
    throughput: f64,
    (pass, fail): (Option<f64>, Option<f64>),
    beat: Option<f64>,
    precision: Precision,
    (probes, max_probes): (u32, u32),
) -> Result<f64, SearchStatus> {
    let next = match (pass, fail) {
        (None, Some(f)) if beat.is_some_and(|b| f <= b) => {
            return Err(SearchStatus::StoppedEarly);
        }
        (Some(p), Some(f)) if precision.satisfied(p, f) => return Err(SearchStatus::Converged),
        (Some(p), Some(f)) => f64::midpoint(p, f),
        (None, None) => beat.unwrap_or(throughput),
        (Some(p), None) if p >= throughput * 2f64.powi(MAX_DOUBLINGS) => {
            return Err(SearchStatus::NoFailingRate);
        }
        (Some(p), None) => p * 2.0,
        (None, Some(f)) if f <= throughput * 2f64.powi(-MAX_HALVINGS) => {
            return Err(SearchStatus::NoPassingRate);
        }
        (None, Some(f)) => f / 2.0,
    };
    if probes >= max_probes {
        return Err(SearchStatus::OutOfProbes);
    }
    Ok(next)
}

/// The concurrency search's next probe, given its bracket so far: a concurrency, or why to
/// stop. `start` is the first probe, `cap` the most it may try; `pass` the highest concurrency
/// that met the SLO, `fail` the lowest that did not. Neighbours (`fail = pass + 1`) always
/// stop it: there is nothing between them to try.
pub fn next_concurrency(
    (start, cap): (u32, u32),
    (pass, fail): (Option<u32>, Option<u32>),
    precision: Precision,
    (probes, max_probes): (u32, u32),
) -> Result<u32, SearchStatus> {
    let cap = cap.max(1);
    let next = match (pass, fail) {
        (Some(p), Some(f))
            if f <= p.saturating_add(1) || precision.satisfied(f64::from(p), f64::from(f)) =>
        {
            return Err(SearchStatus::Converged);
        }
        (Some(p), Some(f)) => p + (f - p) / 2,
        (None, None) => start.clamp(1, cap),
        (Some(p), None) if p >= cap => return Err(SearchStatus::NoFailingRate),
        (Some(p), None) => p.saturating_mul(2).min(cap),
        (None, Some(f)) if f <= 1 => return Err(SearchStatus::NoPassingRate),
        (None, Some(f)) => f / 2,
    };
    if probes >= max_probes {
        return Err(SearchStatus::OutOfProbes);
    }
    Ok(next)
}

/// The closed-loop level that bounds the search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputProbe {
    /// Its level index (its full statistics are with the sweep levels).
    pub level: u32,
    pub concurrency: u32,
    /// Requests/s it completed: the upper bound the bisection starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_throughput: Option<f64>,
}

/// Where a probe ran: at a request rate (the rate search) or a concurrency (the concurrency
/// search). In results.json its key is `request_rate` or `concurrency`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProbeAt {
    Rate { request_rate: f64 },
    Concurrency { concurrency: u32 },
}

impl ProbeAt {
    /// `21.3 req/s` or `C=8`.
    pub fn describe(self) -> String {
        match self {
            ProbeAt::Rate { request_rate } => format!("{} req/s", fmt_rate(request_rate)),
            ProbeAt::Concurrency { concurrency } => format!("C={concurrency}"),
        }
    }

    /// The rate or the concurrency, as a number (a chart's x).
    pub fn value(self) -> f64 {
        match self {
            ProbeAt::Rate { request_rate } => request_rate,
            ProbeAt::Concurrency { concurrency } => f64::from(concurrency),
        }
    }

    /// The request rate of a rate probe.
    pub fn rate(self) -> Option<f64> {
        match self {
            ProbeAt::Rate { request_rate } => Some(request_rate),
            ProbeAt::Concurrency { .. } => None,
        }
    }

    /// The concurrency of a concurrency probe.
    pub fn concurrency(self) -> Option<u32> {
        match self {
            ProbeAt::Concurrency { concurrency } => Some(concurrency),
            ProbeAt::Rate { .. } => None,
        }
    }
}

/// One probe of the bisection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Its level index (its full statistics are with the rate levels, or the sweep's or
    /// session levels for the concurrency search).
    pub level: u32,
    /// 1 for the first probe.
    pub step: u32,
    #[serde(flatten)]
    pub at: ProbeAt,
    pub requests: u32,
    /// Filled in when the probe's level ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_request_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_throughput: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<f64>,
    /// The level against the SLO: the percentile of each metric, its interval and the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<SloCheck>,
    /// The level was cut short (quit, skip): its verdict does not count.
    #[serde(default)]
    pub interrupted: bool,
}

impl Probe {
    /// A probe about to run.
    pub fn new(level: u32, step: u32, at: ProbeAt, requests: u32) -> Self {
        Self {
            level,
            step,
            at,
            requests,
            achieved_request_rate: None,
            request_throughput: None,
            goodput: None,
            check: None,
            interrupted: false,
        }
    }

    /// `pass`, `fail`, `pass?`, `fail?`, `running` or `interrupted`.
    pub fn verdict(&self) -> &'static str {
        if self.interrupted {
            return "interrupted";
        }
        self.check.as_ref().map_or("running", SloCheck::verdict)
    }
}

/// The search as it stands: results.json's `search` section, and what every view shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchSummary {
    pub target: SearchTarget,
    pub slo: Slo,
    pub precision: Precision,
    pub probe_seconds: f64,
    pub min_requests: u32,
    pub throughput_probe: Option<ThroughputProbe>,
    pub probes: Vec<Probe>,
    pub status: SearchStatus,
    /// The highest rate that met the SLO: the rate search's answer.
    pub pass_rate: Option<f64>,
    /// The lowest rate that did not.
    pub fail_rate: Option<f64>,
    /// The most concurrent requests (users, with `--sessions`) that met the SLO: the
    /// concurrency search's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_concurrency: Option<u32>,
    /// The fewest that did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail_concurrency: Option<u32>,
    /// The concurrency search probed session levels (users running `--sessions`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sessions: bool,
    /// The rate to beat, when the search was asked to stop early below it (`servetop tune`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beat: Option<f64>,
}

impl SearchSummary {
    /// A search about to start.
    pub fn new(cfg: &SearchConfig, slo: Slo) -> Self {
        Self {
            target: cfg.target,
            slo,
            precision: cfg.precision,
            probe_seconds: cfg.probe_seconds,
            min_requests: cfg.min_requests,
            throughput_probe: None,
            probes: Vec::new(),
            status: match cfg.target {
                SearchTarget::Rate => SearchStatus::Probing,
                SearchTarget::Concurrency => SearchStatus::Searching,
            },
            pass_rate: None,
            fail_rate: None,
            pass_concurrency: None,
            fail_concurrency: None,
            sessions: false,
            beat: cfg.beat,
        }
    }

    /// Folds a finished probe's verdict into the bracket.
    pub fn settle(&mut self, i: usize) {
        let Some(p) = self.probes.get(i) else { return };
        let Some(c) = p.check.as_ref().filter(|_| !p.interrupted) else {
            return;
        };
        match (p.at, c.meets) {
            (ProbeAt::Rate { request_rate: r }, true) => {
                self.pass_rate = Some(self.pass_rate.map_or(r, |x| x.max(r)));
            }
            (ProbeAt::Rate { request_rate: r }, false) => {
                self.fail_rate = Some(self.fail_rate.map_or(r, |x| x.min(r)));
            }
            (ProbeAt::Concurrency { concurrency: n }, true) => {
                self.pass_concurrency = Some(self.pass_concurrency.map_or(n, |x| x.max(n)));
            }
            (ProbeAt::Concurrency { concurrency: n }, false) => {
                self.fail_concurrency = Some(self.fail_concurrency.map_or(n, |x| x.min(n)));
            }
        }
    }

    /// The probe of level `index`, if that level is a search probe.
    pub fn probe_of(&self, index: u32) -> Option<&Probe> {
        self.probes.iter().find(|p| p.level == index)
    }

    /// Whether level `index` is the throughput probe.
    pub fn is_throughput_probe(&self, index: u32) -> bool {
        self.throughput_probe
            .as_ref()
            .is_some_and(|t| t.level == index)
    }

    /// Probes whose verdict is not certain at the confidence level.
    pub fn uncertain(&self) -> impl Iterator<Item = &Probe> {
        self.probes
            .iter()
            .filter(|p| !p.interrupted && p.check.as_ref().is_some_and(|c| !c.certain))
    }

    /// The bracket `[pass, fail]` in the search's unit: `[21.3, 22.1] req/s`, `[8, 9] concurrent`.
    pub fn bracket(&self) -> String {
        let (pass, fail, unit) = match self.target {
            SearchTarget::Rate => (
                self.pass_rate.map(fmt_rate),
                self.fail_rate.map(fmt_rate),
                "req/s",
            ),
            SearchTarget::Concurrency => (
                self.pass_concurrency.map(|c| c.to_string()),
                self.fail_concurrency.map(|c| c.to_string()),
                self.unit(),
            ),
        };
        format!(
            "[{}, {}] {unit}",
            pass.unwrap_or_else(|| "-".into()),
            fail.unwrap_or_else(|| "-".into())
        )
    }

    /// What the concurrency search counts: `concurrent` requests, or `users`.
    fn unit(&self) -> &'static str {
        if self.sessions { "users" } else { "concurrent" }
    }

    /// The answer in words, when there is one: `21.3 req/s`, `8 concurrent requests`, `8 users`.
    pub fn answer(&self) -> Option<String> {
        match self.target {
            SearchTarget::Rate => self.pass_rate.map(|p| format!("{} req/s", fmt_rate(p))),
            SearchTarget::Concurrency => self.pass_concurrency.map(|c| {
                if self.sessions {
                    format!("{c} user{}", if c == 1 { "" } else { "s" })
                } else {
                    format!("{c} concurrent request{}", if c == 1 { "" } else { "s" })
                }
            }),
        }
    }

    /// One line: the answer with its bracket and precision, or where the search stands.
    pub fn headline(&self) -> String {
        let bracket = self.bracket();
        let one = self.target == SearchTarget::Rate || self.pass_concurrency.is_none_or(|c| c == 1);
        let meets = match (one, self.sessions) {
            (true, false) => "meets",
            (false, false) => "meet",
            (true, true) => "meets, on every turn,",
            (false, true) => "meet, on every turn,",
        };
        let precision = self.precision.describe(self.target);
        let status = self.status.describe(self.target);
        match (self.status, self.answer()) {
            (SearchStatus::StoppedEarly, _) => format!(
                "stopped early: below {} req/s for {} (it fails at the rate to beat)",
                self.fail_rate.map_or("-".into(), fmt_rate),
                self.slo.describe()
            ),
            (SearchStatus::Converged, Some(a)) => format!(
                "{a} {meets} {} (bracket {bracket}, precision {precision})",
                self.slo.describe(),
            ),
            (s, Some(a)) if s.finished() => format!(
                "{a} {meets} {} — {status} (bracket {bracket}, precision {precision} not reached)",
                self.slo.describe(),
            ),
            (s, _) if s.finished() => {
                format!("{status}: {} (bracket {bracket})", self.slo.describe())
            }
            (_, _) => format!("{status} for {} · bracket {bracket}", self.slo.describe()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the rule against a server whose true answer is `truth` (a probe passes exactly
    /// when its rate is at or below it): the stopping bracket must hold the truth and be within
    /// the precision.
    fn search(
        truth: f64,
        throughput: f64,
        precision: Precision,
    ) -> (Vec<f64>, Option<f64>, Option<f64>, SearchStatus) {
        search_beating(truth, throughput, precision, None)
    }

    /// [`search`] with a rate to beat.
    fn search_beating(
        truth: f64,
        throughput: f64,
        precision: Precision,
        beat: Option<f64>,
    ) -> (Vec<f64>, Option<f64>, Option<f64>, SearchStatus) {
        let (mut pass, mut fail) = (None, None);
        let mut rates = Vec::new();
        loop {
            match next_rate(
                throughput,
                (pass, fail),
                beat,
                precision,
                (rates.len() as u32, 40),
            ) {
                Ok(r) => {
                    rates.push(r);
                    if r <= truth {
                        pass = Some(r);
                    } else {
                        fail = Some(r);
                    }
                }
                Err(s) => return (rates, pass, fail, s),
            }
        }
    }

    #[test]
    fn bisection_from_the_measured_throughput() {
        // Truth 21, throughput 25: 25 fails, 12.5 passes, 18.75 passes, 21.875 fails,
        // 20.3125 passes, 21.09375 fails; [20.3125, 21.09375] is 3.8 % wide: done.
        let (rates, pass, fail, s) = search(21.0, 25.0, Precision::Relative(0.05));
        assert_eq!(rates, vec![25.0, 12.5, 18.75, 21.875, 20.3125, 21.09375]);
        assert_eq!(
            (pass, fail, s),
            (Some(20.3125), Some(21.09375), SearchStatus::Converged)
        );
        // A pass at the throughput doubles until a fail.
        let (rates, _, _, s) = search(70.0, 25.0, Precision::Absolute(1.0));
        assert_eq!(&rates[..3], &[25.0, 50.0, 100.0]);
        assert_eq!(s, SearchStatus::Converged);
        // Nothing passes; everything passes.
        assert_eq!(
            search(0.0, 25.0, Precision::Relative(0.05)).3,
            SearchStatus::NoPassingRate
        );
        assert_eq!(
            search(1e9, 25.0, Precision::Relative(0.05)).3,
            SearchStatus::NoFailingRate
        );
        // The probe budget.
        assert_eq!(
            next_rate(
                25.0,
                (Some(1.0), Some(20.0)),
                None,
                Precision::Relative(0.01),
                (16, 16)
            ),
            Err(SearchStatus::OutOfProbes)
        );
    }

    /// With a rate to beat, the first probe is at it: a fail there stops the search early
    /// (the truth is below it), a pass goes on to the same kind of bracket as without.
    #[test]
    fn a_rate_to_beat_is_probed_first_and_a_fail_there_stops_early() {
        let run = |truth: f64, beat: f64| {
            search_beating(truth, 25.0, Precision::Relative(0.05), Some(beat))
        };
        assert_eq!(
            run(10.0, 12.0),
            (vec![12.0], None, Some(12.0), SearchStatus::StoppedEarly)
        );
        let (rates, pass, fail, s) = run(21.0, 12.0);
        assert_eq!((rates[0], rates[1]), (12.0, 24.0));
        assert_eq!(s, SearchStatus::Converged);
        assert!(pass.unwrap() <= 21.0 && 21.0 < fail.unwrap());
        assert!(Precision::Relative(0.05).satisfied(pass.unwrap(), fail.unwrap()));
        // Exactly at the rate to beat passes: a tie is measured, not stopped.
        assert_eq!(run(12.0, 12.0).3, SearchStatus::Converged);
    }

    proptest::proptest! {
        /// For any truth, throughput and precision the search stops converged with the truth in
        /// its bracket and the bracket within the precision, or says why not (truly no pass, or
        /// a pass far above the throughput).
        #[test]
        fn bisection_brackets_the_truth_within_its_precision(
            truth in 0.01f64..1000.0,
            throughput in 0.1f64..500.0,
            rel in proptest::option::of(0.005f64..0.3),
            abs in 0.01f64..5.0,
        ) {
            let precision = rel.map_or(Precision::Absolute(abs), Precision::Relative);
            let (rates, pass, fail, s) = search(truth, throughput, precision);
            match s {
                SearchStatus::Converged => {
                    let (p, f) = (pass.unwrap(), fail.unwrap());
                    proptest::prop_assert!(p <= truth && truth < f, "{p} {truth} {f}");
                    proptest::prop_assert!(precision.satisfied(p, f));
                    let gap = match precision { Precision::Relative(r) => r * p, Precision::Absolute(a) => a };
                    proptest::prop_assert!(truth - p <= gap + 1e-9);
                }
                SearchStatus::NoPassingRate => proptest::prop_assert!(truth < throughput * 2f64.powi(-MAX_HALVINGS)),
                SearchStatus::NoFailingRate => proptest::prop_assert!(truth >= throughput * 2f64.powi(MAX_DOUBLINGS)),
                other => proptest::prop_assert!(false, "stopped {:?} after {:?}", other, rates),
            }
            proptest::prop_assert!(rates.len() <= 40);
        }
    }

    /// Runs the concurrency rule against a server whose truth is `truth` (a probe passes
    /// exactly when its concurrency is at or below it).
    fn search_concurrency(
        truth: u32,
        (start, cap): (u32, u32),
        precision: Precision,
    ) -> (Vec<u32>, Option<u32>, Option<u32>, SearchStatus) {
        let (mut pass, mut fail) = (None, None);
        let mut tried = Vec::new();
        loop {
            match next_concurrency(
                (start, cap),
                (pass, fail),
                precision,
                (tried.len() as u32, 40),
            ) {
                Ok(c) => {
                    tried.push(c);
                    if c <= truth {
                        pass = Some(c);
                    } else {
                        fail = Some(c);
                    }
                }
                Err(s) => return (tried, pass, fail, s),
            }
        }
    }

    #[test]
    fn concurrency_bisection_halves_doubles_and_stops_at_neighbours() {
        // Truth 4 from 64: halve to a pass, then close in on whole numbers.
        let (tried, pass, fail, s) = search_concurrency(4, (64, 512), Precision::Relative(0.05));
        assert_eq!(tried, vec![64, 32, 16, 8, 4, 6, 5]);
        assert_eq!((pass, fail, s), (Some(4), Some(5), SearchStatus::Converged));
        // A pass at the start doubles up to the cap.
        let (tried, _, _, s) = search_concurrency(1000, (64, 100), Precision::Relative(0.05));
        assert_eq!(tried, vec![64, 100]);
        assert_eq!(s, SearchStatus::NoFailingRate);
        // One stream fails: nothing passes.
        let (tried, _, _, s) = search_concurrency(0, (4, 32), Precision::Relative(0.05));
        assert_eq!((tried, s), (vec![4, 2, 1], SearchStatus::NoPassingRate));
        // 10 % of 40 is 4: a bracket 4 wide is enough.
        let (_, pass, fail, s) = search_concurrency(41, (64, 512), Precision::Relative(0.1));
        assert_eq!(s, SearchStatus::Converged);
        assert!(fail.unwrap() - pass.unwrap() <= 4, "{pass:?} {fail:?}");
    }

    proptest::proptest! {
        /// For any truth, start, cap and precision the concurrency search stops with the truth
        /// in its bracket, within the precision or at neighbours, or says truly why not.
        #[test]
        fn concurrency_bisection_brackets_the_truth(
            truth in 0u32..2000,
            start in 1u32..600,
            cap in 1u32..1200,
            rel in proptest::option::of(0.005f64..0.3),
            abs in 0.5f64..8.0,
        ) {
            let precision = rel.map_or(Precision::Absolute(abs), Precision::Relative);
            let (tried, pass, fail, s) = search_concurrency(truth, (start, cap), precision);
            proptest::prop_assert!(tried.iter().all(|c| (1..=cap.max(1)).contains(c)), "{tried:?}");
            match s {
                SearchStatus::Converged => {
                    let (p, f) = (pass.unwrap(), fail.unwrap());
                    proptest::prop_assert!(p <= truth && truth < f, "{p} {truth} {f}");
                    proptest::prop_assert!(f == p + 1 || precision.satisfied(f64::from(p), f64::from(f)));
                }
                SearchStatus::NoPassingRate => proptest::prop_assert!(truth == 0),
                SearchStatus::NoFailingRate => proptest::prop_assert!(truth >= cap.max(1)),
                other => proptest::prop_assert!(false, "stopped {:?} after {:?}", other, tried),
            }
            proptest::prop_assert!(tried.len() <= 30, "{tried:?}");
        }
    }

    #[test]
    fn a_probe_says_where_it_ran_under_its_own_key() {
        let rate = Probe::new(3, 1, ProbeAt::Rate { request_rate: 2.5 }, 100);
        let conc = Probe::new(4, 2, ProbeAt::Concurrency { concurrency: 8 }, 100);
        let (r, c) = (
            serde_json::to_value(&rate).unwrap(),
            serde_json::to_value(&conc).unwrap(),
        );
        assert_eq!(
            (r["request_rate"].as_f64(), r.get("concurrency")),
            (Some(2.5), None)
        );
        assert_eq!(
            (c["concurrency"].as_u64(), c.get("request_rate")),
            (Some(8), None)
        );
        let back: Probe = serde_json::from_value(c).unwrap();
        assert_eq!(back, conc);
        let back: Probe = serde_json::from_value(r).unwrap();
        assert_eq!(back, rate);
    }

    #[test]
    fn precision_parses_and_checks_the_bracket() {
        assert_eq!(Precision::parse("5%").unwrap(), Precision::Relative(0.05));
        assert_eq!(Precision::parse("0.5").unwrap(), Precision::Absolute(0.5));
        for bad in ["0%", "x", "-1", "100%", ""] {
            assert!(Precision::parse(bad).is_err(), "{bad}");
        }
        assert!(Precision::Relative(0.05).satisfied(20.0, 21.0));
        assert!(!Precision::Relative(0.05).satisfied(20.0, 21.01));
        assert!(Precision::Absolute(0.5).satisfied(20.0, 20.5));
        assert_eq!(
            Precision::Relative(0.05).describe(SearchTarget::Rate),
            "5 %"
        );
        let c = SearchConfig::rate();
        assert_eq!((c.requests_at(1.0), c.requests_at(10.0)), (100, 300));
    }
}
