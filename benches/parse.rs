//! Event-parse benchmark: time to parse the OpenAI completions events a stream is made of (the
//! firehose's, vLLM's, and vLLM's last one with usage), through `dialect::parse` (which takes
//! the fast path for them) and through the general serde parse alone. Prints the median of 7
//! runs of 200,000 events each, and the ratio measured in this run. `cargo bench --bench parse`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use servetop::client::dialect::{Dialect, parse, parse_general};

const EVENTS: [&str; 3] = [
    r#"{"id":"cmpl-1","object":"text_completion","created":0,"model":"sim/firehose","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"cmpl-8f2a","object":"text_completion","created":1733,"model":"Qwen/Qwen3-27B","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
    r#"{"id":"cmpl-8f2a","object":"text_completion","created":1733,"model":"Qwen/Qwen3-27B","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":1000,"total_tokens":1500,"completion_tokens":500}}"#,
];

fn time(f: &dyn Fn(&str) -> usize) -> Duration {
    let mut times = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        let mut n = 0;
        for i in 0..200_000 {
            n += f(black_box(EVENTS[i % 3]));
        }
        black_box(n);
        times.push(t.elapsed());
    }
    times.sort();
    times[3]
}

fn main() {
    for e in EVENTS {
        assert_eq!(
            parse(Dialect::Completions, e),
            parse_general(Dialect::Completions, e)
        );
    }
    let fast = time(&|e| parse(Dialect::Completions, e).map_or(0, |c| c.text.len()));
    let general = time(&|e| parse_general(Dialect::Completions, e).map_or(0, |c| c.text.len()));
    let per = |d: Duration| d.as_secs_f64() * 1e9 / 200_000.0;
    println!(
        "parse 200,000 completions events: dialect::parse median {fast:?} ({:.0} ns/event), general serde parse {general:?} ({:.0} ns/event): {:.2}x",
        per(fast),
        per(general),
        general.as_secs_f64() / fast.as_secs_f64()
    );
}
