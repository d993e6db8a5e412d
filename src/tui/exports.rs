//! What the dashboard writes into the run directory on a key: the PNG charts and CSV (`e`) and
//! a screenshot of every tab (`s`), drawn off the UI thread.

use super::app::{App, Tab};

/// Draws charts and CSV off the UI thread (PNG encoding takes a moment).
pub(super) fn spawn_charts(app: &App, size: (u32, u32)) {
    let Some(dir) = app.sink.dir().map(std::path::Path::to_path_buf) else {
        return;
    };
    let summary = app.session.summary.clone();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = crate::export::report::write_charts(&dir, &summary, size) {
            tracing::warn!("charts not written: {e}");
        }
    });
}

/// Screenshots of every tab at the terminal's size, as PNG in `<run dir>/screenshots/`.
pub(super) fn spawn_screenshots(app: &mut App, width: u16, height: u16) {
    let Some(dir) = app.sink.dir().map(|d| d.join("screenshots")) else {
        return;
    };
    let buffers = app.tab_buffers(width, height);
    tokio::task::spawn_blocking(move || {
        if let Err(e) = write_screenshots(&dir, &buffers) {
            tracing::warn!("screenshots not written: {e}");
        }
    });
}

/// Writes `buffers` as `<n>-<tab>.png` into `dir`; returns the files.
pub fn write_screenshots(
    dir: &std::path::Path,
    buffers: &[(Tab, ratatui::buffer::Buffer)],
) -> Result<Vec<std::path::PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for (tab, buf) in buffers {
        let name = tab
            .title()
            .to_lowercase()
            .replace(" & ", "-")
            .replace(' ', "-");
        let path = dir.join(format!("{name}.png"));
        crate::export::screenshot::buffer_to_png(buf, &path)?;
        files.push(path);
    }
    Ok(files)
}
