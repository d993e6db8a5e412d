//! The Markdown tables of summary.md and of the headless end-of-run output, one function a
//! table (and the cells they share).

use std::fmt::Write;

use crate::fmt::{fmt_tokens, num};
use crate::metrics::DistStats;
use crate::summary::{LevelStatus, LevelSummary, Passes, RunSummary};

/// A latency column's head: `TTFT p50 / p99 (ms)`, the percentiles `pcts` (in %).
fn at_head(metric: &str, pcts: &[f64]) -> String {
    let ps: Vec<String> = pcts
        .iter()
        .map(|&p| format!("p{}", crate::metrics::dist::percentile_word(p)))
        .collect();
    format!("{metric} {} (ms)", ps.join(" / "))
}

/// A latency cell: `d` at the percentiles `pcts`, `12.7 / 20.8`; `-` without a distribution.
fn at_cell(d: Option<&DistStats>, pcts: &[f64]) -> String {
    match d {
        Some(d) => pcts
            .iter()
            .map(|&p| num(d.percentile(p)))
            .collect::<Vec<_>>()
            .join(" / "),
        None => "-".into(),
    }
}

/// The percentiles a latency column gives: `asked` (`--metric-percentiles`), else `usual`.
fn pcts_of<'a>(asked: &'a [f64], usual: &'a [f64]) -> &'a [f64] {
    if asked.is_empty() { usual } else { asked }
}

pub(super) fn pair(
    d: Option<&DistStats>,
    a: fn(&DistStats) -> f64,
    b: fn(&DistStats) -> f64,
) -> String {
    match d {
        Some(d) => format!("{} / {}", num(Some(a(d))), num(Some(b(d)))),
        None => "-".into(),
    }
}

/// A table's levels as the tables list them (docs/outputs.md "Passes"): the headline series'
/// first, then each other series', each in plan order; and the first cell of each: with
/// several passes the level's `number` and, in a column of its own, its pass (`1 | json`),
/// else the number with what follows it in its label (a single budget's ` (think 16)`).
fn by_pass(levels: &[LevelSummary]) -> (bool, Vec<(String, &LevelSummary)>) {
    let passes = Passes::of(levels);
    let several = passes.several();
    let rows = passes
        .in_order(levels)
        .into_iter()
        .map(|l| {
            let after = if several {
                format!(" | {}", passes.of_level(l).label)
            } else {
                crate::summary::passes::suffix(l)
            };
            (after, l)
        })
        .collect();
    (several, rows)
}

/// The header cell and rule of the pass column, when the table has one.
fn pass_column(several: bool) -> (&'static str, &'static str) {
    if several {
        (" pass |", "---|")
    } else {
        ("", "")
    }
}

/// `3 (http_status 2, timeout 1)` or `0`.
pub fn failures_cell(l: &LevelSummary) -> String {
    let Some(s) = &l.stats else {
        return "-".into();
    };
    if s.scalars.failed == 0 {
        return "0".into();
    }
    let kinds: Vec<String> = s
        .scalars
        .failures
        .iter()
        .map(|(k, f)| format!("{k} {}", f.count))
        .collect();
    format!("{} ({})", s.scalars.failed, kinds.join(", "))
}

/// The sweep table.
pub fn sweep_table(levels: &[LevelSummary], asked: &[f64]) -> String {
    let (several, rows) = by_pass(levels);
    let (head, rule) = pass_column(several);
    let (two, one): (&[f64], &[f64]) = (&[50.0, 99.0], &[50.0]);
    let (ttft, itl, tpot, e2e) = (
        pcts_of(asked, two),
        pcts_of(asked, two),
        pcts_of(asked, one),
        pcts_of(asked, one),
    );
    let mut out = format!(
        "| C |{head} done | req/s | out tok/s | per-stream tok/s | {} | {} | {} | {} | accept len | failures |\n\
         |---:|{rule}---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        at_head("TTFT", ttft),
        at_head("ITL", itl),
        at_head("TPOT", tpot),
        at_head("E2E", e2e),
    );
    for (after, l) in rows {
        let Some(s) = &l.stats else {
            let _ = writeln!(
                out,
                "| {}{after} | {} | - | - | - | - | - | - | - | - | - |",
                l.concurrency,
                l.status.name()
            );
            continue;
        };
        let (sc, d) = (&s.scalars, &s.dists);
        let done = done_cell(l, sc.completed);
        let _ = writeln!(
            out,
            "| {}{after} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            l.concurrency,
            done,
            num(Some(sc.request_throughput)),
            num(Some(sc.output_throughput)),
            num(d.decode_tokens_per_s.as_ref().map(|d| d.mean)),
            at_cell(d.ttft_ms.as_ref(), ttft),
            at_cell(d.itl_ms.as_ref(), itl),
            at_cell(d.tpot_ms.as_ref(), tpot),
            at_cell(d.e2el_ms.as_ref(), e2e),
            accept_cell(l),
            failures_cell(l),
        );
    }
    out
}

/// Whether any of `levels` has an energy figure or a cost (the energy table is shown then).
pub fn any_energy(levels: &[LevelSummary]) -> bool {
    levels
        .iter()
        .any(|l| l.energy.energy_j.is_some() || l.energy.cost_per_million_output_tokens.is_some())
}

/// Energy and cost per level (docs/metrics.md "Energy and cost"); "not measured" with the
/// reason where a level has no energy.
pub fn energy_table(levels: &[LevelSummary]) -> String {
    let mut out = String::from(
        "| level | energy (J) | mean power (W) | J / output token | output tokens / J | USD / M output tokens | USD / M tokens (all) | energy from |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for l in levels.iter().filter(|l| l.stats.is_some()) {
        let e = &l.energy;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            l.label(),
            num(e.energy_j),
            num(e.mean_power_w),
            num(e.joules_per_output_token),
            num(e.output_tokens_per_joule),
            num(e.cost_per_million_output_tokens),
            num(e.cost_per_million_total_tokens),
            e.energy_source.as_deref().unwrap_or("-"),
        );
    }
    out
}

/// Whether any of `levels` reasoned or called tools (the reasoning table is shown only then).
pub fn any_reasoning(levels: &[LevelSummary]) -> bool {
    levels.iter().filter_map(|l| l.stats.as_ref()).any(|s| {
        s.scalars.reasoning_share.is_some_and(|r| r > 0.0) || s.scalars.mean_tool_calls.is_some()
    })
}

/// Thinking, answers and tool calls per level, TTFT and TTFC side by side (docs/metrics.md
/// "Reasoning and tool calls"); "none" where a level did not reason.
pub fn reasoning_table(levels: &[LevelSummary]) -> String {
    let mut out = String::from(
        "| level | TTFT p50 / p99 (ms) | TTFC p50 / p99 (ms) | thinking p50 (ms) | reasoning share | reasoning / answer tokens | answer tok/s | tool calls | first tool call p50 (ms) |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for l in levels {
        let Some(s) = &l.stats else { continue };
        let (sc, d) = (&s.scalars, &s.dists);
        let reasoned = sc.reasoning_share.is_some_and(|r| r > 0.0);
        let none = || "none".to_string();
        let tokens = format!(
            "{} / {}",
            num(sc.mean_reasoning_tokens),
            num(sc.mean_content_tokens)
        );
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            l.label(),
            pair(d.ttft_ms.as_ref(), |d| d.p50, |d| d.p99),
            if reasoned && d.ttfc_ms.is_none() {
                // No answer began: TTFC never happened (see the level's warning).
                "never".into()
            } else if reasoned {
                pair(d.ttfc_ms.as_ref(), |d| d.p50, |d| d.p99)
            } else {
                "= TTFT".into()
            },
            if reasoned {
                num(d.thinking_ms.as_ref().map(|d| d.p50))
            } else {
                none()
            },
            if reasoned {
                format!("{:.1} %", sc.reasoning_share.unwrap_or(0.0) * 100.0)
            } else {
                none()
            },
            tokens,
            num(d.content_decode_tokens_per_s.as_ref().map(|d| d.mean)),
            sc.mean_tool_calls.map_or_else(none, |m| num(Some(m))),
            d.first_tool_call_ms
                .as_ref()
                .map_or_else(none, |t| num(Some(t.p50))),
        );
    }
    out
}

/// The client's accept length (and the server's); delivery bursts are said so, never shown as one.
fn accept_cell(l: &LevelSummary) -> String {
    let client = match (l.delivery_bursts, l.stats.as_ref()) {
        (true, Some(s)) => format!(
            "— (bursts: {} tok/chunk)",
            num(s.scalars.accept_length_client)
        ),
        _ => num(l.accept_length_client()),
    };
    match l.accept_length_server {
        Some(srv) => format!("{client} / {}", num(Some(srv))),
        None => client,
    }
}

/// The rate table: configured and achieved rate, latency, client queue (wait past the schedule).
pub fn rate_table(levels: &[LevelSummary], asked: &[f64]) -> String {
    // With --slo, each level's verdict at the SLO percentile (pass?/fail?: uncertain).
    let slo = levels.iter().any(|l| l.slo.is_some());
    let (several, rows) = by_pass(levels);
    let (head, rule) = pass_column(several);
    let (two, one): (&[f64], &[f64]) = (&[50.0, 99.0], &[50.0]);
    let (ttft, tpot, e2e) = (
        pcts_of(asked, two),
        pcts_of(asked, two),
        pcts_of(asked, one),
    );
    let mut out = format!(
        "| rate (req/s) |{head} sent req/s | done | done req/s | out tok/s | {} | {} | {} | client queue p50 / p99 (ms) | peak in flight | failures |",
        at_head("TTFT", ttft),
        at_head("TPOT", tpot),
        at_head("E2E", e2e),
    );
    out.push_str(if slo { " SLO |\n" } else { "\n" });
    let _ = write!(
        out,
        "|---:|{rule}---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    out.push_str(if slo { "---|\n" } else { "\n" });
    let slo_cell = |l: &LevelSummary| match (&l.slo, slo) {
        (_, false) => String::new(),
        (Some(c), true) => format!(" {} |", c.verdict()),
        (None, true) => " - |".into(),
    };
    for (after, l) in rows {
        let rate = crate::fmt::fmt_rate(l.request_rate().unwrap_or(0.0)) + &after;
        let Some(s) = &l.stats else {
            let _ = writeln!(
                out,
                "| {rate} | - | {} | - | - | - | - | - | - | - | - |{}",
                l.status.name(),
                slo_cell(l)
            );
            continue;
        };
        let (sc, d) = (&s.scalars, &s.dists);
        let done = done_cell(l, sc.completed);
        let _ = writeln!(
            out,
            "| {rate} | {} | {done} | {} | {} | {} | {} | {} | {} | {} | {} |{}",
            num(sc.achieved_request_rate),
            num(Some(sc.request_throughput)),
            num(Some(sc.output_throughput)),
            at_cell(d.ttft_ms.as_ref(), ttft),
            at_cell(d.tpot_ms.as_ref(), tpot),
            at_cell(d.e2el_ms.as_ref(), e2e),
            pair(d.client_queue_ms.as_ref(), |d| d.p50, |d| d.p99),
            sc.max_concurrent_requests,
            failures_cell(l),
            slo_cell(l),
        );
    }
    out
}

/// The SLO search: the answer with its bracket, then one row per probe with each SLO metric's
/// percentile, its 95 % interval and the verdict.
pub fn search_section(s: &crate::workload::search::SearchSummary) -> String {
    use crate::fmt::fmt_rate;
    let mut out = String::new();
    let _ = writeln!(out, "**{}**\n", s.headline());
    if let Some(t) = &s.throughput_probe {
        let _ = writeln!(
            out,
            "Throughput bound: {} req/s, completed by a closed-loop level at C={} (the search's upper start). Each probe: {} s worth of requests, at least {}.\n",
            num(t.request_throughput),
            t.concurrency,
            num(Some(s.probe_seconds)),
            s.min_requests
        );
    }
    let by_rate = s.target == crate::workload::search::SearchTarget::Rate;
    if !by_rate {
        let _ = writeln!(
            out,
            "Each probe: a {} level, {} s worth of requests at the last probe's pace, at least {} and two a {}.\n",
            if s.sessions { "session" } else { "closed-loop" },
            num(Some(s.probe_seconds)),
            s.min_requests,
            if s.sessions { "user" } else { "stream" },
        );
    }
    let metrics: Vec<&'static str> = s.slo.limits().map(|(m, _)| m).collect();
    let pct = crate::metrics::slo::fmt_pct(s.slo.percentile);
    out.push_str(match (by_rate, s.sessions) {
        (true, _) => {
            "| probe | rate (req/s) | sent req/s | done req/s | goodput (req/s) | requests |"
        }
        (false, false) => {
            "| probe | concurrency | sent req/s | done req/s | goodput (req/s) | requests |"
        }
        (false, true) => "| probe | users | sent req/s | done req/s | goodput (req/s) | requests |",
    });
    for m in &metrics {
        let _ = write!(out, " {} p{pct} (ms) [95 % CI] |", m.to_uppercase());
    }
    out.push_str(" verdict |\n|---:|---:|---:|---:|---:|---:|");
    for _ in &metrics {
        out.push_str("---:|");
    }
    out.push_str("---|\n");
    let v = |x: Option<f64>| x.map_or("∞".to_string(), |x| num(Some(x)));
    for p in &s.probes {
        let _ = write!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            p.step,
            fmt_rate(p.at.value()),
            num(p.achieved_request_rate),
            num(p.request_throughput),
            num(p.goodput),
            p.check
                .as_ref()
                .map_or(p.requests.to_string(), |c| c.requests.to_string())
        );
        for m in &metrics {
            let cell = p
                .check
                .as_ref()
                .and_then(|c| c.metrics.iter().find(|x| x.metric == *m))
                .map_or("-".to_string(), |x| {
                    format!(
                        "{} [{}, {}] {} {}",
                        v(x.value_ms),
                        v(x.ci_low_ms),
                        v(x.ci_high_ms),
                        if x.meets { "≤" } else { ">" },
                        fmt_rate(x.limit_ms)
                    )
                });
            let _ = write!(out, " {cell} |");
        }
        let _ = writeln!(out, " {} |", p.verdict());
    }
    out.push_str("\nverdict: pass when every metric's percentile is within its limit (failed requests count as misses above every limit). `?`: uncertain — the 95 % order-statistics interval of a percentile straddles its limit, so the same level run again could go the other way; run longer probes (--search-seconds) to settle it. ∞: the bound falls beyond the successful requests (too few samples above the percentile, or failures). goodput: requests/s meeting every per-request objective.\n");
    let unsure: Vec<String> = s.uncertain().map(|p| p.at.describe()).collect();
    if !unsure.is_empty() {
        let _ = writeln!(out, "\nUncertain verdicts: {}.", unsure.join(", "));
    }
    out
}

/// How a run's rate levels send: `Poisson arrivals, ramp-up 5 s, at most 32 in flight`.
pub fn arrival_description(ol: &crate::workload::OpenLoop) -> String {
    let mut parts = vec![if (ol.burstiness - 1.0).abs() < 1e-12 {
        "Poisson arrivals".to_string()
    } else {
        format!(
            "gamma arrivals, burstiness {} ({} than Poisson)",
            num(Some(ol.burstiness)),
            if ol.burstiness < 1.0 {
                "burstier"
            } else {
                "more even"
            }
        )
    }];
    if ol.ramp_up_s > 0.0 {
        parts.push(format!("ramp-up {} s", num(Some(ol.ramp_up_s))));
    }
    parts.push(match ol.max_concurrency {
        Some(c) => format!("at most {c} in flight"),
        None => "no cap on requests in flight".into(),
    });
    parts.join(", ")
}

/// The long-context table.
pub fn long_context_table(levels: &[LevelSummary]) -> String {
    let (several, rows) = by_pass(levels);
    let (head, rule) = pass_column(several);
    let mut out = format!(
        "| context |{head} input tokens | TTFT mean (ms) | prefill tok/s | decode tok/s | status |\n\
         |---:|{rule}---:|---:|---:|---:|---|\n",
    );
    for (after, l) in &rows {
        let s = l.stats.as_ref().filter(|s| s.scalars.completed > 0);
        let status = match (&l.reason, l.status) {
            (Some(_), LevelStatus::Skipped) => "skipped (see below)".to_string(),
            (_, st) => st.name().to_string(),
        };
        let _ = writeln!(
            out,
            "| {}{after} | {} | {} | {} | {} | {} |",
            fmt_tokens(l.input_len),
            num(s.and_then(|s| s.scalars.mean_input_tokens)),
            num(s.and_then(|s| s.dists.ttft_ms.as_ref().map(|d| d.mean))),
            num(s.and_then(|s| s.dists.prefill_tokens_per_s.as_ref().map(|d| d.mean))),
            num(s.and_then(|s| s.dists.decode_tokens_per_s.as_ref().map(|d| d.mean))),
            status,
        );
    }
    for (_, l) in rows.iter().filter(|(_, l)| l.reason.is_some()) {
        let _ = writeln!(
            out,
            "\n- **{}{}**: {}",
            fmt_tokens(l.input_len),
            crate::summary::passes::suffix(l),
            l.reason.as_deref().unwrap_or_default()
        );
    }
    out
}

/// Per level and GPU: peak memory and mean utilization; the engine's mean KV usage and queue.
pub fn telemetry_table(levels: &[LevelSummary]) -> String {
    const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
    let rows: Vec<String> = levels
        .iter()
        .filter(|l| !l.gpus.is_empty() || l.server_metrics.is_some())
        .map(|l| {
            let gpus: Vec<String> = l
                .gpus
                .iter()
                .map(|g| {
                    format!(
                        "GPU{} {} GiB peak, {}% util",
                        g.index,
                        num(g.peak_mem_used_bytes.map(|b| b as f64 / GIB)),
                        num(g.mean_util_pct)
                    )
                })
                .collect();
            let sm = l.server_metrics.as_ref();
            format!(
                "| {} | {} | {} | {} | {} |",
                l.label(),
                sm.and_then(|m| m.mean_kv_usage)
                    .map_or("-".into(), |k| format!("{:.0}%", k * 100.0)),
                num(sm.and_then(|m| m.mean_running)),
                num(sm.and_then(|m| m.mean_queued)),
                if gpus.is_empty() {
                    "-".into()
                } else {
                    gpus.join("; ")
                }
            )
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\n| level | KV cache (mean) | running (mean) | queued (mean) | GPUs |\n|---|---:|---:|---:|---|\n{}\n",
        rows.join("\n")
    )
}

pub fn turns_table(s: &RunSummary) -> String {
    let mut out = String::new();
    for l in &s.multi_turn {
        let prefix = if l.shared_prefix_tokens > 0 {
            format!(
                " with a {}-token shared system prompt",
                l.shared_prefix_tokens
            )
        } else {
            String::new()
        };
        let shape = match &s.config.dataset {
            Some(_) => format!(
                "user messages from the dataset{prefix}, {} out",
                l.output_len
            ),
            None => format!(
                "{} in the first turn{prefix}, {}-token follow-ups, {} out",
                fmt_tokens(l.input_len),
                l.conversation.map_or(0, |c| c.followup_tokens),
                l.output_len
            ),
        };
        let _ = writeln!(
            out,
            "{}: {} requests planned ({shape}), {}{}\n",
            l.label(),
            l.requests,
            l.status.name(),
            l.stats
                .as_ref()
                .and_then(|s| s.scalars.prefix_cache_hit_rate)
                .map(|r| format!(
                    ", {:.1} % of prompt tokens from the prefix cache",
                    r * 100.0
                ))
                .unwrap_or_default()
        );
        out.push_str(
            "| turn | ok | failed | prompt tokens | cached | TTFT mean / p50 (ms) | TTFT p90 / p99 (ms) | TPOT mean (ms) |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for t in l.stats.iter().flat_map(|s| s.scalars.turns.iter()) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} / {} | {} / {} | {} |",
                t.turn,
                t.completed,
                t.failed,
                num(t.mean_input_tokens),
                match (t.mean_cached_tokens, t.cache_hit_rate) {
                    (Some(c), Some(r)) => format!("{c:.0} ({:.0} %)", r * 100.0),
                    _ => "not reported".into(),
                },
                num(t.mean_ttft_ms),
                num(t.median_ttft_ms),
                num(t.p90_ttft_ms),
                num(t.p99_ttft_ms),
                num(t.mean_tpot_ms),
            );
        }
    }
    out
}

/// Completed requests, with the level's status when it did not finish normally and its outage
/// when the server was away during it: `24`, `3 (interrupted)`, `24 (outage 3.1 s)`.
pub(super) fn done_cell(l: &LevelSummary, completed: u64) -> String {
    let mut notes = Vec::new();
    if l.status != LevelStatus::Done {
        notes.push(l.status.name().to_string());
    }
    if let Some(s) = l.stats.as_ref().map(|s| s.scalars.outage_s)
        && s > 0.0
    {
        notes.push(format!("outage {s:.1} s"));
    }
    if notes.is_empty() {
        completed.to_string()
    } else {
        format!("{completed} ({})", notes.join(", "))
    }
}

/// This run's levels against the baseline's (`--baseline`): each value then and now, its
/// change, and the verdict against `--fail-on-regression`. Empty without a baseline.
pub fn baseline_table(s: &RunSummary) -> String {
    use crate::metrics::curves::{self, at};
    let Some(b) = &s.baseline else {
        return String::new();
    };
    let mut out = String::from(
        "| level | out tok/s: baseline → now | Δ | TTFT p50 ms: baseline → now | Δ | TPOT p50 ms: baseline → now | Δ | verdict |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let d = |x: Option<f64>| x.map_or("-".into(), crate::summary::baseline::fmt_pct);
    for c in &b.comparisons {
        let (Some(l), Some(base)) = (
            s.level(c.index),
            s.level(c.index).and_then(|l| s.baseline_for(l)),
        ) else {
            continue;
        };
        let now = l.stats.as_ref();
        let verdict = match (&c.regression, b.fail_on_regression_pct) {
            (Some(_), Some(p)) => format!("**worse by more than {p}%**"),
            (None, Some(p)) => format!("within {p}%"),
            (_, None) => "-".into(),
        };
        let _ = writeln!(
            out,
            "| {} | {} → {} | {} | {} → {} | {} | {} → {} | {} | {verdict} |",
            c.label,
            num(base.output_throughput),
            num(at(now, curves::OUTPUT_TOK_S)),
            d(c.output_throughput_pct),
            num(base.ttft_p50_ms),
            num(at(now, curves::TTFT_MS.p50)),
            d(c.ttft_p50_pct),
            num(base.tpot_p50_ms),
            num(at(now, curves::TPOT_MS.p50)),
            d(c.tpot_p50_pct),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two passes of one concurrency are two rows that say which pass each is, in a column
    /// of its own; one pass keeps its label's ending in the first cell.
    /// `--metric-percentiles`: each latency column gives the percentiles asked for, a value at
    /// each, in order; without it the usual p50 / p99 and p50.
    #[test]
    fn latency_columns_give_the_percentiles_asked_for() {
        let s = crate::tui::fixtures::finished_run().session.summary;
        let usual = sweep_table(&s.sweep, &[]);
        assert!(
            usual.starts_with("| C | done | req/s | out tok/s | per-stream tok/s | TTFT p50 / p99 (ms) | ITL p50 / p99 (ms) | TPOT p50 (ms) | E2E p50 (ms) |"),
            "{usual}"
        );
        let t = sweep_table(&s.sweep, &[50.0, 90.0, 99.9]);
        assert!(
            t.starts_with("| C | done | req/s | out tok/s | per-stream tok/s | TTFT p50 / p90 / p99.9 (ms) | ITL p50 / p90 / p99.9 (ms) | TPOT p50 / p90 / p99.9 (ms) | E2E p50 / p90 / p99.9 (ms) |"),
            "{t}"
        );
        let d = s.sweep[0]
            .stats
            .as_ref()
            .unwrap()
            .dists
            .tpot_ms
            .clone()
            .unwrap();
        let want = format!(
            "{} / {} / {}",
            num(Some(d.p50)),
            num(Some(d.p90)),
            num(Some(d.p999))
        );
        let row = t.lines().nth(2).unwrap();
        assert_eq!(row.split(" | ").nth(7), Some(want.as_str()), "{row}");
        let r = rate_table(&s.rates, &[75.0]);
        assert!(
            r.contains("| TTFT p75 (ms) | TPOT p75 (ms) | E2E p75 (ms) |"),
            "{r}"
        );
    }

    #[test]
    fn each_rows_pass_is_named() {
        let s = crate::tui::fixtures::finished_run().session.summary;
        let (mut a, mut b) = (s.sweep[0].clone(), s.sweep[0].clone());
        a.thinking_budget = Some(16);
        b.thinking_budget = Some(64);
        b.index += 1;
        let t = sweep_table(&[a.clone(), b], &[]);
        let firsts: Vec<String> = t
            .lines()
            .map(|r| r.split(" | ").take(2).collect::<Vec<_>>().join(" | "))
            .collect();
        assert_eq!(firsts[0], "| C | pass", "{t}");
        assert_eq!(firsts[2..], ["| 1 | think 16", "| 1 | think 64"], "{t}");
        let one = sweep_table(&[a], &[]);
        assert!(one.starts_with("| C | done |"), "{one}");
        assert!(
            one.lines().nth(2).unwrap().starts_with("| 1 (think 16) | "),
            "{one}"
        );
    }

    /// A twin run's tables list the plain levels first, then the twins, each row naming its
    /// pass, the caveat numbers beside the rows they belong to; its CSV the same, with a last
    /// `pass` column.
    #[test]
    fn a_twin_runs_tables_list_the_plain_pass_first() {
        let mut s = crate::tui::fixtures::finished_twins().session.summary;
        let t = sweep_table(&s.sweep, &[]);
        let firsts: Vec<String> = t
            .lines()
            .skip(2)
            .map(|r| r.split(" | ").take(2).collect::<Vec<_>>().join(" | "))
            .collect();
        assert_eq!(
            firsts,
            [
                "| 1 | plain",
                "| 4 | plain",
                "| 8 | plain",
                "| 16 | plain",
                "| 64 | plain",
                "| 100 | plain",
                "| 1 | json",
                "| 4 | json",
                "| 8 | json",
                "| 16 | json",
                "| 64 | json",
                "| 100 | json"
            ],
            "{t}"
        );
        let lc = long_context_table(&s.long_context);
        assert!(
            lc.contains("| 16K | plain |") && lc.contains("| 8K | json |"),
            "{lc}"
        );
        // A caveat on the twin of C=1 (index 1) stands on that row, the seventh.
        s.sweep[1].stats.as_mut().unwrap().scalars.outage_s = 5.0;
        s.refresh_findings();
        let notes = crate::summary::findings::CaveatNumbers::of(&s);
        let with =
            crate::export::markdown::with_caveats(&notes, &sweep_table(&s.sweep, &[]), &s.sweep);
        let rows: Vec<&str> = with.lines().skip(2).collect();
        let cell = |i: usize| {
            notes
                .of_level(s.sweep[i].index)
                .map_or_else(String::new, crate::summary::findings::CaveatNumbers::text)
        };
        assert!(
            rows[6].starts_with("| 1 | json | 4 (outage 5.0 s) |"),
            "{with}"
        );
        assert!(rows[6].ends_with(&format!("| {} |", cell(1))), "{with}");
        assert!(rows[0].ends_with(&format!("| {} |", cell(0))), "{with}");
        assert_ne!(cell(0), cell(1));
        let csv = crate::export::csv::sweep_csv(&[("run".into(), &s)]);
        assert!(csv.lines().next().unwrap().ends_with(",energy_source,pass"));
        let last: Vec<&str> = csv
            .lines()
            .skip(1)
            .map(|l| l.rsplit(',').next().unwrap())
            .collect();
        assert_eq!(last[..6], ["plain"; 6]);
        assert_eq!(last[6..], ["json"; 6]);
        let lc = crate::export::csv::long_context_csv(&[("run".into(), &s)]);
        let last: Vec<&str> = lc
            .lines()
            .skip(1)
            .map(|l| l.rsplit(',').next().unwrap())
            .collect();
        assert_eq!(last, ["plain", "plain", "json", "json"]);
        // A run of one pass: the column is there, empty.
        let one = crate::tui::fixtures::finished_run().session.summary;
        let csv = crate::export::csv::sweep_csv(&[("run".into(), &one)]);
        assert!(csv.lines().skip(1).all(|l| l.ends_with(',')), "{csv}");
    }

    #[test]
    fn a_level_with_an_outage_says_so_in_its_done_cell_and_in_sweep_csv() {
        let mut s = crate::tui::fixtures::finished_run().session.summary;
        let with = |l: &mut LevelSummary, outage_s: f64| {
            l.stats.as_mut().unwrap().scalars.outage_s = outage_s;
        };
        with(&mut s.sweep[0], 12.04);
        with(&mut s.sweep[1], 3.0);
        s.sweep[1].status = LevelStatus::Interrupted;
        let t = sweep_table(&s.sweep, &[]);
        let rows: Vec<&str> = t.lines().skip(2).collect();
        let done = |row: &str| row.split(" | ").nth(1).unwrap().to_string();
        let n = |i: usize| s.sweep[i].stats.as_ref().unwrap().scalars.completed;
        assert_eq!(done(rows[0]), format!("{} (outage 12.0 s)", n(0)));
        assert_eq!(
            done(rows[1]),
            format!("{} (interrupted, outage 3.0 s)", n(1))
        );
        assert_eq!(done(rows[2]), n(2).to_string(), "no outage, no note");
        // The table keeps its columns.
        let cols = |l: &str| l.matches('|').count();
        assert!(t.lines().all(|l| cols(l) == cols(rows[2])), "{t}");
        let csv = crate::export::csv::sweep_csv(&[("run".into(), &s)]);
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let at = header.iter().position(|h| *h == "outage_s").unwrap();
        assert_eq!(header[at - 1], "duration_s");
        let cell = |i: usize| csv.lines().nth(i + 1).unwrap().split(',').nth(at).unwrap();
        assert_eq!((cell(0), cell(1), cell(2)), ("12.04", "3", "0"));
    }
}
