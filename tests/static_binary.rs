//! The static binary (`scripts/static-build.sh`, `x86_64` musl): it needs no loader and no shared
//! library, says its version, benchmarks the built-in simulator, and reads GPUs through
//! `nvidia-smi` (it cannot load NVML) or says why it has none.
//!
//! `.ci/run` builds it (`--profile dev`) before the tests. Without it this test skips, saying
//! so, unless `SERVETOP_REQUIRE_STATIC=1` (CI) makes a missing binary a failure.
//! `SERVETOP_STATIC_BIN` names another one.

// Integration tests may unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

const TARGET: &str = "x86_64-unknown-linux-musl";

fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SERVETOP_STATIC_BIN") {
        return Some(PathBuf::from(p));
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    let found = ["debug", "release", "dist"]
        .iter()
        .map(|p| target.join(TARGET).join(p).join("servetop"))
        .filter(|p| p.is_file())
        .max_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    if found.is_none() {
        assert!(
            std::env::var("SERVETOP_REQUIRE_STATIC").as_deref() != Ok("1"),
            "SERVETOP_REQUIRE_STATIC=1 but there is no static binary (scripts/static-build.sh)"
        );
        eprintln!("no static binary (scripts/static-build.sh --profile dev): skipping");
    }
    found
}

/// The ELF program header types of the file at `p`.
fn segment_types(p: &std::path::Path) -> Vec<u32> {
    let b = std::fs::read(p).unwrap();
    assert_eq!(&b[..4], b"\x7fELF", "{} is not an ELF file", p.display());
    assert_eq!(b[4], 2, "not a 64-bit ELF");
    let u16_at = |o: usize| usize::from(u16::from_le_bytes([b[o], b[o + 1]]));
    let phoff = usize::try_from(u64::from_le_bytes(b[0x20..0x28].try_into().unwrap())).unwrap();
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count)
        .map(|i| {
            let o = phoff + i * size;
            u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
        })
        .collect()
}

#[test]
fn the_static_binary_runs_alone_and_benchmarks_the_simulator() {
    let Some(bin) = binary() else { return };
    // No PT_INTERP (3): the kernel runs it without a dynamic loader, so no C library is needed.
    const PT_LOAD: u32 = 1;
    const PT_INTERP: u32 = 3;
    let types = segment_types(&bin);
    assert!(types.contains(&PT_LOAD), "{types:?}");
    assert!(
        !types.contains(&PT_INTERP),
        "{} asks for a dynamic loader: not static",
        bin.display()
    );
    // This machine's own dynamic binary, read the same way, does ask for one: the check can fail.
    let own = PathBuf::from(env!("CARGO_BIN_EXE_servetop"));
    assert!(
        segment_types(&own).contains(&PT_INTERP),
        "{}",
        own.display()
    );

    let out = Command::new(&bin).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("servetop {}", env!("CARGO_PKG_VERSION"))
    );

    let dir = std::env::temp_dir().join(format!("servetop-static-{}", std::process::id()));
    let serve = format!("{} sim --preset fast --port {{port}}", bin.display());
    let out = Command::new(&bin)
        .args(["run", "--serve", &serve, "--concurrency", "1,4"])
        .args(["--requests-per-level", "8", "--output-len", "32"])
        .args(["--long-context", "none", "--headless", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).unwrap()).unwrap();
    let levels = results["sweep"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{results}");
    for l in levels {
        assert_eq!(l["completed"], 8, "{l}");
        assert_eq!(l["failed"], 0, "{l}");
    }
    assert_eq!(results["server"]["simulated"], true);
    let _ = std::fs::remove_dir_all(&dir);

    // GPUs: through nvidia-smi where it is installed; here, most likely, why there are none.
    let out = Command::new(&bin)
        .args(["gpu", "--once", "--json"])
        .output()
        .unwrap();
    let g: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let has_smi = Command::new("nvidia-smi").arg("-L").output().is_ok();
    if g["available"] == true {
        assert_eq!(g["source"], "nvidia_smi", "{g}");
    } else {
        let reason = g["reason"].as_str().unwrap();
        assert!(reason.contains("without NVML"), "{reason}");
        if !has_smi {
            assert!(reason.contains("nvidia-smi is not installed"), "{reason}");
        }
    }
}
