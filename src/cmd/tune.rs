//! `servetop tune`: each `--serve-param` combination gets one server and one run (its planned
//! levels, then the SLO capacity search with the best capacity so far as the rate to beat),
//! in a sub-directory; the tune's directory gets the leaderboard (results.json, summary.md,
//! the Pareto chart). `--resume` goes on with the configurations not yet settled.

use std::path::{Path, PathBuf};

use super::serve_sweep::{command, dir_name};
use super::{EXIT_INTERRUPTED, fail};
use crate::cli::{OutputArgs, TuneArgs};
use crate::config::RunConfig;
use crate::event::RunState;
use crate::summary::tune::record::TuneRun;
use crate::summary::tune::{ConfigStatus, TuneConfig, TuneSummary};

/// `servetop tune`.
pub async fn tune(a: TuneArgs) -> i32 {
    if let Some(dir) = &a.run.plan.resume {
        return match crate::export::tune::load(dir) {
            Ok(t) if t.tune.configs.iter().all(|c| c.status.settled()) => fail(&format!(
                "the tune in {} already finished; nothing to resume",
                dir.display()
            )),
            Ok(t) => Box::pin(run_tune(t, dir.clone(), &a.run.output)).await,
            Err(e) => fail(&e),
        };
    }
    let (t, dir) = match plan(&a) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    if a.run.plan.dry_run {
        use crate::summary::eta::basis::{Basis, Speeds};
        let levels = t.config.levels();
        let time = crate::run::estimate::tune_time_part(
            &t.config,
            &levels,
            &Basis::Speeds(Speeds::assumed()),
            t.tune.configs.len(),
            t.tune.early_stop,
        );
        let search = crate::run::estimate::search_text(&t.config);
        print_out!(
            "{}",
            crate::workload::plan::plan_line(&levels, search.as_deref(), &time)
        );
        print_out!(
            "then, in each of {} configurations, the SLO capacity search ({}){}",
            t.tune.configs.len(),
            t.tune.slo,
            if t.tune.early_stop {
                ", stopped early below the best capacity so far"
            } else {
                ""
            }
        );
        for c in &t.tune.configs {
            print_out!("  {}: {}", c.label, c.command);
        }
        return 0;
    }
    Box::pin(run_tune(t, dir, &a.run.output)).await
}

/// The tune as the flags ask for it, not yet run, and its directory.
fn plan(a: &TuneArgs) -> Result<(TuneRun, PathBuf), String> {
    if a.run.detach {
        return Err(
            "tune --detach is not supported yet: run it in tmux or screen (each configuration's run can be watched with servetop attach)".into(),
        );
    }
    if a.run.output.metrics_listen.is_some() || a.run.output.live_listen.is_some() {
        return Err("tune --metrics-listen / --live-listen: not supported yet (each configuration's run would listen on the address again); watch a tune's runs with servetop attach".into());
    }
    if a.run
        .slo
        .search
        .as_deref()
        .is_some_and(|s| s.trim() != "rate")
    {
        return Err(
            "tune searches the request rate: leave out --search (or say --search rate)".into(),
        );
    }
    if !a.run.plan.long_context.0.is_empty() {
        return Err("tune measures capacity at one request shape: leave out --long-context (run a ladder per configuration with run --serve-param)".into());
    }
    let combos = crate::cli::config::serve_combinations(&a.run.server.serve_param)?;
    if combos.len() < 2 {
        return Err("tune compares server configurations: give at least two, e.g. --serve-param=-np=1,2 (or a range, -np=1..4)".into());
    }
    let mut args = a.run.clone();
    args.slo.search = Some("rate".into());
    let mut cfg = crate::cli::config::run_config(&args)?;
    // A search runs alone in `run`; a tune keeps its planned levels (C=1 by default) first.
    cfg.concurrency.clone_from(&a.run.plan.concurrency.0);
    cfg.validate()?;
    let serve = cfg
        .serve
        .clone()
        .ok_or("tune needs --serve: the command that starts the server, with {port}")?;
    let slo = cfg.slo.as_ref().ok_or(
        "tune needs --slo: the objectives each configuration's capacity is measured against",
    )?;
    let configs = combos
        .iter()
        .map(|p| TuneConfig::pending(p, command(&serve.command, p), dir_name(p)))
        .collect();
    let dir = a.run.output.out.clone().unwrap_or_else(|| {
        crate::export::default_run_dir(&format!(
            "tune-{}",
            crate::serve::model_hint(&serve.command)
        ))
    });
    if dir.join("results.json").exists() {
        return Err(format!(
            "{} already holds results: give another --out, or --resume {0} to go on with its tune",
            dir.display()
        ));
    }
    let now = crate::summary::now_rfc3339();
    let t = TuneRun {
        tool: crate::summary::ToolInfo::default(),
        state: RunState::Running,
        started_at: now.clone(),
        updated_at: now,
        simulated: false,
        serve_param: a.run.server.serve_param.clone(),
        tune: TuneSummary::new(slo.describe(), !a.no_early_stop, configs),
        config: cfg,
    };
    Ok((t, dir))
}

/// Runs every configuration not yet settled, saving the tune after each; then the
/// leaderboard. Exit code: 0 when it ran to the end, 130 when stopped, 1 when no configuration
/// could be measured.
async fn run_tune(mut t: TuneRun, dir: PathBuf, out: &OutputArgs) -> i32 {
    // The configurations as the flags expand now must be the ones the tune recorded (a resumed
    // tune), value for value, before anything is written.
    let params = match crate::cli::config::serve_combinations(&t.serve_param) {
        Ok(p) if same_configurations(&p, &t.tune.configs) => p,
        _ => {
            return fail(&format!(
                "{}: its --serve-param values no longer expand to its configurations",
                dir.display()
            ));
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        return fail(&format!("cannot create {}: {e}", dir.display()));
    }
    t.state = RunState::Running;
    if let Err(e) = crate::export::tune::save(&mut t, &dir) {
        return fail(&e);
    }
    let n = params.len();
    say!(
        "[tune] {n} configurations · {} · results: {}",
        t.tune.slo,
        dir.display()
    );
    let mut series = super::execute::Series::watch(out);
    // The dashboard leaves at each run's end, the last too: the leaderboard follows. The runs'
    // tables are not printed (their summary.md has them).
    series.quiet = true;
    let mut interrupted = false;
    for (i, p) in params.iter().enumerate() {
        if t.tune.configs[i].status.settled() {
            continue;
        }
        if series.stopped() {
            interrupted = true;
            break;
        }
        series.tune = Some(t.tune.progress(&dir.display().to_string(), i));
        let code = Box::pin(run_config(&mut t, i, p, &dir, out, &series)).await;
        t.tune.settle();
        if let Err(e) = crate::export::tune::save(&mut t, &dir) {
            say!("servetop: {e}");
        }
        let c = &t.tune.configs[i];
        say!(
            "[tune {}/{n}] {} · {}{}",
            i + 1,
            c.label,
            c.capacity_text(),
            c.reason
                .as_deref()
                .map_or(String::new(), |r| format!(" ({r})"))
        );
        if code == EXIT_INTERRUPTED {
            interrupted = true;
            break;
        }
    }
    t.state = if interrupted {
        RunState::Interrupted
    } else {
        RunState::Finished
    };
    t.tune.settle();
    if let Err(e) = crate::export::tune::save(&mut t, &dir) {
        say!("servetop: {e}");
    }
    finish(&t, &dir, out);
    if interrupted {
        say!(
            "servetop: tune stopped; go on with: servetop tune --resume {}",
            dir.display()
        );
        EXIT_INTERRUPTED
    } else {
        // Not one configuration could be measured: the tune answered nothing.
        i32::from(
            t.tune
                .configs
                .iter()
                .all(|c| c.status == ConfigStatus::Failed),
        )
    }
}

/// Whether `params` (the flags expanded) are the recorded configurations, in order.
fn same_configurations(params: &[Vec<(String, String)>], configs: &[TuneConfig]) -> bool {
    params.len() == configs.len()
        && params.iter().zip(configs).all(|(p, c)| {
            p.len() == c.params.len() && p.iter().all(|(n, v)| c.params.get(n) == Some(v))
        })
}

/// Runs configuration `i` (`params`) on its own server, and reads what its run found.
async fn run_config(
    t: &mut TuneRun,
    i: usize,
    params: &[(String, String)],
    dir: &Path,
    out: &OutputArgs,
    series: &super::execute::Series,
) -> i32 {
    let mut cfg: RunConfig = t.config.clone();
    let beat = t.tune.rate_to_beat();
    if let (Some(s), Some(serve)) = (cfg.search.as_mut(), cfg.serve.as_mut()) {
        s.beat = beat;
        serve.command = command(&serve.command, params);
        serve.params = params.to_vec();
    }
    let n = t.tune.configs.len();
    let c = &mut t.tune.configs[i];
    c.status = ConfigStatus::Running;
    let sub = dir.join(&c.dir);
    // A configuration run again (a resumed tune) starts afresh: a new server, a new seed. What
    // its interrupted run measured is kept aside, not deleted.
    if sub.exists() {
        let aside = dir.join(format!(
            "{}.interrupted-{}",
            c.dir,
            crate::telemetry::now_unix_ms()
        ));
        if let Err(e) = std::fs::rename(&sub, &aside) {
            say!(
                "servetop: cannot move the interrupted run {} aside: {e}",
                sub.display()
            );
        }
    }
    say!(
        "[tune {}/{}] {}{} → {}",
        i + 1,
        n,
        c.label,
        beat.map_or(String::new(), |b| format!(
            " · rate to beat {} req/s",
            crate::fmt::fmt_rate(b)
        )),
        sub.display()
    );
    let _ = crate::export::tune::save(t, dir);
    let mut o = out.clone();
    o.out = Some(sub.clone());
    let started = std::time::Instant::now();
    let super::execute::Outcome { code, error } = Box::pin(super::execute::in_series(
        super::execute::Job::new(cfg),
        &o,
        series,
    ))
    .await;
    let c = &mut t.tune.configs[i];
    c.seconds = Some(started.elapsed().as_secs_f64());
    match crate::export::report::load_run(&sub) {
        Ok((summary, _)) => {
            t.simulated |= summary.simulated;
            c.read_run(&summary);
        }
        Err(_) if code == EXIT_INTERRUPTED => c.status = ConfigStatus::Pending,
        Err(e) => c.fail(error.unwrap_or(e)),
    }
    if !c.status.settled() {
        if code == EXIT_INTERRUPTED {
            c.status = ConfigStatus::Pending;
        } else {
            // Ended before its search did, yet not stopped: skipped from the dashboard.
            c.fail("skipped before its search ended (s in the dashboard)".into());
        }
    }
    code
}

/// The leaderboard: summary.md, the Pareto chart, and the headline on stderr.
fn finish(t: &TuneRun, dir: &Path, out: &OutputArgs) {
    match crate::export::tune::write(t, dir, out.chart_size) {
        Ok(files) => say!(
            "tune: {} ({})",
            dir.display(),
            files
                .iter()
                .filter_map(|f| f.strip_prefix(dir).ok().map(|p| p.display().to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => say!("servetop: the tune's summary was not written: {e}"),
    }
    for line in crate::export::tune::leaderboard_text(t).lines() {
        print_out!("{line}");
    }
    say!("{}", t.tune.headline());
    if let Some(b) = &t.tune.best {
        say!("recommended: {}", b.command);
    }
}
