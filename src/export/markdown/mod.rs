//! `summary.md` and the headless end-of-run tables: plain Markdown a person can paste. This
//! file writes the document (the run's facts, then a section per part of the run); the
//! tables are in `tables.rs`.

use std::fmt::Write;

use crate::fmt::num;
use crate::summary::{LevelSummary, RunSummary};
use crate::workload::search::SearchTarget;

mod compare;
mod content;
mod findings;
mod lengths;
mod mixes;
mod repeats;
mod sessions;
mod shards;
mod steady;
mod tables;
mod tiers;
mod trace;

pub use compare::{Against, against_first, side_by_side};
pub use findings::{FINDINGS_HEADING, across_section, findings_list, with_caveats};
pub use mixes::{images_table, lora_table, spread_note, structured_table};
pub use repeats::{any_repeats, repeats_table};
pub use sessions::sessions_table;
pub use tables::*;
pub use tiers::tiers_table;
pub use trace::{timeline_table, trace_table};
/// The whole `summary.md`.
pub fn summary_md(s: &RunSummary) -> String {
    let mut out = run_header(s);
    sections(&mut out, s);
    out
}

/// The servers servetop started (`--serve`), each with the levels it measured.
fn servers_md(out: &mut String, s: &RunSummary) {
    if let Some(serve) = s.config.serve.as_ref().filter(|c| !c.params.is_empty()) {
        let _ = writeln!(
            out,
            "- server configuration (`--serve-param`): {}",
            serve.params_label()
        );
    }
    if s.servers.is_empty() {
        return;
    }
    let _ = writeln!(out, "- servers started by servetop (`--serve`):");
    for (i, sv) in s.servers.iter().enumerate() {
        let measured: Vec<String> = s
            .levels()
            .filter(|l| l.server_index == Some(i as u32))
            .map(LevelSummary::label)
            .collect();
        let _ = writeln!(
            out,
            "  - #{i}: context {}, ready after {} s, measured {}: `{}`",
            sv.context_len.map_or("-".into(), |c| c.to_string()),
            num(sv.ready_s),
            if measured.is_empty() {
                "no level".to_string()
            } else {
                measured.join(", ")
            },
            sv.command
        );
    }
}

/// The title, the SIMULATED banner, and the run's facts as a list.
fn run_header(s: &RunSummary) -> String {
    let mut out = String::new();
    let (engine, model, url) = s
        .server
        .as_ref()
        .map_or(("?", "?", s.config.base_url.as_str()), |sv| {
            (sv.engine.name(), sv.model.as_str(), sv.base_url.as_str())
        });
    let _ = writeln!(out, "# servetop results: {model}\n");
    if s.simulated {
        let _ = writeln!(
            out,
            "> **SIMULATED SERVER** — every number below comes from servetop's built-in simulator{}, not from real hardware.\n",
            s.simulator
                .as_ref()
                .map(|c| format!(" (preset `{}`)", c.preset))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(
        out,
        "- engine: {engine}{}",
        s.server
            .as_ref()
            .and_then(|v| v.engine_version.as_ref())
            .map(|v| format!(" {v}"))
            .unwrap_or_default()
    );
    let _ = writeln!(out, "- server: {url}");
    servers_md(&mut out, s);
    if let Some(sv) = &s.server {
        let _ = writeln!(
            out,
            "- context limit: {}",
            sv.context_limit.map_or_else(
                || "not reported".to_string(),
                |n| format!(
                    "{n} tokens ({})",
                    sv.context_limit_source.as_deref().unwrap_or("?")
                )
            )
        );
    }
    if let Some(b) = s.backend {
        let _ = writeln!(out, "- endpoint: {}", b.path());
    }
    let t = &s.telemetry;
    let _ = writeln!(
        out,
        "- GPUs: {}; engine metrics: {}",
        match (&t.gpu_source, &t.gpu_reason) {
            (Some(crate::telemetry::GpuSource::SimulatedDcgm), _) =>
                "simulated (servetop-sim DCGM endpoint)".to_string(),
            (Some(src), _) => format!("{src:?}").to_lowercase(),
            (None, Some(r)) => format!("none ({r})"),
            (None, None) => "not sampled".into(),
        },
        match (&t.server_flavor, &t.server_reason) {
            (Some(f), _) => format!("{f} /metrics"),
            (None, Some(r)) => format!("none ({r})"),
            (None, None) => "not scraped".into(),
        }
    );
    let _ = writeln!(
        out,
        "- started: {} on {} (servetop {}), state: {:?}",
        s.started_at, s.host, s.tool.version, s.state
    );
    if let Some(p) = &s.prompts {
        let _ = writeln!(
            out,
            "- prompts: {} (server adds {} tokens)",
            p.description, p.offset_tokens
        );
    }
    let sources = count_sources(s);
    if !sources.is_empty() {
        let _ = writeln!(out, "- token counts: {sources}");
    }
    shards::clock_lines(&mut out, s);
    out
}

/// Each level's figures per LoRA adapter, when the run named adapters.
fn lora_section(out: &mut String, s: &RunSummary, all: &[LevelSummary]) {
    let lora = lora_table(all);
    if lora.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n## LoRA adapters ({} over {})\n",
        s.config.lora_dist.label(),
        s.config.lora_modules.join(", ")
    );
    out.push_str(&lora);
    out.push_str("\nshare: the adapter's part of the level's requests; req/s and out tok/s: its own completions and output tokens over the level's whole window (the adapters' add up to the level's).\n");
}

/// Each constrained level against its plain twin, when the run had `--response-format`.
fn structured_section(out: &mut String, s: &RunSummary, all: &[LevelSummary]) {
    let table = structured_table(all);
    let Some(f) = &s.config.response_format else {
        return;
    };
    if table.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n## Structured output ({})\n", f.label());
    out.push_str(&table);
    out.push_str("\nEach constrained level against its plain twin, run just before it with the same requests (plain → constrained, change in %). A constrained answer ends where its constraint does (no ignore_eos), so throughputs compare answers of the lengths shown. An answer complies when it parses as a JSON object, is valid against the schema, or the pattern matches it whole.\n");
}

/// The levels' requests by the images they carried, when they carried any.
fn images_section(out: &mut String, all: &[LevelSummary]) {
    let images = images_table(all);
    if !images.is_empty() {
        out.push_str("\n## Images\n\n");
        out.push_str(&images);
        out.push_str("\nimage tokens: the server's prompt tokens less the text's as counted for the request (the chat template's own tokens learned from the warmup).\n");
    }
}

/// Thinking and answers per level, when any level's requests reasoned.
fn reasoning_section(out: &mut String, all: &[LevelSummary]) {
    if any_reasoning(all) {
        out.push_str("\n## Reasoning and answers\n\n");
        out.push_str(&reasoning_table(all));
        out.push_str("\nTTFC: time to the first token of the answer (content), after the thinking; thinking: first token to first answer token. reasoning share: thinking tokens over all output tokens. answer tok/s: the answer's own decode speed, (answer tokens − 1) / (E2E − TTFC).\n");
    }
}

/// How a search's probes load the server: the rate search's arrivals, or the concurrency
/// search's closed loop (of users running sessions, with `--sessions`).
pub fn search_load(s: &RunSummary, search: &crate::workload::search::SearchSummary) -> String {
    match (search.target, &s.config.sessions) {
        (SearchTarget::Rate, _) => arrival_description(&s.config.open_loop),
        (SearchTarget::Concurrency, Some(x)) if search.sessions => format!(
            "users running sessions of {} turns, tool results of {} tokens, tool waits {}",
            x.turns,
            x.tool_result_len,
            x.tool_wait.describe()
        ),
        (SearchTarget::Concurrency, _) => "closed loop".into(),
    }
}

/// What the closed-loop levels are: the concurrency sweep, or the concurrency search's probes.
pub fn sweep_heading(s: &RunSummary) -> &'static str {
    if s.search
        .as_ref()
        .is_some_and(|x| x.target == SearchTarget::Concurrency)
    {
        "Concurrency levels: the search probes, in the order they ran"
    } else {
        "Concurrency sweep"
    }
}

/// The SLO search's section, when the run searched.
fn search_part(out: &mut String, s: &RunSummary) {
    if let Some(search) = &s.search {
        let _ = writeln!(
            out,
            "\n## SLO capacity search ({} in / {} out tokens; {})\n",
            s.config.input_len,
            s.config.output_len,
            search_load(s, search)
        );
        out.push_str(&search_section(search));
    }
}

/// One section for each part of the run that has levels, then warnings and the error.
fn sections(out: &mut String, s: &RunSummary) {
    findings::findings_section(out, s);
    let notes = crate::summary::findings::CaveatNumbers::of(s);
    shards::shards_section(out, s);
    search_part(out, s);
    if !s.sweep.is_empty() {
        let _ = writeln!(
            out,
            "\n## {} ({})\n",
            sweep_heading(s),
            s.config.lengths_label()
        );
        out.push_str(&with_caveats(
            &notes,
            &sweep_table(&s.sweep, &s.config.metric_percentiles),
            &s.sweep,
        ));
        out.push_str(&spread_note(&s.sweep));
        out.push_str("\nper-stream tok/s: mean decode speed of one request, (output − 1) / (E2E − TTFT). accept len: mean tokens per chunk after the first, as the client saw them (client / server when the engine reports it).\n");
        out.push_str(&telemetry_table(&s.sweep));
    }
    let all: Vec<LevelSummary> = s.levels().cloned().collect();
    energy_section(out, s, &all);
    lora_section(out, s, &all);
    structured_section(out, s, &all);
    images_section(out, &all);
    reasoning_section(out, &all);
    out.push_str(&content::content_section(&all));
    out.push_str(&lengths::answer_lengths_section(&all));
    if !s.rates.is_empty() {
        let _ = writeln!(
            out,
            "\n## {} ({}; {})\n",
            if s.search.is_some() {
                "Request-rate levels: the search probes, in the order they ran"
            } else {
                "Request-rate sweep"
            },
            s.config.lengths_label(),
            arrival_description(&s.config.open_loop)
        );
        out.push_str(&with_caveats(
            &notes,
            &rate_table(&s.rates, &s.config.metric_percentiles),
            &s.rates,
        ));
        out.push_str(&spread_note(&s.rates));
        out.push_str("\nrate: requests/s the schedule was drawn for; sent req/s: the rate requests actually went out at; done req/s: completions over the level's window. client queue: how long a request waited in servetop past its scheduled time (a full --max-concurrency, or a client that fell behind); the server's own queueing shows up in TTFT.\n");
        out.push_str(&telemetry_table(&s.rates));
    }
    trace::trace_section(out, s);
    repeats::repeats_section(out, s);
    steady::steady_section(out, s);
    if !s.long_context.is_empty() {
        let _ = writeln!(
            out,
            "\n## Long context ({} output tokens, {} at a time)\n",
            s.config.long_context_output_len, 1
        );
        out.push_str(&with_caveats(
            &notes,
            &long_context_table(&s.long_context),
            &s.long_context,
        ));
    }
    if !s.multi_turn.is_empty() {
        out.push_str("\n## Multi-turn chats\n\n");
        out.push_str(&turns_table(s));
        out.push_str("\nEach turn sends the whole conversation so far (earlier messages and the server's real replies) plus a new message. cached: prompt tokens the server says it served from its prefix cache (usage.prompt_tokens_details.cached_tokens), over the requests that reported it; later turns should prefill little more than the new message.\n");
    }
    out.push_str(&sessions::sessions_section(s));
    out.push_str(&tiers::tiers_section(s));
    baseline_section(out, s);
    let crashes: Vec<&LevelSummary> = s.levels().filter(|l| l.server_crash.is_some()).collect();
    if !crashes.is_empty() {
        out.push_str("\n## Server crashes\n\n");
        for l in crashes {
            let _ = writeln!(
                out,
                "- during {}: {}",
                l.label(),
                l.server_crash.as_deref().unwrap_or_default()
            );
        }
    }
    if !s.warnings.is_empty() {
        out.push_str("\n## Warnings\n\n");
        for w in &s.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    if let Some(e) = &s.error {
        let _ = writeln!(out, "\n**Run stopped:** {e}");
    }
}

/// This run against `--baseline`: its source and the comparison table (nothing without one).
fn baseline_section(out: &mut String, s: &RunSummary) {
    if let Some(b) = &s.baseline {
        let _ = writeln!(
            out,
            "\n## Against the baseline\n\nBaseline: `{}` ({}{}).\n",
            b.source,
            b.label,
            if b.simulated { ", SIMULATED" } else { "" }
        );
        out.push_str(&baseline_table(s));
        out.push_str("\nΔ: the change in percent of the baseline's value; levels match by kind, concurrency, context or offered rate, input/output lengths and number of requests. Worse is lower out tok/s or higher TTFT and TPOT p50; a level the baseline measured and this run did not counts as worse.\n");
    }
}

/// The energy table, with the idle power before the first request; or one line saying why
/// energy was not measured.
fn energy_section(out: &mut String, s: &RunSummary, all: &[LevelSummary]) {
    if any_energy(all) {
        out.push_str("\n## Energy and cost\n\n");
        if let Some(w) = s.telemetry.idle_power_w {
            let _ = writeln!(
                out,
                "Idle power before the first request: {} W (all GPUs). The levels' power below includes it: that is what the server costs while it works.\n",
                num(Some(w))
            );
        }
        out.push_str(&energy_table(all));
        out.push_str("\nenergy: the GPUs' energy counters read just before each level and at its end (or, where a GPU has no counter, its power samples integrated, said so). cost: the level's wall time at the configured price (`--gpu-hour-cost` per GPU, or `--cost-per-hour`), per million tokens.\n");
    } else if let Some(why) = all.iter().find_map(|l| l.energy.energy_source.as_deref()) {
        let _ = writeln!(out, "\nEnergy per token: {why}.");
    }
}

/// `output: server usage (all); per chunk: per-chunk usage (all)`.
fn count_sources(s: &RunSummary) -> String {
    use std::collections::BTreeMap;
    let mut out_src: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut chunk_src: BTreeMap<&'static str, u64> = BTreeMap::new();
    let (mut deliveries, mut multi) = (0u64, 0.0f64);
    for l in s.levels() {
        if let Some(st) = &l.stats {
            deliveries += st.scalars.deliveries;
            multi +=
                st.scalars.multi_event_delivery_share.unwrap_or(0.0) * st.scalars.deliveries as f64;
            for (k, v) in &st.scalars.output_token_sources {
                *out_src.entry(k.label()).or_default() += v;
            }
            for (k, v) in &st.scalars.chunk_token_sources {
                *chunk_src.entry(k.label()).or_default() += v;
            }
        }
    }
    let fmt = |m: &BTreeMap<&str, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} ({v} requests)"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if out_src.is_empty() {
        return String::new();
    }
    let mut line = format!(
        "output totals from {}; tokens per chunk from {}",
        fmt(&out_src),
        fmt(&chunk_src)
    );
    if deliveries > 0 {
        let _ = write!(
            line,
            "; {:.1} % of {deliveries} deliveries held several events",
            100.0 * multi / deliveries as f64
        );
    }
    line
}
