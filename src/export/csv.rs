//! The CSV tables of a run (or of several, one column naming each): `sweep.csv`, `rates.csv`,
//! `long_context.csv`, `turns.csv`, `sessions.csv`, `session_list.csv`, `trace.csv`, `trace_timeline.csv`, `repeats.csv`. A run's
//! levels are listed as every table lists them (docs/outputs.md "Passes"): the headline pass's
//! first, the last column of `sweep.csv`, `rates.csv` and `long_context.csv` naming each
//! level's pass (empty in a run of one pass).

use std::fmt::Write as _;

use crate::summary::RunSummary;

fn f(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| format!("{v}"))
}

fn csv_text(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `sweep.csv`: one row per level (and run, when several).
pub fn sweep_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,concurrency,status,completed,failed,duration_s,outage_s,request_throughput,output_throughput,total_token_throughput,mean_decode_tokens_per_s,accept_length_client,accept_length_server,mean_ttft_ms,median_ttft_ms,p90_ttft_ms,p99_ttft_ms,mean_itl_ms,median_itl_ms,p99_itl_ms,mean_tpot_ms,median_tpot_ms,p99_tpot_ms,mean_e2el_ms,median_e2el_ms,p99_e2el_ms,max_concurrent_requests,mean_kv_usage,median_ttfc_ms,p99_ttfc_ms,median_thinking_ms,reasoning_share,mean_reasoning_tokens,mean_content_tokens,mean_content_decode_tokens_per_s,mean_tool_calls,median_first_tool_call_ms,energy_j,mean_power_w,joules_per_output_token,output_tokens_per_joule,cost_per_million_output_tokens,cost_per_million_total_tokens,energy_source,pass\n",
    );
    for (label, s) in runs {
        let passes = s.passes();
        for l in passes.in_order(&s.sweep) {
            let st = l.stats.as_ref();
            let d = |g: fn(&crate::metrics::LevelDists) -> Option<&crate::metrics::DistStats>,
                     k: fn(&crate::metrics::DistStats) -> f64| {
                f(st.and_then(|s| g(&s.dists)).map(k))
            };
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                csv_text(label),
                s.simulated,
                l.concurrency,
                l.status.name(),
                st.map_or(0, |s| s.scalars.completed),
                st.map_or(0, |s| s.scalars.failed),
                f(st.map(|s| s.scalars.duration_s)),
                f(st.map(|s| s.scalars.outage_s)),
                f(st.map(|s| s.scalars.request_throughput)),
                f(st.map(|s| s.scalars.output_throughput)),
                f(st.map(|s| s.scalars.total_token_throughput)),
                d(|x| x.decode_tokens_per_s.as_ref(), |x| x.mean),
                f(st.and_then(|s| s.scalars.accept_length_client)),
                f(l.accept_length_server),
                d(|x| x.ttft_ms.as_ref(), |x| x.mean),
                d(|x| x.ttft_ms.as_ref(), |x| x.p50),
                d(|x| x.ttft_ms.as_ref(), |x| x.p90),
                d(|x| x.ttft_ms.as_ref(), |x| x.p99),
                d(|x| x.itl_ms.as_ref(), |x| x.mean),
                d(|x| x.itl_ms.as_ref(), |x| x.p50),
                d(|x| x.itl_ms.as_ref(), |x| x.p99),
                d(|x| x.tpot_ms.as_ref(), |x| x.mean),
                d(|x| x.tpot_ms.as_ref(), |x| x.p50),
                d(|x| x.tpot_ms.as_ref(), |x| x.p99),
                d(|x| x.e2el_ms.as_ref(), |x| x.mean),
                d(|x| x.e2el_ms.as_ref(), |x| x.p50),
                d(|x| x.e2el_ms.as_ref(), |x| x.p99),
                st.map_or(String::new(), |s| s
                    .scalars
                    .max_concurrent_requests
                    .to_string()),
                f(l.server_metrics.as_ref().and_then(|m| m.mean_kv_usage)),
                d(|x| x.ttfc_ms.as_ref(), |x| x.p50),
                d(|x| x.ttfc_ms.as_ref(), |x| x.p99),
                d(|x| x.thinking_ms.as_ref(), |x| x.p50),
                f(st.and_then(|s| s.scalars.reasoning_share)),
                f(st.and_then(|s| s.scalars.mean_reasoning_tokens)),
                f(st.and_then(|s| s.scalars.mean_content_tokens)),
                d(|x| x.content_decode_tokens_per_s.as_ref(), |x| x.mean),
                f(st.and_then(|s| s.scalars.mean_tool_calls)),
                d(|x| x.first_tool_call_ms.as_ref(), |x| x.p50),
                f(l.energy.energy_j),
                f(l.energy.mean_power_w),
                f(l.energy.joules_per_output_token),
                f(l.energy.output_tokens_per_joule),
                f(l.energy.cost_per_million_output_tokens),
                f(l.energy.cost_per_million_total_tokens),
                csv_text(l.energy.energy_source.as_deref().unwrap_or_default()),
                csv_text(&passes.column(l)),
            );
        }
    }
    out
}

/// `turns.csv`: one row per turn of each multi-turn level (and run).
pub fn turns_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,level,turns,conversation_concurrency,first_turn_input_len,shared_prefix_len,followup_len,output_len,turn,completed,failed,mean_input_tokens,mean_cached_tokens,cache_hit_rate,mean_ttft_ms,median_ttft_ms,p90_ttft_ms,p99_ttft_ms,mean_tpot_ms\n",
    );
    for (label, s) in runs {
        for l in &s.multi_turn {
            let c = l.conversation;
            for t in l.stats.iter().flat_map(|st| st.scalars.turns.iter()) {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    csv_text(label),
                    s.simulated,
                    l.index,
                    c.map_or(0, |c| c.turns),
                    l.concurrency,
                    l.input_len,
                    l.shared_prefix_tokens,
                    c.map_or(0, |c| c.followup_tokens),
                    l.output_len,
                    t.turn,
                    t.completed,
                    t.failed,
                    f(t.mean_input_tokens),
                    f(t.mean_cached_tokens),
                    f(t.cache_hit_rate),
                    f(t.mean_ttft_ms),
                    f(t.median_ttft_ms),
                    f(t.p90_ttft_ms),
                    f(t.p99_ttft_ms),
                    f(t.mean_tpot_ms),
                );
            }
        }
    }
    out
}

/// `sessions.csv`: one row per turn of each session level (and run): the users, the session's
/// shape, then the turn's prompt (its context), TTFT, and the cached tokens against the ceiling.
/// With sub-agents, their turns follow the session's own (`of` says whose), each row over all of
/// the level's sub-agents at that turn.
pub fn sessions_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,level,users,turns,first_turn_input_len,shared_prefix_len,tool_result_len,output_len,tool_wait,sessions_completed,turn,completed,failed,mean_input_tokens,median_ttft_ms,p90_ttft_ms,p99_ttft_ms,mean_tpot_ms,cached_tokens,cache_ceiling_tokens,fan_out,of\n",
    );
    let n = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    for (label, s) in runs {
        for l in &s.sessions {
            let c = l.conversation;
            let Some(st) = &l.stats else { continue };
            let own = st.scalars.turns.iter().map(|t| (t, "session"));
            let sub = st
                .scalars
                .session
                .iter()
                .flat_map(|x| x.sub_agent_turns.iter())
                .map(|t| (t, "sub_agent"));
            for (t, of) in own.chain(sub) {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    csv_text(label),
                    s.simulated,
                    l.index,
                    l.concurrency,
                    c.map_or(0, |c| c.turns),
                    l.input_len,
                    l.shared_prefix_tokens,
                    c.map_or(0, |c| c.followup_tokens),
                    l.output_len,
                    csv_text(&l.tool_wait.map_or_else(String::new, |w| w.describe())),
                    n(st.scalars.session.as_ref().map(|x| x.sessions_completed)),
                    t.turn,
                    t.completed,
                    t.failed,
                    f(t.mean_input_tokens),
                    f(t.median_ttft_ms),
                    f(t.p90_ttft_ms),
                    f(t.p99_ttft_ms),
                    f(t.mean_tpot_ms),
                    n(t.cached_tokens),
                    n(t.cache_ceiling_tokens),
                    c.map_or(0, |c| c.fan_out),
                    of,
                );
            }
        }
    }
    out
}

/// `session_list.csv`: one row per session of each session level (and run): how it ended, its
/// turns, when it started and how long it took, split into the server's time and its tools',
/// its tokens (its sub-agents' included), its cache against the ceiling, its slowest TTFT and,
/// with `--slo`, whether its every turn met it.
pub fn session_list_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,level,users,session,outcome,turns,sub_agent_turns,start_s,duration_s,server_s,tool_s,input_tokens,output_tokens,cached_tokens,cache_ceiling_tokens,max_ttft_ms,met_slo\n",
    );
    let n = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
    for (label, s) in runs {
        for l in &s.sessions {
            let Some(st) = l.stats.as_ref().and_then(|st| st.scalars.session.as_ref()) else {
                continue;
            };
            for r in &st.session_list {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                    csv_text(label),
                    s.simulated,
                    l.index,
                    l.concurrency,
                    r.session,
                    r.end.name(),
                    r.turns,
                    r.sub_agent_turns,
                    r.start_s,
                    r.duration_s,
                    r.server_s,
                    r.tool_s,
                    r.input_tokens,
                    r.output_tokens,
                    n(r.cached_tokens),
                    n(r.cache_ceiling_tokens),
                    f(r.max_ttft_ms),
                    r.met_slo.map_or_else(String::new, |m| m.to_string()),
                );
            }
        }
    }
    out
}

/// `rates.csv`: one row per request-rate level (and run).
pub fn rates_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,request_rate,burstiness,ramp_up_s,max_concurrency,status,completed,failed,duration_s,outage_s,achieved_request_rate,scheduled_request_rate,request_throughput,output_throughput,mean_ttft_ms,median_ttft_ms,p99_ttft_ms,mean_tpot_ms,median_tpot_ms,p99_tpot_ms,median_e2el_ms,p99_e2el_ms,mean_client_queue_ms,median_client_queue_ms,p99_client_queue_ms,max_concurrent_requests,goodput,pass\n",
    );
    for (label, s) in runs {
        let passes = s.passes();
        for l in passes.in_order(&s.rates) {
            let st = l.stats.as_ref();
            let d = |g: fn(&crate::metrics::LevelDists) -> Option<&crate::metrics::DistStats>,
                     k: fn(&crate::metrics::DistStats) -> f64| {
                f(st.and_then(|s| g(&s.dists)).map(k))
            };
            let a = l.arrival;
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                csv_text(label),
                s.simulated,
                f(a.map(|a| a.request_rate)),
                f(a.map(|a| a.burstiness)),
                f(a.map(|a| a.ramp_up_s)),
                a.and_then(|a| a.max_concurrency)
                    .map_or(String::new(), |c| c.to_string()),
                l.status.name(),
                st.map_or(0, |s| s.scalars.completed),
                st.map_or(0, |s| s.scalars.failed),
                f(st.map(|s| s.scalars.duration_s)),
                f(st.map(|s| s.scalars.outage_s)),
                f(st.and_then(|s| s.scalars.achieved_request_rate)),
                f(st.and_then(|s| s.scalars.scheduled_request_rate)),
                f(st.map(|s| s.scalars.request_throughput)),
                f(st.map(|s| s.scalars.output_throughput)),
                d(|x| x.ttft_ms.as_ref(), |x| x.mean),
                d(|x| x.ttft_ms.as_ref(), |x| x.p50),
                d(|x| x.ttft_ms.as_ref(), |x| x.p99),
                d(|x| x.tpot_ms.as_ref(), |x| x.mean),
                d(|x| x.tpot_ms.as_ref(), |x| x.p50),
                d(|x| x.tpot_ms.as_ref(), |x| x.p99),
                d(|x| x.e2el_ms.as_ref(), |x| x.p50),
                d(|x| x.e2el_ms.as_ref(), |x| x.p99),
                d(|x| x.client_queue_ms.as_ref(), |x| x.mean),
                d(|x| x.client_queue_ms.as_ref(), |x| x.p50),
                d(|x| x.client_queue_ms.as_ref(), |x| x.p99),
                st.map_or(String::new(), |s| s
                    .scalars
                    .max_concurrent_requests
                    .to_string()),
                f(st.and_then(|s| s.scalars.goodput)),
                csv_text(&passes.column(l)),
            );
        }
    }
    out
}

/// `long_context.csv`: one row per length (and run).
pub fn long_context_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,context_tokens,status,mean_input_tokens,mean_ttft_ms,prefill_tokens_per_s,mean_decode_tokens_per_s,completed,failed,reason,pass\n",
    );
    for (label, s) in runs {
        let passes = s.passes();
        for l in passes.in_order(&s.long_context) {
            let st = l.stats.as_ref().filter(|s| s.scalars.completed > 0);
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                csv_text(label),
                s.simulated,
                l.input_len,
                l.status.name(),
                f(st.and_then(|s| s.scalars.mean_input_tokens)),
                f(st.and_then(|s| s.dists.ttft_ms.as_ref().map(|d| d.mean))),
                f(st.and_then(|s| s.scalars.prefill_tokens_per_s)),
                f(st.and_then(|s| s.dists.decode_tokens_per_s.as_ref().map(|d| d.mean))),
                l.stats.as_ref().map_or(0, |s| s.scalars.completed),
                l.stats.as_ref().map_or(0, |s| s.scalars.failed),
                csv_text(l.reason.as_deref().unwrap_or("")),
                csv_text(&passes.column(l)),
            );
        }
    }
    out
}

/// `trace.csv`: one row per replayed trace (and run): what was replayed, rates, latency, the
/// client's lateness and the prefix cache against the trace's own figure.
pub fn trace_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,source,format,speedup,requests,duration_s,offered_request_rate,max_concurrency,status,completed,failed,achieved_request_rate,request_throughput,output_throughput,median_ttft_ms,p99_ttft_ms,median_tpot_ms,p99_tpot_ms,median_e2el_ms,p99_e2el_ms,median_client_queue_ms,p99_client_queue_ms,max_concurrent_requests,prefix_cache_hit_rate,expected_prefix_cache_hit_rate\n",
    );
    for (label, s) in runs {
        for l in &s.traces {
            let Some(t) = &l.trace else { continue };
            let st = l.stats.as_ref();
            let d = |g: fn(&crate::metrics::LevelDists) -> Option<&crate::metrics::DistStats>,
                     k: fn(&crate::metrics::DistStats) -> f64| {
                f(st.and_then(|s| g(&s.dists)).map(k))
            };
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                csv_text(label),
                s.simulated,
                csv_text(&t.source),
                t.format.name(),
                t.speedup,
                l.requests,
                t.duration_s,
                f(t.offered_rate),
                t.max_concurrency.map_or(String::new(), |c| c.to_string()),
                l.status.name(),
                st.map_or(0, |s| s.scalars.completed),
                st.map_or(0, |s| s.scalars.failed),
                f(st.and_then(|s| s.scalars.achieved_request_rate)),
                f(st.map(|s| s.scalars.request_throughput)),
                f(st.map(|s| s.scalars.output_throughput)),
                d(|x| x.ttft_ms.as_ref(), |x| x.p50),
                d(|x| x.ttft_ms.as_ref(), |x| x.p99),
                d(|x| x.tpot_ms.as_ref(), |x| x.p50),
                d(|x| x.tpot_ms.as_ref(), |x| x.p99),
                d(|x| x.e2el_ms.as_ref(), |x| x.p50),
                d(|x| x.e2el_ms.as_ref(), |x| x.p99),
                d(|x| x.client_queue_ms.as_ref(), |x| x.p50),
                d(|x| x.client_queue_ms.as_ref(), |x| x.p99),
                st.map_or(String::new(), |s| s
                    .scalars
                    .max_concurrent_requests
                    .to_string()),
                f(st.and_then(|s| s.scalars.prefix_cache_hit_rate)),
                f(t.expected_prefix_cache_hit_rate),
            );
        }
    }
    out
}

/// `trace_timeline.csv`: a replayed trace's latency over its timeline, one row per bin of
/// scheduled time (and run).
pub fn trace_timeline_csv(runs: &[(String, &RunSummary)]) -> String {
    let mut out = String::from(
        "run,simulated,start_s,sent,failed,ttft_p50_ms,ttft_p99_ms,e2el_p50_ms,client_queue_p99_ms\n",
    );
    for (label, s) in runs {
        for l in &s.traces {
            for b in l.stats.iter().flat_map(|st| st.scalars.timeline.iter()) {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{}",
                    csv_text(label),
                    s.simulated,
                    b.start_s,
                    b.sent,
                    b.failed,
                    f(b.ttft_p50_ms),
                    f(b.ttft_p99_ms),
                    f(b.e2el_p50_ms),
                    f(b.client_queue_p99_ms),
                );
            }
        }
    }
    out
}

/// `repeats.csv`: with `--repeat`, one row per level (and run): each figure's mean and 95 %
/// interval across the level's runs (`repeat_mean`, `ci95`).
pub fn repeats_csv(runs: &[(String, &RunSummary)]) -> String {
    use crate::summary::repeats::FIGURES;
    let mut out = String::from("run,simulated,level,runs_done,runs,repeats_disagree");
    for k in FIGURES {
        let _ = write!(out, ",{k},{k}_ci95_low,{k}_ci95_high");
    }
    out.push('\n');
    for (label, s) in runs {
        for l in s.passes().sorted(s.repeated_levels().collect()) {
            let done = s.runs_done(l.index);
            let _ = write!(
                out,
                "{},{},{},{done},{},{}",
                csv_text(label),
                s.simulated,
                csv_text(&l.base_label()),
                l.repeat.map_or(1, |r| r.of),
                csv_text(&l.repeats_disagree.join(" "))
            );
            for k in FIGURES {
                let ci = l.ci95.get(k);
                let _ = write!(
                    out,
                    ",{},{},{}",
                    f(l.repeat_mean.get(k).copied()),
                    f(ci.map(|c| c[0])),
                    f(ci.map(|c| c[1]))
                );
            }
            out.push('\n');
        }
    }
    out
}
