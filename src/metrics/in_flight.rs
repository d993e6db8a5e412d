//! The exact peak of requests in flight, folded online.

use std::collections::BTreeMap;

/// The exact peak of requests in flight, with memory bounded by the requests that overlap the
/// oldest one still running (a few times the concurrency at a steady load), not by the number
/// of requests.
///
/// A sweep over all `(send, end)` intervals gives the peak exactly, but keeping them all costs
/// 16 bytes a request forever. Records arrive when they finish, in no strict order, so a point in
/// time can only be settled once every request that could cover it has arrived. Closed-loop
/// workers make that knowable: one worker's requests never overlap, so a worker's next request
/// starts after the end of its last one. Once every worker has reported, no request still to come
/// starts before `watermark = min over workers of their last end`; every instant before it is
/// final and its intervals can be swept and dropped, keeping only the ends of those still open at
/// the watermark. Records without a slot (older files) keep everything, which stays exact.
///
/// Open-loop levels keep the same property with a pool of slots: a request takes a free slot
/// (the one freed longest ago, so every slot's end keeps moving) and gives it back when it ends,
/// and a new slot is made only when none is free. The runner announces each request's slot with
/// its `Sent` event, before the request goes out, so a slot is known ([`InFlight::note_slot`])
/// before any record that could move the watermark past its first request arrives.
#[derive(Clone, Debug, Default)]
pub(super) struct InFlight {
    /// Closed-loop workers of the level; 0 when unknown.
    pub(super) slots: u32,
    /// Each worker's latest end.
    pub(super) slot_end: BTreeMap<u32, u64>,
    /// A record without a slot arrived: nothing may be dropped.
    pub(super) unslotted: bool,
    /// Intervals not yet swept.
    pub(super) pending: Vec<(u64, u64)>,
    /// Ends of swept intervals still open at `swept_to`.
    pub(super) open: Vec<u64>,
    pub(super) swept_to: u64,
    /// Peak over every instant before `swept_to`.
    pub(super) swept_peak: u64,
}

impl InFlight {
    /// A request is about to be sent on `slot`: make room for it.
    pub(super) fn note_slot(&mut self, slot: u32) {
        self.slots = self.slots.max(slot.saturating_add(1));
    }

    pub(super) fn add(&mut self, slot: Option<u32>, send: u64, end: u64) {
        self.pending.push((send, end));
        match slot {
            Some(s) if s < self.slots => {
                let e = self.slot_end.entry(s).or_insert(end);
                *e = (*e).max(end);
            }
            _ => self.unslotted = true,
        }
        // Sweep in batches, so each record costs amortised O(log n).
        if self.pending.len() >= 64 + 2 * self.slots as usize {
            self.compact();
        }
    }

    /// Sweeps every instant before the watermark and drops what no longer matters.
    pub(super) fn compact(&mut self) {
        if self.unslotted || self.slots == 0 || self.slot_end.len() < self.slots as usize {
            return;
        }
        let Some(&w) = self.slot_end.values().min() else {
            return;
        };
        if w <= self.swept_to {
            return;
        }
        let (now, later): (Vec<_>, Vec<_>) = self.pending.iter().partition(|&&(s, _)| s < w);
        let mut ev: Vec<(u64, i8)> = Vec::with_capacity(self.open.len() + 2 * now.len());
        let mut cur = 0i64;
        let mut open = Vec::new();
        for &e in &self.open {
            cur += 1;
            if e < w {
                ev.push((e, -1));
            } else {
                open.push(e);
            }
        }
        for &(s, e) in &now {
            ev.push((s, 1));
            if e < w {
                ev.push((e, -1));
            } else {
                open.push(e);
            }
        }
        let peak = sweep_peak(cur, ev);
        self.swept_peak = self.swept_peak.max(peak);
        self.open = open;
        self.pending = later;
        self.swept_to = w;
    }

    pub(super) fn peak(&self) -> u64 {
        let mut ev: Vec<(u64, i8)> = Vec::with_capacity(self.open.len() + 2 * self.pending.len());
        ev.extend(self.open.iter().map(|&e| (e, -1)));
        for &(s, e) in &self.pending {
            ev.push((s, 1));
            ev.push((e, -1));
        }
        self.swept_peak.max(sweep_peak(self.open.len() as i64, ev))
    }
}

/// The highest running count over `events`, starting from `start` open intervals.
pub(super) fn sweep_peak(start: i64, mut ev: Vec<(u64, i8)>) -> u64 {
    // Ends sort before starts at the same instant: a slot handed over is not two in flight.
    ev.sort_unstable();
    let (mut cur, mut peak) = (start, start);
    for (_, d) in ev {
        cur += i64::from(d);
        peak = peak.max(cur);
    }
    peak.max(0) as u64
}
