//! How `--lora-dist` deals requests over `--lora-modules`, held to the distribution it names
//! by a chi-square goodness-of-fit test: `uniform` gives each of the n adapters 1/n, `zipf:S`
//! the k-th adapter given (from 1) a share `k^-S / Σ_j j^-S` (docs/workloads.md, whose example
//! exponent is 1.1). The expected shares are computed here from those formulas, not asked of
//! servetop.
//!
//! The test: with n = 5 adapters (4 degrees of freedom), the statistic
//! `X² = Σ (observed − expected)² / expected` is held below the critical value at significance
//! α = 0.001. For an even number of degrees of freedom 2m the chi-square upper tail has the
//! closed form `Q(x) = e^(−x/2) Σ_{j<m} (x/2)^j / j!`; for 4 that is `e^(−x/2) (1 + x/2)`,
//! and the critical value (tabulated: 18.467) is found from it by bisection below and checked
//! against the table. The deal is a pure function of the seed, so each case passes or fails
//! the same way every time; a wrong distribution (the two swapped, a zipf rank off by one)
//! gives a statistic in the hundreds or thousands.
//!
//! Dealt 20,000 times through the product's own dealing code (`LoraMix::pick`, what every
//! request's adapter comes from), for three seeds; then end to end through the binary against
//! the simulator: every record of requests.jsonl names the adapter the deal gives its index
//! for the run's seed, the simulator received that name, and the run's 2,000 requests pass the
//! same test.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use servetop::metrics::RequestRecord;
use servetop::sim::{self, SimLora};
use servetop::workload::mix::{LoraDist, LoraMix};

mod sim_run;
mod sim_truth;

const ADAPTERS: [&str; 5] = ["a1", "a2", "a3", "a4", "a5"];
/// The significance of every goodness-of-fit test here.
const ALPHA: f64 = 0.001;
/// The chi-square critical value for 4 degrees of freedom at α = 0.001, from the table.
const CRITICAL_DF4_TABLE: f64 = 18.467;
/// docs/workloads.md's example skew.
const ZIPF_S: f64 = 1.1;

/// The chance of each adapter under `dist`, from the distribution's own formula.
fn expected_shares(dist: &str, n: usize) -> Vec<f64> {
    let w: Vec<f64> = match dist {
        "uniform" => vec![1.0; n],
        "zipf" => (1..=n).map(|k| (k as f64).powf(-ZIPF_S)).collect(),
        other => panic!("{other}"),
    };
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

/// The chi-square upper tail for 4 degrees of freedom: `e^(−x/2) (1 + x/2)`.
fn upper_tail_df4(x: f64) -> f64 {
    (-x / 2.0).exp() * (1.0 + x / 2.0)
}

/// The x whose upper tail is `alpha` (4 degrees of freedom), by bisection: the tail falls as
/// x grows.
fn critical_df4(alpha: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, 100.0);
    for _ in 0..200 {
        let mid = f64::midpoint(lo, hi);
        if upper_tail_df4(mid) > alpha {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `X² = Σ (observed − expected)² / expected` of `counts` against `shares`.
fn chi_square(counts: &[u64], shares: &[f64]) -> f64 {
    let n = counts.iter().sum::<u64>() as f64;
    counts
        .iter()
        .zip(shares)
        .map(|(&o, &p)| {
            let e = n * p;
            (o as f64 - e).powi(2) / e
        })
        .sum()
}

/// Fails unless `counts` fit `shares` at [`ALPHA`] (4 degrees of freedom: five adapters).
fn fits(what: &str, counts: &[u64], shares: &[f64]) {
    assert_eq!(counts.len(), 5, "four degrees of freedom");
    let n = counts.iter().sum::<u64>() as f64;
    assert!(
        shares.iter().all(|p| n * p >= 5.0),
        "{what}: an expected count under 5 makes the chi-square approximation poor"
    );
    let x2 = chi_square(counts, shares);
    let critical = critical_df4(ALPHA);
    assert!(
        x2 <= critical,
        "{what}: X² = {x2:.2} over the critical {critical:.3} (4 degrees of freedom, α = {ALPHA}, p = {:.2e}): counts {counts:?}, expected {:?}",
        upper_tail_df4(x2),
        shares
            .iter()
            .map(|p| (p * n * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    eprintln!(
        "{what}: X² = {x2:.2} (critical {critical:.3}, p = {:.3}) over {n} draws: {counts:?}",
        upper_tail_df4(x2)
    );
}

fn mix(dist: LoraDist) -> LoraMix {
    LoraMix {
        modules: ADAPTERS.map(String::from).to_vec(),
        dist,
    }
}

fn dist_of(name: &str) -> LoraDist {
    match name {
        "uniform" => LoraDist::Uniform,
        _ => LoraDist::Zipf(ZIPF_S),
    }
}

fn count_names<'a>(names: impl Iterator<Item = &'a str>) -> Vec<u64> {
    let mut c = vec![0u64; ADAPTERS.len()];
    for name in names {
        let k = ADAPTERS
            .iter()
            .position(|a| *a == name)
            .unwrap_or_else(|| panic!("{name} is not one of the adapters"));
        c[k] += 1;
    }
    c
}

#[test]
fn the_critical_value_is_the_tables() {
    let c = critical_df4(ALPHA);
    assert!(
        (c - CRITICAL_DF4_TABLE).abs() < 5e-4,
        "{c} against the table's {CRITICAL_DF4_TABLE}"
    );
    // The closed form against two more of the table's values (α = 0.05 and 0.01).
    assert!((critical_df4(0.05) - 9.488).abs() < 5e-4);
    assert!((critical_df4(0.01) - 13.277).abs() < 5e-4);
}

#[test]
fn twenty_thousand_deals_fit_uniform_and_zipf() {
    let n = 20_000u32;
    for dist in ["uniform", "zipf"] {
        let m = mix(dist_of(dist));
        let shares = expected_shares(dist, ADAPTERS.len());
        for seed in [1u64, 7, 0xDEAD_BEEF] {
            let counts = count_names((0..n).map(|i| m.pick(seed, i)));
            fits(&format!("{dist}, seed {seed}"), &counts, &shares);
        }
    }
    // The two are told apart: zipf's deal does not fit uniform's shares, nor the reverse.
    let uniform = expected_shares("uniform", 5);
    let zipf = expected_shares("zipf", 5);
    let (zipf_mix, uniform_mix) = (mix(dist_of("zipf")), mix(dist_of("uniform")));
    let zipf_counts = count_names((0..n).map(|i| zipf_mix.pick(1, i)));
    let uniform_counts = count_names((0..n).map(|i| uniform_mix.pick(1, i)));
    let critical = critical_df4(ALPHA);
    assert!(chi_square(&zipf_counts, &uniform) > critical);
    assert!(chi_square(&uniform_counts, &zipf) > critical);
}

fn records(dir: &Path) -> Vec<RequestRecord> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// 2,000 requests through the binary: each names the adapter the deal gives its index for the
/// run's seed, the simulator got that name, and the names fit the distribution.
#[test]
fn a_runs_requests_name_the_dealt_adapters_in_the_stated_shares() {
    const REQUESTS: u32 = 2000;
    const SEED: u64 = 9;
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (dist, flag) in [("uniform", "uniform"), ("zipf", "zipf:1.1")] {
        // A simulator of its own for each run: its record then holds that run's requests alone.
        let mut c = sim_run::steady_config(1.0);
        c.lora = ADAPTERS
            .iter()
            .map(|a| SimLora {
                name: (*a).to_string(),
                switch_ms: 0.0,
            })
            .collect();
        let h = rt
            .block_on(sim::start(c, SocketAddr::from(([127, 0, 0, 1], 0))))
            .unwrap();
        let dir = sim_run::temp_run_dir(&format!("lora-deal-{dist}"));
        let _ = std::fs::remove_dir_all(&dir);
        let out = Command::new(env!("CARGO_BIN_EXE_servetop"))
            .args([
                "run",
                "--base-url",
                &h.url(),
                "--concurrency",
                "32",
                "--requests-per-level",
                &REQUESTS.to_string(),
                "--input-len",
                "16",
                "--output-len",
                "2",
                "--warmup",
                "0",
                "--long-context",
                "none",
                "--seed",
                &SEED.to_string(),
                "--lora-modules",
                &ADAPTERS.join(","),
                "--lora-dist",
                flag,
                "--headless",
                "--no-gpu",
                "--out",
                dir.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{dist}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
        let said: LoraDist = serde_json::from_value(v["config"]["lora_dist"].clone()).unwrap();
        assert_eq!(said, dist_of(dist), "results.json names the distribution");
        let truth = sim_truth::of(&h);
        let ids = sim_truth::by_id(&truth);
        let m = mix(dist_of(dist));
        let recs: Vec<RequestRecord> = records(&dir).into_iter().filter(|r| !r.warmup).collect();
        assert_eq!(recs.len(), REQUESTS as usize, "{dist}");
        for r in &recs {
            let id = sim_truth::id_of(r);
            let dealt = m.pick(SEED, r.index);
            assert_eq!(r.lora.as_deref(), Some(dealt), "{dist}: {id}");
            assert_eq!(
                ids[id.as_str()].lora.as_deref(),
                Some(dealt),
                "{dist}: {id} reached the simulator naming its adapter"
            );
        }
        let counts = count_names(recs.iter().map(|r| r.lora.as_deref().unwrap()));
        fits(
            &format!("{dist}, the run's requests"),
            &counts,
            &expected_shares(dist, ADAPTERS.len()),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
