//! Images in requests (`--images N --image-size WxH[,WxH…]`): each request's images generated
//! from the seed and its number (random RGB pixels, so no two are alike and no engine's image
//! cache serves one twice), PNG-encoded, sent as base64 data URLs in the chat message.

use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::dataset::splitmix;

/// `--images` with `--image-size`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageMix {
    /// Images in each request.
    pub per_request: u32,
    /// The sizes a request's images are drawn from (one size a request, equal chances).
    pub sizes: Vec<(u32, u32)>,
}

impl ImageMix {
    /// Request `i`'s image size, the same for a given seed at every level.
    pub fn size_of(&self, seed: u64, i: u32) -> (u32, u32) {
        let n = self.sizes.len().max(1) as u64;
        let k = splitmix(
            seed ^ 0x1A6E_5125_0000_0000 ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ) % n;
        self.sizes.get(k as usize).copied().unwrap_or((512, 512))
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

    /// `2×512x512` for a request's images.
    pub fn label_of(&self, size: (u32, u32)) -> String {
        format!("{}×{}x{}", self.per_request, size.0, size.1)
    }
}

/// `--image-size`: `WxH` sizes, comma-separated, each side 1 to 8192 pixels.
pub fn parse_sizes(s: &str) -> Result<Vec<(u32, u32)>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (w, h) = crate::cli::parse_pair::<u32>(item, 1..=8192, "pixels wide and high")
            .map_err(|e| format!("--image-size {e}"))?;
        if !out.contains(&(w, h)) {
            out.push((w, h));
        }
    }
    if out.is_empty() {
        return Err("--image-size needs at least one WxH (e.g. 512x512)".into());
    }
    Ok(out)
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
            sizes: vec![(64, 32), (16, 16)],
        };
        let a = m.images_of(7, 3);
        assert_eq!(a.len(), 2);
        assert_ne!(a[0], a[1], "two images of one request differ");
        assert_eq!(a, m.images_of(7, 3));
        assert_ne!(a, m.images_of(7, 4));
        assert_eq!(data_url_size(&a[0]), Some(m.size_of(7, 3)));
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
    fn sizes_parse_as_a_list() {
        assert_eq!(
            parse_sizes("512x512, 1024x768"),
            Ok(vec![(512, 512), (1024, 768)])
        );
        assert!(parse_sizes("0x5").is_err());
        assert!(parse_sizes("").is_err());
        assert!(parse_sizes("512").unwrap_err().starts_with("--image-size"));
    }
}
