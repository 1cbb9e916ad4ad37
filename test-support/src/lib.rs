//! What the test suites of more than one crate need (a dev-dependency
//! only): loopback ports a test can name in advance.

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

/// A free loopback address whose port lies below the kernel's ephemeral
/// range, for a node that must come back on the same address after a
/// restart: no `bind(0)` and no outgoing connection (such as a client
/// retrying against the dead port, which can connect to itself) can take
/// such a port in between.
pub fn fixed_listen_addr() -> String {
    let (from, to) = fixed_port_range();
    for _ in 0..1000 {
        let port = rand::random_range(from..to);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return format!("127.0.0.1:{port}");
        }
    }
    panic!("no free loopback port in {from}..{to}");
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
}
