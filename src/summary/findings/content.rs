//! What the content of the prompts did to speculative decoding (`--content`): each kind's
//! accept length and per-stream speed at one load, side by side (docs/metrics.md "Content kinds
//! and accept length by content").

use std::collections::BTreeMap;
use std::fmt::Write;

use super::words::num;
use super::{Finding, measured};
use crate::metrics::curves::{DECODE_TOK_S, at};
use crate::summary::{LevelSummary, RunSummary};
use crate::workload::LevelKind;

/// Where a level's accept length came from, as the finding says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcceptSource {
    /// The engine's counters over the level's own window (vLLM, llama.cpp).
    Counters,
    /// servetop's tokens per chunk.
    Client,
    /// SGLang's recent-window gauge (or its cumulative average): it carries steps of the level
    /// before, so it is used only where the client's figure is delivery bursts.
    Gauge,
}

/// A level's accept length as the finding reads it: the server's counters over the level
/// where it has them, else the client's tokens per chunk (none where those are delivery
/// bursts), else the server's gauge; and where it came from.
pub(crate) fn accept_of(l: &LevelSummary) -> Option<(f64, AcceptSource)> {
    let counters = l
        .spec_server
        .as_ref()
        .filter(|s| s.source == "counters")
        .map(|s| (s.accept_length, AcceptSource::Counters));
    counters
        .or_else(|| l.accept_length_client().map(|a| (a, AcceptSource::Client)))
        .or_else(|| l.accept_length_server.map(|a| (a, AcceptSource::Gauge)))
}

/// One kind at the finding's load.
struct Row<'a> {
    level: &'a LevelSummary,
    /// Its content kind's name, or its dataset category.
    kind: &'a str,
    /// Its accept length, and where it came from ([`accept_of`]).
    accept: Option<(f64, AcceptSource)>,
    /// Its per-stream decode speed (tok/s).
    speed: Option<f64>,
}

/// The load the finding compares the kinds at, and its levels by kind (most accepted first,
/// a kind without an accept length last): the lowest concurrency of the sweep where the most
/// kinds measured (the shortest long-context length where the run has no sweep), over `s`'s
/// plain levels of its headline budget, first runs only. None with fewer than two kinds there.
fn rows_at_one_load(s: &RunSummary) -> Option<(LevelKind, u64, Vec<Row<'_>>)> {
    let passes = s.passes();
    let (budget, shape) = (passes.headline().thinking_budget, passes.headline().shape);
    let of_kind = |kind: LevelKind| -> Vec<&LevelSummary> {
        s.levels()
            .filter(|l| l.kind == kind && l.content_name().is_some() && l.response_format.is_none())
            .filter(|l| l.thinking_budget == budget && measured(l))
            .filter(|l| l.shape.is_none() || l.shape == shape)
            .collect()
    };
    let (levels, kind) = match of_kind(LevelKind::Sweep) {
        v if !v.is_empty() => (v, LevelKind::Sweep),
        _ => (of_kind(LevelKind::LongContext), LevelKind::LongContext),
    };
    let mut loads: BTreeMap<u64, Vec<&LevelSummary>> = BTreeMap::new();
    for l in levels {
        let load = match kind {
            LevelKind::Sweep => u64::from(l.concurrency),
            _ => l.input_len,
        };
        let at_load = loads.entry(load).or_default();
        if !at_load.iter().any(|o| o.content_name() == l.content_name()) {
            at_load.push(l);
        }
    }
    let most = loads.values().map(Vec::len).max()?;
    if most < 2 {
        return None;
    }
    let (&load, group) = loads.iter().find(|(_, g)| g.len() == most)?;
    let mut rows: Vec<Row<'_>> = group
        .iter()
        .map(|l| Row {
            level: l,
            kind: l.content_name().unwrap_or("random"),
            accept: accept_of(l),
            speed: at(l.stats.as_ref(), DECODE_TOK_S),
        })
        .collect();
    let key = |r: &Row<'_>| r.accept.map_or(f64::NEG_INFINITY, |(v, _)| v);
    rows.sort_by(|a, b| key(b).total_cmp(&key(a)));
    Some((kind, load, rows))
}

/// The `accept_by_content` finding ([`rows_at_one_load`]): each kind's accept length and
/// per-stream decode speed, the range of that speed, and which kind accepted most and least.
pub(super) fn accept_by_content(s: &RunSummary) -> Option<Finding> {
    let (kind, load, rows) = rows_at_one_load(s)?;
    let where_ = match kind {
        LevelKind::Sweep if load == 1 => "single stream (C=1)".to_string(),
        LevelKind::Sweep => format!("C={load}"),
        _ => format!("{} ctx", crate::fmt::fmt_tokens(load)),
    };
    let sources: Vec<AcceptSource> = rows.iter().filter_map(|r| r.accept.map(|a| a.1)).collect();
    let one_source = sources.windows(2).all(|w| w[0] == w[1]);
    let said = |s: AcceptSource| match s {
        AcceptSource::Counters => "by the server's counters",
        AcceptSource::Client => "as servetop saw it",
        AcceptSource::Gauge => "by the server's recent-window gauge",
    };
    let cell = |r: &Row<'_>| {
        let accept = match r.accept {
            Some((a, s)) if !one_source => format!("{} ({})", num(a), said(s)),
            Some((a, _)) => num(a),
            None => "no accept length".into(),
        };
        let speed = r
            .speed
            .map_or_else(|| "no speed".into(), |v| format!("{} tok/s", num(v)));
        format!("{} {accept} ({speed})", r.kind)
    };
    let source = match sources.first() {
        None => "no accept length measured (no speculative decoding reported)".to_string(),
        Some(&s) if one_source => format!("accept length {}", said(s)),
        Some(_) => "accept length".to_string(),
    };
    let mut text = format!(
        "By content at {where_}, {source}: {}.",
        rows.iter().map(cell).collect::<Vec<_>>().join(", ")
    );
    let speeds: Vec<f64> = rows.iter().filter_map(|r| r.speed).collect();
    let (lo, hi) = (
        speeds.iter().copied().reduce(f64::min),
        speeds.iter().copied().reduce(f64::max),
    );
    if let (Some(lo), Some(hi), true) = (lo, hi, speeds.len() >= 2) {
        let _ = write!(
            text,
            " The per-stream speed ranges {}–{} tok/s by content",
            num(lo),
            num(hi)
        );
        // Ranked only where every figure is of one source: an engine's accept length over its
        // drafted steps and a client's tokens per chunk are not the same count.
        let accepted: Vec<&Row<'_>> = rows.iter().filter(|r| r.accept.is_some()).collect();
        match (accepted.first(), accepted.last()) {
            _ if !one_source => text.push_str(
                " (their accept lengths come from different sources, so they are not ranked).",
            ),
            (Some(top), Some(bottom)) if accepted.len() >= 2 => {
                let _ = write!(
                    text,
                    " ({} accepted the most drafts, {} the fewest).",
                    top.kind, bottom.kind
                );
            }
            _ => text.push('.'),
        }
    }
    let used: Vec<&LevelSummary> = rows.iter().map(|r| r.level).collect();
    let mut f = Finding::new("accept_by_content", text, &used)
        .value("load", Some(load as f64))
        .value("decode_tok_s_min", lo)
        .value("decode_tok_s_max", hi);
    for r in &rows {
        f = f
            .value(
                &format!("accept_length_{}", r.kind),
                r.accept.map(|(a, _)| a),
            )
            .value(&format!("decode_tok_s_{}", r.kind), r.speed);
    }
    Some(f)
}
