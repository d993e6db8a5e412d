//! What the tabs draw, computed as events arrive (never in render): the views derived from the
//! session ([`Views`]), the live output rate, and the telemetry time series.

use std::time::Duration;

/// What the screen draws that is computed from the session and the fold of the level in
/// progress (docs/STYLE.md rule 4): refreshed in update as events arrive (refresh.rs), only read
/// while drawing.
#[derive(Clone, Debug, Default)]
pub struct Views {
    /// Statistics of the level in progress, refreshed once a batch as records arrive.
    pub current_stats: Option<crate::metrics::LevelStats>,
    /// Records came in since `current_stats` was refreshed: refresh at the batch's end.
    pub(super) stats_dirty: bool,
    pub sweep: SweepView,
    pub long: LongView,
    /// A replayed trace's latency over its timeline.
    pub trace: TraceView,
    pub findings: FindingsView,
    /// The levels still waiting, estimated from those measured.
    pub waiting_eta: Option<crate::summary::eta::Eta>,
    /// The TTFT histogram of the level in progress (kept when it ends, until the next has one).
    pub latency: Option<LatencyView>,
    /// Each level with a baseline match against it (`--baseline`), live for the one running.
    pub deltas: std::collections::BTreeMap<u32, crate::summary::baseline::LevelComparison>,
    /// The picked level's details (Enter), drawn in place of the tab until Esc.
    pub detail: Option<DetailView>,
    /// `(key, value)` lines of the run configuration (Log tab), built when the run starts.
    pub config_lines: Vec<(String, String)>,
    /// Client accept length of the finished sweep levels (×100, for the sparkline).
    pub accept_history: Vec<u64>,
}

/// A live time series of `(t, value)` points holding the newest [`SERIES_CAP`]: a sliding
/// window over one buffer, so a push costs amortised O(1) (the oldest half is dropped at once,
/// not one point at a time) and the charts read the points as one contiguous slice (which a
/// `VecDeque` that has wrapped cannot give without rearranging itself, and render only reads).
#[derive(Clone, Debug, Default)]
pub struct Series {
    points: Vec<(f64, f64)>,
    start: usize,
}

impl Series {
    /// Appends a point; past [`SERIES_CAP`] points the oldest leaves the window.
    pub fn push(&mut self, p: (f64, f64)) {
        self.points.push(p);
        if self.points.len() - self.start > SERIES_CAP {
            self.start += 1;
            if self.start >= SERIES_CAP {
                self.points.drain(..self.start);
                self.start = 0;
            }
        }
    }
}

impl std::ops::Deref for Series {
    type Target = [(f64, f64)];

    fn deref(&self) -> &[(f64, f64)] {
        &self.points[self.start..]
    }
}

impl FromIterator<(f64, f64)> for Series {
    fn from_iter<I: IntoIterator<Item = (f64, f64)>>(iter: I) -> Self {
        let mut s = Self::default();
        for p in iter {
            s.push(p);
        }
        s
    }
}

/// Output tokens per second sampled once a second during the current level.
#[derive(Clone, Debug, Default)]
pub struct LiveRate {
    /// `(seconds since the level started, tokens/s)`.
    pub series: Series,
    pub(super) level_start: Option<Duration>,
    pub(super) last: Option<(Duration, u64)>,
    /// The latest one-second rate.
    pub current: f64,
    /// The curves of the levels that ended, oldest first (the newest [`FINISHED_CURVES`]),
    /// each with its level's label: the panel shows them between levels and after.
    pub finished: Vec<(String, Vec<(f64, f64)>)>,
    /// The running level's steady window on the panel's time axis: `steady` at its first
    /// completion, `drain` at its last send once every request is out.
    pub steady_ticks: Vec<(f64, String)>,
}

/// Finished levels' live-rate curves kept for the panel.
pub const FINISHED_CURVES: usize = 6;

impl LiveRate {
    /// The level in progress ended: its curve joins the finished ones when it has a label
    /// (a level of the sweep tab's).
    pub(super) fn level_ended(&mut self, label: Option<String>) {
        if let Some(label) = label.filter(|_| !self.series.is_empty()) {
            self.finished.push((label, self.series.to_vec()));
            let over = self.finished.len().saturating_sub(FINISHED_CURVES);
            self.finished.drain(..over);
        }
        self.series = Series::default();
        self.steady_ticks.clear();
        self.level_start = None;
        self.last = None;
    }
}

/// One curve of a chart over the levels, one series of the run's passes (docs/outputs.md
/// "Passes"): its points (a level's `--repeat` runs one point, their mean), the baseline's for
/// the same levels (`--baseline`, the headline's curve only), and the highlighted level's
/// point (the one running, else the last).
#[derive(Clone, Debug, Default)]
pub struct Curve {
    /// The series' pass label (`plain`, `json`, `think 64`); empty in a run of one series.
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub base: Vec<(f64, f64)>,
    pub highlight: Option<(f64, f64)>,
    /// The level in progress, so far: drawn apart from the line (a partial figure is no point
    /// of the curve) and its value written with an ellipsis.
    pub running: Option<(f64, f64)>,
}

impl Curve {
    /// Adds this run's value `y` (if any) and the baseline's `b` (if any) at `x`; `highlight`
    /// marks the point as the highlighted level's.
    pub(super) fn add(&mut self, x: f64, y: Option<f64>, b: Option<f64>, highlight: bool) {
        if let Some(y) = y {
            self.points.push((x, y));
            if highlight {
                self.highlight = Some((x, y));
            }
        }
        if let Some(b) = b {
            self.base.push((x, b));
        }
    }

    /// Adds the level in progress: its value so far `y` (if any) apart from the line, and the
    /// baseline's `b` (if any) at `x`.
    pub(super) fn add_running(&mut self, x: f64, y: Option<f64>, b: Option<f64>) {
        self.running = y.map(|y| (x, y));
        if let Some(b) = b {
            self.base.push((x, b));
        }
    }
}

/// Chart points of the sweep, computed in update: each chart a curve per series of the run's
/// passes, the headline's first.
#[derive(Clone, Debug, Default)]
pub struct SweepView {
    /// `(log2 C, output tok/s)` per level with results (the running level live).
    pub aggregate: Vec<Curve>,
    /// `(log2 C, mean per-stream decode tok/s)`.
    pub per_stream: Vec<Curve>,
    /// `(log2 C, TTFT p50 ms)` (the live-rate panel of a saved run, which has no live rate),
    /// and the headline's p99.
    pub ttft_p50: Vec<Curve>,
    pub ttft_p99: Vec<(f64, f64)>,
    /// A tick at every planned level: `(log2 C, C)`.
    pub ticks: Vec<(f64, String)>,
    /// Largest log2 C planned.
    pub x_max: f64,
    /// Rate levels: `(offered req/s, completed req/s)`.
    pub rate_done: Vec<Curve>,
    /// Rate levels: `(offered req/s, offered req/s)`, the line completions should follow.
    pub rate_offered: Vec<(f64, f64)>,
    /// Rate levels: `(offered req/s, TTFT p99 ms)`.
    pub rate_ttft_p99: Vec<Curve>,
    /// Rate levels: `(offered req/s, client queue p99 ms)`.
    pub rate_queue_p99: Vec<Curve>,
    /// Largest rate planned.
    pub rate_max: f64,
    /// The sweep's and the rate levels' table rows: positions in the summary's `sweep` and
    /// `rates`, the headline series' levels first, then each other series'.
    pub sweep_rows: Vec<usize>,
    pub rate_rows: Vec<usize>,
    /// A saved run's TTFT p50, p90 and p99 by sweep level, in the rows' order, each level
    /// named by its short label and, with several passes, its pass (`C=8 · json`).
    pub ttft_by_level: Vec<(String, [f64; 3])>,
}

/// `levels` in the order of `rows` (positions in it), or as they are when `rows` is not theirs
/// (views not computed yet).
pub fn in_rows<'a, T>(rows: &[usize], levels: &'a [T]) -> Vec<&'a T> {
    if rows.len() == levels.len() && rows.iter().all(|&i| i < levels.len()) {
        rows.iter().map(|&i| &levels[i]).collect()
    } else {
        levels.iter().collect()
    }
}

/// The findings tab: each finding's sentence, its strength when it is not solid and its
/// caveats' numbers, and the caveats, numbered as summary.md numbers them (computed in update
/// as levels end).
#[derive(Clone, Debug, Default)]
pub struct FindingsView {
    pub findings: Vec<(String, Option<&'static str>, Vec<usize>)>,
    pub caveats: Vec<String>,
}

impl FindingsView {
    pub fn of(s: &crate::summary::RunSummary) -> Self {
        let n = crate::summary::findings::CaveatNumbers::of(s);
        Self {
            findings: s
                .findings
                .iter()
                .map(|f| {
                    let weak = (f.strength != crate::summary::findings::Strength::Solid)
                        .then(|| f.strength.name());
                    (f.text.clone(), weak, n.of_finding(f))
                })
                .collect(),
            caveats: n.list().to_vec(),
        }
    }
}

/// Chart points of a replayed trace over its timeline (seconds into the trace, by when its
/// requests were due), computed in update.
#[derive(Clone, Debug, Default)]
pub struct TraceView {
    /// Requests/s the trace has due in each bin (from the trace itself: the whole replay).
    pub due: Vec<(f64, f64)>,
    /// Requests/s of each bin's requests that have finished, so far.
    pub done: Vec<(f64, f64)>,
    /// TTFT p50 and p99 of each bin's finished requests.
    pub ttft_p50: Vec<(f64, f64)>,
    pub ttft_p99: Vec<(f64, f64)>,
    /// The trace's span in seconds.
    pub x_max: f64,
}

/// Chart points of the long-context ladder, computed in update.
#[derive(Clone, Debug, Default)]
pub struct LongView {
    /// `(context in K tokens, mean TTFT in s)`, a curve per series of the passes.
    pub ttft_s: Vec<Curve>,
    /// `(context in K tokens, prefill tok/s)`.
    pub prefill: Vec<Curve>,
    /// `(context in K tokens, decode tok/s)`.
    pub decode: Vec<Curve>,
    /// The table's rows: positions in the summary's `long_context`, the headline's first.
    pub rows: Vec<usize>,
    /// A tick at every planned length: `(K tokens, "30K")`.
    pub ticks: Vec<(f64, String)>,
    /// The prefill speed (tokens/s) to expect of the next length, and where it was seen.
    pub prefill_estimate: Option<(f64, String)>,
    /// `(context in K tokens, seconds)`: each length's TTFT at that speed.
    pub expected_ttft_s: Vec<(f64, f64)>,
    /// The same seconds by level index.
    pub expected_by_level: std::collections::BTreeMap<u32, f64>,
    /// Largest planned context in K tokens.
    pub x_max: f64,
}

/// The TTFT of a level in equal bins, with its percentiles, for the latency panel.
#[derive(Clone, Debug, Default)]
pub struct LatencyView {
    /// The level's short label.
    pub label: String,
    pub bins: crate::metrics::dist::Bins,
    /// p50, p90, p99 in ms.
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    /// Requests counted.
    pub count: u64,
}

/// A level picked in a table (↑↓ then Enter), drawn in place of the tab's body: its figures,
/// its TTFT and ITL histograms, its output tokens over time and its failures.
#[derive(Clone, Debug, Default)]
pub struct DetailView {
    pub index: u32,
    /// The level's label and status.
    pub title: String,
    /// Its figures, each a short phrase (drawn joined by ` · `, as many to a line as fit).
    pub facts: Vec<String>,
    pub ttft: Option<LatencyView>,
    pub itl: Option<LatencyView>,
    /// Output tokens a second, from the level's start.
    pub tokens_per_s: Vec<u64>,
    /// Requests ended a second (completed or failed), from the level's start.
    pub ends_per_s: Vec<u64>,
    /// Each kind of failure: count and first message.
    pub failures: Vec<String>,
    /// Why the level has no histograms (measured before a resume, or not yet started).
    pub note: Option<String>,
}

/// Bars in the latency panel's histogram.
pub const LATENCY_BINS: usize = 40;

/// The configuration as `(key, value)` lines, plus how prompts are sized.
pub(super) fn config_lines(s: &crate::summary::RunSummary) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&s.config) {
        for (k, v) in m {
            // The open-loop settings only matter with rate levels; then one line each.
            if k == "open_loop" {
                if let serde_json::Value::Object(ol) = v
                    && !s.config.open_loop.request_rates.is_empty()
                {
                    for (k2, v2) in ol {
                        out.push((format!("{k}.{k2}"), v2.to_string()));
                    }
                }
                continue;
            }
            let v = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            out.push((k, v));
        }
    }
    if let Some(p) = &s.prompts {
        out.push((
            "prompts".into(),
            format!("{} (server adds {} tokens)", p.description, p.offset_tokens),
        ));
    }
    out
}

/// Telemetry history for the GPU & server tab, in seconds since the dashboard started.
#[derive(Clone, Debug, Default)]
pub struct TelemetryView {
    /// Per GPU (by position in the sample): memory used in GiB and utilization in percent.
    pub gpu_mem_gib: Vec<Series>,
    pub gpu_util: Vec<Series>,
    /// Largest GPU memory in GiB (the memory chart's ceiling).
    pub gpu_mem_total_gib: f64,
    pub running: Series,
    pub queued: Series,
    pub kv_pct: Series,
    /// When each level started (vertical marks on the charts).
    pub level_marks: Vec<(f64, String)>,
}

impl TelemetryView {
    pub(super) fn add(&mut self, t: f64, rec: &crate::telemetry::TelemetryRecord) {
        use crate::telemetry::TelemetryRecord;
        const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
        match rec {
            TelemetryRecord::Gpu(g) => {
                for (i, r) in g.gpus.iter().enumerate() {
                    if self.gpu_mem_gib.len() <= i {
                        self.gpu_mem_gib.resize(i + 1, Series::default());
                        self.gpu_util.resize(i + 1, Series::default());
                    }
                    if let Some(m) = r.mem_used_bytes {
                        self.gpu_mem_gib[i].push((t, m as f64 / GIB));
                    }
                    if let Some(u) = r.util_gpu_pct {
                        self.gpu_util[i].push((t, u));
                    }
                    if let Some(total) = r.mem_total_bytes {
                        self.gpu_mem_total_gib = self.gpu_mem_total_gib.max(total as f64 / GIB);
                    }
                }
            }
            TelemetryRecord::Server(s) => {
                if let Some(v) = s.running {
                    self.running.push((t, v));
                }
                if let Some(v) = s.queued {
                    self.queued.push((t, v));
                }
                if let Some(v) = s.kv_usage {
                    self.kv_pct.push((t, v * 100.0));
                }
            }
            _ => {}
        }
    }
}

/// Largest value of the second coordinate (0 when empty).
pub fn y_max(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(0.0, f64::max)
}

/// Longest live series kept (one point a second).
pub const SERIES_CAP: usize = 3600;

#[cfg(test)]
mod tests {
    use super::*;

    /// The window keeps the newest `SERIES_CAP` points in order, across the moments it drops
    /// its oldest half.
    #[test]
    fn a_series_keeps_the_newest_points_in_order() {
        let mut s = Series::default();
        for i in 0..(3 * SERIES_CAP + 17) {
            s.push((i as f64, 0.0));
            let n = i + 1;
            assert_eq!(s.len(), n.min(SERIES_CAP));
            assert_eq!(
                s.first().map(|p| p.0),
                Some(n.saturating_sub(SERIES_CAP) as f64)
            );
            assert_eq!(s.last().map(|p| p.0), Some(i as f64));
        }
        assert!(s.points.len() < 2 * SERIES_CAP);
    }
}
