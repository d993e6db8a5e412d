//! The real-GPU check's readings (`scripts/gpu-check.sh`, run on a machine with NVIDIA GPUs)
//! as servetop reads them: every fixture in tests/fixtures/gpu/ parses as `servetop gpu --json`
//! writes it, and what it says holds together. The H200's were made on a machine with one
//! NVIDIA H200 (driver 580.159.04): its NVML reading (the glibc release binary), its
//! `nvidia-smi` reading (the static binary, which cannot load NVML) and the raw `nvidia-smi`
//! query the static sampler parses, against what `nvidia-smi -q` said there (product name, 143771
//! MiB of memory, a 700 W power limit). The NVML reader's conversions run through the product
//! from NVML's raw units (milliwatts, bytes, millijoules) written down from that H200, against
//! answers worked out by hand. On this machine, whatever it has, the binary's own reading must
//! parse and either list GPUs or say why there are none.

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

fn fixture(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/gpu")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
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

/// The two ways servetop reads a GPU, NVML (the glibc build) and `nvidia-smi` (the static build,
/// through `telemetry::smi::parse`), read the same H200 alike, and as `nvidia-smi -q` did on that
/// machine: "NVIDIA H200", FB memory total 143771 MiB, current power limit 700.00 W. Power and
/// the like were read moments apart and differ; what does not change must be equal.
#[test]
fn an_h200_reads_the_same_through_nvml_and_nvidia_smi() {
    let nvml: GpuJson = serde_json::from_str(&fixture("nvidia-h200.json")).unwrap();
    let smi_json: GpuJson = serde_json::from_str(&fixture("nvidia-h200-nvidia-smi.json")).unwrap();
    assert_eq!(nvml.source.as_deref(), Some("nvml"));
    assert_eq!(smi_json.source.as_deref(), Some("nvidia_smi"));
    let parsed = servetop::telemetry::smi::parse(&fixture("nvidia-h200.csv")).unwrap();
    let (n, j, p) = (&nvml.gpus[0], &smi_json.gpus[0], &parsed[0]);
    for g in [n, j, p] {
        assert_eq!((g.index, g.name.as_str()), (0, "NVIDIA H200"));
        assert_eq!(g.mem_total_bytes, Some(143_771 * 1024 * 1024), "{}", g.name);
        assert_eq!(g.power_limit_w, Some(700.0));
        assert_eq!(g.uuid, n.uuid);
        assert!(g.uuid.as_deref().is_some_and(|u| u.starts_with("GPU-")));
        // An idle GPU: nothing running, its power a tenth of the limit or so.
        assert_eq!((g.mem_used_bytes, g.util_gpu_pct), (Some(0), Some(0.0)));
        assert!(
            g.power_w.is_some_and(|w| w > 0.0 && w < 700.0),
            "{:?}",
            g.power_w
        );
    }
    // Only NVML has the energy counter; the nvidia-smi path integrates power instead.
    assert!(n.energy_mj.is_some());
    assert_eq!((j.energy_mj, p.energy_mj), (None, None));
}

/// Ten NVML readings half a second apart on the idle H200: the energy counter moves, and by
/// no more than its power allows (about 76 W: under 0.2 kJ between two readings).
#[test]
fn the_h200s_energy_counter_moves_between_readings() {
    let mj: Vec<u64> = fixture("nvidia-h200-series.jsonl")
        .lines()
        .map(|l| {
            let r: GpuJson = serde_json::from_str(l).unwrap();
            r.gpus[0].energy_mj.unwrap()
        })
        .collect();
    assert_eq!(mj.len(), 10);
    for w in mj.windows(2) {
        assert!(w[1] > w[0] && w[1] - w[0] < 200_000, "{mj:?}");
    }
}

/// The H200 as NVML reported it, in NVML's own units: what the glibc binary's sampler was given
/// for `nvidia-h200.json` (its figures in milliwatts and bytes; 143771 MiB as `nvidia-smi -q`
/// said, 76.473 W, a 700 W limit).
fn h200_raw() -> servetop::telemetry::gpu::NvmlRaw {
    servetop::telemetry::gpu::NvmlRaw {
        name: Some("NVIDIA H200".into()),
        uuid: Some("GPU-0197b849-8000-7d68-74d0-dad91250d53d".into()),
        mem_used_bytes: Some(0),
        // 143771 MiB × 1 048 576 bytes.
        mem_total_bytes: Some(150_754_820_096),
        util_gpu_pct: Some(0),
        util_mem_pct: Some(0),
        power_mw: Some(76_473),
        power_limit_mw: Some(700_000),
        temp_c: Some(33),
        sm_clock_mhz: Some(345),
        energy_mj: Some(5_720_736),
    }
}

/// The NVML reader's conversions, run through the product from NVML's raw units: milliwatts
/// to watts, bytes kept (and shown in GiB), percent, °C and MHz as numbers, the energy counter
/// in millijoules; each expected figure worked out by hand here. The result is the reading the
/// glibc binary wrote on the H200, field for field.
#[test]
fn nvmls_raw_units_convert_as_worked_out_by_hand() {
    let g = h200_raw().reading(0);
    assert_eq!(g.power_w, Some(76.473), "76 473 mW");
    assert_eq!(g.power_limit_w, Some(700.0), "700 000 mW");
    assert_eq!(g.mem_total_bytes, Some(143_771 * 1024 * 1024));
    assert_eq!(g.mem_used_bytes, Some(0));
    assert_eq!((g.util_gpu_pct, g.util_mem_pct), (Some(0.0), Some(0.0)));
    assert_eq!((g.temp_c, g.sm_clock_mhz), (Some(33.0), Some(345.0)));
    assert_eq!(g.energy_mj, Some(5_720_736));
    let nvml: GpuJson = serde_json::from_str(&fixture("nvidia-h200.json")).unwrap();
    assert_eq!(g, nvml.gpus[0]);

    // Busy, and shown as a line: 60 GiB used is 64 424 509 440 bytes; 143771 MiB is
    // 140.40 GiB; 412 345 mW is 412 W; 87 % of the time a kernel ran, 41 % memory was busy.
    let busy = servetop::telemetry::gpu::NvmlRaw {
        mem_used_bytes: Some(64_424_509_440),
        util_gpu_pct: Some(87),
        util_mem_pct: Some(41),
        power_mw: Some(412_345),
        temp_c: Some(61),
        sm_clock_mhz: Some(1980),
        ..h200_raw()
    }
    .reading(3);
    assert_eq!(busy.index, 3);
    assert_eq!(busy.power_w, Some(412.345));
    assert_eq!(
        (busy.util_gpu_pct, busy.util_mem_pct),
        (Some(87.0), Some(41.0))
    );
    assert_eq!(
        servetop::telemetry::gpu_line(&busy),
        "GPU 3 NVIDIA H200 · mem 60.0/140.4 GiB · util 87% · 412/700 W · 61°C · 1980 MHz"
    );
    // What NVML did not give is N/A, never 0; an unnamed GPU is named by its index.
    let bare = servetop::telemetry::gpu::NvmlRaw::default().reading(1);
    assert_eq!(bare.name, "GPU 1");
    assert_eq!(
        (bare.power_w, bare.energy_mj, bare.mem_used_bytes),
        (None, None, None)
    );
}

/// The H200's energy counter, ten NVML readings (`nvidia-h200-series.jsonl`, in millijoules
/// as NVML counts), through the reader and the level's energy fold, taken half a second apart:
/// the energy is the counter's rise over 1000 (374.397 J), over 4.5 s.
#[test]
fn the_h200s_energy_counter_in_millijoules_is_joules_over_the_window() {
    use servetop::telemetry::energy::{EnergyFold, FROM_COUNTER};
    use servetop::telemetry::{GpuSample, GpuSource};
    let mj: Vec<u64> = fixture("nvidia-h200-series.jsonl")
        .lines()
        .map(|l| {
            let r: GpuJson = serde_json::from_str(l).unwrap();
            r.gpus[0].energy_mj.unwrap()
        })
        .collect();
    let sample = |i: usize| GpuSample {
        at_unix_ms: 500 * i as i64,
        source: GpuSource::Nvml,
        gpus: vec![
            servetop::telemetry::gpu::NvmlRaw {
                energy_mj: Some(mj[i]),
                ..h200_raw()
            }
            .reading(0),
        ],
    };
    let mut fold = EnergyFold::new(Some(sample(0)));
    for i in 1..mj.len() {
        fold.add(&sample(i));
    }
    let e = fold.energy().unwrap();
    assert_eq!(e.source, FROM_COUNTER);
    // 6 095 133 − 5 720 736 = 374 397 mJ.
    assert!((e.joules - 374.397).abs() < 1e-9, "{e:?}");
    assert!((e.window_s - 4.5).abs() < 1e-12, "{e:?}");
}
