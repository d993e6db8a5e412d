//! Local GPUs through `nvidia-smi`, where NVML cannot be loaded: the static build (a static
//! musl binary cannot load a shared library) or a driver library outside the loader's path.
//! One `nvidia-smi --query-gpu` per reading; it has no energy counter, so a level's energy is
//! integrated from power (docs/metrics.md), as for any GPU without the counter.

use std::process::Command;

use super::GpuReading;

/// The fields asked for, in the order [`parse`] reads them.
pub const QUERY: &str = "index,name,uuid,memory.used,memory.total,utilization.gpu,utilization.memory,power.draw,enforced.power.limit,temperature.gpu,clocks.sm";
const FIELDS: usize = 11;

/// Every GPU now, or why `nvidia-smi` gave none.
pub fn read() -> Result<Vec<GpuReading>, String> {
    let out = Command::new("nvidia-smi")
        .arg(format!("--query-gpu={QUERY}"))
        .arg("--format=csv,noheader,nounits")
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "nvidia-smi is not installed".to_string(),
            _ => format!("cannot run nvidia-smi: {e}"),
        })?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(if out.stderr.is_empty() {
            &out.stdout
        } else {
            &out.stderr
        })
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
        return Err(format!("nvidia-smi failed ({}): {said}", out.status));
    }
    parse(&String::from_utf8_lossy(&out.stdout))
}

/// `nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits`: one line per GPU, memory in
/// MiB, power in W, clocks in MHz; `[N/A]` and `[Not Supported]` where a field has no value.
pub fn parse(text: &str) -> Result<Vec<GpuReading>, String> {
    let mut gpus = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() < FIELDS {
            return Err(format!("nvidia-smi printed an unexpected line: {line}"));
        }
        // A comma in the name: the fields after it are the last nine.
        let tail = &f[f.len() - (FIELDS - 2)..];
        let name = f[1..f.len() - (FIELDS - 2)].join(", ");
        let num = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite());
        let mib = |s: &str| num(s).map(|v| (v * 1024.0 * 1024.0) as u64);
        let index = f[0]
            .parse::<u32>()
            .map_err(|_| format!("nvidia-smi printed an unexpected line: {line}"))?;
        gpus.push(GpuReading {
            index,
            name: if name.is_empty() {
                format!("GPU {index}")
            } else {
                name
            },
            uuid: Some(tail[0].to_string()).filter(|u| u.starts_with("GPU-")),
            mem_used_bytes: mib(tail[1]),
            mem_total_bytes: mib(tail[2]),
            util_gpu_pct: num(tail[3]),
            util_mem_pct: num(tail[4]),
            power_w: num(tail[5]),
            power_limit_w: num(tail[6]),
            temp_c: num(tail[7]),
            sm_clock_mhz: num(tail[8]),
            energy_mj: None,
        });
    }
    if gpus.is_empty() {
        return Err("nvidia-smi found no GPU".into());
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_gpus_with_a_field_not_supported() {
        let text = "0, NVIDIA H200, GPU-5e0c1c2a-0000-1111-2222-333344445555, 61234, 143771, 34, 12, 312.47, 700.00, 54, 1980\n\
                    1, NVIDIA RTX 6000 Ada Generation, GPU-aa, 1, 49140, [N/A], [Not Supported], 20.5, [N/A], 31, 210\n";
        let g = parse(text).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].index, 0);
        assert_eq!(g[0].name, "NVIDIA H200");
        assert_eq!(
            g[0].uuid.as_deref(),
            Some("GPU-5e0c1c2a-0000-1111-2222-333344445555")
        );
        assert_eq!(g[0].mem_used_bytes, Some(61234 * 1024 * 1024));
        assert_eq!(g[0].mem_total_bytes, Some(143_771 * 1024 * 1024));
        assert_eq!(g[0].util_gpu_pct, Some(34.0));
        assert_eq!(g[0].util_mem_pct, Some(12.0));
        assert_eq!(g[0].power_w, Some(312.47));
        assert_eq!(g[0].power_limit_w, Some(700.0));
        assert_eq!(g[0].temp_c, Some(54.0));
        assert_eq!(g[0].sm_clock_mhz, Some(1980.0));
        assert_eq!(g[0].energy_mj, None);
        assert_eq!(g[1].name, "NVIDIA RTX 6000 Ada Generation");
        assert_eq!(g[1].util_gpu_pct, None);
        assert_eq!(g[1].util_mem_pct, None);
        assert_eq!(g[1].power_limit_w, None);
        assert_eq!(g[1].power_w, Some(20.5));
    }

    #[test]
    fn a_comma_in_the_name_and_bad_output() {
        let g = parse("3, Tesla V100, PCIe, GPU-x, 1, 2, 3, 4, 5.5, 250, 40, 1380").unwrap();
        assert_eq!(g[0].index, 3);
        assert_eq!(g[0].name, "Tesla V100, PCIe");
        assert_eq!(g[0].sm_clock_mhz, Some(1380.0));
        assert!(parse("").unwrap_err().contains("no GPU"));
        assert!(
            parse("No devices were found")
                .unwrap_err()
                .contains("unexpected line")
        );
        assert!(
            parse("x, a, GPU-x, 1, 2, 3, 4, 5, 6, 7, 8")
                .unwrap_err()
                .contains("unexpected line")
        );
    }
}
