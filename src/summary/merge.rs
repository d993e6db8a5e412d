//! One run from the shards of a split one (`servetop report --merge DIR...`): every level's
//! statistics folded again from the union of the shards' request records — exact percentiles,
//! not averaged ones — with each shard's records moved onto the earliest shard's level origin,
//! so throughput is over the window they spanned together (docs/metrics.md "Sharded runs").
//!
//! Pure: the run directories are read and written by the caller.

use serde::{Deserialize, Serialize};

use crate::metrics::RequestRecord;
use crate::summary::{LevelStatus, LevelSummary, RunSummary};

/// One shard's run as read from its directory.
pub struct ShardRun {
    /// Where it came from (the directory, as given).
    pub source: String,
    pub summary: RunSummary,
    pub records: Vec<RequestRecord>,
}

/// A shard's place in a merged run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardSource {
    /// The shard's index (from 0).
    pub shard: u32,
    pub source: String,
    pub host: String,
    /// Measured requests it recorded (completed, failed and cancelled).
    pub requests: u64,
    /// Its clock against the server's (`Date` headers), ms, when it measured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ms: Option<f64>,
    /// The most any of its levels started after its slot, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_start_late_ms: Option<i64>,
    /// How its run ended (`finished`, `interrupted`, …).
    pub state: String,
}

/// What a merged run was made of: the shards it had, and those it did not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MergeInfo {
    /// Shards the run was split into.
    pub shards: u32,
    pub merged: Vec<ShardSource>,
    /// Shard indices with no directory among those given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<u32>,
    /// What stands out: late starts, skewed clocks, a shard that did not finish.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The shard whose engine metrics, GPU readings and energy the levels carry (every shard
    /// watches the same server and GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry_from: Option<u32>,
}

impl MergeInfo {
    /// The missing shards as `2/4, 3/4`.
    pub fn missing_labels(&self) -> String {
        self.missing
            .iter()
            .map(|i| format!("{i}/{}", self.shards))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A level started this much past its slot is named as late.
const LATE_MS: i64 = 1000;

/// Merges `runs` (shards of one plan) into one run and its records.
pub fn merge(mut runs: Vec<ShardRun>) -> Result<(RunSummary, Vec<RequestRecord>), String> {
    let first = runs
        .first()
        .ok_or("--merge needs the run directories of the shards")?;
    let count = shard_of(first)?.count;
    for r in &runs {
        let s = shard_of(r)?;
        if s.count != count {
            return Err(format!(
                "{} is shard {} but {} is shard {}: merge the shards of one run",
                first.source,
                shard_of(first)?.label(),
                r.source,
                s.label()
            ));
        }
        if !same_plan(&first.summary, &r.summary) {
            return Err(format!(
                "{} and {} ran different plans (levels, lengths or their clock): merge the shards of one run",
                first.source, r.source
            ));
        }
    }
    runs.sort_by_key(|r| r.summary.config.shard.map_or(0, |s| s.index));
    if let Some(w) = runs
        .windows(2)
        .find(|w| shard_index(&w[0]) == shard_index(&w[1]))
    {
        return Err(format!(
            "{} and {} are both shard {}: give each shard once",
            w[0].source,
            w[1].source,
            shard_of(&w[0])?.label()
        ));
    }
    let info = merge_info(&runs, count);
    let mut out = runs[0].summary.clone();
    out.config.shard = None;
    out.clock_offset = None;
    out.baseline = None;
    out.warnings = merged_warnings(&runs, &info);
    out.state = runs
        .iter()
        .map(|r| r.summary.state)
        .find(|s| *s != crate::event::RunState::Finished)
        .unwrap_or(crate::event::RunState::Finished);
    let indices: Vec<u32> = out.levels().map(|l| l.index).collect();
    let mut records = Vec::new();
    for index in indices {
        let slo = (out.config.slo, out.config.slo_tiers.as_slice());
        let merged = merge_level(&runs, index, slo, &mut records);
        if let (Some(l), Some(m)) = (out.level_mut(index), merged) {
            *l = m;
        }
    }
    out.merged = Some(info);
    out.summarize_repeats();
    out.refresh_findings();
    out.warn_short_levels();
    Ok((out, records))
}

fn shard_of(r: &ShardRun) -> Result<crate::workload::shard::Shard, String> {
    r.summary.config.shard.ok_or_else(|| {
        format!(
            "{} is not a shard (it ran without --shard): merge the directories of a sharded run",
            r.source
        )
    })
}

fn shard_index(r: &ShardRun) -> u32 {
    r.summary.config.shard.map_or(0, |s| s.index)
}

/// Whether two shards ran the same plan: the same levels (kind, lengths, and the pass each
/// level is of: its label) on the same clock, with the same lengths drawn per request.
fn same_plan(a: &RunSummary, b: &RunSummary) -> bool {
    let shape = |s: &RunSummary| -> Vec<(u32, crate::workload::LevelKind, u64, u32, String)> {
        s.levels()
            .map(|l| (l.index, l.kind, l.input_len, l.output_len, l.label()))
            .collect()
    };
    shape(a) == shape(b)
        && a.config.clock == b.config.clock
        && a.config.shape_mix == b.config.shape_mix
        && a.config.lognormal_sigma == b.config.lognormal_sigma
}

fn merge_info(runs: &[ShardRun], count: u32) -> MergeInfo {
    let present: Vec<u32> = runs.iter().map(shard_index).collect();
    let mut notes = Vec::new();
    let merged = runs
        .iter()
        .map(|r| {
            let s = &r.summary;
            let label = s
                .config
                .shard
                .map_or_else(String::new, crate::workload::shard::Shard::label);
            let late: Vec<String> = s
                .levels()
                .filter(|l| l.start_late_ms.is_some_and(|ms| ms > LATE_MS))
                .map(|l| {
                    format!(
                        "{} {:.1} s",
                        l.label(),
                        l.start_late_ms.unwrap_or(0) as f64 / 1000.0
                    )
                })
                .collect();
            if !late.is_empty() {
                notes.push(format!(
                    "shard {label} started late (less time to send): {}",
                    late.join(", ")
                ));
            }
            if s.clock_offset.is_some_and(|c| c.skewed()) {
                notes.push(format!(
                    "shard {label}'s clock is {:.1} s off the server's",
                    -s.clock_offset.map_or(0.0, |c| c.offset_ms) / 1000.0
                ));
            }
            if s.state != crate::event::RunState::Finished {
                notes.push(format!(
                    "shard {label} did not finish ({}): its levels hold what it measured",
                    s.state.name()
                ));
            }
            ShardSource {
                shard: s.config.shard.map_or(0, |x| x.index),
                source: r.source.clone(),
                host: s.host.clone(),
                requests: r.records.iter().filter(|x| !x.warmup).count() as u64,
                clock_offset_ms: s.clock_offset.map(|c| c.offset_ms),
                max_start_late_ms: s.levels().filter_map(|l| l.start_late_ms).max(),
                state: s.state.name().to_string(),
            }
        })
        .collect();
    MergeInfo {
        shards: count,
        merged,
        missing: (0..count).filter(|i| !present.contains(i)).collect(),
        notes,
        telemetry_from: present.first().copied(),
    }
}

/// The shards' own warnings, each said once with the shards that gave it, and what the merge
/// itself noticed.
fn merged_warnings(runs: &[ShardRun], info: &MergeInfo) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for r in runs {
        let label = r
            .summary
            .config
            .shard
            .map_or_else(String::new, crate::workload::shard::Shard::label);
        for w in &r.summary.warnings {
            match out.iter_mut().find(|(x, _)| x == w) {
                Some((_, shards)) => shards.push(label.clone()),
                None => out.push((w.clone(), vec![label.clone()])),
            }
        }
    }
    let mut warnings: Vec<String> = Vec::new();
    if !info.missing.is_empty() {
        warnings.push(format!(
            "merged {} of {} shards: shard {} missing, so every level holds only part of its load",
            info.merged.len(),
            info.shards,
            info.missing_labels()
        ));
    }
    warnings.extend(info.notes.iter().cloned());
    warnings.extend(
        out.into_iter()
            .map(|(w, shards)| format!("shard {}: {w}", shards.join(", "))),
    );
    warnings
}

/// A shard's level origin on the server's clock (its own clock plus the offset it measured
/// against the server, when it did): the shards' timelines merge on the one clock they share.
fn on_server_clock(run: &ShardRun, l: &LevelSummary) -> Option<u64> {
    let offset = run.summary.clock_offset.map_or(0, |c| c.offset_us());
    l.origin_unix_us
        .map(|o| (o as i64).saturating_add(offset).max(0) as u64)
}

/// Level `index` of every shard as one level: the plan's totals, statistics folded from all
/// the shards' records on the earliest origin on the server's clock (appended to `records`),
/// telemetry from the first shard that has it (every shard watches the same server and GPUs).
fn merge_level(
    runs: &[ShardRun],
    index: u32,
    (slo, tiers): (
        Option<crate::metrics::Slo>,
        &[crate::metrics::slo_tiers::SloTier],
    ),
    records: &mut Vec<RequestRecord>,
) -> Option<LevelSummary> {
    let parts: Vec<(&ShardRun, &LevelSummary)> = runs
        .iter()
        .filter_map(|r| Some((r, r.summary.level(index)?)))
        .collect();
    let ran: Vec<&(&ShardRun, &LevelSummary)> = parts
        .iter()
        .filter(|(_, l)| l.origin_unix_us.is_some())
        .collect();
    let mut out = totals(&parts)?;
    let Some(origin) = ran.iter().filter_map(|(r, l)| on_server_clock(r, l)).min() else {
        return Some(out);
    };
    let mut acc = crate::workload::accumulator(
        out.kind,
        out.conversation,
        out.trace.as_ref().map(|t| t.duration_s),
        slo,
        tiers.to_vec(),
    )
    .with_natural_stop(runs.first().is_some_and(|r| r.summary.config.natural_stop))
    .with_percentiles(
        &runs
            .first()
            .map(|r| r.summary.config.metric_percentiles.clone())
            .unwrap_or_default(),
    );
    let mut mine: Vec<RequestRecord> = Vec::new();
    for (run, l) in &ran {
        let shift = on_server_clock(run, l).unwrap_or(origin) - origin;
        let turns = l.conversation.map(|c| c.turns);
        let per_session = l.conversation.map_or(0, |c| c.requests());
        mine.extend(
            run.records
                .iter()
                .filter(|r| r.level == index && !r.warmup)
                .map(|r| {
                    // The plan's number of the request, unique across the shards, and of its
                    // session (whole sessions are dealt).
                    let global = l
                        .shard
                        .map_or(r.index, |s| s.global_request(r.index, turns));
                    (r, global)
                })
                .map(|(r, global)| RequestRecord {
                    index: global,
                    session: r.session.map(|s| match l.shard {
                        Some(_) if per_session > 0 => global / per_session,
                        _ => s,
                    }),
                    sched_at_us: r.sched_at_us + shift,
                    send_at_us: r.send_at_us + shift,
                    end_at_us: r.end_at_us + shift,
                    // Slots are per shard: the merged fold keeps every interval instead.
                    slot: None,
                    ..r.clone()
                }),
        );
    }
    mine.sort_by_key(|r| (r.end_at_us, r.send_at_us));
    for r in &mine {
        acc.add(r);
    }
    // Each shard's outages, on the earliest origin too (shards of one server see the same one:
    // overlapping, they count once).
    for (run, l) in &ran {
        let shift = on_server_clock(run, l).unwrap_or(origin) - origin;
        for o in l.stats.iter().flat_map(|s| &s.scalars.outages) {
            let us = |s: f64| (s * 1e6).round().max(0.0) as u64 + shift;
            acc.add_outage(us(o.from_s), us(o.to_s));
        }
    }
    let stats = acc.stats();
    let server = out
        .spec_server
        .as_ref()
        .map(|s| s.tokens_per_step.unwrap_or(s.accept_length));
    out.delivery_bursts = crate::metrics::chunk_verdict(&stats.scalars, server).delivery_bursts;
    out.energy = rescaled_energy(parts[0].1, &stats);
    out.slo = acc.slo_check();
    out.slo_tiers = acc.tier_checks();
    out.origin_unix_us = Some(origin);
    if out.seconds.is_some() {
        let sc = &stats.scalars;
        out.requests = (sc.completed + sc.failed + sc.cancelled).min(u64::from(u32::MAX)) as u32;
    }
    out.stats = Some(stats);
    records.extend(mine);
    Some(out)
}

/// The level as the whole plan had it: the shards' shares added up, its times the span of
/// theirs, its status the worst of theirs.
fn totals(parts: &[(&ShardRun, &LevelSummary)]) -> Option<LevelSummary> {
    let (_, base) = parts.first()?;
    let mut out = (*base).clone();
    let sum = |f: &dyn Fn(&LevelSummary) -> u32| parts.iter().map(|(_, l)| f(l)).sum::<u32>();
    let sum_opt = |f: &dyn Fn(&LevelSummary) -> Option<u32>| {
        parts.iter().map(|(_, l)| f(l)).sum::<Option<u32>>()
    };
    out.shard = None;
    out.concurrency = sum(&|l| l.concurrency);
    out.requests = sum(&|l| l.requests);
    if let Some(a) = out.arrival.as_mut() {
        a.request_rate = parts
            .iter()
            .filter_map(|(_, l)| l.arrival.map(|a| a.request_rate))
            .sum();
        a.max_concurrency = sum_opt(&|l| l.arrival.and_then(|a| a.max_concurrency));
    }
    if let Some(t) = out.trace.as_mut() {
        t.offered_rate = parts
            .iter()
            .map(|(_, l)| l.trace.as_ref().and_then(|t| t.offered_rate))
            .sum();
        t.max_concurrency = sum_opt(&|l| l.trace.as_ref().and_then(|t| t.max_concurrency));
    }
    out.started_at_unix_ms = parts
        .iter()
        .filter_map(|(r, l)| {
            let offset_ms = r.summary.clock_offset.map_or(0, |c| c.offset_us() / 1000);
            Some(l.started_at_unix_ms? + offset_ms)
        })
        .min();
    out.finished_at_unix_ms = parts
        .iter()
        .filter_map(|(_, l)| l.finished_at_unix_ms)
        .max();
    out.start_late_ms = parts.iter().filter_map(|(_, l)| l.start_late_ms).max();
    // The status of the shards that reached the level (one that stopped earlier left it
    // waiting; the merge says so of the shard); of all of them when none did.
    let reached: Vec<LevelStatus> = parts
        .iter()
        .filter(|(_, l)| l.origin_unix_us.is_some() || l.status == LevelStatus::Skipped)
        .map(|(_, l)| l.status)
        .collect();
    let statuses = if reached.is_empty() {
        parts.iter().map(|(_, l)| l.status).collect()
    } else {
        reached
    };
    out.status = statuses
        .into_iter()
        .max_by_key(|s| status_rank(*s))
        .unwrap_or(LevelStatus::Done);
    let reasons: Vec<String> = parts.iter().filter_map(|(_, l)| l.reason.clone()).collect();
    out.reason = reasons.first().cloned();
    Some(out)
}

/// Which status a merged level takes when its shards differ: the one that says most.
fn status_rank(s: LevelStatus) -> u8 {
    match s {
        LevelStatus::Done => 0,
        LevelStatus::Skipped => 1,
        LevelStatus::Waiting => 2,
        LevelStatus::Running => 3,
        LevelStatus::Interrupted => 4,
        LevelStatus::Failed => 5,
    }
}

/// The first shard's energy over the level (the GPUs are the server's, the same for every
/// shard) spread over the merged level's tokens; a cost per token likewise.
fn rescaled_energy(
    first: &LevelSummary,
    merged: &crate::metrics::LevelStats,
) -> crate::telemetry::energy::LevelEnergy {
    let mut e = first.energy.clone();
    let out_tokens = merged.scalars.total_output_tokens;
    let all_tokens = out_tokens + merged.scalars.total_input_tokens;
    let (first_out, first_all) = first.stats.as_ref().map_or((0, 0), |s| {
        (
            s.scalars.total_output_tokens,
            s.scalars.total_output_tokens + s.scalars.total_input_tokens,
        )
    });
    let per = |n: u64| (n > 0).then_some(n as f64);
    e.joules_per_output_token = e.energy_j.zip(per(out_tokens)).map(|(j, n)| j / n);
    e.output_tokens_per_joule = e
        .energy_j
        .filter(|&j| j > 0.0)
        .map(|j| out_tokens as f64 / j);
    let scale = |c: Option<f64>, from: u64, to: u64| {
        c.zip(per(from)).zip(per(to)).map(|((c, f), t)| c * f / t)
    };
    e.cost_per_million_output_tokens =
        scale(e.cost_per_million_output_tokens, first_out, out_tokens);
    e.cost_per_million_total_tokens = scale(e.cost_per_million_total_tokens, first_all, all_tokens);
    e
}
