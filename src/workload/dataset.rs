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
}

/// A loaded dataset.
#[derive(Debug)]
pub struct Dataset {
    pub path: String,
    pub entries: Vec<Entry>,
    /// Items without a usable prompt.
    pub skipped: usize,
}

const HUMAN: [&str; 2] = ["human", "user"];
const MODEL: [&str; 5] = ["gpt", "assistant", "chatgpt", "bard", "model"];

fn text_of<'a>(v: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
}

/// The entry an item describes, or `None` when it has no prompt.
fn entry(item: &Value) -> Option<Entry> {
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
        });
    }
    let prompt = text_of(item, &["prompt", "text", "input"])?;
    Some(Entry {
        user_turns: vec![Arc::from(prompt)],
        reply: text_of(item, &["completion", "output", "response"]).map(Arc::from),
        output_len: ["output_len", "max_tokens"]
            .iter()
            .find_map(|k| item.get(*k).and_then(Value::as_u64))
            .filter(|n| *n >= 1)
            .map(|n| n.min(u64::from(u32::MAX)) as u32),
    })
}

impl Dataset {
    /// Reads `path`. Every error is one line naming the file (and the line, for JSON Lines).
    pub fn load(path: &Path) -> Result<Self, String> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--dataset {name}: cannot read it ({e})"))?;
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
        let entries: Vec<Entry> = items.iter().filter_map(entry).collect();
        if entries.is_empty() {
            return Err(format!(
                "--dataset {name}: none of its {total} items has a prompt (expected ShareGPT \"conversations\" or {{\"prompt\": ...}} per line)"
            ));
        }
        Ok(Self {
            path: name,
            skipped: total - entries.len(),
            entries,
        })
    }

    /// The entry for request `i` of level `level` under `seed`.
    pub fn pick(&self, seed: u64, level: u32, i: u32) -> &Entry {
        let n = self.entries.len() as u64;
        let start = splitmix(seed ^ (u64::from(level) << 32)) % n;
        let pos = (start + u64::from(i)) % n;
        &self.entries[permuted(pos, n, seed)]
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
                })
                .collect(),
            skipped: 0,
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
