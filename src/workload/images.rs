//! Images in requests (`--images N --image-size WxH[,WxH…]` or `WxH-WxH`): each request's
//! images generated from the seed and its number (random RGB pixels, so no two are alike and no
//! engine's image cache serves one twice), PNG-encoded, sent as base64 data URLs in the chat
//! message.

use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::dataset::splitmix;

/// `--image-size`: the sizes a request's images are drawn from (one size a request).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageSizes {
    /// One of these, with equal chances.
    List(Vec<(u32, u32)>),
    /// Width and height each drawn uniformly from `min` to `max` (inclusive).
    Range { min: (u32, u32), max: (u32, u32) },
}

impl Default for ImageSizes {
    fn default() -> Self {
        Self::List(vec![(512, 512)])
    }
}

/// Requests' image sizes from a range are reported in this many bands of their pixel count.
const BANDS: u64 = 4;

impl ImageSizes {
    /// `512x512 or 1024x768`, `256x256 to 1024x1024`.
    pub fn describe(&self) -> String {
        match self {
            Self::List(sizes) => sizes
                .iter()
                .map(|(w, h)| format!("{w}x{h}"))
                .collect::<Vec<_>>()
                .join(" or "),
            Self::Range { min, max } => {
                format!("{}x{} to {}x{}", min.0, min.1, max.0, max.1)
            }
        }
    }
}

/// `--images` with `--image-size`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageMix {
    /// Images in each request.
    pub per_request: u32,
    pub sizes: ImageSizes,
}

impl ImageMix {
    /// Request `i`'s image size, the same for a given seed at every level.
    pub fn size_of(&self, seed: u64, i: u32) -> (u32, u32) {
        let h = splitmix(
            seed ^ 0x1A6E_5125_0000_0000 ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        match &self.sizes {
            ImageSizes::List(sizes) => {
                let n = sizes.len().max(1) as u64;
                sizes.get((h % n) as usize).copied().unwrap_or((512, 512))
            }
            ImageSizes::Range { min, max } => {
                let side = |lo: u32, hi: u32, x: u64| lo + (x % u64::from(hi - lo + 1)) as u32;
                (side(min.0, max.0, h), side(min.1, max.1, splitmix(h)))
            }
        }
    }

    /// The most bytes a request's images take as data URLs: a PNG of noise is its 3 bytes a
    /// pixel and a little, base64 four characters for every three.
    pub fn max_bytes(&self) -> u64 {
        let (w, h) = match &self.sizes {
            ImageSizes::List(sizes) => sizes
                .iter()
                .copied()
                .max_by_key(|&(w, h)| u64::from(w) * u64::from(h))
                .unwrap_or((512, 512)),
            ImageSizes::Range { max, .. } => *max,
        };
        // PNG adds a filter byte a row and its deflate blocks' headers: 1 % and a little.
        let one = 4 * u64::from(w) * u64::from(h) * 101 / 100 + 1024;
        u64::from(self.per_request) * one
    }

    /// Request `i`'s images as data URLs.
    pub fn images_of(&self, seed: u64, i: u32) -> Vec<Arc<str>> {
        let (w, h) = self.size_of(seed, i);
        (0..self.per_request)
            .map(|k| {
                let s =
                    seed ^ u64::from(i).wrapping_mul(0xD1B5_4A32_D192_ED03) ^ (u64::from(k) << 48);
                Arc::from(data_url(&png(w, h, s)))
            })
            .collect()
    }

    /// What a request's images are reported as: `2×512x512`; from a range, the band of pixel
    /// counts its size falls in (the range's pixel counts in four equal bands:
    /// `2×0.07-0.30 MP`), so TTFT by size stays a few rows.
    pub fn label_of(&self, size: (u32, u32)) -> String {
        let n = self.per_request;
        let ImageSizes::Range { min, max } = &self.sizes else {
            return format!("{n}×{}x{}", size.0, size.1);
        };
        let area = |s: (u32, u32)| u64::from(s.0) * u64::from(s.1);
        let (lo, hi) = (area(*min), area(*max));
        let width = (hi - lo).div_ceil(BANDS).max(1);
        let band = ((area(size).clamp(lo, hi) - lo) / width).min(BANDS - 1);
        let from = lo + band * width;
        let to = (from + width).min(hi);
        let mp = |px: u64| px as f64 / 1e6;
        format!("{n}×{:.2}-{:.2} MP", mp(from), mp(to))
    }
}

/// `--image-size`: `WxH` sizes, comma-separated, or a range `WxH-WxH`; each side 1 to 8192
/// pixels.
pub fn parse_sizes(s: &str) -> Result<ImageSizes, String> {
    let one = |item: &str| {
        crate::grammar::parse_pair::<u32>(item.trim(), 1..=8192, "pixels wide and high")
            .map_err(|e| format!("--image-size {e}"))
    };
    if let Some((a, b)) = s.split_once('-') {
        let (min, max) = (one(a)?, one(b)?);
        if min.0 > max.0 || min.1 > max.1 {
            return Err(format!(
                "--image-size {s}: a range goes from the smaller size to the larger on both sides"
            ));
        }
        return Ok(ImageSizes::Range { min, max });
    }
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let size = one(item)?;
        if !out.contains(&size) {
            out.push(size);
        }
    }
    if out.is_empty() {
        return Err("--image-size needs at least one WxH (e.g. 512x512)".into());
    }
    Ok(ImageSizes::List(out))
}

/// A `w`×`h` RGB PNG of seeded random pixels.
pub fn png(w: u32, h: u32, seed: u64) -> Vec<u8> {
    let n = w as usize * h as usize * 3;
    let mut pixels = Vec::with_capacity(n + 8);
    let mut x = seed;
    while pixels.len() < n {
        x = splitmix(x);
        pixels.extend_from_slice(&x.to_le_bytes());
    }
    pixels.truncate(n);
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Fast);
        // Writing to a Vec of a size the header states cannot fail.
        if let Ok(mut wr) = enc.write_header() {
            let _ = wr.write_image_data(&pixels);
        }
    }
    out
}

/// `data:image/png;base64,…`.
pub fn data_url(png: &[u8]) -> String {
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    )
}

/// The width and height a PNG's header states (its IHDR chunk), if it is one.
pub fn png_size(bytes: &[u8]) -> Option<(u32, u32)> {
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" || &bytes[12..16] != b"IHDR" {
        return None;
    }
    let w = u32::from_be_bytes(bytes[16..20].try_into().ok()?);
    let h = u32::from_be_bytes(bytes[20..24].try_into().ok()?);
    Some((w, h))
}

/// The width and height of a `data:image/png;base64,` URL's image.
pub fn data_url_size(url: &str) -> Option<(u32, u32)> {
    let b64 = url.strip_prefix("data:image/png;base64,")?;
    // The header is in the first 24 bytes: 32 base64 characters.
    let head = base64::engine::general_purpose::STANDARD
        .decode(&b64[..b64.len().min(32)])
        .ok()?;
    png_size(&head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_pngs_of_their_size_unique_and_reproducible() {
        let m = ImageMix {
            per_request: 2,
            sizes: ImageSizes::List(vec![(64, 32), (16, 16)]),
        };
        let a = m.images_of(7, 3);
        assert_eq!(a.len(), 2);
        assert_ne!(a[0], a[1], "two images of one request differ");
        assert_eq!(a, m.images_of(7, 3));
        assert_ne!(a, m.images_of(7, 4));
        assert_eq!(data_url_size(&a[0]), Some(m.size_of(7, 3)));
        // The estimate holds the largest request's images.
        let big = ImageMix {
            per_request: 2,
            sizes: ImageSizes::List(vec![(256, 256)]),
        };
        let took: u64 = big.images_of(1, 0).iter().map(|u| u.len() as u64).sum();
        assert!(
            took <= big.max_bytes() && took * 10 >= big.max_bytes() * 9,
            "{took}"
        );
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..200 {
            seen.insert(m.size_of(1, i));
        }
        assert_eq!(seen.len(), 2, "both sizes drawn");
        let decoder = png::Decoder::new(std::io::Cursor::new(png(5, 3, 1)));
        let info = decoder.read_info().unwrap();
        assert_eq!((info.info().width, info.info().height), (5, 3));
    }

    #[test]
    fn sizes_parse_as_a_list_or_a_range() {
        assert_eq!(
            parse_sizes("512x512, 1024x768"),
            Ok(ImageSizes::List(vec![(512, 512), (1024, 768)]))
        );
        assert_eq!(
            parse_sizes("256x128-1024x768"),
            Ok(ImageSizes::Range {
                min: (256, 128),
                max: (1024, 768)
            })
        );
        assert!(parse_sizes("0x5").is_err());
        assert!(parse_sizes("").is_err());
        assert!(parse_sizes("512").unwrap_err().starts_with("--image-size"));
        assert!(
            parse_sizes("512x512-256x256")
                .unwrap_err()
                .contains("from the smaller")
        );
    }

    #[test]
    fn a_range_draws_every_size_within_it_and_reports_four_bands() {
        let m = ImageMix {
            per_request: 1,
            sizes: ImageSizes::Range {
                min: (100, 200),
                max: (300, 400),
            },
        };
        let sizes: Vec<(u32, u32)> = (0..4000).map(|i| m.size_of(9, i)).collect();
        assert!(
            sizes
                .iter()
                .all(|&(w, h)| (100..=300).contains(&w) && (200..=400).contains(&h))
        );
        let (ws, hs): (Vec<u32>, Vec<u32>) = sizes.iter().copied().unzip();
        // Uniform over 201 values: mean 200 (300 for heights), standard error 0.9; 5 is over
        // five of them.
        let mean = |v: &[u32]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
        assert!((mean(&ws) - 200.0).abs() < 5.0 && (mean(&hs) - 300.0).abs() < 5.0);
        assert!(ws.contains(&100) && ws.contains(&300));
        let bands: std::collections::BTreeSet<String> =
            sizes.iter().map(|&s| m.label_of(s)).collect();
        assert_eq!(
            bands.into_iter().collect::<Vec<_>>(),
            [
                "1×0.02-0.04 MP",
                "1×0.04-0.07 MP",
                "1×0.07-0.10 MP",
                "1×0.10-0.12 MP"
            ]
        );
        assert_eq!(m.label_of((100, 200)), "1×0.02-0.04 MP");
        assert_eq!(m.label_of((300, 400)), "1×0.10-0.12 MP");
    }
}
