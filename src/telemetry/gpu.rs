//! Local GPUs through NVML, else through `nvidia-smi` ([`super::smi`]: the static build cannot
//! load NVML), sampled on a thread of their own: both calls block and must never stall the
//! async runtime that times requests.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{GpuReading, GpuSample, GpuSource, Reports, TelemetryRecord, now_unix_ms};

/// NVML, or `nvidia-smi` where NVML cannot be loaded.
enum Sampler {
    Nvml(Box<imp::Sampler>),
    Smi,
}

impl Sampler {
    /// NVML first; without it, `nvidia-smi` if it reads a GPU; else both reasons.
    fn init() -> Result<Self, String> {
        match imp::Sampler::init() {
            Ok(s) => Ok(Self::Nvml(Box::new(s))),
            Err(nvml) => match super::smi::read() {
                Ok(_) => Ok(Self::Smi),
                Err(smi) => Err(format!("{nvml}; {smi}")),
            },
        }
    }

    fn source(&self) -> GpuSource {
        match self {
            Self::Nvml(_) => GpuSource::Nvml,
            Self::Smi => GpuSource::NvidiaSmi,
        }
    }

    fn sample(&self) -> Result<Vec<GpuReading>, String> {
        match self {
            Self::Nvml(s) => s.sample(),
            Self::Smi => super::smi::read(),
        }
    }

    fn reading(&self) -> Result<GpuSample, String> {
        Ok(GpuSample {
            at_unix_ms: now_unix_ms(),
            source: self.source(),
            gpus: self.sample()?,
        })
    }
}

/// Every GPU now, or why there are none (the reasons NVML and `nvidia-smi` give, in words).
pub fn read_once() -> Result<GpuSample, String> {
    Sampler::init()?.reading()
}

/// [`read_once`] through one sampler kept for the process (readings on demand, at level
/// boundaries, should not load the driver library each time).
pub fn read_cached() -> Result<GpuSample, String> {
    static SAMPLER: std::sync::OnceLock<Result<Sampler, String>> = std::sync::OnceLock::new();
    match SAMPLER.get_or_init(Sampler::init) {
        Ok(s) => s.reading(),
        Err(e) => Err(e.clone()),
    }
}

/// Samples every `interval` until `cancel`, sending each reading to `tx`. A machine without the
/// driver or without GPUs sends one `GpuUnavailable` with the reason and stops.
pub fn spawn(interval: Duration, tx: Reports, cancel: CancellationToken) {
    let spawned = std::thread::Builder::new()
        .name("servetop-gpus".into())
        .spawn(move || {
            let sampler = match Sampler::init() {
                Ok(s) => s,
                Err(reason) => {
                    tx.send(TelemetryRecord::GpuUnavailable {
                        at_unix_ms: now_unix_ms(),
                        reason,
                    });
                    return;
                }
            };
            while !cancel.is_cancelled() {
                let rec = match sampler.reading() {
                    Ok(sample) => TelemetryRecord::Gpu(sample),
                    Err(reason) => TelemetryRecord::GpuUnavailable {
                        at_unix_ms: now_unix_ms(),
                        reason,
                    },
                };
                if !tx.send(rec) {
                    return;
                }
                // Sleep in short steps so quitting is not held up by a long interval.
                let mut left = interval;
                while !left.is_zero() && !cancel.is_cancelled() {
                    let step = left.min(Duration::from_millis(100));
                    std::thread::sleep(step);
                    left = left.saturating_sub(step);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start the GPU sampler thread: {e}");
    }
}

/// One GPU as NVML reports it, in NVML's own units; [`NvmlRaw::reading`] converts it. Kept
/// apart from the driver calls so that the conversion is tested without a GPU
/// (`tests/gpu_check.rs`, from an H200's values).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NvmlRaw {
    pub name: Option<String>,
    pub uuid: Option<String>,
    /// Device memory used and in all, bytes (`nvmlDeviceGetMemoryInfo`).
    pub mem_used_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    /// Percent of the last sample period a kernel ran, and memory was read or written
    /// (`nvmlDeviceGetUtilizationRates`).
    pub util_gpu_pct: Option<u32>,
    pub util_mem_pct: Option<u32>,
    /// Power drawn and the enforced limit, milliwatts (`nvmlDeviceGetPowerUsage`,
    /// `nvmlDeviceGetEnforcedPowerLimit`).
    pub power_mw: Option<u32>,
    pub power_limit_mw: Option<u32>,
    /// °C (`nvmlDeviceGetTemperature`, the GPU sensor).
    pub temp_c: Option<u32>,
    /// The SM clock, MHz (`nvmlDeviceGetClockInfo`).
    pub sm_clock_mhz: Option<u32>,
    /// Millijoules since the driver loaded (`nvmlDeviceGetTotalEnergyConsumption`).
    pub energy_mj: Option<u64>,
}

impl NvmlRaw {
    /// GPU `index` as servetop records it: watts from milliwatts; memory in bytes, percent,
    /// °C, MHz and the energy counter in millijoules as NVML gives them. A field NVML did not
    /// give stays `None` (shown as N/A).
    pub fn reading(self, index: u32) -> GpuReading {
        let watts = |mw: u32| f64::from(mw) / 1000.0;
        GpuReading {
            index,
            name: self.name.unwrap_or_else(|| format!("GPU {index}")),
            uuid: self.uuid,
            mem_used_bytes: self.mem_used_bytes,
            mem_total_bytes: self.mem_total_bytes,
            util_gpu_pct: self.util_gpu_pct.map(f64::from),
            util_mem_pct: self.util_mem_pct.map(f64::from),
            power_w: self.power_mw.map(watts),
            power_limit_w: self.power_limit_mw.map(watts),
            temp_c: self.temp_c.map(f64::from),
            sm_clock_mhz: self.sm_clock_mhz.map(f64::from),
            energy_mj: self.energy_mj,
        }
    }
}

#[cfg(feature = "nvml")]
mod imp {
    use nvml_wrapper::Nvml;
    use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
    use nvml_wrapper::error::NvmlError;

    use super::GpuReading;

    pub struct Sampler(Nvml);

    /// `NotSupported` (and other per-field errors) read as N/A, not as failure.
    fn opt<T>(r: Result<T, NvmlError>) -> Option<T> {
        r.ok()
    }

    impl Sampler {
        pub fn init() -> Result<Self, String> {
            Nvml::init().map(Sampler).map_err(|e| match e {
                NvmlError::LibloadingError(inner) => {
                    format!("the NVIDIA driver library is not installed ({inner})")
                }
                NvmlError::DriverNotLoaded => "the NVIDIA driver is not loaded".into(),
                NvmlError::NoPermission => "no permission to talk to the NVIDIA driver".into(),
                other => other.to_string(),
            })
        }

        pub fn sample(&self) -> Result<Vec<GpuReading>, String> {
            let n = self.0.device_count().map_err(|e| e.to_string())?;
            if n == 0 {
                return Err("NVML found no GPU".into());
            }
            let mut out = Vec::with_capacity(n as usize);
            for i in 0..n {
                let d = self
                    .0
                    .device_by_index(i)
                    .map_err(|e| format!("GPU {i}: {e}"))?;
                let mem = opt(d.memory_info());
                let util = opt(d.utilization_rates());
                let raw = super::NvmlRaw {
                    name: opt(d.name()),
                    uuid: opt(d.uuid()),
                    mem_used_bytes: mem.as_ref().map(|m| m.used),
                    mem_total_bytes: mem.as_ref().map(|m| m.total),
                    util_gpu_pct: util.as_ref().map(|u| u.gpu),
                    util_mem_pct: util.as_ref().map(|u| u.memory),
                    power_mw: opt(d.power_usage()),
                    power_limit_mw: opt(d.enforced_power_limit()),
                    temp_c: opt(d.temperature(TemperatureSensor::Gpu)),
                    sm_clock_mhz: opt(d.clock_info(Clock::SM)),
                    energy_mj: opt(d.total_energy_consumption()),
                };
                out.push(raw.reading(i));
            }
            Ok(out)
        }
    }
}

#[cfg(not(feature = "nvml"))]
mod imp {
    use super::GpuReading;

    pub struct Sampler;

    impl Sampler {
        pub fn init() -> Result<Self, String> {
            Err("this servetop was built without NVML support (cargo feature nvml)".into())
        }

        pub fn sample(&self) -> Result<Vec<GpuReading>, String> {
            Err("no NVML".into())
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_gpu_here_is_a_reason_not_a_crash() {
        // Whether this machine has an NVIDIA driver is read from the kernel, not from NVML:
        // without one (CI, here) the reading must be a reason naming what is missing; with one,
        // real GPUs.
        let driver = std::path::Path::new("/proc/driver/nvidia/version").exists();
        match super::read_once() {
            Ok(s) => assert!(driver && !s.gpus.is_empty(), "{s:?} without a driver"),
            Err(reason) => {
                assert!(!driver, "a driver is loaded, yet: {reason}");
                assert!(
                    reason.contains("libnvidia-ml") || reason.contains("NVML"),
                    "the reason names what is missing: {reason}"
                );
            }
        }
    }
}
