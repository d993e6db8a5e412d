//! One figure: its title, the title band's line (model, engine, settings, SIMULATED when it
//! was), its panels and footer notes — and the figure drawn as a PNG, a grid of panels under
//! the title band with the notes beneath.

use std::path::Path;

use super::panel::{Panel, draw_panel, err, legend, wrap};
use super::title::{Settings, subtitle};
use super::{ChartRun, ChartText, register_fonts};
use plotters::prelude::*;
use plotters::style::FontStyle;

/// A figure before it is drawn: its title, the title band's line, `panels` side by side (or
/// in a grid of `cols`) and footer notes. The PNG and the report page's interactive charts are
/// both drawn from it, so they cannot disagree.
pub struct Figure {
    pub(super) title: String,
    pub(super) subtitle: String,
    pub(super) panels: Vec<Panel>,
    pub(super) cols: usize,
    pub(super) footer: Vec<String>,
}

/// A figure whose title band names each run's plan as its lengths read.
pub(super) fn figure(
    title: &str,
    runs: &[ChartRun<'_>],
    panels: Vec<Panel>,
    cols: usize,
    footer: Vec<String>,
) -> Figure {
    figure_of(
        (title, Settings::Plan(|s| Some(s.config.lengths_label()))),
        runs,
        panels,
        cols,
        footer,
    )
}

/// [`figure`] with the subtitle's settings given.
pub(super) fn figure_of(
    (title, settings): (&str, Settings<'_>),
    runs: &[ChartRun<'_>],
    panels: Vec<Panel>,
    cols: usize,
    footer: Vec<String>,
) -> Figure {
    Figure {
        title: title.to_string(),
        subtitle: subtitle(runs, settings),
        panels,
        cols: cols.max(1),
        footer,
    }
}

impl Figure {
    /// What its title band and legends say.
    pub fn text(&self) -> ChartText {
        ChartText {
            subtitle: self.subtitle.clone(),
            legends: self.panels.iter().map(legend).collect(),
        }
    }

    /// Draws it as a PNG of `size` into `path`; returns what its title band and legends say.
    pub fn draw_png(&self, path: &Path, size: (u32, u32)) -> Result<ChartText, String> {
        register_fonts();
        let root = BitMapBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        // Wrap footer notes to the figure width (about 10 px per character at 18 px).
        let max_chars = (size.0 as usize / 10).max(40);
        let footer: Vec<String> = self
            .footer
            .iter()
            .flat_map(|l| wrap(l, max_chars))
            .collect();
        let footer_h = if footer.is_empty() {
            0
        } else {
            14 + 26 * footer.len() as u32
        };
        let (head, rest) = root.split_vertically(80);
        let (body, foot) = rest.split_vertically(size.1.saturating_sub(80 + footer_h));
        head.draw(&Text::new(
            self.title.clone(),
            (20, 10),
            ("sans-serif", 32).into_font().style(FontStyle::Bold),
        ))
        .map_err(err)?;
        // The subtitle in the largest size that fits the width (long settings, a long model
        // name).
        let sub = self.subtitle.clone();
        let width = size.0.saturating_sub(40);
        let px = [20.0, 18.0, 16.0, 14.0, 12.0]
            .into_iter()
            .find(|&px| {
                head.estimate_text_size(&sub, &("sans-serif", px).into_text_style(&head))
                    .is_ok_and(|(w, _)| w <= width)
            })
            .unwrap_or(12.0);
        head.draw(&Text::new(
            sub,
            (20, 50),
            ("sans-serif", px).into_font().color(&BLACK.mix(0.75)),
        ))
        .map_err(err)?;
        let rows = self.panels.len().div_ceil(self.cols);
        let areas = body.split_evenly((rows, self.cols));
        for (a, p) in areas.iter().zip(&self.panels) {
            draw_panel(a, p)?;
        }
        for (i, line) in footer.iter().enumerate() {
            foot.draw(&Text::new(
                line.clone(),
                (20, 8 + 26 * i as i32),
                ("sans-serif", 18).into_font().color(&BLACK.mix(0.8)),
            ))
            .map_err(err)?;
        }
        root.present().map_err(err)?;
        Ok(self.text())
    }
}
