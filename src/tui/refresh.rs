//! The update step's views: what the charts, the baseline deltas and the latency panel show,
//! computed from the summaries and the fold of the level in progress each time they change
//! (never in render).

use crate::metrics::LevelStats;
use crate::summary::passes::{Passes, points};
use crate::summary::{LevelStatus, LevelSummary};
use crate::workload::LevelKind;

use super::app::App;
use super::views::{Curve, DetailView, LatencyView, LongView, SweepView, TraceView};

/// `levels`' table rows: their positions, the headline series' first, then each other
/// series', each in plan order.
fn rows(passes: &Passes, levels: &[LevelSummary]) -> Vec<usize> {
    let at: std::collections::BTreeMap<u32, usize> = levels
        .iter()
        .enumerate()
        .map(|(i, l)| (l.index, i))
        .collect();
    passes
        .in_order(levels)
        .iter()
        .filter_map(|l| at.get(&l.index).copied())
        .collect()
}

impl App {
    /// The level whose points the charts label: the one running once it has results, else
    /// the last with results.
    fn highlighted(&self, levels: &[&LevelSummary]) -> Option<u32> {
        let has_results = |i: u32| self.level_stats(i).is_some_and(|s| s.scalars.completed > 0);
        levels
            .iter()
            .find(|l| self.session.current == Some(l.index) && has_results(l.index))
            .or_else(|| levels.iter().rev().find(|l| has_results(l.index)))
            .map(|l| l.index)
    }

    /// One curve per series of `passes` (the headline's first) over `levels`, of `y` of each
    /// level's statistics at its `x`: a level's finished runs one point (their mean), the
    /// level in progress apart from the line, each series' highlighted level, the baseline's
    /// `base` against the headline (docs/outputs.md "Passes").
    fn curves(
        &self,
        (passes, levels): (&Passes, &[&LevelSummary]),
        x: impl Fn(&LevelSummary) -> f64,
        y: impl Fn(Option<&LevelStats>) -> Option<f64>,
        base: impl Fn(&crate::summary::baseline::BaselineLevel) -> Option<f64>,
    ) -> Vec<Curve> {
        let s = &self.session.summary;
        passes
            .series()
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let mine: Vec<&LevelSummary> =
                    levels.iter().copied().filter(|l| p.holds(l)).collect();
                let mut c = Curve {
                    label: p.label.clone(),
                    ..Curve::default()
                };
                let lit = self.highlighted(&mine);
                let (running, ended): (Vec<&LevelSummary>, Vec<&LevelSummary>) =
                    mine.iter().partition(|l| l.status == LevelStatus::Running);
                for pt in points(ended, &x, |l| y(self.level_stats(l.index))) {
                    let on = lit.is_some_and(|i| pt.levels.contains(&i));
                    c.add(pt.x, Some(pt.mean()), None, on);
                }
                if let Some(l) = running.first() {
                    c.add_running(x(l), y(self.level_stats(l.index)), None);
                }
                if k == 0 {
                    // A level's first run stands for it against the baseline.
                    for l in mine.iter().filter(|l| l.repeat.is_none_or(|r| r.n == 1)) {
                        if let Some(b) = s.baseline_for(l).and_then(&base) {
                            c.base.push((x(l), b));
                        }
                    }
                }
                c
            })
            .collect()
    }

    /// Recomputes the chart points, the table rows, the baseline deltas and the latency panel
    /// from the summaries and the fold of the level in progress.
    pub(super) fn refresh_views(&mut self) {
        use crate::metrics::curves::{self, at};
        let s = &self.session.summary;
        let passes = s.passes();
        let mut sv = SweepView::default();
        let sweep: Vec<&LevelSummary> = s.sweep.iter().collect();
        let log2c = |l: &LevelSummary| f64::from(l.concurrency.max(1)).log2();
        for l in &s.sweep {
            let x = log2c(l);
            sv.x_max = sv.x_max.max(x);
            if !sv.ticks.iter().any(|t| t.0.to_bits() == x.to_bits()) {
                sv.ticks.push((x, l.concurrency.to_string()));
            }
        }
        sv.ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let on = (&passes, sweep.as_slice());
        sv.aggregate = self.curves(
            on,
            log2c,
            |st| at(st, curves::OUTPUT_TOK_S),
            |b| b.output_throughput,
        );
        sv.per_stream = self.curves(
            on,
            log2c,
            |st| at(st, curves::DECODE_TOK_S),
            |b| b.decode_tok_s,
        );
        sv.ttft_p50 = self.curves(on, log2c, |st| at(st, curves::TTFT_MS.p50), |_| None);
        sv.ttft_p99 = self
            .curves(on, log2c, |st| at(st, curves::TTFT_MS.p99), |_| None)
            .swap_remove(0)
            .points;
        sv.sweep_rows = rows(&passes, &s.sweep);
        sv.rate_rows = rows(&passes, &s.rates);
        for &i in &sv.sweep_rows {
            let l = &s.sweep[i];
            if let Some(d) = self
                .level_stats(l.index)
                .and_then(|st| st.dists.ttft_ms.as_ref())
            {
                let mut label = l.short_label();
                if passes.several() {
                    label = format!("{label} · {}", passes.of_level(l).label);
                }
                sv.ttft_by_level.push((label, [d.p50, d.p90, d.p99]));
            }
        }
        self.rate_points(&passes, &mut sv);
        self.views.deltas = s
            .levels()
            .filter_map(|l| {
                let base = s.baseline_for(l)?;
                let limit = s.baseline.as_ref().and_then(|b| b.fail_on_regression_pct);
                let c = crate::summary::baseline::compare(
                    l.index,
                    l.label(),
                    base,
                    self.level_stats(l.index),
                    limit,
                );
                Some((l.index, c))
            })
            .collect();
        self.views.sweep = sv;
        self.views.accept_history = s
            .sweep
            .iter()
            .filter_map(LevelSummary::accept_length_client)
            .map(|a| (a * 100.0).round() as u64)
            .collect();
        self.views.long = self.long_points(&passes);
        self.views.trace = self.trace_points();
        self.views.findings = super::views::FindingsView::of(s);
        self.views.waiting_eta = crate::summary::eta::waiting(s);
        if self.views.detail.is_some() {
            self.refresh_detail();
        }
    }

    /// The long-context ladder's points, and each length's expected prefill time.
    fn long_points(&self, passes: &Passes) -> LongView {
        use crate::metrics::curves::{self, at};
        let s = &self.session.summary;
        let mut lv = LongView::default();
        let k = |l: &LevelSummary| l.input_len as f64 / 1000.0;
        for l in &s.long_context {
            // Skipped lengths have no point; stretching the axis to them squeezes the others.
            let x = k(l);
            if l.status != LevelStatus::Skipped
                && !lv.ticks.iter().any(|t| t.0.to_bits() == x.to_bits())
            {
                lv.x_max = lv.x_max.max(x);
                lv.ticks.push((x, crate::fmt::fmt_tokens(l.input_len)));
            }
        }
        lv.ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let long: Vec<&LevelSummary> = s.long_context.iter().collect();
        let on = (passes, long.as_slice());
        lv.ttft_s = self.curves(on, k, |st| at(st, curves::TTFT_MEAN_S), |b| b.ttft_mean_s);
        lv.prefill = self.curves(
            on,
            k,
            |st| at(st, curves::PREFILL_TOK_S),
            |b| b.prefill_tok_s,
        );
        lv.decode = self.curves(on, k, |st| at(st, curves::DECODE_TOK_S), |b| b.decode_tok_s);
        lv.rows = rows(passes, &s.long_context);
        lv.prefill_estimate = prefill_estimate(s, |i| self.level_stats(i));
        if let Some((rate, _)) = lv.prefill_estimate.as_ref().filter(|(r, _)| *r > 0.0) {
            let headline = passes.headline();
            for l in &s.long_context {
                if l.status != LevelStatus::Skipped {
                    let secs = l.input_len as f64 / rate;
                    // A length's later runs and other passes are the same point on the chart.
                    if headline.holds(l) && l.repeat.is_none_or(|r| r.n == 1) {
                        lv.expected_ttft_s.push((k(l), secs));
                    }
                    lv.expected_by_level.insert(l.index, secs);
                }
            }
        }
        lv
    }

    /// The rate levels' points, a curve per series, in rate order.
    fn rate_points(&self, passes: &Passes, sv: &mut SweepView) {
        use crate::metrics::curves::{self, at};
        let rated: Vec<&LevelSummary> = self
            .session
            .summary
            .rates
            .iter()
            // A level of every request at once (`inf`) has no place on a rate axis.
            .filter(|l| l.request_rate().is_some_and(f64::is_finite))
            .collect();
        for x in rated.iter().filter_map(|l| l.request_rate()) {
            sv.rate_max = sv.rate_max.max(x);
            if !sv.rate_offered.iter().any(|p| p.0.to_bits() == x.to_bits()) {
                sv.rate_offered.push((x, x));
            }
        }
        let on = (passes, rated.as_slice());
        let rate = |l: &LevelSummary| l.request_rate().unwrap_or(0.0);
        sv.rate_done = self.curves(on, rate, |st| at(st, curves::REQUESTS_S), |_| None);
        sv.rate_ttft_p99 = self.curves(on, rate, |st| at(st, curves::TTFT_MS.p99), |_| None);
        sv.rate_queue_p99 =
            self.curves(on, rate, |st| at(st, curves::CLIENT_QUEUE_MS.p99), |_| None);
        // Search probes run in bisection order; the charts draw lines in rate order. The rate
        // level in progress is a point of its line, as it stands.
        sv.rate_offered.sort_by(|a, b| a.0.total_cmp(&b.0));
        for c in sv
            .rate_done
            .iter_mut()
            .chain(&mut sv.rate_ttft_p99)
            .chain(&mut sv.rate_queue_p99)
        {
            c.points.extend(c.running.take());
            c.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }

    /// A replayed trace over its timeline: what the trace has due in each bin (from the trace
    /// itself), and what has finished so far with its TTFT.
    fn trace_points(&self) -> TraceView {
        let s = &self.session.summary;
        let mut tv = TraceView::default();
        let Some(l) = s.traces.first() else {
            return tv;
        };
        let span = l.trace.as_ref().map_or(0.0, |t| t.duration_s);
        let width = crate::metrics::timeline::TimelineFold::width_for(span);
        tv.x_max = span.max(width);
        if let Some(t) = s.config.trace.as_ref().and_then(|t| t.loaded.as_ref()) {
            let mut due = vec![0u64; (span / width).floor() as usize + 1];
            for r in &t.requests {
                let i = ((r.at_ms / 1000.0 / width) as usize).min(due.len() - 1);
                due[i] += 1;
            }
            tv.due = due
                .iter()
                .enumerate()
                .map(|(i, n)| (i as f64 * width, *n as f64 / width))
                .collect();
        }
        let Some(st) = self.level_stats(l.index) else {
            return tv;
        };
        for b in &st.scalars.timeline {
            tv.done
                .push((b.start_s, (b.sent - b.failed) as f64 / width));
            if let Some(v) = b.ttft_p50_ms {
                tv.ttft_p50.push((b.start_s, v));
            }
            if let Some(v) = b.ttft_p99_ms {
                tv.ttft_p99.push((b.start_s, v));
            }
        }
        tv
    }

    /// The running level's steady window for the live-rate panel (its statistics so far): the
    /// first completion, and the last send once the level has sent every request.
    fn refresh_steady_ticks(&mut self) {
        let mut ticks = Vec::new();
        let sc = self.views.current_stats.as_ref().map(|s| &s.scalars);
        let level = self
            .session
            .current
            .and_then(|i| self.session.summary.level(i));
        if let (Some(sc), Some(l)) = (sc, level) {
            if let Some(from) = sc.steady_from_s {
                ticks.push((from, "steady".to_string()));
            }
            let all_sent = self
                .session
                .progress
                .get(&l.index)
                .is_some_and(|p| p.sent >= u64::from(l.requests));
            if let Some(to) = sc.steady_to_s.filter(|_| all_sent) {
                ticks.push((to, "drain".to_string()));
            }
        }
        self.clocked.rate.steady_ticks = ticks;
    }

    /// Seconds long-context level `index` should take to prefill, at the speed the run has
    /// seen (computed with the views).
    pub fn expected_prefill_s(&self, index: u32) -> Option<f64> {
        self.views.long.expected_by_level.get(&index).copied()
    }

    /// The latency panel: the TTFT histogram of the level in progress, as its fold has it.
    /// Only the sweep tab's levels (concurrency, rate and trace levels) feed it. Bins: about the
    /// square root of the requests, from 4 to [`super::views::LATENCY_BINS`], so a level of a
    /// dozen requests does not read as a barcode.
    pub(super) fn refresh_latency(&mut self) {
        self.refresh_steady_ticks();
        let sweep_tab = |l: &&crate::summary::LevelSummary| {
            matches!(
                l.kind,
                LevelKind::Sweep | LevelKind::Rate | LevelKind::Trace | LevelKind::Sessions
            )
        };
        // The level in progress; once it has ended (its last requests may have come in the
        // same batch as its end), its final figures, so the panel follows it to the end.
        let Some(l) = self
            .session
            .current
            .and_then(|i| self.session.summary.level(i))
            .filter(sweep_tab)
            .or_else(|| {
                self.session
                    .summary
                    .levels()
                    .filter(sweep_tab)
                    .filter(|l| l.stats.is_some())
                    .max_by_key(|l| l.finished_at_unix_ms)
            })
        else {
            return;
        };
        let Some(d) = self
            .level_stats(l.index)
            .and_then(|s| s.dists.ttft_ms.clone())
        else {
            return;
        };
        let Some(bins) = self.session.live_ttft_bins(l.index, bins_for(d.count)) else {
            return;
        };
        self.views.latency = Some(histogram(l.label(), &d, bins));
    }
}

/// The prefill speed to expect of the next long prompt, and where it was seen: the longest
/// length done so far, else the concurrency sweep's single stream.
fn prefill_estimate<'a>(
    s: &crate::summary::RunSummary,
    stats: impl Fn(u32) -> Option<&'a LevelStats>,
) -> Option<(f64, String)> {
    use crate::metrics::curves::{self, at};
    let long = s
        .long_context
        .iter()
        .filter_map(|l| Some((l, at(stats(l.index), curves::PREFILL_TOK_S)?)))
        .filter(|(l, _)| l.status == crate::summary::LevelStatus::Done)
        .max_by_key(|(l, _)| l.input_len);
    if let Some((l, r)) = long {
        return Some((r, format!("at {}", crate::fmt::fmt_tokens(l.input_len))));
    }
    s.sweep
        .iter()
        .filter(|l| l.concurrency == 1)
        .find_map(|l| at(stats(l.index), curves::PREFILL_TOK_S))
        .map(|r| (r, "at C=1".to_string()))
}

/// `d`'s p50/p90/p99 as `a/b/c`, or `-`.
fn ppp(d: Option<&crate::metrics::DistStats>) -> String {
    use crate::fmt::num;
    d.map_or("-".into(), |d| {
        format!(
            "{}/{}/{}",
            num(Some(d.p50)),
            num(Some(d.p90)),
            num(Some(d.p99))
        )
    })
}

/// A histogram view of `d` over `bins`.
fn histogram(
    label: String,
    d: &crate::metrics::DistStats,
    bins: crate::metrics::dist::Bins,
) -> LatencyView {
    LatencyView {
        label,
        bins,
        p50: d.p50,
        p90: d.p90,
        p99: d.p99,
        count: d.count,
    }
}

/// Histogram bars for `count` values: about √count, within the panel's limit.
fn bins_for(count: u64) -> usize {
    ((count as f64).sqrt().ceil() as usize).clamp(4, super::views::LATENCY_BINS)
}

impl App {
    /// Recomputes the open level details (or opens them on the picked level).
    pub(super) fn refresh_detail(&mut self) {
        let Some(index) = self
            .ui
            .selected
            .or(self.views.detail.as_ref().map(|v| v.index))
        else {
            return;
        };
        self.views.detail = self.detail_of(index);
    }

    /// The details of level `index`.
    fn detail_of(&self, index: u32) -> Option<DetailView> {
        use crate::fmt::num;
        let l = self.session.summary.level(index)?;
        let mut v = DetailView {
            index,
            title: format!("{} · {}", l.label(), l.status.name()),
            ..DetailView::default()
        };
        let Some(st) = self.level_stats(index) else {
            v.note = Some(match l.reason.as_deref() {
                Some(r) => format!("not run: {r}"),
                None => "no request of this level has ended yet".into(),
            });
            return Some(v);
        };
        let (sc, ds) = (&st.scalars, &st.dists);
        let per_request = |n: u64| num(Some(n as f64 / sc.completed.max(1) as f64));
        v.facts = vec![
            format!("{} done", sc.completed),
            format!("{} failed", sc.failed),
            format!("{} cancelled", sc.cancelled),
            format!("{} s", num(Some(sc.duration_s))),
            format!("out {} tok/s", num(Some(sc.output_throughput))),
            format!("{} req/s", num(Some(sc.request_throughput))),
            format!("peak {} in flight", sc.max_concurrent_requests),
            format!("TTFT p50/90/99 {} ms", ppp(ds.ttft_ms.as_ref())),
            format!("TPOT {} ms", ppp(ds.tpot_ms.as_ref())),
            format!("ITL {} ms", ppp(ds.itl_ms.as_ref())),
            format!("E2E {} ms", ppp(ds.e2el_ms.as_ref())),
            format!(
                "per-stream decode p50 {} tok/s",
                num(ds.decode_tokens_per_s.as_ref().map(|d| d.p50))
            ),
            format!("accept {}", num(l.accept_length_client())),
            format!(
                "{} in → {} out tokens a request",
                per_request(sc.total_input_tokens),
                per_request(sc.total_output_tokens)
            ),
        ];
        if l.range_ratio.is_some()
            && let (Some(i), Some(o)) = (
                ds.input_tokens_per_request.as_ref(),
                ds.output_tokens_per_request.as_ref(),
            )
        {
            v.facts.push(format!(
                "lengths {}-{} in, {}-{} out",
                i.min, i.max, o.min, o.max
            ));
        }
        // One fact a kind of image: its image tokens and TTFT median.
        v.facts.extend(sc.images.iter().map(|(label, st)| {
            format!(
                "images {label}: {} image tokens, TTFT p50 {} ms",
                num(st.mean_image_tokens),
                num(st.median_ttft_ms)
            )
        }));
        // One fact an adapter: its share, TTFT and TPOT medians.
        v.facts.extend(sc.lora.iter().map(|(name, a)| {
            format!(
                "{name}: {} done ({}%), TTFT p50 {} ms, TPOT p50 {} ms",
                a.completed,
                num(Some(a.share * 100.0)),
                num(a.median_ttft_ms),
                num(a.median_tpot_ms)
            )
        }));
        v.failures = sc
            .failures
            .iter()
            .map(|(kind, f)| format!("{kind} ×{}: {}", f.count, f.first_message))
            .collect();
        let Some(acc) = self.session.accumulator(index) else {
            v.note = Some(
                "its histograms and timeline were measured before this run was resumed: results.json keeps its figures".into(),
            );
            return Some(v);
        };
        v.ttft = ds.ttft_ms.as_ref().and_then(|d| {
            Some(histogram(
                "TTFT".into(),
                d,
                acc.ttft_bins(bins_for(d.count))?,
            ))
        });
        v.itl = ds
            .itl_ms
            .as_ref()
            .and_then(|d| Some(histogram("ITL".into(), d, acc.itl_bins(bins_for(d.count))?)));
        v.tokens_per_s = acc.tokens_by_second().to_vec();
        v.ends_per_s = acc.ends_by_second().to_vec();
        Some(v)
    }
}
