//! The wave case: C closed-loop streams paced like an engine's decode steps, so they all end,
//! and the next C start, in the same moment (what a real engine does to a client under a
//! concurrency sweep). Per wave: how long writing the wave took, how long the client's core was
//! saturated meanwhile, and its first tokens' timing error.
//!
//! The core's load comes from this process's CPU clock (`CLOCK_PROCESS_CPUTIME_ID`) sampled
//! every millisecond by a thread of the case's own process (the client is pinned to one core, so
//! the process's CPU is that core's work for servetop).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Case, CaseResult, paced_case, print_case};
use crate::cli::BenchClientArgs;
use crate::metrics::Dist;

/// A 1 ms bin counts as saturated at this share of busy time.
const SATURATED: f64 = 0.9;
/// A wave's window runs from its first request written to this long after its last (its last
/// response heads read).
const AFTER_US: u64 = 5_000;

/// One wave of a wave case.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Wave {
    /// 0 for the level's first C requests, 1 for the next C, ...
    pub wave: u32,
    pub requests: u32,
    /// When its first request was written, ms after the level's origin.
    pub start_ms: f64,
    /// From its first request written to its last.
    pub write_span_ms: f64,
    /// How long the client's core was at least 90 % busy (1 ms bins) from the wave's first
    /// request written to 5 ms after its last.
    pub saturated_ms: f64,
    /// The client's CPU over that window (the wave's writes and every stream's reads), per
    /// request of the wave, µs.
    pub cpu_us_per_request: f64,
    /// The wave's first tokens: client arrival minus the firehose's write, p50 and p99.
    pub ttft_error_p50_ms: Option<f64>,
    pub ttft_error_p99_ms: Option<f64>,
}

/// What the waves are made of: one request's index, its send time (µs after the level's
/// origin) and its first token's timing error (µs), if it matched a write.
pub type Sent = (u32, u64, Option<u64>);

/// Samples this process's CPU time every millisecond until `stop`: (µs since the Unix epoch,
/// CPU µs), one reading per sample.
pub fn sample_cpu(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<(u64, u64)>> {
    std::thread::spawn(move || {
        let mut v = Vec::with_capacity(64 * 1024);
        while !stop.load(Ordering::Relaxed) {
            let cpu = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
                .map_or(0, |t| {
                    t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1000
                });
            v.push((crate::metrics::unix_us(), cpu));
            std::thread::sleep(Duration::from_millis(1));
        }
        v
    })
}

/// Within `[from, to]` (µs since the epoch): the time the core was saturated (1 ms bins at
/// least 90 % busy) and the CPU µs it spent.
fn saturated_within(samples: &[(u64, u64)], from: u64, to: u64) -> (u64, u64) {
    let (mut sat, mut cpu) = (0, 0);
    for pair in samples.windows(2) {
        let ((t0, c0), (t1, c1)) = (pair[0], pair[1]);
        if t0 < from || t1 > to {
            continue;
        }
        let used = c1.saturating_sub(c0);
        cpu += used;
        if used as f64 >= SATURATED * t1.saturating_sub(t0) as f64 {
            sat += t1 - t0;
        }
    }
    (sat, cpu)
}

/// The waves of a case at `concurrency` streams, from its requests and the CPU samples.
pub fn waves(
    sent: &[Sent],
    concurrency: u32,
    origin_unix_us: u64,
    samples: &[(u64, u64)],
) -> Vec<Wave> {
    let c = concurrency.max(1);
    let count = sent.iter().map(|s| s.0 / c + 1).max().unwrap_or(0);
    (0..count)
        .filter_map(|w| {
            let of: Vec<&Sent> = sent.iter().filter(|s| s.0 / c == w).collect();
            let start = of.iter().map(|s| s.1).min()?;
            let last = of.iter().map(|s| s.1).max()?;
            let (sat_us, cpu_us) = saturated_within(
                samples,
                origin_unix_us + start,
                origin_unix_us + last + AFTER_US,
            );
            let mut first = Dist::new();
            for e in of.iter().filter_map(|s| s.2) {
                first.record(e);
            }
            let stats = first.stats(1e-3);
            Some(Wave {
                wave: w,
                requests: of.len() as u32,
                start_ms: start as f64 / 1e3,
                write_span_ms: (last - start) as f64 / 1e3,
                saturated_ms: sat_us as f64 / 1e3,
                cpu_us_per_request: cpu_us as f64 / of.len() as f64,
                ttft_error_p50_ms: stats.as_ref().map(|d| d.p50),
                ttft_error_p99_ms: stats.as_ref().map(|d| d.p99),
            })
        })
        .collect()
}

/// The wave cases of one repeat: each concurrency of `--wave-concurrency`, with each `--ui`,
/// on the firehose paced at `--pace-ms` (firehose and client on the CPUs given).
pub(super) fn cases(
    a: &BenchClientArgs,
    cpus: (Option<&str>, Option<&str>),
    next_dir: &mut dyn FnMut() -> PathBuf,
) -> Result<Vec<CaseResult>, String> {
    let mut out = Vec::new();
    for &c in &a.wave_concurrency.0 {
        for ui in &a.ui {
            let case = Case {
                kind: "wave",
                concurrency: c as u32,
                ui,
                events_per_write: 1,
                input_len: a.input_len,
                output_len: a.accuracy_output_len,
                requests: c as u32 * a.waves.max(1),
                record_chunks: true,
                turns: 0,
                tool_wait: None,
            };
            let d = next_dir();
            let (mut r, sent) = paced_case(a, cpus, &case, &d)?;
            let samples: Vec<(u64, u64)> = std::fs::read(d.join("cpu-samples.json"))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or("the wave case wrote no cpu-samples.json")?;
            r.waves = waves(&sent, r.concurrency, r.origin_unix_us, &samples);
            print_case(&r);
            out.push(r);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core busy for 30 ms from 10 ms on, then idle: the wave written from 10 to 25 ms found
    /// it saturated for 20 of the 20 ms of its window; one written in the idle part, never.
    #[test]
    fn saturation_counts_the_busy_bins_of_each_waves_window() {
        let origin = 1_000_000;
        let samples: Vec<(u64, u64)> = (0..80u64)
            .map(|ms| {
                let busy_ms = ms.clamp(10, 40) - 10;
                (origin + ms * 1000, busy_ms * 1000 + ms * 20)
            })
            .collect();
        let sent: Vec<Sent> = (0..4)
            .map(|i| {
                let at = if i < 2 {
                    10_000 + u64::from(i) * 15_000
                } else {
                    60_000
                };
                (i, at, Some(u64::from(i) * 1000))
            })
            .collect();
        let w = waves(&sent, 2, origin, &samples);
        assert_eq!(w.len(), 2);
        assert_eq!(
            (w[0].requests, w[0].start_ms, w[0].write_span_ms),
            (2, 10.0, 15.0)
        );
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(w[0].saturated_ms, 20.0), "{w:?}");
        // 20 ms busy plus the 2 % background (20 µs a ms), over two requests.
        assert!(close(w[0].cpu_us_per_request, 20_400.0 / 2.0), "{w:?}");
        assert_eq!((w[1].start_ms, w[1].saturated_ms), (60.0, 0.0));
        assert!(w[1].ttft_error_p99_ms.is_some_and(|p| p > 2.0));
    }
}
