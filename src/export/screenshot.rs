//! Dashboard screenshots as PNG, drawn cell by cell from a ratatui `Buffer` with the embedded
//! `DejaVu Sans Mono` and the cells' real colours (a dark terminal's palette), so the pictures in
//! the README come from the program itself, never from an editor.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use ratatui::buffer::Buffer;
use ratatui::style::{Color as TermColor, Modifier};

const MONO: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansMono.ttf");
const MONO_BOLD: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansMono-Bold.ttf");
static FONTS: Once = Once::new();

/// Pixels per terminal cell.
pub const CELL: (u32, u32) = (10, 20);

const FG: (u8, u8, u8) = (220, 220, 220);
const BG: (u8, u8, u8) = (24, 26, 30);

fn rgb(c: TermColor, default: (u8, u8, u8)) -> (u8, u8, u8) {
    match c {
        TermColor::Reset => default,
        TermColor::Black => (0, 0, 0),
        TermColor::Red => (220, 70, 70),
        TermColor::Green => (80, 200, 120),
        TermColor::Yellow => (230, 200, 60),
        TermColor::Blue => (70, 130, 230),
        TermColor::Magenta => (200, 90, 200),
        TermColor::Cyan => (60, 190, 220),
        TermColor::Gray => (200, 200, 200),
        TermColor::DarkGray => (110, 110, 110),
        TermColor::LightRed => (255, 120, 120),
        TermColor::LightGreen => (130, 240, 160),
        TermColor::LightYellow => (255, 240, 130),
        TermColor::LightBlue => (130, 180, 255),
        TermColor::LightMagenta => (240, 140, 240),
        TermColor::LightCyan => (140, 230, 250),
        TermColor::White => (255, 255, 255),
        TermColor::Rgb(r, g, b) => (r, g, b),
        TermColor::Indexed(i) => {
            let v = i.saturating_sub(232).saturating_mul(10).saturating_add(8);
            (v, v, v)
        }
    }
}

fn blend(a: (u8, u8, u8), b: (u8, u8, u8)) -> (u8, u8, u8) {
    let m = u8::midpoint;
    (m(a.0, b.0), m(a.1, b.1), m(a.2, b.2))
}

/// Writes `buf` as a PNG of `CELL`-sized cells.
pub fn buffer_to_png(buf: &Buffer, path: &Path) -> Result<(), String> {
    FONTS.call_once(|| {
        let ok = register_font("servetop-mono", FontStyle::Normal, MONO).is_ok()
            && register_font("servetop-mono", FontStyle::Bold, MONO_BOLD).is_ok();
        if !ok {
            tracing::warn!("the embedded DejaVu Sans Mono font was rejected");
        }
    });
    let area = buf.area;
    let size = (
        u32::from(area.width) * CELL.0,
        u32::from(area.height) * CELL.1,
    );
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&RGBColor(BG.0, BG.1, BG.2))
        .map_err(|e| format!("{e:?}"))?;
    for y in 0..area.height {
        for x in 0..area.width {
            let cell = &buf[(area.x + x, area.y + y)];
            let mut fg = rgb(cell.fg, FG);
            let mut bg = rgb(cell.bg, BG);
            if cell.modifier.contains(Modifier::REVERSED) {
                std::mem::swap(&mut fg, &mut bg);
            }
            if cell.modifier.contains(Modifier::DIM) {
                fg = blend(fg, bg);
            }
            let px = i32::from(x) * CELL.0 as i32;
            let py = i32::from(y) * CELL.1 as i32;
            if bg != BG {
                root.draw(&Rectangle::new(
                    [(px, py), (px + CELL.0 as i32, py + CELL.1 as i32)],
                    RGBColor(bg.0, bg.1, bg.2).filled(),
                ))
                .map_err(|e| format!("{e:?}"))?;
            }
            let sym = cell.symbol();
            if sym.trim().is_empty() {
                continue;
            }
            let color = RGBColor(fg.0, fg.1, fg.2);
            // Braille (the charts' dots) is missing from DejaVu Sans Mono: draw the dots.
            let mut chars = sym.chars();
            if let (Some(c @ '\u{2800}'..='\u{28ff}'), None) = (chars.next(), chars.next()) {
                let bits = c as u32 - 0x2800;
                const DOTS: [(i32, i32); 8] = [
                    (0, 0),
                    (0, 1),
                    (0, 2),
                    (1, 0),
                    (1, 1),
                    (1, 2),
                    (0, 3),
                    (1, 3),
                ];
                for (bit, (col, row)) in DOTS.iter().enumerate() {
                    if bits & (1 << bit) != 0 {
                        let (dx, dy) = (px + 2 + col * 4, py + 2 + row * 5);
                        root.draw(&Rectangle::new(
                            [(dx, dy), (dx + 2, dy + 2)],
                            color.filled(),
                        ))
                        .map_err(|e| format!("{e:?}"))?;
                    }
                }
                continue;
            }
            let style = if cell.modifier.contains(Modifier::BOLD) {
                FontStyle::Bold
            } else {
                FontStyle::Normal
            };
            // 17 px makes the mono advance ~10.2 px: box-drawing lines join across cells.
            let font = ("servetop-mono", 17).into_font().style(style).color(&color);
            root.draw(&Text::new(sym.to_string(), (px, py), font))
                .map_err(|e| format!("{e:?}"))?;
        }
    }
    root.present().map_err(|e| format!("{e:?}"))
}
