//! Warnings about a thinking model's or tool calls' levels that measured a misconfigured
//! server, or the workload's own limits, rather than the model (docs/metrics.md "When the
//! server's parsers do not fit the model"): never a figure read as a normal one.

use crate::client::Engine;
use crate::config::RunConfig;

use super::LevelSummary;

/// Reasoning tokens past a budget that still count as keeping it: the closing tag's own
/// token, and a template's newline after `<think>` counted on the other side.
const BUDGET_SLACK: f64 = 2.0;

/// The flags that turn an engine's reasoning parser on, as a user would type them.
fn parser_flag(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => "--reasoning-parser (deepseek_r1, qwen3, … as fits the model's template)",
        Engine::Sglang => "--reasoning-parser (qwen3, deepseek-r1, … as fits the model)",
        Engine::Llamacpp => "--jinja --reasoning-format deepseek (llama.cpp's --reasoning-parser)",
        _ => "--reasoning-parser (vLLM, SGLang; llama.cpp: --jinja --reasoning-format deepseek)",
    }
}

/// Where an engine keeps its thinking budget, as a user would fix it.
fn budget_flag(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => {
            "vLLM keeps it only where its --reasoning-parser finds the thinking start (a template that opens <think>, or the model writing it)"
        }
        Engine::Llamacpp => {
            "llama.cpp keeps it only where it sees the thinking begin: --jinja, --reasoning-format deepseek, and a template whose <think> its tokenizer splits as it splits the tag alone"
        }
        _ => "this engine takes no per-request budget servetop can send",
    }
}

/// The flags that turn an engine's tool-call parser on.
fn tool_flag(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => {
            "--enable-auto-tool-choice --tool-call-parser (hermes, … as fits the model)"
        }
        Engine::Sglang => "--tool-call-parser (qwen25, … as fits the model)",
        Engine::Llamacpp => "--jinja and a chat template that handles tools",
        _ => "--tool-call-parser (vLLM with --enable-auto-tool-choice; llama.cpp: --jinja)",
    }
}

/// Why thinking was expected of `l`, if it was: the run sent a budget above 0 or
/// `enable_thinking`, or the server says it runs a reasoning parser (on the chat endpoint,
/// unless the run turned thinking off).
fn thinking_expected(cfg: &RunConfig, server: Server<'_>, l: &LevelSummary) -> Option<String> {
    let enable_thinking = cfg
        .chat
        .chat_template_kwargs
        .as_ref()
        .and_then(|k| k.get("enable_thinking"))
        .and_then(serde_json::Value::as_bool);
    match (l.thinking_budget, enable_thinking, server.reasoning_parser) {
        (Some(b), _, _) if b > 0 => Some(format!("a thinking budget of {b} tokens was sent")),
        (_, Some(true), _) => Some("enable_thinking was sent".into()),
        (Some(0), _, _) | (_, Some(false), _) => None,
        (_, None, Some(p)) if server.chat => Some(format!("the server runs reasoning parser {p}")),
        _ => None,
    }
}

/// The server as the checks need it: its engine, the reasoning parser it says it runs (SGLang
/// says), and whether the level's requests went to the chat endpoint (the only one where
/// thinking is told apart).
#[derive(Clone, Copy, Debug)]
pub struct Server<'a> {
    pub engine: Engine,
    pub reasoning_parser: Option<&'a str>,
    pub chat: bool,
}

/// What `l` (a finished level) says of the server's reasoning and tool-call parsers.
pub fn warnings(cfg: &RunConfig, server: Server<'_>, l: &LevelSummary) -> Vec<String> {
    let engine = server.engine;
    let Some(s) = l.stats.as_ref() else {
        return Vec::new();
    };
    let sc = &s.scalars;
    let n = sc.completed;
    if n == 0 {
        return Vec::new();
    }
    let label = l.label();
    let mut out = Vec::new();
    let k = sc.unanswered_requests;
    if k > 0 {
        let what = if k == n {
            format!(
                "{label}: every output token of all {n} requests arrived as reasoning and no answer began, so TTFC never happened (it is not 0): "
            )
        } else {
            format!(
                "{label}: {k} of {n} requests streamed only reasoning and never began an answer (their TTFC never happened; the level's TTFC is over the other {}): ",
                n - k
            )
        };
        let budget = l
            .thinking_budget
            .filter(|&b| u64::from(b) < u64::from(l.output_len));
        let why = if sc.unanswered_stopped > 0 {
            format!(
                "{} of them ended on their own (a finish reason other than length) while the server still called every token thinking, so its reasoning parser does not fit the model's template (vLLM's deepseek_r1, or qwen3 with a template that does not open <think>, call everything reasoning until a </think> that never comes); check {} and the chat template",
                sc.unanswered_stopped,
                parser_flag(engine)
            )
        } else if let Some(b) = budget {
            format!(
                "a thinking budget of {b} tokens was sent, yet they thought for all {} tokens: the server did not keep it ({}); check {}",
                l.output_len,
                budget_flag(engine),
                parser_flag(engine)
            )
        } else {
            format!(
                "they were still thinking when --output-len ({}) cut them off (finish reason length): raise --output-len above the thinking, or cap it with --thinking-budget; if the model should have answered by then, check {}",
                l.output_len,
                parser_flag(engine)
            )
        };
        out.push(what + &why);
    }
    if k == 0
        && let (Some(b), Some(m)) = (l.thinking_budget, sc.mean_reasoning_tokens)
        && m > f64::from(b) + BUDGET_SLACK
    {
        out.push(format!(
            "{label}: a thinking budget of {b} tokens was sent, yet the requests thought for {m:.0} tokens on average: the server did not keep it ({}); check {}",
            budget_flag(engine),
            parser_flag(engine)
        ));
    }
    if sc.think_tag_requests > 0 {
        out.push(format!(
            "{label}: the answer text of {} of {n} requests holds a literal <think> or </think>: the thinking arrived as the answer, so TTFC reads as TTFT and the reasoning share as 0; start the server with {}",
            sc.think_tag_requests,
            parser_flag(engine)
        ));
    } else if sc.reasoning_share.is_none_or(|r| r <= 0.0)
        && let Some(asked) = thinking_expected(cfg, server, l)
    {
        let why = if server.reasoning_parser.is_some() && l.thinking_budget.is_none() {
            format!(
                "the model's template turned thinking off (chat_template_kwargs enable_thinking), or the parser does not fit the model; check {}",
                parser_flag(engine)
            )
        } else {
            format!(
                "the server has no reasoning parser on, or the template turned thinking off; start it with {}",
                parser_flag(engine)
            )
        };
        out.push(format!(
            "{label}: {asked}, yet none of {n} requests streamed any reasoning, so TTFC here is TTFT: {why}"
        ));
    }
    let required = cfg.chat.tools.is_some() && cfg.chat.tool_choice.as_deref() == Some("required");
    if required && sc.mean_tool_calls.is_none_or(|m| m <= 0.0) {
        out.push(format!(
            "{label}: tool calls were required (--tool-choice required), yet none of {n} requests returned one: the server's tool-call parser is off or does not fit the model; start it with {}",
            tool_flag(engine)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::LevelStats;
    use crate::workload::{LevelKind, LevelSpec};

    /// A finished C=4 level of 8 requests asking for 100 tokens, with `budget`.
    fn level(budget: Option<u32>, set: impl FnOnce(&mut LevelStats)) -> LevelSummary {
        let spec = LevelSpec {
            thinking_budget: budget,
            ..LevelSpec::new(0, LevelKind::Sweep, 4, (200, 100), 8)
        };
        let mut l = LevelSummary::planned(&spec);
        let mut st = LevelStats::default();
        st.scalars.completed = 8;
        set(&mut st);
        l.stats = Some(st);
        l
    }

    fn cfg() -> RunConfig {
        RunConfig::minimal("http://127.0.0.1:1")
    }

    /// A chat run against `engine`, which says nothing of its parsers.
    fn srv(engine: Engine) -> Server<'static> {
        Server {
            engine,
            reasoning_parser: None,
            chat: true,
        }
    }

    #[test]
    fn a_parser_the_server_reports_and_no_thinking_is_warned_on_the_chat_endpoint_only() {
        let l = level(None, |s| s.scalars.reasoning_share = Some(0.0));
        let sglang = Server {
            engine: Engine::Sglang,
            reasoning_parser: Some("qwen3"),
            chat: true,
        };
        let w = warnings(&cfg(), sglang, &l);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("C=4: the server runs reasoning parser qwen3, yet none of 8 requests streamed any reasoning, so TTFC here is TTFT: the model's template turned thinking off"),
            "{w:?}"
        );
        // Through /v1/completions nothing is told apart: no warning.
        let plain = Server {
            chat: false,
            ..sglang
        };
        assert!(warnings(&cfg(), plain, &l).is_empty());
        // Thinking turned off on purpose: none expected.
        let mut off = cfg();
        off.chat.chat_template_kwargs = Some(serde_json::json!({"enable_thinking": false}));
        assert!(warnings(&off, sglang, &l).is_empty());
    }

    #[test]
    fn thinking_that_ended_on_its_own_blames_the_reasoning_parser() {
        let l = level(None, |s| {
            s.scalars.unanswered_requests = 8;
            s.scalars.unanswered_stopped = 3;
            s.scalars.reasoning_share = Some(1.0);
        });
        let w = warnings(&cfg(), srv(Engine::Vllm), &l);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("C=4: every output token of all 8 requests arrived as reasoning and no answer began, so TTFC never happened (it is not 0): 3 of them ended on their own"),
            "{w:?}"
        );
        assert!(
            w[0].contains("--reasoning-parser (deepseek_r1, qwen3"),
            "{w:?}"
        );
        assert!(!w[0].contains("--output-len"), "{w:?}");
    }

    #[test]
    fn a_budget_thought_through_says_the_server_did_not_keep_it() {
        let l = level(Some(16), |s| {
            s.scalars.unanswered_requests = 8;
            s.scalars.reasoning_share = Some(1.0);
        });
        let w = warnings(&cfg(), srv(Engine::Llamacpp), &l);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("C=4 (think 16): every output token"),
            "{w:?}"
        );
        assert!(
            w[0].contains(
                "a thinking budget of 16 tokens was sent, yet they thought for all 100 tokens"
            ),
            "{w:?}"
        );
        assert!(w[0].contains("--reasoning-format deepseek"), "{w:?}");
        // A budget the output length could not hold is the honest case: raise --output-len.
        let l = level(Some(500), |s| {
            s.scalars.unanswered_requests = 2;
            s.scalars.reasoning_share = Some(0.9);
        });
        let w = warnings(&cfg(), srv(Engine::Vllm), &l);
        assert!(
            w[0].starts_with("C=4 (think 500): 2 of 8 requests streamed only reasoning and never began an answer (their TTFC never happened; the level's TTFC is over the other 6): they were still thinking when --output-len (100) cut them off"),
            "{w:?}"
        );
    }

    #[test]
    fn a_budget_overrun_with_answers_and_literal_tags_are_each_said() {
        let l = level(Some(16), |s| {
            s.scalars.mean_reasoning_tokens = Some(40.0);
            s.scalars.reasoning_share = Some(0.4);
        });
        let w = warnings(&cfg(), srv(Engine::Vllm), &l);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("C=4 (think 16): a thinking budget of 16 tokens was sent, yet the requests thought for 40 tokens on average"),
            "{w:?}"
        );
        // Within the slack (the closing tag's token): kept.
        let l = level(Some(16), |s| {
            s.scalars.mean_reasoning_tokens = Some(17.0);
            s.scalars.reasoning_share = Some(0.2);
        });
        assert!(warnings(&cfg(), srv(Engine::Vllm), &l).is_empty());
        let l = level(None, |s| {
            s.scalars.think_tag_requests = 8;
            s.scalars.reasoning_share = Some(0.0);
        });
        let w = warnings(&cfg(), srv(Engine::Sglang), &l);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "C=4: the answer text of 8 of 8 requests holds a literal <think> or </think>"
            ),
            "{w:?}"
        );
        assert!(w[0].contains("--reasoning-parser"), "{w:?}");
    }

    #[test]
    fn a_level_without_thinking_asked_for_or_found_warns_of_nothing() {
        let l = level(None, |s| s.scalars.reasoning_share = Some(0.0));
        assert!(warnings(&cfg(), srv(Engine::Vllm), &l).is_empty());
        let l = level(None, |s| s.scalars.completed = 0);
        assert!(warnings(&cfg(), srv(Engine::Vllm), &l).is_empty());
    }
}
