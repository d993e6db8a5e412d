//! A plan's time before any of its levels is measured, from the best basis there is without
//! sending a request: an earlier run against the same server and model (its measured levels,
//! as while a run goes), else single-stream speeds — the server's own metrics of what it has
//! served, the warmup request once it is back, or a stated default (docs/metrics.md, "Time
//! estimates").
//!
//! From single-stream speeds (prefill P tok/s, decode D tok/s a stream) a request of `in`
//! prompt and `out` output tokens takes `t₁ = in/P + out/D` alone. A closed-loop level of C
//! streams and n requests takes ⌈n/C⌉ waves of it: at least `⌈n/C⌉·t₁` (the server scaling
//! perfectly) and at most `⌈n/C⌉·t₁·C^¾` (each stream slowing as C^¾, an aggregate rate of
//! C^¼ streams: a server whose running cap queues the rest, as the demo's simulator at C=64 and
//! C=100, stays inside it). A long-context length is run one request at a time: `n·t₁`. A rate level takes
//! its requests over its rate, plus one request; a replayed trace its requests over its
//! offered rate.

use super::{Eta, LevelSummary, RunSummary, level_s};
use crate::metrics::{Outcome, RequestRecord};
use crate::telemetry::ServerSample;
use crate::workload::LevelKind;

/// The default when nothing is known of the server: prefill and decode speeds (tok/s) of a
/// single stream, slowest and fastest, wide enough for most deployments.
pub const DEFAULT_PREFILL_TPS: (f64, f64) = (2_000.0, 20_000.0);
pub const DEFAULT_DECODE_TPS: (f64, f64) = (20.0, 120.0);

/// How a stream's time grows with the concurrency at the slow end of a closed-loop level's
/// range: `C^SLOWDOWN_EXPONENT` (see the module's page).
pub const SLOWDOWN_EXPONENT: f64 = 0.75;

/// Single-stream speeds, each as a range (slowest, fastest), and where they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Speeds {
    pub prefill_tps: (f64, f64),
    pub decode_tps: (f64, f64),
    /// Where they came from (`from the warmup request (…)`, `no basis yet: assumed …`).
    pub source: String,
}

impl Speeds {
    /// The stated default: nothing known of the server.
    #[must_use]
    pub fn assumed() -> Self {
        Self {
            prefill_tps: DEFAULT_PREFILL_TPS,
            decode_tps: DEFAULT_DECODE_TPS,
            source: format!(
                "no basis yet: assumed {:.0}–{:.0} tok/s a stream and {:.0}K–{:.0}K tok/s prefill",
                DEFAULT_DECODE_TPS.0,
                DEFAULT_DECODE_TPS.1,
                DEFAULT_PREFILL_TPS.0 / 1000.0,
                DEFAULT_PREFILL_TPS.1 / 1000.0
            ),
        }
    }

    /// The speeds one finished request shows (the warmup): its prompt over its TTFT, and its
    /// output after the first token over the time after it. `None` for a failed request, or
    /// one with too little output to tell a decode speed.
    #[must_use]
    pub fn of_request(r: &RequestRecord) -> Option<Self> {
        if r.outcome != Outcome::Ok || r.output_tokens < 2 {
            return None;
        }
        let ttft_s = r.ttft_us? as f64 / 1e6;
        let decode_s = (r.e2e_us? as f64 / 1e6 - ttft_s).max(0.0);
        if ttft_s <= 0.0 || decode_s <= 0.0 {
            return None;
        }
        let prefill = r.input_tokens as f64 / ttft_s;
        let decode = (r.output_tokens - 1) as f64 / decode_s;
        Some(Self {
            prefill_tps: (prefill, prefill),
            decode_tps: (decode, decode),
            source: format!(
                "from the warmup request ({} tok/s prefill, {decode:.0} tok/s a stream)",
                crate::fmt::fmt_tokens(prefill.round() as u64)
            ),
        })
    }

    /// The speeds the server's own metrics show of what it served before: its mean prompt over
    /// its mean TTFT, and its generation rate (llama.cpp's `predicted_tokens_seconds`, or the
    /// inverse of its mean time per output token). `None` when it has served nothing, or does
    /// not report both.
    #[must_use]
    pub fn of_server(s: &ServerSample) -> Option<Self> {
        let served = s.ttft_seconds_count.filter(|n| *n >= 1.0)?;
        let ttft_s = s.ttft_seconds_sum? / served;
        let prompt = s.prompt_tokens_total? / served;
        let decode = s
            .decode_tokens_per_s
            .filter(|d| d.is_finite() && *d > 0.0)?;
        if !(ttft_s > 0.0 && prompt > 0.0) {
            return None;
        }
        let prefill = prompt / ttft_s;
        Some(Self {
            prefill_tps: (prefill, prefill),
            decode_tps: (decode, decode),
            source: format!(
                "from the server's own metrics of the {served:.0} requests it served before ({} tok/s prefill, {decode:.0} tok/s a stream)",
                crate::fmt::fmt_tokens(prefill.round() as u64)
            ),
        })
    }
}

/// What a plan's time is estimated from.
#[derive(Clone, Debug)]
pub enum Basis {
    /// An earlier run against the same server and model, and how to name it.
    Earlier {
        summary: Box<RunSummary>,
        name: String,
    },
    /// Single-stream speeds.
    Speeds(Speeds),
}

impl Basis {
    /// Where the estimate comes from, as said in brackets after it.
    #[must_use]
    pub fn source(&self) -> String {
        match self {
            Self::Earlier { name, .. } => name.clone(),
            Self::Speeds(s) => s.source.clone(),
        }
    }
}

/// `(low, high)` seconds for level `l` from single-stream speeds (see the module's page).
fn from_speeds(l: &LevelSummary, s: &Speeds) -> Option<(f64, f64)> {
    let t1 = |(p, d): (f64, f64)| l.input_len as f64 / p + f64::from(l.output_len) / d;
    let (fast, slow) = (
        t1((s.prefill_tps.1, s.decode_tps.1)),
        t1((s.prefill_tps.0, s.decode_tps.0)),
    );
    if !(fast.is_finite() && slow.is_finite()) {
        return None;
    }
    let requests = f64::from(l.requests);
    match l.kind {
        LevelKind::Sweep | LevelKind::MultiTurn | LevelKind::Sessions => {
            if let Some(secs) = l.seconds {
                return Some((secs, secs));
            }
            let c = f64::from(l.concurrency.max(1));
            let waves = (requests / c).ceil();
            let waits = super::tool_waits_s(l);
            Some((
                waves * fast + waits,
                waves * slow * c.powf(SLOWDOWN_EXPONENT) + waits,
            ))
        }
        LevelKind::Rate => {
            if let Some(secs) = l.seconds {
                return Some((secs, secs));
            }
            let rate = l.request_rate().filter(|r| *r > 0.0)?;
            if rate.is_infinite() {
                // Every request at once: waves of them all, or of --max-concurrency.
                let c = f64::from(if l.concurrency > 0 {
                    l.concurrency
                } else {
                    l.requests.max(1)
                });
                let waves = (requests / c).ceil();
                return Some((waves * fast, waves * slow * c.powf(SLOWDOWN_EXPONENT)));
            }
            Some((requests / rate + fast, requests / rate + slow))
        }
        LevelKind::LongContext => Some((requests * fast, requests * slow)),
        LevelKind::Trace => {
            let rate = l.trace.as_ref()?.offered_rate.filter(|r| *r > 0.0)?;
            Some((requests / rate + fast, requests / rate + slow))
        }
    }
}

/// The plan's `levels`, estimated from `basis`; those `skip` says the run will skip are left
/// out (counted in `skipped`).
#[must_use]
pub fn estimate(
    levels: &[LevelSummary],
    basis: &Basis,
    skip: impl Fn(&LevelSummary) -> bool,
) -> Eta {
    let mut eta = Eta::default();
    for l in levels {
        if skip(l) {
            eta.skipped += 1;
            continue;
        }
        eta.add(match basis {
            // What the earlier run cannot tell (a kind it did not run) comes from the default.
            Basis::Earlier { summary, .. } => {
                level_s(summary, l).or_else(|| from_speeds(l, &Speeds::assumed()))
            }
            Basis::Speeds(s) => from_speeds(l, s),
        });
    }
    eta
}

/// `time: about 3–5 min (from …)` for the plan line, or `time: not estimated (…)` when no
/// level could be estimated; `note` (what else the time counts, `; …`) follows the basis.
#[must_use]
pub fn time_part(eta: &Eta, basis: &Basis, note: &str) -> String {
    if eta.levels == 0 {
        return format!(
            "time: not estimated ({}){}",
            basis.source(),
            super::left_out(eta)
        );
    }
    format!(
        "time: {} ({}{note}; server starts and restarts not included){}",
        super::range_text(eta),
        basis.source(),
        super::left_out(eta)
    )
}

/// An SLO capacity search's time: its closed-loop throughput probe (`throughput`, estimated
/// as a level), then rate probes of `probe_s` seconds each, at least `rate_probes.0` of them
/// and at most `rate_probes.1`, each at most `one_request_s` longer while its last requests drain and at
/// most `min_requests` over the throughput probe's slowest rate when that takes longer.
#[must_use]
pub fn search_s(
    throughput: (f64, f64),
    throughput_requests: u32,
    one_request_s: f64,
    probe_s: f64,
    min_requests: u32,
    rate_probes: (u32, u32),
) -> (f64, f64) {
    let slowest_rate = f64::from(throughput_requests) / throughput.1.max(f64::MIN_POSITIVE);
    let longest_probe = probe_s.max(f64::from(min_requests) / slowest_rate) + one_request_s;
    (
        throughput.0 + f64::from(rate_probes.0) * probe_s,
        throughput.1 + f64::from(rate_probes.1) * longest_probe,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::levels::plain;
    use crate::workload::{OpenLoop, RequestCount};

    fn levels(c: &[u64], lengths: (u64, u32), n: u32, ladder: &[u64]) -> Vec<LevelSummary> {
        plain(
            c,
            lengths,
            RequestCount::Fixed(n),
            &OpenLoop::default(),
            (ladder, 100, 1),
        )
        .iter()
        .map(LevelSummary::planned)
        .collect()
    }

    fn speeds(p: f64, d: f64) -> Speeds {
        Speeds {
            prefill_tps: (p, p),
            decode_tps: (d, d),
            source: "test".into(),
        }
    }

    #[test]
    fn waves_of_a_single_stream_request_between_perfect_scaling_and_a_slowdown_of_c_to_the_three_quarters()
     {
        // 1000 in at 10K tok/s = 0.1 s, 500 out at 50 tok/s = 10 s: t₁ = 10.1 s.
        let ls = levels(&[1, 4, 16], (1000, 500), 8, &[]);
        let eta = estimate(&ls, &Basis::Speeds(speeds(10_000.0, 50.0)), |_| false);
        let t1 = 10.1;
        // Waves: 8, 2, 1; the slow end multiplies each by C^¾: 1, 2√2, 8.
        let low = (8.0 + 2.0 + 1.0) * t1;
        let high = (8.0 + 2.0 * 2f64.powf(1.5) + 8.0) * t1;
        assert!((eta.low_s - low).abs() < 1e-9, "{eta:?}");
        assert!((eta.high_s - high).abs() < 1e-9, "{eta:?}");
        assert_eq!((eta.levels, eta.unknown, eta.skipped), (3, 0, 0));
    }

    #[test]
    fn a_search_is_its_throughput_probe_then_rate_probes_that_last_at_least_their_seconds() {
        // 256 requests in 10–40 s: at worst 6.4 req/s, so 100 requests take 15.6 s, under the
        // 30 s a probe lasts; each drains one 2 s request at worst.
        let (low, high) = search_s((10.0, 40.0), 256, 2.0, 30.0, 100, (2, 16));
        assert!((low - (10.0 + 2.0 * 30.0)).abs() < 1e-9, "{low}");
        assert!((high - (40.0 + 16.0 * 32.0)).abs() < 1e-9, "{high}");
        // A slow server: 0.64 req/s at worst, so a probe's 100 requests take 156.25 s.
        let (low, high) = search_s((100.0, 400.0), 256, 2.0, 30.0, 100, (1, 16));
        assert!((low - 130.0).abs() < 1e-9, "{low}");
        assert!((high - (400.0 + 16.0 * 158.25)).abs() < 1e-9, "{high}");
    }

    #[test]
    fn a_ladder_is_one_request_at_a_time_and_skipped_lengths_are_not_counted() {
        let ls = levels(&[], (0, 0), 1, &[30_000, 60_000, 100_000]);
        let basis = Basis::Speeds(speeds(10_000.0, 50.0));
        // The server holds 64K: 100K is skipped.
        let eta = estimate(&ls, &basis, |l| {
            super::super::will_skip(l, Some(65_536), false)
        });
        let want = (30_000.0 + 60_000.0) / 10_000.0 + 2.0 * 100.0 / 50.0;
        assert!((eta.low_s - want).abs() < 1e-9, "{eta:?}");
        assert!((eta.high_s - want).abs() < 1e-9);
        assert_eq!((eta.levels, eta.skipped), (2, 1));
        let part = time_part(&eta, &basis, "");
        assert!(part.starts_with("time: about 13 s (test;"), "{part}");
        assert!(part.contains("1 to be skipped, not counted"), "{part}");
    }

    #[test]
    fn the_default_is_a_wide_range_and_says_it_is_assumed() {
        let ls = levels(&[1], (1000, 500), 10, &[]);
        let a = Speeds::assumed();
        let eta = estimate(&ls, &Basis::Speeds(a.clone()), |_| false);
        let t = |p: f64, d: f64| 10.0 * (1000.0 / p + 500.0 / d);
        assert!((eta.low_s - t(DEFAULT_PREFILL_TPS.1, DEFAULT_DECODE_TPS.1)).abs() < 1e-9);
        assert!((eta.high_s - t(DEFAULT_PREFILL_TPS.0, DEFAULT_DECODE_TPS.0)).abs() < 1e-9);
        assert!(
            a.source.starts_with("no basis yet: assumed"),
            "{}",
            a.source
        );
    }

    #[test]
    fn a_warmup_request_gives_its_prefill_and_decode_speeds() {
        // 2000 in over 0.2 s; 100 tokens after the first over 2 s.
        let mut r = crate::metrics::record::tests::record(200_000, 2_200_000, 101);
        r.input_tokens = 2000;
        let s = Speeds::of_request(&r).unwrap();
        assert_eq!(s.prefill_tps, (10_000.0, 10_000.0));
        assert_eq!(s.decode_tps, (50.0, 50.0));
        r.output_tokens = 1;
        assert!(Speeds::of_request(&r).is_none(), "no decode to go by");
    }

    #[test]
    fn the_servers_metrics_give_speeds_once_it_has_served_requests() {
        let mut m = ServerSample {
            ttft_seconds_sum: Some(4.0),
            ttft_seconds_count: Some(10.0),
            prompt_tokens_total: Some(20_000.0),
            decode_tokens_per_s: Some(40.0),
            ..ServerSample::default()
        };
        let s = Speeds::of_server(&m).unwrap();
        // 2000 tokens a prompt over 0.4 s.
        assert_eq!(s.prefill_tps, (5_000.0, 5_000.0));
        assert_eq!(s.decode_tps, (40.0, 40.0));
        m.ttft_seconds_count = Some(0.0);
        assert!(Speeds::of_server(&m).is_none(), "nothing served yet");
    }
}
