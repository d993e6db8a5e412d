//! Prompt sets by kind (`--content`): what a prompt of each kind is made of, from servetop's own
//! seeded templates (docs/metrics.md "Content kinds and accept length by content").
//!
//! A kind's prompt is a frame around a body: the head opens with the kind's marker
//! (`Task (code): `) and asks for an answer of that kind, the body is that kind's material (Python
//! functions, word problems, a conversation, a report, JSON records) cut into pieces that each
//! begin with whitespace, and the foot closes it. [`crate::workload::prompt::PromptFactory`] takes
//! as many pieces as make the prompt exactly its length. `random` has no frame: it is the
//! default prompt of common words.

use std::collections::VecDeque;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// What a prompt is about, and what its answer is asked to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentKind {
    /// Common English words in random order, no instruction (the default prompt).
    Random,
    /// Python functions, and a request for one more.
    Code,
    /// Arithmetic word problems, solved step by step.
    Math,
    /// A conversation, and a reply to its last message.
    Chat,
    /// A report in prose, summarized in bullet points.
    Summary,
    /// JSON records, and one JSON object computed from them.
    Json,
}

impl ContentKind {
    /// Every kind, in the order `--help` lists them.
    pub const ALL: [ContentKind; 6] = [
        ContentKind::Code,
        ContentKind::Math,
        ContentKind::Chat,
        ContentKind::Summary,
        ContentKind::Json,
        ContentKind::Random,
    ];

    /// The kind as flags and files spell it.
    pub fn name(self) -> &'static str {
        match self {
            ContentKind::Random => "random",
            ContentKind::Code => "code",
            ContentKind::Math => "math",
            ContentKind::Chat => "chat",
            ContentKind::Summary => "summary",
            ContentKind::Json => "json",
        }
    }

    /// The kind named `s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let t = s.trim();
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| {
                format!(
                    "'{t}' is not a content kind (one of {})",
                    Self::ALL.map(ContentKind::name).join(", ")
                )
            })
    }

    /// `code,chat,json`: the kinds in the order given, each once.
    pub fn parse_list(s: &str) -> Result<Vec<Self>, String> {
        let mut out: Vec<Self> = Vec::new();
        for part in s.split(',') {
            let k = Self::parse(part)?;
            if out.contains(&k) {
                return Err(format!("content kind '{}' is given twice", k.name()));
            }
            out.push(k);
        }
        Ok(out)
    }

    /// What opens every prompt of the kind (`Task (code):`); none for `random`.
    pub fn marker(self) -> Option<String> {
        (self != ContentKind::Random).then(|| format!("Task ({}):", self.name()))
    }

    /// The kind whose marker `text` holds first; none when it holds no marker (a `random`
    /// prompt, or one from elsewhere).
    pub fn of_text(text: &str) -> Option<Self> {
        let mut rest = text;
        while let Some(at) = rest.find("Task (") {
            let after = &rest[at + "Task (".len()..];
            if let Some(end) = after.find("):") {
                let name = &after[..end];
                if let Some(k) = Self::ALL
                    .into_iter()
                    .find(|k| *k != ContentKind::Random && k.name() == name)
                {
                    return Some(k);
                }
            }
            rest = after;
        }
        None
    }
}

/// The material of one prompt of a kind: its head and foot, and its body piece by piece (the
/// same pieces in the same order for the same seed).
pub struct Body {
    kind: ContentKind,
    rng: SmallRng,
    vocab: Vec<&'static str>,
    pieces: VecDeque<String>,
    units: u32,
    head: String,
    foot: String,
}

impl Body {
    /// The body of a `kind` prompt drawn from `seed`, its words from `vocab` (not empty).
    pub fn new(kind: ContentKind, seed: u64, vocab: &[&'static str]) -> Self {
        let mut b = Self {
            kind,
            rng: SmallRng::seed_from_u64(seed ^ 0xC0_4E7E_47C0_4E7E),
            vocab: vocab.to_vec(),
            pieces: VecDeque::new(),
            units: 0,
            head: String::new(),
            foot: String::new(),
        };
        let (head, foot) = b.frame();
        b.head = head;
        b.foot = foot;
        b
    }

    /// What comes before the body: the marker and the instruction.
    pub fn head(&self) -> &str {
        &self.head
    }

    /// What comes after the body: the closing line.
    pub fn foot(&self) -> &str {
        &self.foot
    }

    /// The body's next piece: a word or a few characters of it, with the whitespace before it.
    pub fn next_piece(&mut self) -> String {
        while self.pieces.is_empty() {
            let unit = self.unit();
            self.units += 1;
            self.pieces.extend(pieces_of(&unit));
        }
        self.pieces.pop_front().unwrap_or_default()
    }

    fn word(&mut self) -> &'static str {
        // Identifiers and nouns: words of three letters or more where the vocabulary has them.
        for _ in 0..8 {
            let w = self.vocab[self.rng.random_range(0..self.vocab.len())];
            if w.len() >= 3 {
                return w;
            }
        }
        self.vocab[self.rng.random_range(0..self.vocab.len())]
    }

    fn frame(&mut self) -> (String, String) {
        let marker = self.kind.marker().unwrap_or_default();
        match self.kind {
            ContentKind::Random => (String::new(), String::new()),
            ContentKind::Code => {
                let name = format!("{}_{}", self.word(), self.word());
                (
                    format!(
                        "{marker} Complete the Python module below. Write the function `{name}` that it calls but does not define, with a docstring, in Python only.\n\n```python"
                    ),
                    format!("\n```\n\nAnswer with the code of `{name}` only."),
                )
            }
            ContentKind::Math => (
                format!(
                    "{marker} Solve the problems below step by step, showing each calculation, and give each final answer on a line of its own."
                ),
                "\n\nSolve them in order.".into(),
            ),
            ContentKind::Chat => (
                format!(
                    "{marker} You are a helpful assistant talking with a user. Here is the conversation so far:"
                ),
                "\n\nReply to the user's last message warmly, in a few short paragraphs.".into(),
            ),
            ContentKind::Summary => (
                format!(
                    "{marker} Summarize the report below in five bullet points of one sentence each.\n\nReport:"
                ),
                "\n\nNow the five bullet points.".into(),
            ),
            ContentKind::Json => (
                format!(
                    "{marker} Below are records, one per line. Answer with a single JSON object that maps each record's name to its qty times its price, and nothing else."
                ),
                "\n\nAnswer with the JSON object only.".into(),
            ),
        }
    }

    /// One unit of the body: a function, a problem, a turn of the conversation, a sentence of
    /// the report, a record.
    fn unit(&mut self) -> String {
        match self.kind {
            ContentKind::Random => format!(
                " {}",
                self.vocab[self.rng.random_range(0..self.vocab.len())]
            ),
            ContentKind::Code => self.code_unit(),
            ContentKind::Math => self.math_unit(),
            ContentKind::Chat => self.chat_unit(),
            ContentKind::Summary => self.summary_unit(),
            ContentKind::Json => self.json_unit(),
        }
    }

    fn code_unit(&mut self) -> String {
        let (a, b, c) = (self.word(), self.word(), self.word());
        let k = self.rng.random_range(2..10);
        match self.rng.random_range(0..4) {
            0 => format!(
                "\n\ndef {a}_{b}(items, limit):\n    \"\"\"Return the {b} of each item above limit.\"\"\"\n    result = []\n    for item in items:\n        if item.{b} > limit:\n            result.append(item.{b} * {k})\n    return result"
            ),
            1 => format!(
                "\n\nclass {A}{B}:\n    def __init__(self, {c}, size={k}):\n        self.{c} = {c}\n        self.size = size\n\n    def total(self):\n        return sum(x.{b} for x in self.{c}[: self.size])",
                A = capitalized(a),
                B = capitalized(b)
            ),
            2 => format!(
                "\n\ndef count_{a}(rows):\n    counts = {{}}\n    for row in rows:\n        key = row.get(\"{b}\", \"{c}\")\n        counts[key] = counts.get(key, 0) + {k}\n    return counts"
            ),
            _ => format!(
                "\n\ndef load_{a}(path):\n    try:\n        with open(path) as f:\n            return [line.strip() for line in f if \"{b}\" in line]\n    except OSError as err:\n        raise ValueError(f\"cannot read {c}: {{err}}\")"
            ),
        }
    }

    fn math_unit(&mut self) -> String {
        let n = self.units + 1;
        let (a, b) = (self.word(), self.word());
        let (x, y, z) = (
            self.rng.random_range(3..90),
            self.rng.random_range(2..40),
            self.rng.random_range(2..12),
        );
        match self.rng.random_range(0..3) {
            0 => format!(
                "\n\nProblem {n}: A {a} shop sells {x} {b} kits a day at {y} dollars each. How much does it earn in {z} days, and how many kits does it sell?"
            ),
            1 => format!(
                "\n\nProblem {n}: A tank holds {x} liters of {a}. It loses {z} liters an hour and gains {y} liters every {z} hours. How much does it hold after {y} hours?"
            ),
            _ => format!(
                "\n\nProblem {n}: {x} students share {y} boxes of {b}, with {z} in each box. How many does each student get, and how many are left over?"
            ),
        }
    }

    fn chat_unit(&mut self) -> String {
        let (a, b, c) = (self.word(), self.word(), self.word());
        if self.units.is_multiple_of(2) {
            match self.rng.random_range(0..3) {
                0 => format!(
                    "\n\nUser: I have been thinking about the {a} we talked about, and whether the {b} would help with it. What do you think?"
                ),
                1 => format!(
                    "\n\nUser: Thanks! One more thing: my friend says {c} is better than {a} for this. Is that true?"
                ),
                _ => format!(
                    "\n\nUser: Could you explain again how the {b} works? I did not follow the part about the {c}."
                ),
            }
        } else {
            match self.rng.random_range(0..3) {
                0 => format!(
                    "\n\nAssistant: Good question. The {a} matters most when the {b} changes often, so start small and see how it goes."
                ),
                1 => format!(
                    "\n\nAssistant: It depends on what you need. The {c} is simpler, while the {a} gives you more control over the {b}."
                ),
                _ => format!(
                    "\n\nAssistant: Sure. Think of the {b} as a list of steps: first the {c}, then the {a}, and the rest follows."
                ),
            }
        }
    }

    fn summary_unit(&mut self) -> String {
        let (a, b, c) = (self.word(), self.word(), self.word());
        let n = self.rng.random_range(2..60);
        let para = if self.units.is_multiple_of(5) {
            "\n\n"
        } else {
            " "
        };
        let s = match self.rng.random_range(0..4) {
            0 => format!("The {a} team met {n} times this quarter to review the {b} plan."),
            1 => format!(
                "Costs for the {b} rose by {n} percent, mostly because of delays in the {c}."
            ),
            2 => format!("Most members agreed that the {c} should come before the {a}."),
            _ => format!("A survey of {n} users found the {a} easier to use than the {b}."),
        };
        format!("{para}{s}")
    }

    fn json_unit(&mut self) -> String {
        let (a, b) = (self.word(), self.word());
        let id = self.units + 1;
        let qty = self.rng.random_range(1..50);
        let cents = self.rng.random_range(100..10_000);
        format!(
            "\n{{\"id\": {id}, \"name\": \"{a}\", \"tag\": \"{b}\", \"qty\": {qty}, \"price\": {}.{:02}}}",
            cents / 100,
            cents % 100
        )
    }
}

fn capitalized(w: &str) -> String {
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// `unit` cut before each run of whitespace: every piece starts with the whitespace before it,
/// so pieces joined are the unit again and any prefix of them ends at a word's end.
fn pieces_of(unit: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_space = false;
    for ch in unit.chars() {
        let space = ch.is_whitespace();
        if space && !in_space && !cur.is_empty() && !cur.trim().is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        in_space = space;
        cur.push(ch);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vec<&'static str> {
        vec![
            "river", "stone", "light", "a", "of", "table", "garden", "window",
        ]
    }

    #[test]
    fn kinds_parse_in_the_order_given_once_each() {
        assert_eq!(
            ContentKind::parse_list("code, Chat,json").unwrap(),
            [ContentKind::Code, ContentKind::Chat, ContentKind::Json]
        );
        let e = ContentKind::parse_list("code,poem").unwrap_err();
        assert!(e.contains("'poem' is not a content kind"), "{e}");
        assert!(ContentKind::parse_list("code,code").is_err());
        assert!(ContentKind::parse_list("").is_err());
    }

    #[test]
    fn the_marker_tells_the_kind_and_random_has_none() {
        for k in ContentKind::ALL {
            let b = Body::new(k, 3, &vocab());
            let text = format!("shared words first {}", b.head());
            let expect = (k != ContentKind::Random).then_some(k);
            assert_eq!(ContentKind::of_text(&text), expect, "{k:?}");
        }
        assert_eq!(
            ContentKind::of_text("Task (poem): x Task (math): y"),
            Some(ContentKind::Math)
        );
        assert_eq!(ContentKind::of_text("no marker here"), None);
    }

    #[test]
    fn pieces_rejoin_to_the_body_and_each_opens_with_whitespace() {
        for k in ContentKind::ALL {
            let mut b = Body::new(k, 7, &vocab());
            let pieces: Vec<String> = (0..400).map(|_| b.next_piece()).collect();
            assert!(
                pieces.iter().all(|p| p.starts_with(char::is_whitespace)),
                "{k:?}: {:?}",
                pieces.iter().find(|p| !p.starts_with(char::is_whitespace))
            );
            assert!(pieces.iter().all(|p| !p.trim().is_empty()), "{k:?}");
            // The same seed, the same pieces; another seed, others.
            let mut again = Body::new(k, 7, &vocab());
            assert!(pieces.iter().all(|p| *p == again.next_piece()));
            let mut other = Body::new(k, 8, &vocab());
            let others: Vec<String> = (0..400).map(|_| other.next_piece()).collect();
            assert_ne!(pieces, others, "{k:?}");
        }
        assert_eq!(
            pieces_of("\n\ndef f(x):\n    return x"),
            ["\n\ndef", " f(x):", "\n    return", " x"]
        );
    }
}
