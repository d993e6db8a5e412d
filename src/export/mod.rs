//! What a run leaves on disk: the run directory with `requests.jsonl` (appended as requests
//! finish), `results.json` and `summary.md` (rewritten atomically after every level).

pub mod charts;
pub mod csv;
pub mod fit;
pub mod html;
pub mod markdown;
pub mod merged;
pub mod prometheus;
pub mod report;
pub mod screenshot;
pub mod tune;

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::metrics::RequestRecord;
use crate::summary::RunSummary;
use crate::telemetry::TelemetryRecord;

/// The files of one run directory.
pub struct RunFiles {
    dir: PathBuf,
    jsonl: BufWriter<File>,
    telemetry: Option<BufWriter<File>>,
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader (or a crash)
/// never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_data()?;
    }
    fs::rename(&tmp, path)
}

impl RunFiles {
    /// The run file `dir` already holds, if any (`results.json`, `requests.jsonl`): a second
    /// run there would add its records to that run's ([`RunFiles::create`] appends, so that
    /// `--resume` goes on with a run's records).
    pub fn held_in(dir: &Path) -> Option<&'static str> {
        ["results.json", "requests.jsonl"]
            .into_iter()
            .find(|f| dir.join(f).exists())
    }

    /// Creates `dir` (and parents) and opens `requests.jsonl` for appending. Fails early, before
    /// any request is sent, when the directory is not writable.
    pub fn create(dir: &Path) -> Result<Self, String> {
        fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create output directory {}: {e}", dir.display()))?;
        let jsonl = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("requests.jsonl"))
            .map_err(|e| format!("cannot write in output directory {}: {e}", dir.display()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            jsonl: BufWriter::new(jsonl),
            telemetry: None,
        })
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends one record as a JSON line (buffered; see [`RunFiles::flush`]).
    pub fn append(&mut self, r: &RequestRecord) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.jsonl, r)?;
        self.jsonl.write_all(b"\n")
    }

    /// Appends one telemetry sample to `telemetry.jsonl` (created on the first sample).
    pub fn append_telemetry(&mut self, r: &TelemetryRecord) -> std::io::Result<()> {
        if self.telemetry.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join("telemetry.jsonl"))?;
            self.telemetry = Some(BufWriter::new(f));
        }
        if let Some(w) = self.telemetry.as_mut() {
            serde_json::to_writer(&mut *w, r)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Pushes buffered request and telemetry lines to their files.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(t) = self.telemetry.as_mut() {
            t.flush()?;
        }
        self.jsonl.flush()
    }

    /// Rewrites `results.json` and `summary.md` from the summary.
    pub fn write_summary(&mut self, s: &RunSummary) -> std::io::Result<()> {
        self.flush()?;
        let json = serde_json::to_vec_pretty(s).map_err(std::io::Error::other)?;
        write_atomic(&self.dir.join("results.json"), &json)?;
        write_atomic(
            &self.dir.join("summary.md"),
            markdown::summary_md(s).as_bytes(),
        )
    }
}

/// The default run directory: `runs/<UTC time>-<model>/`, the model name made path-safe.
pub fn default_run_dir(model_hint: &str) -> PathBuf {
    let t = jiff::Timestamp::now().strftime("%Y%m%d-%H%M%S").to_string();
    let safe: String = model_hint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    PathBuf::from("runs").join(format!("{t}-{safe}"))
}
