//! What a run's connections need of the machine before anything is sent: an open file a
//! request in flight (its socket) under the process's open-file limit, and a local port each
//! under the kernel's ephemeral port range. The soft limit is raised to what the plan needs
//! where the hard limit allows it; where it does not, the run stops before it starts, naming
//! the limit and how to raise it (one line, exit 2), instead of failing requests mid-level with
//! "too many open files".

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Files servetop holds besides its connections: the run directory's files, telemetry and the
/// engine's metrics page, the live feed and its viewers, the runtime's own descriptors.
pub const RESERVED_FILES: u64 = 256;

/// The open files `sockets` connections need.
pub fn files_needed(sockets: u64) -> u64 {
    sockets + RESERVED_FILES
}

/// Why a run's load needs its sockets, as the messages say it.
pub const A_SOCKET_A_REQUEST: &str = "a socket a request in flight";

/// Raises the open-file limit to what `sockets` connections need, or says why it cannot;
/// `Ok(Some(line))` says it was raised. `what` names the load (`C=10000`), `why` where the
/// sockets come from ([`A_SOCKET_A_REQUEST`]).
pub fn ensure_open_files(sockets: u64, what: &str, why: &str) -> Result<Option<String>, String> {
    let need = files_needed(sockets);
    let now = getrlimit(Resource::Nofile);
    // None is unlimited.
    let soft = now.current.unwrap_or(u64::MAX);
    if soft >= need {
        return Ok(None);
    }
    let hard = now.maximum.unwrap_or(u64::MAX);
    if hard >= need
        && setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(need),
                maximum: now.maximum,
            },
        )
        .is_ok()
    {
        return Ok(Some(format!(
            "raised the open-file limit from {soft} to {need} for {what} ({why})"
        )));
    }
    Err(format!(
        "{what} needs about {need} open files ({why}, {RESERVED_FILES} more for servetop), but this process may open {soft} (hard limit {}): raise it with `ulimit -n {need}` in the shell that starts servetop (LimitNOFILE={need} in a systemd unit, nofile in /etc/security/limits.conf, or a smaller --concurrency)",
        now.maximum
            .map_or_else(|| "unlimited".to_string(), |h| h.to_string())
    ))
}

/// The kernel's ephemeral port range (`net.ipv4.ip_local_port_range`): how many connections
/// one machine can open to one server address; None where it cannot be read.
fn local_ports() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = s.split_whitespace().map(str::parse::<u64>);
    let (lo, hi) = (it.next()?.ok()?, it.next()?.ok()?);
    Some(hi.saturating_sub(lo) + 1)
}

/// Whether `most` connections to one server fit the ephemeral port range; an error naming the
/// range and how to widen it (or to spread the load) when they cannot.
pub fn ensure_local_ports(most: u64, what: &str) -> Result<(), String> {
    match local_ports() {
        Some(ports) if ports < most => Err(format!(
            "{what} needs {most} connections to one server address, but this machine has {ports} local ports for them (net.ipv4.ip_local_port_range): widen it (sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\") or spread the load over machines with --shard I/N"
        )),
        _ => Ok(()),
    }
}

/// Both checks for the most requests any level of a plan has in flight (nothing to check when
/// no level bounds it); the line to say when the limit was raised.
pub fn ensure_for(most: Option<(u64, String)>) -> Result<Option<String>, String> {
    let Some((most, what)) = most else {
        return Ok(None);
    };
    ensure_local_ports(most, &what)?;
    ensure_open_files(most, &what, A_SOCKET_A_REQUEST)
}

/// The level of `cfg`'s plan with the most requests in flight, and how to name it.
pub fn most_in_flight(cfg: &crate::config::RunConfig) -> Option<(u64, String)> {
    cfg.levels()
        .iter()
        .filter_map(|l| Some((l.most_in_flight()?, l.label())))
        .max_by_key(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within the limit nothing changes; past the hard limit the error names the limit, what
    /// needs it and how to raise it.
    #[test]
    fn a_load_past_the_hard_limit_is_refused_naming_the_limit() {
        assert_eq!(ensure_open_files(1, "C=1", A_SOCKET_A_REQUEST), Ok(None));
        let hard = getrlimit(Resource::Nofile).maximum;
        if let Some(h) = hard.filter(|h| *h < u64::MAX / 2) {
            let e = ensure_open_files(h, "C=huge", A_SOCKET_A_REQUEST).unwrap_err();
            assert!(e.starts_with("C=huge needs about"), "{e}");
            assert!(
                e.contains(&format!("ulimit -n {}", h + RESERVED_FILES)),
                "{e}"
            );
        }
    }
}
