//! The real-GPU check's readings (`scripts/gpu-check.sh`, run on a machine with NVIDIA GPUs)
//! as servetop reads them: every fixture in tests/fixtures/gpu/ parses as `servetop gpu --json`
//! writes it, and what it says holds together. None is committed until a GPU machine has run the
//! script, so that test is ignored (and says how to make one) rather than passing on an empty
//! folder. On this machine, whatever it has, the
//! binary's own reading must parse and either list GPUs or say why there are none.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use servetop::telemetry::GpuReading;

#[derive(serde::Deserialize)]
struct GpuJson {
    available: bool,
    reason: Option<String>,
    /// `nvml`, `nvidia_smi` (where NVML cannot be loaded); none without a GPU.
    source: Option<String>,
    gpus: Vec<GpuReading>,
}

/// What a reading must say, whichever machine made it.
fn check(what: &str, r: &GpuJson) {
    if !r.available {
        assert_eq!(r.source, None, "{what}");
        assert!(r.gpus.is_empty(), "{what}");
        assert!(
            r.reason.as_deref().is_some_and(|x| !x.is_empty()),
            "{what}: no GPU and no reason"
        );
        return;
    }
    assert!(
        matches!(r.source.as_deref(), Some("nvml" | "nvidia_smi")),
        "{what}: source {:?}",
        r.source
    );
    assert!(!r.gpus.is_empty(), "{what}: available with no GPU");
    for g in &r.gpus {
        let name = format!("{what} GPU {} ({})", g.index, g.name);
        if let (Some(u), Some(t)) = (g.mem_used_bytes, g.mem_total_bytes) {
            assert!(u <= t && t > 0, "{name}: memory {u} of {t}");
        }
        for (field, v, top) in [
            ("util", g.util_gpu_pct, 100.0),
            ("mem util", g.util_mem_pct, 100.0),
            ("temperature", g.temp_c, 130.0),
        ] {
            assert!(
                v.is_none_or(|v| (0.0..=top).contains(&v)),
                "{name}: {field} {v:?}"
            );
        }
        if let (Some(p), Some(l)) = (g.power_w, g.power_limit_w) {
            assert!(p >= 0.0 && p <= l * 1.5, "{name}: power {p} W, limit {l} W");
        }
        // What the device did not support reads as null, and is said here.
        let unsupported: Vec<&str> = [
            ("memory", g.mem_used_bytes.is_none()),
            ("utilization", g.util_gpu_pct.is_none()),
            ("power", g.power_w.is_none()),
            ("energy counter", g.energy_mj.is_none()),
            ("SM clock", g.sm_clock_mhz.is_none()),
        ]
        .into_iter()
        .filter_map(|(f, missing)| missing.then_some(f))
        .collect();
        println!("{name}: not supported: {unsupported:?}");
    }
}

#[test]
#[ignore = "no GPU fixture is committed yet: run scripts/gpu-check.sh with a release binary on a machine with NVIDIA GPUs, commit the JSON it writes to tests/fixtures/gpu/, then remove this line"]
fn committed_gpu_fixtures_parse_and_hold_together() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gpu");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            let r: GpuJson = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|err| panic!("{}: {err}", p.display()));
            check(&p.display().to_string(), &r);
            seen += 1;
        }
    }
    assert!(seen > 0, "no GPU fixture in {}", dir.display());
    println!("{seen} GPU fixtures in {}", dir.display());
}

#[test]
fn this_machines_reading_parses() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_servetop"))
        .args(["gpu", "--once", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let r: GpuJson = serde_json::from_slice(&out.stdout).unwrap();
    check("this machine", &r);
}

/// The script asks nvidia-smi for the fields the sampler reads, in its order.
#[test]
fn the_gpu_check_script_queries_what_the_nvidia_smi_sampler_reads() {
    let script = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check.sh"),
    )
    .unwrap();
    let asked = format!("--query-gpu={}", servetop::telemetry::smi::QUERY);
    assert!(
        script.contains(&asked),
        "scripts/gpu-check.sh lacks {asked}"
    );
}
