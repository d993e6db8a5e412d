//! `--thinking-budget` and the reasoning warnings against the built-in simulator, whose
//! answers are known: it thinks `--reasoning-tokens` tokens, or a request's
//! `thinking_token_budget` if that is less, one token a decode step, then answers.
//!
//! - A list of budgets runs the plan once per budget, each level labelled with its budget and
//!   its requests thinking exactly that many tokens (counted by the simulator's own log).
//! - A level still thinking when `--output-len` cut it has no TTFC and a warning that says to
//!   raise `--output-len` or cap the thinking; a budget sent to a server that streamed no
//!   reasoning, and required tool calls that never came, each get theirs.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::config::{BackendChoice, ChatExtras, RunConfig};
use servetop::sim::{self, AcceptLength, MetricsFlavor, SimConfig, SimHandle};
use servetop::workload::RequestCount;

mod sim_run;
use sim_run::finished;

const OUTPUT: u32 = 40;

async fn start(think: u64) -> SimHandle {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 1.0;
    c.batch_growth = 0.0;
    c.accept_length = AcceptLength::Fixed(1);
    c.metrics = Some(MetricsFlavor::Vllm);
    c.reasoning_tokens = think;
    sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

fn config(h: &SimHandle) -> RunConfig {
    RunConfig {
        backend: BackendChoice::Auto,
        concurrency: vec![1, 2],
        input_len: 50,
        output_len: OUTPUT,
        requests_per_level: RequestCount::Fixed(4),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        ..RunConfig::minimal(&h.url())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_budget_runs_the_plan_and_thinks_exactly_that_long() {
    let h = start(30).await;
    let s = finished(RunConfig {
        thinking_budgets: vec![5, 12],
        ..config(&h)
    })
    .await;
    let labels: Vec<String> = s
        .summary
        .sweep
        .iter()
        .map(servetop::summary::LevelSummary::label)
        .collect();
    assert_eq!(
        labels,
        [
            "C=1 (think 5)",
            "C=2 (think 5)",
            "C=1 (think 12)",
            "C=2 (think 12)"
        ]
    );
    for l in &s.summary.sweep {
        let b = l.thinking_budget.unwrap();
        let st = l.stats.as_ref().unwrap();
        assert_eq!(st.scalars.completed, 4, "{}", l.label());
        assert_eq!(st.scalars.mean_reasoning_tokens, Some(f64::from(b)));
        assert_eq!(st.scalars.mean_content_tokens, Some(f64::from(OUTPUT - b)));
        assert!(st.dists.ttfc_ms.is_some(), "{}", l.label());
        assert_eq!(st.scalars.unanswered_requests, 0);
    }
    // The simulator's own log: the warmup (no budget: all 30 thinking, within its 64 tokens),
    // then four streams of each level at its budget.
    let streams = h.log.lock().unwrap().streams.clone();
    let thought: Vec<u64> = streams.iter().skip(1).map(|l| l.reasoning_tokens).collect();
    assert_eq!(
        thought.iter().filter(|&&t| t == 5).count(),
        8,
        "{thought:?}"
    );
    assert_eq!(
        thought.iter().filter(|&&t| t == 12).count(),
        8,
        "{thought:?}"
    );
    assert!(
        !s.summary.warnings.iter().any(|w| w.contains("reasoning")),
        "a kept budget warns of nothing: {:?}",
        s.summary.warnings
    );
    // The findings: what each budget cost at C=1; the others rest on the first budget's plan.
    let f = &s.summary.findings;
    let budgets = f.iter().find(|f| f.id == "thinking_budgets").unwrap();
    assert_eq!(budgets.levels, ["C=1 (think 5)", "C=1 (think 12)"]);
    assert_eq!(budgets.values.get("reasoning_tokens_think_5"), Some(&5.0));
    assert_eq!(budgets.values.get("reasoning_tokens_think_12"), Some(&12.0));
    assert!(
        budgets.values["ttfc_p50_ms_think_12"] > budgets.values["ttfc_p50_ms_think_5"],
        "{budgets:?}"
    );
    for other in f.iter().filter(|f| f.id != "thinking_budgets") {
        assert!(
            other.levels.iter().all(|l| !l.contains("think 12")),
            "{other:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_still_thinking_at_the_output_length_has_no_ttfc_and_says_what_to_raise() {
    let h = start(u64::from(OUTPUT) + 10).await;
    let s = finished(RunConfig {
        concurrency: vec![2],
        chat: ChatExtras {
            chat_template_kwargs: Some(serde_json::json!({"enable_thinking": true})),
            ..ChatExtras::default()
        },
        ..config(&h)
    })
    .await;
    let st = s.summary.sweep[0].stats.as_ref().unwrap();
    assert_eq!(st.scalars.unanswered_requests, 4);
    assert_eq!(st.scalars.unanswered_stopped, 0);
    assert!(st.dists.ttfc_ms.is_none(), "TTFC never happened, not 0");
    assert_eq!(st.scalars.mean_reasoning_tokens, Some(f64::from(OUTPUT)));
    let w = s
        .summary
        .warnings
        .iter()
        .find(|w| w.starts_with("C=2: every output token of all 4 requests arrived as reasoning"))
        .unwrap_or_else(|| panic!("{:?}", s.summary.warnings));
    assert!(w.contains("--output-len (40)"), "{w}");
    assert!(w.contains("--thinking-budget"), "{w}");
    assert!(w.contains("--reasoning-parser"), "{w}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_answered_without_reasoning_and_required_tools_that_never_came_are_warned() {
    // A server that never thinks and calls no tools (simulated: tool_calls 0).
    let h = start(0).await;
    let s = finished(RunConfig {
        concurrency: vec![1],
        thinking_budgets: vec![8],
        chat: ChatExtras {
            tools: Some(ChatExtras::load_tools("builtin").unwrap()),
            tool_choice: Some("required".into()),
            chat_template_kwargs: None,
        },
        ..config(&h)
    })
    .await;
    // (The simulator's 1 ms steps also draw warnings about bursts and short levels.)
    let w: Vec<&String> = s
        .summary
        .warnings
        .iter()
        .filter(|w| w.starts_with("C=1 (think 8): ") && !w.contains("bursts"))
        .collect();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("C=1 (think 8): a thinking budget of 8 tokens was sent, yet none of 4 requests streamed any reasoning"),
        "{w:?}"
    );
    assert!(w[0].contains("--reasoning-parser"), "{w:?}");
    assert!(
        w[1].starts_with("C=1 (think 8): tool calls were required (--tool-choice required), yet none of 4 requests returned one"),
        "{w:?}"
    );
}
