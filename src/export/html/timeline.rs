//! report.html's per-request timeline: swim lanes of each request's client wait, time to first
//! token and decode, from requests.jsonl. Requests are packed into lanes (a lane holds requests
//! that never overlap; as many lanes as were ever in flight at once). Up to [`ALL_UP_TO`]
//! requests are all drawn; beyond it, every k-th, and the page says which.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::path::Path;

use serde_json::{Value, json};

use crate::metrics::{Outcome, RequestRecord};
use crate::summary::RunSummary;

/// Every request is drawn up to this many; beyond it, a stated sample of about this many.
pub const ALL_UP_TO: usize = 2000;

/// The measured requests of a run directory's requests.jsonl (warmups left out; lines that do
/// not parse skipped); none when the file is missing.
pub fn load_requests(dir: &Path) -> Vec<RequestRecord> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str::<RequestRecord>(l).ok())
                .filter(|r| !r.warmup)
                .collect()
        })
        .unwrap_or_default()
}

/// Milliseconds, to a tenth (the page's numbers stay short).
fn tenth(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

/// One request's moments in ms since the run started: scheduled, sent, first token, ended.
struct Span {
    sched: f64,
    send: f64,
    first: Option<f64>,
    end: f64,
    ok: bool,
    level: u32,
}

/// The timeline's data for the page, on the axis of the run's other time charts (ms since
/// `origin_ms`, the run's start): the lanes' columns (`lane`, `sched`, `send`, `first`, `end`,
/// `ok`, `level`), how many requests there were and were drawn, the sampling step, each
/// level's label by its index and where each level started.
pub fn timeline(records: &[RequestRecord], summary: &RunSummary, origin_ms: i64) -> Value {
    // A record's times are offsets from its level's start.
    let starts: BTreeMap<u32, i64> = summary
        .levels()
        .filter_map(|l| Some((l.index, l.started_at_unix_ms?)))
        .collect();
    let spans: Vec<Span> = records
        .iter()
        .filter_map(|r| {
            let base = (starts.get(&r.level)? - origin_ms) as f64;
            let at = |us: u64| base + us as f64 / 1000.0;
            let sched = r.sched_at_us.min(r.send_at_us);
            Some(Span {
                sched: at(sched),
                send: at(r.send_at_us),
                first: r.ttft_us.map(|t| at(r.send_at_us + t)),
                end: at(r.end_at_us.max(r.send_at_us)),
                ok: r.outcome == Outcome::Ok,
                level: r.level,
            })
        })
        .collect();
    let total = spans.len();
    let every = total.div_ceil(ALL_UP_TO).max(1);
    let mut drawn: Vec<&Span> = spans.iter().step_by(every).collect();
    drawn.sort_by(|a, b| a.sched.total_cmp(&b.sched));
    // Interval partitioning: each request into the free lane of lowest number. Times in µs
    // as integers for the heap's order.
    let us = |ms: f64| (ms * 1000.0).round() as i64;
    let mut busy: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut free: BinaryHeap<Reverse<usize>> = BinaryHeap::new();
    let mut lanes = 0usize;
    let mut cols: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for r in &drawn {
        while let Some(Reverse((end, lane))) = busy.peek().copied() {
            if end > us(r.sched) {
                break;
            }
            busy.pop();
            free.push(Reverse(lane));
        }
        let lane = free.pop().map_or_else(
            || {
                lanes += 1;
                lanes - 1
            },
            |Reverse(l)| l,
        );
        busy.push(Reverse((us(r.end), lane)));
        let mut put = |k: &'static str, v: Value| cols.entry(k).or_default().push(v);
        put("lane", json!(lane));
        put("sched", json!(tenth(r.sched)));
        put("send", json!(tenth(r.send)));
        put("first", r.first.map_or(Value::Null, |f| json!(tenth(f))));
        put("end", json!(tenth(r.end)));
        put("ok", json!(r.ok));
        put("level", json!(r.level));
    }
    let levels: BTreeMap<String, String> = summary
        .levels()
        .map(|l| (l.index.to_string(), l.label()))
        .collect();
    let mut marks: Vec<(f64, String)> = summary
        .levels()
        .filter_map(|l| {
            Some((
                (l.started_at_unix_ms? - origin_ms) as f64 / 1000.0,
                l.short_label(),
            ))
        })
        .collect();
    marks.sort_by(|a, b| a.0.total_cmp(&b.0));
    json!({
        "total": total,
        "drawn": drawn.len(),
        "every": every,
        "lanes": lanes,
        "columns": cols,
        "levels": levels,
        "marks": marks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::tests::record;

    /// `n` requests of level 0, each sent 10 ms after the one before, 25 ms long, its first
    /// token 5 ms in: two in flight at once.
    fn requests(n: u64) -> Vec<RequestRecord> {
        (0..n)
            .map(|i| {
                let mut r = record(5_000, 25_000, 10);
                r.index = i as u32;
                r.sched_at_us = i * 10_000;
                r.send_at_us = i * 10_000 + 1_000;
                r.end_at_us = r.send_at_us + 25_000;
                r
            })
            .collect()
    }

    /// A summary whose level 0 started `at_ms` since the epoch.
    fn summary(at_ms: i64) -> RunSummary {
        let mut s = crate::tui::fixtures::finished_run().session.summary;
        for l in s.levels_mut() {
            l.started_at_unix_ms = (l.index == 0).then_some(at_ms);
        }
        s
    }

    /// Every request up to the limit, each in a lane of its own while it overlaps another, on
    /// the run's time axis (its level's start from the run's origin, plus its own offsets).
    #[test]
    fn requests_are_lanes_of_their_own_times_on_the_runs_axis() {
        let t = timeline(&requests(100), &summary(5_000), 2_000);
        assert_eq!(
            (t["total"].as_u64(), t["drawn"].as_u64()),
            (Some(100), Some(100))
        );
        assert_eq!(t["every"], 1);
        assert_eq!(
            t["lanes"], 3,
            "a 25 ms request every 10 ms: three in flight at most"
        );
        let col = |k: &str| -> Vec<f64> {
            t["columns"][k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        };
        // Level 0 started 3 s after the run: request i due at 3000 + 10 i ms, sent 1 ms later,
        // its first token 5 ms after that, done 25 ms after it was sent.
        let at7: Vec<f64> = ["sched", "send", "first", "end"]
            .iter()
            .map(|k| col(k)[7])
            .collect();
        assert!(
            at7.iter()
                .zip([3070.0, 3071.0, 3076.0, 3096.0])
                .all(|(a, b)| (a - b).abs() < 1e-9),
            "{at7:?}"
        );
        // No two requests of a lane overlap.
        let (lane, start, end) = (col("lane"), col("sched"), col("end"));
        for i in 0..lane.len() {
            for j in i + 1..lane.len() {
                if (lane[i] - lane[j]).abs() < 0.5 {
                    assert!(end[i] <= start[j] || end[j] <= start[i], "{i} and {j}");
                }
            }
        }
    }

    /// Beyond the limit, every k-th request, about the limit of them, and the page is told.
    #[test]
    fn beyond_the_limit_every_kth_request_is_drawn() {
        let t = timeline(&requests(5_000), &summary(0), 0);
        assert_eq!(t["total"], 5_000);
        assert_eq!(t["every"], 3);
        assert_eq!(t["drawn"], 1_667);
        assert_eq!(t["columns"]["lane"].as_array().unwrap().len(), 1_667);
        // A request of a level that never started is not placed.
        let none = timeline(&requests(3), &summary(0), 0);
        assert_eq!(none["drawn"], 3);
        let mut other = requests(3);
        other[1].level = 99;
        assert_eq!(timeline(&other, &summary(0), 0)["total"], 2);
    }
}
