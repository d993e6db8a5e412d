//! A level's prompts made before it starts, several at once: sizing a prompt asks the server
//! (`/tokenize`) two or three times, one round trip after another, and made one after another
//! the prompts of a large level took longer than the level (measured against the firehose on
//! this project's 2-core machine: 60,000 prompts of 32 tokens, 15 s of sizing before a level of
//! 6.5 s; the 40,000 of a C=10,000 case, about 11 s).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::client::RequestSpec;
use crate::workload::LevelSpec;
use crate::workload::prompt::PromptFactory;
use crate::workload::requests::make_request;

/// Prompts made at once before a level. A fixed number, not the machine's cores: each lane
/// learns the tokens a word as it goes from its own prompts (where its next search starts), so
/// a prompt's text follows the lane that made it, and the same run on another machine makes the
/// same texts.
pub(super) const LANES: u32 = 8;

/// Below this many prompts one lane makes them: a few prompts take a few round trips anyway.
const LANES_FROM: u32 = 4 * LANES;

/// Requests a lane makes ahead of the one whose turn it is to be handed out: the lanes keep
/// about the same pace, and a level's prepared requests are held once, in its queue (at
/// C=10,000, 40,000 of them), not a second time in the lanes' output.
const LANE_ROOM: usize = 64;

/// Makes the first `ahead` requests of `spec` and hands each to `put` in index order; `false`
/// when the run was cancelled before they were all made. A trace's level makes them in one
/// lane: its prompts share prefix blocks a lane builds once and keeps, which lanes of their
/// own would each build again. `factory` keeps the first lane's learning (the tokens a word,
/// the shared prefix) for the prompts made after.
pub(super) async fn make_ahead(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    (ahead, patience): (u32, Duration),
    cancel: &CancellationToken,
    mut put: impl FnMut(u32, RequestSpec),
) -> Result<bool, String> {
    if ahead < LANES_FROM || spec.trace.is_some() || factory.trace().is_some() {
        for i in 0..ahead {
            if cancel.is_cancelled() {
                return Ok(false);
            }
            put(i, make_request_patiently(factory, spec, i, patience).await?);
        }
        return Ok(true);
    }
    let mut set = tokio::task::JoinSet::new();
    let mut made = Vec::with_capacity(LANES as usize);
    for k in 0..LANES {
        let (tx, rx) = tokio::sync::mpsc::channel(LANE_ROOM);
        made.push(rx);
        let (mut f, spec, cancel) = (factory.clone(), spec.clone(), cancel.clone());
        set.spawn(async move {
            for i in (k..ahead).step_by(LANES as usize) {
                if cancel.is_cancelled() {
                    break;
                }
                let r = make_request_patiently(&mut f, &spec, i, patience).await;
                let failed = r.is_err();
                if tx.send(r).await.is_err() || failed {
                    break;
                }
            }
            (k, f)
        });
    }
    // Returning drops the set, which stops the lanes still making.
    for i in 0..ahead {
        match made[(i % LANES) as usize].recv().await {
            Some(Ok(r)) => put(i, r),
            Some(Err(e)) => return Err(e),
            None if cancel.is_cancelled() => return Ok(false),
            None => return Err(format!("prompt lane {} stopped", i % LANES)),
        }
    }
    while let Some(joined) = set.join_next().await {
        let (k, f) = joined.map_err(|e| format!("a prompt lane stopped: {e}"))?;
        if k == 0 {
            *factory = f;
        }
    }
    Ok(true)
}

/// [`make_request`], which asks the server to size a prompt (/tokenize): while the server is
/// away (an outage that began in the level before), it waits as long as the workers do
/// (`patience`, `--server-wait`), then gives up with the last error.
pub(super) async fn make_request_patiently(
    factory: &mut PromptFactory,
    spec: &LevelSpec,
    i: u32,
    patience: Duration,
) -> Result<RequestSpec, String> {
    let started = Instant::now();
    loop {
        match make_request(factory, spec, i).await {
            Ok(r) => return Ok(r),
            Err(e) if started.elapsed() >= patience => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::LevelKind;
    use crate::workload::prompt::Counter;

    /// A counter of one token a word: a prompt's text is then its index's alone, whatever the
    /// lane that made it learned before.
    fn factory() -> PromptFactory {
        let counter = Counter::Probe {
            slope: 1.0,
            intercept: 0.0,
        };
        PromptFactory::new(counter, 11)
    }

    /// Lanes put back in order: request i is the one made for index i, as made one after another
    /// with one factory (the prompts differ from index to index, so a lane's requests put in
    /// another's places, or one lane's put one place off, would not match).
    #[tokio::test]
    async fn the_lanes_requests_come_back_in_their_indexes_places() {
        let cancel = CancellationToken::new();
        for n in [LANES_FROM, 203, 1000] {
            let spec = LevelSpec::new(0, LevelKind::Sweep, 4, (40, 8), n);
            let mut many = Vec::new();
            let put = |i, r| {
                assert_eq!(i as usize, many.len(), "handed out in index order");
                many.push(r);
            };
            let done = make_ahead(&mut factory(), &spec, (n, Duration::ZERO), &cancel, put).await;
            assert_eq!(done, Ok(true));
            let mut one = Vec::new();
            let mut f = factory();
            for i in 0..n {
                one.push(make_request(&mut f, &spec, i).await.unwrap());
            }
            assert_eq!(many.len(), n as usize);
            let texts: std::collections::HashSet<&str> = one.iter().map(|r| &*r.prompt).collect();
            assert_eq!(texts.len(), n as usize, "every index its own prompt");
            for (i, (a, b)) in many.iter().zip(&one).enumerate() {
                assert_eq!(a.prompt, b.prompt, "request {i} of {n}");
                assert_eq!(a.counted_input_tokens, b.counted_input_tokens);
            }
        }
    }

    /// A run cancelled before its prompts are made makes none, and says so.
    #[tokio::test]
    async fn a_cancelled_run_makes_no_prompts() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        for n in [3, 500] {
            let spec = LevelSpec::new(0, LevelKind::Sweep, 4, (40, 8), n);
            let mut handed = 0;
            let put = |_, _| handed += 1;
            let done = make_ahead(&mut factory(), &spec, (n, Duration::ZERO), &cancel, put).await;
            assert_eq!(done, Ok(false), "{n} prompts");
            assert_eq!(handed, 0);
        }
    }

    /// A prompt that cannot be sized ends the preparation with its error, lanes or not,
    /// once the patience is spent (none here): nothing is handed out after it.
    #[tokio::test]
    async fn a_prompt_that_cannot_be_sized_ends_it_with_its_error() {
        let cancel = CancellationToken::new();
        // A port nothing listens on: every count fails to connect.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        for n in [3, 500] {
            let counter = Counter::Server {
                http: reqwest::Client::new(),
                url: format!("http://127.0.0.1:{port}/tokenize"),
                engine: crate::client::Engine::Vllm,
                model: "m".into(),
                api_key: None,
            };
            let spec = LevelSpec::new(0, LevelKind::Sweep, 4, (40, 8), n);
            let mut handed = 0;
            let put = |_, _| handed += 1;
            let mut f = PromptFactory::new(counter, 1);
            let done = make_ahead(&mut f, &spec, (n, Duration::ZERO), &cancel, put).await;
            let e = done.expect_err("no server to count with");
            assert!(e.starts_with("/tokenize"), "{e}");
            assert_eq!(handed, 0, "{n} prompts");
        }
    }
}
