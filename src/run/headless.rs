//! Headless mode: folds events into the `Session` like the dashboard does, and prints progress
//! lines to stderr and the summary tables to stdout.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

use super::session::Session;
use super::sink::Sink;
use crate::event::{Event, EventRx, RunState};
use crate::export::markdown;
use crate::fmt::num;
use crate::summary::LevelStatus;
use crate::summary::findings::CaveatNumbers;
use crate::workload::LevelKind;

/// What to print about an event, captured before the session consumes it.
enum Notice {
    RunStarted,
    Calibrated,
    Phase(String),
    LevelStarted(u32),
    Level(u32),
    Warning(String),
    RunFinished,
    WarmupDone(Box<crate::metrics::RequestRecord>),
    Search,
    ServerStarted(String),
    None,
}

fn notice(ev: &Event) -> Notice {
    match ev {
        Event::RunStarted { .. } => Notice::RunStarted,
        Event::Search(_) => Notice::Search,
        Event::Calibrated(_) => Notice::Calibrated,
        Event::Phase(p) => Notice::Phase(p.clone()),
        Event::LevelStarted { index, .. } => Notice::LevelStarted(*index),
        Event::LevelSkipped { index, .. } | Event::LevelFinished { index, .. } => {
            Notice::Level(*index)
        }
        Event::Warning(w) => Notice::Warning(w.clone()),
        Event::Clock(c) if c.skewed() => Notice::Warning(format!(
            "this machine's clock is {:.1} s off the server's (± {:.1} s): sync it before a sharded run",
            -c.offset_ms / 1000.0,
            c.uncertainty_ms / 1000.0
        )),
        Event::Clock(c) => Notice::Phase(format!(
            "clock: the server's is {:+.0} ms from this machine's (± {:.0} ms, {} Date headers)",
            c.offset_ms, c.uncertainty_ms, c.probes
        )),
        Event::ServerCrashed { message, .. } => Notice::Warning(message.clone()),
        Event::CacheReset { outcome, .. } => match outcome {
            crate::client::CacheReset::Cleared { endpoint, .. } => {
                Notice::Phase(format!("prefix cache cleared ({endpoint})"))
            }
            crate::client::CacheReset::NotOffered(why) => {
                Notice::Warning(format!("--reset-cache: not cleared: {why}"))
            }
            crate::client::CacheReset::Failed(why) => {
                Notice::Warning(format!("--reset-cache: failed: {why}"))
            }
        },
        Event::ServerStarted { launch, .. } => Notice::ServerStarted(format!(
            "[server] restarted with context {} · ready after {:.1} s: {}",
            launch.context_len.map_or("-".into(), |c| c.to_string()),
            launch.ready_s.unwrap_or(0.0),
            launch.command
        )),
        Event::RunFinished { .. } => Notice::RunFinished,
        Event::Request(r) if r.warmup => Notice::WarmupDone(r.clone()),
        Event::Telemetry(crate::telemetry::TelemetryRecord::GpuUnavailable { reason, .. }) => {
            Notice::Warning(format!("no GPU telemetry: {reason}"))
        }
        Event::Telemetry(crate::telemetry::TelemetryRecord::ServerUnavailable {
            reason, ..
        }) => Notice::Warning(format!("no engine metrics: {reason}")),
        // The server's own output is in server.log; headless, stderr keeps servetop's lines.
        Event::Sent { .. }
        | Event::Request(_)
        | Event::Telemetry(_)
        | Event::LevelAdded(_)
        | Event::ServerLog(_)
        // The watch's warnings already said it went away and came back.
        | Event::Outage { .. } => Notice::None,
    }
}

fn say(line: &str) {
    // Broken at spaces to a terminal's width (not mid-word by the terminal).
    let line = crate::export::fit::for_stderr(line);
    let mut e = std::io::stderr().lock();
    let _ = writeln!(e, "{line}");
}

fn print_notice(n: Notice, s: &Session, dir: Option<&std::path::Path>) {
    match n {
        Notice::RunStarted => run_started(s, dir),
        Notice::Calibrated => {
            if let Some(p) = &s.summary.prompts {
                say(&format!(
                    "[prompts] the server adds {} tokens to each prompt; planned lengths include them",
                    p.offset_tokens
                ));
            }
        }
        Notice::Phase(p) => say(&format!("[phase] {p}")),
        Notice::LevelStarted(i) => {
            if let Some(l) = s.summary.level(i) {
                say(&level_started_line(s, l));
            }
        }
        Notice::Level(i) => {
            if let Some(l) = s.summary.level(i) {
                level_ended(l);
                // What the run noted of the level as it ended (delivery bursts), and whether
                // it reached a steady state.
                let mine = format!("{}: ", l.label());
                for w in s.summary.warnings.iter().filter(|w| w.starts_with(&mine)) {
                    say(&format!("    [warning] {w}"));
                }
                if let Some(st) = l.stats.as_ref().filter(|st| {
                    matches!(l.kind, LevelKind::Sweep | LevelKind::Rate)
                        && crate::metrics::steady::short_level("", st).is_some()
                }) {
                    say(&format!(
                        "    [warning] too short for steady state: {} of {} requests sent after the first completion and done by the last send",
                        st.scalars.steady_requests.unwrap_or(0),
                        st.scalars.completed
                    ));
                }
                if let Some(line) = super::estimate::time_left_line(&s.summary) {
                    say(&line);
                }
            }
        }
        Notice::Warning(w) => say(&format!("[warning] {w}")),
        Notice::ServerStarted(line) => say(&line),
        Notice::WarmupDone(r) => match &r.outcome {
            crate::metrics::Outcome::Ok => {
                say(&format!(
                    "[warmup] ok · {} input tokens · TTFT {} ms",
                    r.input_tokens,
                    num(r.ttft_us.map(|v| v as f64 / 1000.0))
                ));
                if let Some(line) = super::estimate::after_warmup_line(&s.summary, &r) {
                    say(&line);
                }
            }
            crate::metrics::Outcome::Failed { message, .. } => {
                say(&format!("[warmup] failed: {message}"));
            }
            crate::metrics::Outcome::Cancelled => {}
        },
        Notice::RunFinished => {
            say(&format!("[done] {}", s.phase));
            if let Some(e) = &s.summary.error {
                say(&format!("[error] {e}"));
            }
        }
        Notice::Search => {
            if let Some(line) = s.summary.search.as_ref().and_then(search_line) {
                say(&line);
            }
        }
        Notice::None => {}
    }
}

/// The server, the prompt method and the run directory, once the run has started.
fn run_started(s: &Session, dir: Option<&std::path::Path>) {
    if let Some(sv) = &s.summary.server {
        say(&format!(
            "[server] {} · model {} · context {} · {}",
            sv.engine.name(),
            sv.model,
            sv.context_limit
                .map_or("not reported".into(), |n| format!("{n} tokens")),
            s.summary.backend.map_or("", |b| b.path())
        ));
    }
    // The plan on stdout, with the tables at the end: what was run, and what it measured.
    for line in &s.summary.plan {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
    }
    if let Some(p) = &s.summary.prompts {
        say(&format!("[prompts] {}", p.description));
    }
    if let Some(d) = dir {
        say(&format!("[files] {}", d.display()));
    }
}

/// What a level is about to send.
fn level_started_line(s: &Session, l: &crate::summary::LevelSummary) -> String {
    let dataset =
        s.summary.config.dataset.is_some() && l.kind != crate::workload::LevelKind::LongContext;
    let count = match l.seconds {
        Some(secs) => format!("{secs} s of requests"),
        None => format!(
            "{} request{}",
            l.requests,
            if l.requests == 1 { "" } else { "s" }
        ),
    };
    let late = match l.start_late_ms {
        Some(ms) if ms > 1000 => format!(
            " (started {:.1} s after its slot: less time to send)",
            ms as f64 / 1000.0
        ),
        _ => String::new(),
    };
    format!(
        "[{}] {count}{late}{}",
        l.label(),
        if dataset && l.conversation.is_some() {
            format!(
                ", user messages from the dataset, {} out tokens",
                l.output_len
            )
        } else if dataset {
            ", prompts and output lengths from the dataset".to_string()
        } else {
            format!(" of {} in / {} out tokens", l.input_len, l.output_len)
        }
    )
}

/// A level's result lines as it ends (or why it was skipped).
fn level_ended(l: &crate::summary::LevelSummary) {
    if l.status == LevelStatus::Skipped {
        say(&format!(
            "[{}] SKIPPED: {}",
            l.label(),
            l.reason.as_deref().unwrap_or("")
        ));
        return;
    }
    let Some(st) = &l.stats else {
        say(&format!("[{}] {}", l.label(), l.status.name()));
        return;
    };
    let sc = &st.scalars;
    if l.kind == crate::workload::LevelKind::Rate {
        say(&rate_level_line(l, st));
    } else {
        say(&level_line(l, st));
    }
    for (k, f) in &sc.failures {
        say(&format!(
            "    {k}: {} × first: {}",
            f.count, f.first_message
        ));
    }
    if l.seconds.is_some() && sc.cancelled > 0 {
        say(&format!(
            "    {} requests still running at the end of the level's drain were cancelled (not counted; a longer --drain-seconds lets them finish)",
            sc.cancelled
        ));
    }
    if l.kind != crate::workload::LevelKind::Rate {
        for line in cache_lines(sc) {
            say(&line);
        }
    }
    if let Some(line) = reasoning_line(st) {
        say(&line);
    }
    let e = &l.energy;
    if let Some(j) = e.energy_j {
        say(&format!(
            "    energy {} J · {} W · {} J per output token{} ({})",
            num(Some(j)),
            num(e.mean_power_w),
            num(e.joules_per_output_token),
            e.cost_per_million_output_tokens
                .map_or(String::new(), |c| format!(
                    " · USD {} per M output tokens",
                    num(Some(c))
                )),
            e.energy_source.as_deref().unwrap_or_default()
        ));
    }
}

/// `    thinking 66.7 % of output · TTFC p50 … · answer … tok/s · 2.0 tool calls`, for a level
/// that reasoned or called tools.
fn reasoning_line(st: &crate::metrics::LevelStats) -> Option<String> {
    let (sc, d) = (&st.scalars, &st.dists);
    let share = sc.reasoning_share.filter(|&r| r > 0.0);
    if share.is_none() && sc.mean_tool_calls.is_none() {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(r) = share {
        parts.push(format!(
            "thinking {:.1} % of output ({} tokens) · TTFC p50 {} ms · thinking p50 {} ms · answer {} tok/s",
            r * 100.0,
            num(sc.mean_reasoning_tokens),
            num(d.ttfc_ms.as_ref().map(|d| d.p50)),
            num(d.thinking_ms.as_ref().map(|d| d.p50)),
            num(d.content_decode_tokens_per_s.as_ref().map(|d| d.mean)),
        ));
    }
    if let Some(t) = sc.mean_tool_calls {
        parts.push(format!(
            "{} tool calls a request, the first after {} ms (p50)",
            num(Some(t)),
            num(d.first_tool_call_ms.as_ref().map(|d| d.p50))
        ));
    }
    Some(format!("    {}", parts.join(" · ")))
}

/// A rate level's line: offered against achieved rates, and the client queue.
fn rate_level_line(l: &crate::summary::LevelSummary, st: &crate::metrics::LevelStats) -> String {
    let (sc, d) = (&st.scalars, &st.dists);
    format!(
        "[{}] {} · {} ok, {} failed · sent at {} req/s, done {} req/s · {} out tok/s · TTFT p50 {} ms · TPOT p50 {} ms · client queue p99 {} ms · {:.1} s",
        l.label(),
        l.status.name(),
        sc.completed,
        sc.failed,
        num(sc.achieved_request_rate),
        num(Some(sc.request_throughput)),
        num(Some(sc.output_throughput)),
        num(d.ttft_ms.as_ref().map(|d| d.p50)),
        num(d.tpot_ms.as_ref().map(|d| d.p50)),
        num(d.client_queue_ms.as_ref().map(|d| d.p99)),
        sc.duration_s
    )
}

/// A closed-loop level's line: throughput, latency and the accept length.
fn level_line(l: &crate::summary::LevelSummary, st: &crate::metrics::LevelStats) -> String {
    let (sc, d) = (&st.scalars, &st.dists);
    format!(
        "[{}] {} · {} ok, {} failed · {} out tok/s · per-stream {} tok/s · TTFT p50 {} ms · ITL p50 {} ms · accept {} · {:.0} % multi-event deliveries · {:.1} s",
        l.label(),
        l.status.name(),
        sc.completed,
        sc.failed,
        num(Some(sc.output_throughput)),
        num(d.decode_tokens_per_s.as_ref().map(|d| d.mean)),
        num(d.ttft_ms.as_ref().map(|d| d.p50)),
        num(d.itl_ms.as_ref().map(|d| d.p50)),
        if l.delivery_bursts {
            "— (delivery bursts)".to_string()
        } else {
            num(sc.accept_length_client)
        },
        sc.multi_event_delivery_share.unwrap_or(0.0) * 100.0,
        sc.duration_s
    )
}

/// What a search update adds: the bound when bisection starts, each probe's verdict, the
/// answer at the end.
fn search_line(s: &crate::workload::search::SearchSummary) -> Option<String> {
    use crate::fmt::fmt_rate;
    if s.status.finished() {
        let mut line = format!("[search] {}", s.headline());
        let unsure: Vec<String> = s.uncertain().map(|p| p.at.describe()).collect();
        if !unsure.is_empty() {
            let _ = write!(
                line,
                "\n[search] uncertain verdicts (the 95 % interval of the percentile straddles a limit): {}",
                unsure.join(", ")
            );
        }
        return Some(line);
    }
    let last = s.probes.last()?;
    match &last.check {
        None if s.probes.len() == 1 => s
            .throughput_probe
            .as_ref()
            .and_then(|t| t.request_throughput.map(|x| (t.concurrency, x)))
            .map(|(c, x)| {
                format!(
                    "[search] throughput bound {} req/s (closed loop at C={c}); bisecting for {}",
                    fmt_rate(x),
                    s.slo.describe()
                )
            }),
        None => None,
        Some(c) => Some(format!(
            "[search] probe {} at {}: {} · goodput {} req/s · {}",
            last.step,
            last.at.describe(),
            c.verdict(),
            num(last.goodput),
            c.describe()
        )),
    }
}

fn progress_line(s: &Session) -> Option<String> {
    let i = s.current?;
    let l = s.summary.level(i)?;
    let p = s.progress.get(&i)?;
    let st = s.live_stats(i)?;
    let of = match l.seconds {
        // A time-bounded level has no count to reach.
        Some(_) => String::new(),
        None => format!("/{}", l.requests),
    };
    Some(format!(
        "[{}] {}{of} done, {} in flight · {} out tok/s so far",
        l.label(),
        p.finished,
        s.in_flight(i),
        num(Some(st.scalars.output_throughput))
    ))
}

/// Consumes events until the runner finishes; prints as it goes.
pub async fn drive(
    mut rx: EventRx,
    session: &mut Session,
    sink: &mut Sink,
    quiet: bool,
) -> RunState {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    tick.tick().await;
    // requests.jsonl reaches the disk every 200 ms, not after every batch: at thousands of
    // requests a second a write per batch takes the core from the streams being timed.
    let mut flush = tokio::time::interval(Duration::from_millis(200));
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut state = RunState::Running;
    // Events are taken every few milliseconds, never waited for (see `follower::DRAIN`).
    let mut drain = super::follower::drain_ticker();
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            _ = drain.tick() => {
                let closed = super::follower::take(&mut rx, &mut batch);
                for ev in batch.drain(..) {
                    if let Event::RunFinished { state: st, .. } = &ev {
                        state = *st;
                    }
                    let n = if quiet { Notice::None } else { notice(&ev) };
                    sink.apply(session, ev);
                    print_notice(n, session, sink.dir());
                }
                if closed || state != RunState::Running {
                    break;
                }
            }
            _ = flush.tick() => sink.flush(session),
            _ = tick.tick() => {
                if let Some(line) = progress_line(session).filter(|_| !quiet) {
                    say(&line);
                }
            }
        }
    }
    sink.flush(session);
    state
}

/// The SLO search, the concurrency sweep and the rate levels, each level's caveat numbers in
/// the tables' last column.
fn search_sweep_and_rates(out: &mut String, s: &Session, notes: &CaveatNumbers) {
    if let Some(search) = &s.summary.search {
        let _ = write!(
            out,
            "SLO capacity search ({} in / {} out tokens; {})\n\n",
            s.summary.config.input_len,
            s.summary.config.output_len,
            markdown::search_load(&s.summary, search)
        );
        out.push_str(&markdown::search_section(search));
        out.push('\n');
    }
    if !s.summary.sweep.is_empty() {
        let _ = write!(
            out,
            "{} ({})\n\n",
            markdown::sweep_heading(&s.summary),
            s.summary.config.lengths_label()
        );
        out.push_str(&markdown::with_caveats(
            notes,
            &markdown::sweep_table(&s.summary.sweep, &s.summary.config.metric_percentiles),
            &s.summary.sweep,
        ));
        out.push_str(&markdown::spread_note(&s.summary.sweep));
        out.push('\n');
    }
    if !s.summary.rates.is_empty() {
        let _ = write!(
            out,
            "{} ({}; {})\n\n",
            if s.summary.search.is_some() {
                "Request-rate levels: the search probes, in the order they ran"
            } else {
                "Request-rate sweep"
            },
            s.summary.config.lengths_label(),
            markdown::arrival_description(&s.summary.config.open_loop)
        );
        out.push_str(&markdown::with_caveats(
            notes,
            &markdown::rate_table(&s.summary.rates, &s.summary.config.metric_percentiles),
            &s.summary.rates,
        ));
        out.push_str(&markdown::spread_note(&s.summary.rates));
        out.push('\n');
    }
}

/// The tables printed on stdout at the end.
pub fn final_tables(s: &Session) -> String {
    let mut out = String::new();
    let notes = CaveatNumbers::of(&s.summary);
    if s.summary.simulated {
        out.push_str("SIMULATED SERVER: every number below comes from servetop's built-in simulator, not real hardware.\n\n");
    }
    search_sweep_and_rates(&mut out, s, &notes);
    if markdown::any_repeats(&s.summary) {
        out.push_str("Across repeats (mean ± 95 % interval)\n\n");
        out.push_str(&markdown::repeats_table(&s.summary));
        out.push('\n');
    }
    if !s.summary.traces.is_empty() {
        out.push_str("Trace replay\n\n");
        out.push_str(&markdown::trace_table(&s.summary.traces));
        for l in &s.summary.traces {
            let t = markdown::timeline_table(l, 12);
            if !t.is_empty() {
                out.push_str("\nOver the trace's timeline\n\n");
                out.push_str(&t);
            }
        }
        out.push('\n');
    }
    if !s.summary.long_context.is_empty() {
        let _ = write!(
            out,
            "Long context ({} output tokens)\n\n",
            s.summary.config.long_context_output_len
        );
        out.push_str(&markdown::with_caveats(
            &notes,
            &markdown::long_context_table(&s.summary.long_context),
            &s.summary.long_context,
        ));
    }
    if !s.summary.multi_turn.is_empty() {
        out.push_str("\nMulti-turn chats\n\n");
        out.push_str(&markdown::turns_table(&s.summary));
    }
    if !s.summary.sessions.is_empty() {
        out.push_str("\nAgent sessions\n\n");
        out.push_str(&markdown::sessions_table(&s.summary));
    }
    if !s.summary.slo_tiers.is_empty() {
        out.push_str("\nSLO tiers\n\n");
        out.push_str(&markdown::tiers_table(&s.summary));
    }
    if let Some(b) = &s.summary.baseline {
        let _ = write!(out, "\nAgainst the baseline {} ({})\n\n", b.source, b.label);
        out.push_str(&markdown::baseline_table(&s.summary));
    }
    let all: Vec<crate::summary::LevelSummary> = s.summary.levels().cloned().collect();
    if markdown::any_energy(&all) {
        out.push_str("\nEnergy and cost\n\n");
        out.push_str(&markdown::energy_table(&all));
    }
    if markdown::any_reasoning(&all) {
        out.push_str(
            "\nReasoning and answers (TTFC: the first answer token, after the thinking)\n\n",
        );
        out.push_str(&markdown::reasoning_table(&all));
    }
    let structured = markdown::structured_table(&all);
    if let (false, Some(f)) = (structured.is_empty(), &s.summary.config.response_format) {
        let _ = write!(
            out,
            "\nStructured output ({}): each constrained level against its plain twin\n\n{structured}",
            f.label()
        );
    }
    let images = markdown::images_table(&all);
    if !images.is_empty() {
        let _ = write!(out, "\nImages\n\n{images}");
    }
    let lora = markdown::lora_table(&all);
    if !lora.is_empty() {
        let _ = write!(
            out,
            "\nLoRA adapters ({} over {})\n\n{lora}",
            s.summary.config.lora_dist.label(),
            s.summary.config.lora_modules.join(", ")
        );
    }
    if !s.summary.findings.is_empty() {
        out.push_str("\nFindings\n\n");
        out.push_str(&markdown::findings_list(&s.summary));
    }
    out
}

/// The server's prefix-cache report for a level, and a multi-turn level's turns.
fn cache_lines(sc: &crate::metrics::LevelScalars) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rate) = sc.prefix_cache_hit_rate {
        out.push(format!(
            "    prefix cache: {:.1} % of prompt tokens served from it (the server's count, {} requests)",
            rate * 100.0,
            sc.cache_reports
        ));
    }
    let sub = sc
        .session
        .iter()
        .flat_map(|x| x.sub_agent_turns.iter())
        .map(|t| (t, "sub-agents' turn"));
    for (t, name) in sc.turns.iter().map(|t| (t, "turn")).chain(sub) {
        out.push(format!(
            "    {name} {}: {} ok{} · input {} tok · cached {} · TTFT p50 {} ms, p90 {} ms",
            t.turn,
            t.completed,
            if t.failed > 0 {
                format!(", {} failed", t.failed)
            } else {
                String::new()
            },
            num(t.mean_input_tokens),
            t.cache_hit_rate.map_or_else(
                || "not reported".to_string(),
                |r| format!("{:.1} %", r * 100.0)
            ),
            num(t.median_ttft_ms),
            num(t.p90_ttft_ms),
        ));
    }
    out
}
