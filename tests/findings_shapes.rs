//! Findings proven on shapes no one tuned for (docs/metrics.md "Findings"): seeded random
//! simulator shapes — a cap on running requests, batch growth, decode step, prefill speed,
//! context cost, accept length, and sometimes injected failures — each run through a small plan
//! in process, and every claim the findings make checked against what the shape and the
//! simulator's own record of each request say happened:
//!
//! - a queue is named only where a request of that level was waiting in the server when its
//!   gauges were read, and is named wherever one certainly was (the record says which reads
//!   fell inside a wait behind a full batch); the cap it names is the configured one;
//! - a knee only where TTFT (the server's own: first frame − read) outgrew the load, and none
//!   where it clearly did not; the queue blamed only where one formed;
//! - saturation at a level whose throughput (the server's: tokens written over the level's
//!   span) is near the best, and not above a level that already was;
//! - the prefill fit within 3 % of the speed the server's record shows (itself within 10 % of
//!   the configured speed where the simulator kept to its schedule), with an R² only over three lengths; a two-length shape spans 1K to
//!   6K, so its TTFT difference (at least 250 ms) dwarfs what a single request's scheduling on
//!   a busy machine moves (4 ms once moved a 1K-to-3K fit, 114 ms apart, by 3.2 %);
//! - the decode change across lengths within 3 points of the server's record, and of the one
//!   computed by hand from the shape wherever the record kept to it, or "no measurable
//!   change" only where the change is small against the run's floor or the record's own
//!   reversal (a machine that stalls the simulator through one length slows it in the record
//!   too); a floor over 30 % only where servetop's timing was doubted or the server's own
//!   frames scatter half as much;
//! - a structured-output constraint's cost per server step within 3 points of the server's
//!   record, and a finding whose twins' accept lengths differ by over 7 % confounded (none
//!   under 3 %): every other such shape's constraint lowers its accept length;
//! - failures counted exactly as the simulator injected them;
//! - every finding resting on a level of fewer than 10 requests is marked thin or worse;
//! - in one shape of six the simulator goes away during the sweep's second level and comes back
//!   on the same address: that level alone has an `outage_s`, the `outage` finding names it, and nothing else takes it as a
//!   point of a curve; what rests on it is `disturbed` and carries its caveat.
//!
//! Each check counts the shapes it judged, and the test fails if a check judged too few: no
//! check passes by never running. A failing shape prints its seed and the shape
//! (`SERVETOP_SHAPES=SEED` runs that one alone). Every run is held to the simulator's schedule
//! first (`tests/sim_truth`): a shape whose simulator the machine starved is run again, and
//! after three such runs left unjudged, saying so, instead of judging a moved finding (the
//! counts of shapes judged still hold). What
//! checks the simulator against its configuration rather than servetop against the simulator's
//! record (its prefill speed) is judged only where it kept to its schedule.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::single_match_else, clippy::float_cmp)]

use std::collections::BTreeMap;
use std::net::SocketAddr;

use servetop::config::RunConfig;
use servetop::run::session::Session;
use servetop::sim::faults::{FaultKind, Faults};
use servetop::sim::{self, AcceptLength, SimConfig, SimRequestTrace, SimTruth};
use servetop::summary::findings::{DECODE_SPREAD_Z, Finding, Strength};
use servetop::summary::{LevelSummary, RunSummary};
use servetop::workload::RequestCount;

mod draw;
use draw::Draw;
mod sim_run;
mod sim_truth;

/// Shapes drawn: at least 50, seeds 1‥=SHAPES.
const SHAPES: u64 = 50;
/// Shapes run at once (each its own simulator and run; they share the process's runtime).
const AT_ONCE: usize = 3;
/// Output tokens of each long-context request: decode over 20 to 80 steps.
const LC_OUT: u64 = 81;
/// The sweeps the shapes run: even seeds double the load at each level, odd ones quadruple it
/// (a load ×4 with TTFT ×3 is growth in step with it, not a knee).
const SWEEPS: [&[u32]; 2] = [&[1, 2, 4, 8], &[1, 4, 16]];
/// The simulator publishes its gauges once per engine loop: a read sees a request waiting if it
/// waited at the loop's last turn. One turn is at most a decode step plus a prefill piece here
/// (under 60 ms for every shape drawn), so a request waiting from 60 ms before a read to 60 ms
/// after it was certainly seen, and one whose wait ended over 60 ms before a read could not be.
const LOOP_US: u64 = 60_000;

/// The simulator kept to its schedule over a run when it fell behind it by less than this
/// share of the run (`SimTruth::schedule_slip_ms`): what its record shows is then what its
/// configuration says, within the checks' tolerances.
const KEPT_SLIP_SHARE: f64 = 0.02;
/// Shapes whose simulator kept to its schedule before the simulator's record is counted
/// against its configuration (a quiet machine keeps all of them: 42 of 42 without an outage).
const KEPT_LEAST: u64 = 21;
/// Runs of a shape the machine starved before it is left unjudged (said; the counts of shapes
/// each check judged still hold).
const TRIES: u32 = 3;

/// One drawn shape.
#[derive(Clone, Debug)]
struct Shape {
    seed: u64,
    cap: u32,
    batch_growth: f64,
    step_ms: f64,
    prefill: f64,
    ctx_ms_per_1k: f64,
    accept: u32,
    fail_rate: f64,
    lengths: Vec<u64>,
    /// The simulator goes away for this long during the sweep's second level (0: never).
    outage_s: f64,
    /// A structured-output constraint costs each step this much (0: the plan has none); such
    /// shapes draw their accept length per step around a mean, so twins can differ in it.
    mask_ms: f64,
    accept_mean: f64,
    /// A constrained request's mean accept length (0: the plain one's).
    constrained_accept: f64,
}

impl Shape {
    fn draw(seed: u64) -> Self {
        let mut d = Draw(seed);
        let cap = d.pick(&[2, 3, 4, 6, 16]);
        let batch_growth = if d.unit() < 0.3 {
            0.0
        } else {
            d.range(0.0, 0.15)
        };
        let step_ms = d.range(4.0, 8.0);
        let prefill = d.range(5_000.0, 20_000.0);
        let ctx_ms_per_1k = if d.unit() < 0.4 {
            0.0
        } else {
            d.range(0.2, 3.0)
        };
        let accept = d.pick(&[1, 1, 2, 3, 4]);
        let fail_rate = if seed.is_multiple_of(5) { 0.1 } else { 0.0 };
        let lengths = if seed.is_multiple_of(4) {
            vec![1000, 6000]
        } else {
            vec![1000, 2000, 4000]
        };
        // One shape in six loses its server for a while during the sweep's second level.
        // One shape in six runs json twins at a stated step cost; in every other such shape the
        // constraint also lowers the accept length (its mask rejects drafts), by 15 % to 40 %.
        let (mask_ms, accept_mean) = if seed % 6 == 2 {
            (d.range(0.5, 4.0), d.range(1.5, 3.7))
        } else {
            (0.0, 0.0)
        };
        let constrained_accept = if mask_ms > 0.0 && seed % 12 == 2 {
            accept_mean * d.range(0.6, 0.85)
        } else {
            0.0
        };
        let outage_s = if seed % 6 == 4 {
            d.range(1.2, 2.0)
        } else {
            0.0
        };
        Self {
            seed,
            cap,
            batch_growth,
            step_ms,
            prefill,
            ctx_ms_per_1k,
            accept,
            fail_rate,
            lengths,
            outage_s,
            mask_ms,
            accept_mean,
            constrained_accept,
        }
    }

    fn sim(&self) -> SimConfig {
        let mut c = sim_run::steady_config(self.step_ms);
        c.max_running = self.cap;
        c.batch_growth = self.batch_growth;
        c.context_ms_per_1k = self.ctx_ms_per_1k;
        c.accept_length = if self.mask_ms > 0.0 {
            AcceptLength::Mean(self.accept_mean)
        } else {
            AcceptLength::Fixed(self.accept)
        };
        c.structured_step_ms = self.mask_ms;
        c.structured_accept_length = self.constrained_accept;
        c.prefill_tokens_per_s = self.prefill;
        c.prefill_chunk_tokens = 1_000_000;
        c.prefix_cache = false;
        c.seed = self.seed;
        if self.fail_rate > 0.0 {
            c.faults = Faults {
                rates: vec![(FaultKind::Http500, self.fail_rate)],
                ..Faults::default()
            };
        }
        c
    }

    fn plan(&self, url: &str) -> RunConfig {
        RunConfig {
            api_key_env: "SERVETOP_TEST_NO_KEY".into(),
            concurrency: SWEEPS[(self.seed % 2) as usize]
                .iter()
                .map(|c| u64::from(*c))
                .collect(),
            input_len: 200,
            output_len: 21,
            requests_per_level: RequestCount::PerConcurrency {
                factor: if self.seed.is_multiple_of(2) {
                    3.0
                } else {
                    2.0
                },
                min: 4,
            },
            long_context: self.lengths.clone(),
            long_context_output_len: LC_OUT as u32,
            seed: self.seed,
            // The simulator counts what it injected over every request: no warmup to hide one.
            warmup_requests: u32::from(self.fail_rate <= 0.0),
            server_wait_s: 20.0,
            response_format: (self.mask_ms > 0.0)
                .then_some(servetop::client::structured::ResponseFormat::Json),
            ..RunConfig::minimal(url)
        }
    }

    /// Decode tok/s of one request alone with `input` prompt tokens and `output` tokens, by
    /// hand: its first token ends the prefill, then each step accepts `accept` tokens (the
    /// last what is left) and takes the step plus the context cost of what it holds.
    fn decode_by_hand(&self, input: u64, output: u64) -> f64 {
        let (mut generated, mut ms) = (1u64, 0.0);
        while generated < output {
            ms += self.step_ms + self.ctx_ms_per_1k * (input + generated) as f64 / 1000.0;
            generated += u64::from(self.accept).min(output - generated);
        }
        (output - 1) as f64 / (ms / 1000.0)
    }
}

/// What each check judged, over all shapes.
#[derive(Default, Debug)]
struct Judged {
    counts: BTreeMap<&'static str, u64>,
}

impl Judged {
    fn add(&mut self, what: &'static str) {
        *self.counts.entry(what).or_default() += 1;
    }
}

/// The server's record of one level's requests (ids `servetop-LEVEL-N`).
fn of_level<'a>(t: &'a SimTruth, l: &LevelSummary) -> Vec<&'a SimRequestTrace> {
    let prefix = format!("servetop-{}-", l.index);
    t.requests
        .iter()
        .filter(|r| {
            r.request_id
                .as_deref()
                .is_some_and(|id| id.starts_with(&prefix))
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[(v.len() - 1) / 2])
}

/// The server's TTFT p50 at a level (first frame − read), ms.
fn server_ttft_p50(reqs: &[&SimRequestTrace]) -> Option<f64> {
    median(
        reqs.iter()
            .filter_map(|r| {
                Some((r.first_write_unix_us()? as f64 - r.received_unix_us as f64) / 1e3)
            })
            .collect(),
    )
}

/// The server's output tok/s at a level: tokens written over the span from its first read to
/// its last write.
fn server_tput(reqs: &[&SimRequestTrace]) -> Option<f64> {
    let start = reqs.iter().map(|r| r.received_unix_us).min()?;
    let end = reqs.iter().filter_map(|r| r.last_write_unix_us()).max()?;
    let tokens: u64 = reqs.iter().map(|r| r.tokens()).sum();
    (end > start).then(|| tokens as f64 / ((end - start) as f64 / 1e6))
}

/// Whether a gauge read at `t` could have seen one of `reqs` waiting (read after it arrived,
/// and within a loop turn of its admission or before it), and whether it certainly did (it
/// waited from a loop turn before the read to one after, behind a full batch).
fn seen_waiting(
    reqs: &[&SimRequestTrace],
    all: &[SimRequestTrace],
    cap: u32,
    t: u64,
) -> (bool, bool) {
    let admitted = |r: &SimRequestTrace| r.admitted_unix_us.unwrap_or(u64::MAX);
    let possible = reqs
        .iter()
        .any(|r| r.received_unix_us < t && admitted(r) + LOOP_US > t);
    let waiting = reqs
        .iter()
        .any(|r| r.received_unix_us + LOOP_US <= t && admitted(r) >= t + LOOP_US);
    // The batch was full the whole while: `cap` requests admitted before and running after.
    let full = all
        .iter()
        .filter(|r| {
            admitted(r) + LOOP_US <= t && r.last_write_unix_us().is_some_and(|e| e >= t + LOOP_US)
        })
        .count()
        >= cap as usize;
    (possible, waiting && full)
}

fn find<'a>(s: &'a RunSummary, id: &str) -> Option<&'a Finding> {
    s.findings.iter().find(|f| f.id == id)
}

/// Every check on one shape's run; the first claim that does not hold panics, naming it.
/// One shape's run beside the simulator's record of it.
struct Ctx<'a> {
    shape: &'a Shape,
    s: &'a RunSummary,
    sweep: Vec<&'a LevelSummary>,
    reqs: Vec<Vec<&'a SimRequestTrace>>,
    /// Per sweep level: a read of the gauges could have seen one of its requests waiting, and
    /// one certainly did.
    possible: Vec<bool>,
    certain: Vec<bool>,
}

fn check(
    shape: &Shape,
    s: &RunSummary,
    t: &SimTruth,
    injected: u64,
    kept_schedule: bool,
    judged: &mut Judged,
) {
    // The plan's own levels: the constrained twins are the structured finding's.
    let sweep: Vec<&LevelSummary> = s
        .sweep
        .iter()
        .filter(|l| l.response_format.is_none())
        .collect();
    let reqs: Vec<Vec<&SimRequestTrace>> = sweep.iter().map(|l| of_level(t, l)).collect();
    // The queue, level by level, from the reads of the server's gauges.
    let mut possible = vec![false; sweep.len()];
    let mut certain = vec![false; sweep.len()];
    for &read in &t.metrics_reads_unix_us {
        for (i, r) in reqs.iter().enumerate() {
            let (p, c) = seen_waiting(r, &t.requests, shape.cap, read);
            possible[i] |= p;
            certain[i] |= c;
        }
    }
    let c = Ctx {
        shape,
        s,
        sweep,
        reqs,
        possible,
        certain,
    };
    check_queue(&c, judged);
    check_knee(&c, judged);
    check_saturation(&c, judged);
    check_long_context(shape, s, t, kept_schedule, judged);
    if shape.mask_ms > 0.0 {
        check_structured(s, t, judged);
    }
    check_failures_and_strength(s, injected, judged);
}

/// The server's step at a level: the median gap between its frames after each request's first,
/// and its tokens a frame after the first (its accept length).
fn server_steps(reqs: &[&SimRequestTrace]) -> (f64, f64) {
    let mut gaps = Vec::new();
    let (mut tokens, mut frames) = (0u64, 0u64);
    for r in reqs.iter().filter(|r| r.completed) {
        for w in r.writes.windows(2) {
            gaps.push((w[1].0 - w[0].0) as f64 / 1e3);
            tokens += u64::from(w[1].1);
            frames += 1;
        }
    }
    (
        median(gaps).unwrap_or(0.0),
        tokens as f64 / frames.max(1) as f64,
    )
}

/// A constraint's cost per step within 3 points of the server's record; a twin whose accept
/// length moved is flagged confounded, and one whose did not is not.
fn check_structured(s: &RunSummary, t: &SimTruth, judged: &mut Judged) {
    let f = find(s, "structured_output").expect("a structured_output finding");
    let mut steps = Vec::new();
    let mut confound: f64 = 0.0;
    // Every constrained level, the ladder's too, against its plain twin (the level before).
    for c in s.levels().filter(|l| l.response_format.is_some()) {
        let Some(p) = s.levels().find(|p| p.index + 1 == c.index) else {
            continue;
        };
        let (step_c, accept_c) = server_steps(&of_level(t, c));
        let (step_p, accept_p) = server_steps(&of_level(t, p));
        steps.push((step_c / step_p - 1.0) * 100.0);
        confound = confound.max((accept_c / accept_p - 1.0).abs());
    }
    let server = median(steps).unwrap();
    let got = f.values["step_overhead_pct"];
    assert!(
        (got - server).abs() < 3.0,
        "the constraint costs {got:.1} % a step, {server:.1} % by the server's record: {}",
        f.text
    );
    judged.add("structured step");
    if confound > 0.07 {
        assert_eq!(
            f.strength,
            Strength::Confounded,
            "the twins' accept lengths differ by {:.0} % on the server, but the finding is not confounded: {f:?}",
            confound * 100.0
        );
        judged.add("confound flagged");
    } else if confound < 0.03 {
        assert!(
            f.strength < Strength::Confounded,
            "the twins' accept lengths agree within {:.1} % on the server, but the finding is confounded: {f:?}",
            confound * 100.0
        );
    }
}

/// The queue named where the gauges saw one, and its cap the configured one.
fn check_queue(c: &Ctx, judged: &mut Judged) {
    let Ctx {
        shape,
        s,
        sweep,
        possible,
        certain,
        ..
    } = c;
    let queue = find(s, "server_queue");
    match queue {
        Some(q) => {
            judged.add("queue named");
            let first = q.values["concurrency"] as u32;
            let i = sweep.iter().position(|l| l.concurrency == first).unwrap();
            assert!(
                possible[i],
                "server_queue names a queue from C={first}, but no read of the gauges there fell in a wait: {}",
                q.text
            );
            assert!(
                !certain[..i].iter().any(|c| *c),
                "server_queue says the queue began at C={first}, but a level below certainly queued: {}",
                q.text
            );
            if let Some(cap) = q.values.get("server_max_running") {
                assert!(
                    *cap <= f64::from(shape.cap),
                    "the running gauge's peak {cap} is over the configured cap {}",
                    shape.cap
                );
            }
            if q.text.contains("runs at most") {
                judged.add("cap named");
                assert!(
                    q.text
                        .contains(&format!("runs at most {} requests", shape.cap)),
                    "a cap other than the configured {}: {}",
                    shape.cap,
                    q.text
                );
            }
        }
        None => {
            if let Some(i) = certain.iter().position(|c| *c) {
                panic!(
                    "no server_queue finding, but at C={} a read of the gauges fell in a wait behind a full batch",
                    sweep[i].concurrency
                );
            }
            judged.add("no queue named");
        }
    }
    if certain.iter().any(|c| *c) {
        judged.add("queue certain");
    }
}

/// A knee only where the server's own TTFT outgrew the load.
fn check_knee(c: &Ctx, judged: &mut Judged) {
    let Ctx {
        s,
        sweep,
        reqs,
        possible,
        certain,
        ..
    } = c;
    // The knee, against the server's own TTFT.
    let ttft: Vec<Option<f64>> = reqs.iter().map(|r| server_ttft_p50(r)).collect();
    // Where the batch's prefills are said to account for a level's TTFT, the server's own
    // TTFT there is about C/2 times its TTFT at C=1, and nothing waited in its queue.
    let latency = find(s, "latency").expect("a latency finding");
    if let Some(want) = latency.values.get("batch_prefill_ms") {
        judged.add("batch prefill");
        let l = latency.levels.last().unwrap();
        let i = sweep.iter().position(|x| &x.label() == l).unwrap();
        let server = ttft[i].unwrap();
        let server_want = f64::from(sweep[i].concurrency) / 2.0 * ttft[0].unwrap();
        assert!(
            (server / server_want - 1.0).abs() < 0.35 && !certain[i],
            "the batch's prefills said to account for {l}'s TTFT ({want:.0} ms), but the server's own TTFT p50 there is {server:.0} ms against C/2 × its C=1's {server_want:.0} ms: {}",
            latency.text
        );
    }
    let knee = find(s, "latency_knee");
    if let Some(k) = knee {
        judged.add("knee named");
        let at = k.values["concurrency"] as u32;
        let i = sweep.iter().position(|l| l.concurrency == at).unwrap();
        let (a, b) = (ttft[i - 1].unwrap(), ttft[i].unwrap());
        let load = f64::from(at) / f64::from(sweep[i - 1].concurrency);
        assert!(
            b / a > 1.1 * load,
            "a knee at C={at}, but the server's TTFT p50 grew ×{:.2} ({a:.1} → {b:.1} ms) against the load's ×{load}: {}",
            b / a,
            k.text
        );
        assert!(
            (k.values["load_growth"] - load).abs() < 1e-9,
            "load_growth {} against {load}",
            k.values["load_growth"]
        );
        if k.text.contains("waited in") {
            assert!(
                possible[i],
                "the knee blames a queue at C={at} the gauges could not have seen: {}",
                k.text
            );
        }
        if k.text.contains("show no queue") {
            assert!(
                !certain[i],
                "the knee says no queue at C={at}, where one certainly formed: {}",
                k.text
            );
        }
    } else {
        for i in 1..sweep.len() {
            let (Some(a), Some(b)) = (ttft[i - 1], ttft[i]) else {
                continue;
            };
            let load = f64::from(sweep[i].concurrency) / f64::from(sweep[i - 1].concurrency);
            assert!(
                !(b / a > 1.5 * load && b - a > 150.0),
                "no knee, but the server's TTFT p50 grew ×{:.2} ({a:.1} → {b:.1} ms) from C={} to C={} against the load's ×{load}",
                b / a,
                sweep[i - 1].concurrency,
                sweep[i].concurrency
            );
        }
        judged.add("no knee");
    }
}

/// Saturation where the server's own throughput reached its best.
fn check_saturation(c: &Ctx, judged: &mut Judged) {
    let Ctx {
        shape,
        s,
        sweep,
        reqs,
        ..
    } = c;
    // Saturation, against the server's throughput.
    let tput: Vec<f64> = reqs.iter().map(|r| server_tput(r).unwrap_or(0.0)).collect();
    let best = tput.iter().copied().fold(0.0, f64::max);
    if let Some(sat) = find(s, "saturation") {
        if let Some(c) = sat.values.get("concurrency") {
            judged.add("saturation level");
            let i = sweep
                .iter()
                .position(|l| f64::from(l.concurrency) == *c)
                .unwrap();
            assert!(
                tput[i] >= 0.8 * best,
                "saturates at C={c}, where the server wrote {:.0} tok/s of its best {best:.0}: {}",
                tput[i],
                sat.text
            );
            for j in 0..i {
                assert!(
                    tput[j] < 0.97 * best,
                    "saturates at C={c}, but C={} already wrote {:.0} of the best {best:.0} tok/s: {}",
                    sweep[j].concurrency,
                    tput[j],
                    sat.text
                );
            }
            if sat.text.contains("cap of") {
                assert!(
                    sat.text.contains(&format!("cap of {} running", shape.cap))
                        && *c >= f64::from(shape.cap),
                    "the saturation's cap is not the configured {} binding at or below C={c}: {}",
                    shape.cap,
                    sat.text
                );
            }
        } else {
            judged.add("not saturated");
            let n = tput.len();
            assert!(
                tput[n - 1] > 1.03 * tput[n - 2],
                "not saturated, but the server's last level wrote {:.0} tok/s against {:.0} below it: {}",
                tput[n - 1],
                tput[n - 2],
                sat.text
            );
        }
    }
}

/// Whether finding `f` says servetop's own timing was disturbed at its levels.
fn client_doubted(f: &Finding) -> bool {
    f.caveats
        .iter()
        .any(|c| c.starts_with("servetop may have been the limit"))
}

/// Prefill against the configured speed; decode across lengths against the hand's.
fn check_long_context(
    shape: &Shape,
    s: &RunSummary,
    t: &SimTruth,
    kept_schedule: bool,
    judged: &mut Judged,
) {
    // Long context needs two lengths measured (an injected failure can take one).
    let lengths = s
        .long_context
        .iter()
        .filter(|l| l.stats.as_ref().is_some_and(|st| st.scalars.completed > 0))
        .count();
    if lengths < 2 {
        assert!(find(s, "prefill_scaling").is_none() && find(s, "long_context_decode").is_none());
        return;
    }
    // Prefill: the speed the server's own record shows (its read of each prompt to its first
    // frame, against the prompt's tokens: the prefill and the server's parse of the prompt,
    // which a slower machine makes slower), and that record against the configured speed.
    let pf = find(s, "prefill_scaling").expect("a prefill_scaling finding");
    let points: Vec<(f64, f64)> = s
        .long_context
        .iter()
        .filter(|l| pf.levels.contains(&l.label()))
        .flat_map(|l| of_level(t, l))
        .filter(|r| r.completed)
        .map(|r| {
            let ttft = (r.first_write_unix_us().unwrap() - r.received_unix_us) as f64 / 1e6;
            (r.prompt_tokens as f64, ttft)
        })
        .collect();
    // The lengths' input tokens as the finding fitted them.
    let lengths: Vec<f64> = s
        .long_context
        .iter()
        .filter(|l| pf.levels.contains(&l.label()))
        .filter_map(|l| l.stats.as_ref()?.scalars.mean_input_tokens)
        .collect();
    check_prefill(shape, pf, &points, &lengths, kept_schedule, judged);
    check_decode_across(shape, s, t, judged);
}

/// The prefill finding against the server's record (`points`: each request's prompt tokens and
/// its read-to-first-frame seconds; `lengths`: the input tokens of the lengths the finding
/// fitted), and the record against the configured speed.
fn check_prefill(
    shape: &Shape,
    pf: &Finding,
    points: &[(f64, f64)],
    lengths: &[f64],
    kept_schedule: bool,
    judged: &mut Judged,
) {
    let server = 1.0 / slope(points);
    let Some(&speed) = pf.values.get("tokens_per_s") else {
        // No speed fitted (servetop's TTFT did not grow with input): only where the server's
        // record did not grow either, or the finding says servetop's timing was disturbed.
        assert!(
            server <= 0.0 || client_doubted(pf),
            "no prefill speed fitted, but the server's record shows {server:.0} tok/s and the finding does not say servetop's timing was disturbed: {} {:?}",
            pf.text,
            pf.caveats
        );
        assert!(pf.strength >= Strength::Thin, "{pf:?}");
        judged.add("prefill: none fitted");
        return;
    };
    // The fit is servetop's TTFT at each length; it differs from the record's only by what
    // lies between the server's stamps and servetop's (its send to the server's read of the
    // prompt, the server's write of the first frame to its arrival): on a quiet machine
    // 0.3-0.8 ms a request, on a busy one a preemption of a few ms on either side (seen: 2.4
    // and 4.4 ms with two spinning processes beside the test, and a fit 3.4 % off in CI, one
    // request a length). servetop holds its readings to TIMER_LAG_BOUND_MS (later than that
    // at the p99 and it says its timing may have been the limit), so the fit is held to the
    // record's slope within 3 % plus what that much at each length can move it, and, over the
    // draw, most shapes to 3 % alone (counted as "prefill: within 3 %"). Or the finding says
    // why not to trust it: servetop's own timing was disturbed at its lengths.
    let bound_s = servetop::summary::findings::TIMER_LAG_BOUND_MS / 1e3;
    let mean = lengths.iter().sum::<f64>() / lengths.len() as f64;
    let spread: f64 = lengths.iter().map(|x| (x - mean).abs()).sum();
    let sxx: f64 = lengths.iter().map(|x| (x - mean).powi(2)).sum();
    let timing = bound_s * spread / sxx;
    let off = (1.0 / speed - 1.0 / server).abs();
    assert!(
        off <= 0.03 / server + timing || client_doubted(pf),
        "prefill fitted at {speed:.0} tok/s, the server's record {server:.0} (configured {:.0}), {:.0} µs a thousand tokens apart where 3 % and {} ms at each length allow {:.0}, and the finding does not say servetop's timing was disturbed: {} {:?}",
        shape.prefill,
        off * 1e9,
        servetop::summary::findings::TIMER_LAG_BOUND_MS,
        (0.03 / server + timing) * 1e9,
        pf.text,
        pf.caveats
    );
    judged.add("prefill");
    if (speed / server - 1.0).abs() < 0.03 {
        judged.add("prefill: within 3 %");
    }
    // The record against the configured speed checks the simulator, not servetop: a machine
    // that stalls the simulator mid-prefill moves the record's slope either way (seen: 7275
    // tok/s against 11664, and 12019 against 8938, with the test's process stopped 150 ms
    // every 1.5 s), so it is judged, and counted, only where the simulator kept to its
    // schedule over the run.
    if kept_schedule {
        assert!(
            (server / shape.prefill - 1.0).abs() < 0.1,
            "the simulator prefilled at {server:.0} tok/s, configured {:.0}, though it kept to its schedule",
            shape.prefill
        );
        judged.add("prefill: configured");
    }
    if pf.levels.len() < 3 {
        assert!(
            !pf.values.contains_key("r2"),
            "an R² through two points: {pf:?}"
        );
        assert!(
            pf.strength >= Strength::Thin,
            "a fit through two points is thin: {pf:?}"
        );
        judged.add("two-point fit");
    } else {
        assert!(pf.values.contains_key("r2"), "{pf:?}");
    }
}

/// The decode change across lengths against the server's record and the hand's.
fn check_decode_across(shape: &Shape, s: &RunSummary, t: &SimTruth, judged: &mut Judged) {
    // Decode across lengths, by hand.
    let lc = find(s, "long_context_decode").expect("a long_context_decode finding");
    // The lengths it measured (an injected failure can take one).
    let input = |label: &String| {
        s.long_context
            .iter()
            .find(|l| &l.label() == label)
            .unwrap()
            .input_len
    };
    let (short, long) = (input(&lc.levels[0]), input(lc.levels.last().unwrap()));
    let hand =
        (shape.decode_by_hand(long, LC_OUT) / shape.decode_by_hand(short, LC_OUT) - 1.0) * 100.0;
    // What the server did: its frames' times, from the first token to the last.
    let server =
        (server_decode(s, t, lc.levels.last().unwrap()) / server_decode(s, t, &lc.levels[0]) - 1.0)
            * 100.0;
    let got = lc.values["change_pct"];
    let noise = lc.values["noise_pct"];
    // The floor is the run's own estimate; a rule that hid every change would fail the count
    // of shapes judged "decode: change" at the end. Wider than 30 % only where the finding
    // says why not to trust it (servetop's own timing was disturbed at its lengths, the caveat
    // every figure of such a level carries), or where the server's own frames scatter half as
    // much: a machine that stopped the simulator mid-decode (seen: 150 ms in a 1K length's
    // 40 steps, a floor of 70 %) leaves the gap in its record as in servetop's.
    let level = |label: &String| s.long_context.iter().find(|l| &l.label() == label).unwrap();
    let record_noise = DECODE_SPREAD_Z
        * record_se(&of_level(t, level(&lc.levels[0])))
            .hypot(record_se(&of_level(t, level(lc.levels.last().unwrap()))))
        * 100.0;
    assert!(
        noise < 30.0 || client_doubted(lc) || record_noise >= 15.0,
        "a noise floor of {noise:.1} % hides any change (the server's frames give {record_noise:.1} %), and the finding does not say servetop's timing was disturbed: {}",
        lc.text
    );
    if lc.text.contains("no measurable change") {
        // The record's own series may not be monotone (a machine that stalled the simulator
        // through one length's decode slows that length in the record too): how far a longer
        // length decoded faster than the one before it, in the record, is a spread the record
        // itself cannot read a change within.
        let record: Vec<f64> = lc.levels.iter().map(|l| server_decode(s, t, l)).collect();
        let reversal = record
            .windows(2)
            .map(|w| (w[1] / w[0] - 1.0) * 100.0)
            .fold(0.0, f64::max);
        let floor = noise.max(reversal).max(2.0);
        assert!(
            server.abs() < floor + 3.0,
            "the server's decode changed {server:.1} % ({hand:.1} % by hand), but the finding measures none (its floor {noise:.1} %, the record's own reversal {reversal:.1} %): {}",
            lc.text
        );
        judged.add("decode: no change");
    } else {
        assert!(
            (got - server).abs() < 3.0,
            "decode changed {got:.1} %, {server:.1} % by the server's record ({hand:.1} % by hand): {}",
            lc.text
        );
        judged.add("decode: change");
        // Where the server kept to the shape's schedule (its record within a point of the
        // hand's), the finding is the hand's too; a machine that slowed the simulator's steps
        // moves the record, and the record is what servetop is held to above.
        if (server - hand).abs() < 1.0 {
            assert!(
                (got - hand).abs() < 3.0,
                "decode changed {got:.1} %, {hand:.1} % by hand: {}",
                lc.text
            );
            judged.add("decode: hand");
        }
    }
}

/// The server's mean decode tok/s over a long-context length's requests, from its frames'
/// times (first token to last).
fn server_decode(s: &RunSummary, t: &SimTruth, label: &String) -> f64 {
    let l = s.long_context.iter().find(|l| &l.label() == label).unwrap();
    let rates: Vec<f64> = of_level(t, l)
        .iter()
        .filter(|r| r.completed)
        .map(|r| {
            let span =
                (r.last_write_unix_us().unwrap() - r.first_write_unix_us().unwrap()) as f64 / 1e6;
            (r.tokens() - 1) as f64 / span
        })
        .collect();
    rates.iter().sum::<f64>() / rates.len() as f64
}

/// The relative standard error of a length's mean frame gap in the server's record (the
/// gaps' coefficient of variation over the root of their count), as the run's own
/// `noise_pct` reads servetop's chunk gaps.
fn record_se(reqs: &[&SimRequestTrace]) -> f64 {
    let gaps: Vec<f64> = reqs
        .iter()
        .filter(|r| r.completed)
        .flat_map(|r| r.writes.windows(2).map(|w| (w[1].0 - w[0].0) as f64))
        .collect();
    let n = gaps.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mean = gaps.iter().sum::<f64>() / n;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n;
    var.sqrt() / mean / n.sqrt()
}

/// The least-squares slope of `points`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    sxy / sxx
}

/// Failures counted as injected; thin evidence marked.
fn check_failures_and_strength(s: &RunSummary, injected: u64, judged: &mut Judged) {
    // Failures, exactly as injected.
    let f = find(s, "failures").expect("a failures finding");
    assert_eq!(
        f.values["failed"] as u64, injected,
        "failures counted against the simulator's injected: {}",
        f.text
    );
    if injected > 0 {
        judged.add("failures");
    }

    // Thin evidence is marked.
    let few: Vec<String> = s
        .sweep
        .iter()
        .filter(|l| {
            l.stats
                .as_ref()
                .is_some_and(|st| st.scalars.completed > 0 && st.scalars.completed < 10)
        })
        .map(LevelSummary::label)
        .collect();
    // What states a fact (a count, a restart, a skip, an outage) is not weakened by few
    // requests (docs/metrics.md "Findings").
    let facts = [
        "failures",
        "outage",
        "long_context_servers",
        "long_context_skipped",
    ];
    for f in &s.findings {
        if f.levels.iter().any(|l| few.contains(l)) && !facts.contains(&f.id.as_str()) {
            assert!(
                f.strength >= Strength::Thin,
                "{} rests on a level of under 10 requests ({:?}) but is {:?}",
                f.id,
                f.levels,
                f.strength
            );
            judged.add("thin marked");
        }
        if f.strength != Strength::Solid {
            assert!(
                !f.strength_reasons.is_empty(),
                "{} is {:?} with no reason",
                f.id,
                f.strength
            );
        }
    }
}

/// A disturbed level (the shape's outage, taken during the sweep's second level) is measured as one, and every finding
/// resting on it says so; no other level is disturbed.
fn check_disturbed(s: &RunSummary, (down_unix_ms, back_unix_ms): (i64, i64), judged: &mut Judged) {
    // The level the outage came in, by the test's own clock: the one running when the server
    // came back, which was waiting for it. That is the sweep's second, unless its last requests
    // were cut when the server went away and it ended during the outage: the next level then
    // started and found the server gone. Else the one running when it went away, else the next
    // to start.
    let running_at = |t: i64| {
        s.levels().find(|l| {
            l.started_at_unix_ms.is_some_and(|a| a <= t)
                && l.finished_at_unix_ms.is_some_and(|b| t < b)
        })
    };
    let running = running_at(back_unix_ms).or_else(|| running_at(down_unix_ms));
    let next = s
        .levels()
        .filter(|l| l.started_at_unix_ms.is_some_and(|a| a >= down_unix_ms))
        .min_by_key(|l| l.started_at_unix_ms);
    let hit_level = running
        .or(next)
        .unwrap_or_else(|| panic!("no level ran when the server went away"));
    let hit = hit_level.label();
    let outage_of = |l: &LevelSummary| l.stats.as_ref().map_or(0.0, |st| st.scalars.outage_s);
    if outage_of(hit_level) == 0.0 {
        // Its requests all ended as the server went away (streams cut, or refused with an HTTP
        // status while it shut down) and none of them tried to connect while it was gone: the
        // level saw failures, not an outage. Then it must count them, and no level may claim
        // an outage it did not see.
        let failed: u64 = hit_level
            .stats
            .as_ref()
            .map_or(0, |st| st.scalars.failures.values().map(|f| f.count).sum());
        assert!(
            failed > 0,
            "{hit} lost its server for over a second, but shows neither an outage nor a failure"
        );
        for l in s.levels() {
            assert!(
                outage_of(l) == 0.0,
                "{} has an outage it did not see",
                l.label()
            );
        }
        assert!(find(s, "outage").is_none(), "an outage no level saw");
        judged.add("outage seen as failures");
        return;
    }
    for l in s.levels() {
        let out = l.stats.as_ref().map_or(0.0, |st| st.scalars.outage_s);
        if l.label() == hit {
            assert!(
                out > 0.5,
                "{hit} lost its server for over a second, but outage_s is {out}"
            );
        } else {
            assert!(out == 0.0, "{} has outage_s {out} but no outage", l.label());
        }
    }
    let o = find(s, "outage").expect("an outage finding");
    assert_eq!(o.levels, std::slice::from_ref(&hit), "{o:?}");
    judged.add("outage named");
    for f in &s.findings {
        if f.levels.contains(&hit) {
            judged.add("disturbed marked");
            assert_eq!(
                f.strength,
                Strength::Disturbed,
                "{} rests on {hit}: {f:?}",
                f.id
            );
            assert!(
                f.caveats
                    .iter()
                    .any(|c| c.starts_with(&format!("{hit} was disturbed"))),
                "{} rests on {hit} without its caveat: {f:?}",
                f.id
            );
            // Only what is about the outage itself rests on it: no curve takes it as a point.
            assert!(
                ["outage", "failures"].contains(&f.id.as_str()),
                "{} compares the disturbed {hit} as if it were clean: {f:?}",
                f.id
            );
        } else {
            assert!(
                f.strength != Strength::Disturbed,
                "{} is disturbed: {f:?}",
                f.id
            );
        }
    }
}

/// Takes the shape's simulator away during the sweep's second level (level 1) for its outage, then serves
/// again on the same address; the handle returned is the one serving at the end, with when
/// (Unix ms) the server went away and came back.
async fn outage(h: sim::SimHandle, shape: &Shape) -> (sim::SimHandle, (i64, i64)) {
    let t = std::time::Instant::now();
    let under_way = |h: &sim::SimHandle| {
        h.log
            .lock()
            .unwrap()
            .traces
            .iter()
            .filter(|r| {
                r.request_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with("servetop-1-"))
            })
            .count()
            >= 2
    };
    while !under_way(&h) {
        assert!(
            t.elapsed().as_secs() < 120,
            "seed {}: the second level never began",
            shape.seed
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let addr = h.addr;
    let down = servetop::telemetry::now_unix_ms();
    drop(h);
    tokio::time::sleep(std::time::Duration::from_secs_f64(shape.outage_s)).await;
    let back = sim::start(shape.sim(), addr).await.unwrap();
    (back, (down, servetop::telemetry::now_unix_ms()))
}

/// Runs one shape and checks it; the check's panic message names the seed and the shape. A
/// run whose simulator the machine starved is not judged: the reason comes back instead.
async fn one(shape: Shape) -> Result<Judged, String> {
    let h = sim::start(shape.sim(), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .unwrap();
    let began = std::time::Instant::now();
    if shape.outage_s > 0.0 {
        // The simulator's record is cut by the outage: only what the outage is about is
        // checked.
        let run = tokio::spawn(sim_run::finished(shape.plan(&h.url())));
        let (back, window) = outage(h, &shape).await;
        let session = run.await.unwrap();
        back.stop();
        let mut judged = Judged::default();
        judged.add("outage shapes");
        let s = &session.summary;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_disturbed(s, window, &mut judged);
        }));
        return Ok(report(&shape, s, outcome, judged));
    }
    let session: Session = sim_run::finished(shape.plan(&h.url())).await;
    let truth = sim_truth::of(&h);
    let run_s = began.elapsed().as_secs_f64();
    if let Some(why) = sim_truth::starved(&truth, run_s) {
        h.stop();
        return Err(format!("seed {}: {why}", shape.seed));
    }
    let kept_schedule = truth.schedule_slip_ms < KEPT_SLIP_SHARE * run_s * 1e3;
    eprintln!(
        "seed {}: the simulator slipped {:.0} ms behind its schedule over {run_s:.1} s",
        shape.seed, truth.schedule_slip_ms
    );
    let injected = h.log.lock().unwrap().injected.values().sum::<u64>();
    h.stop();
    let mut judged = Judged::default();
    if kept_schedule {
        judged.add("kept schedule");
    }
    let s = &session.summary;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        check(&shape, s, &truth, injected, kept_schedule, &mut judged);
    }));
    Ok(report(&shape, s, outcome, judged))
}

/// The shape's judgements, or its failure with its seed, its shape and its findings.
fn report(
    shape: &Shape,
    s: &RunSummary,
    outcome: std::thread::Result<()>,
    judged: Judged,
) -> Judged {
    if let Err(e) = outcome {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_default();
        panic!(
            "seed {} (SERVETOP_SHAPES={} reruns it): {msg}\nshape: {shape:?}\nfindings:\n{}",
            shape.seed,
            shape.seed,
            servetop::export::markdown::findings_list(s)
        );
    }
    judged
}

#[test]
fn every_finding_holds_on_random_simulator_shapes() {
    let seeds: Vec<u64> = match std::env::var("SERVETOP_SHAPES") {
        Ok(v) => v.split(',').map(|s| s.trim().parse().unwrap()).collect(),
        Err(_) => (1..=SHAPES).collect(),
    };
    let began = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut total = Judged::default();
    // A shape whose run the machine starved is run again, up to [`TRIES`] times in all.
    let mut pending: Vec<(u64, u32)> = seeds.iter().map(|&s| (s, 1)).collect();
    while !pending.is_empty() {
        let chunk: Vec<(u64, u32)> = pending.drain(..pending.len().min(AT_ONCE)).collect();
        let runs: Vec<_> = chunk
            .iter()
            .map(|&(seed, _)| rt.spawn(one(Shape::draw(seed))))
            .collect();
        for (r, (seed, attempt)) in runs.into_iter().zip(chunk) {
            match rt.block_on(r) {
                Ok(Ok(j)) => {
                    for (k, n) in j.counts {
                        *total.counts.entry(k).or_default() += n;
                    }
                }
                Ok(Err(starved)) if attempt < TRIES => {
                    eprintln!("run {attempt} of {TRIES}: {starved}; running it again");
                    pending.push((seed, attempt + 1));
                }
                Ok(Err(starved)) => {
                    // Not judged; the counts below say whether enough shapes were.
                    eprintln!("SKIPPED: {starved}, in each of {TRIES} runs");
                    total.add("starved");
                }
                Err(e) => std::panic::resume_unwind(e.into_panic()),
            }
        }
    }
    eprintln!(
        "{} shapes in {:.0} s; judged: {:?}",
        seeds.len(),
        began.elapsed().as_secs_f64(),
        total.counts
    );
    // Over the whole draw, each check judged enough shapes to mean something.
    if seeds.len() as u64 >= SHAPES {
        for (what, least) in [
            ("queue named", 10),
            ("queue certain", 3),
            ("cap named", 5),
            ("no queue named", 5),
            ("knee named", 3),
            ("no knee", 5),
            ("saturation level", 10),
            ("prefill", 35),
            ("prefill: within 3 %", 30),
            ("two-point fit", 5),
            ("decode: change", 10),
            ("failures", 5),
            ("thin marked", 10),
            ("outage shapes", 5),
            ("disturbed marked", 10),
            ("outage named", 5),
            ("structured step", 6),
            ("confound flagged", 2),
        ] {
            let n = total.counts.get(what).copied().unwrap_or(0);
            assert!(
                n >= least,
                "only {n} shapes judged '{what}' (at least {least}): {:?}",
                total.counts
            );
        }
        // The simulator against its own configuration (its prefill speed, its decode by hand) is
        // judged only where it kept to its schedule: on a machine that starved it in most shapes
        // (a host that stops the virtual machine for hundreds of ms at a time) these counts say
        // so instead of failing; everything held to the simulator's record is counted above.
        let kept = total.counts.get("kept schedule").copied().unwrap_or(0);
        if kept >= KEPT_LEAST {
            for (what, least) in [("prefill: configured", 10), ("decode: hand", 5)] {
                let n = total.counts.get(what).copied().unwrap_or(0);
                assert!(
                    n >= least,
                    "only {n} shapes judged '{what}' (at least {least}) of the {kept} whose simulator kept to its schedule: {:?}",
                    total.counts
                );
            }
        } else {
            eprintln!(
                "SKIPPED: the simulator kept to its schedule in only {kept} shapes (at least {KEPT_LEAST} needed to count its prefill against the configured speed and its decode against the hand's): the machine starved it"
            );
        }
    }
}
