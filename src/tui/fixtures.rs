//! Synthetic dashboard states for snapshot tests and the render benchmark. Nothing here is a
//! measurement: the records are generated from a fixed formula so pictures are reproducible.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::client::{Backend, Engine, ServerInfo};
use crate::config::RunConfig;
use crate::event::{Event, RunState};
use crate::metrics::{CountSource, FailureKind, Outcome, RequestRecord, TokenChunk};
use crate::session::Session;
use crate::summary::RunSummary;
use crate::workload::RequestCount;
use crate::workload::prompt::PromptMethod;

use super::app::App;

fn config(concurrency: Vec<u64>) -> RunConfig {
    let mut c = crate::commands::demo_config();
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

/// One synthetic request: TTFT and step time grow with concurrency, 4 tokens per chunk.
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

fn run_level(app: &mut App, index: u32, c: u32, n: u32, input: u64, output: u64, finish: bool) {
    app.apply(Event::LevelStarted {
        index,
        origin_unix_us: 0,
    });
    for k in 0..n {
        app.apply(Event::Sent {
            level: index,
            slot: k % c.max(1),
        });
        let wave = u64::from(k / c.max(1));
        let mut r = record(
            index,
            k,
            c,
            input,
            output,
            wave * 8_000_000 + u64::from(k % c.max(1)) * 1_000,
        );
        if k % 7 == 6 && c >= 16 {
            r.outcome = Outcome::Failed {
                kind: FailureKind::HttpStatus,
                message: "HTTP 503: server overloaded (synthetic)".into(),
                http_status: Some(503),
            };
        }
        app.apply(Event::Request(Box::new(r)));
    }
    if finish {
        app.apply(Event::LevelFinished {
            index,
            interrupted: false,
        });
    } else {
        for k in 0..c.min(3) {
            app.apply(Event::Sent {
                level: index,
                slot: k,
            });
        }
    }
    app.end_batch();
}

fn started(concurrency: Vec<u64>) -> App {
    started_with(config(concurrency))
}

fn started_with(cfg: RunConfig) -> App {
    let levels = cfg.levels();
    let session = Session::new(RunSummary::new(cfg, None), None);
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

/// A sweep in progress: all but the last level done, the last one part-way.
pub fn mid_sweep(concurrency: Vec<u64>) -> App {
    let cs = concurrency.clone();
    let mut app = started(concurrency);
    let last = cs.len() - 1;
    for (i, c) in cs.iter().enumerate() {
        let c = *c as u32;
        let n = c.max(4);
        if i < last {
            run_level(&mut app, i as u32, c, n, 1000, 100, true);
        } else {
            run_level(&mut app, i as u32, c, n / 2, 1000, 100, false);
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
        run_level(&mut app, i as u32, c, c.max(4), 1000, 100, true);
    }
    let base = cs.len() as u32;
    for (k, ctx) in [8_000u64, 16_000, 30_000].iter().enumerate() {
        run_level(&mut app, base + k as u32, 1, 1, *ctx, 128, true);
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
    for t in 0..60u64 {
        app.now = Duration::from_secs(t);
        if t % 10 == 0 {
            app.telemetry
                .level_marks
                .push((t as f64, format!("C={}", 1u64 << (t / 10))));
        }
        let load = ((t % 20) as f64 / 20.0).min(1.0);
        if gpus > 0 {
            let readings = (0..gpus)
                .map(|i| GpuReading {
                    index: i,
                    name: "NVIDIA H200".into(),
                    uuid: Some(format!("GPU-synthetic-{i}")),
                    mem_used_bytes: Some((60 + u64::from(i) * 5 + (load * 40.0) as u64) * GIB),
                    mem_total_bytes: Some(141 * GIB),
                    util_gpu_pct: Some((load * 100.0).round() - f64::from(i)),
                    util_mem_pct: Some((load * 60.0).round()),
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
                running: Some((load * 64.0).round()),
                queued: Some(((load - 0.5).max(0.0) * 72.0).round()),
                kv_usage: Some(load * 0.8),
                gen_throughput: Some(load * 500.0),
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

/// One request-rate level: `n` requests at `rate`/s whose client queue grows by `queue_step_us`
/// per request (0: the client kept the schedule), on a pool of `slots` slots.
fn run_rate_level(app: &mut App, index: u32, rate: f64, n: u32, queue_step_us: u64, finish: bool) {
    app.apply(Event::LevelStarted {
        index,
        origin_unix_us: 0,
    });
    let gap_us = (1e6 / rate) as u64;
    // Load grows with the rate: TTFT and steps as at a concurrency of about 2 × rate.
    let c = (rate * 2.0).ceil() as u32;
    for k in 0..n {
        app.apply(Event::Sent {
            level: index,
            slot: k % c.max(1),
        });
        let sched = u64::from(k) * gap_us;
        let queue = u64::from(k) * queue_step_us;
        let mut r = record(index, k, c, 1000, 100, sched + queue);
        r.sched_at_us = sched;
        r.slot = None;
        app.apply(Event::Request(Box::new(r)));
    }
    if finish {
        app.apply(Event::LevelFinished {
            index,
            interrupted: false,
        });
    } else {
        for k in n..n + 3 {
            app.apply(Event::Sent {
                level: index,
                slot: k % c.max(1),
            });
        }
    }
    app.end_batch();
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

/// A concurrency sweep, then a rate sweep part-way: 1, 2 and 4 req/s kept up; at 8 req/s the
/// cap of 16 in flight holds requests back and the client queue grows.
pub fn mid_rates() -> App {
    let mut app = started_with(rate_config(vec![1, 4], vec![1.0, 2.0, 4.0, 8.0]));
    run_level(&mut app, 0, 1, 4, 1000, 100, true);
    run_level(&mut app, 1, 4, 4, 1000, 100, true);
    for (k, rate) in [1.0, 2.0, 4.0].iter().enumerate() {
        run_rate_level(&mut app, 2 + k as u32, *rate, rate_requests(*rate), 0, true);
    }
    run_rate_level(&mut app, 5, 8.0, 14, 45_000, false);
    app.live.current = 180.0;
    app
}

/// An SLO search part-way: the throughput probe done, three rate probes judged (16 fails, 8
/// passes, 12 fails), the fourth (10 req/s) running.
pub fn mid_search() -> App {
    use crate::search::{RateProbe, SearchConfig, SearchStatus, SearchSummary, ThroughputProbe};
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
    run_level(&mut app, 0, 8, 32, 1000, 100, true);
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
        run_rate_level(
            &mut app,
            index,
            rate,
            if last { 20 } else { requests },
            0,
            !last,
        );
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
        let queue = if *rate >= 8.0 { 60_000 } else { 0 };
        run_rate_level(&mut app, k as u32, *rate, rate_requests(*rate), queue, true);
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
    app.apply(Event::LevelStarted {
        index: 0,
        origin_unix_us: 0,
    });
    for conv in 0..6u32 {
        for turn in 1..=4u32 {
            let i = conv * 4 + turn - 1;
            app.apply(Event::Sent {
                level: 0,
                slot: conv % 3,
            });
            let input = 1000 + u64::from(turn - 1) * 170;
            let cached = match (turn, conv) {
                (1, 0) => 0,
                (1, _) => 192,
                _ => input - 90,
            };
            let mut r = record(
                0,
                i,
                3,
                input - cached,
                100,
                u64::from(conv / 3) * 20_000_000 + u64::from(turn) * 4_000_000,
            );
            r.input_tokens = input;
            r.planned_input_tokens = input;
            r.cached_tokens = Some(cached);
            r.turn = Some(turn);
            r.slot = Some(conv % 3);
            app.apply(Event::Request(Box::new(r)));
        }
    }
    app.apply(Event::LevelFinished {
        index: 0,
        interrupted: false,
    });
    app.apply(Event::RunFinished {
        state: RunState::Finished,
        error: None,
    });
    app.end_batch();
    app
}
