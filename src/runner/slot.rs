//! A level's place on the run's clock ([`crate::workload::clock`]): when it may start, until
//! when it sends, and when what still runs is cut.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::workload::LevelSpec;
use crate::workload::clock::{ClockOffset, LevelClock, parse_http_date};

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

/// The server's clock against this machine's: nine `GET /health` 125 ms apart (any reply
/// carries a `Date` header), so the probes cross a second boundary of the server's clock.
pub(super) async fn probe_clock(http: &reqwest::Client, base_url: &str) -> Option<ClockOffset> {
    let url = format!("{base_url}/health");
    let mut probes = Vec::with_capacity(9);
    for _ in 0..9 {
        let sent = crate::telemetry::now_unix_ms();
        let reply = http.get(&url).timeout(Duration::from_secs(2)).send().await;
        let arrived = crate::telemetry::now_unix_ms();
        if let Ok(r) = reply
            && let Some(d) = r
                .headers()
                .get(reqwest::header::DATE)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_http_date)
        {
            probes.push((sent, d, arrived));
        }
        tokio::time::sleep(Duration::from_millis(125)).await;
    }
    ClockOffset::from_probes(&probes)
}
