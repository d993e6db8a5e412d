//! `servetop report`: charts, CSV and summary.md again from saved run directories.

use super::fail;

/// `servetop report`.
pub fn report(a: &crate::cli::ReportArgs) -> i32 {
    if a.screenshots && a.dirs.len() != 1 {
        return fail("--screenshots takes one run directory");
    }
    let result = crate::export::report::report(&a.dirs, &a.labels, a.out.as_deref(), a.chart_size)
        .and_then(|mut files| {
            if a.screenshots {
                let (summary, telemetry) = crate::export::report::load_run(&a.dirs[0])?;
                let mut app = crate::tui::app::App::from_saved(summary, &telemetry);
                let buffers = app.tab_buffers(a.screenshot_size.0, a.screenshot_size.1);
                files.extend(crate::tui::write_screenshots(
                    &a.dirs[0].join("screenshots"),
                    &buffers,
                )?);
            }
            Ok(files)
        });
    match result {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            0
        }
        Err(e) => fail(&e),
    }
}
