//! An accuracy case's timing errors: when the firehose wrote each token event (its record per
//! `X-Request-Id`) against when the client's record says the event arrived, on one clock.

use std::path::Path;

use super::{CaseResult, wave};
use crate::metrics::{Dist, RequestRecord};

/// `GET path` of the firehose over a plain socket (this side is synchronous), its JSON body.
fn fetch<T: serde::de::DeserializeOwned>(url: &str, path: &str) -> Result<T, String> {
    use std::io::{Read, Write};
    let host = url.trim_start_matches("http://");
    let mut sock =
        std::net::TcpStream::connect(host).map_err(|e| format!("firehose {host}: {e}"))?;
    write!(
        sock,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    sock.read_to_end(&mut buf).map_err(|e| e.to_string())?;
    let body = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| &buf[i + 4..])
        .ok_or("firehose: no HTTP body")?;
    serde_json::from_slice(body).map_err(|e| format!("firehose {path}: {e}"))
}

/// An event this late after its write ended, in a request with no held read, breaks the held
/// flag's promise (a stall the probe cannot see is under about 4 ms).
pub const UNHELD_LATE_US: u64 = 5_000;

/// What the firehose's record says of a case's readings.
struct Timing {
    /// Every token event's error and each request's first's, µs.
    all: Dist,
    first: Dist,
    /// Requests found in the record.
    matched: usize,
    sent: Vec<wave::Sent>,
    /// Events stamped more than [`UNHELD_LATE_US`] after their write ended, and those of them in
    /// requests that counted no held read.
    late: u64,
    late_unheld: u64,
}

/// Client arrival minus write time for every token event and for each request's first, how many
/// requests matched a write, and each request's index, send time and first error.
fn timing_errors(
    dir: &Path,
    writes: &crate::sim::firehose::Writes,
    levels: &str,
) -> Result<Timing, String> {
    let results: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("results.json")).map_err(|e| format!("results.json: {e}"))?,
    )
    .map_err(|e| format!("results.json: {e}"))?;
    let origin = results[levels][0]["origin_unix_us"]
        .as_u64()
        .ok_or("results.json has no origin_unix_us")?;
    let text = std::fs::read_to_string(dir.join("requests.jsonl"))
        .map_err(|e| format!("requests.jsonl: {e}"))?;
    let (mut all, mut first) = (Dist::new(), Dist::new());
    let mut matched = 0;
    let mut sent = Vec::new();
    let (mut late, mut late_unheld) = (0, 0);
    for line in text.lines() {
        let r: RequestRecord = serde_json::from_str(line).map_err(|e| e.to_string())?;
        if r.warmup || !r.is_ok() {
            continue;
        }
        let Some(w) = writes.get(&format!("servetop-{}-{}", r.level, r.index)) else {
            sent.push((r.index, r.send_at_us, None));
            continue;
        };
        matched += 1;
        let mut first_error = None;
        let written = w
            .iter()
            .flat_map(|&(t, n, end)| std::iter::repeat_n((t, end), n as usize));
        let mut arrivals = r
            .chunks
            .iter()
            .flat_map(|c| std::iter::repeat_n(origin + r.send_at_us + c.t_us, c.tokens as usize));
        for (k, (wt, end)) in written.enumerate() {
            let Some(at) = arrivals.next() else { break };
            // Clocks agree to the microsecond on one machine; an arrival can only follow its write.
            let e = at.saturating_sub(wt);
            all.record(e);
            if k == 0 {
                first.record(e);
                first_error = Some(e);
            }
            if at.saturating_sub(end) > UNHELD_LATE_US {
                late += 1;
                late_unheld += u64::from(r.held_reads == 0);
            }
        }
        sent.push((r.index, r.send_at_us, first_error));
    }
    Ok(Timing {
        all,
        first,
        matched,
        sent,
        late,
        late_unheld,
    })
}

/// An accuracy case's timing errors: the firehose's record of each write against the client's
/// record of each token event (kept beside the case's requests.jsonl as
/// `firehose-writes.json`, to look into the tail).
pub(super) fn add_timing_errors(
    r: &mut CaseResult,
    url: &str,
    d: &Path,
) -> Result<Vec<wave::Sent>, String> {
    let writes: crate::sim::firehose::Writes = fetch(url, "/firehose/writes")?;
    let pace: crate::sim::firehose::Pace = fetch(url, "/firehose/pace")?;
    r.server_late_p99_ms = pace.late_p99_ms;
    // The case's one level: an agent case's is a level of sessions.
    let levels = if r.kind == super::agent::KIND {
        "sessions"
    } else {
        "sweep"
    };
    // Kept beside the case's requests.jsonl, to look into the tail.
    let _ = std::fs::write(
        d.join("firehose-writes.json"),
        serde_json::to_vec(&writes).unwrap_or_default(),
    );
    let Timing {
        all,
        first,
        matched,
        sent,
        late,
        late_unheld,
    } = timing_errors(d, &writes, levels)?;
    r.late_events = Some(late);
    r.late_unheld_events = Some(late_unheld);
    r.timed_events = Some(all.count());
    if matched == 0 {
        return Err("no request matched the firehose's record (is X-Request-Id sent?)".into());
    }
    // µs values; stats in ms.
    let (all, first) = (all.stats(1e-3), first.stats(1e-3));
    r.timing_error_p50_ms = all.as_ref().map(|d| d.p50);
    r.timing_error_p99_ms = all.as_ref().map(|d| d.p99);
    r.ttft_error_p50_ms = first.as_ref().map(|d| d.p50);
    r.ttft_error_p99_ms = first.as_ref().map(|d| d.p99);
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each token event is timed against its own write; one stamped more than 5 ms after its
    /// write ended counts late, and late unheld only in a request that flagged no held read.
    #[test]
    fn late_events_are_counted_and_told_held_or_not() {
        let dir = std::env::temp_dir().join(format!("servetop-timing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let origin = 1_000_000u64;
        std::fs::write(
            dir.join("results.json"),
            format!(r#"{{"sweep":[{{"origin_unix_us":{origin}}}]}}"#),
        )
        .unwrap();
        // Request 0 flagged a held read; request 1 did not. Each carries three token events
        // in reads at 20, 60 (two events: the first written at 40) and 80 ms after its send.
        let line = |index: u32, held: u32| {
            format!(
                r#"{{"level":0,"index":{index},"warmup":false,"sched_at_us":0,"send_at_us":0,"end_at_us":90000,"status":"ok","planned_input_tokens":4,"input_tokens":4,"input_source":"usage","output_tokens":4,"output_source":"usage","chunk_source":"per_chunk_usage","ttft_us":20000,"e2e_us":80000,"chunks":[{{"t_us":20000,"tokens":1}},{{"t_us":60000,"tokens":2}},{{"t_us":80000,"tokens":1}}],"held_reads":{held}}}"#
            )
        };
        std::fs::write(
            dir.join("requests.jsonl"),
            format!("{}\n{}\n", line(0, 1), line(1, 0)),
        )
        .unwrap();
        // Writes at 20, 40, 60 and 80 ms after the send, each ending 10 µs after it began.
        let w = |ms: u64| (origin + ms * 1000, 1, origin + ms * 1000 + 10);
        let writes: crate::sim::firehose::Writes = ["servetop-0-0", "servetop-0-1"]
            .into_iter()
            .map(|id| (id.to_string(), vec![w(20), w(40), w(60), w(80)]))
            .collect();
        let t = timing_errors(&dir, &writes, "sweep").unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((t.matched, t.all.count()), (2, 8));
        // The event written at 40 ms and read at 60, in each request.
        assert_eq!((t.late, t.late_unheld), (2, 1));
    }
}
