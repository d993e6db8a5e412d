//! Prompts of an exact token length (docs/metrics.md "Prompts of exact length").
//!
//! Text is random common English words, different for every request (seeded per level and
//! request, so a run is reproducible) so that a prefix cache cannot turn a prefill test into a
//! cache-hit test. Its length is settled with the server's own tokenizer (`/tokenize`), else a
//! local `tokenizer.json`, else a linear calibration from probe requests' `usage.prompt_tokens`.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::content::{Body, ContentKind};
use crate::client::{Client, Engine};
use crate::metrics::CountSource;

/// The embedded vocabulary (common English words, one per line).
const WORDS: &str = include_str!("../../assets/words.txt");
/// Short words used to adjust the last few tokens.
const FILLERS: [&str; 6] = ["a", "the", "of", "and", "to", "in"];

/// How prompt lengths are counted.
#[derive(Clone)]
pub enum Counter {
    /// The server's `/tokenize` endpoint.
    Server {
        http: reqwest::Client,
        url: String,
        engine: Engine,
        model: String,
        api_key: Option<String>,
    },
    /// A local `tokenizer.json`.
    Local(Arc<tokenizers::Tokenizer>),
    /// No tokenizer: `prompt_tokens ≈ intercept + slope × words`, learned from probes.
    Probe { slope: f64, intercept: f64 },
}

/// How prompts were sized, written into results.json.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptMethod {
    /// `server_tokenize`, `tokenizer` or `probe_calibration`.
    pub source: CountSource,
    /// Tokens the server adds to what the counter counts (BOS, chat template), from the warmup.
    pub offset_tokens: i64,
    pub description: String,
}

/// A prompt and its counted length (counter's count plus the server offset).
#[derive(Clone, Debug)]
pub struct Prompt {
    pub text: Arc<str>,
    pub counted_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct TokenizeResponse {
    count: Option<u64>,
    tokens: Option<Vec<serde_json::Value>>,
}

impl Counter {
    /// Tries the server's `/tokenize` on a short text.
    pub async fn server(
        http: reqwest::Client,
        base_url: &str,
        engine: Engine,
        model: &str,
        api_key: Option<String>,
    ) -> Result<Self, String> {
        let c = Counter::Server {
            http,
            url: format!("{base_url}/tokenize"),
            engine,
            model: model.to_string(),
            api_key,
        };
        c.count("hello world").await?;
        Ok(c)
    }

    /// The source label of this counter.
    pub fn source(&self) -> CountSource {
        match self {
            Counter::Server { .. } => CountSource::ServerTokenize,
            Counter::Local(_) => CountSource::Tokenizer,
            Counter::Probe { .. } => CountSource::ChunkEstimate,
        }
    }

    /// Whether counts are exact (probe calibration is a linear estimate).
    pub fn is_exact(&self) -> bool {
        !matches!(self, Counter::Probe { .. })
    }

    /// Counts the tokens of `text` (without server-added tokens).
    pub async fn count(&self, text: &str) -> Result<u64, String> {
        match self {
            Counter::Server {
                http,
                url,
                engine,
                model,
                api_key,
            } => {
                let body = if *engine == Engine::Llamacpp {
                    json!({"content": text, "add_special": false})
                } else {
                    json!({"model": model, "prompt": text, "add_special_tokens": false})
                };
                let mut req = http.post(url.as_str()).json(&body);
                if let Some(k) = api_key {
                    req = req.bearer_auth(k);
                }
                let resp = req
                    .send()
                    .await
                    .map_err(|e| format!("/tokenize: {}", crate::client::error_chain(&e)))?;
                if !resp.status().is_success() {
                    return Err(format!(
                        "/tokenize answered HTTP {}",
                        resp.status().as_u16()
                    ));
                }
                let r: TokenizeResponse = resp
                    .json()
                    .await
                    .map_err(|e| format!("/tokenize: unexpected answer: {e}"))?;
                r.count
                    .or(r.tokens.map(|t| t.len() as u64))
                    .ok_or_else(|| "/tokenize answered without count or tokens".to_string())
            }
            Counter::Local(t) => t
                .encode(text, false)
                .map(|e| e.len() as u64)
                .map_err(|e| format!("tokenizer: {e}")),
            Counter::Probe { slope, intercept } => {
                let words = text.split_whitespace().count() as f64;
                Ok((intercept + slope * words).round().max(0.0) as u64)
            }
        }
    }

    /// Learns the probe calibration from two requests with one output token each.
    pub async fn calibrate_with_probes(client: &Client, seed: u64) -> Result<Self, String> {
        let short = random_words(&mut SmallRng::seed_from_u64(seed), 100).join(" ");
        let long = random_words(&mut SmallRng::seed_from_u64(seed ^ 0x5eed), 600).join(" ");
        let a = client.probe_prompt_tokens(&short).await?;
        let b = client.probe_prompt_tokens(&long).await?;
        let slope = (b as f64 - a as f64) / 500.0;
        if slope <= 0.0 {
            return Err(format!(
                "probe calibration failed: 100 words gave {a} tokens, 600 words gave {b}"
            ));
        }
        Ok(Counter::Probe {
            slope,
            intercept: a as f64 - slope * 100.0,
        })
    }
}

fn vocabulary() -> impl Iterator<Item = &'static str> {
    WORDS.lines().map(str::trim).filter(|w| !w.is_empty())
}

fn random_words(rng: &mut SmallRng, n: usize) -> Vec<&'static str> {
    let vocab: Vec<&'static str> = vocabulary().collect();
    (0..n)
        .map(|_| vocab[rng.random_range(0..vocab.len())])
        .collect()
}

/// Builds prompts of a target length.
#[derive(Clone)]
pub struct PromptFactory {
    counter: Counter,
    vocab: Vec<&'static str>,
    seed: u64,
    /// Tokens per word, learned as prompts are built.
    tokens_per_word: f64,
    /// Tokens the server adds to the counted text (learned from the warmup request).
    pub offset_tokens: i64,
    /// The shared prefix once built, and its length.
    prefix: Option<(u64, Prompt)>,
    /// Prompts from `--dataset` instead of random text.
    dataset: Option<Arc<super::dataset::Dataset>>,
    /// `--response-format`'s constraint, for the constrained levels' requests.
    constraint: Option<Arc<crate::client::structured::Constraint>>,
    /// The requests of `--trace`.
    trace: Option<Arc<super::trace::Trace>>,
    /// Texts of a trace's prefix blocks built so far, by hash id and tokens (bounded).
    blocks: HashMap<(u64, u64), Prompt>,
}

/// Block texts kept at most (about 3 KB each at 512 tokens); past it the cache starts again
/// (a block's text depends on its id only, so a block built again is the same text).
const BLOCKS_KEPT: usize = 8192;

impl PromptFactory {
    /// A factory over `counter`; `seed` makes the text reproducible.
    pub fn new(counter: Counter, seed: u64) -> Self {
        let tokens_per_word = match &counter {
            Counter::Probe { slope, .. } => *slope,
            _ => 1.3,
        };
        Self {
            counter,
            vocab: vocabulary().collect(),
            seed,
            tokens_per_word,
            offset_tokens: 0,
            prefix: None,
            dataset: None,
            constraint: None,
            trace: None,
            blocks: HashMap::new(),
        }
    }

    /// Replays `t`'s requests at a trace level.
    #[must_use]
    pub fn with_trace(mut self, t: Arc<super::trace::Trace>) -> Self {
        self.trace = Some(t);
        self
    }

    /// The trace in use, if any.
    pub fn trace(&self) -> Option<&Arc<super::trace::Trace>> {
        self.trace.as_ref()
    }

    /// Carries `--response-format`'s constraint, compiled once, for the constrained levels.
    #[must_use]
    pub fn with_constraint(mut self, c: Arc<crate::client::structured::Constraint>) -> Self {
        self.constraint = Some(c);
        self
    }

    /// The structured-output constraint, if the run has one.
    pub fn constraint(&self) -> Option<&Arc<crate::client::structured::Constraint>> {
        self.constraint.as_ref()
    }

    /// The text of a trace's prefix block `id`, `tokens` long by the counter (without the
    /// server's own additions): the same for every request naming it, a shorter one the start
    /// of the same words.
    pub async fn block(&mut self, id: u64, tokens: u64) -> Result<Prompt, String> {
        if let Some(p) = self.blocks.get(&(id, tokens)) {
            return Ok(p.clone());
        }
        let seed = self.seed ^ 0xB10C_5EED_0000_0000 ^ id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let offset = std::mem::take(&mut self.offset_tokens);
        let p = self.make_seeded(tokens, seed).await;
        self.offset_tokens = offset;
        let p = p?;
        if self.blocks.len() >= BLOCKS_KEPT {
            self.blocks.clear();
        }
        self.blocks.insert((id, tokens), p.clone());
        Ok(p)
    }

    /// Takes prompts from `d` where a dataset applies.
    #[must_use]
    pub fn with_dataset(mut self, d: Arc<super::dataset::Dataset>) -> Self {
        self.dataset = Some(d);
        self
    }

    /// The dataset in use, if any.
    pub fn dataset(&self) -> Option<&Arc<super::dataset::Dataset>> {
        self.dataset.as_ref()
    }

    /// The seed of the prompt text (and of the dataset's picks).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The counter in use.
    pub fn counter(&self) -> &Counter {
        &self.counter
    }

    /// How prompts are sized, for the result file.
    pub fn method(&self) -> PromptMethod {
        let description = match &self.counter {
            Counter::Server { .. } => "lengths counted with the server's /tokenize".to_string(),
            Counter::Local(_) => {
                "lengths counted with the local tokenizer (--tokenizer)".to_string()
            }
            Counter::Probe { slope, intercept } => format!(
                "no tokenizer: lengths estimated from probe requests (prompt_tokens ≈ {intercept:.1} + {slope:.3} × words); actual counts come from server usage"
            ),
        };
        let description = match &self.dataset {
            Some(d) => format!(
                "{description}; prompts from --dataset {} ({} entries{})",
                d.path,
                d.entries.len(),
                if d.skipped > 0 {
                    format!(", {} items without a prompt skipped", d.skipped)
                } else {
                    String::new()
                }
            ),
            None => description,
        };
        PromptMethod {
            source: self.counter.source(),
            offset_tokens: self.offset_tokens,
            description,
        }
    }

    /// Text of exactly `target` tokens by the counter, without the server's own additions: a
    /// chat message's content, or a piece of a longer prompt. Unique to `(level, index)`.
    pub async fn make_text(
        &mut self,
        target: u64,
        level: u32,
        index: u32,
    ) -> Result<Prompt, String> {
        let offset = std::mem::take(&mut self.offset_tokens);
        let p = self.make(target, level, index).await;
        self.offset_tokens = offset;
        p
    }

    /// The text of `tokens` tokens that every prompt of a shared-prefix workload starts with
    /// (the same for the whole run: it depends on the seed only).
    pub async fn shared_prefix(&mut self, tokens: u64) -> Result<Prompt, String> {
        if let Some((n, p)) = &self.prefix
            && *n == tokens
        {
            return Ok(p.clone());
        }
        let p = self.make_text(tokens, u32::MAX, u32::MAX).await?;
        self.prefix = Some((tokens, p.clone()));
        Ok(p)
    }

    /// [`PromptFactory::make_kind`], its first `prefix_tokens` being the run's shared prefix
    /// and the rest unique to `(level, index)`.
    pub async fn make_with_prefix(
        &mut self,
        (target, prefix_tokens): (u64, u64),
        kind: ContentKind,
        level: u32,
        index: u32,
    ) -> Result<Prompt, String> {
        if prefix_tokens == 0 {
            return self.make_kind(kind, target, level, index).await;
        }
        let prefix = self.shared_prefix(prefix_tokens).await?;
        let rest = self
            .make_kind(
                kind,
                target.saturating_sub(prefix_tokens).max(1),
                level,
                index,
            )
            .await?;
        Ok(Prompt {
            text: Arc::from(format!("{} {}", prefix.text, rest.text)),
            counted_tokens: prefix
                .counted_tokens
                .zip(rest.counted_tokens)
                .map(|(a, b)| a + b),
        })
    }

    /// A prompt of `target` tokens as the server will count them, unique to `(level, index)`.
    pub async fn make(&mut self, target: u64, level: u32, index: u32) -> Result<Prompt, String> {
        let seed = self.seed
            ^ (u64::from(level) << 32)
            ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.make_seeded(target, seed).await
    }

    /// A prompt of `target` tokens as the server will count them, of content `kind`
    /// ([`super::content`]; `random`: [`PromptFactory::make`]), unique to `(level, index)`.
    pub async fn make_kind(
        &mut self,
        kind: ContentKind,
        target: u64,
        level: u32,
        index: u32,
    ) -> Result<Prompt, String> {
        if kind == ContentKind::Random {
            return self.make(target, level, index).await;
        }
        let seed = self.seed
            ^ (u64::from(level) << 32)
            ^ u64::from(index).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.make_framed(kind, target, seed).await
    }

    /// A `kind` prompt: its head, as many of its body's pieces as fit `target`, short common
    /// words for the last few tokens, its foot. The pieces are found by bracketing (the most
    /// that stay within the target, the fewest beyond it), then the words by counting.
    async fn make_framed(
        &mut self,
        kind: ContentKind,
        target: u64,
        seed: u64,
    ) -> Result<Prompt, String> {
        let want = (target as i64 - self.offset_tokens).max(1) as u64;
        let mut body = Body::new(kind, seed, &self.vocab);
        let (head, foot) = (body.head().to_string(), body.foot().to_string());
        let fixed = self.counter.count(&format!("{head}{foot}")).await?;
        if fixed >= want {
            return Err(format!(
                "a {} prompt of {target} tokens cannot hold its instruction ({fixed} tokens): ask for longer prompts",
                kind.name()
            ));
        }
        let mut drawn: Vec<String> = Vec::new();
        let text = |drawn: &[String], n: usize, fill: usize| {
            let mut t = head.clone();
            for p in &drawn[..n] {
                t.push_str(p);
            }
            for i in 0..fill {
                t.push(' ');
                t.push_str(FILLERS[i % FILLERS.len()]);
            }
            t.push_str(&foot);
            t
        };
        let mut per_piece = 1.5f64;
        let mut n = ((want - fixed) as f64 / per_piece) as usize;
        // The most pieces within the target (and their count), the fewest beyond it.
        let mut lo: (usize, u64) = (0, fixed);
        let mut hi: Option<usize> = None;
        for _ in 0..40 {
            while drawn.len() < n {
                drawn.push(body.next_piece());
            }
            // A probe calibration's count is an estimate, but a local one: bracket on it too,
            // so a kind's prompt is as long as a random one by the same estimate.
            let got = self.counter.count(&text(&drawn, n, 0)).await?;
            if got == want {
                return Ok(self.framed(text(&drawn, n, 0), got));
            }
            if n > 0 && got > fixed {
                per_piece = ((got - fixed) as f64 / n as f64).max(0.25);
            }
            if got < want {
                if n >= lo.0 {
                    lo = (n, got);
                }
            } else {
                hi = Some(hi.map_or(n, |h| h.min(n)));
            }
            let step = |gap: u64| ((gap as f64 / per_piece).ceil() as usize).max(1);
            n = match hi {
                Some(h) if h <= lo.0 + 1 => break,
                Some(h) => (lo.0 + step(want - lo.1)).clamp(lo.0 + 1, h - 1),
                None => lo.0 + step(want - lo.1),
            };
        }
        // Within a piece of the target: short words make up the rest.
        // The best kept is the longest at or under the target: a prompt over it could pass the
        // server's context where the plan said it fits.
        let (n, got) = lo;
        let mut best = (got, text(&drawn, n, 0));
        let mut fill = usize::try_from(want - got).unwrap_or(0);
        let mut tried: Vec<usize> = Vec::new();
        for _ in 0..12 {
            if tried.contains(&fill) {
                break;
            }
            tried.push(fill);
            let t = text(&drawn, n, fill);
            let g = self.counter.count(&t).await?;
            if g <= want && g > best.0 {
                best = (g, t);
            }
            if g == want {
                break;
            }
            let gap = usize::try_from(g.abs_diff(want)).unwrap_or(usize::MAX);
            fill = if g < want {
                fill + gap
            } else if fill == 0 {
                break;
            } else {
                fill.saturating_sub(gap.min(fill)).min(fill - 1)
            };
        }
        Ok(self.framed(best.1, best.0))
    }

    fn framed(&self, text: String, got: u64) -> Prompt {
        Prompt {
            text: Arc::from(text),
            counted_tokens: Some((got as i64 + self.offset_tokens).max(0) as u64),
        }
    }

    /// [`PromptFactory::make`] with words drawn from `seed`.
    async fn make_seeded(&mut self, target: u64, seed: u64) -> Result<Prompt, String> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let want = (target as i64 - self.offset_tokens).max(1) as u64;
        let mut words: Vec<&'static str> = Vec::new();
        let mut n_words = ((want as f64 / self.tokens_per_word).floor() as usize).max(1);
        let mut best: Option<(u64, String)> = None;
        for _ in 0..24 {
            while words.len() < n_words {
                words.push(self.vocab[rng.random_range(0..self.vocab.len())]);
            }
            words.truncate(n_words);
            let text = words.join(" ");
            let got = self.counter.count(&text).await?;
            if got > 0 && words.len() > 20 {
                self.tokens_per_word = got as f64 / words.len() as f64;
            }
            let better = match &best {
                None => true,
                Some((b, _)) => got.abs_diff(want) < b.abs_diff(want),
            };
            if better {
                best = Some((got, text));
            }
            if got == want || !self.counter.is_exact() {
                break;
            }
            let diff = want as f64 - got as f64;
            if diff.abs() <= 3.0 {
                if diff > 0.0 {
                    words.push(FILLERS[rng.random_range(0..FILLERS.len())]);
                    n_words = words.len();
                } else {
                    n_words = words.len().saturating_sub(1).max(1);
                }
            } else {
                // Step by a cautious share of the gap so the loop approaches from either side.
                let step = (diff.abs() / self.tokens_per_word.max(1.0) * 0.9).max(1.0) as usize;
                n_words = if diff > 0.0 {
                    words.len() + step
                } else {
                    words.len().saturating_sub(step).max(1)
                };
            }
        }
        let (got, text) = best.ok_or("no prompt built")?;
        Ok(Prompt {
            text: Arc::from(text),
            counted_tokens: Some((got as i64 + self.offset_tokens).max(0) as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter with the simulator's tokenizer rules, through the `Probe`-free local path.
    fn sim_counter() -> Counter {
        // Reuse the simulator's tokenizer through a tiny tokenizers model is heavy; instead use
        // probe mode with an exact slope of 1 token/word, which makes `count` deterministic.
        Counter::Probe {
            slope: 1.0,
            intercept: 0.0,
        }
    }

    #[tokio::test]
    async fn probe_counter_hits_linear_estimate() {
        let mut f = PromptFactory::new(sim_counter(), 7);
        let p = f.make(500, 0, 1).await.unwrap();
        assert_eq!(p.text.split_whitespace().count(), 500);
        assert_eq!(p.counted_tokens, Some(500));
    }

    #[tokio::test]
    async fn prompts_differ_per_request_and_repeat_per_seed() {
        let mut f = PromptFactory::new(sim_counter(), 7);
        let a = f.make(200, 0, 1).await.unwrap();
        let b = f.make(200, 0, 2).await.unwrap();
        let a2 = f.make(200, 0, 1).await.unwrap();
        assert_ne!(a.text, b.text);
        assert_eq!(a.text, a2.text);
    }

    #[tokio::test]
    async fn a_shared_prefix_opens_every_prompt_and_the_rest_differs() {
        let mut f = PromptFactory::new(sim_counter(), 7);
        f.offset_tokens = 1;
        let a = f
            .make_with_prefix((300, 100), ContentKind::Random, 0, 1)
            .await
            .unwrap();
        let b = f
            .make_with_prefix((300, 100), ContentKind::Random, 2, 5)
            .await
            .unwrap();
        let wa: Vec<&str> = a.text.split_whitespace().collect();
        let wb: Vec<&str> = b.text.split_whitespace().collect();
        // 100 shared words, then 199 unique ones (the server adds one token).
        assert_eq!(wa[..100], wb[..100]);
        assert_ne!(wa[100..], wb[100..]);
        assert_eq!(wa.len(), 299);
        assert_eq!(a.counted_tokens, Some(300));
        // The prefix is the run's, whatever the level or request.
        let prefix = f.shared_prefix(100).await.unwrap();
        assert_eq!(
            prefix.text.split_whitespace().collect::<Vec<_>>(),
            wa[..100]
        );
    }

    /// An exact counter that splits as many tokenizers pre-tokenize: runs of word characters,
    /// and runs of punctuation, each one token.
    fn word_and_punctuation_counter() -> Counter {
        let json = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],
            "normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,
            "decoder":null,"model":{"type":"WordLevel","vocab":{"[UNK]":0},"unk_token":"[UNK]"}}"#;
        Counter::Local(Arc::new(json.parse().expect("a tokenizer")))
    }

    #[tokio::test]
    async fn every_kind_is_exact_in_length_and_opens_with_its_marker() {
        let mut f = PromptFactory::new(word_and_punctuation_counter(), 11);
        for kind in ContentKind::ALL {
            for (i, target) in [120u64, 333, 1000, 4096].into_iter().enumerate() {
                let p = f.make_kind(kind, target, 3, i as u32).await.unwrap();
                let counted = f.counter().count(&p.text).await.unwrap();
                assert_eq!(counted, target, "{kind:?} at {target}: {}", p.text);
                assert_eq!(p.counted_tokens, Some(target));
                assert_eq!(ContentKind::of_text(&p.text), kind.marker().map(|_| kind));
            }
        }
        // The server's own tokens are taken off the target, as for every prompt.
        f.offset_tokens = 5;
        let p = f.make_kind(ContentKind::Code, 500, 0, 0).await.unwrap();
        assert_eq!(f.counter().count(&p.text).await.unwrap(), 495);
        assert_eq!(p.counted_tokens, Some(500));
        // A prompt too short for its instruction is refused, not sent long.
        let e = f.make_kind(ContentKind::Json, 20, 0, 0).await.unwrap_err();
        assert!(e.contains("cannot hold its instruction"), "{e}");
    }

    /// Without a tokenizer (a probe calibration's estimate), a kind's prompt is as long as a
    /// random one by the same estimate, never over it.
    #[tokio::test]
    async fn a_kind_without_a_tokenizer_is_sized_by_the_estimate() {
        let mut f = PromptFactory::new(
            Counter::Probe {
                slope: 1.3,
                intercept: 0.0,
            },
            5,
        );
        for kind in ContentKind::ALL {
            let p = f.make_kind(kind, 1000, 0, 1).await.unwrap();
            let n = f.counter().count(&p.text).await.unwrap();
            assert!((997..=1000).contains(&n), "{kind:?}: {n}");
        }
    }

    #[tokio::test]
    async fn offset_is_subtracted_from_the_target() {
        let mut f = PromptFactory::new(sim_counter(), 7);
        f.offset_tokens = 1;
        let p = f.make(100, 0, 0).await.unwrap();
        assert_eq!(p.text.split_whitespace().count(), 99);
        assert_eq!(p.counted_tokens, Some(100));
    }
}
