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
    Dialect, Raw, RepeatedBytes, parse, parse_general, parse_in_stream, parse_raw_in_stream,
};

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
    // They alternate, run after run, so that a slower moment of the machine falls on all; the
    // ratios are the medians of each run's.
    let (mut r, mut s, mut f, mut g) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut s_ratio, mut f_ratio, mut g_ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..15 {
        let a = once(&events, &raw).as_secs_f64();
        let b = once(&events, &checked).as_secs_f64();
        let c = once(&events, &fast).as_secs_f64();
        let d = once(&events, &general).as_secs_f64();
        r.push(a);
        s.push(b);
        f.push(c);
        g.push(d);
        s_ratio.push(b / a);
        f_ratio.push(c / a);
        g_ratio.push(d / a);
    }
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
    let (mut r, mut g, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..15 {
        let a = once(&events, &raw).as_secs_f64();
        let b = once(&events, &general).as_secs_f64();
        r.push(a);
        g.push(b);
        ratio.push(b / a);
    }
    let per = |s: f64| s * 1e9 / 200_000.0;
    println!(
        "parse 200,000 chat events, medians of 15 alternating runs: in a stream from its bytes (dialect::parse_raw_in_stream) {:.0} ns/event; general serde parse {:.0} ns/event, {:.2}x",
        per(median(&mut r)),
        per(median(&mut g)),
        median(&mut ratio)
    );
}
