//! Value parsers shared by the commands: clap runs them, so a malformed
//! value is a usage error (exit 64) that names its option.

use rush_client::{parse_duration, DEFAULT_PORT};
use std::time::Duration;

/// A duration: `500ms`, `10s`, `5m`, `24h`, `30d`, `1y`, or seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s)
}

/// A whole number of seconds, at least 1 (`--timeout`).
pub fn seconds(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("0 would give up before asking: at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number of seconds")),
    }
}

/// A node address: `HOST:PORT`, or `HOST` alone for the default protocol
/// port (as redis-cli's `-h`). IPv6 as `[::1]:7379`, `[::1]` or `::1`.
pub fn addr(s: &str) -> Result<String, String> {
    let s = s.trim();
    let bad = |why: &str| {
        Err(format!(
            "{s:?} is not a node address ({why}; e.g. 127.0.0.1:7379, localhost, [::1]:7379)"
        ))
    };
    if s.is_empty() {
        return bad("empty");
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        match rest.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, port)) => match port.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None => return bad("text after the ]"),
            },
            None => return bad("no closing ]"),
        }
    } else if s.matches(':').count() > 1 {
        // A bare IPv6 address: no port.
        (s, None)
    } else {
        match s.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return bad("no host");
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(0) | Err(_) => return bad("the port is 1-65535"),
            Ok(p) => p,
        },
    };
    Ok(if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    })
}

/// The host part of an address [`addr`] made (brackets of IPv6 removed).
pub fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(addr("localhost").unwrap(), "localhost:7379");
        assert_eq!(addr("127.0.0.1:7382").unwrap(), "127.0.0.1:7382");
        assert_eq!(addr("[::1]").unwrap(), "[::1]:7379");
        assert_eq!(addr("[::1]:9").unwrap(), "[::1]:9");
        assert_eq!(addr("::1").unwrap(), "[::1]:7379");
        for bad in [
            "",
            "host:",
            "host:0",
            "host:99999",
            ":7379",
            "[::1",
            "[::1]x",
            "a:b",
        ] {
            assert!(addr(bad).is_err(), "{bad:?}");
        }
        assert_eq!(host_of("localhost:7379"), "localhost");
        assert_eq!(seconds("30"), Ok(30));
        assert!(seconds("0").is_err() && seconds("1.5").is_err() && seconds("").is_err());
        assert_eq!(host_of("[::1]:7379"), "::1");
    }
}
