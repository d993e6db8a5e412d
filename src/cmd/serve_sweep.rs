//! `servetop run --serve CMD --serve-param NAME=V1,V2 …`: the whole plan once per server
//! configuration, each run in a sub-directory named after it, then the overlay comparison of
//! all of them (charts, sweep.csv, summary.md) in the run directory itself.

use std::path::PathBuf;

use super::{EXIT_INTERRUPTED, fail};
use crate::cli::OutputArgs;
use crate::config::RunConfig;

/// The --serve command with one configuration's values set.
pub(super) fn command(template: &str, params: &[(String, String)]) -> String {
    params.iter().fold(template.to_string(), |cmd, (name, v)| {
        crate::serve::with_param(&cmd, name, v)
    })
}

/// A sub-directory name for one configuration: `np-2_max-num-seqs-64`.
pub(super) fn dir_name(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(n, v)| format!("{}-{v}", n.trim_start_matches('-')))
        .collect::<Vec<_>>()
        .join("_")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Runs `cfg` once per combination (each `(NAME, value)` set in its --serve command), then
/// writes the comparison. The exit code is the worst of the runs' (a run that failed does not
/// stop the others; an interrupted one stops the sweep).
pub async fn serve_sweep(
    cfg: RunConfig,
    combos: Vec<Vec<(String, String)>>,
    out: &OutputArgs,
) -> i32 {
    let Some(serve) = cfg.serve.clone() else {
        return fail("--serve-param needs --serve");
    };
    let parent = out.out.clone().unwrap_or_else(|| {
        crate::export::default_run_dir(&crate::serve::model_hint(&serve.command))
    });
    let n = combos.len();
    let (mut dirs, mut labels): (Vec<PathBuf>, Vec<String>) = (Vec::new(), Vec::new());
    let mut worst = 0;
    let mut series = super::execute::Series::watch(out);
    for (i, params) in combos.into_iter().enumerate() {
        let mut c = cfg.clone();
        let mut s = serve.clone();
        s.command = command(&serve.command, &params);
        s.params = params;
        let label = s.params_label();
        let sub = parent.join(dir_name(&s.params));
        c.serve = Some(s);
        say!("[config {}/{n}] {label} → {}", i + 1, sub.display());
        let mut o = out.clone();
        o.out = Some(sub.clone());
        // The dashboard leaves at each run's end but the last.
        series.more_follow = i + 1 < n;
        let job = super::execute::Job::new(c);
        let code = Box::pin(super::execute::in_series(job, &o, &series))
            .await
            .code;
        if sub.join("results.json").is_file() {
            dirs.push(sub);
            labels.push(label);
        }
        worst = worst.max(code);
        if code == EXIT_INTERRUPTED {
            break;
        }
    }
    if dirs.len() > 1 {
        match crate::export::report::report(&dirs, &labels, Some(&parent), out.chart_size) {
            Ok(_) => {
                say!(
                    "comparison of {} configurations: {} (summary.md, sweep.csv, charts/)",
                    dirs.len(),
                    parent.display()
                );
                print_across(&dirs, &labels);
            }
            Err(e) => say!("servetop: the comparison was not written: {e}"),
        }
    }
    worst
}

/// The comparison's findings across the configurations, as its summary.md opens with them.
fn print_across(dirs: &[PathBuf], labels: &[String]) {
    let loaded: Vec<crate::summary::RunSummary> = dirs
        .iter()
        .filter_map(|d| crate::export::report::load_run(d).ok().map(|(s, _)| s))
        .collect();
    if loaded.len() != dirs.len() {
        return;
    }
    let runs: Vec<(String, &crate::summary::RunSummary)> =
        labels.iter().cloned().zip(loaded.iter()).collect();
    let text =
        crate::export::markdown::across_section(&crate::summary::findings::compare::across(&runs));
    for line in text.lines().filter(|l| !l.is_empty()) {
        say!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::dir_name;

    #[test]
    fn configuration_directories_are_named_after_their_values() {
        let p = vec![
            ("-np".to_string(), "2".to_string()),
            ("--chat-template".into(), "a/b c".into()),
        ];
        assert_eq!(dir_name(&p), "np-2_chat-template-a_b_c");
    }
}
