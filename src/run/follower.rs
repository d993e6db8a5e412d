//! The follower thread: what follows a run's events — folding them into the session, writing
//! the run's files, printing progress lines, drawing the dashboard, serving the live metrics
//! page — runs on a thread of its own, on a one-thread runtime of its own, at a lower
//! scheduling priority than the streams (nice [`NICE`]).
//!
//! Why: a token left unread until the stream's next one arrives loses its own arrival time (the
//! kernel stamps a read with its latest segment; docs/metrics.md "A chunk is a delivery"). On
//! the streams' runtime, a frame being drawn, a fold of a thousand records or a line printed to
//! an SSH terminal that blocks holds every read until it is done, and nothing can preempt it. On
//! a thread of its own, the kernel gives the core back to the streams' thread as soon as a read
//! is due, and the follower gets what the streams leave: on a saturated core it draws fewer
//! frames and folds events later (the dashboard says so), and the streams are read on time.

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc::error::TryRecvError;

use crate::event::{Event, EventRx};

/// The follower's nice value: the streams' thread (nice 0) wins the core when both want it,
/// and the follower still gets about a tenth of a saturated core (its weight against the
/// streams' is 110 to 1024), enough for a few frames a second.
pub const NICE: i32 = 10;

/// How often the follower takes the events waiting for it. It never waits on the channel: a
/// receiver waiting there is woken by every send, a wake-up and a switch of threads per request
/// on the streams' core (measured: 17 % fewer tokens a second at a thousand streams on one
/// core); taken every 25 ms, an event costs the streams' thread only its send.
pub const DRAIN: Duration = Duration::from_millis(25);

/// Moves every event waiting on `rx` into `into`; `true` once the channel is closed and empty.
pub fn take(rx: &mut EventRx, into: &mut Vec<Event>) -> bool {
    loop {
        match rx.try_recv() {
            Ok(ev) => into.push(ev),
            Err(TryRecvError::Empty) => return false,
            Err(TryRecvError::Disconnected) => return true,
        }
    }
}

/// A ticker every [`DRAIN`] that skips the ticks it missed.
pub fn drain_ticker() -> tokio::time::Interval {
    let mut t = tokio::time::interval(DRAIN);
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    t
}

/// Lowers the calling thread's priority to [`NICE`] (Linux sets nice per thread); whether it
/// could.
pub fn lower_this_thread() -> bool {
    rustix::process::setpriority_process(Some(rustix::thread::gettid()), NICE).is_ok()
}

/// Runs the future `make` returns on a new thread named `name`, at the follower's priority, on
/// a one-thread runtime of its own, and returns its output. A panic there is raised here too.
pub async fn follow<T, Fut>(name: &str, make: impl FnOnce() -> Fut + Send + 'static) -> T
where
    T: Send + 'static,
    Fut: Future<Output = T>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            lower_this_thread();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a one-thread runtime");
            let _ = tx.send(rt.block_on(make()));
        });
    let handle = match spawned {
        Ok(h) => h,
        Err(e) => panic!("cannot start the {name} thread: {e}"),
    };
    match rx.await {
        Ok(v) => v,
        Err(_) => match handle.join() {
            Err(payload) => std::panic::resume_unwind(payload),
            Ok(()) => unreachable!("the {name} thread ended without its result"),
        },
    }
}

/// Starts the future `make` returns on a detached thread named `name` at the follower's
/// priority, on a one-thread runtime of its own, for the life of the process (the live metrics
/// page).
pub fn detach<Fut>(name: &str, make: impl FnOnce() -> Fut + Send + 'static) -> std::io::Result<()>
where
    Fut: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            lower_this_thread();
            rt.block_on(make());
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_follower_runs_at_a_lower_priority_and_returns_its_result() {
        let (nice, here) = follow("test-follower", || async {
            let tid = rustix::thread::gettid();
            (
                rustix::process::getpriority_process(Some(tid)).ok(),
                std::thread::current().name().map(str::to_string),
            )
        })
        .await;
        let mine = rustix::process::getpriority_process(Some(rustix::thread::gettid())).ok();
        assert_eq!(here.as_deref(), Some("test-follower"));
        // Where the caller already runs at the follower's nice or above, it cannot go lower.
        if mine.is_some_and(|m| m < NICE) {
            assert_eq!(nice, Some(NICE), "the caller's nice is {mine:?}");
        }
    }

    #[tokio::test]
    async fn take_moves_what_waits_and_sees_the_channel_close() {
        let (tx, mut rx) = crate::event::channel();
        let mut got = Vec::new();
        assert!(!take(&mut rx, &mut got));
        tx.send(Event::Phase("a".into())).unwrap();
        tx.send(Event::Phase("b".into())).unwrap();
        assert!(!take(&mut rx, &mut got));
        assert_eq!(got.len(), 2);
        tx.send(Event::Phase("c".into())).unwrap();
        drop(tx);
        // The last event first, then the close.
        assert!(take(&mut rx, &mut got));
        assert_eq!(got.len(), 3);
    }

    #[tokio::test]
    #[should_panic(expected = "boom")]
    async fn a_panic_on_the_follower_is_raised_in_the_caller() {
        follow("test-follower", || async { panic!("boom") }).await;
    }
}
