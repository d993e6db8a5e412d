//! A tune's own files in its directory: summary.md (the recommendation, the leaderboard, each
//! configuration's findings) and charts/pareto.png; and its results.json ([`save`], [`load`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::fmt::{fmt_rate, num};
use crate::summary::tune::TuneSummary;
use crate::summary::tune::pareto::front;
use crate::summary::tune::record::TuneRun;

/// Writes the tune to `dir/results.json` (atomically: a reader never sees half of it), marked
/// updated now.
pub fn save(t: &mut TuneRun, dir: &Path) -> Result<(), String> {
    t.touch();
    let path = dir.join("results.json");
    let bytes = serde_json::to_vec_pretty(t).map_err(|e| e.to_string())?;
    super::write_atomic(&path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Reads `dir/results.json` back, saying so when it is not a tune's.
pub fn load(dir: &Path) -> Result<TuneRun, String> {
    let path = dir.join("results.json");
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        format!(
            "{} is not the results of a servetop tune: {e}",
            path.display()
        )
    })
}

/// Writes summary.md and charts/pareto.png; returns the files written.
pub fn write(t: &TuneRun, dir: &Path, size: (u32, u32)) -> Result<Vec<PathBuf>, String> {
    let md = dir.join("summary.md");
    super::write_atomic(&md, summary_md(t).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", md.display()))?;
    let mut files = vec![md];
    // The title band reads model, engine and SIMULATED from the configurations' own runs.
    let loaded: Vec<(String, crate::summary::RunSummary)> = t
        .tune
        .configs
        .iter()
        .filter_map(|c| {
            let (s, _) = super::report::load_run(&dir.join(&c.dir)).ok()?;
            Some((c.label.clone(), s))
        })
        .collect();
    let runs: Vec<super::charts::ChartRun<'_>> = loaded
        .iter()
        .map(|(label, s)| super::charts::ChartRun {
            label: label.clone(),
            summary: s,
            telemetry: &[],
        })
        .collect();
    if let Some(fig) = super::charts::pareto_figure(&runs, &t.tune) {
        let charts = dir.join("charts");
        std::fs::create_dir_all(&charts)
            .map_err(|e| format!("cannot create {}: {e}", charts.display()))?;
        let png = charts.join("pareto.png");
        fig.draw_png(&png, size)?;
        files.push(png);
    }
    Ok(files)
}

/// The leaderboard as a Markdown table, best first.
pub fn leaderboard_table(t: &TuneSummary) -> String {
    let mut s = String::from(
        "| # | configuration | capacity | status | peak out tok/s | single stream tok/s | out tok/J | minutes |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (rank, i) in crate::summary::tune::ranked(&t.configs)
        .into_iter()
        .enumerate()
    {
        let c = &t.configs[i];
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            rank + 1,
            c.label,
            c.capacity_text(),
            c.status.word(),
            num(c.peak_output_tokens_per_s),
            num(c.single_stream_tokens_per_s),
            num(c.output_tokens_per_joule),
            c.seconds.map_or("-".into(), |s| format!("{:.1}", s / 60.0)),
        );
    }
    s
}

/// What the terminal gets at the end: the leaderboard.
pub fn leaderboard_text(t: &TuneRun) -> String {
    format!(
        "servetop tune · SLO {} · capacity: the highest request rate meeting it\n\n{}",
        t.tune.slo,
        leaderboard_table(&t.tune)
    )
}

/// summary.md of the tune.
pub fn summary_md(t: &TuneRun) -> String {
    let tune = &t.tune;
    let mut s = String::from("# servetop tune\n\n");
    if t.simulated {
        s.push_str("> **SIMULATED SERVER** — every number below comes from servetop's built-in simulator, not from real hardware.\n\n");
    }
    let precision = t
        .config
        .search
        .as_ref()
        .map_or("-".into(), |c| c.precision.describe(c.target));
    let count = |st: crate::summary::tune::ConfigStatus| {
        tune.configs.iter().filter(|c| c.status == st).count()
    };
    let _ = writeln!(
        s,
        "- SLO: {}; capacity is the highest request rate meeting it (req/s), bisected to {precision}\n- server: `{}`\n- configurations: {} ({} measured, {} stopped early, {} failed{})\n- early stop: {}\n- plan of each configuration: {}, then the capacity search\n- state: {} · started {} · updated {}\n",
        tune.slo,
        t.config.serve.as_ref().map_or("-", |s| s.command.as_str()),
        tune.configs.len(),
        count(crate::summary::tune::ConfigStatus::Measured),
        count(crate::summary::tune::ConfigStatus::StoppedEarly),
        count(crate::summary::tune::ConfigStatus::Failed),
        match count(crate::summary::tune::ConfigStatus::Pending)
            + count(crate::summary::tune::ConfigStatus::Running)
        {
            0 => String::new(),
            n => format!(", {n} not run"),
        },
        if tune.early_stop {
            "on — each configuration's first rate probe is at the best capacity so far; one that fails there is stopped, its capacity below that rate"
        } else {
            "off (--no-early-stop): every configuration searched to its end"
        },
        crate::workload::plan::plan_text(&t.config.levels()).trim_start_matches("plan: "),
        t.state.name(),
        t.started_at,
        t.updated_at,
    );
    s.push_str("## Recommendation\n\n");
    let _ = writeln!(s, "{}\n", tune.headline());
    if let Some(b) = &tune.best {
        let _ = writeln!(s, "```\n{}\n```\n", b.command);
    }
    s.push_str("## Leaderboard\n\n");
    s.push_str(&leaderboard_table(tune));
    s.push('\n');
    if !tune.pareto.is_empty() {
        s.push_str("## Pareto front\n\n![Pareto front](charts/pareto.png)\n\n");
        s.push_str(
            "| configuration | load | per-user tok/s | aggregate tok/s |\n|---|---|---|---|\n",
        );
        for p in front(&tune.pareto).iter().rev() {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                tune.configs.get(p.config).map_or("?", |c| c.label.as_str()),
                p.level,
                num(Some(p.per_user_tokens_per_s)),
                num(Some(p.aggregate_tokens_per_s))
            );
        }
        s.push('\n');
    }
    s.push_str("## Configurations\n");
    for c in &tune.configs {
        let _ = write!(
            s,
            "\n### {}\n\n- {}: {}{}\n- command: `{}`\n- run: [{}/]({}/summary.md)\n",
            c.label,
            c.status.word(),
            c.capacity_text(),
            c.fail_rate
                .filter(|_| c.status == crate::summary::tune::ConfigStatus::Measured)
                .map_or(String::new(), |f| format!(
                    " (fails at {} req/s)",
                    fmt_rate(f)
                )),
            c.command,
            c.dir,
            c.dir
        );
        if let Some(r) = &c.reason {
            let _ = writeln!(s, "- note: {r}");
        }
        for f in &c.findings {
            let _ = writeln!(s, "- {f}");
        }
    }
    s
}
