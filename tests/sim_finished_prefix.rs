//! The simulator's record of what it had finished of each chat prompt
//! (`finished_prefix_tokens`) and what its prefix cache served of it (`cached_tokens`), read at
//! `GET /sim/requests`, against what this test works out itself from the simulated template's
//! rules (docs/simulator.md):
//!
//! - a word is ⌈chars / 4⌉ tokens; a chat is 3 tokens, plus 4 a message (its opening) and its
//!   content;
//! - turn k ≥ 2 of a conversation resends turn k − 1's messages, then its reply as an assistant
//!   message, then a new user message. Turn k − 1's reply, rendered as turn k renders it (its
//!   prompt, the assistant message's 4 opening tokens, the reply), had finished: turn k's
//!   longest finished prefix ending a message is that, `prompt_{k−1} + 4 + output_{k−1}`;
//! - turn 1 of the very first conversation: nothing was finished (0); turn 1 of a later one
//!   under the same system prompt: the system message and the user message's opening,
//!   `3 + 4 + system + 4`, as an earlier prompt's prefill completed;
//! - a turn resent with an edited reply: the prompt before that reply, whose prefill
//!   completed, and the reply's opening, which its finished reply began with;
//! - a prompt that only waited and was cancelled never finished its prefill, so a later copy
//!   of it finds only what other requests finished.
//!
//! `cached_tokens` is what the usage told the client. With a cache too large to evict, it is at
//! least every whole 16-token block of the finished prefix; with a 4-block cache and prompts
//! over 5 blocks, the oldest blocks of every sequence are gone when the next turn comes, so it
//! drops while `finished_prefix_tokens` stays the same.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{Value, json};
use servetop::sim::{self, AcceptLength, SimConfig, SimHandle, SimRequestTrace, SimTruth};

const SYSTEM: &str = "You are a careful coding agent working inside a repository. Read the \
    files you are given, call the tools you are offered one at a time, and wait for each \
    result before the next call. Answer in short plain sentences, name the files and the \
    functions you mean, never invent a path, and say so when you do not know the answer.";

/// Output tokens asked for each turn.
const OUTPUT: u64 = 12;

/// The simulated tokenizer's count: each whitespace-separated word is ⌈chars / 4⌉ tokens.
fn tokens(text: &str) -> u64 {
    text.split_whitespace()
        .map(|w| w.chars().count().div_ceil(4) as u64)
        .sum()
}

/// A chat's prompt tokens: 3 for the conversation, 4 a message, and the contents.
fn prompt_tokens(messages: &[(&str, String)]) -> u64 {
    3 + messages.iter().map(|(_, c)| 4 + tokens(c)).sum::<u64>()
}

fn config(kv_capacity_tokens: u64) -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.accept_length = AcceptLength::Fixed(1);
    c.prefix_cache = true;
    c.kv_capacity_tokens = kv_capacity_tokens;
    c
}

async fn start(c: SimConfig) -> SimHandle {
    sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

/// One answered turn as the client saw it.
struct Turn {
    id: String,
    prompt_tokens: u64,
    reply: String,
    output_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens`.
    cached_tokens: u64,
}

fn body(h: &SimHandle, messages: &[(&str, String)], stream: bool, max_tokens: u64) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|(r, c)| json!({"role": r, "content": c}))
        .collect();
    json!({"model": h.config.model, "messages": messages, "max_tokens": max_tokens,
        "stream": stream, "stream_options": {"include_usage": true}})
}

/// Sends one turn and reads its whole answer, streamed or not.
async fn send(h: &SimHandle, id: &str, messages: &[(&str, String)], stream: bool) -> Turn {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", h.url()))
        .header("x-request-id", id)
        .json(&body(h, messages, stream, OUTPUT))
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{id}: {}", resp.status());
    let text = resp.text().await.unwrap();
    let (reply, usage) = if stream {
        let mut reply = String::new();
        let mut usage = Value::Null;
        for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
            if data == "[DONE]" {
                continue;
            }
            let v: Value = serde_json::from_str(data).unwrap();
            if let Some(c) = v
                .pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
            {
                reply.push_str(c);
            }
            if v.get("usage").is_some_and(Value::is_object) {
                usage = v["usage"].clone();
            }
        }
        (reply, usage)
    } else {
        let v: Value = serde_json::from_str(&text).unwrap();
        let reply = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str);
        (reply.unwrap().to_string(), v["usage"].clone())
    };
    let turn = Turn {
        id: id.to_string(),
        prompt_tokens: prompt_tokens(messages),
        output_tokens: usage["completion_tokens"].as_u64().unwrap(),
        cached_tokens: usage
            .pointer("/prompt_tokens_details/cached_tokens")
            .and_then(Value::as_u64)
            .expect("the usage says its cached tokens"),
        reply,
    };
    // The server counted the prompt as this test does, and the reply re-reads as its tokens.
    assert_eq!(usage["prompt_tokens"].as_u64(), Some(turn.prompt_tokens));
    assert_eq!(
        tokens(&turn.reply),
        turn.output_tokens,
        "{id}: {}",
        turn.reply
    );
    assert_eq!(turn.output_tokens, OUTPUT);
    turn
}

/// The simulator's record, once it holds every request of `ids` (a stream's is kept when the
/// server lets go of it, which may come just after the client read its end).
async fn truth(h: &SimHandle, ids: &[&str]) -> SimTruth {
    for _ in 0..6000 {
        let t: SimTruth = reqwest::get(format!("{}/sim/requests", h.url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if ids.iter().all(|id| t.request(id).is_some()) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the simulator never recorded all of {ids:?}");
}

/// One conversation's history as it grows: each turn resends it whole, with the real replies.
struct Conversation {
    name: &'static str,
    stream: bool,
    messages: Vec<(&'static str, String)>,
    turns: Vec<Turn>,
}

impl Conversation {
    fn new(name: &'static str, stream: bool) -> Self {
        Self {
            name,
            stream,
            messages: vec![("system", SYSTEM.to_string())],
            turns: Vec::new(),
        }
    }

    async fn turn(&mut self, h: &SimHandle, user: &str) {
        if let Some(last) = self.turns.last() {
            self.messages.push(("assistant", last.reply.clone()));
        }
        self.messages.push(("user", user.to_string()));
        let id = format!("{}-{}", self.name, self.turns.len() + 1);
        let turn = send(h, &id, &self.messages, self.stream).await;
        self.turns.push(turn);
    }
}

/// What each request of one simulator's script should find finished, with its record.
struct Checked {
    finished: u64,
    trace: SimRequestTrace,
    turn: Turn,
}

const A: [&str; 3] = [
    "Find where the parser reads the headers.",
    "Tool result: src/parse.rs line 40 reads them. Now list its tests.",
    "Which of them fails on an empty header?",
];

const B: [&str; 3] = [
    "Explain how the cache decides what to drop.",
    "Tool result: it drops the least recently used block. Show its capacity.",
    "What happens past it?",
];

/// Two conversations under one system prompt, turn after turn in turn (one streamed, one not:
/// each turn's match is a sequence finished before the one just before it), then the second's
/// last turn again with its second reply edited; each request checked against its expected
/// finished prefix and the usage it reported.
async fn script(h: &SimHandle, cache: &str) -> Vec<Checked> {
    let mut a = Conversation::new("a", true);
    let mut b = Conversation::new("b", false);
    for (ua, ub) in A.iter().zip(B) {
        a.turn(h, ua).await;
        b.turn(h, ub).await;
    }
    // System, user, reply 1, user, reply 2, user.
    let mut edited = b.messages.clone();
    edited[4].1 = "I edited this answer.".into();
    let branch = send(h, "b-edited", &edited, false).await;
    let system = 3 + 4 + tokens(SYSTEM) + 4;
    let mut expected = Vec::new();
    for (first, turns) in [(0, a.turns), (system, b.turns)] {
        let mut finished = first;
        for t in turns {
            let next = t.prompt_tokens + 4 + t.output_tokens;
            expected.push((finished, t));
            finished = next;
        }
    }
    // The edited turn: the second turn's prompt (its prefill completed) and the assistant
    // message's opening (its finished reply began so), no further.
    expected.push((expected[4].1.prompt_tokens + 4, branch));
    let ids: Vec<String> = expected.iter().map(|(_, t)| t.id.clone()).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let truth = truth(h, &ids).await;
    expected
        .into_iter()
        .map(|(finished, turn)| {
            let trace = truth.request(&turn.id).unwrap().clone();
            assert_eq!(
                trace.finished_prefix_tokens,
                Some(finished),
                "{cache} cache, {}: finished prefix",
                turn.id
            );
            assert_eq!(
                trace.cached_tokens,
                Some(turn.cached_tokens),
                "{cache} cache, {}: the record's cached tokens against the usage's",
                turn.id
            );
            Checked {
                finished,
                trace,
                turn,
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_says_what_was_finished_and_what_the_cache_still_served() {
    assert!(
        tokens(SYSTEM) > 5 * 16,
        "the system prompt outgrows the small cache"
    );
    let large = start(config(10_000_000)).await;
    let kept = script(&large, "large").await;
    for c in &kept {
        // Nothing evicted: every whole block of the finished prefix was served (at most all
        // but the last prompt token, which is always computed).
        let blocks = c.finished / 16 * 16;
        assert!(
            c.turn.cached_tokens >= blocks.min(c.turn.prompt_tokens - 1),
            "{}: {} cached of {} finished",
            c.turn.id,
            c.turn.cached_tokens,
            c.finished
        );
    }
    // A 4-block cache: the same script finds the same finished prefixes, but less cached.
    let small = start(config(4 * 16)).await;
    let evicted = script(&small, "small").await;
    for (k, e) in kept.iter().zip(&evicted) {
        assert_eq!(
            e.trace.finished_prefix_tokens, k.trace.finished_prefix_tokens,
            "{}",
            e.turn.id
        );
        if k.finished > 0 {
            assert!(
                e.turn.cached_tokens < k.turn.cached_tokens,
                "{}: {} cached in the small cache, {} in the large",
                e.turn.id,
                e.turn.cached_tokens,
                k.turn.cached_tokens
            );
        }
    }
}

/// A prompt counts as finished when its prefill completes, not when it arrives: one that waited
/// behind another request and was cancelled left only what others finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_cancelled_before_its_prefill_was_never_finished() {
    let mut c = config(10_000_000);
    c.max_running = 1;
    c.decode_step_ms = 20.0;
    let h = start(c).await;
    let client = reqwest::Client::new();
    let open = |id: &str, user: &str, max_tokens: u64| {
        let messages = [("system", SYSTEM.to_string()), ("user", user.to_string())];
        client
            .post(format!("{}/v1/chat/completions", h.url()))
            .header("x-request-id", id)
            .json(&body(&h, &messages, true, max_tokens))
            .send()
    };
    // The busy request holds the only slot for far longer than the test runs.
    let mut busy = open("busy", "Summarise the whole repository.", 100_000)
        .await
        .unwrap();
    // Its first token (after the role chunk's empty content): its prefill completed.
    let mut read = Vec::new();
    while !read.windows(12).any(|w| w == b"\"content\":\" ") {
        read.extend_from_slice(
            &busy
                .chunk()
                .await
                .unwrap()
                .expect("the busy stream goes on"),
        );
    }
    let waiting = "Find where the parser reads the headers.";
    let cancelled = open("cancelled", waiting, OUTPUT).await.unwrap();
    drop(cancelled);
    truth(&h, &["cancelled"]).await;
    drop(busy);
    let t = truth(&h, &["busy"]).await;
    assert_eq!(t.request("cancelled").unwrap().admitted_unix_us, None);
    let messages = [
        ("system", SYSTEM.to_string()),
        ("user", waiting.to_string()),
    ];
    let again = send(&h, "again", &messages, false).await;
    let t = truth(&h, &["again"]).await;
    let r = t.request("again").unwrap();
    // The busy request's prompt shares the system message and the user message's opening;
    // the cancelled one's never counted.
    assert_eq!(r.finished_prefix_tokens, Some(3 + 4 + tokens(SYSTEM) + 4));
    assert_eq!(r.cached_tokens, Some(again.cached_tokens));
}
