//! What kept a case's reader from its core: the time its runtime's worker threads were ready to
//! run and waited for a CPU (the kernel's run-queue wait, `/proc/self/task/*/schedstat`), and
//! the time the hypervisor took from the case's CPUs (steal, `/proc/stat`). A paced case's
//! stream falls a step behind when its reader loses its core for about a step: these say whether
//! that happened, and from outside servetop (steal, another process on the core) or within it
//! (its own threads taking turns; the steal then stays near zero).

/// The worker threads' name: the runtime that reads the streams.
const READER: &str = "tokio-rt-worker";

/// Seconds this process's reading threads have waited on a run queue so far (0 where the kernel
/// keeps no schedstat).
pub fn reader_wait_s() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let mut ns = 0u64;
    for t in tasks.flatten() {
        let p = t.path();
        let named = std::fs::read_to_string(p.join("comm")).is_ok_and(|c| c.trim() == READER);
        if !named {
            continue;
        }
        // "run time (ns) wait time (ns) timeslices".
        ns += std::fs::read_to_string(p.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    ns as f64 / 1e9
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

/// Seconds of steal so far on the CPUs this process may run on (0 where none is reported).
pub fn steal_s() -> f64 {
    let cpus = allowed_cpus();
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    steal_ticks(&stat, &cpus) as f64 / USER_HZ
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

    /// The reading threads' wait is read from this process's own threads: a thread of that
    /// name that waits behind a busy one on the same CPU shows a wait that grows.
    #[test]
    fn a_reader_kept_from_its_core_shows_its_wait() {
        if std::fs::read_to_string("/proc/self/schedstat").is_err() {
            return;
        }
        let before = reader_wait_s();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spin = |stop: std::sync::Arc<std::sync::atomic::AtomicBool>| {
            std::thread::Builder::new()
                .name(READER.into())
                .spawn(move || {
                    pin_to_first_cpu();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap()
        };
        // Two spinning threads on one CPU: each waits while the other runs.
        let (a, b) = (spin(stop.clone()), spin(stop.clone()));
        std::thread::sleep(std::time::Duration::from_millis(300));
        let during = reader_wait_s();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        a.join().unwrap();
        b.join().unwrap();
        assert!(
            during - before >= 0.05,
            "two spinning threads on one CPU for 300 ms waited {:.3} s between them",
            during - before
        );
    }

    fn pin_to_first_cpu() {
        let first = allowed_cpus().first().copied().unwrap_or(0);
        let mut set = nix::sched::CpuSet::new();
        let _ = set.set(first);
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}
