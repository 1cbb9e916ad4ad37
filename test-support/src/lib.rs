//! What the test suites of more than one crate need (a dev-dependency
//! only): loopback ports a test can name in advance.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Unprivileged ports below the kernel's ephemeral range, for a test that
/// must name fixed ones (see [`fixed_listen_addr`]).
pub fn fixed_port_range() -> (u16, u16) {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    if low > 12_000 {
        (10_000, low)
    } else {
        // A range that starts low leaves little room; stay unprivileged.
        ((low / 2).max(1024), low.max(2048))
    }
}

/// The ports Rush's README and defaults use: a test stays clear of them, so
/// that a line it forgot to move can't reach a cluster someone runs there.
const DEFAULT_PORTS: std::ops::Range<u16> = 7360..7400;

/// Every port this process has handed out. A port is handed out once: a
/// node that was killed comes back on its port, and no other test of the
/// process may have taken it in between.
static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// `n` consecutive free loopback ports below the kernel's ephemeral range,
/// never handed out before by this process; returns the first.
///
/// Such ports can be named before anything listens on them, and a node
/// can come back on them after a restart: no `bind(0)` and no outgoing
/// connection (such as a client retrying against the dead port, which can
/// connect to itself) can take one in between. Another process can still
/// bind one between this probe and the node's own bind (test binaries run
/// one at a time, so only something outside the suite would); a start that
/// fails on it may ask again (see the daemon tests' `Spawned::start_fixed`).
pub fn fixed_ports(n: u16) -> u16 {
    let (from, to) = fixed_port_range();
    assert!(n > 0 && n < to - from, "{n} ports in {from}..{to}");
    let mut handed = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..1000 {
        let base = rand::random_range(from..to - n);
        let ports = base..base + n;
        if ports
            .clone()
            .any(|p| DEFAULT_PORTS.contains(&p) || handed.contains(&p))
        {
            continue;
        }
        if ports
            .clone()
            .all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        {
            handed.extend(ports);
            return base;
        }
    }
    panic!("no {n} free loopback ports in a row in {from}..{to}");
}

/// A free loopback address below the kernel's ephemeral range, for a node
/// that must come back on the same address after a restart (see
/// [`fixed_ports`]).
pub fn fixed_listen_addr() -> String {
    format!("127.0.0.1:{}", fixed_ports(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_unprivileged_and_below_the_ephemeral_ports() {
        let (from, to) = fixed_port_range();
        assert!(from >= 1024 && from < to, "{from}..{to}");
        let addr: std::net::SocketAddr = fixed_listen_addr().parse().unwrap();
        assert!(addr.ip().is_loopback() && (from..to).contains(&addr.port()));
    }

    #[test]
    fn no_port_is_handed_out_twice() {
        let mut seen = BTreeSet::new();
        for _ in 0..200 {
            let base = fixed_ports(3);
            for p in base..base + 3 {
                assert!(seen.insert(p), "port {p} handed out twice");
                assert!(!DEFAULT_PORTS.contains(&p));
            }
        }
    }
}
