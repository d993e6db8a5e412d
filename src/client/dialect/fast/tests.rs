//! The fast path held to the general parse: the engines' usual events, random events and
//! pairs of events a stream's kept shape reads.

use super::super::{DeltaKind, Dialect, parse};
use super::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;

/// The general parse, without the fast path.
fn general(data: &str) -> Result<ChunkData<'_>, String> {
    super::super::parse_general(Dialect::Completions, data)
}

#[test]
fn the_engines_usual_events_take_the_fast_path() {
    let events = [
        // The firehose, vLLM (with a stop_reason and usage null), vLLM's last chunks.
        r#"{"id":"cmpl-1","object":"text_completion","created":0,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"cmpl-9","object":"text_completion","created":1733,"model":"x/y","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
        r#"{"id":"cmpl-9","object":"text_completion","created":1733,"model":"x/y","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":32,"total_tokens":288,"completion_tokens":256}}"#,
        r#"{"id":"cmpl-9","object":"text_completion","created":1733,"model":"x/y","choices":[],"usage":{"prompt_tokens":32,"total_tokens":288,"completion_tokens":256}}"#,
    ];
    for e in events {
        let fast = completions(e, false, &mut RepeatedBytes::default())
            .unwrap_or_else(|| panic!("not taken: {e}"));
        assert_eq!(Ok(fast), general(e), "{e}");
    }
    let last = completions(events[2], false, &mut RepeatedBytes::default()).unwrap();
    assert!(last.finished && last.length_stop && last.has_choice);
    assert_eq!(last.cumulative_completion, Some(256));
    // What it leaves to the general parse.
    for e in [
        r#"{"choices":[{"text":"a\"b"}]}"#,
        r#"{"choices":[{"delta":{"content":"a"}}]}"#,
        r#"{"error":{"message":"boom"}}"#,
        r#"{"object":"error","message":"too long"}"#,
        r#"{"choices":[{"text":"a"},{"text":"b"}]}"#,
        r#"{"choices":[{"text":"a"}],"usage":{"prompt_tokens_details":{"cached_tokens":3}}}"#,
        r#"{"choices":[{"text":"a"}],"choices":[]}"#,
        r#"{"choices":[{"text":"a"}]} x"#,
    ] {
        assert_eq!(
            completions(e, false, &mut RepeatedBytes::default()),
            None,
            "{e}"
        );
    }
    assert_eq!(
        parse(Dialect::Completions, r#"{"error":{"message":"boom"}}"#)
            .unwrap()
            .error
            .as_deref(),
        Some("boom")
    );
}

/// A JSON value of the kinds extra fields carry, sometimes malformed.
fn junk() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("nul".to_string()),
        (0u64..100_000).prop_map(|n| n.to_string()),
        Just("-1.5e3".to_string()),
        Just("01".to_string()),
        Just("1.".to_string()),
        Just("18446744073709551616".to_string()),
        "[a-z \\\\\"]{0,6}".prop_map(|s| format!("\"{s}\"")),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3)
                .prop_map(|v| format!("[{}]", v.join(","))),
            proptest::collection::vec(("[a-z_]{1,6}", inner), 0..3).prop_map(|v| {
                let m: Vec<String> = v.iter().map(|(k, x)| format!("\"{k}\":{x}")).collect();
                format!("{{{}}}", m.join(","))
            }),
        ]
    })
}

fn member() -> impl Strategy<Value = String> {
    let text = "[a-z \\\\\"é]{0,5}".prop_map(|s| format!("\"{s}\""));
    let reason = prop_oneof![
        Just("null".to_string()),
        Just("\"length\"".to_string()),
        Just("\"stop\"".to_string()),
        Just("\"\"".to_string()),
        Just("{\"type\":\"length\"}".to_string()),
    ];
    let choice_member = prop_oneof![
        text.clone().prop_map(|t| format!("\"text\":{t}")),
        reason.prop_map(|r| format!("\"finish_reason\":{r}")),
        junk().prop_map(|j| format!("\"logprobs\":{j}")),
        Just("\"index\":0".to_string()),
        Just("\"delta\":{\"content\":\"x\"}".to_string()),
    ];
    let choice = proptest::collection::vec(choice_member, 0..5)
        .prop_map(|m| format!("{{{}}}", m.join(" , ")));
    let count = prop_oneof![
        Just("null".to_string()),
        (0u64..5000).prop_map(|n| n.to_string()),
        Just("2.0".to_string()),
    ];
    let usage_member = prop_oneof![
        count.clone().prop_map(|n| format!("\"prompt_tokens\":{n}")),
        count
            .clone()
            .prop_map(|n| format!("\"completion_tokens\":{n}")),
        count.prop_map(|n| format!("\"total_tokens\":{n}")),
        Just("\"prompt_tokens_details\":null".to_string()),
    ];
    let usage = prop_oneof![
        Just("null".to_string()),
        proptest::collection::vec(usage_member, 0..4).prop_map(|m| format!("{{{}}}", m.join(","))),
    ];
    prop_oneof![
        3 => proptest::collection::vec(choice, 0..3)
            .prop_map(|c| format!("\"choices\":[{}]", c.join(","))),
        2 => usage.prop_map(|u| format!("\"usage\":{u}")),
        1 => text.prop_map(|t| format!("\"object\":{t}")),
        1 => Just("\"object\":\"error\"".to_string()),
        1 => junk().prop_map(|j| format!("\"error\":{j}")),
        2 => junk().prop_map(|j| format!("\"model\":{j}")),
        1 => Just("\"id\":\"cmpl-3\"".to_string()),
    ]
}

/// Wherever the fast path answers, it answers what the general parse does; and on random
/// events it does answer often (it is not a path that always steps aside).
#[test]
fn the_fast_path_agrees_with_the_general_parse() {
    let event = (
        proptest::collection::vec(member(), 0..6),
        prop_oneof![Just(""), Just(" "), Just("\n")],
        prop_oneof![Just(""), Just(" "), Just("x")],
    )
        .prop_map(|(members, pad, tail)| {
            format!("{pad}{{{}}}{tail}", members.join(&format!(",{pad}")))
        });
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut taken, mut valid) = (0, 0);
    for _ in 0..4000 {
        let data = event.new_tree(&mut runner).unwrap().current();
        let want = general(&data);
        valid += usize::from(want.is_ok());
        if let Some(fast) = completions(&data, false, &mut RepeatedBytes::default()) {
            taken += 1;
            assert_eq!(Ok(fast), want, "{data}");
        }
    }
    assert!(
        taken * 4 > valid,
        "fast path taken {taken} times of {valid} valid events"
    );
}

/// An event read after another that opened with the same members (skipped, [`RepeatedBytes`])
/// gives what the general parse gives, whatever came before and after `"choices"`; and the
/// skip is taken often.
#[test]
fn an_event_that_repeats_the_last_ones_opening_parses_the_same() {
    // Mostly what engines open with, sometimes any member (a duplicate, usage, an error).
    let opening = prop_oneof![
        2 => Just("\"id\":\"cmpl-3\"".to_string()),
        2 => junk().prop_map(|j| format!("\"model\":{j}")),
        1 => Just("\"object\":\"text_completion\"".to_string()),
        1 => Just(" \"created\" : 17".to_string()),
        1 => member(),
    ];
    let members = || proptest::collection::vec(member(), 0..3);
    let pair = (
        proptest::collection::vec(opening, 0..5),
        members(),
        members(),
        member(),
        member(),
    )
        .prop_map(|(head, a, b, first, other)| {
            // Two events of a stream: the same members before their choices, then each
            // its own; or (when the member drawn is not choices) two that differ.
            let join = |m: &[String]| m.join(",");
            let choices = if first.starts_with("\"choices\"") {
                first
            } else {
                "\"choices\":[{\"text\":\"x\"}]".to_string()
            };
            let e1 = format!(
                "{{{}}}",
                join(&[head.clone(), vec![choices.clone()], a].concat())
            );
            let e2 = format!("{{{}}}", join(&[head, vec![choices, other], b].concat()));
            (e1, e2)
        });
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut resumed = 0;
    for _ in 0..4000 {
        let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
        let mut repeat = RepeatedBytes::default();
        let _ = completions(&e1, false, &mut repeat);
        let kept = !repeat.prefix.is_empty() && e2.as_bytes().starts_with(&repeat.prefix);
        if let Some(fast) = completions(&e2, false, &mut repeat) {
            resumed += usize::from(kept);
            assert_eq!(Ok(fast), general(&e2), "{e1} then {e2}");
        }
    }
    assert!(resumed > 300, "resumed {resumed} times of 4000");
}

/// An event that differs from one read before only in its text (any text: quotes,
/// escapes, non-ASCII) and its usage gives what the general parse gives, whatever surrounds
/// them; and the kept shape is used often.
#[test]
fn an_event_that_differs_only_in_its_text_and_usage_parses_the_same() {
    // Mostly plain texts and the members engines send, sometimes any.
    let text = || prop_oneof![3 => "[a-z é]{0,5}", 1 => "[a-z \\\\\"é]{0,5}"];
    let members = || {
        proptest::collection::vec(
            prop_oneof![
                2 => Just("\"id\":\"cmpl-3\"".to_string()),
                2 => Just("\"object\":\"text_completion\"".to_string()),
                1 => Just("\"usage\":null".to_string()),
                1 => member(),
            ],
            0..3,
        )
    };
    // A usage as vLLM counts every event, sometimes odd (null, a float, details).
    let usage = || {
        prop_oneof![
            4 => (0u64..5000, 0u64..5000).prop_map(|(p, c)| format!(
                "{{\"prompt_tokens\":{p},\"completion_tokens\":{c},\"total_tokens\":{}}}",
                p + c
            )),
            // Keys that differ from the last event's in their last byte only.
            2 => (
                0u64..5000,
                proptest::sample::select(vec!["completion_tokens", "completion_tokenX"]),
                proptest::sample::select(vec!["total_tokens", "total_tokenX"]),
            ).prop_map(|(c, ck, tk)| format!(
                "{{\"prompt_tokens\":3,\"{ck}\":{c},\"{tk}\":{}}}",
                c + 3
            )),
            1 => Just("null".to_string()),
            1 => Just("{\"completion_tokens\":2.0}".to_string()),
            1 => Just("{\"prompt_tokens_details\":null}".to_string()),
            // Counts the shape must not take as counts: a leading zero, past u64, nested,
            // in a string, negative, null.
            2 => (0u64..30, prop_oneof![
                Just("0{}"), Just("18446744073709551616{}"), Just("-{}"), Just("{}0"),
            ]).prop_map(|(n, f)| format!(
                "{{\"prompt_tokens\":3,\"completion_tokens\":{}}}",
                f.replace("{}", &n.to_string())
            )),
            1 => (0u64..30).prop_map(|n| format!(
                "{{\"x\":{{\"completion_tokens\":{n}}},\"note\":\"a:{n},\",\"prompt_tokens\":null}}"
            )),
        ]
    };
    let choice_members = || {
        proptest::collection::vec(
            prop_oneof![
                2 => Just("\"index\":0".to_string()),
                2 => Just("\"logprobs\":null".to_string()),
                2 => Just("\"finish_reason\":null".to_string()),
                1 => Just("\"finish_reason\":\"length\"".to_string()),
                1 => member(),
            ],
            0..3,
        )
    };
    let pair = (
        (members(), choice_members(), choice_members(), members()),
        (text(), text()),
        (usage(), usage(), any::<bool>()),
    )
        .prop_map(
            |((head, before, after, tail), (t1, t2), (u1, u2, counted))| {
                // Each event its own text and, where the engine counts every event, usage.
                let event = |t: &str, u: &str| {
                    let choice = [
                        before.clone(),
                        vec![format!("\"text\":\"{t}\"")],
                        after.clone(),
                    ]
                    .concat()
                    .join(",");
                    let usage = if counted {
                        vec![format!("\"usage\" : {u}")]
                    } else {
                        vec![]
                    };
                    let all = [
                        head.clone(),
                        vec![format!("\"choices\":[{{{choice}}}]")],
                        usage,
                        tail.clone(),
                    ];
                    format!("{{{}}}", all.concat().join(","))
                };
                (event(&t1, &u1), event(&t2, &u2))
            },
        );
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut shaped = 0;
    for _ in 0..4000 {
        let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
        let mut repeat = RepeatedBytes::default();
        let _ = completions(&e1, false, &mut repeat);
        let kept = repeat.same_shape(e2.as_bytes()).is_some();
        if let Some(fast) = completions(&e2, false, &mut repeat) {
            shaped += usize::from(kept);
            assert_eq!(Ok(fast), general(&e2), "{e1} then {e2}");
        } else {
            assert!(!kept, "{e1} then {e2}");
        }
    }
    assert!(shaped > 500, "the shape was used {shaped} times of 4000");
}

/// The client reads an event from its bytes as they came ([`super::super::parse_raw_in_stream`]):
/// wherever the last event's shape is taken, what it gives is what checking the whole event
/// as UTF-8, trimming it and parsing it gives, with white space (ASCII or not) around it and
/// bytes that are not UTF-8 in its text; and the shape is taken often.
#[test]
fn an_event_read_from_its_bytes_parses_as_its_checked_text() {
    for (dialect, head, close) in [
        (
            Dialect::Completions,
            r#"{"id":"cmpl-1","object":"text_completion","created":0,"model":"m","choices":[{"index":0,"text":""#,
            r#"","finish_reason":null}]"#,
        ),
        (
            Dialect::Chat,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":""#,
            r#""},"finish_reason":null}]"#,
        ),
    ] {
        let shaped = events_read_from_their_bytes(dialect, head, close);
        assert!(
            shaped > 300,
            "{dialect:?}: the shape was taken {shaped} times of 4000"
        );
    }
}

/// 4,000 pairs of `dialect` events (`head`, a text, `close`, a usage) read from their
/// bytes and from their checked text; how many took the kept shape.
fn events_read_from_their_bytes(
    dialect: Dialect,
    head: &'static str,
    close: &'static str,
) -> usize {
    use super::super::{Raw, parse_in_stream, parse_raw_in_stream};
    // Both events of a pair count usage, or neither (an engine does one or the other).
    let event = move |counted: bool| {
        (
        prop_oneof![3 => "[a-z é]{0,5}", 1 => "[a-z \\\\\"é]{0,5}"],
        (0u64..100_000).prop_map(move |n| counted.then_some(n)),
        prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\n"), 1 => Just("\u{a0}"), 1 => Just("\u{2003}")],
        prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\r"), 1 => Just("\u{a0}")],
        prop_oneof![6 => Just(None), 1 => Just(Some(0xffu8)), 1 => Just(Some(0xc3u8))],
    )
        .prop_map(move |(text, usage, pad, tail, bad)| {
            let usage = usage.map_or(String::new(), |n| {
                format!(r#","usage":{{"prompt_tokens":7,"total_tokens":{},"completion_tokens":{n}}}"#, n + 7)
            });
            let mut b = pad.as_bytes().to_vec();
            b.extend_from_slice(head.as_bytes());
            b.extend_from_slice(text.as_bytes());
            if let Some(x) = bad {
                b.push(x);
            }
            b.extend_from_slice(format!("{close}{usage}}}{tail}").as_bytes());
            b
        })
    };
    let pair = any::<bool>().prop_flat_map(move |counted| (event(counted), event(counted)));
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut shaped = 0;
    let by_text = |e: &'_ [u8], r: &mut RepeatedBytes| -> Result<String, String> {
        match std::str::from_utf8(e) {
            Err(_) => Err("the stream is not valid UTF-8".to_string()),
            Ok(d) => parse_in_stream(dialect, d.trim(), r)
                .map(Raw::Chunk)
                .map(|c| format!("{c:?}")),
        }
    };
    for _ in 0..4000 {
        let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
        let (mut raw, mut checked) = (RepeatedBytes::default(), RepeatedBytes::default());
        let first = parse_raw_in_stream(dialect, &e1, &mut raw).map(|c| format!("{c:?}"));
        assert_eq!(first, by_text(&e1, &mut checked), "{e1:?}");
        shaped += usize::from(raw.same_shape(&e2).is_some());
        let want = by_text(&e2, &mut checked);
        assert_eq!(
            parse_raw_in_stream(dialect, &e2, &mut raw).map(|c| format!("{c:?}")),
            want,
            "{e1:?} then {e2:?}"
        );
    }
    shaped
}

/// The general parse of a chat event, without the fast path.
fn general_chat(data: &str) -> Result<ChunkData<'_>, String> {
    super::super::parse_general(Dialect::Chat, data)
}

#[test]
fn the_engines_usual_chat_events_take_the_fast_path() {
    let events = [
        // The firehose; vLLM's opening role delta, a token, a reasoning token (both field
        // names), its last with usage; SGLang's nulls; llama.cpp's order of members.
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"content":" a"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":32,"total_tokens":33,"completion_tokens":1}}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"reasoning_content":" hm"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"reasoning":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1733,"model":"x/y","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":32,"total_tokens":288,"completion_tokens":256}}"#,
        r#"{"id":"5","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":null,"content":" the","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" x"}}],"created":1,"id":"chatcmpl-a","model":"m","system_fingerprint":"b1","object":"chat.completion.chunk"}"#,
        r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ];
    for e in events {
        let fast = completions(e, true, &mut RepeatedBytes::default())
            .unwrap_or_else(|| panic!("not taken: {e}"));
        assert_eq!(Ok(fast), general_chat(e), "{e}");
    }
    let thought = completions(events[3], true, &mut RepeatedBytes::default()).unwrap();
    assert_eq!(
        (thought.kind, &*thought.text, &*thought.content),
        (DeltaKind::Reasoning, " hm", "")
    );
    let done = completions(events[8], true, &mut RepeatedBytes::default()).unwrap();
    assert_eq!((done.kind, done.finished), (DeltaKind::Silent, true));
    // What it leaves to the general parse: a tool call, two texts, an escape, a delta that
    // is not an object, a completions text, a duplicate field.
    for e in [
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"a","content":"b"}}]}"#,
        r#"{"choices":[{"delta":{"content":"a\nb"}}]}"#,
        r#"{"choices":[{"delta":null}]}"#,
        r#"{"choices":[{"text":"a"}]}"#,
        r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
    ] {
        assert_eq!(
            completions(e, true, &mut RepeatedBytes::default()),
            None,
            "{e}"
        );
    }
}

/// A chat delta's members as engines send them, sometimes odd: each text field null,
/// empty, plain or escaped; tool calls none, empty, one or junk; a role; other members.
fn delta_member() -> impl Strategy<Value = String> {
    let text = prop_oneof![
        1 => Just("null".to_string()),
        1 => Just("\"\"".to_string()),
        3 => "[a-z é]{1,5}".prop_map(|s| format!("\"{s}\"")),
        1 => "[a-z \\\\\"]{0,4}".prop_map(|s| format!("\"{s}\"")),
    ];
    prop_oneof![
        3 => text.clone().prop_map(|t| format!("\"content\":{t}")),
        2 => text.clone().prop_map(|t| format!("\"reasoning_content\":{t}")),
        2 => text.prop_map(|t| format!("\"reasoning\":{t}")),
        1 => prop_oneof![
            Just("null"),
            Just("[]"),
            Just("[{\"index\":0,\"function\":{\"arguments\":\"x\"}}]"),
            Just("{}"),
        ]
        .prop_map(|t| format!("\"tool_calls\":{t}")),
        1 => prop_oneof![Just("\"assistant\""), Just("null")]
            .prop_map(|r| format!("\"role\":{r}")),
        1 => junk().prop_map(|j| format!("\"refusal\":{j}")),
    ]
}

/// A chat event's top-level member: mostly one choice with a delta, sometimes anything.
fn chat_member() -> impl Strategy<Value = String> {
    let choice_member = prop_oneof![
        4 => proptest::collection::vec(delta_member(), 0..4)
            .prop_map(|m| format!("\"delta\":{{{}}}", m.join(","))),
        1 => Just("\"delta\":null".to_string()),
        1 => Just("\"text\":\"x\"".to_string()),
        2 => prop_oneof![Just("null"), Just("\"length\""), Just("\"stop\""), Just("\"\"")]
            .prop_map(|r| format!("\"finish_reason\":{r}")),
        1 => junk().prop_map(|j| format!("\"logprobs\":{j}")),
        1 => Just("\"index\":0".to_string()),
    ];
    let choice =
        proptest::collection::vec(choice_member, 0..4).prop_map(|m| format!("{{{}}}", m.join(",")));
    prop_oneof![
        4 => proptest::collection::vec(choice, 0..3)
            .prop_map(|c| format!("\"choices\":[{}]", c.join(","))),
        1 => member(),
        1 => Just("\"object\":\"chat.completion.chunk\"".to_string()),
        1 => Just("\"id\":\"chatcmpl-3\"".to_string()),
    ]
}

/// Wherever the fast path answers a chat event, it answers what the general parse does
/// (text, answer text, kind, tool-call indices, finish, usage); and it answers often.
#[test]
fn the_chat_fast_path_agrees_with_the_general_parse() {
    let event = proptest::collection::vec(chat_member(), 0..5)
        .prop_map(|members| format!("{{{}}}", members.join(",")));
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut taken, mut valid) = (0, 0);
    let mut kinds = std::collections::HashSet::new();
    for _ in 0..4000 {
        let data = event.new_tree(&mut runner).unwrap().current();
        let want = general_chat(&data);
        valid += usize::from(want.is_ok());
        if let Some(fast) = completions(&data, true, &mut RepeatedBytes::default()) {
            taken += 1;
            kinds.insert(format!("{:?}", fast.kind));
            assert_eq!(Ok(fast), want, "{data}");
        }
    }
    assert!(
        taken * 4 > valid,
        "fast path taken {taken} times of {valid} valid events"
    );
    assert_eq!(kinds.len(), 3, "kinds answered: {kinds:?}");
}

/// A chat event that differs from one read before only in one delta field's text (any:
/// empty, quotes, non-ASCII) and its usage gives what the general parse gives, whatever
/// else the delta holds; an emptied text changes the kind as the general parse says; and
/// the kept shape is used often.
#[test]
fn a_chat_event_that_differs_only_in_its_text_parses_the_same() {
    let text =
        || prop_oneof![1 => Just(String::new()), 3 => "[a-z é]{1,5}", 1 => "[a-z \\\\\"é]{0,5}"];
    let other = || {
        prop_oneof![
            2 => Just(None),
            1 => Just(Some("null".to_string())),
            2 => Just(Some("\"\"".to_string())),
            1 => Just(Some("\"x\"".to_string())),
        ]
    };
    let fields = ["content", "reasoning_content", "reasoning"];
    let pair = (
        (0..3usize, other(), other(), any::<bool>()),
        (text(), text()),
        (0u64..5000, 0u64..5000, any::<bool>()),
        proptest::collection::vec(delta_member(), 0..2),
    )
        .prop_map(
            move |((slot, o1, o2, role), (t1, t2), (c1, c2, counted), extra)| {
                let event = |t: &str, c: u64| {
                    let mut d = Vec::new();
                    if role {
                        d.push("\"role\":\"assistant\"".to_string());
                    }
                    d.push(format!("\"{}\":\"{t}\"", fields[slot]));
                    let others = fields.iter().filter(|f| **f != fields[slot]);
                    for (f, v) in others.zip([&o1, &o2]) {
                        if let Some(v) = v {
                            d.push(format!("\"{f}\":{v}"));
                        }
                    }
                    d.extend(extra.iter().cloned());
                    let usage = if counted {
                        format!(",\"usage\":{{\"prompt_tokens\":9,\"total_tokens\":{},\"completion_tokens\":{c}}}", c + 9)
                    } else {
                        String::new()
                    };
                    format!(
                        "{{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{{}}},\"logprobs\":null,\"finish_reason\":null}}]{usage}}}",
                        d.join(",")
                    )
                };
                (event(&t1, c1), event(&t2, c2))
            },
        );
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut shaped, mut kinds) = (0, std::collections::HashSet::new());
    for _ in 0..4000 {
        let (e1, e2) = pair.new_tree(&mut runner).unwrap().current();
        let mut repeat = RepeatedBytes::default();
        let _ = completions(&e1, true, &mut repeat);
        let kept = repeat.same_shape(e2.as_bytes());
        if let Some(fast) = completions(&e2, true, &mut repeat) {
            if let Some(k) = kept {
                shaped += 1;
                kinds.insert(format!("{:?}", k.kind));
                assert_eq!(k, fast, "{e1} then {e2}");
            }
            assert_eq!(Ok(fast), general_chat(&e2), "{e1} then {e2}");
        } else {
            assert!(kept.is_none(), "{e1} then {e2}");
        }
    }
    assert!(shaped > 500, "the shape was used {shaped} times of 4000");
    assert_eq!(kinds.len(), 2, "kinds read from a kept shape: {kinds:?}");
}
