//! Prompts from a file instead of random text (`--dataset PATH`).
//!
//! Accepted, as JSON Lines or one JSON array:
//! - ShareGPT: `{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", "value": ...},
//!   ...]}` (also `role`/`content`, and `messages` instead of `conversations`). The first human
//!   message is the prompt and the reply after it sets the output length, as in
//!   `vllm bench serve --dataset-name sharegpt`; a multi-turn level sends the human messages as
//!   its turns.
//! - Plain: `{"prompt": ...}` (or `text`), with an optional `output_len` (or `max_tokens`) or a
//!   reference answer in `completion` (or `output`) whose length is used.
//! - The acceptance sets speculative decoding is measured on, as their files come:
//!   SPEED-Bench as NeMo-Skills' `prepare.py` writes it (`messages`, every turn the user's) or
//!   raw (`turns`), Spec-Bench's and MT-Bench's `question.jsonl` (`turns`, a list of strings),
//!   GSM8K (`question`, its worked `answer` the reply), MATH-500 (`problem`, `solution`;
//!   `subject` its category), `HumanEval` (`prompt`, `canonical_solution`), MBPP (`text`, `code`)
//!   and `InstructCoder` (`instruction` after its `input`, as vLLM joins them). A SPEED-Bench row
//!   still holding its placeholder (its text must be fetched from the source first) is skipped
//!   and counted apart.
//!
//! Each entry keeps its `category` (or, without one, its `subject`): `--categories` runs a
//! level once per category, each request drawn from that category's entries.
//!
//! Entries without a prompt are skipped and counted; a line that is not JSON is an error naming
//! the line. Entries are taken in a seeded shuffled order, each level from its own seeded starting
//! point: a run is reproducible, and a level repeats an entry only after using them all.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

/// One usable entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The user messages in order (the first is the prompt of a single-turn request).
    pub user_turns: Vec<Arc<str>>,
    /// The reference reply to the first message, whose length sets the output length.
    pub reply: Option<Arc<str>>,
    /// An explicit output length.
    pub output_len: Option<u32>,
    /// Its category (`category`, else `subject`), if it has one.
    pub category: Option<Arc<str>>,
}

/// A loaded dataset.
#[derive(Debug)]
pub struct Dataset {
    pub path: String,
    pub entries: Vec<Entry>,
    /// Items without a usable prompt.
    pub skipped: usize,
    /// SPEED-Bench rows still holding the placeholder for text to fetch from its source
    /// (counted in `skipped` too).
    pub unresolved: usize,
    /// Each category's entries (indices into `entries`), in the order the categories first
    /// appear.
    pub categories: Vec<(Arc<str>, Vec<usize>)>,
}

/// What SPEED-Bench's published rows hold where their text may not be redistributed: the text
/// is fetched from its source by NeMo-Skills' `prepare.py` (or NVIDIA's `specdec_bench`).
const UNRESOLVED: &str = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE";

const HUMAN: [&str; 2] = ["human", "user"];
const MODEL: [&str; 5] = ["gpt", "assistant", "chatgpt", "bard", "model"];

fn text_of<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
}

/// The strings of a list field (`turns`, `reference`), the empty ones left out.
fn strings<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The entry an item describes, or `None` when it has no prompt.
fn entry(item: &Value) -> Option<Entry> {
    let category = text_of(item, &["category", "subject"]).map(Arc::from);
    entry_text(item).map(|e| Entry { category, ..e })
}

/// [`entry`] without its category.
fn entry_text(item: &Value) -> Option<Entry> {
    let turns = strings(item, "turns");
    if !turns.is_empty() {
        // Spec-Bench, MT-Bench, raw SPEED-Bench: the user's turns; a reference answer to the
        // first, where given, sets the output length.
        return Some(Entry {
            user_turns: turns.into_iter().map(Arc::from).collect(),
            reply: strings(item, "reference").first().map(|r| Arc::from(*r)),
            output_len: None,
            category: None,
        });
    }
    if let Some(instruction) = text_of(item, &["instruction"]) {
        // InstructCoder: the code, then what to do with it, as vLLM's bench joins them.
        let prompt = match text_of(item, &["input"]) {
            Some(input) => format!("{input}\n\n{instruction}"),
            None => instruction.to_string(),
        };
        return Some(Entry {
            user_turns: vec![Arc::from(prompt)],
            reply: text_of(item, &["output"]).map(Arc::from),
            output_len: None,
            category: None,
        });
    }
    let turns = ["conversations", "conversation", "messages"]
        .iter()
        .find_map(|k| item.get(*k).and_then(Value::as_array));
    if let Some(turns) = turns {
        let mut user_turns: Vec<Arc<str>> = Vec::new();
        let mut reply = None;
        for t in turns {
            let who = text_of(t, &["from", "role"])
                .unwrap_or("")
                .to_ascii_lowercase();
            let Some(text) = text_of(t, &["value", "content"]) else {
                continue;
            };
            if HUMAN.contains(&who.as_str()) {
                user_turns.push(Arc::from(text));
            } else if MODEL.contains(&who.as_str()) && user_turns.len() == 1 && reply.is_none() {
                reply = Some(Arc::from(text));
            }
        }
        return (!user_turns.is_empty()).then_some(Entry {
            user_turns,
            reply,
            output_len: None,
            category: None,
        });
    }
    let prompt = text_of(item, &["prompt", "text", "input", "question", "problem"])?;
    Some(Entry {
        user_turns: vec![Arc::from(prompt)],
        reply: text_of(
            item,
            &[
                "completion",
                "output",
                "response",
                "answer",
                "solution",
                "canonical_solution",
                "code",
            ],
        )
        .map(Arc::from),
        output_len: ["output_len", "max_tokens"]
            .iter()
            .find_map(|k| item.get(*k).and_then(Value::as_u64))
            .filter(|n| *n >= 1)
            .map(|n| n.min(u64::from(u32::MAX)) as u32),
        category: None,
    })
}

/// Whether an entry is a SPEED-Bench row whose text is still to be fetched from its source.
fn unresolved(e: &Entry) -> bool {
    e.user_turns.iter().any(|t| t.starts_with(UNRESOLVED))
}

impl Dataset {
    /// Reads `path`. Every error is one line naming the file (and the line, for JSON Lines).
    pub fn load(path: &Path) -> Result<Self, String> {
        let name = path.display().to_string();
        let bytes =
            std::fs::read(path).map_err(|e| format!("--dataset {name}: cannot read it ({e})"))?;
        if bytes.starts_with(&[0x1f, 0x8b]) {
            return Err(format!(
                "--dataset {name}: a gzip file (HumanEval's HumanEval.jsonl.gz is one): gunzip it first"
            ));
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            format!("--dataset {name}: not UTF-8 text (JSON Lines or a JSON array)")
        })?;
        let items: Vec<Value> = if text.trim_start().starts_with('[') {
            serde_json::from_str(&text)
                .map_err(|e| format!("--dataset {name}: not a JSON array ({e})"))?
        } else {
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(n, l)| {
                    serde_json::from_str(l)
                        .map_err(|e| format!("--dataset {name} line {}: not JSON ({e})", n + 1))
                })
                .collect::<Result<_, _>>()?
        };
        let total = items.len();
        let all: Vec<Entry> = items.iter().filter_map(entry).collect();
        let unresolved_n = all.iter().filter(|e| unresolved(e)).count();
        let entries: Vec<Entry> = all.into_iter().filter(|e| !unresolved(e)).collect();
        if entries.is_empty() && unresolved_n > 0 {
            return Err(format!(
                "--dataset {name}: its {unresolved_n} rows hold SPEED-Bench's placeholder, not their text: build the file with NeMo-Skills' speed-bench prepare.py first"
            ));
        }
        if entries.is_empty() {
            return Err(format!(
                "--dataset {name}: none of its {total} items has a prompt (expected ShareGPT \"conversations\", {{\"prompt\": ...}}, or a benchmark set's \"turns\", \"messages\", \"question\" or \"problem\" per line)"
            ));
        }
        let mut categories: Vec<(Arc<str>, Vec<usize>)> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let Some(c) = &e.category else { continue };
            match categories.iter_mut().find(|(n, _)| n == c) {
                Some((_, v)) => v.push(i),
                None => categories.push((c.clone(), vec![i])),
            }
        }
        Ok(Self {
            path: name,
            skipped: total - entries.len(),
            unresolved: unresolved_n,
            entries,
            categories,
        })
    }

    /// The entry for request `i` of level `level` under `seed`.
    pub fn pick(&self, seed: u64, level: u32, i: u32) -> &Entry {
        let n = self.entries.len() as u64;
        let start = splitmix(seed ^ (u64::from(level) << 32)) % n;
        let pos = (start + u64::from(i)) % n;
        &self.entries[permuted(pos, n, seed)]
    }

    /// [`Dataset::pick`] among the entries of `category` (all of them for `None`, or a
    /// category it does not hold).
    pub fn pick_in(&self, category: Option<&str>, seed: u64, level: u32, i: u32) -> &Entry {
        let Some(of) = category.and_then(|c| {
            self.categories
                .iter()
                .find(|(n, _)| n.as_ref() == c)
                .map(|(_, v)| v)
        }) else {
            return self.pick(seed, level, i);
        };
        let n = of.len() as u64;
        let start = splitmix(seed ^ (u64::from(level) << 32)) % n;
        let pos = (start + u64::from(i)) % n;
        &self.entries[of[permuted(pos, n, seed)]]
    }

    /// The names of its categories, in the order they first appear.
    pub fn category_names(&self) -> Vec<String> {
        self.categories.iter().map(|(n, _)| n.to_string()).collect()
    }

    /// [`Dataset::repeats_warning`] for a level drawing from `category`'s entries (the whole
    /// file for `None`).
    pub fn repeats_warning_in(&self, category: Option<&str>, requests: u64) -> Option<String> {
        let pool = category.and_then(|c| {
            self.categories
                .iter()
                .find(|(n, _)| n.as_ref() == c)
                .map(|(_, v)| v.len() as u64)
        });
        match (category, pool) {
            (Some(c), Some(n)) => (requests > n).then(|| {
                format!(
                    "--dataset {} has {n} usable entries in category {c} for {requests} requests: prompts repeat, and a server's prefix cache will serve the repeats (see the prefix-cache hit rate)",
                    self.path
                )
            }),
            _ => self.repeats_warning(requests),
        }
    }

    /// How many requests of the run will draw from it, against its size: `Some(message)` when
    /// some entry must be sent twice (a prefix cache would then serve the repeat).
    pub fn repeats_warning(&self, requests: u64) -> Option<String> {
        let n = self.entries.len() as u64;
        (requests > n).then(|| {
            format!(
                "--dataset {} has {n} usable entries for {requests} requests: prompts repeat, and a server's prefix cache will serve the repeats (see the prefix-cache hit rate)",
                self.path
            )
        })
    }
}

/// splitmix64's finalizer: a well-mixed 64-bit hash.
pub(crate) fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Position `pos` of a seeded permutation of `0..n`, without storing it: an affine map
/// `a·pos + b mod n` with `a` coprime to `n` is a bijection.
fn permuted(pos: u64, n: u64, seed: u64) -> usize {
    if n <= 1 {
        return 0;
    }
    let mut a = (splitmix(seed ^ 0xA5A5) % n).max(1);
    while gcd(a, n) != 1 {
        a = a % (n - 1) + 1;
    }
    let b = splitmix(seed ^ 0x5A5A) % n;
    ((u128::from(a) * u128::from(pos) + u128::from(b)) % u128::from(n)) as usize
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, body: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("servetop-ds-{}-{name}", std::process::id()));
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn sharegpt_array_and_plain_lines() {
        let p = write(
            "sharegpt.json",
            r#"[{"id":"a","conversations":[{"from":"human","value":"hi there"},{"from":"gpt","value":"hello you"},{"from":"human","value":"and then?"}]},
                {"id":"b","conversations":[{"from":"gpt","value":"no human"}]},
                {"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"r"}]}]"#,
        );
        let d = Dataset::load(&p).unwrap();
        assert_eq!((d.entries.len(), d.skipped), (2, 1));
        assert_eq!(d.entries[0].user_turns.len(), 2);
        assert_eq!(d.entries[0].reply.as_deref(), Some("hello you"));
        assert_eq!(d.entries[1].user_turns[0].as_ref(), "q");

        let p = write(
            "plain.jsonl",
            "{\"prompt\": \"one\", \"output_len\": 7}\n\n{\"text\": \"two\", \"completion\": \"x y\"}\n",
        );
        let d = Dataset::load(&p).unwrap();
        assert_eq!(d.entries[0].output_len, Some(7));
        assert_eq!(d.entries[1].reply.as_deref(), Some("x y"));
        // The pick is reproducible and spreads over the entries.
        let picks: Vec<_> = (0..64)
            .map(|i| d.pick(1, 0, i).user_turns[0].clone())
            .collect();
        assert_eq!(picks[5], d.pick(1, 0, 5).user_turns[0]);
        assert!(
            picks.iter().any(|p| p.as_ref() == "one") && picks.iter().any(|p| p.as_ref() == "two")
        );
    }

    #[test]
    fn a_level_uses_every_entry_before_repeating_one() {
        for (n, seed) in [(1u64, 3u64), (7, 1), (12, 9), (100, 42), (1024, 7)] {
            let mut seen = vec![false; n as usize];
            for pos in 0..n {
                let k = permuted(pos, n, seed);
                assert!(!seen[k], "n={n} seed={seed}: {k} twice");
                seen[k] = true;
            }
        }
        let d = Dataset {
            path: "x".into(),
            entries: (0..10)
                .map(|i| Entry {
                    user_turns: vec![Arc::from(i.to_string())],
                    reply: None,
                    output_len: None,
                    category: None,
                })
                .collect(),
            skipped: 0,
            unresolved: 0,
            categories: Vec::new(),
        };
        let mut firsts: Vec<String> = (0..10)
            .map(|i| d.pick(5, 2, i).user_turns[0].to_string())
            .collect();
        firsts.sort();
        firsts.dedup();
        assert_eq!(firsts.len(), 10);
        assert!(d.repeats_warning(10).is_none());
        assert!(
            d.repeats_warning(11)
                .unwrap()
                .contains("10 usable entries for 11 requests")
        );
    }

    #[test]
    fn the_acceptance_sets_as_their_files_come() {
        // Spec-Bench and MT-Bench: turns, category, reference.
        let p = write(
            "spec.jsonl",
            "{\"question_id\": 1, \"category\": \"coding\", \"turns\": [\"write a sort\", \"now faster\"]}\n\
             {\"question_id\": 2, \"category\": \"qa\", \"turns\": [\"who?\"], \"reference\": [\"them\"]}\n\
             {\"question_id\": 3, \"category\": \"coding\", \"turns\": [\"parse it\"]}\n",
        );
        let d = Dataset::load(&p).unwrap();
        assert_eq!(d.entries.len(), 3);
        assert_eq!(d.entries[0].user_turns.len(), 2);
        assert_eq!(d.entries[1].reply.as_deref(), Some("them"));
        assert_eq!(d.category_names(), ["coding", "qa"]);
        // A category's picks are its own entries only, each before any repeats.
        let mut coding: Vec<String> = (0..4)
            .map(|i| d.pick_in(Some("coding"), 3, 1, i).user_turns[0].to_string())
            .collect();
        assert!(
            coding
                .iter()
                .all(|t| t == "write a sort" || t == "parse it")
        );
        coding.truncate(2);
        coding.sort();
        assert_eq!(coding, ["parse it", "write a sort"]);
        assert_eq!(
            d.pick_in(Some("qa"), 3, 1, 9).user_turns[0].as_ref(),
            "who?"
        );
        // A category of 2 entries repeats at 3 requests, though the file has 3 in all.
        assert!(d.repeats_warning_in(None, 3).is_none());
        let w = d.repeats_warning_in(Some("coding"), 3).unwrap();
        assert!(
            w.contains("2 usable entries in category coding for 3 requests"),
            "{w}"
        );
        // SPEED-Bench as prepare.py writes it (every turn the user's), and its placeholder rows.
        let p = write(
            "speed.jsonl",
            "{\"question_id\": \"0123456789abcdef0123456789abcdef\", \"category\": \"math\", \"messages\": [{\"role\": \"user\", \"content\": \"add 2 and 3\"}, {\"role\": \"user\", \"content\": \"double it\"}]}\n\
             {\"question_id\": \"fedcba9876543210fedcba9876543210\", \"category\": \"rag\", \"turns\": [\"FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH\"]}\n",
        );
        let d = Dataset::load(&p).unwrap();
        assert_eq!((d.entries.len(), d.skipped, d.unresolved), (1, 1, 1));
        assert_eq!(d.entries[0].user_turns.len(), 2);
        assert_eq!(d.entries[0].category.as_deref(), Some("math"));
        let only = write(
            "speed-raw.jsonl",
            "{\"category\": \"rag\", \"turns\": [\"FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH\"]}\n",
        );
        let e = Dataset::load(&only).unwrap_err();
        assert!(e.contains("prepare.py"), "{e}");
        // GSM8K, MATH-500 (its subject the category), HumanEval, MBPP, InstructCoder.
        let p = write(
            "sets.jsonl",
            "{\"question\": \"q1\", \"answer\": \"a b #### 5\"}\n\
             {\"problem\": \"p1\", \"solution\": \"s\", \"subject\": \"Algebra\", \"level\": 3}\n\
             {\"task_id\": \"HumanEval/0\", \"prompt\": \"def f():\", \"canonical_solution\": \"  return 1\"}\n\
             {\"task_id\": 11, \"text\": \"Write a function\", \"code\": \"def g(): pass\"}\n\
             {\"instruction\": \"Make it faster.\", \"input\": \"def h(): pass\", \"output\": \"def h(): return\"}\n",
        );
        let d = Dataset::load(&p).unwrap();
        let firsts: Vec<&str> = d.entries.iter().map(|e| e.user_turns[0].as_ref()).collect();
        assert_eq!(
            firsts,
            [
                "q1",
                "p1",
                "def f():",
                "Write a function",
                "def h(): pass\n\nMake it faster."
            ]
        );
        let replies: Vec<Option<&str>> = d.entries.iter().map(|e| e.reply.as_deref()).collect();
        assert_eq!(
            replies,
            [
                Some("a b #### 5"),
                Some("s"),
                Some("  return 1"),
                Some("def g(): pass"),
                Some("def h(): return")
            ]
        );
        assert_eq!(d.category_names(), ["Algebra"]);
        // HumanEval's file as published is gzipped.
        let gz = write("he.jsonl.gz", "");
        std::fs::write(&gz, [0x1f, 0x8b, 8, 0]).unwrap();
        let e = Dataset::load(&gz).unwrap_err();
        assert!(e.contains("gunzip it first"), "{e}");
    }

    #[test]
    fn bad_files_are_one_line_errors() {
        let e = Dataset::load(&write("bad.jsonl", "{\"prompt\": \"ok\"}\n{oops\n")).unwrap_err();
        assert!(e.contains("line 2: not JSON"), "{e}");
        let e = Dataset::load(&write("empty.jsonl", "{\"foo\": 1}\n")).unwrap_err();
        assert!(e.contains("none of its 1 items has a prompt"), "{e}");
        let e = Dataset::load(Path::new("/nonexistent/x.jsonl")).unwrap_err();
        assert!(
            e.starts_with("--dataset /nonexistent/x.jsonl: cannot read it"),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }
}
