//! Thinking on a real llama.cpp: `llama-server` (`scripts/llama/build.sh`) serving the tiny
//! random-weight model with a thinking chat template (`scripts/llama/think_templates.py`: Qwen3's,
//! opening `<think>` in the prompt), `--jinja --reasoning-format deepseek`. Everything the model
//! writes is thinking until the `</think>` llama-server forces when a request's
//! `thinking_budget_tokens` (servetop's `--thinking-budget`) runs out; then the answer.
//!
//! Known answers:
//! - Each request thinks exactly its budget: llama-server streams one token an event, and the
//!   tokens of the `</think>` it forces come in none (counted from the events; its usage has no
//!   reasoning count).
//! - TTFC − TTFT is the thinking's decode steps: the budget's tokens and the forced tag's (the
//!   output's tokens no event carried) at the request's own time per output token: each level's
//!   median of 8 at least 70 % of it, and at C=1 at most 130 % (at C=2 the other request's prefill
//!   may land inside the thinking).
//! - Planted misconfigurations, each caught by its warning: the parser off for a request
//!   (`reasoning_format: none`: the tags arrive as the answer); the template told not to think
//!   while a budget was sent; a template whose `<think>` `SentencePiece` tokenizes unlike the tag
//!   alone, so llama-server never sees the thinking begin and ignores the budget.
//!
//! Without the build every test says why it skipped and passes; `SERVETOP_REQUIRE_LLAMA=1` (set
//! by `.ci/run`) makes a missing build fail them.
//!
//! Tool calls: llama.cpp's grammar for a required call lets the model write text first, which a
//! random-weight model does to the end of its output, and it cannot build that grammar at all
//! on a `SentencePiece` model that tokenizes with a leading space ("Failed to initialize
//! samplers"). So the tool-call check serves the target written without the space prefix, with
//! the stock Qwen3 template, and opens the answer with `<tool_call>` (an assistant message the
//! model continues, sent through `--extra-body`) and stops at `</tool_call>`: exactly one call
//! a request, which servetop must count as one, at its first event.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod real_server;

use std::path::{Path, PathBuf};

use real_server::llama::{LlamaServer, Paths, paths};
use real_server::{the_warning, warnings_of};
use servetop::config::{BackendChoice, ChatExtras, RunConfig};
use servetop::event::RunState;
use servetop::run::run_headless;
use servetop::run::session::Session;
use servetop::workload::RequestCount;

/// Tests that talk to a server take turns: they share one core.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const OUTPUT: u32 = 40;

fn thinking_server(p: &Paths, name: &str, template: &Path) -> LlamaServer {
    LlamaServer::start(
        p,
        name,
        &[
            "-c",
            "4096",
            "-np",
            "2",
            "--jinja",
            "--reasoning-format",
            "deepseek",
            "--chat-template-file",
            template.to_str().unwrap(),
        ],
    )
}

fn run_config(url: &str) -> RunConfig {
    RunConfig {
        backend: BackendChoice::OpenaiChat,
        concurrency: vec![1, 2],
        input_len: 64,
        output_len: OUTPUT,
        requests_per_level: RequestCount::Fixed(4),
        first_token_timeout_s: 60.0,
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        server_wait_s: 10.0,
        // Each record keeps its events (the thinking's silent tokens are counted from them).
        record_chunks: true,
        ..RunConfig::minimal(url)
    }
}

async fn run(cfg: RunConfig, dir: &Path) -> Session {
    let (state, session) = run_headless(cfg, Some(dir.to_path_buf())).await.unwrap();
    assert_eq!(state, RunState::Finished, "{:?}", session.summary.error);
    session
}

fn temp_run_dir(name: &str) -> PathBuf {
    real_server::temp_run_dir("llama-reasoning", name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_budgets_and_a_parser_turned_off() {
    let Some(p) = paths("thinking_budgets_and_a_parser_turned_off") else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let srv = thinking_server(&p, "think", &p.think_template);

    // Two budgets, each over C=1 and C=2: every request thinks its budget, then answers.
    let dir = temp_run_dir("budgets");
    let s = run(
        RunConfig {
            thinking_budgets: vec![4, 12],
            requests_per_level: RequestCount::Fixed(8),
            ..run_config(&srv.url)
        },
        &dir,
    )
    .await;
    let records = real_server::records(&dir);
    // The forced `</think>`'s tokens: those no event carried.
    real_server::thinking_took_its_budget(&s, &records, OUTPUT, |r| {
        let events: u32 = r.chunks.iter().map(|c| c.events).sum();
        (r.output_tokens - u64::from(events)) as f64
    });
    assert!(
        warnings_of(&s, "C=1 (think 4)", "reasoning").is_empty(),
        "{:?}",
        s.summary.warnings
    );

    // The parser off for these requests: the template's `<think>` is in the prompt, the forced
    // `</think>` arrives in the answer as text (over several events).
    let dir = temp_run_dir("format-none");
    let s = run(
        RunConfig {
            concurrency: vec![2],
            thinking_budgets: vec![6],
            extra_body: Some(serde_json::json!({"reasoning_format": "none"})),
            ..run_config(&srv.url)
        },
        &dir,
    )
    .await;
    let st = s.summary.sweep[0].stats.as_ref().unwrap();
    assert_eq!(st.scalars.think_tag_requests, 4);
    assert_eq!(st.scalars.reasoning_share, Some(0.0));
    the_warning(
        &s,
        "parser off",
        "C=2 (think 6)",
        &["literal <think> or </think>", "--reasoning-format deepseek"],
    );

    // The template told not to think while a budget was sent: nothing streams as reasoning.
    let dir = temp_run_dir("no-thinking");
    let s = run(
        RunConfig {
            concurrency: vec![2],
            thinking_budgets: vec![8],
            chat: ChatExtras {
                chat_template_kwargs: Some(serde_json::json!({"enable_thinking": false})),
                ..ChatExtras::default()
            },
            ..run_config(&srv.url)
        },
        &dir,
    )
    .await;
    the_warning(
        &s,
        "thinking off",
        "C=2 (think 8)",
        &[
            "yet none of 4 requests streamed any reasoning",
            "--reasoning-parser",
        ],
    );
    println!(
        "llama_reasoning (budgets, parser off, thinking off): {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

/// A template whose `<think>` llama-server cannot find: the budget is ignored, every token is
/// thinking, no answer begins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_the_server_cannot_see_begin_is_caught() {
    let Some(p) = paths("a_budget_the_server_cannot_see_begin_is_caught") else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let started = std::time::Instant::now();
    let srv = thinking_server(&p, "think-nospace", &p.think_nospace_template);
    let dir = temp_run_dir("nospace");
    let s = run(
        RunConfig {
            concurrency: vec![2],
            thinking_budgets: vec![6],
            ..run_config(&srv.url)
        },
        &dir,
    )
    .await;
    let l = &s.summary.sweep[0];
    let st = l.stats.as_ref().unwrap();
    assert_eq!(st.scalars.unanswered_requests, 4);
    assert!(st.dists.ttfc_ms.is_none(), "TTFC never happened");
    assert_eq!(st.scalars.mean_reasoning_tokens, Some(f64::from(OUTPUT)));
    the_warning(
        &s,
        "budget ignored",
        "C=2 (think 6)",
        &[
            "every output token of all 4 requests arrived as reasoning",
            "a thinking budget of 6 tokens was sent, yet they thought for all 40 tokens",
            "--reasoning-parser",
        ],
    );
    println!(
        "llama_reasoning (budget unseen): {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_tool_call_is_counted_once() {
    let Some(p) = paths("a_required_tool_call_is_counted_once") else {
        return;
    };
    let _turn = SERIAL.lock().await;
    let srv = LlamaServer::start(
        &p,
        "tools",
        &[
            "-m",
            p.nospace.to_str().unwrap(),
            "-c",
            "4096",
            "-np",
            "2",
            "--jinja",
            "--chat-template-file",
            p.qwen3_template.to_str().unwrap(),
        ],
    );
    let tools = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tools/strict_get_time.json");
    let dir = temp_run_dir("tools");
    let s = run(
        RunConfig {
            chat: ChatExtras {
                tools: Some(ChatExtras::load_tools(tools.to_str().unwrap()).unwrap()),
                tool_choice: Some("required".into()),
                chat_template_kwargs: None,
            },
            extra_body: Some(serde_json::json!({
                "messages": [
                    {"role": "user", "content": "What time is it?"},
                    {"role": "assistant", "content": "<tool_call>\n"}
                ],
                "stop": ["</tool_call>"]
            })),
            ..run_config(&srv.url)
        },
        &dir,
    )
    .await;
    for l in &s.summary.sweep {
        let st = l.stats.as_ref().unwrap();
        println!(
            "{}: {} requests, {:?} tool calls a request, first tool call p50 {:.1} ms",
            l.label(),
            st.scalars.completed,
            st.scalars.mean_tool_calls,
            st.dists.first_tool_call_ms.as_ref().unwrap().p50
        );
        assert_eq!(st.scalars.completed, 4, "{}", l.label());
    }
    let records = real_server::records(&dir);
    for r in records.iter().filter(|r| !r.warmup) {
        assert_eq!(r.tool_calls, 1, "{r:?}");
        // The call is the answer's first event: TTFC, TTFT and the first call are one time.
        assert_eq!(r.first_tool_call_us, r.ttft_us, "{r:?}");
        assert_eq!(r.ttfc_us, r.ttft_us, "{r:?}");
    }
    assert!(
        !s.summary
            .warnings
            .iter()
            .any(|w| w.contains("tool calls were required")),
        "{:?}",
        s.summary.warnings
    );
}
