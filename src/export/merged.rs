//! `servetop report --merge DIR... --out DIR`: the shards' run directories read, merged
//! ([`crate::summary::merge`]) and written as one run directory, with its summary, CSV and charts.

use std::path::{Path, PathBuf};

use crate::metrics::RequestRecord;
use crate::summary::merge::ShardRun;

/// A run directory's `requests.jsonl`, and how many of its lines did not parse.
pub fn load_requests(dir: &Path) -> Result<(Vec<RequestRecord>, usize), String> {
    let path = dir.join("requests.jsonl");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bad = 0;
    let records = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let r = serde_json::from_str(l).ok();
            bad += usize::from(r.is_none());
            r
        })
        .collect();
    Ok((records, bad))
}

/// What the merge read, and what it could not.
pub struct Merged {
    pub files: Vec<PathBuf>,
    /// Directories left out (unreadable), each with why; lines of requests.jsonl that did not
    /// parse.
    pub skipped: Vec<String>,
    pub summary: crate::summary::RunSummary,
}

/// Reads the shards in `dirs`, merges them into `out` (which must not hold a run already) and
/// writes its files. A directory that cannot be read is left out and said; the merged run
/// counts its shard as missing.
pub fn merge_dirs(dirs: &[PathBuf], out: &Path, size: (u32, u32)) -> Result<Merged, String> {
    if out.join("results.json").exists() {
        return Err(format!(
            "--out {} already holds a run (results.json): give the merge a new directory",
            out.display()
        ));
    }
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    for d in dirs {
        let loaded =
            super::report::load_run(d).and_then(|(summary, _)| Ok((summary, load_requests(d)?)));
        match loaded {
            Ok((summary, (records, bad))) => {
                if bad > 0 {
                    skipped.push(format!(
                        "{}: {bad} lines of requests.jsonl are not records (left out)",
                        d.display()
                    ));
                }
                runs.push(ShardRun {
                    source: d.display().to_string(),
                    summary,
                    records,
                });
            }
            Err(e) => skipped.push(format!("{}: {e} (left out of the merge)", d.display())),
        }
    }
    if runs.is_empty() {
        return Err(format!("no shard could be read: {}", skipped.join("; ")));
    }
    // The lowest shard's telemetry, as the merged levels carry (`merged.telemetry_from`).
    runs.sort_by_key(|r| r.summary.config.shard.map_or(0, |s| s.index));
    let telemetry_from = runs
        .first()
        .map(|r| PathBuf::from(&r.source))
        .filter(|d| d.join("telemetry.jsonl").exists());
    let (mut summary, records) = crate::summary::merge::merge(runs)?;
    summary.config.out_dir = out.to_path_buf();
    summary.warnings.extend(skipped.iter().cloned());
    let mut files = write_merged(out, &summary, &records, telemetry_from.as_deref())?;
    files.extend(super::report::write_charts(out, &summary, size)?);
    Ok(Merged {
        files,
        skipped,
        summary,
    })
}

fn write_merged(
    out: &Path,
    summary: &crate::summary::RunSummary,
    records: &[RequestRecord],
    telemetry_from: Option<&Path>,
) -> Result<Vec<PathBuf>, String> {
    let io = |p: &Path, e: std::io::Error| format!("cannot write {}: {e}", p.display());
    let mut files = super::RunFiles::create(out)?;
    for r in records {
        files.append(r).map_err(|e| io(out, e))?;
    }
    files.write_summary(summary).map_err(|e| io(out, e))?;
    let mut written = vec![
        out.join("requests.jsonl"),
        out.join("results.json"),
        out.join("summary.md"),
    ];
    if let Some(src) = telemetry_from {
        let to = out.join("telemetry.jsonl");
        std::fs::copy(src.join("telemetry.jsonl"), &to).map_err(|e| io(&to, e))?;
        written.push(to);
    }
    Ok(written)
}
