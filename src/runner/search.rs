//! Runs the SLO capacity search ([`crate::workload::search`]) as a growing plan of ordinary levels.
//!
//! Each probe is announced (`LevelAdded`, then the search state), run exactly like a planned
//! level, and judged. The judging needs the level's numbers here, in the runner, to pick the
//! next rate — yet every number on screen comes from the `Session` fold. So the probe's events
//! pass through a tee on their way to the consumer: it folds the level's records into a
//! `LevelAccumulator` of its own, the same type the session folds the same records into, and
//! forwards every event unchanged and in order. Verdict and display are one computation over
//! one set of records; the runner still only sends events and never reads the UI's state.

use crate::event::{self, Event};
use crate::fmt::fmt_rate;
use crate::metrics::{LevelAccumulator, Slo};
use crate::workload::search::{
    RateProbe, SearchConfig, SearchStatus, SearchSummary, ThroughputProbe, next_rate,
};
use crate::workload::{Arrival, LevelKind, LevelSpec, OpenLoop};

use super::Runner;

/// What the search needs besides its configuration: the SLO and the shape of its requests.
#[derive(Clone, Debug)]
pub struct SearchPlan {
    pub config: SearchConfig,
    pub slo: Slo,
    pub input_tokens: u64,
    pub output_tokens: u32,
    /// Leading tokens every probe's prompts share (`--shared-prefix-len`).
    pub shared_prefix_tokens: u64,
    /// What the probes' requests mix in (`--range-ratio`).
    pub mix: crate::workload::mix::RequestMix,
    /// Burstiness, ramp-up and concurrency cap of the rate probes.
    pub open_loop: OpenLoop,
}

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

    /// The throughput probe, then bisection over rate probes until the search stops.
    pub(super) async fn run_search(&mut self, plan: &SearchPlan) -> Result<(), String> {
        let cfg = &plan.config;
        let mut s = SearchSummary::new(cfg, plan.slo);
        let mut index = self
            .prepared
            .levels
            .iter()
            .map(|l| l.index + 1)
            .max()
            .unwrap_or(0);
        let spec = throughput_probe_spec(plan, index);
        index += 1;
        s.throughput_probe = Some(ThroughputProbe {
            level: spec.index,
            concurrency: spec.concurrency,
            request_throughput: None,
        });
        self.emit(Event::LevelAdded(spec.clone()));
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
            let spec = rate_probe_spec(plan, index, rate);
            index += 1;
            s.probes.push(RateProbe {
                level: spec.index,
                step: s.probes.len() as u32 + 1,
                request_rate: rate,
                requests: spec.requests,
                achieved_request_rate: None,
                request_throughput: None,
                goodput: None,
                check: None,
                interrupted: false,
            });
            self.emit(Event::LevelAdded(spec.clone()));
            self.emit_search(&s);
            self.emit(Event::Phase(format!(
                "SLO search: probe {} at {} req/s, bracket [{}, {}]",
                s.probes.len(),
                fmt_rate(rate),
                s.pass_rate.map_or("-".into(), fmt_rate),
                s.fail_rate.map_or("-".into(), fmt_rate),
            )));
            let seen = match self.run_observed(&spec, plan.slo).await {
                Ok(o) => o,
                Err(e) => return Err(self.stop_search(&mut s, e)),
            };
            let i = s.probes.len() - 1;
            let st = seen.acc.stats().scalars;
            let p = &mut s.probes[i];
            p.achieved_request_rate = st.achieved_request_rate;
            p.request_throughput = Some(st.request_throughput);
            p.goodput = st.goodput;
            p.check = seen.acc.slo_check();
            // A probe cut short (quit, or skip: skip ends the search) is not a verdict.
            p.interrupted = seen.finished != Some(false);
            if p.interrupted || self.cancel.is_cancelled() {
                s.status = SearchStatus::Stopped;
                self.emit_search(&s);
                return Ok(());
            }
            s.settle(i);
            self.emit_search(&s);
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
        let tee = tokio::spawn(async move {
            let mut seen = Observed {
                acc: LevelAccumulator::new(Some(slo)),
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

/// The search's first level: a closed-loop probe of the most requests/s the server sustains.
fn throughput_probe_spec(plan: &SearchPlan, index: u32) -> LevelSpec {
    LevelSpec {
        shared_prefix_tokens: plan.shared_prefix_tokens,
        mix: plan.mix.clone(),
        ..LevelSpec::new(
            index,
            LevelKind::Sweep,
            plan.config.probe_concurrency,
            (plan.input_tokens, plan.output_tokens),
            plan.config.throughput_requests(),
        )
    }
}

/// A rate probe at `rate` req/s, with the run's arrival shape and cap.
fn rate_probe_spec(plan: &SearchPlan, index: u32, rate: f64) -> LevelSpec {
    let ol = &plan.open_loop;
    LevelSpec {
        arrival: Some(Arrival {
            request_rate: rate,
            burstiness: ol.burstiness,
            ramp_up_s: ol.ramp_up_s,
            max_concurrency: ol.max_concurrency,
        }),
        shared_prefix_tokens: plan.shared_prefix_tokens,
        mix: plan.mix.clone(),
        ..LevelSpec::new(
            index,
            LevelKind::Rate,
            ol.max_concurrency.unwrap_or(0),
            (plan.input_tokens, plan.output_tokens),
            plan.config.requests_at(rate),
        )
    }
}
