//! `servetop report`: charts, CSV and summary.md again from saved run directories.

use super::fail;

/// `servetop report`.
pub fn report(a: &crate::cli::ReportArgs) -> i32 {
    if !a.merge.is_empty() {
        return merge(a);
    }
    if let Some(b) = &a.baseline {
        return compare(a, b);
    }
    if a.screenshots && a.dirs.len() != 1 {
        return fail("--screenshots takes one run directory");
    }
    let result = crate::export::report::report_runs(
        &a.dirs,
        &a.labels,
        a.out.as_deref(),
        (!a.html).then_some(a.chart_size),
        a.gpus,
    )
    .and_then(|mut r| {
        if a.screenshots {
            let (summary, telemetry) = crate::export::report::load_run(&a.dirs[0])?;
            let mut app = crate::tui::app::App::from_saved(summary, &telemetry);
            let buffers = app.tab_buffers(a.screenshot_size.0, a.screenshot_size.1);
            r.files.extend(crate::tui::write_screenshots(
                &a.dirs[0].join("screenshots"),
                &buffers,
            )?);
        }
        Ok(r)
    });
    match result {
        Ok(r) => {
            warn_unlike(&r, a.dirs.len());
            for f in r.files {
                println!("{}", f.display());
            }
            // The comparison was asked for and written, Δ or not (docs/outputs.md).
            0
        }
        Err(e) => fail(&e),
    }
}

/// Where a later run's levels were not compared with the first run's, and why, on stderr
/// (summary.md says the same under its side-by-side table); and when nothing was compared.
fn warn_unlike(r: &crate::export::report::Report, runs: usize) {
    for line in &r.unlike {
        say!("servetop: warning: {line}");
    }
    if runs > 1 && !r.compared_any {
        say!(
            "servetop: warning: no level of these runs sent the same requests as the first run's at the same place: summary.md shows their figures side by side with no Δ"
        );
    }
}

/// `servetop report DIR --baseline OTHER`: the run against the baseline, level by level, and
/// with `--fail-on-regression` the exit code a gate reads.
fn compare(a: &crate::cli::ReportArgs, baseline: &std::path::Path) -> i32 {
    let [dir] = a.dirs.as_slice() else {
        return fail("--baseline compares one run directory with the baseline");
    };
    let result = crate::export::report::load_baseline(baseline).and_then(|mut b| {
        b.fail_on_regression_pct = a.fail_on_regression;
        let (mut s, _) = crate::export::report::load_run(dir)?;
        s.baseline = Some(b);
        s.compare_to_baseline();
        Ok(s)
    });
    let s = match result {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let Some(b) = &s.baseline else {
        return fail("no baseline");
    };
    if b.comparisons.is_empty() {
        let planned: Vec<(String, crate::summary::baseline::LevelKey)> =
            s.levels().map(|l| (l.label(), l.key())).collect();
        let msg = crate::summary::baseline::no_match(
            b,
            &crate::summary::baseline::other_request_counts(&b.levels, &planned),
        );
        // A comparison was asked for and cannot be made: not a success.
        return fail(&msg);
    }
    print_out!(
        "{} against the baseline {} ({})\n\n{}",
        dir.display(),
        b.source,
        b.label,
        crate::export::markdown::baseline_table(&s)
    );
    let regressions = s.regressions();
    for r in &regressions {
        say!("servetop: worse than the baseline: {r}");
    }
    if regressions.is_empty() {
        0
    } else {
        super::EXIT_REGRESSION
    }
}

/// `servetop report --merge DIR... [--out DIR]`: the shards as one run; prints its tables and
/// the files written, and says which shards were missing.
fn merge(a: &crate::cli::ReportArgs) -> i32 {
    let out = a.out.clone().unwrap_or_else(|| {
        std::path::PathBuf::from("runs").join(format!(
            "{}-merged",
            jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S")
        ))
    });
    let m = match crate::export::merged::merge_dirs(&a.merge, &out, a.chart_size) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    for s in &m.skipped {
        say!("servetop: {s}");
    }
    if let Some(info) = &m.summary.merged {
        say!(
            "servetop: merged {} of {} shards into {}{}",
            info.merged.len(),
            info.shards,
            out.display(),
            if info.missing.is_empty() {
                String::new()
            } else {
                format!("; missing: {}", info.missing_labels())
            }
        );
        for n in &info.notes {
            say!("servetop: {n}");
        }
    }
    print_out!(
        "{}",
        crate::run::headless::final_tables(&crate::run::session::Session::new(m.summary.clone()))
    );
    for f in &m.files {
        println!("{}", f.display());
    }
    0
}
