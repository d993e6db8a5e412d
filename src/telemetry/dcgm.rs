//! NVIDIA DCGM exporter pages (`DCGM_FI_*` metrics, one series per GPU) mapped to `GpuReading`s,
//! for GPUs on another host than the dashboard.

use std::collections::BTreeMap;

use super::GpuReading;
use super::prom::Page;

const MIB: f64 = 1024.0 * 1024.0;

/// GPUs on the page, by the `gpu` label; `None` when the page has no DCGM metrics.
pub fn map(page: &Page) -> Option<Vec<GpuReading>> {
    let mut gpus: BTreeMap<u32, GpuReading> = BTreeMap::new();
    let mut fb_free: BTreeMap<u32, f64> = BTreeMap::new();
    let mut fb_reserved: BTreeMap<u32, f64> = BTreeMap::new();
    for s in page
        .samples
        .iter()
        .filter(|s| s.name.starts_with("DCGM_FI_"))
    {
        let Some(idx) = s.label("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            continue;
        };
        let g = gpus.entry(idx).or_insert_with(|| GpuReading {
            index: idx,
            ..GpuReading::default()
        });
        if let Some(m) = s.label("modelName") {
            g.name = m.to_string();
        }
        if let Some(u) = s.label("UUID") {
            g.uuid = Some(u.to_string());
        }
        let v = Some(s.value).filter(|v| v.is_finite());
        match s.name.as_str() {
            "DCGM_FI_DEV_FB_USED" => g.mem_used_bytes = v.map(|m| (m * MIB) as u64),
            "DCGM_FI_DEV_FB_FREE" => {
                if let Some(m) = v {
                    fb_free.insert(idx, m);
                }
            }
            "DCGM_FI_DEV_FB_RESERVED" => {
                if let Some(m) = v {
                    fb_reserved.insert(idx, m);
                }
            }
            "DCGM_FI_DEV_GPU_UTIL" => g.util_gpu_pct = v,
            "DCGM_FI_DEV_MEM_COPY_UTIL" => g.util_mem_pct = v,
            "DCGM_FI_DEV_POWER_USAGE" => g.power_w = v,
            "DCGM_FI_DEV_POWER_MGMT_LIMIT" => g.power_limit_w = v,
            "DCGM_FI_DEV_GPU_TEMP" => g.temp_c = v,
            "DCGM_FI_DEV_SM_CLOCK" => g.sm_clock_mhz = v,
            // Millijoules since the driver loaded.
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" => {
                g.energy_mj = v.filter(|e| *e >= 0.0).map(|e| e.round() as u64);
            }
            _ => {}
        }
    }
    if gpus.is_empty() {
        return None;
    }
    for (idx, g) in &mut gpus {
        if let (Some(used), Some(free)) = (g.mem_used_bytes, fb_free.get(idx)) {
            let reserved = fb_reserved.get(idx).copied().unwrap_or(0.0);
            g.mem_total_bytes = Some(used + ((free + reserved) * MIB) as u64);
        }
    }
    Some(gpus.into_values().collect())
}

/// Whether the page says it comes from servetop's simulator.
pub fn is_simulated(page: &Page) -> bool {
    page.samples
        .iter()
        .any(|s| s.name.starts_with("DCGM_FI_") && s.label("simulated") == Some("true"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::prom::parse;

    #[test]
    fn two_gpus_with_memory_in_mib() {
        let p = parse(
            "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA L40S\"} 30000\n\
             DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA L40S\"} 16068\n\
             DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\",modelName=\"NVIDIA L40S\"} 87\n\
             DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"GPU-b\",modelName=\"NVIDIA L40S\"} 1024\n\
             DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"GPU-b\",modelName=\"NVIDIA L40S\"} 41\n",
        );
        let g = map(&p).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].name, "NVIDIA L40S");
        assert_eq!(g[0].mem_used_bytes, Some(30000 * 1024 * 1024));
        assert_eq!(g[0].mem_total_bytes, Some(46068 * 1024 * 1024));
        assert_eq!(g[0].util_gpu_pct, Some(87.0));
        assert_eq!(g[1].temp_c, Some(41.0));
        assert_eq!(g[1].mem_total_bytes, None);
        assert!(!is_simulated(&p));
        assert!(map(&parse("up 1\n")).is_none());
    }
}
