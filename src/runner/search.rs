//! Runs the SLO capacity search ([`crate::workload::search`]) as a growing plan of ordinary
//! levels: the rate search's throughput probe and rate probes, or the concurrency search's
//! closed-loop (or session) probes.
//!
//! Each probe is announced (`LevelAdded`, then the search state), run exactly like a planned
//! level, and judged. The judging needs the level's numbers here, in the runner, to pick the
//! next rate — yet every number on screen comes from the `Session` fold. So the probe's events
//! pass through a tee on their way to the consumer: it folds the level's records into a
//! `LevelAccumulator` of its own, the same type the session folds the same records into, and
//! forwards every event unchanged and in order. Verdict and display are one computation over
//! one set of records; the runner still only sends events and never reads the UI's state.

use crate::event::{self, Event};
use crate::metrics::{LevelAccumulator, Slo};
use crate::workload::LevelSpec;
use crate::workload::search::{
    Probe, ProbeAt, SearchPlan, SearchStatus, SearchSummary, SearchTarget, ThroughputProbe,
    next_concurrency, next_rate,
};

use super::Runner;

/// A probe's level as the tee saw it.
struct Observed {
    acc: LevelAccumulator,
    /// `Some(interrupted)` once its `LevelFinished` passed; `None`: it never ran (skipped).
    finished: Option<bool>,
}

impl Runner {
    fn emit_search(&self, s: &SearchSummary) {
        self.emit(Event::Search(Box::new(s.clone())));
    }

    /// The level index after the planned levels: the search's first probe's.
    fn first_probe_index(&self) -> u32 {
        self.prepared
            .levels
            .iter()
            .map(|l| l.index + 1)
            .max()
            .unwrap_or(0)
    }

    /// The search `plan` asks for, until it stops.
    pub(super) async fn run_search(&mut self, plan: &SearchPlan) -> Result<(), String> {
        match plan.config.target {
            SearchTarget::Rate => self.run_rate_search(plan).await,
            SearchTarget::Concurrency => self.run_concurrency_search(plan).await,
        }
    }

    /// Bisection over closed-loop (or session) probes until the search stops; each probe's
    /// requests are its seconds' worth at the pace of the one before.
    async fn run_concurrency_search(&mut self, plan: &SearchPlan) -> Result<(), String> {
        let cfg = &plan.config;
        let mut s = SearchSummary::new(cfg, plan.slo);
        s.sessions = plan.sessions.is_some();
        let mut index = self.first_probe_index();
        let mut e2e_s = None;
        loop {
            let c = match next_concurrency(
                (cfg.probe_concurrency, cfg.concurrency_cap()),
                (s.pass_concurrency, s.fail_concurrency),
                cfg.precision,
                (s.probes.len() as u32, cfg.max_probes),
            ) {
                Ok(c) => c,
                Err(status) => {
                    s.status = status;
                    self.emit_search(&s);
                    return Ok(());
                }
            };
            let spec = plan.concurrency_probe(index, c, e2e_s);
            index += 1;
            let at = ProbeAt::Concurrency { concurrency: c };
            let Some(st) = self.run_probe(&mut s, &spec, at, plan).await? else {
                return Ok(());
            };
            // A stream's time a request at this probe, tool waits included: the next probe's pace.
            let t = st.scalars.request_throughput;
            e2e_s = (t > 0.0).then(|| f64::from(c) / t).or(e2e_s);
        }
    }

    /// Announces and runs one probe at `at`, judges it and folds its verdict into `s`; its
    /// level's numbers, or None when the search stopped (the probe cut short, the run
    /// cancelled).
    async fn run_probe(
        &mut self,
        s: &mut SearchSummary,
        spec: &LevelSpec,
        at: ProbeAt,
        plan: &SearchPlan,
    ) -> Result<Option<crate::metrics::LevelStats>, String> {
        s.probes.push(Probe::new(
            spec.index,
            s.probes.len() as u32 + 1,
            at,
            spec.requests,
        ));
        self.emit(Event::LevelAdded(Box::new(spec.clone())));
        self.emit_search(s);
        self.emit(Event::Phase(format!(
            "SLO search: probe {} at {}, bracket {}",
            s.probes.len(),
            at.describe(),
            s.bracket(),
        )));
        let seen = match self.run_observed(spec, plan.slo).await {
            Ok(o) => o,
            Err(e) => return Err(self.stop_search(s, e)),
        };
        let i = s.probes.len() - 1;
        let stats = seen.acc.stats();
        let st = &stats.scalars;
        let p = &mut s.probes[i];
        p.achieved_request_rate = st.achieved_request_rate;
        p.request_throughput = Some(st.request_throughput);
        p.goodput = st.goodput;
        p.check = seen.acc.slo_check();
        // A probe cut short (quit, or skip: skip ends the search) is not a verdict.
        p.interrupted = seen.finished != Some(false);
        if p.interrupted || self.cancel.is_cancelled() {
            s.status = SearchStatus::Stopped;
            self.emit_search(s);
            return Ok(None);
        }
        s.settle(i);
        self.emit_search(s);
        Ok(Some(stats))
    }

    /// The throughput probe, then bisection over rate probes until the search stops.
    async fn run_rate_search(&mut self, plan: &SearchPlan) -> Result<(), String> {
        let cfg = &plan.config;
        let mut s = SearchSummary::new(cfg, plan.slo);
        let mut index = self.first_probe_index();
        let spec = plan.throughput_probe(index);
        index += 1;
        s.throughput_probe = Some(ThroughputProbe {
            level: spec.index,
            concurrency: spec.concurrency,
            request_throughput: None,
        });
        self.emit(Event::LevelAdded(Box::new(spec.clone())));
        self.emit_search(&s);
        let seen = match self.run_observed(&spec, plan.slo).await {
            Ok(o) => o,
            Err(e) => return Err(self.stop_search(&mut s, e)),
        };
        if seen.finished != Some(false) || self.cancel.is_cancelled() {
            s.status = SearchStatus::Stopped;
            self.emit_search(&s);
            return Ok(());
        }
        let sc = seen.acc.stats().scalars;
        let bound =
            (sc.completed > 0 && sc.request_throughput > 0.0).then_some(sc.request_throughput);
        if let Some(t) = s.throughput_probe.as_mut() {
            t.request_throughput = bound;
        }
        let Some(bound) = bound else {
            s.status = SearchStatus::NoThroughput;
            self.emit_search(&s);
            return Ok(());
        };
        s.status = SearchStatus::Searching;
        loop {
            let rate = match next_rate(
                bound,
                (s.pass_rate, s.fail_rate),
                cfg.beat,
                cfg.precision,
                (s.probes.len() as u32, cfg.max_probes),
            ) {
                Ok(r) => r,
                Err(status) => {
                    s.status = status;
                    self.emit_search(&s);
                    return Ok(());
                }
            };
            let spec = plan.rate_probe(index, rate);
            index += 1;
            let at = ProbeAt::Rate { request_rate: rate };
            if self.run_probe(&mut s, &spec, at, plan).await?.is_none() {
                return Ok(());
            }
        }
    }

    /// Marks the search stopped by `e`, tells the consumer, and hands `e` back.
    fn stop_search(&self, s: &mut SearchSummary, e: String) -> String {
        s.status = SearchStatus::Stopped;
        self.emit_search(s);
        e
    }

    /// Runs `spec` with its events passing through a tee that folds the level's records.
    async fn run_observed(&mut self, spec: &LevelSpec, slo: Slo) -> Result<Observed, String> {
        let (tee_tx, mut tee_rx) = event::channel();
        let real = std::mem::replace(&mut self.tx, tee_tx);
        let forward = real.clone();
        let level = spec.index;
        // The probe's own fold: a session probe judged on every turn, as the run judges it.
        let acc = spec.accumulator(Some(slo), Vec::new());
        let tee = tokio::spawn(async move {
            let mut seen = Observed {
                acc,
                finished: None,
            };
            // Ends when the last sender (the runner's, then its workers') is dropped.
            while let Some(ev) = tee_rx.recv().await {
                match &ev {
                    Event::Request(r) if r.level == level => seen.acc.add(r),
                    Event::Sent { level: l, slot } if *l == level => seen.acc.note_slot(*slot),
                    Event::Outage {
                        level: l,
                        from_us,
                        to_us,
                    } if *l == level => seen.acc.add_outage(*from_us, *to_us),
                    Event::LevelFinished {
                        index, interrupted, ..
                    } if *index == level => {
                        seen.finished = Some(*interrupted);
                    }
                    _ => {}
                }
                let _ = forward.send(ev);
            }
            seen
        });
        let result = self.run_one(spec).await;
        // Dropping the tee's sender lets it drain and end.
        self.tx = real;
        let seen = tee
            .await
            .map_err(|e| format!("the search lost a probe's results: {e}"))?;
        result.map(|()| seen)
    }
}
