//! Event-parse benchmark: time to parse the OpenAI completions events a stream is made of (the
//! firehose's, vLLM's with its per-event usage, and vLLM's last one) as the next events of
//! their streams from their bytes, as the client reads them (`dialect::parse_raw_in_stream`,
//! which skips what a stream's events repeat and checks only the new text as UTF-8; each
//! event's text and count differ from its stream's last); the same checking each whole event
//! as UTF-8 and trimming it first (`dialect::parse_in_stream`, the client's read before
//! 2026-12-07); one by one (`dialect::parse`; all take the fast path for them); and through the
//! general serde parse alone. Prints the medians of 15 alternating runs of 200,000 events each,
//! and the median ratio of each run's times. Then the same for chat events (the firehose's,
//! vLLM's with usage, a reasoning delta) from their bytes against the general parse, which read
//! every chat event before 2026-12-07. `cargo bench --bench parse`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use servetop::client::dialect::{
    Dialect, Raw, RepeatedBytes, framed_in_stream, parse, parse_general, parse_in_stream,
    parse_raw_in_stream,
};
use servetop::client::sse::SseDecoder;

const EVENTS: [&str; 3] = [
    r#"{"id":"cmpl-1","object":"text_completion","created":0,"model":"sim/firehose","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"cmpl-8f2a","object":"text_completion","created":1733,"model":"Qwen/Qwen3-27B","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":{"prompt_tokens":1000,"total_tokens":1001,"completion_tokens":1}}"#,
    r#"{"id":"cmpl-8f2a","object":"text_completion","created":1733,"model":"Qwen/Qwen3-27B","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":1000,"total_tokens":1500,"completion_tokens":500}}"#,
];

/// The texts the events carry in turn: a stream's next event differs from its last in its text.
const WORDS: [&str; 8] = [" the", " a", " of", " model", "'s", " serving", ",", " é"];

const CHAT_EVENTS: [&str; 3] = [
    r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"sim/firehose","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"chatcmpl-8f2a","object":"chat.completion.chunk","created":1733,"model":"Qwen/Qwen3-27B","choices":[{"index":0,"delta":{"content":" a"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":1000,"total_tokens":1001,"completion_tokens":1}}"#,
    r#"{"id":"chatcmpl-8f2b","object":"chat.completion.chunk","created":1733,"model":"Qwen/Qwen3-27B","choices":[{"index":0,"delta":{"reasoning_content":" hm"},"logprobs":null,"finish_reason":null}]}"#,
];

/// The events read in turn: event `i` is `set[i % 3]` (the next of stream `i % 3`) with
/// `WORDS[(i / 3) % 8]` for its text, and vLLM's per-event usage counting it.
fn events(set: &[&str; 3]) -> Vec<String> {
    (0..24)
        .map(|i| {
            let e = set[i % 3];
            let at = [r#""text":""#, r#""content":""#, r#""reasoning_content":""#]
                .iter()
                .find_map(|k| e.find(k).map(|at| at + k.len()))
                .expect("every event has a text");
            let end = at + e[at..].find('"').expect("the text ends");
            let n = i / 3 + 1;
            format!("{}{}{}", &e[..at], WORDS[(i / 3) % 8], &e[end..]).replace(
                r#""total_tokens":1001,"completion_tokens":1}"#,
                &format!(r#""total_tokens":{},"completion_tokens":{n}}}"#, 1000 + n),
            )
        })
        .collect()
}

/// One run of 200,000 events through `f`.
fn once(events: &[String], f: &dyn Fn(&str) -> usize) -> Duration {
    let t = Instant::now();
    let mut n = 0;
    for i in 0..200_000 {
        n += f(black_box(&events[i % events.len()]));
    }
    black_box(n);
    t.elapsed()
}

/// Each of `runs` timed 15 times, taking turns run after run so that a slower moment of the
/// machine falls on all: each one's seconds, and each one's time over the first's, run by run
/// (a ratio's median is the median of those).
fn alternated<const N: usize>(runs: [&dyn Fn() -> Duration; N]) -> [(Vec<f64>, Vec<f64>); N] {
    let mut out: [(Vec<f64>, Vec<f64>); N] = std::array::from_fn(|_| (Vec::new(), Vec::new()));
    for _ in 0..15 {
        let t: Vec<f64> = runs.iter().map(|run| run().as_secs_f64()).collect();
        for (k, (secs, ratio)) in out.iter_mut().enumerate() {
            secs.push(t[k]);
            ratio.push(t[k] / t[0]);
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let events = events(&EVENTS);
    for e in &events {
        assert_eq!(
            parse(Dialect::Completions, e),
            parse_general(Dialect::Completions, e)
        );
    }
    // Each event is the next of its own stream (three streams read in turn), as the client
    // reads them: what a stream's events repeat is skipped.
    let streams = || {
        std::cell::RefCell::new([
            RepeatedBytes::default(),
            RepeatedBytes::default(),
            RepeatedBytes::default(),
        ])
    };
    let (raw_streams, str_streams) = (streams(), streams());
    let (raw_next, str_next) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let raw = |e: &str| {
        let i = raw_next.replace((raw_next.get() + 1) % 3);
        match parse_raw_in_stream(
            Dialect::Completions,
            e.as_bytes(),
            &mut raw_streams.borrow_mut()[i],
        ) {
            Ok(Raw::Chunk(c)) => c.text.len(),
            _ => 0,
        }
    };
    let checked = |e: &str| {
        let i = str_next.replace((str_next.get() + 1) % 3);
        std::str::from_utf8(black_box(e.as_bytes())).map_or(0, |d| {
            parse_in_stream(
                Dialect::Completions,
                d.trim(),
                &mut str_streams.borrow_mut()[i],
            )
            .map_or(0, |c| c.text.len())
        })
    };
    let fast = |e: &str| parse(Dialect::Completions, e).map_or(0, |c| c.text.len());
    let general = |e: &str| parse_general(Dialect::Completions, e).map_or(0, |c| c.text.len());
    let [
        (mut r, _),
        (mut s, mut s_ratio),
        (mut f, mut f_ratio),
        (mut g, mut g_ratio),
    ] = alternated([
        &|| once(&events, &raw),
        &|| once(&events, &checked),
        &|| once(&events, &fast),
        &|| once(&events, &general),
    ]);
    let per = |s: f64| s * 1e9 / 200_000.0;
    println!(
        "parse 200,000 completions events, medians of 15 alternating runs: in a stream from its bytes (dialect::parse_raw_in_stream) {:.0} ns/event; each event checked as UTF-8 and trimmed first (dialect::parse_in_stream) {:.0} ns/event, {:.2}x; one by one (dialect::parse) {:.0} ns/event, {:.2}x; general serde parse {:.0} ns/event, {:.2}x",
        per(median(&mut r)),
        per(median(&mut s)),
        median(&mut s_ratio),
        per(median(&mut f)),
        median(&mut f_ratio),
        per(median(&mut g)),
        median(&mut g_ratio)
    );
    chat();
    framed();
}

/// Chat events in streams from their bytes against the general parse, as above.
fn chat() {
    let events = events(&CHAT_EVENTS);
    for e in &events {
        assert_eq!(parse(Dialect::Chat, e), parse_general(Dialect::Chat, e));
    }
    let streams = std::cell::RefCell::new([
        RepeatedBytes::default(),
        RepeatedBytes::default(),
        RepeatedBytes::default(),
    ]);
    let next = std::cell::Cell::new(0);
    let raw = |e: &str| {
        let i = next.replace((next.get() + 1) % 3);
        match parse_raw_in_stream(Dialect::Chat, e.as_bytes(), &mut streams.borrow_mut()[i]) {
            Ok(Raw::Chunk(c)) => c.text.len(),
            _ => 0,
        }
    };
    let general = |e: &str| parse_general(Dialect::Chat, e).map_or(0, |c| c.text.len());
    let [(mut r, _), (mut g, mut ratio)] =
        alternated([&|| once(&events, &raw), &|| once(&events, &general)]);
    let per = |s: f64| s * 1e9 / 200_000.0;
    println!(
        "parse 200,000 chat events, medians of 15 alternating runs: in a stream from its bytes (dialect::parse_raw_in_stream) {:.0} ns/event; general serde parse {:.0} ns/event, {:.2}x",
        per(median(&mut r)),
        per(median(&mut g)),
        median(&mut ratio)
    );
}

/// The firehose's events (with the per-event usage the client asks for), as `reads` reads of 16
/// events framed as server-sent events, each event's text and counts its own.
fn firehose_reads(reads: usize) -> Vec<Vec<u8>> {
    (0..reads)
        .map(|r| {
            let mut b = Vec::new();
            for k in 0..16 {
                let n = r * 16 + k + 1;
                b.extend_from_slice(
                    format!(
                        "data: {{\"id\":\"cmpl-0\",\"object\":\"text_completion\",\"created\":0,\"model\":\"sim/firehose\",\"choices\":[{{\"index\":0,\"text\":\"{}\",\"logprobs\":null,\"finish_reason\":null}}],\"usage\":{{\"prompt_tokens\":32,\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\n",
                        WORDS[n % 8],
                        n + 32
                    )
                    .as_bytes(),
                );
            }
            b
        })
        .collect()
}

/// One run over `reads` (repeated to 200,000 events) through `read`, which takes a stream's
/// decoder and kept shape and returns the text bytes it read.
fn reads_once(
    reads: &[Vec<u8>],
    read: &dyn Fn(&mut SseDecoder, &mut RepeatedBytes, &[u8]) -> usize,
) -> Duration {
    let (mut sse, mut repeat) = (SseDecoder::new(), RepeatedBytes::default());
    let t = Instant::now();
    let mut n = 0;
    for i in 0..200_000 / 16 {
        n += read(&mut sse, &mut repeat, black_box(&reads[i % reads.len()]));
    }
    black_box(n);
    t.elapsed()
}

/// Reads of 16 firehose events as the client reads them: each event's line and field found by
/// the SSE decoder, then parsed from its bytes (the client's read before 2026-12-07's second
/// change), against an event with the last one's shape read where it starts
/// (`SseDecoder::next_with` with `dialect::framed_in_stream`), and against the reference
/// reader's scan of the same bytes for event ends.
fn framed() {
    let reads = firehose_reads(64);
    let by_line = |sse: &mut SseDecoder, repeat: &mut RepeatedBytes, b: &[u8]| {
        sse.feed(b);
        let mut n = 0;
        while let Some(raw) = sse.next_data() {
            if let Ok(Raw::Chunk(c)) = parse_raw_in_stream(Dialect::Completions, raw, repeat) {
                n += c.text.len();
            }
        }
        sse.settle();
        n
    };
    let framed = |sse: &mut SseDecoder, repeat: &mut RepeatedBytes, b: &[u8]| {
        sse.feed(b);
        let mut n = 0;
        loop {
            let got = sse.next_with(|b| {
                let (c, took) = framed_in_stream(Dialect::Completions, b, repeat)?;
                Some((c.text.len(), took))
            });
            if let Some(len) = got {
                n += len;
                continue;
            }
            let Some(raw) = sse.next_data() else { break };
            if let Ok(Raw::Chunk(c)) = parse_raw_in_stream(Dialect::Completions, raw, repeat) {
                n += c.text.len();
            }
        }
        sse.settle();
        n
    };
    // The reference reader's loop (src/selfbench/reference.rs): a byte at a time, event ends.
    let scan = |_: &mut SseDecoder, _: &mut RepeatedBytes, b: &[u8]| {
        let (mut prev, mut events) = (0u8, 0);
        for &c in b {
            if c == b'\n' && prev == b'\n' {
                events += 1;
            }
            prev = c;
        }
        events
    };
    // Both read every event's text, and the framed read took the shape.
    let total = |read: &dyn Fn(&mut SseDecoder, &mut RepeatedBytes, &[u8]) -> usize| {
        let (mut sse, mut repeat) = (SseDecoder::new(), RepeatedBytes::default());
        reads
            .iter()
            .map(|b| read(&mut sse, &mut repeat, b))
            .sum::<usize>()
    };
    let words: usize = (1..=reads.len() * 16).map(|n| WORDS[n % 8].len()).sum();
    assert_eq!((total(&by_line), total(&framed)), (words, words));
    let [(mut f, _), (mut l, mut ratio), (mut s, mut scan_ratio)] = alternated([
        &|| reads_once(&reads, &framed),
        &|| reads_once(&reads, &by_line),
        &|| reads_once(&reads, &scan),
    ]);
    let per = |s: f64| s * 1e9 / 200_000.0;
    println!(
        "read 200,000 firehose events in reads of 16, medians of 15 alternating runs: framed where each starts (SseDecoder::next_with, dialect::framed_in_stream) {:.0} ns/event; each line found first (SseDecoder::next_data, dialect::parse_raw_in_stream) {:.0} ns/event, {:.2}x; the reference reader's scan for event ends {:.0} ns/event, framed {:.2}x its time",
        per(median(&mut f)),
        per(median(&mut l)),
        median(&mut ratio),
        per(median(&mut s)),
        1.0 / median(&mut scan_ratio)
    );
}
