//! Multi-turn chats and shared prefixes against the built-in simulator, with its prefix cache on
//! and off. (The same against llama-server is in `tests/llama_server.rs`.)
//!
//! What the simulator's configuration says should happen, and why:
//! - It prefills at `PREFILL` tokens/s, one prompt at a time, in pieces of at most 64K tokens;
//!   a request's TTFT is the prefill of its uncached tokens (plus waiting for earlier prefills).
//! - Its cache holds 16-token blocks. Turn k ≥ 2 of a conversation resends turn k − 1's prompt
//!   and reply, which the cache kept when that turn ended, so all of it but the last partial
//!   block is cached: what remains to prefill is the new user message (`FOLLOWUP` tokens plus the
//!   template's 4 per message) and under 16 + 4 tokens of the reply's tail. Turn 1 prefills
//!   `INPUT` tokens less the shared system prompt once some conversation has cached it.
//! - So with the cache, later turns' TTFT is about (FOLLOWUP + 24) / PREFILL ≈ 4 ms against
//!   turn 1's ≥ (INPUT − PREFIX) / PREFILL = 80 ms; without it, turn k prefills its whole history,
//!   which grows by FOLLOWUP + OUTPUT + 8 tokens a turn, so TTFT grows with k.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;

use servetop::config::{MultiTurn, RunConfig};
use servetop::metrics::LevelStats;
use servetop::run::session::Session;
use servetop::sim::{self, AcceptLength, SimConfig, SimHandle};
use servetop::workload::RequestCount;

mod sim_run;
use sim_run::finished;

const PREFILL: f64 = 20_000.0;
const INPUT: u64 = 2000;
const PREFIX: u64 = 400;
const FOLLOWUP: u64 = 60;
const OUTPUT: u32 = 20;
const TURNS: u32 = 4;
const CONVERSATIONS: u32 = 6;

fn sim_config(prefix_cache: bool) -> SimConfig {
    let mut c = SimConfig::preset("fast").unwrap();
    c.decode_step_ms = 5.0;
    c.accept_length = AcceptLength::Fixed(1);
    c.prefill_tokens_per_s = PREFILL;
    c.prefix_cache = prefix_cache;
    c
}

async fn start(sim: SimConfig) -> SimHandle {
    sim::start(sim, SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("simulator starts")
}

async fn run(h: &SimHandle, shared_prefix: u64) -> Session {
    finished(RunConfig {
        concurrency: vec![],
        input_len: INPUT,
        output_len: OUTPUT,
        shared_prefix_len: shared_prefix,
        multi_turn: Some(MultiTurn {
            turns: TURNS,
            conversations: CONVERSATIONS,
            concurrency: 2,
            followup_len: FOLLOWUP,
        }),
        requests_per_level: RequestCount::Fixed(1),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        ..RunConfig::minimal(&h.url())
    })
    .await
}

fn level(s: &Session) -> &LevelStats {
    s.summary.multi_turn[0]
        .stats
        .as_ref()
        .expect("level has stats")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_turns_are_served_from_the_prefix_cache() {
    let h = start(sim_config(true)).await;
    let s = run(&h, PREFIX).await;
    let st = level(&s);
    assert_eq!(st.scalars.completed, u64::from(TURNS * CONVERSATIONS));
    assert_eq!(st.scalars.failed, 0);
    let turns = &st.scalars.turns;
    assert_eq!(turns.len(), TURNS as usize);
    for t in turns {
        println!(
            "turn {}: input {:.0}, cached {:.0} ({:.1} %), TTFT mean {:.1} ms p90 {:.1} ms",
            t.turn,
            t.mean_input_tokens.unwrap(),
            t.mean_cached_tokens.unwrap(),
            t.cache_hit_rate.unwrap() * 100.0,
            t.mean_ttft_ms.unwrap(),
            t.p90_ttft_ms.unwrap()
        );
        assert_eq!(t.completed, u64::from(CONVERSATIONS));
    }
    // The history grows by the reply, the follow-up and two message openings per turn.
    for w in turns.windows(2) {
        let grew = w[1].mean_input_tokens.unwrap() - w[0].mean_input_tokens.unwrap();
        assert!(
            (grew - (FOLLOWUP + u64::from(OUTPUT) + 8) as f64).abs() < 0.5,
            "history grew by {grew}"
        );
    }
    // Turn 1: only the shared system prompt can be cached, 400 tokens = 25 whole blocks, once a
    // prefill has put it in the cache. Conversation 1 misses (nothing is cached yet);
    // conversations 3 to 6 start after a whole conversation has ended and hit. Conversation 2
    // is sent beside conversation 1 and hits only if it reaches the simulator after conversation
    // 1's prefill began (the cache is looked up on admission): 4 or 5 hits of 400 tokens.
    let t1 = &turns[0];
    let turn1_cached = (t1.mean_cached_tokens.unwrap() * f64::from(CONVERSATIONS)).round() as u64;
    assert!(
        turn1_cached == 4 * PREFIX || turn1_cached == 5 * PREFIX,
        "turn 1 cached {turn1_cached} tokens in all"
    );
    // Later turns: all but the new message and the reply's last partial block.
    for t in &turns[1..] {
        let uncached = t.mean_input_tokens.unwrap() - t.mean_cached_tokens.unwrap();
        // The new message is never in the cache; at most the message openings and the
        // reply's last partial 16-token block come with it.
        assert!(
            (FOLLOWUP as f64..=(FOLLOWUP + 4 + 16 + 4) as f64).contains(&uncached),
            "turn {}: {uncached} tokens not cached",
            t.turn
        );
        // TTFT: ≈ 4 ms of prefill against turn 1's ≥ 80 ms.
        assert!(
            t.mean_ttft_ms.unwrap() < 0.3 * t1.mean_ttft_ms.unwrap(),
            "turn {} TTFT {} vs turn 1 {}",
            t.turn,
            t.mean_ttft_ms.unwrap(),
            t1.mean_ttft_ms.unwrap()
        );
    }
    assert!(t1.mean_ttft_ms.unwrap() >= (INPUT - PREFIX) as f64 / PREFILL * 1000.0 * 0.95);
    // What the client reports is what the simulator did (the warmup's prompt is random: 0).
    let served: u64 = h
        .log
        .lock()
        .unwrap()
        .requests
        .iter()
        .map(|r| r.cached_tokens)
        .sum();
    assert_eq!(st.scalars.total_cached_tokens, Some(served));
    assert_eq!(
        st.scalars.cache_reports,
        u64::from(TURNS * CONVERSATIONS),
        "every request reported its cached tokens"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_prefix_cache_every_turn_prefills_its_whole_history() {
    let h = start(sim_config(false)).await;
    let s = run(&h, 0).await;
    let turns = &level(&s).scalars.turns;
    assert_eq!(turns.len(), TURNS as usize);
    for t in turns {
        // The server reports no cache (nor a zero): hit rate unknown, not 0 %.
        assert_eq!(t.cache_hit_rate, None);
        let prefill_ms = t.mean_input_tokens.unwrap() / PREFILL * 1000.0;
        assert!(
            t.mean_ttft_ms.unwrap() >= 0.95 * prefill_ms,
            "turn {}: TTFT {} below its prefill {prefill_ms}",
            t.turn,
            t.mean_ttft_ms.unwrap()
        );
    }
    // Each turn resends the whole history, so its prompt grows turn by turn (and, above, its
    // TTFT holds that whole prompt's prefill). Turn medians are not compared: the first turns
    // of every conversation arrive together and queue for prefill, later ones drift apart, so
    // queueing can put turn 1's median above the last turn's.
    for w in turns.windows(2) {
        assert!(
            w[1].mean_input_tokens.unwrap() > w[0].mean_input_tokens.unwrap() + FOLLOWUP as f64,
            "turn {} sends {} tokens, turn {} {}",
            w[1].turn,
            w[1].mean_input_tokens.unwrap(),
            w[0].turn,
            w[0].mean_input_tokens.unwrap()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_prefix_is_cached_across_requests_of_a_sweep() {
    let h = start(sim_config(true)).await;
    let cfg = RunConfig {
        concurrency: vec![1],
        input_len: 1000,
        output_len: 8,
        shared_prefix_len: 800,
        requests_per_level: RequestCount::Fixed(6),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        ..RunConfig::minimal(&h.url())
    };
    let s = finished(cfg).await;
    let sc = &s.summary.sweep[0].stats.as_ref().unwrap().scalars;
    assert_eq!(sc.completed, 6);
    // Every prompt is exactly 1000 tokens and starts with the same 800; the first request
    // caches them (the warmup's prompt is random), the other five hit 50 blocks = 800 tokens.
    assert_eq!(sc.mean_input_tokens, Some(1000.0));
    assert_eq!(sc.total_cached_tokens, Some(5 * 800));
    let rate = sc.prefix_cache_hit_rate.unwrap();
    assert!((rate - 4000.0 / 6000.0).abs() < 1e-9, "hit rate {rate}");
}

/// `--dataset`: every request's prompt is one of the file's, its length the server's count of
/// that text, and its output length the entry's (`output_len`, or the reference reply's length).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dataset_prompts_and_output_lengths_are_the_files() {
    let h = start(sim_config(false)).await;
    let path = std::env::temp_dir().join(format!("servetop-ds-e2e-{}.jsonl", std::process::id()));
    // The simulator counts ceil(chars / 4) tokens per word: "alpha beta gamma" is 2 + 1 + 2.
    std::fs::write(
        &path,
        concat!(
            "{\"prompt\": \"alpha beta gamma\", \"output_len\": 5}\n",
            "{\"conversations\": [{\"from\": \"human\", \"value\": \"the quick brown fox\"}, {\"from\": \"gpt\", \"value\": \"a b c d e f g\"}]}\n",
        ),
    )
    .unwrap();
    let cfg = RunConfig {
        concurrency: vec![2],
        dataset: Some(path),
        requests_per_level: RequestCount::Fixed(12),
        api_key_env: "SERVETOP_TEST_NO_KEY".into(),
        ..RunConfig::minimal(&h.url())
    };
    let s = finished(cfg).await;
    let sc = &s.summary.sweep[0].stats.as_ref().unwrap().scalars;
    assert_eq!(sc.completed, 12);
    // What the simulator served: only the file's two prompts, each with its own output length.
    let log = h.log.lock().unwrap();
    let served: Vec<(u64, u64)> = log
        .requests
        .iter()
        .skip(1) // the warmup's random prompt
        .map(|r| (r.input_tokens, r.output_tokens))
        .collect();
    assert_eq!(served.len(), 12);
    for (input, output) in &served {
        assert!(
            matches!((input, output), (5, 5) | (6, 7)),
            "({input}, {output}) is neither entry"
        );
    }
    // "the quick brown fox" is 1 + 2 + 2 + 1 tokens; its reply "a b c d e f g" 7.
    assert!(served.contains(&(5, 5)) && served.contains(&(6, 7)));
    assert_eq!(
        sc.total_output_tokens,
        served.iter().map(|(_, o)| o).sum::<u64>()
    );
}

/// Chats that outgrow the server's context: said before the level runs, with the flag to raise;
/// the turn that does not fit fails as too long and its conversation stops there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chats_that_outgrow_the_context_are_announced_and_stop_at_the_limit() {
    let mut sim = sim_config(true);
    // Turn 2 needs 2099 + 20 tokens, turn 3 2187 + 20 (see the first test).
    sim.context_length = 2150;
    let h = start(sim).await;
    let s = run(&h, PREFIX).await;
    let warned = s
        .summary
        .warnings
        .iter()
        .find(|w| w.contains("history will reach about"))
        .expect("a warning before the level");
    assert!(
        warned.contains("context limit of 2150") && warned.contains("--context-length"),
        "{warned}"
    );
    let st = s.summary.multi_turn[0].stats.as_ref().unwrap();
    let turns = &st.scalars.turns;
    assert_eq!(turns.len(), 3, "no conversation gets past turn 3");
    assert_eq!((turns[0].completed, turns[1].completed), (6, 6));
    assert_eq!((turns[2].completed, turns[2].failed), (0, 6));
    assert_eq!(
        st.scalars.failures.get("context_too_long").map(|f| f.count),
        Some(6)
    );
}
