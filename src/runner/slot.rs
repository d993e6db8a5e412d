//! A level's place on the run's clock ([`crate::workload::clock`]): when it may start, until
//! when it sends, and when what still runs is cut.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::event::Event;
use crate::workload::LevelSpec;
use crate::workload::clock::{ClockOffset, LevelClock, Probe, fine_window_us, parse_http_date};

/// The instants that bound one running level.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Bounds {
    /// No request is sent from here on (None: until its request count).
    pub(super) send_until: Option<Instant>,
    /// The level is cancelled here, so its requests still in flight end as cancelled by the
    /// slot's end (their grace included).
    pub(super) cut_at: Option<Instant>,
}

/// Milliseconds until the level at plan position `spec.index` may start (0: now or late),
/// and how late it is past its slot's start, from this machine's clock `now_ms`.
pub(super) fn wait_ms(clock: &LevelClock, spec: &LevelSpec, now_ms: i64) -> (u64, i64) {
    match clock.slot_start_unix_ms(spec.index) {
        Some(start) if start > now_ms => ((start - now_ms) as u64, 0),
        Some(start) => (0, now_ms - start),
        None => (0, 0),
    }
}

/// The level's bounds once it starts at `origin`, `late_ms` after its slot's start.
pub(super) fn bounds(
    clock: &LevelClock,
    spec: &LevelSpec,
    origin: Instant,
    late_ms: i64,
    grace: Duration,
) -> Bounds {
    let Some(s) = spec.seconds else {
        return Bounds::default();
    };
    let late = Duration::from_millis(late_ms.max(0) as u64);
    let send = Duration::from_secs_f64(s).saturating_sub(late);
    let drain = Duration::from_secs_f64(clock.drain_s);
    let send_until = origin + send;
    // The cancel takes `grace` to end what is in flight: it starts that much before the end.
    let cut_at = (origin + send + drain)
        .checked_sub(grace)
        .unwrap_or(send_until)
        .max(send_until);
    Bounds {
        send_until: Some(send_until),
        cut_at: Some(cut_at),
    }
}

/// Cancels `level` at `at`; the flag it returns says the cut came from the clock (the level
/// ran its time), not from the user.
pub(super) fn cut_when_due(
    at: Option<Instant>,
    level: &CancellationToken,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Option<tokio::task::JoinHandle<()>>,
) {
    let fired = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let Some(at) = at else {
        return (fired, None);
    };
    let (flag, level) = (fired.clone(), level.clone());
    let task = tokio::spawn(async move {
        tokio::select! {
            () = tokio::time::sleep_until(at.into()) => {
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                level.cancel();
            }
            () = level.cancelled() => {}
        }
    });
    (fired, Some(task))
}

/// One `GET /health` (any reply carries a `Date` header): this machine's clock at its send and
/// at its reply, and the reply's `Date`, in Unix µs; None without a usable `Date`.
async fn probe(http: &reqwest::Client, url: &str) -> Option<Probe> {
    let sent = crate::metrics::unix_us() as i64;
    let reply = http.get(url).timeout(Duration::from_secs(2)).send().await;
    let arrived = crate::metrics::unix_us() as i64;
    let date = reply
        .ok()?
        .headers()
        .get(reqwest::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_http_date)?;
    Some((sent, date * 1000, arrived))
}

/// The most probes sent back to back across a second boundary (about 250 ms of them on
/// loopback, where one takes about 0.3 ms).
const FINE_PROBES: usize = 2000;

/// The server's clock against this machine's. Nine probes 125 ms apart cross a second
/// boundary of the server's clock and give the offset to about their spacing; then probes sent
/// one after another through the window where the next boundary must fall give it to about a
/// round trip (a few ms at most on loopback or in one datacentre). When the fine probes
/// contradict the coarse ones (a server whose `Date` lags its clock), the coarse offset stands.
pub(super) async fn probe_clock(http: &reqwest::Client, base_url: &str) -> Option<ClockOffset> {
    let url = format!("{base_url}/health");
    let mut coarse = Vec::with_capacity(9);
    for _ in 0..9 {
        if let Some(p) = probe(http, &url).await {
            coarse.push(p);
        }
        tokio::time::sleep(Duration::from_millis(125)).await;
    }
    let first = ClockOffset::from_probes(&coarse)?;
    let now = crate::metrics::unix_us() as i64;
    let Some((from, to)) = fine_window_us(&coarse, now, 50_000, 3_000) else {
        return Some(first);
    };
    tokio::time::sleep(Duration::from_micros((from - now).max(0) as u64)).await;
    let mut all = coarse;
    let mut fine = 0;
    while (crate::metrics::unix_us() as i64) < to && fine < FINE_PROBES {
        if let Some(p) = probe(http, &url).await {
            all.push(p);
        }
        fine += 1;
    }
    Some(ClockOffset::from_probes(&all).unwrap_or(first))
}

impl super::Runner {
    /// A wall clock shifted on purpose is said; on the shared clock (`--start-at`), the
    /// server's clock against this machine's is measured, and the schedule kept on it.
    pub(super) async fn check_clock(&mut self) {
        let skew = crate::metrics::test_clock_skew_us();
        if skew != 0 {
            self.emit(Event::Warning(format!(
                "this run's wall clock is shifted {} ms on purpose ({}, a test setting): its times are not this machine's",
                skew as f64 / 1000.0,
                crate::metrics::TEST_CLOCK_SKEW_ENV
            )));
        }
        if self.clock.start_at_unix_ms.is_some() {
            let http = self.prepared.client.http();
            match probe_clock(&http, &self.prepared.server.base_url).await {
                Some(c) => {
                    self.clock_offset_us = c.offset_us();
                    self.emit(Event::Clock(c));
                }
                None => self.emit(Event::Warning(
                    "the server's replies carry no usable Date header: this machine's clock could not be checked against it".into(),
                )),
            }
        }
    }
}
