//! A kept corpus of nasty inputs (tests/fixtures/nasty/) run through every parser: stream
//! payloads of each dialect, the SSE framing itself cut at every byte boundary, and Prometheus
//! pages. Nothing may panic; unreadable input becomes an error value or a skipped line.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use servetop::client::dialect::{self, Dialect};
use servetop::telemetry::prom;

fn corpus(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/nasty/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn stream_payloads_never_panic_and_bad_json_is_an_error() {
    let text = corpus("sse_payloads.txt");
    let mut errors = 0;
    for line in text.lines() {
        for d in [Dialect::Completions, Dialect::Chat, Dialect::SglangNative] {
            if dialect::parse(d, line).is_err() {
                errors += 1;
            }
        }
        let _ = dialect::http_error_message(line);
        let _ = dialect::is_context_error(line);
    }
    // The unterminated object, the trailing garbage, NaN and the empty line are errors in every
    // dialect; the corpus's well-formed-but-odd JSON is not.
    assert!(errors >= 4 * 3, "{errors} errors");
}

#[test]
fn sse_framing_survives_any_split() {
    let payloads = corpus("sse_payloads.txt");
    let mut body = String::new();
    for l in payloads.lines() {
        body.push_str("data: ");
        body.push_str(l);
        body.push_str("\n\n");
    }
    body.push_str(": keep-alive comment\n\ndata: [DONE]\n\n");
    let bytes = body.into_bytes();
    for cut in [1usize, 2, 3, 7, 64, 1000] {
        // The decoder the client reads streams with.
        let mut sse = servetop::client::sse::SseDecoder::new();
        let mut n = 0;
        let mut done = false;
        for chunk in bytes.chunks(cut) {
            sse.feed(chunk);
            while let Some(data) = sse.next_data() {
                let data = String::from_utf8_lossy(data);
                if data == "[DONE]" {
                    done = true;
                } else {
                    let _ = dialect::parse(Dialect::Completions, &data);
                    n += 1;
                }
            }
        }
        assert!(done, "cut {cut}: [DONE] seen");
        // Every payload line became one event whatever the split. (An empty `data:` field is
        // dispatched too; the client skips it.)
        assert_eq!(n, payloads.lines().count(), "cut {cut}");
        assert_eq!(sse.buffered(), 0, "cut {cut}: nothing left over");
    }
}

#[test]
fn prometheus_pages_never_panic() {
    let text = corpus("prometheus.txt");
    let page = prom::parse(&text);
    let lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .count();
    assert_eq!(page.samples.len() + page.skipped_lines, lines);
    // Readable ones survive: the escaped \x label, the unicode label and the special values.
    assert!(page.samples.iter().any(|s| s.label("a") == Some("\\x")));
    assert!(page.samples.iter().any(|s| s.label("a") == Some("é✓")));
    assert!(page.samples.iter().any(|s| s.value == f64::INFINITY));
    for line in text.lines() {
        let _ = prom::parse(line);
    }
}
