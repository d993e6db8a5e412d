//! servetop's own metrics in the Prometheus text format, served live at `/metrics` with
//! `--metrics-listen ADDR`, so a Grafana board can watch every shard of a fleet run: requests by
//! outcome, tokens, TTFT / ITL / TPOT / E2E as histograms, requests in flight, the level.
//!
//! [`PromFold`] is folded by the session as each request ends (compute in update); [`render`]
//! writes the page from it and the session's state (pure); the run's sink puts the page where
//! the HTTP handler reads it (`run::metrics_page`).

use std::fmt::Write;

use crate::metrics::{Outcome, RequestRecord, record::for_each_gap};

/// Upper bounds (seconds) of the latency histograms' buckets.
const TTFT_BUCKETS: [f64; 14] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
];
const TOKEN_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0,
];
const E2E_BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];

/// One cumulative histogram: counts per upper bound, the sum and the count.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    /// Records `v` seconds `n` times.
    fn observe_n(&mut self, v: f64, n: u64) {
        if let Some(i) = self.bounds.iter().position(|&b| v <= b) {
            self.counts[i] += n;
        }
        self.sum += v * n as f64;
        self.count += n;
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c;
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum {}", self.sum);
        let _ = writeln!(out, "{name}_count {}", self.count);
    }
}

/// Counters and histograms over every measured request of the run so far.
#[derive(Clone, Debug)]
pub struct PromFold {
    ok: u64,
    cancelled: u64,
    /// Failures by kind, in [`crate::metrics::FailureKind::ALL`] order.
    failed: [u64; 7],
    input_tokens: u64,
    output_tokens: u64,
    ttft: Histogram,
    itl: Histogram,
    tpot: Histogram,
    e2e: Histogram,
}

impl Default for PromFold {
    fn default() -> Self {
        Self {
            ok: 0,
            cancelled: 0,
            failed: [0; 7],
            input_tokens: 0,
            output_tokens: 0,
            ttft: Histogram::new(&TTFT_BUCKETS),
            itl: Histogram::new(&TOKEN_BUCKETS),
            tpot: Histogram::new(&TOKEN_BUCKETS),
            e2e: Histogram::new(&E2E_BUCKETS),
        }
    }
}

impl PromFold {
    /// Folds one finished request (warmups are not measured). ITL is split per token over
    /// each chunk gap, as the levels' ITL is (docs/metrics.md).
    pub fn observe(&mut self, r: &RequestRecord) {
        if r.warmup {
            return;
        }
        match &r.outcome {
            Outcome::Cancelled => self.cancelled += 1,
            Outcome::Failed { kind, .. } => {
                let i = crate::metrics::FailureKind::ALL
                    .iter()
                    .position(|k| k == kind)
                    .unwrap_or(0);
                self.failed[i] += 1;
            }
            Outcome::Ok => {
                self.ok += 1;
                self.input_tokens += r.input_tokens;
                self.output_tokens += r.output_tokens;
                let s = |us: u64| us as f64 * 1e-6;
                if let Some(t) = r.ttft_us {
                    self.ttft.observe_n(s(t), 1);
                }
                if let Some(e) = r.e2e_us {
                    self.e2e.observe_n(s(e), 1);
                }
                if let Some(t) = r.tpot_us() {
                    self.tpot.observe_n(t * 1e-6, 1);
                }
                for_each_gap(&r.chunks, |gap, tokens| {
                    if tokens > 0 {
                        self.itl
                            .observe_n(s(gap) / f64::from(tokens), u64::from(tokens));
                    }
                });
            }
        }
    }
}

/// What the page says of the run besides the fold: where it stands now.
pub struct PageState<'a> {
    pub fold: &'a PromFold,
    /// The running level: its index, kind and label.
    pub level: Option<(u32, &'a str, String)>,
    pub in_flight: u64,
    /// `2/4` for a shard, "" for a whole run.
    pub shard: String,
    pub simulated: bool,
    /// The run has ended.
    pub finished: bool,
}

/// The `/metrics` page.
pub fn render(l: &PageState<'_>) -> String {
    let f = l.fold;
    let mut out = String::with_capacity(4096);
    let _ = writeln!(
        out,
        "# HELP servetop_info The servetop process: its version, shard, and whether the server is servetop's simulator.\n# TYPE servetop_info gauge\nservetop_info{{version=\"{}\",shard=\"{}\",simulated=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        l.shard,
        l.simulated
    );
    let _ = writeln!(
        out,
        "# HELP servetop_requests_total Measured requests that ended, by outcome (and failure kind).\n# TYPE servetop_requests_total counter"
    );
    let _ = writeln!(out, "servetop_requests_total{{outcome=\"ok\"}} {}", f.ok);
    let _ = writeln!(
        out,
        "servetop_requests_total{{outcome=\"cancelled\"}} {}",
        f.cancelled
    );
    for (k, n) in crate::metrics::FailureKind::ALL.iter().zip(f.failed) {
        let _ = writeln!(
            out,
            "servetop_requests_total{{outcome=\"failed\",kind=\"{}\"}} {n}",
            k.name()
        );
    }
    for (name, help, v) in [
        (
            "servetop_input_tokens_total",
            "Prompt tokens of the requests that completed.",
            f.input_tokens,
        ),
        (
            "servetop_output_tokens_total",
            "Output tokens of the requests that completed.",
            f.output_tokens,
        ),
    ] {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
        );
    }
    f.ttft.write(
        &mut out,
        "servetop_ttft_seconds",
        "Time to first token, from the request's send.",
    );
    f.itl.write(
        &mut out,
        "servetop_itl_seconds",
        "Inter-token latency, each chunk gap split over its tokens (one sample per token).",
    );
    f.tpot.write(
        &mut out,
        "servetop_tpot_seconds",
        "Time per output token after the first: (E2E - TTFT) / (output - 1).",
    );
    f.e2e.write(
        &mut out,
        "servetop_e2e_seconds",
        "End-to-end latency, send to last token.",
    );
    let _ = writeln!(
        out,
        "# HELP servetop_in_flight Requests of the running level in flight now.\n# TYPE servetop_in_flight gauge\nservetop_in_flight {}",
        l.in_flight
    );
    let _ = writeln!(
        out,
        "# HELP servetop_level The running level's index in the plan (-1 between levels and after the run).\n# TYPE servetop_level gauge\nservetop_level{} {}",
        l.level
            .as_ref()
            .map_or(String::new(), |(_, kind, label)| format!(
                "{{kind=\"{kind}\",label=\"{}\"}}",
                label.replace('"', "'")
            )),
        l.level.as_ref().map_or(-1, |(i, _, _)| i64::from(*i))
    );
    let _ = writeln!(
        out,
        "# HELP servetop_run_finished 1 once the run has ended.\n# TYPE servetop_run_finished gauge\nservetop_run_finished {}",
        u8::from(l.finished)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::TokenChunk;

    #[test]
    fn histograms_count_what_was_observed() {
        let mut f = PromFold::default();
        let mut r = crate::metrics::record::tests::record(30_000, 1_030_000, 11);
        // Ten 90 ms gaps of one token each, then an 80 ms gap over two tokens.
        r.chunks = (0..=10)
            .map(|k| TokenChunk::new(30_000 + k * 90_000, 1))
            .collect();
        r.chunks.push(TokenChunk::new(1_010_000, 2));
        f.observe(&r);
        let mut warm = r.clone();
        warm.warmup = true;
        f.observe(&warm);
        let page = render(&PageState {
            fold: &f,
            level: Some((2, "sweep", "C=8".into())),
            in_flight: 3,
            shard: "1/4".into(),
            simulated: true,
            finished: false,
        });
        assert!(
            page.contains("servetop_requests_total{outcome=\"ok\"} 1\n"),
            "{page}"
        );
        assert!(page.contains("servetop_output_tokens_total 11\n"), "{page}");
        // TTFT 30 ms: above the 25 ms bound, within 50 ms.
        assert!(
            page.contains("servetop_ttft_seconds_bucket{le=\"0.025\"} 0\n"),
            "{page}"
        );
        assert!(
            page.contains("servetop_ttft_seconds_bucket{le=\"0.05\"} 1\n"),
            "{page}"
        );
        // ITL: ten tokens at 90 ms, two at 40 ms: twelve samples.
        assert!(
            page.contains("servetop_itl_seconds_bucket{le=\"0.05\"} 2\n"),
            "{page}"
        );
        assert!(
            page.contains("servetop_itl_seconds_bucket{le=\"0.1\"} 12\n"),
            "{page}"
        );
        assert!(page.contains("servetop_itl_seconds_count 12\n"), "{page}");
        assert!(
            page.contains("servetop_level{kind=\"sweep\",label=\"C=8\"} 2\n"),
            "{page}"
        );
        assert!(page.contains("servetop_in_flight 3\n"), "{page}");
        assert!(page.contains("shard=\"1/4\",simulated=\"true\""), "{page}");
    }
}
