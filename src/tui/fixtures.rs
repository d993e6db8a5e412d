//! Synthetic dashboard states for snapshot tests and the render benchmark. Nothing here is a
//! measurement: each request's timings come from a fixed formula of the load it met, so pictures
//! are reproducible. The states could happen all the same: requests go out as the runner sends
//! them (closed-loop workers one request at a time, Poisson arrivals held by the in-flight cap),
//! and reach the dashboard as a run's events would, in time order.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::client::{Backend, Engine, ServerInfo};
use crate::config::RunConfig;
use crate::event::{Event, RunState};
use crate::metrics::{CountSource, FailureKind, Outcome, RequestRecord, TokenChunk};
use crate::run::session::Session;
use crate::summary::RunSummary;
use crate::workload::RequestCount;
use crate::workload::prompt::PromptMethod;

use super::app::App;

fn config(concurrency: Vec<u64>) -> RunConfig {
    let mut c = crate::config::RunConfig::demo();
    c.base_url = "http://127.0.0.1:8000".into();
    c.concurrency = concurrency;
    c.long_context_output_len = 128;
    c.requests_per_level = RequestCount::PerConcurrency {
        factor: 1.0,
        min: 4,
    };
    c.out_dir = "runs/synthetic".into();
    c
}

/// One synthetic request sent at `send_at_us` while `c` requests are in flight: TTFT and step
/// time grow with `c` and TTFT with the uncached prompt, 3-5 tokens per chunk after the first.
fn record(
    level: u32,
    index: u32,
    c: u32,
    input: u64,
    output: u64,
    send_at_us: u64,
) -> RequestRecord {
    let ttft = 150_000 + u64::from(c) * 40_000 + input * 150 + u64::from(index % 3) * 10_000;
    let step = 55_000 + u64::from(c) * 6_000;
    let mut chunks = vec![TokenChunk::new(ttft, 1)];
    let mut left = output - 1;
    let mut t = ttft;
    let mut i = 0u64;
    while left > 0 {
        let n = [3u64, 5, 4][(i % 3) as usize].min(left);
        t += step;
        chunks.push(TokenChunk::new(t, n as u32));
        left -= n;
        i += 1;
    }
    RequestRecord {
        level,
        index,
        warmup: false,
        sched_at_us: send_at_us,
        send_at_us,
        end_at_us: send_at_us + t + 200,
        outcome: Outcome::Ok,
        planned_input_tokens: input,
        input_tokens: input,
        input_source: CountSource::Usage,
        output_tokens: output,
        output_source: CountSource::Usage,
        chunk_source: CountSource::PerChunkUsage,
        ttft_us: Some(ttft),
        e2e_us: Some(t),
        chunks,
        retries: 0,
        slot: None,
        cached_tokens: None,
        turn: None,
    }
}

/// The server turns the request away at once (a 503 after 4 ms, no tokens).
fn refused(mut r: RequestRecord) -> RequestRecord {
    r.outcome = Outcome::Failed {
        kind: FailureKind::HttpStatus,
        message: "HTTP 503: server overloaded (synthetic)".into(),
        http_status: Some(503),
    };
    r.end_at_us = r.send_at_us + 4_000;
    r.output_tokens = 0;
    r.output_source = CountSource::Planned;
    r.chunk_source = CountSource::Planned;
    r.ttft_us = None;
    r.e2e_us = None;
    r.chunks = Vec::new();
    r
}

/// The time a worker takes between one request's end and its next send.
const TURNAROUND_US: u64 = 300;

/// How a level's requests go out, the way the runner sends them.
#[derive(Clone, Copy)]
enum Sending {
    /// `workers` closed-loop workers, each sending its next request as soon as its last one ended.
    Closed { workers: u32 },
    /// Poisson arrivals at `rate`/s (exponential gaps from a fixed seed); a request goes out when
    /// due on a free slot or, with all `cap` slots busy, when the first of them frees (the
    /// client queue).
    Open { rate: f64, cap: u32 },
}

/// `n` requests of level `level`, sent as `sending` says, each timed by [`record`] for the number
/// in flight when it went out. Request k goes out no earlier than request k - 1, on the slot that
/// frees first; the 7th, 14th, … are refused at once when `refusals` is set.
fn plan(
    level: u32,
    n: u32,
    input: u64,
    output: u64,
    sending: Sending,
    refusals: bool,
) -> Vec<RequestRecord> {
    let slots = match sending {
        Sending::Closed { workers } => workers.max(1),
        Sending::Open { cap, .. } => cap.max(1),
    };
    // Closed-loop workers start 10 µs apart (all of them before a refusal could end).
    let mut free: Vec<u64> = match sending {
        Sending::Closed { .. } => (0..u64::from(slots)).map(|s| s * 10).collect(),
        Sending::Open { .. } => vec![0; slots as usize],
    };
    let mut out = Vec::with_capacity(n as usize);
    let mut last_send = 0;
    let mut due = 0.0f64;
    for k in 0..n {
        let slot = (0..free.len()).min_by_key(|&s| free[s]).unwrap_or(0);
        let (sched, send) = match sending {
            Sending::Closed { .. } => {
                let t = if k < slots {
                    free[slot]
                } else {
                    free[slot] + TURNAROUND_US
                };
                (t.max(last_send), t.max(last_send))
            }
            Sending::Open { rate, .. } => {
                if k > 0 {
                    due += -unit(level, k).ln() / rate * 1e6;
                }
                let at = due as u64;
                (at, at.max(free[slot]).max(last_send))
            }
        };
        let in_flight = free.iter().filter(|&&f| f > send).count() as u32 + 1;
        let mut r = record(level, k, in_flight, input, output, send);
        r.sched_at_us = sched;
        r.slot = Some(slot as u32);
        if refusals && k % 7 == 6 {
            r = refused(r);
        }
        free[slot] = r.end_at_us;
        last_send = send;
        out.push(r);
    }
    out
}

/// A number in (0, 1], the same for the same `(level, k)` (splitmix64).
fn unit(level: u32, k: u32) -> f64 {
    let mut z = (u64::from(level) << 32 | u64::from(k)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
}

/// Folds `records` into `app` as a run would deliver them: `Sent` when a request goes out, its
/// record when it ends, in time order (an end before a send at the same instant). With `until`,
/// the level is still running at that time: what happened later is not told and the level does
/// not finish.
fn fold_level(app: &mut App, index: u32, records: Vec<RequestRecord>, until: Option<u64>) {
    app.apply(Event::LevelStarted {
        index,
        origin_unix_us: 0,
    });
    let mut events: Vec<(u64, u8, Event)> = Vec::with_capacity(2 * records.len());
    for r in records {
        let slot = r.slot.unwrap_or(0);
        events.push((r.send_at_us, 1, Event::Sent { level: index, slot }));
        events.push((r.end_at_us, 0, Event::Request(Box::new(r))));
    }
    events.sort_by_key(|(t, order, _)| (*t, *order));
    let cut = until.unwrap_or(u64::MAX);
    for (_, _, ev) in events.into_iter().filter(|(t, _, _)| *t <= cut) {
        app.apply(ev);
    }
    if until.is_none() {
        app.apply(Event::LevelFinished {
            index,
            interrupted: false,
        });
    }
    app.end_batch();
}

/// The end time of the `k`th request to finish (from 1), the moment a level is shown part-way.
fn kth_end(records: &[RequestRecord], k: usize) -> u64 {
    let mut ends: Vec<u64> = records.iter().map(|r| r.end_at_us).collect();
    ends.sort_unstable();
    ends[k.clamp(1, ends.len()) - 1]
}

/// A concurrency level of `n` requests on `c` closed-loop workers, refusals from C=16 up.
fn sweep_level(app: &mut App, index: u32, c: u32, n: u32, input: u64, output: u64) {
    let recs = plan(
        index,
        n,
        input,
        output,
        Sending::Closed { workers: c },
        c >= 16,
    );
    fold_level(app, index, recs, None);
}
fn started(concurrency: Vec<u64>) -> App {
    started_with(config(concurrency))
}

fn started_with(cfg: RunConfig) -> App {
    let levels = cfg.levels();
    let session = Session::new(RunSummary::new(cfg, None));
    let mut app = App::new(session, Arc::new(AtomicU64::new(0)), true);
    app.session.summary.host = "synthetic-host".into();
    app.session.summary.started_at = "2026-11-29T12:00:00Z".into();
    app.apply(Event::RunStarted {
        server: ServerInfo {
            base_url: "http://127.0.0.1:8000".into(),
            engine: Engine::Sim,
            engine_version: None,
            model: "sim/hybrid-27b-mtp".into(),
            models: vec!["sim/hybrid-27b-mtp".into()],
            context_limit: Some(32768),
            context_limit_source: Some("/v1/models max_model_len".into()),
            simulated: true,
        },
        backend: Backend::Openai,
        prompts: PromptMethod {
            source: CountSource::ServerTokenize,
            offset_tokens: 0,
            description: "lengths counted with the server's /tokenize".into(),
        },
        levels,
    });
    app.now = Duration::from_secs(83);
    app
}

/// A sweep in progress: all but the last level done, the last one part-way (half its requests
/// ended, its workers all busy).
pub fn mid_sweep(concurrency: Vec<u64>) -> App {
    let cs = concurrency.clone();
    let mut app = started(concurrency);
    let last = cs.len() - 1;
    for (i, c) in cs.iter().enumerate() {
        let c = *c as u32;
        let n = c.max(4);
        if i < last {
            sweep_level(&mut app, i as u32, c, n, 1000, 100);
        } else {
            let recs = plan(
                i as u32,
                n,
                1000,
                100,
                Sending::Closed { workers: c },
                c >= 16,
            );
            let until = kth_end(&recs, n as usize / 2);
            fold_level(&mut app, i as u32, recs, Some(until));
        }
    }
    app.live.series = (1..=40)
        .map(|s| (f64::from(s), 200.0 + f64::from(s % 7) * 15.0))
        .collect();
    app.live.current = 245.0;
    app
}

/// A finished run: every sweep level, three long-context lengths done and two skipped.
pub fn finished_run() -> App {
    finished_run_with(&[1, 4, 8, 16, 64, 100])
}

/// A finished run over `cs` concurrency levels, with the same long-context ladder.
pub fn finished_run_with(cs: &[u64]) -> App {
    let mut app = started(cs.to_vec());
    for (i, c) in cs.iter().enumerate() {
        let c = *c as u32;
        sweep_level(&mut app, i as u32, c, c.max(4), 1000, 100);
    }
    let base = cs.len() as u32;
    for (k, ctx) in [8_000u64, 16_000, 30_000].iter().enumerate() {
        sweep_level(&mut app, base + k as u32, 1, 1, *ctx, 128);
    }
    for (k, ctx) in [60_000u64, 100_000].iter().enumerate() {
        app.apply(Event::LevelSkipped {
            index: base + 3 + k as u32,
            reason: format!(
                "{ctx} prompt tokens + 128 output tokens = {} exceeds the server's context limit of 32768 tokens (/v1/models max_model_len); raise it with --context-length to at least {} and restart the server",
                ctx + 128,
                ctx + 128
            ),
            raise_flag: Some("--context-length".into()),
        });
    }
    app.apply(Event::Warning(
        "synthetic warning: 2 requests retried on a fresh connection".into(),
    ));
    app.apply(Event::RunFinished {
        state: RunState::Finished,
        error: None,
    });
    app.end_batch();
    app
}

/// A finished run with `gpus` GPUs and engine metrics sampled once a second for 60 s
/// (`gpus == 0`: NVML reported no GPU, with its reason).
pub fn with_telemetry(gpus: u32) -> App {
    use crate::telemetry::{GpuReading, GpuSample, GpuSource, ServerSample, TelemetryRecord};
    let mut app = finished_run();
    app.session.latest_gpu = None;
    const GIB: u64 = 1024 * 1024 * 1024;
    // The sweep's six levels, 10 s each. The engine runs at most 48 requests at once and queues
    // the rest; each running stream decodes about 4 tokens per step of 55 + 6 ms per running
    // request, as in [`record`].
    let levels = [1u64, 4, 8, 16, 64, 100];
    for t in 0..60u64 {
        app.now = Duration::from_secs(t);
        let c = levels[(t / 10) as usize];
        if t % 10 == 0 {
            app.telemetry.level_marks.push((t as f64, format!("C={c}")));
        }
        let running = c.min(48) as f64;
        let queued = c.saturating_sub(48) as f64;
        let step_s = 0.055 + 0.006 * running;
        let load = (running / 32.0).min(1.0);
        if gpus > 0 {
            let readings = (0..gpus)
                .map(|i| GpuReading {
                    index: i,
                    name: "NVIDIA H200".into(),
                    uuid: Some(format!("GPU-synthetic-{i}")),
                    mem_used_bytes: Some((60 + u64::from(i) * 5 + (load * 40.0) as u64) * GIB),
                    mem_total_bytes: Some(141 * GIB),
                    util_gpu_pct: Some((30.0 + load * 69.0).round() - f64::from(i)),
                    util_mem_pct: Some((10.0 + load * 50.0).round()),
                    power_w: Some(150.0 + load * 500.0),
                    power_limit_w: Some(700.0),
                    temp_c: Some(40.0 + load * 30.0),
                    sm_clock_mhz: Some(1980.0),
                })
                .collect();
            app.apply(Event::Telemetry(TelemetryRecord::Gpu(GpuSample {
                at_unix_ms: t as i64 * 1000,
                source: GpuSource::Nvml,
                gpus: readings,
            })));
        }
        app.apply(Event::Telemetry(TelemetryRecord::Server(Box::new(
            ServerSample {
                at_unix_ms: t as i64 * 1000,
                flavor: "sglang".into(),
                running: Some(running),
                queued: Some(queued),
                kv_usage: Some(running / 48.0 * 0.8),
                gen_throughput: Some((running * 4.0 / step_s).round()),
                accept_length_gauge: Some(3.9),
                ..ServerSample::default()
            },
        ))));
    }
    if gpus == 0 {
        app.apply(Event::Telemetry(TelemetryRecord::GpuUnavailable {
            at_unix_ms: 0,
            reason: "the NVIDIA driver library is not installed (libnvidia-ml.so.1: cannot open shared object file: No such file or directory)".into(),
        }));
    }
    app.now = Duration::from_secs(60);
    app.end_batch();
    app
}

/// One request-rate level of `n` requests at `rate`/s under the cap of 16 in flight; with
/// `shown_after`, still running when that many of them have ended.
fn rate_level(app: &mut App, index: u32, rate: f64, n: u32, shown_after: Option<usize>) {
    let recs = plan(index, n, 1000, 100, Sending::Open { rate, cap: 16 }, false);
    let until = shown_after.map(|k| kth_end(&recs, k));
    fold_level(app, index, recs, until);
}

fn rate_config(concurrency: Vec<u64>, rates: Vec<f64>) -> RunConfig {
    let mut c = config(concurrency);
    c.long_context = Vec::new();
    c.open_loop = crate::workload::OpenLoop {
        request_rates: rates,
        burstiness: 1.0,
        ramp_up_s: 0.0,
        max_concurrency: Some(16),
    };
    // Three seconds' worth per rate level, at least 4.
    c.requests_per_level = RequestCount::PerConcurrency {
        factor: 3.0,
        min: 4,
    };
    c
}

/// The planned requests of `rate` under [`rate_config`].
fn rate_requests(rate: f64) -> u32 {
    RequestCount::PerConcurrency {
        factor: 3.0,
        min: 4,
    }
    .at_rate(rate)
}

/// A concurrency sweep, then a rate sweep part-way: 1, 2 and 4 req/s kept up; at 8 req/s (20 of
/// its 24 requests ended) the cap of 16 in flight has held requests back in the client queue.
pub fn mid_rates() -> App {
    let mut app = started_with(rate_config(vec![1, 4], vec![1.0, 2.0, 4.0, 8.0]));
    sweep_level(&mut app, 0, 1, 4, 1000, 100);
    sweep_level(&mut app, 1, 4, 4, 1000, 100);
    for (k, rate) in [1.0, 2.0, 4.0].iter().enumerate() {
        rate_level(&mut app, 2 + k as u32, *rate, rate_requests(*rate), None);
    }
    rate_level(&mut app, 5, 8.0, rate_requests(8.0), Some(20));
    app.live.current = 180.0;
    app
}

/// An SLO search part-way: the throughput probe done, three rate probes judged (16 fails, 8
/// passes, 12 fails), the fourth (10 req/s) running.
pub fn mid_search() -> App {
    use crate::workload::search::{
        RateProbe, SearchConfig, SearchStatus, SearchSummary, ThroughputProbe,
    };
    use crate::workload::{Arrival, LevelKind, LevelSpec};
    let mut cfg = rate_config(Vec::new(), Vec::new());
    let slo = crate::metrics::Slo {
        tpot_ms: Some(40.0),
        ttft_ms: Some(2500.0),
        ..crate::metrics::Slo::default()
    };
    let search = SearchConfig {
        probe_seconds: 3.0,
        min_requests: 4,
        probe_concurrency: 8,
        ..SearchConfig::rate()
    };
    cfg.slo = Some(slo);
    cfg.search = Some(search.clone());
    let mut app = started_with(cfg);
    let mut s = SearchSummary::new(&search, slo);
    let spec = LevelSpec {
        index: 0,
        kind: LevelKind::Sweep,
        concurrency: 8,
        input_tokens: 1000,
        output_tokens: 100,
        requests: 32,
        arrival: None,
        shared_prefix_tokens: 0,
        conversation: None,
    };
    s.throughput_probe = Some(ThroughputProbe {
        level: 0,
        concurrency: 8,
        request_throughput: None,
    });
    app.apply(Event::LevelAdded(spec));
    app.apply(Event::Search(Box::new(s.clone())));
    sweep_level(&mut app, 0, 8, 32, 1000, 100);
    if let Some(t) = s.throughput_probe.as_mut() {
        t.request_throughput = Some(16.0);
    }
    s.status = SearchStatus::Searching;
    for (k, rate) in [16.0, 8.0, 12.0, 10.0].into_iter().enumerate() {
        let index = 1 + k as u32;
        let requests = rate_requests(rate);
        s.probes.push(RateProbe {
            level: index,
            step: k as u32 + 1,
            request_rate: rate,
            requests,
            achieved_request_rate: None,
            request_throughput: None,
            goodput: None,
            check: None,
            interrupted: false,
        });
        app.apply(Event::LevelAdded(LevelSpec {
            index,
            kind: LevelKind::Rate,
            concurrency: 16,
            input_tokens: 1000,
            output_tokens: 100,
            requests,
            arrival: Some(Arrival {
                request_rate: rate,
                burstiness: 1.0,
                ramp_up_s: 0.0,
                max_concurrency: Some(16),
            }),
            shared_prefix_tokens: 0,
            conversation: None,
        }));
        app.apply(Event::Search(Box::new(s.clone())));
        let last = k == 3;
        rate_level(&mut app, index, rate, requests, last.then_some(20));
        if !last {
            let l = app.session.summary.level(index).cloned();
            let p = &mut s.probes[k];
            p.check = l.as_ref().and_then(|l| l.slo.clone());
            let sc = l.and_then(|l| l.stats).map(|st| st.scalars);
            p.achieved_request_rate = sc.as_ref().and_then(|sc| sc.achieved_request_rate);
            p.request_throughput = sc.as_ref().map(|sc| sc.request_throughput);
            p.goodput = sc.and_then(|sc| sc.goodput);
            s.settle(k);
            app.apply(Event::Search(Box::new(s.clone())));
        }
    }
    app.live.current = 120.0;
    app
}

/// A finished run of rate levels only (no concurrency sweep): the charts follow the rates.
pub fn finished_rates_only() -> App {
    let rates = vec![0.5, 1.0, 2.0, 4.0, 8.0];
    let mut app = started_with(rate_config(Vec::new(), rates.clone()));
    for (k, rate) in rates.iter().enumerate() {
        rate_level(&mut app, k as u32, *rate, rate_requests(*rate), None);
    }
    app.apply(Event::RunFinished {
        state: RunState::Finished,
        error: None,
    });
    app.end_batch();
    app
}

/// A finished multi-turn level only: 6 conversations of 4 turns, a 192-token shared system
/// prompt; later turns mostly served from the prefix cache.
pub fn finished_chats() -> App {
    let mut c = config(vec![]);
    c.long_context = Vec::new();
    c.shared_prefix_len = 192;
    c.multi_turn = Some(crate::config::MultiTurn {
        turns: 4,
        conversations: 6,
        concurrency: 3,
        followup_len: 64,
    });
    let mut app = started_with(c);
    // Three workers, each holding one conversation at a time and sending its next turn when the
    // reply to the last one has ended; conversation k goes to worker k % 3.
    let mut clock = [0u64, 1_000, 2_000];
    let mut recs = Vec::new();
    for conv in 0..6u32 {
        let w = (conv % 3) as usize;
        for turn in 1..=4u32 {
            let i = conv * 4 + turn - 1;
            let input = 1000 + u64::from(turn - 1) * 170;
            let cached = match (turn, conv) {
                (1, 0) => 0,
                (1, _) => 192,
                _ => input - 90,
            };
            let mut r = record(0, i, 3, input - cached, 100, clock[w]);
            r.input_tokens = input;
            r.planned_input_tokens = input;
            r.cached_tokens = Some(cached);
            r.turn = Some(turn);
            r.slot = Some(w as u32);
            clock[w] = r.end_at_us + TURNAROUND_US;
            recs.push(r);
        }
    }
    fold_level(&mut app, 0, recs, None);
    app.apply(Event::RunFinished {
        state: RunState::Finished,
        error: None,
    });
    app.end_batch();
    app
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every finished level of every fixture could have happened: never more in flight than its
    /// workers (closed loop) or its cap (open loop), and a closed loop with at least as many
    /// requests as workers has them all busy at once.
    #[test]
    fn fixtures_respect_caps_and_closed_loop_timing() {
        let apps = vec![
            mid_sweep(vec![1, 4, 8, 16, 64, 100]),
            finished_run(),
            mid_rates(),
            mid_search(),
            finished_rates_only(),
            finished_chats(),
        ];
        let mut checked = 0;
        for app in &apps {
            for l in app.session.summary.levels() {
                let Some(st) = &l.stats else { continue };
                let peak = st.scalars.max_concurrent_requests;
                if let Some(a) = &l.arrival {
                    let cap = u64::from(a.max_concurrency.unwrap());
                    assert!(peak <= cap, "{}: {peak}", l.label());
                } else {
                    assert!(peak <= u64::from(l.concurrency), "{}: {peak}", l.label());
                    if l.requests >= l.concurrency {
                        assert_eq!(peak, u64::from(l.concurrency), "{}", l.label());
                    }
                }
                checked += 1;
            }
        }
        assert!(checked >= 25, "{checked} levels checked");
    }

    /// The plan sends as the runner does: one request a slot at a time, never before it is due,
    /// in index order; closed-loop workers send again one turnaround after a reply ends.
    #[test]
    fn plan_keeps_one_request_a_slot_and_the_schedule() {
        for sending in [
            Sending::Closed { workers: 1 },
            Sending::Closed { workers: 8 },
            Sending::Open { rate: 1.0, cap: 16 },
            Sending::Open { rate: 8.0, cap: 16 },
        ] {
            let recs = plan(0, 40, 1000, 100, sending, true);
            for w in recs.windows(2) {
                assert!(w[1].send_at_us >= w[0].send_at_us);
            }
            for r in &recs {
                assert!(r.send_at_us >= r.sched_at_us);
                let same_slot_before = recs
                    .iter()
                    .filter(|o| o.slot == r.slot && o.index < r.index)
                    .map(|o| o.end_at_us)
                    .max();
                if let Some(end) = same_slot_before {
                    assert!(r.send_at_us >= end, "request {} overlaps its slot", r.index);
                }
            }
        }
        // One worker: each request goes out 300 µs after the last one ended.
        let one = plan(0, 5, 1000, 100, Sending::Closed { workers: 1 }, false);
        for w in one.windows(2) {
            assert_eq!(w[1].send_at_us, w[0].end_at_us + TURNAROUND_US);
        }
        // 1 req/s under a cap of 16 keeps the schedule; 8 req/s of 4.7 s requests (about 37 in
        // flight wanted) is held back by the cap.
        let kept = plan(
            0,
            20,
            1000,
            100,
            Sending::Open { rate: 1.0, cap: 16 },
            false,
        );
        assert!(kept.iter().all(|r| r.send_at_us == r.sched_at_us));
        let held = plan(
            0,
            40,
            1000,
            100,
            Sending::Open { rate: 8.0, cap: 16 },
            false,
        );
        assert!(
            held.iter()
                .any(|r| r.send_at_us > r.sched_at_us + 1_000_000)
        );
    }
}
