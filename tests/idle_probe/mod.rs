//! A probe like servetop's (a tokio timer due every millisecond, its lateness noted) on a
//! runtime of the test's own that does nothing else: how late an idle runtime's timer wakes
//! on this machine while a test runs servetop beside it. A virtual machine's host can wake a
//! sleeping thread milliseconds late, or stop the whole machine for longer, and tokio's timer
//! rounds to the millisecond on top: such stalls are the machine's, whatever servetop does.

// Each suite uses its own share of these.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A running probe; [`Probe::stop`] gives each wake-up's lateness, µs.
pub struct Probe {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<u64>>,
}

/// Starts the probe on a thread of its own.
pub fn start() -> Probe {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut lags = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                let asked = Instant::now();
                tokio::time::sleep(Duration::from_millis(1)).await;
                let late = asked.elapsed().saturating_sub(Duration::from_millis(1));
                lags.push(u64::try_from(late.as_micros()).unwrap_or(u64::MAX));
            }
            lags
        })
    });
    Probe { stop, thread }
}

impl Probe {
    /// Stops it: every wake-up's lateness, µs, in order.
    pub fn stop(self) -> Vec<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The reads per stream that stalls of these lags (µs) may hold, as servetop counts held
/// reads: each stall of [`servetop::client::held::STALL_MIN`] or more may hold a stream's next
/// read, and one more for each `write_every_us` it lasted.
pub fn stall_units(lags: &[u64], write_every_us: u64) -> u64 {
    let stall_us = u64::try_from(servetop::client::held::STALL_MIN.as_micros()).unwrap();
    lags.iter()
        .filter(|&&lag| lag >= stall_us)
        .map(|lag| 1 + lag.div_ceil(write_every_us))
        .sum()
}
