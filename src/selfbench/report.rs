//! The bench-client table: medians over repeats, printed as Markdown or JSON.

use super::CaseResult;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    }
}

/// The median of `f` over `items`.
fn median_of<T>(items: &[&T], f: impl Fn(&T) -> f64) -> f64 {
    median(items.iter().map(|x| f(x)).collect())
}

/// The median of `f` over the items that have it, if any do.
fn median_opt<T>(items: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = items.iter().filter_map(|x| f(x)).collect();
    (!v.is_empty()).then(|| median(v))
}

/// What makes two rows repeats of one case.
fn case_key(r: &CaseResult) -> (&str, u32, &str, u32, u64) {
    (
        &r.kind,
        r.concurrency,
        &r.ui,
        r.events_per_write,
        r.input_len,
    )
}

/// Medians over repeats of the same case, in the order cases first ran.
pub fn medians(rows: &[CaseResult]) -> Vec<CaseResult> {
    let key = case_key;
    let mut keys: Vec<_> = Vec::new();
    for r in rows {
        if !keys.contains(&key(r)) {
            keys.push(key(r));
        }
    }
    keys.into_iter()
        .map(|k| {
            let group: Vec<&CaseResult> = rows.iter().filter(|r| key(r) == k).collect();
            let m = |f: fn(&CaseResult) -> f64| median_of(&group, f);
            let mo = |f: fn(&CaseResult) -> Option<f64>| median_opt(&group, f);
            CaseResult {
                tokens_per_s: m(|r| r.tokens_per_s),
                chunks_per_s: m(|r| r.chunks_per_s),
                cpu_s: m(|r| r.cpu_s),
                cpu_s_per_million_tokens: m(|r| r.cpu_s_per_million_tokens),
                peak_rss_mb: m(|r| r.peak_rss_mb),
                server_cpu_pct: m(|r| r.server_cpu_pct),
                duration_s: m(|r| r.duration_s),
                timing_error_p50_ms: mo(|r| r.timing_error_p50_ms),
                timing_error_p99_ms: mo(|r| r.timing_error_p99_ms),
                ttft_error_p50_ms: mo(|r| r.ttft_error_p50_ms),
                ttft_error_p99_ms: mo(|r| r.ttft_error_p99_ms),
                server_late_p99_ms: mo(|r| r.server_late_p99_ms),
                reader_wait_ms: mo(|r| r.reader_wait_ms),
                steal_ms: mo(|r| r.steal_ms),
                frames_per_s: mo(|r| r.frames_per_s),
                reference_tokens_per_s: mo(|r| r.reference_tokens_per_s),
                ratio_to_reference: mo(|r| r.ratio_to_reference),
                reference_cpu_s_per_million_tokens: mo(|r| r.reference_cpu_s_per_million_tokens),
                cpu_ratio_to_reference: mo(|r| r.cpu_ratio_to_reference),
                waves: wave_medians(&group),
                // Counts that should be zero: the most of any repeat.
                held_reads: group.iter().filter_map(|r| r.held_reads).max(),
                late_unheld_events: group.iter().filter_map(|r| r.late_unheld_events).max(),
                // The repeat with the most late events, with its own count of events timed.
                late_events: most_late(&group).and_then(|r| r.late_events),
                timed_events: most_late(&group).and_then(|r| r.timed_events),
                // Agent cases: the fewest sessions any repeat completed.
                sessions_completed: group.iter().filter_map(|r| r.sessions_completed).min(),
                tool_wait_share: mo(|r| r.tool_wait_share),
                ..group[0].clone()
            }
        })
        .collect()
}

/// The repeat of a case with the most events stamped late, if any has a count.
fn most_late<'a>(group: &[&'a CaseResult]) -> Option<&'a CaseResult> {
    group
        .iter()
        .filter(|r| r.late_events.is_some())
        .max_by_key(|r| r.late_events)
        .copied()
}

/// Each wave's figures, medians over the repeats of one wave case.
fn wave_medians(group: &[&CaseResult]) -> Vec<super::wave::Wave> {
    let n = group.iter().map(|r| r.waves.len()).max().unwrap_or(0);
    (0..n)
        .map(|i| {
            let of: Vec<&super::wave::Wave> = group.iter().filter_map(|r| r.waves.get(i)).collect();
            let m = |f: fn(&super::wave::Wave) -> f64| median_of(&of, f);
            let mo = |f: fn(&super::wave::Wave) -> Option<f64>| median_opt(&of, f);
            super::wave::Wave {
                start_ms: m(|w| w.start_ms),
                write_span_ms: m(|w| w.write_span_ms),
                saturated_ms: m(|w| w.saturated_ms),
                cpu_us_per_request: m(|w| w.cpu_us_per_request),
                ttft_error_p50_ms: mo(|w| w.ttft_error_p50_ms),
                ttft_error_p99_ms: mo(|w| w.ttft_error_p99_ms),
                ..of[0].clone()
            }
        })
        .collect()
}

/// The worst (highest) of `f` over the repeats of `r`'s case, if any has it.
fn worst(all: &[CaseResult], r: &CaseResult, f: fn(&CaseResult) -> Option<f64>) -> Option<f64> {
    all.iter()
        .filter(|x| case_key(x) == case_key(r))
        .filter_map(f)
        .reduce(f64::max)
}

/// The table (medians when cases repeat, with the worst repeat's error p99 beside them), or the
/// medians as JSON.
pub fn print(all: &[CaseResult], json: bool) {
    let rows = medians(all);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
        return;
    }
    println!("SIMULATED firehose server; client and firehose on this machine.");
    println!();
    println!(
        "| case | C | ui | events/write | prompt | tok/s | × reference | client CPU s per Mtok | × reference | server CPU % | peak RSS MB | frames/s | timing error p50 / p99 / worst p99 ms | TTFT error p50 / p99 / worst p99 ms | held reads / late unheld (most) | failed |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let ratio = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let three = |a: Option<f64>, b: Option<f64>, w: Option<f64>| match (a, b, w) {
        (Some(a), Some(b), Some(w)) => format!("{a:.3} / {b:.3} / {w:.3}"),
        _ => "-".into(),
    };
    let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{a:.3} / {b:.3}"),
        _ => "-".into(),
    };
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.0} | {} | {:.2} | {} | {:.0} | {:.1} | {} | {} | {} | {} | {} |",
            r.kind,
            r.concurrency,
            r.ui,
            r.events_per_write,
            r.input_len,
            r.tokens_per_s,
            ratio(r.ratio_to_reference),
            r.cpu_s_per_million_tokens,
            ratio(r.cpu_ratio_to_reference),
            r.server_cpu_pct,
            r.peak_rss_mb,
            r.frames_per_s.map_or("-".into(), |f| format!("{f:.1}")),
            three(
                r.timing_error_p50_ms,
                r.timing_error_p99_ms,
                worst(all, r, |x| x.timing_error_p99_ms)
            ),
            three(
                r.ttft_error_p50_ms,
                r.ttft_error_p99_ms,
                worst(all, r, |x| x.ttft_error_p99_ms)
            ),
            match (r.held_reads, r.late_unheld_events) {
                (Some(h), Some(l)) => format!("{h} / {l}"),
                _ => "-".into(),
            },
            r.failed
        );
    }
    print_behind(all, &rows);
    for r in &rows {
        if let Some(note) = late_note(all, r) {
            println!();
            println!("{note}");
        }
    }
    print_agents(all, &rows);
    let waves: Vec<&CaseResult> = rows.iter().filter(|r| !r.waves.is_empty()).collect();
    if waves.is_empty() {
        return;
    }
    println!();
    println!(
        "| wave case | C | ui | wave | requests | written over ms | core saturated ms | client CPU µs per request | TTFT error p50 / p99 ms |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for r in waves {
        for w in &r.waves {
            println!(
                "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.0} | {} |",
                r.kind,
                r.concurrency,
                r.ui,
                w.wave,
                w.requests,
                w.write_span_ms,
                w.saturated_ms,
                w.cpu_us_per_request,
                pair(w.ttft_error_p50_ms, w.ttft_error_p99_ms)
            );
        }
    }
}

/// One case's line on stderr as it ends.
pub(super) fn print_case(r: &CaseResult) {
    eprintln!(
        "  {:<9} C={:<5} {:<9} epw={:<2} {:>10.0} tok/s {:>9.0} chunks/s  cpu {:>5.2} s/Mtok  server cpu {:>3.0}%  rss {:>6.1} MB{}",
        r.kind,
        r.concurrency,
        r.ui,
        r.events_per_write,
        r.tokens_per_s,
        r.chunks_per_s,
        r.cpu_s_per_million_tokens,
        r.server_cpu_pct,
        r.peak_rss_mb,
        r.timing_error_p99_ms.map_or(String::new(), |p| format!(
            "  timing error p50 {:.3} p99 {p:.3} ms, TTFT error p99 {:.3} ms, held reads {}, late {} ({}), late unheld {}, firehose late p99 {:.1} ms",
            r.timing_error_p50_ms.unwrap_or(0.0),
            r.ttft_error_p99_ms.unwrap_or(f64::NAN),
            r.held_reads.unwrap_or(0),
            r.late_events.unwrap_or(0),
            share(r.late_events, r.timed_events),
            r.late_unheld_events.unwrap_or(0),
            r.server_late_p99_ms.unwrap_or(f64::NAN)
        ))
    );
    if let Some(f) = r.frames_per_s {
        eprintln!("    dashboard drew {f:.1} frames a second (asked 10)");
    }
    if let (Some(w), Some(st)) = (r.reader_wait_ms, r.steal_ms) {
        eprintln!(
            "    the reading threads waited {w:.1} ms for a CPU over the level ({:.2} % of it); steal on the case's CPUs {st:.0} ms",
            w / (r.duration_s * 10.0).max(1e-9)
        );
    }
    for w in &r.waves {
        eprintln!(
            "    wave {}: {} requests from {:.1} ms, written over {:.1} ms, core saturated {:.1} ms ({:.0} µs CPU per request), TTFT error p99 {:.3} ms",
            w.wave,
            w.requests,
            w.start_ms,
            w.write_span_ms,
            w.saturated_ms,
            w.cpu_us_per_request,
            w.ttft_error_p99_ms.unwrap_or(f64::NAN)
        );
    }
}

/// `part` of `whole` as a percentage to two places (`-` without both).
fn share(part: Option<u64>, whole: Option<u64>) -> String {
    match (part, whole) {
        (Some(p), Some(w)) if w > 0 => format!("{:.2} %", p as f64 * 100.0 / w as f64),
        _ => "-".into(),
    }
}

/// A timing error p99 this large in some repeat is explained under the table.
pub const TIMING_P99_NOTE_MS: f64 = 1.0;

/// What to say of the repeat of `r`'s case with the largest timing error p99, when it reached
/// [`TIMING_P99_NOTE_MS`]: how many events were stamped late in it, and whether the client
/// flagged them (held reads) or not.
fn late_note(all: &[CaseResult], r: &CaseResult) -> Option<String> {
    let w = all
        .iter()
        .filter(|x| case_key(x) == case_key(r))
        .filter(|x| {
            x.timing_error_p99_ms
                .is_some_and(|p| p >= TIMING_P99_NOTE_MS)
        })
        .max_by(|a, b| {
            let p = |x: &CaseResult| x.timing_error_p99_ms.unwrap_or(0.0);
            p(a).total_cmp(&p(b))
        })?;
    let (late, unheld) = (w.late_events?, w.late_unheld_events?);
    let whose = if unheld == 0 {
        "every one in a request that flagged a held read: the client read those streams after their next event had arrived, and said so".to_string()
    } else {
        format!(
            "{unheld} of them in requests that flagged no held read: stamps the client did not flag"
        )
    };
    Some(format!(
        "{} C={} {}: a repeat's timing error p99 was {:.3} ms; {late} of its token events ({}) were stamped more than {} ms after their write, {whose}.",
        r.kind,
        r.concurrency,
        r.ui,
        w.timing_error_p99_ms.unwrap_or(f64::NAN),
        share(Some(late), w.timed_events),
        super::UNHELD_LATE_US / 1000,
    ))
}

/// The paced cases whose firehose could not keep the asked pace: their load was less than asked.
fn print_behind(all: &[CaseResult], rows: &[CaseResult]) {
    for r in rows {
        if let Some(note) = behind(r, worst(all, r, |x| x.server_late_p99_ms)) {
            println!();
            println!("{note}");
        }
    }
}

/// The firehose at this share of its core or more had no time left to keep its pace: its
/// lateness was its core's limit (measured: 93-95 % at C=10,000 paced every 20 ms, 240-360 ms late
/// at the p99). Below it (39-43 % paced every 200 ms, 5-10 ms late), writes that fell due
/// together waited for each other on a core that had time to spare over the case.
pub const FIREHOSE_SATURATED_PCT: f64 = 90.0;

/// What to say of the paced case `r` (medians over its repeats) whose firehose wrote `worst`
/// ms late at the p99 in its worst repeat, when that is past [`super::SERVER_LATE_MS`].
fn behind(r: &CaseResult, worst: Option<f64>) -> Option<String> {
    let late = worst.filter(|&l| l > super::SERVER_LATE_MS)?;
    let head = format!(
        "{} C={} {}: the firehose wrote {:.1} ms late at the p99 (worst repeat {late:.1}), more than {} ms, at {:.0} % of its core",
        r.kind,
        r.concurrency,
        r.ui,
        r.server_late_p99_ms.unwrap_or(late),
        super::SERVER_LATE_MS,
        r.server_cpu_pct,
    );
    // Judged on the share as printed, so a note never says 90 % and not saturated.
    Some(if r.server_cpu_pct.round() >= FIREHOSE_SATURATED_PCT {
        format!(
            "{head}: this machine could not pace that load on the firehose's core, so the case ran at a lower event rate than asked, its client beside a saturated server."
        )
    } else {
        format!(
            "{head}: not saturated over the case, so the lateness came from moments when more writes fell due than its core wrote on time, and events left up to that much after their pace. The timing error is measured from each write's own recorded time, so it is not affected."
        )
    })
}

/// The agent cases' own figures: sessions completed, time on tools, memory and timing.
fn print_agents(all: &[CaseResult], rows: &[CaseResult]) {
    let pair = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{a:.3} / {b:.3}"),
        _ => "-".into(),
    };
    let agents: Vec<&CaseResult> = rows
        .iter()
        .filter(|r| r.sessions_completed.is_some())
        .collect();
    if agents.is_empty() {
        return;
    }
    println!();
    println!(
        "| agent case | users | ui | sessions completed (fewest) | time waiting on tools | peak RSS MB | timing error p99 / worst p99 ms | firehose late p99 / worst p99 ms |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    for r in agents {
        println!(
            "| {} | {} | {} | {} of {} | {} | {:.1} | {} | {} |",
            r.kind,
            r.concurrency,
            r.ui,
            r.sessions_completed.unwrap_or(0),
            r.concurrency,
            r.tool_wait_share
                .map_or("-".into(), |s| format!("{:.0} %", s * 100.0)),
            r.peak_rss_mb,
            pair(
                r.timing_error_p99_ms,
                worst(all, r, |x| x.timing_error_p99_ms)
            ),
            pair(
                r.server_late_p99_ms,
                worst(all, r, |x| x.server_late_p99_ms)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selfbench::wave::Wave;

    /// A firehose late past the limit is called saturated only at 90 % of its core or more; one
    /// on time (or with no record) gets no note.
    #[test]
    fn a_late_firehose_is_called_saturated_only_when_its_core_was_full() {
        let case = |cpu: f64| CaseResult {
            kind: "accuracy".into(),
            concurrency: 10000,
            ui: "headless".into(),
            server_cpu_pct: cpu,
            server_late_p99_ms: Some(7.8),
            ..CaseResult::default()
        };
        for (cpu, saturated) in [(94.0, true), (89.6, true), (89.4, false), (40.0, false)] {
            let note = behind(&case(cpu), Some(9.8)).expect("late past the limit");
            assert!(
                note.contains("7.8 ms late") && note.contains("worst repeat 9.8"),
                "{note}"
            );
            assert!(
                note.contains(&format!("at {cpu:.0} % of its core")),
                "{note}"
            );
            assert_eq!(note.contains("saturated server"), saturated, "{note}");
            assert_eq!(note.contains("not saturated"), !saturated, "{note}");
        }
        assert_eq!(behind(&case(94.0), Some(5.0)), None);
        assert_eq!(behind(&case(94.0), None), None);
    }

    /// A repeat whose timing error p99 reached 1 ms is explained by its own late events, flagged
    /// or not; repeats under it get no note; the medians keep the repeat with the most late.
    #[test]
    fn a_repeat_timed_a_step_late_is_explained_by_its_late_events() {
        let rep = |p99: f64, late: u64, unheld: u64| CaseResult {
            kind: "accuracy".into(),
            concurrency: 10000,
            ui: "dashboard".into(),
            timing_error_p99_ms: Some(p99),
            late_events: Some(late),
            late_unheld_events: Some(unheld),
            timed_events: Some(1_000_000),
            ..CaseResult::default()
        };
        let all = [
            rep(0.007, 4523, 0),
            rep(19.928, 10_589, 0),
            rep(0.006, 98, 0),
        ];
        let m = medians(&all);
        assert_eq!(
            (m[0].late_events, m[0].timed_events),
            (Some(10_589), Some(1_000_000))
        );
        let note = late_note(&all, &m[0]).expect("a repeat reached 1 ms");
        assert!(note.contains("19.928 ms"), "{note}");
        assert!(
            note.contains("10589 of its token events (1.06 %)"),
            "{note}"
        );
        assert!(note.contains("flagged a held read"), "{note}");
        let unflagged = [rep(2.5, 12_000, 40)];
        let note = late_note(&unflagged, &medians(&unflagged)[0]).expect("2.5 ms");
        assert!(
            note.contains("40 of them in requests that flagged no held read"),
            "{note}"
        );
        let fine = [rep(0.999, 9_000, 0)];
        assert_eq!(late_note(&fine, &medians(&fine)[0]), None);
    }

    /// Three repeats of one case become one row of medians, its waves too; another case stays.
    #[test]
    fn repeats_of_a_case_become_one_row_of_medians() {
        let row = |tok: f64, p99: Option<f64>, sat: f64| CaseResult {
            kind: "wave".into(),
            concurrency: 1000,
            tokens_per_s: tok,
            ttft_error_p99_ms: p99,
            waves: vec![Wave {
                saturated_ms: sat,
                ..Wave::default()
            }],
            ..CaseResult::default()
        };
        let other = CaseResult {
            kind: "capacity".into(),
            tokens_per_s: 7.0,
            ..CaseResult::default()
        };
        let rows = [
            row(1.0, Some(9.0), 30.0),
            other,
            row(3.0, None, 10.0),
            row(2.0, Some(1.0), 20.0),
        ];
        let m = medians(&rows);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].kind.as_str(), m[1].kind.as_str()),
            ("wave", "capacity")
        );
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(m[0].tokens_per_s, 2.0));
        // The median of the repeats that have the figure (9 and 1).
        assert!(m[0].ttft_error_p99_ms.is_some_and(|p| close(p, 5.0)));
        assert!(close(m[0].waves[0].saturated_ms, 20.0));
        assert!(close(m[1].tokens_per_s, 7.0));
    }
}
