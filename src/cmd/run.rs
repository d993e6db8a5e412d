//! `servetop run` (and `--resume`): the flags turned into decisions (the plan, the dry run, the
//! question before a long plan, detaching, one configuration or a `--serve-param` sweep), then
//! the run itself, composed in [`super::execute`].

use super::execute::{self, Job};
use super::fail;
use crate::cli::config::run_config;
use crate::cli::{OutputArgs, RunArgs};
use crate::config::RunConfig;
use crate::event::RunState;
use crate::runner;

/// `servetop run`.
pub async fn run(a: RunArgs) -> i32 {
    if let Some(dir) = &a.plan.resume {
        if a.detach {
            return super::detach::detach(super::detach::args_without_detach(), Some(dir));
        }
        return Box::pin(resume(dir, &a.output, &a.server.header)).await;
    }
    let combos = match crate::cli::config::serve_combinations(&a.server.serve_param) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let cfg = match run_config(&a) {
        Ok(cfg) => cfg,
        Err(e) => return fail(&e),
    };
    if a.plan.dry_run {
        return Box::pin(dry_run(&cfg, combos.len())).await;
    }
    if !confirmed(&cfg, combos.len().max(1), &a) {
        say!("servetop: not started (the plan was declined)");
        return super::EXIT_DECLINED;
    }
    if a.detach {
        return super::detach::detach(
            super::detach::args_without_detach(),
            a.output.out.as_deref(),
        );
    }
    if let Err(e) = open_files(&cfg) {
        return fail(&e);
    }
    if combos.is_empty() {
        Box::pin(execute::alone(Job::new(cfg), &a.output))
            .await
            .code
    } else if cfg.clock.start_at_unix_ms.is_some() {
        fail(
            "--start-at with --serve-param: every configuration would take the same slots; run one configuration per machine (or Job) on the shared clock instead",
        )
    } else {
        Box::pin(super::serve_sweep::serve_sweep(cfg, combos, &a.output)).await
    }
}

/// `servetop run --dry-run`: the plan, and what the server (when servetop does not start it)
/// says of it; nothing is sent but the server's identification and prompt sizing.
async fn dry_run(cfg: &RunConfig, configurations: usize) -> i32 {
    if cfg.serve.is_some() {
        print_out!("{}", assumed_plan_line(cfg));
        print_out!(
            "limits: checked against the server --serve starts, once it is up{}",
            if configurations > 1 {
                format!(" (the plan runs once for each of {configurations} configurations)")
            } else {
                String::new()
            }
        );
        return 0;
    }
    let api_key = std::env::var(&cfg.api_key_env)
        .ok()
        .filter(|k| !k.is_empty());
    match Box::pin(runner::prepare(cfg, api_key)).await {
        Ok(p) => {
            print_out!(
                "[server] {} · model {} · context {}",
                p.server.engine.name(),
                p.server.model,
                p.server
                    .context_limit
                    .map_or("not reported".into(), |n| format!("{n} tokens"))
            );
            let basis = crate::run::estimate::basis(cfg, &p.server).await;
            let time = crate::run::estimate::time_part(
                cfg,
                &p.levels,
                &basis,
                p.server.context_limit,
                p.serve.is_some(),
            );
            for line in p.plan(&time) {
                print_out!("{line}");
            }
            0
        }
        Err(e) => {
            print_out!("{}", assumed_plan_line(cfg));
            say!("servetop: the server was not checked: {e}");
            2
        }
    }
}

/// A plan of more than [`crate::workload::plan::CONFIRM_LEVELS`] levels: asked on a terminal
/// (unless `--yes`), said headless. `false`: the user declined.
fn confirmed(cfg: &RunConfig, configurations: usize, a: &RunArgs) -> bool {
    use std::io::{BufRead, IsTerminal, Write};
    let levels = cfg.levels();
    if levels.len() <= crate::workload::plan::CONFIRM_LEVELS || a.plan.yes {
        return true;
    }
    let requests: u64 = levels.iter().map(|l| u64::from(l.requests)).sum();
    let what = format!(
        "{} levels and {} requests{}",
        levels.len() * configurations,
        requests * configurations as u64,
        if configurations > 1 {
            format!(" ({configurations} configurations)")
        } else {
            String::new()
        }
    );
    let asking =
        !a.output.headless && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    if !asking {
        say!(
            "[warning] the plan has {what} (more than {}; --dry-run shows it)",
            crate::workload::plan::CONFIRM_LEVELS
        );
        return true;
    }
    print!(
        "{}\nThe plan has {what}. Run it? [y/N] (--yes skips this question) ",
        assumed_plan_line(cfg)
    );
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes")
}

/// The plan line before servetop has talked to the server: its time from the stated default
/// (an earlier run or the server's metrics need the server's answer; the run's own plan line
/// has them).
fn assumed_plan_line(cfg: &RunConfig) -> String {
    use crate::summary::eta::basis::{Basis, Speeds};
    let basis = Basis::Speeds(Speeds::assumed());
    crate::run::estimate::plan_line(cfg, &cfg.levels(), &basis, None, cfg.serve.is_some())
}

/// `servetop run --resume DIR`: the saved configuration, the levels not yet done; `headers`
/// (`--header`) give again the secret headers' values the files did not keep.
async fn resume(dir: &std::path::Path, out: &OutputArgs, headers: &[String]) -> i32 {
    let (summary, _) = match crate::export::report::load_run(dir) {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if summary.state == RunState::Finished {
        return fail(&format!(
            "the run in {} already finished; nothing to resume",
            dir.display()
        ));
    }
    if summary.config.search.is_some() {
        return fail(&format!(
            "the run in {} is an SLO search; a search starts over from its throughput probe, so run it again instead of resuming",
            dir.display()
        ));
    }
    let mut out = out.clone();
    out.out = Some(dir.to_path_buf());
    let mut cfg = summary.config.clone();
    let given: Result<Vec<_>, String> = headers
        .iter()
        .map(|h| crate::config::header::HttpHeader::parse(h))
        .collect();
    match given.and_then(|g| crate::config::header::resumed(&cfg.headers, &g)) {
        Ok(h) => cfg.headers = h,
        Err(e) => return fail(&e),
    }
    // The prompts the first run sent are in the server's prefix cache: the same seed again
    // would measure cache hits, not prefill. Each resume draws a new one.
    let used = [cfg.seed, summary.resumed_with_seed.unwrap_or(cfg.seed)];
    cfg.seed = std::iter::repeat_with(rand::random::<u64>)
        .find(|s| !used.contains(s))
        .unwrap_or_default();
    if cfg.clock.start_at_unix_ms.take().is_some() {
        // Its slots are past: the levels still to run start as soon as it is ready.
        say!(
            "servetop: resuming off the shared clock (--start-at): the remaining levels start one after another, each still {} s",
            cfg.clock.level_seconds.unwrap_or(0.0)
        );
    }
    if let Err(e) = cfg.validate() {
        return fail(&e);
    }
    if let Err(e) = open_files(&cfg) {
        return fail(&e);
    }
    let job = Job {
        cfg,
        simulator: summary.simulator.clone(),
        previous: Some(summary),
    };
    Box::pin(execute::alone(job, &out)).await.code
}

/// Before anything is sent: a socket a request in flight ([`super::limits`]); says when the
/// limit was raised.
fn open_files(cfg: &RunConfig) -> Result<(), String> {
    if let Some(line) = super::limits::ensure_for(super::limits::most_in_flight(cfg))? {
        say!("servetop: {line}");
    }
    Ok(())
}
