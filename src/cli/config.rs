//! Flags to configurations: `servetop run`'s flags to a validated [`RunConfig`], `servetop
//! sim`'s over a preset to a [`SimConfig`]. Every bad value is one line naming the flag.

pub use super::serve_param::serve_combinations;
use crate::cli::{RunArgs, ServerArgs, SimArgs, WorkloadArgs};
use crate::config::{MultiTurn, RunConfig};
use crate::metrics::Slo;
use crate::sim::{AcceptLength, SimConfig};

/// `--accept-by-content code=4.1,chat=2.6`: each kind's mean accept length, 1 to 64.
fn accept_by_content(
    list: &str,
) -> Result<std::collections::BTreeMap<crate::workload::content::ContentKind, f64>, String> {
    let mut out = std::collections::BTreeMap::new();
    for part in list.split(',') {
        let err = |why: String| format!("--accept-by-content '{}': {why}", part.trim());
        let (kind, n) = part
            .split_once('=')
            .ok_or_else(|| err("write KIND=N, e.g. code=4.1".into()))?;
        let kind = crate::workload::content::ContentKind::parse(kind).map_err(err)?;
        let n: f64 = n
            .trim()
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite() && (1.0..=64.0).contains(n))
            .ok_or_else(|| err("the accept length must be a number from 1 to 64".into()))?;
        if out.insert(kind, n).is_some() {
            return Err(err(format!("{} is given twice", kind.name())));
        }
    }
    Ok(out)
}

/// `--categories all|NAMES` against the dataset's own categories: `all` is every one in the
/// order they first appear; a name it does not hold is refused, naming those it does.
fn categories(work: &WorkloadArgs) -> Result<Vec<String>, String> {
    let (Some(asked), Some(path)) = (&work.categories, &work.dataset) else {
        return Ok(Vec::new());
    };
    let d = crate::workload::dataset::Dataset::load(path)?;
    let have = d.category_names();
    if have.is_empty() {
        return Err(format!(
            "--categories: no entry of {} has a category (a \"category\" or \"subject\" field)",
            path.display()
        ));
    }
    if asked.trim() == "all" {
        return Ok(have);
    }
    let mut out: Vec<String> = Vec::new();
    for name in asked.split(',').map(str::trim) {
        if !have.iter().any(|h| h == name) {
            return Err(format!(
                "--categories: {} has no category '{name}' (it has {})",
                path.display(),
                have.join(", ")
            ));
        }
        if out.iter().any(|o| o == name) {
            return Err(format!("--categories: '{name}' is given twice"));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

/// The multi-turn level (`--multi-turn K` and its sizes).
fn multi_turn(work: &WorkloadArgs) -> Option<MultiTurn> {
    work.multi_turn.map(|turns| MultiTurn {
        turns,
        conversations: work.conversations,
        concurrency: work.conversation_concurrency,
        followup_len: work.followup_len,
    })
}

/// `--requests-per-level N|Fx` with `--min-requests`.
fn requests_per_level(
    plan: &crate::cli::run_args::PlanArgs,
) -> Result<crate::workload::RequestCount, String> {
    crate::workload::RequestCount::parse(&plan.requests_per_level, plan.min_requests)
        .map_err(|e| format!("--requests-per-level {e}"))
}

/// Builds the run configuration from `servetop run` flags.
pub fn run_config(a: &RunArgs) -> Result<RunConfig, String> {
    let (slo, slo_tiers) = slo_config(a)?;
    let (server, plan, work, tel) = (&a.server, &a.plan, &a.workload, &a.telemetry);
    let search = search_config(a)?;
    let chat = chat_extras(work)?;
    let cfg = RunConfig {
        base_url: server
            .base_url
            .as_deref()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_string(),
        backend: server.backend,
        model: server.model.clone(),
        concurrency: plan.concurrency.0.clone(),
        input_len: plan.input_len,
        output_len: plan.output_len,
        shared_prefix_len: work.shared_prefix_len,
        range_ratio: work.range_ratio,
        natural_stop: work.natural_stop,
        lora_modules: work.lora_modules.0.clone(),
        lora_dist: work.lora_dist,
        images: work.images,
        image_sizes: crate::workload::images::parse_sizes(&work.image_size)?,
        response_format: work
            .response_format
            .as_deref()
            .map(crate::client::structured::ResponseFormat::parse)
            .transpose()?,
        content: work.content.clone().unwrap_or_default().0,
        shapes: plan.shapes.clone().unwrap_or_default().0,
        shape_mix: work.shape_mix.clone().unwrap_or_default().0,
        lognormal_sigma: work.length_dist,
        categories: categories(work)?,
        dataset: work.dataset.clone(),
        sessions: a.sessions.sessions()?,
        multi_turn: multi_turn(work),
        requests_per_level: requests_per_level(plan)?,
        open_loop: crate::workload::OpenLoop {
            request_rates: plan.request_rate.0.clone(),
            burstiness: plan.burstiness,
            ramp_up_s: plan.ramp_up,
            max_concurrency: plan.max_concurrency,
        },
        warmup_requests: plan.warmup,
        long_context: plan.long_context.0.clone(),
        long_context_output_len: plan.long_context_output_len,
        long_context_repeats: plan.long_context_repeats,
        tokenizer: server.tokenizer.clone(),
        temperature: work.temperature,
        first_token_timeout_s: a.timeouts.first_token_timeout,
        idle_timeout_s: a.timeouts.idle_timeout,
        grace_s: a.timeouts.grace,
        slo,
        slo_tiers,
        // A new seed per run: the same prompts again would be prefix-cache hits on vLLM, SGLang
        // and llama.cpp, and prefill would measure nothing.
        seed: plan.seed.unwrap_or_else(rand::random),
        out_dir: a.output.out.clone().unwrap_or_default(),
        api_key_env: server.api_key_env.clone(),
        // A shard keeps its chunks: the merge folds ITL and tokens per chunk from them.
        record_chunks: tel.record_chunks || a.clock.shard.is_some() || a.clock.shards.is_some(),
        metric_percentiles: tel.metric_percentiles.clone().unwrap_or_default().0,
        metrics_url: tel.metrics_url.clone(),
        no_metrics: tel.no_metrics,
        dcgm_url: tel.dcgm_url.clone(),
        no_gpu: tel.no_gpu,
        gpu_interval_s: tel.gpu_interval,
        server_wait_s: server.server_wait,
        reset_cache: server.reset_cache,
        serve: serve_config(server),
        search,
        chat,
        gpu_hour_cost: tel.gpu_hour_cost,
        cost_per_hour: tel.cost_per_hour,
        gpus: tel.gpus,
        trace: trace_config(a)?,
        repeat: plan.repeat,
        thinking_budgets: work
            .thinking_budget
            .clone()
            .map(|b| b.0)
            .unwrap_or_default(),
        extra_body: work.extra_body.as_deref().map(extra_body).transpose()?,
        headers: headers(server)?,
        clock: a.clock.clock(crate::telemetry::now_unix_ms())?,
        shard: a.clock.shard()?,
    };
    let cfg = if cfg.search.is_some() || cfg.trace.is_some() {
        // The search and the trace run alone: the run's levels are theirs.
        RunConfig {
            concurrency: Vec::new(),
            long_context: Vec::new(),
            ..search_in_sessions(cfg, a.slo.search_probe_concurrency.is_some())?
        }
    } else {
        cfg
    };
    cfg.validate()?;
    Ok(cfg)
}

/// `--header NAME:VALUE`, each parsed.
fn headers(a: &ServerArgs) -> Result<Vec<crate::config::header::HttpHeader>, String> {
    a.header
        .iter()
        .map(|h| crate::config::header::HttpHeader::parse(h))
        .collect()
}

/// The server servetop starts (`--serve`), if any.
fn serve_config(a: &ServerArgs) -> Option<crate::config::ServeConfig> {
    a.serve.as_ref().map(|command| crate::config::ServeConfig {
        command: command.clone(),
        context_len: a.context_len,
        context_steps: {
            let mut steps = a
                .context_steps
                .as_ref()
                .map(|l| l.0.clone())
                .unwrap_or_default();
            steps.sort_unstable();
            steps
        },
        timeout_s: a.serve_timeout,
        restart_on_crash: a.restart_on_crash,
        params: Vec::new(),
    })
}

/// The `--search` flags, checked.
fn search_config(a: &RunArgs) -> Result<Option<crate::workload::search::SearchConfig>, String> {
    let Some(target) = a.slo.search.as_deref() else {
        return Ok(None);
    };
    let base = match target.trim() {
        "rate" => crate::workload::search::SearchConfig::rate(),
        "concurrency" => crate::workload::search::SearchConfig::concurrency(),
        other => {
            return Err(format!(
                "--search '{other}': the searches are 'rate' and 'concurrency'"
            ));
        }
    };
    if !a.plan.request_rate.0.is_empty() {
        return Err(format!(
            "--search {} picks its own levels; leave out --request-rate (or run the rate sweep separately)",
            base.target.name()
        ));
    }
    let concurrency = base.target == crate::workload::search::SearchTarget::Concurrency;
    let probe_concurrency = match (a.slo.search_probe_concurrency, a.plan.max_concurrency) {
        (Some(c), _) => c,
        // The concurrency search starts below its cap, so that a pass there can double.
        (None, Some(max)) if concurrency => (max / 4).clamp(1, 64),
        (None, Some(max)) => max,
        (None, None) => 64,
    };
    let cfg = crate::workload::search::SearchConfig {
        precision: crate::workload::search::Precision::parse(&a.slo.search_precision)?,
        probe_seconds: a.slo.search_seconds,
        min_requests: a.slo.search_min_requests,
        probe_concurrency,
        max_concurrency: a.plan.max_concurrency.filter(|_| concurrency),
        ..base
    };
    if let Some(max) = cfg.max_concurrency
        && cfg.probe_concurrency > max
    {
        return Err(format!(
            "--search-probe-concurrency {} is above --max-concurrency {max}, the most the concurrency search tries",
            cfg.probe_concurrency
        ));
    }
    Ok(Some(cfg))
}

/// `--slo` and `--slo-tier`, each at `--slo-percentile`; tier names must differ.
fn slo_config(
    a: &RunArgs,
) -> Result<(Option<Slo>, Vec<crate::metrics::slo_tiers::SloTier>), String> {
    let mut slo = a.slo.slo.as_deref().map(Slo::parse).transpose()?;
    let percentile = Slo::parse_percentile(&a.slo.slo_percentile)
        .map_err(|e| format!("--slo-percentile {e}"))?;
    if let Some(s) = slo.as_mut() {
        s.percentile = percentile;
    }
    let tiers = a
        .slo
        .slo_tier
        .iter()
        .map(|t| crate::metrics::slo_tiers::SloTier::parse(t, percentile))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, t) in tiers.iter().enumerate() {
        if tiers[..i].iter().any(|u| u.name == t.name) {
            return Err(format!("--slo-tier {}: two tiers of one name", t.name));
        }
    }
    Ok((slo, tiers))
}

/// `--trace`, read and sliced, an agent trace's waits cut at `--tool-wait-cap`.
fn trace_config(a: &RunArgs) -> Result<Option<crate::workload::trace::TraceConfig>, String> {
    Ok(a.trace
        .load()?
        .map(|t| t.with_wait_cap(a.sessions.tool_wait_cap)))
}

/// The concurrency search with `--sessions N`: its probes are session levels, the first of N
/// users (its one number), and the search picks the rest; no session level runs besides.
fn search_in_sessions(mut cfg: RunConfig, probe_given: bool) -> Result<RunConfig, String> {
    use crate::workload::search::SearchTarget;
    let (Some(search), Some(sessions)) = (cfg.search.as_mut(), cfg.sessions.as_mut()) else {
        return Ok(cfg);
    };
    if search.target != SearchTarget::Concurrency {
        return Ok(cfg);
    }
    let users = match sessions.levels.as_slice() {
        [n] => *n,
        _ => {
            return Err(
                "--search concurrency picks the users of each session level: give --sessions one number, its first probe"
                    .into(),
            );
        }
    };
    if probe_given {
        return Err(
            "--search concurrency --sessions N starts at N users: leave out --search-probe-concurrency"
                .into(),
        );
    }
    if search.max_concurrency.is_some_and(|max| users > max) {
        return Err(format!(
            "--sessions {users} is above --max-concurrency {}, the most users the search tries",
            search.max_concurrency.unwrap_or(0)
        ));
    }
    search.probe_concurrency = users;
    sessions.levels.clear();
    Ok(cfg)
}

/// Applies `servetop sim` flags over the chosen preset.
pub fn sim_config(a: &SimArgs) -> Result<SimConfig, String> {
    let mut c = SimConfig::preset(&a.preset)?;
    if let Some(m) = &a.model {
        c.model.clone_from(m);
    }
    if let Some(v) = a.max_running {
        c.max_running = v;
    }
    if let Some(v) = a.prefill_tokens_per_s {
        c.prefill_tokens_per_s = v;
    }
    if let Some(v) = a.decode_step_ms {
        c.decode_step_ms = v;
    }
    if let Some(v) = a.batch_growth {
        c.batch_growth = v;
    }
    if let Some(v) = a.context_ms_per_1k {
        c.context_ms_per_1k = v;
    }
    if let Some(v) = &a.accept_length {
        c.accept_length = AcceptLength::parse(v)?;
        // The accept length asked for is every request's: a preset's means by kind of prompt
        // go, unless --accept-by-content sets its own.
        c.accept_by_content.clear();
    }
    if let Some(v) = a.context_length {
        c.context_length = v;
    }
    if a.no_continuous_usage {
        c.continuous_usage = false;
    }
    if a.no_prefix_cache {
        c.prefix_cache = false;
    }
    if let Some(k) = a.write_batch {
        c.write_batch = k;
    }
    if let Some(var) = &a.api_key_env {
        let key = std::env::var(var)
            .map_err(|_| format!("--api-key-env {var}: the variable is not set"))?;
        c.api_key = Some(key);
    }
    if let Some(ms) = a.trailer_delay_ms {
        if !(ms.is_finite() && (0.0..=3_600_000.0).contains(&ms)) {
            return Err(format!(
                "--trailer-delay-ms must be between 0 and 3600000, got {ms}"
            ));
        }
        c.trailer_delay_ms = ms;
    }
    if let Some(n) = a.reasoning_tokens {
        c.reasoning_tokens = n;
    }
    if let Some(n) = a.tool_calls {
        c.tool_calls = n;
    }
    c.lora = sim_lora(&a.lora_modules.0, a.lora_switch_ms.as_deref())?;
    workload_costs(a, &mut c)?;
    if let Some(w) = a.gpu_idle_w {
        c.gpu_idle_w = w;
    }
    if let Some(w) = a.gpu_busy_w {
        c.gpu_busy_w = w;
    }
    if let Some(s) = a.seed {
        c.seed = s;
    }
    if let Some(f) = &a.flavor {
        c.metrics = match f.as_str() {
            "sglang" => Some(crate::sim::MetricsFlavor::Sglang),
            "vllm" => Some(crate::sim::MetricsFlavor::Vllm),
            "none" => None,
            other => return Err(format!("--flavor '{other}': use sglang, vllm or none")),
        };
    }
    if let Some(g) = a.gpus {
        c.gpus = g;
    }
    if let Some(g) = a.gpu_mem_gb {
        c.gpu_mem_gb = g;
    }
    if let Some(k) = a.kv_capacity_tokens {
        c.kv_capacity_tokens = k;
    }
    if let Some(i) = &a.inject {
        c.faults = crate::sim::faults::Faults::parse(i)?;
    }
    c.validate()?;
    Ok(c)
}

/// The simulator's costs of what a request mixes in: images, a structured-output constraint
/// (its step time, its accept length and its share of broken answers), and where answers end
/// on their own, each checked.
fn workload_costs(a: &SimArgs, c: &mut SimConfig) -> Result<(), String> {
    if let Some(ms) = a.image_ms {
        if !(ms.is_finite() && (0.0..=60_000.0).contains(&ms)) {
            return Err(format!("--image-ms must be between 0 and 60000, got {ms}"));
        }
        c.image_ms = ms;
    }
    if let Some(ms) = a.structured_step_ms {
        if !(ms.is_finite() && (0.0..=60_000.0).contains(&ms)) {
            return Err(format!(
                "--structured-step-ms must be between 0 and 60000, got {ms}"
            ));
        }
        c.structured_step_ms = ms;
    }
    if let Some(n) = a.structured_accept_length {
        if !(n.is_finite() && (1.0..=64.0).contains(&n)) {
            return Err(format!(
                "--structured-accept-length must be between 1 and 64, got {n}"
            ));
        }
        c.structured_accept_length = n;
    }
    if let Some(list) = &a.accept_by_content {
        c.accept_by_content = accept_by_content(list)?;
    }
    if let Some(k) = a.structured_invalid_every {
        c.structured_invalid_every = k;
    }
    if let Some(n) = a.natural_len {
        if n > c.context_length {
            return Err(format!(
                "--natural-len {n} is beyond the context length {}: no answer could end there",
                c.context_length
            ));
        }
        c.natural_len = n;
    }
    Ok(())
}

/// `--extra-body`: a JSON object.
fn extra_body(j: &str) -> Result<serde_json::Value, String> {
    let v: serde_json::Value =
        serde_json::from_str(j).map_err(|e| format!("--extra-body: not JSON ({e}): {j}"))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(format!(
            "--extra-body takes a JSON object, e.g. '{{\"parallel_tool_calls\": false}}', not {j}"
        ))
    }
}

/// `--tools`, `--tool-choice` and `--chat-template-kwargs`.
fn chat_extras(a: &WorkloadArgs) -> Result<crate::config::ChatExtras, String> {
    let tools = a
        .tools
        .as_deref()
        .map(crate::config::ChatExtras::load_tools)
        .transpose()?;
    let chat_template_kwargs = a
        .chat_template_kwargs
        .as_deref()
        .map(|j| {
            let v: serde_json::Value = serde_json::from_str(j)
                .map_err(|e| format!("--chat-template-kwargs: not JSON ({e}): {j}"))?;
            if v.is_object() {
                Ok(v)
            } else {
                Err(format!(
                    "--chat-template-kwargs takes a JSON object, e.g. '{{\"enable_thinking\": true}}', not {j}"
                ))
            }
        })
        .transpose()?;
    Ok(crate::config::ChatExtras {
        tool_choice: tools
            .as_ref()
            .map(|_| a.tool_choice.clone().unwrap_or_else(|| "auto".into())),
        tools,
        chat_template_kwargs,
    })
}

/// `servetop sim --lora-modules A,B --lora-switch-ms B=40`: the adapters, each with its cost.
fn sim_lora(names: &[String], costs: Option<&str>) -> Result<Vec<crate::sim::SimLora>, String> {
    let mut out: Vec<crate::sim::SimLora> = names
        .iter()
        .map(|n| crate::sim::SimLora {
            name: n.clone(),
            switch_ms: 0.0,
        })
        .collect();
    for item in costs.into_iter().flat_map(|c| c.split(',')).map(str::trim) {
        if item.is_empty() {
            continue;
        }
        let (name, ms) = item
            .split_once('=')
            .ok_or_else(|| format!("--lora-switch-ms: '{item}' is not NAME=MS"))?;
        let ms: f64 = ms
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && (0.0..=600_000.0).contains(v))
            .ok_or_else(|| {
                format!("--lora-switch-ms: '{item}': MS must be a number of milliseconds from 0 to 600000")
            })?;
        let a = out
            .iter_mut()
            .find(|a| a.name == name.trim())
            .ok_or_else(|| {
                format!(
                    "--lora-switch-ms: '{}' is not one of --lora-modules",
                    name.trim()
                )
            })?;
        a.switch_ms = ms;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    fn cfg(extra: &[&str]) -> crate::config::RunConfig {
        let mut args = vec!["servetop", "run", "--base-url", "http://127.0.0.1:1"];
        args.extend_from_slice(extra);
        let crate::cli::Command::Run(a) = crate::cli::Cli::parse_from(args).command else {
            panic!("not a run");
        };
        super::run_config(&a).expect("valid flags")
    }

    #[test]
    fn each_run_draws_its_own_seed_unless_one_is_given() {
        // Two runs without --seed get different prompts (1 chance in 2^64 of a false failure).
        assert_ne!(cfg(&[]).seed, cfg(&[]).seed);
        assert_eq!(cfg(&["--seed", "7"]).seed, 7);
    }

    #[test]
    fn rate_flags_make_rate_levels_after_the_sweep() {
        let c = cfg(&[
            "--concurrency",
            "1,2",
            "--request-rate",
            "0.5,4",
            "--burstiness",
            "0.5",
            "--ramp-up",
            "3",
            "--max-concurrency",
            "16",
            "--long-context",
            "none",
        ]);
        let levels = c.levels();
        let labels: Vec<String> = levels
            .iter()
            .map(crate::workload::LevelSpec::label)
            .collect();
        assert_eq!(labels, ["C=1", "C=2", "0.5 req/s", "4 req/s"]);
        let a = levels[3].arrival.unwrap();
        assert_eq!(
            (a.request_rate, a.burstiness, a.ramp_up_s, a.max_concurrency),
            (4.0, 0.5, 3.0, Some(16))
        );
        // The default 3x is three seconds' worth at a rate level, at least --min-requests.
        assert_eq!((levels[2].requests, levels[3].requests), (10, 12));
        assert!(
            cfg(&[]).open_loop.request_rates.is_empty(),
            "no rate levels by default"
        );
        let only = cfg(&[
            "--concurrency",
            "none",
            "--long-context",
            "none",
            "--request-rate",
            "2",
        ]);
        assert_eq!(only.levels().len(), 1);
        // `inf`: every request at once, as many as --requests-per-level says.
        let all = cfg(&[
            "--concurrency",
            "none",
            "--request-rate",
            "4,inf",
            "--requests-per-level",
            "30",
        ]);
        let levels = all.levels();
        assert_eq!(levels[1].label(), "inf req/s");
        assert_eq!(levels[1].requests, 30);
        assert!(levels[1].arrival.unwrap().request_rate.is_infinite());
    }

    #[test]
    fn bad_rate_flags_say_what_to_fix() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["servetop", "run", "--base-url", "http://127.0.0.1:1"];
            args.extend_from_slice(extra);
            let crate::cli::Command::Run(a) = crate::cli::Cli::parse_from(args).command else {
                panic!("not a run");
            };
            super::run_config(&a)
        };
        for (flags, why) in [
            (
                &["--request-rate", "4", "--burstiness", "0"][..],
                "--burstiness",
            ),
            (
                &["--request-rate", "4", "--ramp-up", "inf"][..],
                "--ramp-up",
            ),
            (
                &["--request-rate", "4", "--max-concurrency", "0"][..],
                "--max-concurrency",
            ),
            (
                &["--request-rate", "inf"][..],
                "say how many with --requests-per-level N",
            ),
            (
                &[
                    "--request-rate",
                    "inf",
                    "--requests-per-level",
                    "8",
                    "--ramp-up",
                    "2",
                ][..],
                "nothing to ramp",
            ),
            (
                &["--sessions", "2", "--session-rate", "inf"][..],
                "--session-rate inf",
            ),
        ] {
            let e = parse(flags).unwrap_err();
            assert!(e.contains(why), "{flags:?}: {e}");
        }
        assert!(
            crate::cli::Cli::try_parse_from([
                "servetop",
                "run",
                "--base-url",
                "http://x",
                "--request-rate",
                "4,2"
            ])
            .is_err()
        );
    }

    /// `sim --accept-length N` is every request's accept length: the preset's means by kind of
    /// prompt go, unless `--accept-by-content` sets its own.
    #[test]
    fn an_accept_length_given_replaces_the_presets_by_kind() {
        use crate::workload::content::ContentKind;
        let sim = |flags: &[&str]| {
            let mut args = vec!["servetop", "sim"];
            args.extend_from_slice(flags);
            match crate::cli::Cli::try_parse_from(args).unwrap().command {
                crate::cli::Command::Sim(a) => super::sim_config(&a).unwrap(),
                _ => unreachable!(),
            }
        };
        let preset = sim(&[]);
        assert_eq!(preset.accept_by_content.get(&ContentKind::Code), Some(&4.6));
        let one = sim(&["--accept-length", "1"]);
        assert!(one.accept_by_content.is_empty());
        assert_eq!(one.draft_width(), 0, "no speculation: no draft counters");
        let both = sim(&["--accept-length", "2", "--accept-by-content", "code=3"]);
        assert_eq!(both.accept_by_content.len(), 1);
        assert_eq!(both.draft_width(), 2);
    }
}
