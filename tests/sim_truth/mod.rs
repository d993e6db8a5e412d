//! The simulator's own record of each request (`GET /sim/requests`, or the log of an in-process
//! simulator) against servetop's: every request a run measured is found in the server's record
//! by its `X-Request-Id`, and its send time, first token and last token must match the times the
//! server read it and wrote its first and last frames within fixed tolerances ([`TOL_MS`] for
//! any one request, [`MEDIAN_TOL_MS`] for the middle of them). No tolerance
//! here grows with the machine's load: where the simulator itself fell far behind its own step
//! schedule, [`guard`] fails the test and says the machine was starved.

// Each suite uses its own share of these.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::Path;

use servetop::metrics::RequestRecord;
use servetop::sim::{SimHandle, SimRequestTrace, SimTruth};

/// How far one token's arrival in the client's record may trail the server's write of its
/// frame, in ms: the hand-over to the socket and the loopback delivery, where either process
/// can be preempted between its clock reading and the system call (seen: 9 ms with five
/// processes on two cores, 23 ms with another test suite running beside them). It catches a
/// gross error in one request; a systematic one shows at the median.
pub const TOL_MS: f64 = 50.0;

/// The same for the middle of a run's requests: a client that stamps its tokens late, or
/// early, by a millisecond shifts every request and fails here (seen: under 0.1 ms, loaded
/// or not).
pub const MEDIAN_TOL_MS: f64 = 1.0;

/// How far the server's read of a request may trail the client's send, in ms. This is the
/// server's own latency (accept, HTTP and JSON parsing in a debug build behind a busy event
/// loop: seen up to 28 ms, 15 ms at the median with four shards and another test suite on two
/// cores), so it is only bounded loosely; a client that stamped its send late is caught by the
/// lower bound instead: the server cannot read what was not sent yet.
pub const READ_TOL_MS: f64 = 200.0;

/// The share of a run the simulator may fall behind its own schedule before a test calls the
/// machine starved instead of judging servetop. A busy second core costs up to 7 % of a short
/// in-process run (seen: 127 ms of 1.8 s, its 4 ms steps woken late); the simulator stopped for
/// 6 s of a 24 s run is 25 %.
pub const MAX_SLIP_SHARE: f64 = 0.2;

/// The record of a simulator child at `url` (`http://host:port`).
pub fn fetch(url: &str) -> SimTruth {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    write!(
        c,
        "GET /sim/requests HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = Vec::new();
    c.read_to_end(&mut text).unwrap();
    let at = text
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    serde_json::from_slice(&text[at + 4..]).expect("the simulator's record")
}

/// The record of an in-process simulator.
pub fn of(h: &SimHandle) -> SimTruth {
    SimTruth::of(&h.log.lock().unwrap())
}

/// Why the simulator's timings say nothing about servetop over a run of `run_s` seconds, if
/// they do not: it slipped more than [`MAX_SLIP_SHARE`] of the run.
pub fn starved(t: &SimTruth, run_s: f64) -> Option<String> {
    let share = t.schedule_slip_ms / (run_s * 1e3).max(1.0);
    (share > MAX_SLIP_SHARE).then(|| {
        format!(
            "the simulator slipped {:.0} ms behind its own schedule over a {run_s:.1} s run ({:.1} %, more than {:.0} %): the machine is starved, so its timings say nothing about servetop",
            t.schedule_slip_ms,
            share * 100.0,
            MAX_SLIP_SHARE * 100.0
        )
    })
}

/// Fails the test, naming the slip, when the simulator was starved over `run_s` seconds.
pub fn guard(t: &SimTruth, run_s: f64) {
    if let Some(why) = starved(t, run_s) {
        panic!("{why}");
    }
    eprintln!(
        "simulator schedule slip: {:.1} ms over {run_s:.1} s",
        t.schedule_slip_ms
    );
}

/// The server's record of each request, by its `X-Request-Id`.
pub fn by_id(t: &SimTruth) -> HashMap<&str, &SimRequestTrace> {
    t.requests
        .iter()
        .filter_map(|r| Some((r.request_id.as_deref()?, r)))
        .collect()
}

/// The id servetop sends with a record's request.
pub fn id_of(r: &RequestRecord) -> String {
    id_with("servetop", r)
}

/// The id a run whose ids begin with `prefix` sends (`servetop-shardIofN` on a shard).
pub fn id_with(prefix: &str, r: &RequestRecord) -> String {
    if r.warmup {
        format!("{prefix}-warmup-{}", r.index)
    } else {
        format!("{prefix}-{}-{}", r.level, r.index)
    }
}

/// The differences between the client's and the server's times of each request, in ms.
#[derive(Debug, Default, Clone)]
pub struct Agreement {
    pub requests: usize,
    /// Server read − client send.
    pub send_ms: Vec<f64>,
    /// Client first token − server first frame.
    pub first_ms: Vec<f64>,
    /// Client last token − server last frame.
    pub last_ms: Vec<f64>,
}

/// One record against the server's record of the same request; `origin_unix_us` is its
/// level's time zero. Panics, saying which request and what differed, beyond the tolerances.
pub fn agree(r: &RequestRecord, s: &SimRequestTrace, origin_unix_us: u64, into: &mut Agreement) {
    let id = s.request_id.clone().unwrap_or_default();
    assert!(s.completed, "{id}: the server never wrote its last token");
    assert_eq!(
        r.output_tokens,
        s.tokens(),
        "{id}: output tokens against the tokens the server wrote"
    );
    let send = origin_unix_us + r.send_at_us;
    let ms = |a: u64, b: u64| (a as f64 - b as f64) / 1e3;
    let send_ms = ms(s.received_unix_us, send);
    let first_ms = ms(send + r.ttft_us.unwrap(), s.first_write_unix_us().unwrap());
    let last_ms = ms(send + r.e2e_us.unwrap(), s.last_write_unix_us().unwrap());
    // The same machine's clock on both sides: an event is seen after it happened, give or take
    // the microsecond between the level's origin and its reading of the Unix clock.
    for (what, d, tol) in [
        ("the server read the request", send_ms, READ_TOL_MS),
        ("first token", first_ms, TOL_MS),
        ("last token", last_ms, TOL_MS),
    ] {
        assert!(
            (-1.0..=tol).contains(&d),
            "{id}: {what} {d:.3} ms apart in the client's and the server's records (allowed -1 to {tol} ms)"
        );
    }
    into.requests += 1;
    into.send_ms.push(send_ms);
    into.first_ms.push(first_ms);
    into.last_ms.push(last_ms);
}

/// Every successful, measured record against the server's record: `origins` gives each level's
/// time zero. Each request within the tolerances, and the medians within theirs.
pub fn agree_all(
    records: &[RequestRecord],
    origins: &HashMap<u32, u64>,
    t: &SimTruth,
) -> Agreement {
    agree_all_with(records, origins, t, "servetop")
}

/// [`agree_all`] for a run whose request ids begin with `prefix`.
pub fn agree_all_with(
    records: &[RequestRecord],
    origins: &HashMap<u32, u64>,
    t: &SimTruth,
    prefix: &str,
) -> Agreement {
    let ids = by_id(t);
    let mut all = Agreement::default();
    for r in records.iter().filter(|r| r.is_ok() && !r.warmup) {
        let id = id_with(prefix, r);
        let s = ids
            .get(id.as_str())
            .unwrap_or_else(|| panic!("{id} is not in the server's record"));
        agree(r, s, origins[&r.level], &mut all);
    }
    assert!(all.requests > 0, "no measured request to compare");
    let worst = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
    let (send, first, last) = (
        nearest_rank(&all.send_ms, 50.0),
        nearest_rank(&all.first_ms, 50.0),
        nearest_rank(&all.last_ms, 50.0),
    );
    eprintln!(
        "{} requests against the server's record: client − server median / largest {first:.3} / {:.3} ms (first token), {last:.3} / {:.3} ms (last token); server read − send {send:.3} / {:.3} ms",
        all.requests,
        worst(&all.first_ms),
        worst(&all.last_ms),
        worst(&all.send_ms)
    );
    for (what, m, tol) in [
        ("first tokens", first, MEDIAN_TOL_MS),
        ("last tokens", last, MEDIAN_TOL_MS),
    ] {
        assert!(
            m.abs() <= tol,
            "the median request's {what} {m:.3} ms apart in the client's and the server's records (allowed {tol} ms)"
        );
    }
    all
}

/// A run directory's records (`requests.jsonl`) and each level's time zero (`results.json`).
pub fn run_records(dir: &Path) -> (Vec<RequestRecord>, HashMap<u32, u64>) {
    let records = std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let mut origins = HashMap::new();
    for kind in ["sweep", "long_context", "rates", "traces", "multi_turn"] {
        for l in results[kind].as_array().into_iter().flatten() {
            if let (Some(i), Some(o)) = (l["index"].as_u64(), l["origin_unix_us"].as_u64()) {
                origins.insert(i as u32, o);
            }
        }
    }
    (records, origins)
}

/// Nearest-rank percentile of values (sorted here).
pub fn nearest_rank(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// The server's record of level `level`'s measured requests (ids `servetop-LEVEL-INDEX`).
pub fn of_level(t: &SimTruth, level: u32) -> Vec<&SimRequestTrace> {
    let prefix = format!("servetop-{level}-");
    t.requests
        .iter()
        .filter(|r| r.completed)
        .filter(|r| {
            r.request_id
                .as_deref()
                .is_some_and(|id| id.starts_with(&prefix))
        })
        .collect()
}

/// A request's time per output token as the server wrote it: its last frame less its first,
/// over the tokens after the first, in ms.
pub fn server_tpot_ms(r: &SimRequestTrace) -> Option<f64> {
    let n = r.tokens();
    let span = r.last_write_unix_us()? - r.first_write_unix_us()?;
    (n > 1).then(|| span as f64 / 1e3 / (n - 1) as f64)
}

/// From the server's read of a request to its first frame, in ms.
pub fn server_ttft_ms(r: &SimRequestTrace) -> Option<f64> {
    Some((r.first_write_unix_us()? - r.received_unix_us) as f64 / 1e3)
}

/// For each measured, successful record, from servetop's send to the server-side instant `at`
/// picks from the server's record of it, in ms: the figure the server's record gives that
/// request (the client's own reading trails it by the delivery alone). Records in file order.
pub fn server_seen_ms(
    records: &[RequestRecord],
    origins: &HashMap<u32, u64>,
    t: &SimTruth,
    at: impl Fn(&SimRequestTrace) -> Option<u64>,
) -> Vec<f64> {
    let ids = by_id(t);
    records
        .iter()
        .filter(|r| r.is_ok() && !r.warmup)
        .map(|r| {
            let s = ids[id_of(r).as_str()];
            let send = origins[&r.level] + r.send_at_us;
            (at(s).unwrap() as f64 - send as f64) / 1e3
        })
        .collect()
}

/// The TTFT the server's record gives each measured, successful record: from servetop's send to
/// the server's first frame, in ms.
pub fn server_seen_ttft_ms(
    records: &[RequestRecord],
    origins: &HashMap<u32, u64>,
    t: &SimTruth,
) -> Vec<f64> {
    server_seen_ms(records, origins, t, SimRequestTrace::first_write_unix_us)
}
