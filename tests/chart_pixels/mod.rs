//! Finding what a chart drew in its pixels: its panels and their axes, markers, lines held
//! level by level, the dash pattern between two markers, and how far each drawn place is from
//! where its value puts it.

use image::RgbImage;

/// Okabe–Ito blue: the first run's colour on every chart.
pub const BLUE: [u8; 3] = [0, 114, 178];
/// Okabe–Ito vermillion: the palette's second colour (a second GPU, queued requests).
pub const VERMILLION: [u8; 3] = [213, 94, 0];
/// Okabe–Ito bluish green: the palette's third colour (KV cache, an SLO's interval).
pub const GREEN: [u8; 3] = [0, 158, 115];
/// Okabe–Ito reddish purple: the palette's fourth colour (a trace's failed requests).
pub const PURPLE: [u8; 3] = [204, 121, 167];
/// A reference line's grey (`y = x`).
pub const GREY: [u8; 3] = [130, 130, 130];

/// A marker's centre is a whole pixel (plotters rounds a point to one) and sits within half a
/// pixel of its exact place; the axis line is one pixel off the row of 0 at most. So a marker
/// stands within 2 px of where its value puts it, and a fitted scale cannot hide a wrong value
/// that moves a marker further.
pub const PX: f64 = 2.0;

/// The rows under the title band: every panel lies below them.
const TITLE_BAND: u32 = 80;

fn dark(img: &RgbImage, x: u32, y: u32) -> bool {
    img.get_pixel(x, y).0.iter().all(|v| *v < 80)
}

/// The centres of the markers drawn in `colour` between columns `x0..x1`: a marker is a filled
/// disc of radius 5, so its centre is where a disc of radius 4 fits in that colour (a 3 px
/// line, a 2 px error bar, a legend key or two lines crossing hold no such disc). Neighbouring
/// fits are one marker, at their mean: (column, row), left to right.
pub fn markers(img: &RgbImage, colour: [u8; 3], x0: u32, x1: u32) -> Vec<(f64, f64)> {
    markers_in(img, colour, (x0, x1), (0, img.height()))
}

/// [`markers`] between columns `cols` and rows `rows` (each a half-open range).
pub fn markers_in(
    img: &RgbImage,
    colour: [u8; 3],
    cols: (u32, u32),
    rows: (u32, u32),
) -> Vec<(f64, f64)> {
    let (w, h) = img.dimensions();
    let is = |x: i64, y: i64| img.get_pixel(x as u32, y as u32).0 == colour;
    let disc = |x: i64, y: i64| {
        (-4i64..=4).all(|dy| {
            (-4i64..=4)
                .filter(|dx| dx * dx + dy * dy <= 16)
                .all(|dx| is(x + dx, y + dy))
        })
    };
    let mut groups: Vec<Vec<(i64, i64)>> = Vec::new();
    for x in i64::from(cols.0).max(4)..i64::from(cols.1.min(w)) - 4 {
        for y in i64::from(rows.0).max(4)..i64::from(rows.1.min(h)) - 4 {
            if !is(x, y) || !disc(x, y) {
                continue;
            }
            match groups.iter_mut().find(|g| {
                g.iter()
                    .any(|&(a, b)| (a - x).abs() <= 2 && (b - y).abs() <= 2)
            }) {
                Some(g) => g.push((x, y)),
                None => groups.push(vec![(x, y)]),
            }
        }
    }
    groups
        .iter()
        .map(|g| {
            let n = g.len() as f64;
            (
                g.iter().map(|p| p.0 as f64).sum::<f64>() / n,
                g.iter().map(|p| p.1 as f64).sum::<f64>() / n,
            )
        })
        .collect()
}

/// The row of the x axis of the panel spanning columns `x0..x1`: the lowest row dark across
/// half the panel.
pub fn x_axis_row(img: &RgbImage, x0: u32, x1: u32) -> f64 {
    let row = (0..img.height())
        .rev()
        .find(|&y| (x0..x1).filter(|&x| dark(img, x, y)).count() as u32 > (x1 - x0) / 2)
        .expect("an x axis");
    f64::from(row)
}

/// The column of the y axis of the panel spanning columns `x0..x1`: the leftmost column dark
/// down a third of the figure's height.
pub fn y_axis_column(img: &RgbImage, x0: u32, x1: u32) -> f64 {
    let h = img.height();
    let col = (x0..x1)
        .find(|&x| (0..h).filter(|&y| dark(img, x, y)).count() as u32 > h / 3)
        .expect("a y axis");
    f64::from(col)
}

/// How far each of `drawn` (pixels from an axis) is from the line through the origin that
/// best fits it against `want` (the summary's values): on an axis from 0, a drawn distance is
/// the value times one scale, so every residual is a rounding error.
pub fn residuals(drawn: &[f64], want: &[f64]) -> (f64, Vec<f64>) {
    let scale = drawn.iter().zip(want).map(|(d, w)| d * w).sum::<f64>()
        / want.iter().map(|w| w * w).sum::<f64>();
    let res = drawn.iter().zip(want).map(|(d, w)| d - scale * w).collect();
    (scale, res)
}

/// One panel of a figure: the columns `x0..x1` and the rows from `y0` down to its x axis that
/// it spans, the row of that axis, the column of its y axis and the row of the y axis's top
/// end (the top of the plotting area).
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    pub x0: u32,
    pub x1: u32,
    pub y0: u32,
    pub axis: f64,
    pub y_axis: f64,
    pub top: f64,
}

impl Frame {
    /// The markers of `colour` in the panel (one on the x axis reaches 5 px under it).
    pub fn markers(&self, img: &RgbImage, colour: [u8; 3]) -> Vec<(f64, f64)> {
        markers_in(
            img,
            colour,
            (self.x0, self.x1),
            (self.y0, self.axis as u32 + 6),
        )
    }
}

/// The panels of a figure laid out in `cols` columns, in reading order. The figure's width
/// splits evenly into its columns; down each, every row dark across half the column is an x
/// axis, and a panel spans from under the title band (or the axis above) to its axis. Its y
/// axis is the leftmost column dark without a break down a third of that span (the axis's
/// label, rotated text beside it, is dark in strokes); the y axis's top, the highest
/// dark row of the run up from the x axis in that column that is dark or coloured (a marker
/// at x = 0 covers the axis; the y axis stops a row above the x axis). An empty cell of the grid
/// (no axes) gives no panel.
pub fn frames(img: &RgbImage, cols: u32) -> Vec<Frame> {
    let (w, h) = img.dimensions();
    let mut found = Vec::new();
    for c in 0..cols {
        let (x0, x1) = (w * c / cols, w * (c + 1) / cols);
        let axes: Vec<u32> = (TITLE_BAND..h)
            .filter(|&y| (x0..x1).filter(|&x| dark(img, x, y)).count() as u32 > (x1 - x0) / 2)
            .collect();
        // A run of dark rows is one axis, at its lowest row.
        let axes: Vec<u32> = axes
            .iter()
            .enumerate()
            .filter(|&(i, &y)| axes.get(i + 1) != Some(&(y + 1)))
            .map(|(_, &y)| y)
            .collect();
        let mut y0 = TITLE_BAND;
        for (r, &axis) in axes.iter().enumerate() {
            let span = axis - y0;
            // The longest unbroken dark run down a column: a line, not text's strokes.
            let run = |x: u32| {
                (y0..=axis)
                    .fold((0, 0), |(best, cur), y| {
                        let cur = if dark(img, x, y) { cur + 1 } else { 0 };
                        (best.max(cur), cur)
                    })
                    .0
            };
            let y_axis = (x0..x1).find(|&x| run(x) > span / 3).expect("a y axis");
            // A marker on the y axis (a value at x = 0) covers it in a colour.
            let coloured = |y: u32| {
                let [r, g, b] = img.get_pixel(y_axis, y).0;
                r != g || g != b
            };
            let top = (y0..axis)
                .rev()
                .take_while(|&y| dark(img, y_axis, y) || coloured(y))
                .filter(|&y| dark(img, y_axis, y))
                .last()
                .expect("the y axis reaches the x axis");
            found.push((
                r,
                c,
                Frame {
                    x0,
                    x1,
                    y0,
                    axis: f64::from(axis),
                    y_axis: f64::from(y_axis),
                    top: f64::from(top),
                },
            ));
            y0 = axis + 1;
        }
    }
    found.sort_by_key(|&(r, c, _)| (r, c));
    found.into_iter().map(|(_, _, f)| f).collect()
}

/// Along the straight line from the centre of marker `a` to that of marker `b` (their discs
/// left out: 7 px at each end), pixel by pixel: how many steps it takes, how many of them
/// land on `colour`, and how many gaps it has (runs of two steps or more that do not). A solid
/// line has no gap; a dashed one (10 px on, 6 off) one every 16 px.
pub fn dashes(img: &RgbImage, colour: [u8; 3], a: (f64, f64), b: (f64, f64)) -> (u32, u32, u32) {
    let len = (b.0 - a.0).hypot(b.1 - a.1);
    let (mut steps, mut drawn, mut gaps, mut off) = (0, 0, 0, 0);
    let mut d = 7.0;
    while d <= len - 7.0 {
        let t = d / len;
        let (x, y) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
        steps += 1;
        if img.get_pixel(x.round() as u32, y.round() as u32).0 == colour {
            drawn += 1;
            if off >= 2 {
                gaps += 1;
            }
            off = 0;
        } else {
            off += 1;
        }
        d += 1.0;
    }
    if off >= 2 {
        gaps += 1;
    }
    (steps, drawn, gaps)
}

/// A series as the data puts it on a panel: its name, colour and style, and its points: x
/// along the axis from the y axis (a value, or log2 of a concurrency), y up from the x axis (a
/// value, or its log10 less the axis's lowest decade on a log axis).
pub struct Series {
    pub name: String,
    pub colour: [u8; 3],
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(name: &str, colour: [u8; 3], dashed: bool, points: Vec<(f64, f64)>) -> Self {
        Self {
            name: name.into(),
            colour,
            dashed,
            points,
        }
    }
}

/// Checks that `panel` (its frame `f`) draws each of `series` as the data puts it:
/// - as many markers of each colour as that colour's points, in columns one a distinct x
///   (markers within 2 px across are one column), the same number in each as the points at
///   that x; in a column, the markers top to bottom are the points by value, highest first;
/// - every marker within [`PX`] of where its x and its y put it (one scale across and one up,
///   each fitted through the axes' origin);
/// - between each two neighbouring markers of a series (30 px apart or more, room for a
///   dash and a gap; one such pair at least in a series of two points or more), its line in
///   its style: drawn over half the way, with no gap if solid and a gap at least if dashed; so
///   two series of one colour cannot trade their values without trading their styles, which
///   name them in the legend.
///
/// Returns the fitted scales (pixels per unit across, and up).
pub fn check_series(img: &RgbImage, f: &Frame, panel: &str, series: &[Series]) -> (f64, f64) {
    let at = find_markers(img, f, panel, series);
    let scales = check_places(f, panel, series, &at);
    check_styles(img, panel, series, &at);
    scales
}

/// Each series' marker, point by point: the first check of [`check_series`].
fn find_markers(img: &RgbImage, f: &Frame, panel: &str, series: &[Series]) -> Vec<Vec<(f64, f64)>> {
    let mut at: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| vec![(0.0, 0.0); s.points.len()])
        .collect();
    let mut colours: Vec<[u8; 3]> = series.iter().map(|s| s.colour).collect();
    colours.sort_unstable();
    colours.dedup();
    for colour in colours {
        let mut found = f.markers(img, colour);
        found.sort_by(|a, b| a.0.total_cmp(&b.0));
        // (series, point, x, y) of this colour, by x.
        let mut want: Vec<(usize, usize, f64, f64)> = series
            .iter()
            .enumerate()
            .filter(|(_, s)| s.colour == colour)
            .flat_map(|(i, s)| {
                s.points
                    .iter()
                    .enumerate()
                    .map(move |(j, p)| (i, j, p.0, p.1))
            })
            .collect();
        want.sort_by(|a, b| a.2.total_cmp(&b.2));
        let names: Vec<&str> = series
            .iter()
            .filter(|s| s.colour == colour)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(
            found.len(),
            want.len(),
            "{panel}: {} markers of {colour:?} ({names:?}) at {found:.1?}; the data has {} \
             points: {:?}",
            found.len(),
            want.len(),
            want.iter().map(|w| (w.2, w.3)).collect::<Vec<_>>()
        );
        let mut columns: Vec<Vec<(f64, f64)>> = Vec::new();
        for m in found {
            match columns.last_mut() {
                Some(c) if (m.0 - c[0].0).abs() <= 2.0 => c.push(m),
                _ => columns.push(vec![m]),
            }
        }
        let mut xs: Vec<Vec<(usize, usize, f64, f64)>> = Vec::new();
        for w in want {
            match xs.last_mut() {
                Some(c) if (c[0].2 - w.2).abs() < 1e-9 => c.push(w),
                _ => xs.push(vec![w]),
            }
        }
        assert_eq!(
            columns.iter().map(Vec::len).collect::<Vec<_>>(),
            xs.iter().map(Vec::len).collect::<Vec<_>>(),
            "{panel}: markers of {colour:?} ({names:?}) a column at {columns:.1?}; the data's \
             points a distinct x: {:?}",
            xs.iter()
                .map(|c| c.iter().map(|w| (w.2, w.3)).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        );
        for (mut col, mut pts) in columns.into_iter().zip(xs) {
            col.sort_by(|a, b| a.1.total_cmp(&b.1));
            pts.sort_by(|a, b| b.3.total_cmp(&a.3));
            for (m, w) in col.into_iter().zip(pts) {
                at[w.0][w.1] = m;
            }
        }
    }
    at
}

/// Every marker within [`PX`] of its place: the second check of [`check_series`].
fn check_places(f: &Frame, panel: &str, series: &[Series], at: &[Vec<(f64, f64)>]) -> (f64, f64) {
    // (series, its x or y, drawn px from the axis) of every marker.
    let place = |pick: &dyn Fn((f64, f64), (f64, f64)) -> (f64, f64)| -> Vec<(&str, f64, f64)> {
        series
            .iter()
            .zip(at)
            .flat_map(|(s, m)| {
                s.points.iter().zip(m).map(|(p, m)| {
                    let (v, d) = pick(*p, *m);
                    (s.name.as_str(), v, d)
                })
            })
            .collect()
    };
    let across = place(&|p, m| (p.0, m.0 - f.y_axis));
    let up = place(&|p, m| (p.1, f.axis - m.1));
    let mut scales = Vec::new();
    for (axis, what, v) in [
        ("x", "right of the y axis", across),
        ("y", "over the x axis", up),
    ] {
        let want: Vec<f64> = v.iter().map(|p| p.1).collect();
        let drawn: Vec<f64> = v.iter().map(|p| p.2).collect();
        let (scale, res) = residuals(&drawn, &want);
        let j = (0..res.len())
            .max_by(|&a, &b| res[a].abs().total_cmp(&res[b].abs()))
            .unwrap();
        assert!(
            res[j].abs() <= PX,
            "{panel}: the {} marker with {axis} = {:.3} is drawn {:.1} px {what}; that {axis} \
             puts it at {:.1} px ({:+.1} px off). Every marker (series, {axis}, drawn px, where \
             its {axis} puts it): {:.1?}",
            v[j].0,
            want[j],
            drawn[j],
            scale * want[j],
            res[j],
            v.iter()
                .map(|p| (p.0, p.1, p.2, scale * p.1))
                .collect::<Vec<_>>()
        );
        scales.push(scale);
    }
    (scales[0], scales[1])
}

/// Each line in its style between its markers: the third check of [`check_series`].
fn check_styles(img: &RgbImage, panel: &str, series: &[Series], at: &[Vec<(f64, f64)>]) {
    for (s, m) in series.iter().zip(at) {
        let mut m: Vec<(f64, (f64, f64))> = s
            .points
            .iter()
            .map(|p| p.0)
            .zip(m.iter().copied())
            .collect();
        m.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut judged = 0;
        for pair in m.windows(2) {
            let (a, b) = (pair[0].1, pair[1].1);
            let (steps, drawn, gaps) = dashes(img, s.colour, a, b);
            if steps < 16 {
                continue;
            }
            judged += 1;
            let style = if s.dashed { "dashed" } else { "solid" };
            assert!(
                2 * drawn > steps && (gaps > 0) == s.dashed,
                "{panel}: the {style} {} line from x = {} to {} (markers at {a:.1?} and \
                 {b:.1?}) is drawn on {drawn} of {steps} px with {gaps} gaps",
                s.name,
                pair[0].0,
                pair[1].0,
            );
        }
        assert!(
            m.len() < 2 || judged > 0,
            "{panel}: no two markers of {} far enough apart to tell its style: {m:.1?}",
            s.name
        );
    }
}

/// Runs of neighbouring positions (two apart at most) as one each, at their mean.
fn runs(at: impl Iterator<Item = u32>) -> Vec<f64> {
    let mut out: Vec<Vec<u32>> = Vec::new();
    for p in at {
        match out.last_mut() {
            Some(r) if p - r[r.len() - 1] <= 2 => r.push(p),
            _ => out.push(vec![p]),
        }
    }
    out.iter()
        .map(|r| f64::from(r.iter().sum::<u32>()) / r.len() as f64)
        .collect()
}

/// The columns of a panel's vertical marks (an SLO search's answer and its lowest failing
/// rate): a dashed line of a grey darker than any grid line (black at 35 % over the grid's
/// greys), drawn down over 30 % of the lower half of the plot (its label stands in the upper
/// half, and a grid line, a series or a reference line crosses the column for a few rows
/// only). Neighbouring columns are one mark, at their mean.
pub fn mark_columns(img: &RgbImage, f: &Frame) -> Vec<f64> {
    let rows = f64::midpoint(f.top, f.axis) as u32..f.axis as u32 - 3;
    let n = rows.len() as u32;
    let grey = |x: u32, y: u32| {
        let [r, g, b] = img.get_pixel(x, y).0;
        r == g && g == b && (100..=170).contains(&r)
    };
    runs(
        (f.y_axis as u32 + 2..f.x1)
            .filter(|&x| 10 * rows.clone().filter(|&y| grey(x, y)).count() as u32 > 3 * n),
    )
}

/// The rows of a panel's horizontal limits (an SLO limit): a dashed red line (its red at 80 %)
/// across 40 % of the plot. Neighbouring rows are one limit, at their mean.
pub fn limit_rows(img: &RgbImage, f: &Frame) -> Vec<f64> {
    let cols = f.y_axis as u32 + 1..f.x1;
    let n = cols.len() as u32;
    let red = |x: u32, y: u32| {
        let [r, g, b] = img.get_pixel(x, y).0;
        r > 180 && g < 120 && b < 120
    };
    runs(
        (f.top as u32..f.axis as u32)
            .filter(|&y| 10 * cols.clone().filter(|&x| red(x, y)).count() as u32 > 4 * n),
    )
}

/// The centre row of the line of `colour` in column `x` of a panel: the mean row of its pixels
/// there, when they are one run (a column through the legend's key as well holds two, one
/// where another line crosses it none).
fn line_row(img: &RgbImage, f: &Frame, colour: [u8; 3], x: u32) -> Option<f64> {
    let rows: Vec<u32> = (f.top as u32..=f.axis as u32 + 1)
        .filter(|&y| img.get_pixel(x, y).0 == colour)
        .collect();
    let one_run = rows.last()? - rows[0] + 1 == rows.len() as u32;
    one_run.then(|| f64::from(rows.iter().sum::<u32>()) / rows.len() as f64)
}

/// A line of `colour` that holds a value for a while and then steps to another (a telemetry
/// series through the levels of a run), column by column: the row of each flat stretch (a
/// centre row within a pixel of its first over 20 columns or more, with breaks of up to 12
/// columns for a dash's gap or a line crossing it) at its median, left to right, and the
/// column where the line crosses halfway between each two neighbouring flats (interpolated
/// between the columns either side).
pub fn steps(img: &RgbImage, f: &Frame, colour: [u8; 3]) -> (Vec<f64>, Vec<f64>) {
    let pts: Vec<(u32, f64)> = (f.y_axis as u32 + 1..f.x1)
        .filter_map(|x| Some((x, line_row(img, f, colour, x)?)))
        .collect();
    // Flat stretches: (first point, last point, their median row).
    let mut flats: Vec<(usize, usize, f64)> = Vec::new();
    let mut start = 0;
    for i in 1..=pts.len() {
        let same = i < pts.len()
            && (pts[i].1 - pts[start].1).abs() <= 1.0
            && pts[i].0 - pts[i - 1].0 <= 12;
        if !same {
            if pts[i - 1].0 - pts[start].0 >= 20 {
                let mut rows: Vec<f64> = pts[start..i].iter().map(|p| p.1).collect();
                rows.sort_by(f64::total_cmp);
                flats.push((start, i - 1, rows[rows.len() / 2]));
            }
            start = i;
        }
    }
    let crossings = flats
        .windows(2)
        .map(|w| {
            let mid = f64::midpoint(w[0].2, w[1].2);
            let between = &pts[w[0].1..=w[1].0];
            between
                .windows(2)
                .find_map(|p| {
                    let (a, b) = (p[0], p[1]);
                    ((a.1 - mid) * (b.1 - mid) <= 0.0 && (b.1 - a.1).abs() > 0.0)
                        .then(|| f64::from(a.0) + (mid - a.1) / (b.1 - a.1) * f64::from(b.0 - a.0))
                })
                .expect("the line crosses between its flats")
        })
        .collect();
    (flats.iter().map(|f| f.2).collect(), crossings)
}

/// The columns of a time panel's level-start ticks: a short stroke of grey (black at 60 %,
/// over white or a level's faint band) up from the x axis, in 5 or more of the 7 rows from 2
/// to 8 px over it (a level's label starts higher). Neighbouring columns are one tick, at
/// their mean.
pub fn tick_columns(img: &RgbImage, f: &Frame) -> Vec<f64> {
    let axis = f.axis as u32;
    let grey = |x: u32, y: u32| {
        let [r, g, b] = img.get_pixel(x, y).0;
        r == g && g == b && (80..=120).contains(&r)
    };
    runs(
        (f.y_axis as u32..f.x1)
            .filter(|&x| (axis - 8..=axis - 2).filter(|&y| grey(x, y)).count() >= 5),
    )
}
