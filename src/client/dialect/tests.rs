//! The dialect parser against payloads as each engine sends them.

use super::*;

proptest::proptest! {
    #[test]
    fn parsing_never_panics(data in ".{0,300}") {
        for d in [Dialect::Completions, Dialect::Chat, Dialect::SglangNative] {
            let _ = parse(d, &data);
        }
        let _ = http_error_message(&data);
        let _ = is_context_error(&data);
    }

    #[test]
    fn json_shaped_chunks_never_panic(text in ".{0,40}", n in proptest::option::of(0u64..10_000), fin in proptest::bool::ANY) {
        let v = serde_json::json!({"choices": [{"text": text, "delta": {"content": text}, "finish_reason": if fin { serde_json::json!("length") } else { serde_json::Value::Null }}], "usage": n.map(|n| serde_json::json!({"completion_tokens": n}))});
        let s = v.to_string();
        let c = parse(Dialect::Completions, &s).unwrap();
        proptest::prop_assert_eq!(c.text.as_ref(), text.as_str());
        proptest::prop_assert_eq!(c.finished, fin);
        proptest::prop_assert_eq!(c.cumulative_completion, n);
    }
}

#[test]
fn completions_token_chunk_borrows_text() {
    let d = parse(
        Dialect::Completions,
        r#"{"id":"x","object":"text_completion","choices":[{"index":0,"text":" hello","finish_reason":null}]}"#,
    )
    .unwrap();
    assert_eq!(d.text, " hello");
    assert!(matches!(d.text, Cow::Borrowed(_)));
    assert!(d.has_choice && !d.finished);
    assert_eq!(d.cumulative_completion, None);
}

#[test]
fn a_length_finish_is_told_apart_from_other_finishes() {
    let chunk = |reason: &str| {
        format!(
            r#"{{"choices":[{{"index":0,"text":"ns","finish_reason":{reason}}}],"usage":{{"prompt_tokens":4000,"total_tokens":4096,"completion_tokens":96}}}}"#
        )
    };
    let length = chunk(r#""length""#);
    let d = parse(Dialect::Completions, &length).unwrap();
    assert!(d.finished && d.length_stop);
    let stop = chunk(r#""stop""#);
    let d = parse(Dialect::Completions, &stop).unwrap();
    assert!(d.finished && !d.length_stop);
    let null = chunk("null");
    let d = parse(Dialect::Completions, &null).unwrap();
    assert!(!d.finished && !d.length_stop);
    let sglang = r#"{"text":"abc","meta_info":{"completion_tokens":3,"finish_reason":{"type":"length","length":3}}}"#;
    let d = parse(Dialect::SglangNative, sglang).unwrap();
    assert!(d.finished && d.length_stop);
}

#[test]
fn continuous_usage_gives_cumulative_count() {
    let d = parse(
        Dialect::Completions,
        r#"{"choices":[{"index":0,"text":" a b c d","finish_reason":null}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#,
    )
    .unwrap();
    assert_eq!(d.cumulative_completion, Some(5));
    assert_eq!(d.usage.unwrap().prompt_tokens, Some(10));
}

#[test]
fn cached_tokens_are_read_where_each_engine_puts_them() {
    // OpenAI / vLLM / llama-server: usage.prompt_tokens_details.cached_tokens.
    let d = parse(
        Dialect::Chat,
        r#"{"choices":[],"usage":{"prompt_tokens":900,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":768}}}"#,
    )
    .unwrap();
    assert_eq!(d.usage.unwrap().cached_tokens, Some(768));
    // A null details object, or none: unknown, not zero.
    for body in [
        r#"{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":null}}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":9}}"#,
    ] {
        assert_eq!(
            parse(Dialect::Chat, body)
                .unwrap()
                .usage
                .unwrap()
                .cached_tokens,
            None
        );
    }
    // SGLang native: meta_info.cached_tokens.
    let d = parse(
        Dialect::SglangNative,
        r#"{"text":"x","meta_info":{"prompt_tokens":7,"completion_tokens":1,"cached_tokens":4,"finish_reason":null}}"#,
    )
    .unwrap();
    assert_eq!(d.usage.unwrap().cached_tokens, Some(4));
}

#[test]
fn usage_only_final_chunk_has_no_choice_and_no_per_chunk_count() {
    let d = parse(
        Dialect::Completions,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":500,"total_tokens":510}}"#,
    )
    .unwrap();
    assert!(!d.has_choice);
    assert_eq!(d.cumulative_completion, None);
    assert_eq!(d.usage.unwrap().completion_tokens, Some(500));
}

#[test]
fn chat_role_chunk_is_empty_and_reasoning_counts_as_text() {
    let role = parse(
        Dialect::Chat,
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}"#,
    )
    .unwrap();
    assert_eq!(role.text, "");
    let r = parse(
        Dialect::Chat,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think"},"finish_reason":null}]}"#,
    )
    .unwrap();
    assert_eq!(r.text, "Let me think");
    let both = parse(
        Dialect::Chat,
        r#"{"choices":[{"delta":{"reasoning":"a","content":"b"}}]}"#,
    )
    .unwrap();
    assert_eq!(both.text, "ab");
    assert_eq!(
        both.kind,
        DeltaKind::Content,
        "an event with answer text is content"
    );
    assert_eq!(both.content, "b");
    assert_eq!(r.kind, DeltaKind::Reasoning);
    assert_eq!(r.content, "");
    // vLLM 0.32 streams a thinking token whose text its detokenizer still holds as an empty
    // reasoning field: thinking, not a silent event.
    let held = parse(
        Dialect::Chat,
        r#"{"choices":[{"index":0,"delta":{"reasoning":""},"logprobs":null,"finish_reason":null,"token_ids":null}],"usage":{"prompt_tokens":64,"total_tokens":65,"completion_tokens":1,"completion_tokens_details":{"reasoning_tokens":0}}}"#,
    )
    .unwrap();
    assert_eq!(held.kind, DeltaKind::Reasoning);
    assert_eq!(held.text, "");
    let held = parse(Dialect::Chat, r#"{"choices":[{"delta":{"content":""}}]}"#).unwrap();
    assert_eq!(held.kind, DeltaKind::Content);
    let held = parse(
        Dialect::Chat,
        r#"{"choices":[{"delta":{"content":"","reasoning_content":"x"}}]}"#,
    )
    .unwrap();
    assert_eq!(held.kind, DeltaKind::Reasoning);
    let silent = parse(Dialect::Chat, r#"{"choices":[{"delta":{}}]}"#).unwrap();
    assert_eq!(silent.kind, DeltaKind::Silent);
}

#[test]
fn tool_call_deltas_are_their_own_kind_and_name_their_calls() {
    let open = parse(
        Dialect::Chat,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
    )
    .unwrap();
    assert_eq!(open.kind, DeltaKind::ToolCall);
    assert_eq!(open.tool_indices, [0]);
    assert_eq!(open.text, "get_weather");
    assert_eq!(open.content, "");
    let args = parse(
        Dialect::Chat,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\": \"Oslo\"}"}}]}}]}"#,
    )
    .unwrap();
    assert_eq!(args.tool_indices, [1]);
    assert_eq!(args.text, r#"{"city": "Oslo"}"#);
    // vLLM's final usage with a reasoning parser on.
    let usage = parse(
        Dialect::Chat,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":300,"completion_tokens_details":{"reasoning_tokens":200}}}"#,
    )
    .unwrap();
    assert_eq!(usage.usage.unwrap().reasoning_tokens, Some(200));
}

#[test]
fn escaped_text_is_owned_and_decoded() {
    let d = parse(
        Dialect::Completions,
        r#"{"choices":[{"text":"a\nb\u00e9"}]}"#,
    )
    .unwrap();
    assert_eq!(d.text, "a\nbé");
}

#[test]
fn finish_chunk_with_empty_text() {
    let d = parse(
        Dialect::Completions,
        r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"timings":{"prompt_n":5}}"#,
    )
    .unwrap();
    assert!(d.finished);
    assert_eq!(d.text, "");
}

#[test]
fn tgi_empty_finish_reason_is_not_a_finish() {
    let d = parse(
        Dialect::Completions,
        r#"{"object":"text_completion","id":"","choices":[{"finish_reason":"","index":0,"logprobs":null,"text":" upon"}]}"#,
    )
    .unwrap();
    assert!(!d.finished);
    assert_eq!(d.text, " upon");
}

#[test]
fn sglang_native_meta_info() {
    let d = parse(
        Dialect::SglangNative,
        r#"{"text":"Hello world","meta_info":{"id":"a","prompt_tokens":7,"completion_tokens":3,"finish_reason":null}}"#,
    )
    .unwrap();
    assert_eq!(d.cumulative_completion, Some(3));
    assert!(!d.finished);
    let end = parse(
        Dialect::SglangNative,
        r#"{"text":"Hello world!","meta_info":{"prompt_tokens":7,"completion_tokens":4,"finish_reason":{"type":"length","length":4}}}"#,
    )
    .unwrap();
    assert!(end.finished);
}

#[test]
fn errors_in_stream() {
    let a = parse(
        Dialect::Completions,
        r#"{"error":{"message":"boom","type":"server_error","code":500}}"#,
    )
    .unwrap();
    assert_eq!(a.error.as_deref(), Some("boom"));
    let b = parse(
        Dialect::Completions,
        r#"{"object":"error","message":"bad","type":"BadRequestError","code":400}"#,
    )
    .unwrap();
    assert_eq!(b.error.as_deref(), Some("bad"));
    assert!(parse(Dialect::Completions, "{not json").is_err());
}

#[test]
fn http_error_bodies() {
    assert_eq!(
        http_error_message(r#"{"error":{"message":"m1","type":"t"}}"#),
        "m1"
    );
    assert_eq!(
        http_error_message(r#"{"object":"error","message":"m2"}"#),
        "m2"
    );
    assert_eq!(http_error_message(r#"{"detail":"m3"}"#), "m3");
    assert_eq!(
        http_error_message(r#"{"error":"m4","error_type":"validation"}"#),
        "m4"
    );
    assert_eq!(http_error_message("plain text"), "plain text");
}

#[test]
fn context_errors_of_each_engine() {
    for m in [
        "This model's maximum context length is 32768 tokens. However, you requested 60256 tokens (60000 in the messages, 256 in the completion).",
        "The input (60001 tokens) is longer than the model's context length (32768 tokens).",
        "the request exceeds the available context size, try increasing it",
        // vLLM 0.32's wording, read from its 400 body (`http_error_message` of the JSON).
        "This model's maximum context length is 4096 tokens. However, your prompt contains at least 4097 input tokens, which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=4097)",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 60000 `inputs` tokens and 256 `max_new_tokens`",
    ] {
        assert!(is_context_error(m), "{m}");
    }
    assert!(!is_context_error("Internal Server Error"));
    assert!(!is_context_error("rate limited, retry later"));
}
