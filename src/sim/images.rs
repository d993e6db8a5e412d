//! Images in the simulator's chat messages: read from their data URLs' PNG headers, each
//! `⌈W/28⌉·⌈H/28⌉` prompt tokens (one token a 28-pixel square, as Qwen2-VL counts them),
//! prefilled as any other token, plus `--image-ms` of engine time an image.

use serde_json::Value;

/// The side of the square one image token covers, in pixels.
pub const PATCH: u32 = 28;

/// Prompt tokens of a `w`×`h` image.
pub fn tokens(w: u32, h: u32) -> u64 {
    u64::from(w.div_ceil(PATCH)) * u64::from(h.div_ceil(PATCH))
}

/// A message's text: its `content` string, or its text parts joined by spaces.
pub fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// The sizes of the images in `msgs`' content parts; an image that is not a PNG data URL is
/// an error (vLLM answers 400 too).
pub fn of_messages(msgs: &[Value]) -> Result<Vec<(u32, u32)>, String> {
    let mut out = Vec::new();
    for m in msgs {
        let Some(parts) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        for p in parts {
            if p.get("type").and_then(Value::as_str) != Some("image_url") {
                continue;
            }
            let url = p
                .pointer("/image_url/url")
                .and_then(Value::as_str)
                .unwrap_or("");
            let size = crate::workload::images::data_url_size(url).ok_or_else(|| {
                "the simulator reads images as data:image/png;base64 URLs only".to_string()
            })?;
            out.push(size);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn images_are_read_from_their_headers_and_counted_by_patch() {
        assert_eq!(tokens(28, 28), 1);
        assert_eq!(tokens(512, 512), 19 * 19);
        assert_eq!(tokens(100, 30), 4 * 2);
        let url = crate::workload::images::data_url(&crate::workload::images::png(100, 30, 1));
        let msgs = [json!({"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": url}},
        ]})];
        assert_eq!(of_messages(&msgs), Ok(vec![(100, 30)]));
        assert_eq!(content_text(msgs[0].get("content")), "look");
        let bad = [
            json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}),
        ];
        assert!(of_messages(&bad).is_err());
    }
}
