//! The plan's time before its first request: the best basis there is without sending one — an
//! earlier run against the same server and model among the run directories beside this one,
//! the server's own metrics of what it served before, else the stated default — and the plan
//! line with it (`summary::eta::basis` has the arithmetic).

use std::path::{Path, PathBuf};

use crate::client::ServerInfo;
use crate::config::RunConfig;
use crate::summary::eta::basis::{self, Basis, Speeds};
use crate::summary::eta::{self, Eta};
use crate::summary::{LevelStatus, LevelSummary, RunSummary};
use crate::workload::LevelSpec;
use crate::workload::search::SearchTarget;

/// Run directories looked at for an earlier run, newest first.
const EARLIER_RUNS_LOOKED_AT: usize = 50;

/// What a results.json says of its server, read before the whole file is.
#[derive(serde::Deserialize)]
struct Head {
    server: Option<HeadServer>,
}

#[derive(serde::Deserialize)]
struct HeadServer {
    base_url: String,
    model: String,
    #[serde(default)]
    simulated: bool,
}

/// The folders run directories are in: the parent of `--out` (when given) and the default
/// `runs/`.
fn run_roots(cfg: &RunConfig) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(parent) = cfg.out_dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        roots.push(parent.to_path_buf());
    }
    let default = PathBuf::from("runs");
    if !roots.contains(&default) {
        roots.push(default);
    }
    roots
}

/// The newest run among `roots` against `server` (its address, model and whether it is
/// simulated) with a measured level, skipping the run directory `this` itself.
#[must_use]
pub fn earlier_run(roots: &[PathBuf], server: &ServerInfo, this: &Path) -> Option<Basis> {
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = roots
        .iter()
        .filter_map(|r| std::fs::read_dir(r).ok())
        .flatten()
        .filter_map(|e| {
            let p = e.ok()?.path().join("results.json");
            Some((std::fs::metadata(&p).ok()?.modified().ok()?, p))
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    let url = server.base_url.trim_end_matches('/');
    found
        .into_iter()
        .take(EARLIER_RUNS_LOOKED_AT)
        .filter(|(_, p)| p.parent() != Some(this))
        .find_map(|(_, p)| {
            let bytes = std::fs::read(&p).ok()?;
            let head: Head = serde_json::from_slice(&bytes).ok()?;
            let h = head.server?;
            if h.base_url.trim_end_matches('/') != url
                || h.model != server.model
                || h.simulated != server.simulated
            {
                return None;
            }
            let summary: RunSummary = serde_json::from_slice(&bytes).ok()?;
            let measured = summary.levels().any(|l| {
                l.status == LevelStatus::Done
                    && l.stats.as_ref().is_some_and(|s| s.scalars.completed > 0)
            });
            measured.then(|| Basis::Earlier {
                name: format!(
                    "from the run in {} against this server and model",
                    p.parent().unwrap_or(&p).display()
                ),
                summary: Box::new(summary),
            })
        })
}

/// The basis for `cfg`'s plan against `server`: an earlier run, else the server's metrics,
/// else the default.
pub async fn basis(cfg: &RunConfig, server: &ServerInfo) -> Basis {
    if let Some(b) = earlier_run(&run_roots(cfg), server, &cfg.out_dir) {
        return b;
    }
    if let Some((metrics, _)) = crate::telemetry::engine_urls(cfg)
        && let Ok(http) = crate::client::http_client(&cfg.header_pairs())
        && let Ok(sample) = crate::telemetry::scrape::engine_sample(&http, &metrics).await
        && let Some(s) = Speeds::of_server(&sample)
    {
        return Basis::Speeds(s);
    }
    Basis::Speeds(Speeds::assumed())
}

/// `levels` estimated from `basis`, leaving out those the server cannot hold (`context_limit`)
/// unless the run restarts the server for them (`restarts`: it started it).
#[must_use]
pub fn estimate(
    levels: &[LevelSpec],
    basis: &Basis,
    context_limit: Option<u64>,
    restarts: bool,
) -> Eta {
    let planned: Vec<LevelSummary> = levels.iter().map(LevelSummary::planned).collect();
    basis::estimate(&planned, basis, |l| {
        eta::will_skip(l, context_limit, restarts)
    })
}

/// The plan's time as the plan line says it: its `levels` from `basis` and, when `cfg` asks
/// for one, its SLO search; with `--natural-stop`, said to be the most it takes.
#[must_use]
pub fn time_part(
    cfg: &RunConfig,
    levels: &[LevelSpec],
    basis: &Basis,
    context_limit: Option<u64>,
    restarts: bool,
) -> String {
    let time = plan_time(cfg, levels, basis, context_limit, restarts);
    if cfg.natural_stop {
        format!("natural stops (each output length a cap: the time is the most it takes); {time}")
    } else {
        time
    }
}

/// [`time_part`]'s estimate.
fn plan_time(
    cfg: &RunConfig,
    levels: &[LevelSpec],
    basis: &Basis,
    context_limit: Option<u64>,
    restarts: bool,
) -> String {
    let mut eta = estimate(levels, basis, context_limit, restarts);
    let Some(search) = &cfg.search else {
        return basis::time_part(&eta, basis, "");
    };
    let (low, high) = search_s(cfg, search, basis);
    eta.low_s += low;
    eta.high_s += high;
    eta.levels += 1;
    let (fewest, most) = search_probes(search);
    let seconds = crate::fmt::fmt_rate(search.probe_seconds);
    let note = match search.target {
        SearchTarget::Rate => format!(
            "; the SLO search as its throughput probe and {fewest}–{most} rate probes of at least {seconds} s"
        ),
        SearchTarget::Concurrency => {
            format!("; the SLO search as {fewest}–{most} probes of at least {seconds} s")
        }
    };
    basis::time_part(&eta, basis, &note)
}

/// The fewest and most rate probes `search` runs: one when a first probe at the rate to beat
/// can stop it, else two (a pass and a fail), and at most its `max_probes`.
fn search_probes(search: &crate::workload::search::SearchConfig) -> (u32, u32) {
    // A concurrency search starting at its cap may stop at its first probe (a pass there).
    let alone = search.target == SearchTarget::Concurrency
        && search.probe_concurrency >= search.concurrency_cap();
    let fewest = if search.beat.is_some() || alone { 1 } else { 2 };
    (fewest, search.max_probes.max(fewest))
}

/// The SLO search's time range from `basis` (`summary::eta::basis::search_s`).
#[must_use]
pub fn search_s(
    cfg: &RunConfig,
    search: &crate::workload::search::SearchConfig,
    basis: &Basis,
) -> (f64, f64) {
    use crate::workload::LevelKind;
    if search.target == SearchTarget::Concurrency {
        return concurrency_search_s(cfg, search, basis);
    }
    let lengths = (cfg.input_len, cfg.output_len);
    let probe = LevelSpec::new(
        0,
        LevelKind::Sweep,
        search.probe_concurrency,
        lengths,
        search.throughput_requests(),
    );
    let throughput = estimate(&[probe], basis, None, false);
    let one = estimate(
        &[LevelSpec::new(0, LevelKind::Sweep, 1, lengths, 1)],
        basis,
        None,
        false,
    );
    basis::search_s(
        (throughput.low_s, throughput.high_s),
        search.throughput_requests(),
        one.high_s,
        search.probe_seconds,
        search.min_requests,
        search_probes(search),
    )
}

/// The concurrency search's time range from `basis`: its first probe as a level, then at
/// least one more of its seconds' worth (none, when it starts at its cap); at most its probe
/// budget, each as long as the longer of twice its seconds (a doubled concurrency sent at the
/// last probe's pace) and its fewest requests at one stream, the slowest it can go.
fn concurrency_search_s(
    cfg: &RunConfig,
    search: &crate::workload::search::SearchConfig,
    basis: &Basis,
) -> (f64, f64) {
    let Some(plan) = cfg.search_plan() else {
        return (0.0, 0.0);
    };
    let seconds = search.probe_seconds;
    let first = estimate(
        &[plan.concurrency_probe(0, search.probe_concurrency, None)],
        basis,
        None,
        false,
    );
    let one_stream = estimate(&[plan.concurrency_probe(0, 1, None)], basis, None, false);
    let longest = (2.0 * seconds).max(one_stream.high_s);
    let (fewest, most) = search_probes(search);
    (
        first.low_s + f64::from(fewest - 1) * seconds,
        first.high_s + f64::from(most - 1) * longest,
    )
}

/// A tune's time for its `--dry-run`: `configurations` runs of `cfg`'s `levels` and its SLO
/// search from `basis`, the first search in full and, with `early_stop`, the others from one
/// rate probe (a fail at the rate to beat ends them).
#[must_use]
pub fn tune_time_part(
    cfg: &RunConfig,
    levels: &[LevelSpec],
    basis: &Basis,
    configurations: usize,
    early_stop: bool,
) -> String {
    let Some(search) = &cfg.search else {
        return time_part(cfg, levels, basis, None, true);
    };
    let plain = estimate(levels, basis, None, true);
    let first = search_s(cfg, search, basis);
    let beaten = crate::workload::search::SearchConfig {
        beat: early_stop.then_some(1.0),
        ..search.clone()
    };
    let rest = search_s(cfg, &beaten, basis);
    let n = configurations.max(1);
    let others = (n - 1) as f64;
    let eta = Eta {
        low_s: plain.low_s * n as f64 + first.0 + others * rest.0,
        high_s: plain.high_s * n as f64 + first.1 + others * rest.1,
        levels: (plain.levels + 1) * n,
        unknown: plain.unknown * n,
        skipped: plain.skipped * n,
    };
    basis::time_part(
        &eta,
        basis,
        &format!(
            "; {n} configuration{}, each its levels and an SLO search of {}–{} rate probes of at least {} s",
            if n == 1 { "" } else { "s" },
            search_probes(&beaten).0,
            search_probes(search).1,
            crate::fmt::fmt_rate(search.probe_seconds)
        ),
    )
}

/// The plan line with its time from `basis`.
#[must_use]
pub fn plan_line(
    cfg: &RunConfig,
    levels: &[LevelSpec],
    basis: &Basis,
    context_limit: Option<u64>,
    restarts: bool,
) -> String {
    crate::workload::plan::plan_line(
        levels,
        search_text(cfg).as_deref(),
        &time_part(cfg, levels, basis, context_limit, restarts),
    )
}

/// `cfg`'s SLO search as the plan line says it, if it has one.
#[must_use]
pub fn search_text(cfg: &RunConfig) -> Option<String> {
    Some(crate::workload::plan::search_text(&cfg.search_plan()?))
}

/// `[time] about 12 min left for the 7 levels still to run (…)`, once a level has been
/// measured and while levels wait.
#[must_use]
pub fn time_left_line(s: &RunSummary) -> Option<String> {
    let eta = eta::waiting(s)?;
    if eta.levels + eta.unknown == 0 {
        return None;
    }
    Some(format!(
        "[time] {} left for the {} level{} still to run (rough, from the levels measured so far; server restarts not included){}",
        eta::range_text(&eta),
        eta.levels,
        if eta.levels == 1 { "" } else { "s" },
        eta::left_out(&eta)
    ))
}

/// `[time] about 4 min for the 11 levels (from the warmup request (…))`: the plan's time again
/// once the last warmup request is back, from its speeds, while no level has been measured.
#[must_use]
pub fn after_warmup_line(s: &RunSummary, warmup: &crate::metrics::RequestRecord) -> Option<String> {
    if warmup.index + 1 < s.config.warmup_requests || eta::waiting(s).is_some() {
        return None;
    }
    let speeds = Speeds::of_request(warmup)?;
    let waiting: Vec<LevelSummary> = s
        .levels()
        .filter(|l| l.status == LevelStatus::Waiting)
        .cloned()
        .collect();
    let limit = s.server.as_ref().and_then(|v| v.context_limit);
    let restarts = s.config.serve.is_some();
    let e = basis::estimate(&waiting, &Basis::Speeds(speeds.clone()), |l| {
        eta::will_skip(l, limit, restarts)
    });
    (e.levels > 0).then(|| {
        format!(
            "[time] {} for the {} level{} ({}; server restarts not included){}",
            eta::range_text(&e),
            e.levels,
            if e.levels == 1 { "" } else { "s" },
            speeds.source,
            eta::left_out(&e)
        )
    })
}
