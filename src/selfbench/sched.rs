//! What kept a case's reader from its core: the time its runtime's worker threads were ready to
//! run and waited for a CPU (the kernel's run-queue wait, `/proc/self/task/*/schedstat`), and
//! the time the hypervisor took from the case's CPUs (steal, `/proc/stat`). A paced case's
//! stream falls a step behind when its reader loses its core for about a step: these say whether
//! that happened, and from outside servetop (steal, another process on the core) or within it
//! (its own threads taking turns; the steal then stays near zero).

/// The worker threads' name: the runtime that reads the streams.
const READER: &str = "tokio-rt-worker";

/// Reads of the reading threads' run-queue wait and of the steal on the case's CPUs, each a
/// running total in seconds since the first read.
pub struct Readings {
    /// Each reading thread's wait (ns) at the last read: a thread that ends keeps what it
    /// added (tokio's blocking threads share the workers' name and end when idle).
    waits: std::collections::HashMap<u64, u64>,
    wait_ns: u64,
    cpus: Vec<usize>,
    /// The kernel keeps per-thread schedstat, and `/proc/stat` reads.
    has_wait: bool,
    has_steal: bool,
}

impl Readings {
    pub fn new() -> Self {
        Self {
            waits: std::collections::HashMap::new(),
            wait_ns: 0,
            cpus: allowed_cpus(),
            has_wait: std::fs::metadata("/proc/self/schedstat").is_ok(),
            has_steal: std::fs::metadata("/proc/stat").is_ok(),
        }
    }

    /// Seconds the reading threads have waited on a run queue so far (`None` where the
    /// kernel keeps no schedstat).
    pub fn reader_wait_s(&mut self) -> Option<f64> {
        if !self.has_wait {
            return None;
        }
        let tasks = std::fs::read_dir("/proc/self/task").ok()?;
        for t in tasks.flatten() {
            let p = t.path();
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) else {
                continue;
            };
            if !std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == READER) {
                continue;
            }
            // "run time (ns) wait time (ns) timeslices".
            let Some(ns) = std::fs::read_to_string(p.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            else {
                continue;
            };
            let last = self.waits.insert(tid, ns).unwrap_or(0);
            self.wait_ns += ns.saturating_sub(last);
        }
        Some(self.wait_ns as f64 / 1e9)
    }

    /// Seconds of steal so far on the CPUs this process may run on (`None` where `/proc/stat`
    /// cannot be read).
    pub fn steal_s(&self) -> Option<f64> {
        if !self.has_steal {
            return None;
        }
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        Some(steal_ticks(&stat, &self.cpus) as f64 / USER_HZ)
    }
}

/// The CPUs this process may run on, from `Cpus_allowed_list` in `/proc/self/status`
/// (`0-3,6`); empty where it cannot be read.
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap_or("");
    cpu_list(list)
}

/// A kernel CPU list (`0-3,6`) as its CPUs.
fn cpu_list(list: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => out.push(a),
            (Some(Ok(a)), Some(Ok(b))) if a <= b => out.extend(a..=b),
            _ => return Vec::new(),
        }
    }
    out
}

/// `/proc/stat` counts in `USER_HZ` ticks, 100 a second on Linux whatever the kernel's own tick.
const USER_HZ: f64 = 100.0;

/// The steal column (the eighth number) of the `cpuN` lines of `stat` for the CPUs in `cpus`.
fn steal_ticks(stat: &str, cpus: &[usize]) -> u64 {
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
            cpus.contains(&cpu)
                .then(|| f.nth(7)?.parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_steal_columns_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_list("1\n"), vec![1]);
        assert_eq!(cpu_list("0-3,6"), vec![0, 1, 2, 3, 6]);
        assert_eq!(cpu_list("3-1"), Vec::<usize>::new());
        assert_eq!(cpu_list("x"), Vec::<usize>::new());
        let stat = "cpu  10 0 5 100 0 0 0 7 0 0\n\
                    cpu0 5 0 2 50 0 0 0 3 0 0\n\
                    cpu1 5 0 3 50 0 0 0 4 0 0\n\
                    intr 1 2 3\n";
        assert_eq!(steal_ticks(stat, &[1]), 4);
        assert_eq!(steal_ticks(stat, &[0, 1]), 7);
        assert_eq!(steal_ticks(stat, &[2]), 0);
    }

    /// The reading threads' wait is read from this process's own threads: one more thread of
    /// that name spinning than the process has CPUs must wait between them, whatever else the
    /// machine does (more load only adds to it).
    #[test]
    fn reading_threads_kept_from_their_cores_show_their_wait() {
        let mut r = Readings::new();
        let Some(before) = r.reader_wait_s() else {
            return;
        };
        // The CPUs its threads may run on (a cgroup's quota may give them less, never more).
        let cpus = r
            .cpus
            .len()
            .max(std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..=cpus)
            .map(|_| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .name(READER.into())
                    .spawn(move || {
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                    .unwrap()
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let during = r.reader_wait_s().unwrap_or(0.0);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        // Ended threads keep what they added.
        let after = r.reader_wait_s().unwrap_or(0.0);
        assert!(
            during - before >= 0.05,
            "{} spinning threads on {cpus} CPUs for 300 ms waited {:.3} s between them",
            cpus + 1,
            during - before
        );
        assert!(
            after >= during,
            "the total went down: {during} then {after}"
        );
    }
}
