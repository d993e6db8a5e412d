//! Whether the client shaped the numbers: servetop's own CPU and timer lag over the levels,
//! and its token counts against the engine's counters.

use std::fmt::Write;

use super::{CLIENT_CPU_BOUND, Finding, HELD_SHARE, TIMER_LAG_BOUND_MS, measured, num};
use crate::summary::{LevelSummary, RunSummary};

/// Whether servetop may have been the limit at `l`: its CPU near a core, its timer late, or its
/// reads held.
pub(super) fn client_bound(l: &LevelSummary) -> Option<String> {
    let c = &l.client;
    let mut why = Vec::new();
    if let Some(x) = c.client_cpu_share.filter(|x| *x >= CLIENT_CPU_BOUND) {
        why.push(format!("it used {:.0} % of a core", x * 100.0));
    }
    if let Some(ms) = c
        .client_timer_lag_p99_ms
        .filter(|x| *x > TIMER_LAG_BOUND_MS)
    {
        why.push(format!("its timer woke {} ms late (p99)", num(ms)));
    }
    if let Some(held) = held_text(l).filter(|_| !bursts_explain_held(l)) {
        why.push(held);
    }
    if why.is_empty() {
        return None;
    }
    let why = why.join(" and ");
    Some(format!(
        "servetop may have been the limit at {}: {why}, so its readings may be stamped late; use fewer streams, a bigger client machine, or spread the load over several client machines with --shard I/N (not several shards on one machine: they share its cores)",
        l.label()
    ))
}

/// Whether a buffering hop's bursts, not servetop, merged `l`'s held reads: its tokens came in
/// bursts its server's decoding does not explain, servetop's CPU and timer lag p99 stayed under
/// their bounds, and its runtime never stalled (its timer probe never woke
/// [`crate::client::held::STALL_MIN`] late), so no read was merged across a stall of its own.
/// The bursts' caveat then names the hop.
pub fn bursts_explain_held(l: &LevelSummary) -> bool {
    let c = &l.client;
    let stall_ms = crate::client::held::STALL_MIN.as_secs_f64() * 1e3;
    l.delivery_bursts
        && c.client_cpu_share.is_none_or(|x| x < CLIENT_CPU_BOUND)
        && c.client_timer_lag_p99_ms
            .is_none_or(|x| x <= TIMER_LAG_BOUND_MS)
        && c.client_timer_lag_max_ms.is_some_and(|x| x < stall_ms)
}

/// The held reads of `l`, when more than [`HELD_SHARE`] of its deliveries or first tokens.
fn held_text(l: &LevelSummary) -> Option<String> {
    let sc = &l.stats.as_ref()?.scalars;
    let share = sc.held_read_share.unwrap_or(0.0);
    let first = if sc.completed > 0 {
        sc.held_first_tokens as f64 / sc.completed as f64
    } else {
        0.0
    };
    if share <= HELD_SHARE && first <= HELD_SHARE {
        return None;
    }
    let stall = l
        .client
        .client_timer_lag_max_ms
        .filter(|ms| *ms >= 1.0)
        .map(|ms| format!(", its runtime stalled up to {} ms", num(ms)))
        .unwrap_or_default();
    Some(format!(
        "{} of its reads ({:.1} % of deliveries, {} first tokens) were held{stall}: their tokens may have arrived earlier than stamped",
        sc.held_reads,
        share * 100.0,
        sc.held_first_tokens
    ))
}

/// The run's own validity: the most CPU and timer lag servetop showed at any level, and its
/// output token count against the engine's counter where the engine has one.
pub(super) fn finding(s: &RunSummary) -> Option<Finding> {
    let levels: Vec<&LevelSummary> = s.levels().filter(|l| measured(l)).collect();
    if levels.is_empty() {
        return None;
    }
    let measured_here: Vec<&LevelSummary> = levels
        .iter()
        .copied()
        .filter(|l| l.client.client_cpu_share.is_some())
        .collect();
    let worst = |f: fn(&LevelSummary) -> Option<f64>| {
        measured_here
            .iter()
            .filter_map(|l| Some((f(l)?, *l)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    let cpu = worst(|l| l.client.client_cpu_share);
    let lag = worst(|l| l.client.client_timer_lag_p99_ms);
    let mut on: Vec<&LevelSummary> = Vec::new();
    let mut text = if measured_here.is_empty() {
        not_measured(&levels)
    } else {
        String::from("servetop")
    };
    if let Some((x, l)) = cpu {
        let _ = write!(
            text,
            " used at most {:.0} % of a core ({})",
            x * 100.0,
            l.label()
        );
        on.push(l);
    }
    if let Some((ms, l)) = lag {
        let _ = write!(
            text,
            ", timer lag p99 at most {} ms ({})",
            num(ms),
            l.label()
        );
        if !on.iter().any(|m| m.index == l.index) {
            on.push(l);
        }
    }
    // Output tokens: servetop's completed requests against the engine's generation counter
    // over the same levels (it also counts failed and cancelled requests' tokens).
    let pairs: Vec<(u64, f64)> = levels
        .iter()
        .filter_map(|l| {
            let counted = l.stats.as_ref()?.scalars.total_output_tokens;
            let engine = l.server_metrics.as_ref()?.generation_tokens?;
            Some((counted, engine))
        })
        .collect();
    let mut f_values = Vec::new();
    if !pairs.is_empty() {
        let counted: u64 = pairs.iter().map(|p| p.0).sum();
        let engine: f64 = pairs.iter().map(|p| p.1).sum();
        if engine > 0.0 {
            let diff = (counted as f64 / engine - 1.0) * 100.0;
            if diff.abs() < 0.05 {
                let _ = write!(
                    text,
                    "; its output token count equals the engine's counter ({counted})"
                );
            } else {
                let _ = write!(
                    text,
                    "; its output token count is {diff:+.1} % off the engine's counter ({counted} against {engine:.0}; the engine also counts failed and cancelled requests, and any other client's)"
                );
            }
            f_values.push(("output_tokens_vs_engine_pct", diff));
        }
    }
    f_values.extend(ttft_against_engine(&levels, &mut text));
    f_values.extend(accept_against_engine(&levels, &mut text));
    text.push('.');
    let mut f = Finding::new("client_validity", text, &on)
        .value("client_cpu_share_max", cpu.map(|c| c.0))
        .value("client_timer_lag_p99_ms_max", lag.map(|c| c.0));
    for (k, v) in f_values {
        f = f.value(k, Some(v));
    }
    Some(f)
}

/// Why no level has servetop's own load: every level ended before the process's first load
/// report (a second after it began), or the run was saved by a servetop that did not measure it.
fn not_measured(levels: &[&LevelSummary]) -> String {
    let every = crate::telemetry::client_load::REPORT_EVERY.as_secs_f64();
    let longest = levels
        .iter()
        .filter_map(|l| Some(l.stats.as_ref()?.scalars.duration_s))
        .max_by(f64::total_cmp);
    match longest {
        Some(s) if s < every => format!(
            "servetop's own load was not measured: it is reported once a second and no level lasted that long (the longest {} s; run more requests a level, --requests-per-level)",
            num(s)
        ),
        _ => "servetop's own load was not measured in this run (saved by a servetop before it was)"
            .into(),
    }
}

/// servetop's mean TTFT against the engine's own histogram's over the same levels, where the
/// engine keeps one: the difference is what lies between the engine's clock and servetop's (the
/// network, the HTTP server, the stream's first write).
fn ttft_against_engine(levels: &[&LevelSummary], text: &mut String) -> Vec<(&'static str, f64)> {
    let diffs: Vec<(f64, &LevelSummary)> = levels
        .iter()
        .filter_map(|l| {
            let client = l.stats.as_ref()?.dists.ttft_ms.as_ref()?.mean;
            let engine = l.server_metrics.as_ref()?.mean_ttft_ms?;
            Some((client - engine, *l))
        })
        .collect();
    let (Some(lo), Some(hi)) = (
        diffs.iter().min_by(|a, b| a.0.total_cmp(&b.0)),
        diffs.iter().max_by(|a, b| a.0.total_cmp(&b.0)),
    ) else {
        return Vec::new();
    };
    let signed = |ms: f64| format!("{}{} ms", if ms >= 0.0 { "+" } else { "-" }, num(ms.abs()));
    if lo.0 < 0.0 {
        let _ = write!(
            text,
            "; its TTFT mean is below the engine's own at {} ({}: the engine's histogram also holds other requests, or counts from later than servetop's send)",
            lo.1.label(),
            signed(lo.0)
        );
    } else {
        let _ = write!(
            text,
            "; its TTFT mean is {} above the engine's own ({} the most; the network and HTTP layers)",
            super::words::range(&signed(lo.0), &signed(hi.0)),
            hi.1.label()
        );
    }
    vec![
        ("ttft_vs_engine_ms_min", lo.0),
        ("ttft_vs_engine_ms_max", hi.0),
    ]
}

/// What servetop's tokens per chunk are held to at level `l`: the engine's tokens per step
/// where its counters give them (a speculator that drafts only at some steps, as vLLM's
/// n-gram, has an accept length over its drafted steps above that), else its accept length
/// from the counters. None where the engine's figure is SGLang's recent-window gauge or its
/// cumulative average: those carry steps from before the level, so they are not the level's.
fn engine_per_step(l: &LevelSummary) -> Option<f64> {
    let s = l.spec_server.as_ref().filter(|s| s.source == "counters")?;
    s.tokens_per_step.or(Some(s.accept_length))
}

/// The accept length servetop saw (tokens per chunk) against the engine's tokens per step, the
/// largest relative difference over the levels that have both.
fn accept_against_engine(levels: &[&LevelSummary], text: &mut String) -> Vec<(&'static str, f64)> {
    let worst = levels
        .iter()
        .filter_map(|l| {
            let (c, s) = (l.accept_length_client()?, engine_per_step(l)?);
            (s > 0.0).then(|| ((c / s - 1.0) * 100.0, c, s, *l))
        })
        .max_by(|a, b| a.0.abs().total_cmp(&b.0.abs()));
    let Some((pct, c, s, l)) = worst else {
        if levels
            .iter()
            .any(|l| l.accept_length_client().is_some() && l.accept_length_server.is_some())
        {
            text.push_str(
                "; its accept length is not held to the engine's: the engine's is a recent-window gauge (SGLang), which carries steps from before each level",
            );
        }
        return Vec::new();
    };
    if pct.abs() <= super::ACCEPT_CONFOUND * 100.0 {
        let _ = write!(
            text,
            "; its accept length within {:.0} % of the engine's at every level ({}: {} against {})",
            pct.abs().max(0.5).ceil(),
            l.label(),
            num(c),
            num(s)
        );
    } else {
        // Not a reassurance: the two count different things here, or one of them is wrong.
        let _ = write!(
            text,
            "; its accept length differs from the engine's by up to {} ({}: {} against {}), more than the {:.0} % two readings of one server agree to",
            super::words::pct_text(pct.abs()),
            l.label(),
            num(c),
            num(s),
            super::ACCEPT_CONFOUND * 100.0
        );
    }
    vec![("accept_length_vs_engine_pct_max", pct)]
}
