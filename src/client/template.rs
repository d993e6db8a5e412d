//! A request's body written from a template: the bytes [`Client::body`] makes around a prompt and
//! a `max_tokens`, made once, with each request's two values written into them.
//!
//! Building each body as a JSON value (a map with its keys, the prompt copied in) and writing it
//! out was 4-5 % of the client's CPU at C=100 against the firehose (256 tokens a request:
//! `Client::body`, the value's inserts, its serialization). The template is that same body
//! made once with a marker prompt and a marker count, cut where they lie, so a request's bytes
//! are what the value would have been written as: serde writes a string or a number the same
//! wherever it lies in a document, and the keys' order does not depend on their values. A body
//! in which either marker is not found exactly once has no template and is built as before.

use std::sync::{Arc, OnceLock};

use super::{Client, RequestSpec};

/// The prompt a template is made with: written as `"\u0001servetop:prompt\u0001"`, which no
/// other value of a body contains by chance.
const PROMPT_MARK: &str = "\u{1}servetop:prompt\u{1}";

/// The `max_tokens` a template is made with (found as its digits).
const COUNT_MARK: u32 = 3_999_999_937;

/// Other values, to check a template with before it is kept.
const CHECK_PROMPT: &str = "a \"check\" é\n";
const CHECK_COUNT: u32 = 17;

/// A body cut at its prompt and its count.
#[derive(Debug)]
pub(super) struct Template {
    /// The bytes before the first of the two, between them, and after the second.
    parts: [Vec<u8>; 3],
    /// The prompt comes before the count.
    prompt_first: bool,
}

/// The templates of one client, one for each value of `cache_prompt` (the only other field of
/// a plain request that its body carries); `None` inside: that body has no template.
pub(super) type Templates = Arc<[OnceLock<Option<Template>>; 2]>;

/// No templates made yet.
pub(super) fn none_yet() -> Templates {
    Arc::new([OnceLock::new(), OnceLock::new()])
}

/// The single place `needle` occurs in `hay`.
fn once(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let mut found = memchr::memmem::find_iter(hay, needle);
    let at = found.next()?;
    found.next().is_none().then_some(at)
}

impl Template {
    /// The template of `like`'s body (a plain prompt: what it carries beside its prompt and
    /// count is its `cache_prompt`).
    fn make(client: &Client, like: &RequestSpec) -> Option<Self> {
        let spec = RequestSpec {
            prompt: Arc::from(PROMPT_MARK),
            max_tokens: COUNT_MARK,
            ..like.clone()
        };
        let body = serde_json::to_vec(&client.body(&spec)).ok()?;
        let prompt = serde_json::to_vec(PROMPT_MARK).ok()?;
        let count = COUNT_MARK.to_string().into_bytes();
        let p = once(&body, &prompt)?;
        let c = once(&body, &count)?;
        let ((a, a_len), (b, b_len)) = if p < c {
            ((p, prompt.len()), (c, count.len()))
        } else {
            ((c, count.len()), (p, prompt.len()))
        };
        if a + a_len > b {
            return None;
        }
        let t = Self {
            parts: [
                body[..a].to_vec(),
                body[a + a_len..b].to_vec(),
                body[b + b_len..].to_vec(),
            ],
            prompt_first: p < c,
        };
        // A marker found once may still not be the field (the count's digits in another field
        // that `--extra-body` left beside its own `max_tokens`): the template must write other
        // values where the value puts them.
        let check = RequestSpec {
            prompt: Arc::from(CHECK_PROMPT),
            max_tokens: CHECK_COUNT,
            ..like.clone()
        };
        let want = serde_json::to_vec(&client.body(&check)).ok()?;
        (t.write(&check).ok()? == want).then_some(t)
    }

    fn write(&self, spec: &RequestSpec) -> serde_json::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(
            self.parts.iter().map(Vec::len).sum::<usize>() + spec.prompt.len() + 16,
        );
        let count = spec.max_tokens.to_string();
        let put_prompt = |out: &mut Vec<u8>| serde_json::to_writer(out, &*spec.prompt);
        out.extend_from_slice(&self.parts[0]);
        if self.prompt_first {
            put_prompt(&mut out)?;
        } else {
            out.extend_from_slice(count.as_bytes());
        }
        out.extend_from_slice(&self.parts[1]);
        if self.prompt_first {
            out.extend_from_slice(count.as_bytes());
        } else {
            put_prompt(&mut out)?;
        }
        out.extend_from_slice(&self.parts[2]);
        Ok(out)
    }
}

impl Client {
    /// The bytes of `spec`'s body: [`Client::body`] written out, from the client's template
    /// where `spec` is a plain prompt (no history, images, thinking budget, adapter or
    /// constraint, which the template does not carry).
    pub(super) fn body_bytes(&self, spec: &RequestSpec) -> serde_json::Result<Vec<u8>> {
        let plain = spec.messages.is_none()
            && spec.images.is_empty()
            && spec.thinking_budget.is_none()
            && spec.adapter.is_none()
            && spec.structured.is_none();
        if plain
            && let Some(t) = self.templates[usize::from(spec.cache_prompt)]
                .get_or_init(|| Template::make(self, spec))
        {
            return t.write(spec);
        }
        serde_json::to_vec(&self.body(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Backend, ClientOptions, Engine, ServerInfo};
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use std::time::Duration;

    fn client(engine: Engine, backend: Backend, model: &str, extra: &str, natural: bool) -> Client {
        let server = ServerInfo {
            base_url: "http://127.0.0.1:9".into(),
            engine,
            engine_version: None,
            model: model.into(),
            models: vec![model.into()],
            context_limit: None,
            context_limit_source: None,
            simulated: engine == Engine::Sim,
            reasoning_parser: None,
        };
        let map = |s: &str| {
            Arc::new(
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(s)
                    .expect("a JSON object"),
            )
        };
        let opts = ClientOptions {
            first_token_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            tokenizer: None,
            temperature: 0.0,
            chat_extras: map(r#"{"tools":[{"type":"function"}]}"#),
            extra_body: map(extra),
            natural_stop: natural,
            headers: Arc::from(Vec::new()),
            request_id_prefix: "servetop".into(),
        };
        Client::new(reqwest::Client::new(), &server, backend, None, opts)
    }

    /// A body written from the template is, byte for byte, the one the value gives, for any
    /// prompt (escapes, control characters, non-ASCII, a marker's look-alike) and count, every
    /// backend and engine, and fields that collide with the markers; and the template is used.
    #[test]
    fn a_templated_body_is_the_value_written_out() {
        let engines = [Engine::Sim, Engine::Vllm, Engine::Sglang, Engine::Llamacpp];
        let backends = [
            Backend::Openai,
            Backend::OpenaiChat,
            Backend::Sglang,
            Backend::Anthropic,
        ];
        let extras: [&str; 5] = [
            "{}",
            r#"{"seed":7,"top_p":0.9}"#,
            // The count's marker in another field: no template, the value's body.
            r#"{"note":3999999937}"#,
            r#"{"max_tokens":12}"#,
            // ...and once, beside an overridden count: the marker is found once, but not
            // where a request's count goes.
            r#"{"max_tokens":100,"seed":3999999937}"#,
        ];
        let case = (
            (0..engines.len(), 0..backends.len(), 0..extras.len()),
            (any::<bool>(), any::<bool>()),
            prop_oneof![
                4 => "[a-z é\\\\\"\n\t\u{1}\u{7f}]{0,40}",
                1 => Just(PROMPT_MARK.to_string()),
            ],
            prop_oneof![Just(0u32), 1u32..100_000, Just(u32::MAX), Just(COUNT_MARK)],
        );
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut templated = 0;
        for _ in 0..300 {
            let ((e, b, x), (cache, natural), prompt, max) =
                case.new_tree(&mut runner).unwrap().current();
            let c = client(engines[e], backends[b], "org/model", extras[x], natural);
            let mut spec = RequestSpec::prompt(Arc::from(prompt.as_str()), 10, None, max);
            spec.cache_prompt = cache;
            for _ in 0..2 {
                let want = serde_json::to_vec(&c.body(&spec)).unwrap();
                assert_eq!(
                    String::from_utf8_lossy(&c.body_bytes(&spec).unwrap()),
                    String::from_utf8_lossy(&want),
                    "{:?} {:?} {} {spec:?}",
                    engines[e],
                    backends[b],
                    extras[x]
                );
            }
            templated += usize::from(
                c.templates[usize::from(cache)]
                    .get()
                    .is_some_and(Option::is_some),
            );
        }
        assert!(templated > 100, "templated {templated} of 300");
    }
}
