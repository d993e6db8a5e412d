//! servetop watching itself during a run (docs/metrics.md "Findings", client validity): its
//! process's CPU time per wall second, and its runtime's timer lag — a probe task on the same
//! runtime as the streams sleeps a fixed interval and measures how late it wakes. A client that
//! is busy wakes late, and then stamps its readings late too.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Reports, TelemetryRecord, now_unix_ms};

/// How long the probe sleeps between wake-ups: short, so that a stall of the runtime of a few
/// milliseconds is seen and the reads after it counted held (docs/metrics.md "Held reads").
pub const PROBE_INTERVAL: Duration = Duration::from_millis(1);
/// How often a sample is reported.
pub const REPORT_EVERY: Duration = Duration::from_secs(1);

/// One second or so of the client's own load (`telemetry.jsonl` kind `client`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSample {
    pub at_unix_ms: i64,
    /// Wall seconds the sample covers, and the process's user + system CPU seconds in them.
    pub wall_s: f64,
    pub cpu_s: f64,
    /// How late each probe woke past its interval, µs (in the session and the journal;
    /// telemetry.jsonl keeps the summary below).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lag_us: Vec<u32>,
    pub probes: u32,
    pub lag_p50_ms: f64,
    pub lag_p99_ms: f64,
    pub lag_max_ms: f64,
}

/// User + system CPU seconds of process `pid` (`self` for this one) from `/proc/PID/stat`, in
/// `USER_HZ` (100) ticks; 0 where there is no `/proc`.
pub fn cpu_seconds_of(pid: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15: indices 11 and 12 after the state.
    (tick(11) + tick(12)) / 100.0
}

/// The value of nearest rank ⌈q·n⌉ of `sorted`.
fn rank(sorted: &[u32], q: f64) -> u32 {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[i - 1]
}

impl ClientSample {
    /// A sample of `lag_us` over `wall_s` seconds in which the process used `cpu_s`.
    pub fn of(at_unix_ms: i64, wall_s: f64, cpu_s: f64, lag_us: Vec<u32>) -> Self {
        let mut sorted = lag_us.clone();
        sorted.sort_unstable();
        let ms = |v: u32| f64::from(v) / 1000.0;
        let (p50, p99, max) = if sorted.is_empty() {
            (0.0, 0.0, 0.0)
        } else {
            (
                ms(rank(&sorted, 0.5)),
                ms(rank(&sorted, 0.99)),
                ms(sorted[sorted.len() - 1]),
            )
        };
        Self {
            at_unix_ms,
            wall_s,
            cpu_s,
            probes: lag_us.len() as u32,
            lag_us,
            lag_p50_ms: p50,
            lag_p99_ms: p99,
            lag_max_ms: max,
        }
    }
}

/// The running probe: [`ClientProbe::finish`] stops it once its last part-second is reported.
pub struct ClientProbe {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ClientProbe {
    /// Stops the probe and waits for its last sample (the part-second since the one before)
    /// to be sent: a stall at the run's very end is in its record like any other.
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Starts the probe on the current runtime: it reports a [`ClientSample`] every
/// [`REPORT_EVERY`] until `cancel` fires (then the part-second since the last one) or nobody
/// listens, and notes each stall it sees in `stalls`.
pub fn spawn(
    tx: Reports,
    cancel: tokio_util::sync::CancellationToken,
    stalls: std::sync::Arc<crate::client::held::Stalls>,
) -> ClientProbe {
    let stop = cancel.clone();
    let task = tokio::spawn(async move {
        let mut lags = Vec::with_capacity(1024);
        let mut since = Instant::now();
        let mut cpu = cpu_seconds_of("self");
        let mut asked = Instant::now();
        loop {
            let due = asked + PROBE_INTERVAL;
            stalls.probe_due(due);
            tokio::select! {
                () = cancel.cancelled() => {
                    stalls.probe_stopped();
                    // The last part-second's lags too: a stall at the run's end was seen by the
                    // reads it held, and its record must say so.
                    if !lags.is_empty() {
                        let now_cpu = cpu_seconds_of("self");
                        let _ = tx.send(TelemetryRecord::Client(ClientSample::of(
                            now_unix_ms(),
                            since.elapsed().as_secs_f64(),
                            (now_cpu - cpu).max(0.0),
                            lags,
                        )));
                    }
                    return;
                }
                () = tokio::time::sleep_until(due.into()) => {}
            }
            let woke = Instant::now();
            stalls.probe_woke(due, woke);
            asked = woke;
            let late = woke.saturating_duration_since(due);
            lags.push(u32::try_from(late.as_micros()).unwrap_or(u32::MAX));
            let wall = since.elapsed();
            if wall >= REPORT_EVERY {
                let now_cpu = cpu_seconds_of("self");
                let s = ClientSample::of(
                    now_unix_ms(),
                    wall.as_secs_f64(),
                    (now_cpu - cpu).max(0.0),
                    std::mem::take(&mut lags),
                );
                (since, cpu) = (Instant::now(), now_cpu);
                if !tx.send(TelemetryRecord::Client(s)) {
                    stalls.probe_stopped();
                    return;
                }
            }
        }
    });
    ClientProbe { stop, task }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_summarizes_its_lags_by_nearest_rank() {
        let lags: Vec<u32> = (1..=200).map(|i| i * 10).collect();
        let s = ClientSample::of(0, 1.0, 0.25, lags);
        assert_eq!(s.probes, 200);
        // ⌈0.5·200⌉ = 100th: 1000 µs; ⌈0.99·200⌉ = 198th: 1980 µs.
        assert!((s.lag_p50_ms - 1.0).abs() < 1e-12);
        assert!((s.lag_p99_ms - 1.98).abs() < 1e-12);
        assert!((s.lag_max_ms - 2.0).abs() < 1e-12);
    }

    /// Runs the probe for a little over one report on a one-thread runtime, with `block`
    /// holding the thread that long every 30 ms; returns the first sample.
    fn probe_with(block: Duration) -> ClientSample {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = got.clone();
        rt.block_on(async move {
            let cancel = tokio_util::sync::CancellationToken::new();
            spawn(
                Reports::new(move |r| {
                    sink.lock().unwrap().push(r);
                    true
                }),
                cancel.clone(),
                crate::client::held::Stalls::new(),
            );
            let end = Instant::now() + REPORT_EVERY + Duration::from_millis(200);
            while Instant::now() < end {
                tokio::time::sleep(Duration::from_millis(30)).await;
                // Not an await: the runtime's one thread is busy, as with a stream's work.
                std::thread::sleep(block);
            }
            cancel.cancel();
        });
        let r = got.lock().unwrap().first().cloned().expect("a sample");
        match r {
            TelemetryRecord::Client(c) => c,
            other => panic!("{other:?}"),
        }
    }

    /// A runtime whose thread is held 20 ms at a time, every 30 ms of sleep: the probe cannot
    /// wake before a hold ends, and each 50 ms cycle's hold catches one of its 1 ms sleeps,
    /// about 19 ms late, against at most 30 wake-ups on time: more than 1 % of its wake-ups
    /// are late by most of a hold, so the p99 is over 10 ms, a lower bound a busier machine
    /// can only raise. Held the whole time, the probe's sample
    /// still arrives, with the wall time and probes it covered.
    #[test]
    fn the_probe_sees_a_runtime_held_busy() {
        let busy = probe_with(Duration::from_millis(20));
        assert!(busy.probes > 10, "{busy:?}");
        assert!(busy.lag_p99_ms >= 10.0, "{busy:?}");
        assert!(busy.wall_s >= REPORT_EVERY.as_secs_f64(), "{busy:?}");
    }

    #[test]
    fn this_process_has_cpu_time() {
        let t0 = cpu_seconds_of("self");
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        }
        std::hint::black_box(x);
        // 60 ms of spinning: at least 2 ticks of 10 ms were counted (the clock ticks are
        // coarse; the bound leaves room for a preempted spin).
        assert!(cpu_seconds_of("self") - t0 >= 0.02);
    }
}
