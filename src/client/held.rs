//! Held reads (docs/metrics.md "Held reads"): whether the events of one read may have arrived
//! earlier than its stamp says.
//!
//! The kernel merges segments that wait in a socket's receive queue and keeps the latest one's
//! time, so a read that comes after the stream's next write gives the earlier events the later
//! time. The client cannot split such a read; it can know when one may have happened:
//! - `Wakes`: each connection's reader is woken through a waker that notes when; bytes of a
//!   read that arrived well after that wake-up were merged with the ones that caused it;
//! - [`Stalls`]: the timer probe (`telemetry::client_load`) notes each stall of the runtime it sees,
//!   when no arrival is seen and no stream woken; a read after one may hold arrivals from it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use futures_util::task::AtomicWaker;

/// A probe that wakes this late or later saw a stall. tokio's timer rounds a sleep up to the
/// millisecond, so an idle runtime wakes the probe up to about 2 ms late (measured here: p50
/// 1.1 ms, p99 1.6-2.1 ms).
pub const STALL_MIN: Duration = Duration::from_millis(3);
/// Stalls kept: the reads that look back past the oldest are counted held.
const KEPT: usize = 64;

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// `t` as nanoseconds since this process's first use of the clock (0 before it).
fn ns(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

fn at(ns_since: u64) -> Instant {
    *EPOCH + Duration::from_nanos(ns_since)
}

/// When a connection's reader was last woken, and the task to wake.
#[derive(Debug, Default)]
pub(crate) struct Wakes {
    /// ns since `EPOCH` (0: never).
    at: AtomicU64,
    task: AtomicWaker,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.at.store(ns(Instant::now()).max(1), Ordering::Relaxed);
        self.task.wake();
    }
}

impl Wakes {
    /// A waker that notes the time, then wakes whichever task last [`Wakes::register`]ed.
    pub(crate) fn new() -> (Arc<Wakes>, Waker) {
        LazyLock::force(&EPOCH);
        let w = Arc::new(Wakes::default());
        let waker = Waker::from(w.clone());
        (w, waker)
    }

    /// The task to wake next.
    pub(crate) fn register(&self, task: &Waker) {
        self.task.register(task);
    }

    /// The last wake-up, if there was one.
    pub(crate) fn last(&self) -> Option<Instant> {
        let v = self.at.load(Ordering::Relaxed);
        (v > 0).then(|| at(v))
    }
}

/// The stalls the timer probe saw on the runtime that reads the streams.
#[derive(Debug, Default)]
pub struct Stalls {
    /// When the probe is next due (ns since `EPOCH`; 0 while none runs).
    due: AtomicU64,
    /// The end of the latest stall (ns), to skip the lock on the common path.
    last_end: AtomicU64,
    /// (from, to) in ns: from the probe's last on-time wake-up before the stall to its late one.
    kept: Mutex<VecDeque<(u64, u64)>>,
}

impl Stalls {
    pub fn new() -> Arc<Stalls> {
        LazyLock::force(&EPOCH);
        Arc::new(Stalls::default())
    }

    /// The probe sleeps until `due`.
    pub fn probe_due(&self, due: Instant) {
        self.due.store(ns(due).max(1), Ordering::Relaxed);
    }

    /// The probe stopped.
    pub fn probe_stopped(&self) {
        self.due.store(0, Ordering::Relaxed);
    }

    /// The probe, due at `due`, woke at `woke`. Late by [`STALL_MIN`] or more, the runtime
    /// stalled from `due` (it may have begun up to one interval before) to `woke`.
    pub fn probe_woke(&self, due: Instant, woke: Instant) {
        if woke.saturating_duration_since(due) < STALL_MIN {
            return;
        }
        let (from, to) = (ns(due), ns(woke));
        if let Ok(mut k) = self.kept.lock() {
            if k.len() == KEPT {
                k.pop_front();
            }
            k.push_back((from, to));
        }
        self.last_end.fetch_max(to, Ordering::Relaxed);
    }

    /// Whether a read at `now` of a stream read last at `since`, whose latest bytes arrived at
    /// `latest`, may hold arrivals merged across a stall: a stall the probe saw, or one going
    /// on now (the probe overdue), covers [`MERGE_MIN`] or more of `since..latest`. Every
    /// arrival the read returned came in that span; two of them merged by a stall are at most
    /// as far apart as the part of the stall inside it.
    pub fn held(&self, since: Instant, latest: Instant, now: Instant) -> bool {
        let (lo, hi) = (ns(since), ns(latest));
        let covers = |from: u64, to: u64| to.min(hi).saturating_sub(from.max(lo)) >= MERGE_MIN_NS;
        let due = self.due.load(Ordering::Relaxed);
        if due > 0 && now.saturating_duration_since(at(due)) >= STALL_MIN && covers(due, ns(now)) {
            return true;
        }
        if self.last_end.load(Ordering::Relaxed) < lo + MERGE_MIN_NS {
            return false;
        }
        let Ok(k) = self.kept.lock() else {
            return true;
        };
        // Kept in the order of their ends: the newest first, until one ends too early to
        // cover enough of the span. One dropped ended before the oldest kept.
        k.iter()
            .rev()
            .take_while(|s| s.1 >= lo + MERGE_MIN_NS)
            .any(|&(from, to)| covers(from, to))
    }
}

/// Two arrivals merged by a stall less than this apart are not counted: the probe's interval,
/// within which it cannot place a stall's start.
pub const MERGE_MIN: Duration = Duration::from_millis(1);
const MERGE_MIN_NS: u64 = 1_000_000;

/// Whether a read is held: its latest bytes arrived (`latest`) more than `window` after the
/// stream was woken for the first of them (`woke`), or a stall of the runtime covers enough of
/// the time between the stream's previous read (`since`) and `latest` ([`Stalls::held`]).
pub fn held(
    latest: Instant,
    woke: Option<Instant>,
    window: Duration,
    stalls: &Stalls,
    since: Instant,
    now: Instant,
) -> bool {
    woke.is_some_and(|w| latest.saturating_duration_since(w) > window)
        || stalls.held(since, latest, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_stall_holds_the_reads_whose_arrivals_it_covers() {
        let s = Stalls::new();
        let t0 = Instant::now();
        // On time: no stall.
        s.probe_due(t0 + MS);
        s.probe_woke(t0 + MS, t0 + MS + MS / 2);
        s.probe_due(t0 + 2 * MS + MS / 2);
        assert!(!s.held(t0, t0 + 2 * MS, t0 + 3 * MS));
        // Due at 3 ms, woke at 10: a stall from 3 to 10 ms.
        s.probe_woke(t0 + 3 * MS, t0 + 10 * MS);
        s.probe_due(t0 + 11 * MS);
        // Read last at 2 ms, the latest bytes at 9 ms: 6 ms of the stall in between.
        assert!(s.held(t0 + 2 * MS, t0 + 9 * MS, t0 + 10 * MS));
        // Read last at 9.5 ms: half a millisecond of it, too little to tell.
        assert!(!s.held(t0 + 9 * MS + MS / 2, t0 + 10 * MS, t0 + 10 * MS));
        // Every byte arrived before the stall (read late, but nothing merged by it).
        assert!(!s.held(t0, t0 + 3 * MS, t0 + 10 * MS));
        // Read last after it.
        assert!(!s.held(t0 + 10 * MS, t0 + 11 * MS, t0 + 11 * MS));
    }

    #[test]
    fn an_overdue_probe_holds_the_reads_its_stall_covers() {
        let s = Stalls::new();
        let t0 = Instant::now();
        s.probe_due(t0 + MS);
        // Due at 1 ms: 2.5 ms overdue is the timer's rounding, 3 ms a stall.
        assert!(!s.held(t0, t0 + 3 * MS, t0 + 3 * MS + MS / 2));
        assert!(s.held(t0, t0 + 3 * MS, t0 + 4 * MS));
        // Bytes that arrived before the stall began.
        assert!(!s.held(t0, t0 + MS, t0 + 4 * MS));
        s.probe_stopped();
        assert!(!s.held(t0, t0 + 3 * MS, t0 + 10 * MS));
    }

    #[test]
    fn when_the_stalls_kept_run_out_the_newest_still_count() {
        let s = Stalls::new();
        let t0 = Instant::now();
        for i in 0..(KEPT as u32 + 10) {
            let due = t0 + 10 * i * MS;
            s.probe_woke(due, due + 5 * MS);
        }
        let n = KEPT as u32 + 10;
        let end = t0 + 10 * n * MS;
        // The last stall: from 10(n-1) ms to 10(n-1) + 5 ms.
        let last = t0 + 10 * (n - 1) * MS;
        assert!(s.held(t0, last + 4 * MS, end));
        assert!(!s.held(last + 5 * MS, end, end));
    }

    #[test]
    fn bytes_well_after_the_wake_up_hold_the_read() {
        let s = Stalls::new();
        let t0 = Instant::now();
        let w = Duration::from_micros(100);
        assert!(!held(t0 + w, Some(t0), w, &s, t0, t0 + MS));
        assert!(held(t0 + 2 * w, Some(t0), w, &s, t0, t0 + MS));
        // Arrived before the wake-up (a busy runtime read it late): not held by this rule.
        assert!(!held(t0, Some(t0 + 5 * MS), w, &s, t0, t0 + 6 * MS));
        // No wake-up known (https): only stalls count.
        assert!(!held(t0 + 5 * MS, None, w, &s, t0, t0 + 6 * MS));
    }

    #[test]
    fn the_waker_notes_the_time_and_wakes_the_task() {
        struct Count(std::sync::atomic::AtomicU32);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let task = Arc::new(Count(std::sync::atomic::AtomicU32::new(0)));
        let (w, waker) = Wakes::new();
        assert_eq!(w.last(), None);
        w.register(&Waker::from(task.clone()));
        let before = Instant::now();
        waker.wake_by_ref();
        let woke = w.last().expect("a wake-up");
        assert!(woke + Duration::from_micros(1) >= before && woke <= Instant::now());
        assert_eq!(task.0.load(Ordering::Relaxed), 1);
    }
}
