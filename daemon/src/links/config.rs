//! `[links]`: short links and their HTTP redirect listener.

use crate::config::ConfigError;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Prefix of every short URL. Empty: derived at start from the address the
/// redirect listener is bound to ([`LinksConfig::short_urls`]).
pub const DEFAULT_BASE_URL: &str = "";
/// The prefix of short URLs when neither `base_url` nor the redirect
/// listener is set: where `--redirect 127.0.0.1:7381`, the conventional
/// address, would serve them.
pub const UNSERVED_BASE_URL: &str = "http://127.0.0.1:7381/";
/// Off: redirects are opt-in, like exposing any listener.
pub const DEFAULT_REDIRECT_LISTEN: &str = "";
pub const DEFAULT_LENGTH: u8 = 7;
/// 30 days.
pub const DEFAULT_TTL_SECS: u64 = 30 * 86_400;
/// How long browsers (and, for links without app links, shared caches) may
/// keep a permanent link's 301: an hour.
pub const DEFAULT_PERMANENT_CACHE_SECS: u64 = 3_600;
/// A year: a cached 301 can't be taken back, so longer is surely a typo.
pub const MAX_PERMANENT_CACHE_SECS: u64 = 365 * 86_400;
/// A visit rewrites a link's expiry at most once a day.
pub const DEFAULT_SLIDE_INTERVAL_SECS: u64 = 86_400;
/// Visit counts are merged into stored statistics this often.
pub const DEFAULT_VISITS_FLUSH_SECS: u64 = 5;
/// Segment steps per code length. Small for 5 characters (a slot has only
/// ~56k of them: a big step would throw many away at every crash), larger
/// for longer codes where the space is vast and fewer reservations matter.
pub const DEFAULT_SEGMENT_STEP_5: u64 = 1_000;
pub const DEFAULT_SEGMENT_STEP_6: u64 = 5_000;
pub const DEFAULT_SEGMENT_STEP_7: u64 = 10_000;
pub const DEFAULT_SEGMENT_STEP_8: u64 = 10_000;
/// Largest segment step accepted (a crash skips at most this many codes per
/// slot and length).
pub const MAX_SEGMENT_STEP: u64 = 1_000_000;

/// Schemes no link may ever carry, whatever `app_schemes` says: they run
/// code or embed content in the visitor's browser.
pub const FORBIDDEN_SCHEMES: &[&str] = &["javascript", "data", "vbscript", "file", "blob"];

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LinksConfig {
    /// Short URLs are `base_url + code`; must end with `/`. Empty (the
    /// default): `http://` + the redirect listener's bound address + `/`.
    pub base_url: String,
    /// HTTP listener for `GET /{code}` redirects and `GET /{code}/qr`.
    /// "" turns it off (the default); `--redirect ADDR` sets it.
    pub redirect_listen: String,
    /// Code length when a shorten doesn't say (5–8).
    pub default_length: u8,
    /// TTL when a shorten doesn't say; 0 = links never expire.
    pub default_ttl_secs: u64,
    /// A visit pushes a link's expiry to now + its TTL, rewriting it at most
    /// once per this interval (half the TTL for TTLs shorter than twice it).
    pub slide_interval_secs: u64,
    /// Visit counts wait in memory this long before they are merged into
    /// each link's stored statistics (one unsynced write per link visited
    /// in the interval, however often). What a crash may lose: the visits
    /// of the last interval. Link info reads memory too, so it is never
    /// behind. 0 = every tick.
    pub visits_flush_secs: u64,
    pub segment_step_5: u64,
    pub segment_step_6: u64,
    pub segment_step_7: u64,
    pub segment_step_8: u64,
    /// A permanent link's 301 may be cached this long (`max-age`, never
    /// past the link's expiry); visits answered by a cache are not counted
    /// and an update or delete reaches those visitors this much later.
    /// 0: never cached, like a 302. See `links::redirect` for the policy.
    pub permanent_cache_secs: u64,
    /// Extra URL schemes allowed for app deep links (e.g. "myapp"); targets
    /// are always http or https.
    pub app_schemes: Vec<String>,
}

impl Default for LinksConfig {
    fn default() -> Self {
        LinksConfig {
            base_url: DEFAULT_BASE_URL.into(),
            redirect_listen: DEFAULT_REDIRECT_LISTEN.into(),
            default_length: DEFAULT_LENGTH,
            default_ttl_secs: DEFAULT_TTL_SECS,
            slide_interval_secs: DEFAULT_SLIDE_INTERVAL_SECS,
            visits_flush_secs: DEFAULT_VISITS_FLUSH_SECS,
            segment_step_5: DEFAULT_SEGMENT_STEP_5,
            segment_step_6: DEFAULT_SEGMENT_STEP_6,
            segment_step_7: DEFAULT_SEGMENT_STEP_7,
            segment_step_8: DEFAULT_SEGMENT_STEP_8,
            permanent_cache_secs: DEFAULT_PERMANENT_CACHE_SECS,
            app_schemes: Vec::new(),
        }
    }
}

impl LinksConfig {
    /// The segment step for codes of `len` characters.
    pub fn segment_step(&self, len: u8) -> u64 {
        match len {
            5 => self.segment_step_5,
            6 => self.segment_step_6,
            7 => self.segment_step_7,
            _ => self.segment_step_8,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let b = &self.base_url;
        if !b.is_empty() {
            if !(b.starts_with("http://") || b.starts_with("https://")) || !b.ends_with('/') {
                return bad(format!(
                    "links.base_url {b:?} must be an http(s) URL ending with '/'"
                ));
            }
            if b.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return bad(format!("links.base_url {b:?} contains whitespace"));
            }
            let url = url::Url::parse(b)
                .map_err(|e| ConfigError::Invalid(format!("links.base_url {b:?}: {e}")))?;
            if url.host_str().is_none_or(str::is_empty) || url.port() == Some(0) {
                return bad(format!(
                    "links.base_url {b:?} needs a host (and a port above 0)"
                ));
            }
            if url.query().is_some() || url.fragment().is_some() {
                return bad(format!(
                    "links.base_url {b:?}: codes are appended to it, so it can't have a query or fragment"
                ));
            }
        }
        if !self.redirect_listen.is_empty() {
            self.redirect_listen.parse::<SocketAddr>().map_err(|e| {
                ConfigError::Invalid(format!(
                    "links.redirect_listen {:?}: {e}",
                    self.redirect_listen
                ))
            })?;
        }
        if !(5..=8).contains(&self.default_length) {
            return bad("links.default_length must be within 5..=8".into());
        }
        if self.permanent_cache_secs > MAX_PERMANENT_CACHE_SECS {
            return bad(format!(
                "links.permanent_cache_secs must be at most {MAX_PERMANENT_CACHE_SECS} (a year)"
            ));
        }
        if self.slide_interval_secs == 0 {
            return bad("links.slide_interval_secs must be positive".into());
        }
        for len in 5..=8 {
            let step = self.segment_step(len);
            if step == 0 || step > MAX_SEGMENT_STEP {
                return bad(format!(
                    "links.segment_step_{len} must be within 1..={MAX_SEGMENT_STEP}"
                ));
            }
        }
        for s in &self.app_schemes {
            let valid = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
            if !valid {
                return bad(format!("links.app_schemes: {s:?} is not a URL scheme"));
            }
            if FORBIDDEN_SCHEMES.contains(&s.to_ascii_lowercase().as_str()) {
                return bad(format!("links.app_schemes: {s:?} is never allowed"));
            }
        }
        Ok(())
    }
}

/// The node's listeners as bound (real ports when configured as 0).
#[derive(Debug, Clone, Copy)]
pub struct Listeners {
    pub protocol: SocketAddr,
    pub http: Option<SocketAddr>,
    pub redirect: Option<SocketAddr>,
}

/// What short URLs start with on this node, and what to tell the operator
/// about it at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortUrls {
    pub base_url: String,
    /// A short URL that likely leads nowhere: logged as a warning.
    pub warning: Option<String>,
    /// Worth knowing, not wrong: logged as information.
    pub note: Option<String>,
}

impl LinksConfig {
    /// The short-URL prefix for a node bound to `l`: `base_url` when set
    /// (checked against the listeners), else derived from the redirect
    /// listener's address, so `rush shorten` and QR codes print a URL this
    /// node answers.
    pub fn short_urls(&self, l: &Listeners) -> ShortUrls {
        let off = "this node's redirect listener is off (links.redirect_listen, rushd --redirect)";
        if self.base_url.is_empty() {
            return match l.redirect {
                None => ShortUrls {
                    base_url: UNSERVED_BASE_URL.into(),
                    warning: None,
                    note: Some(format!(
                        "{off}: short URLs are {UNSERVED_BASE_URL}CODE, which nothing serves \
                         until it is on or links.base_url names the server that does"
                    )),
                },
                Some(addr) if addr.ip().is_unspecified() => {
                    let loopback = match addr.ip() {
                        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                    };
                    let base_url = http_url(SocketAddr::new(loopback, addr.port()));
                    ShortUrls {
                        warning: Some(format!(
                            "links.base_url is not set and the redirect listener is on every \
                             interface ({addr}): short URLs are {base_url}CODE, which only this \
                             machine can open; set links.base_url to the address visitors use"
                        )),
                        base_url,
                        note: None,
                    }
                }
                Some(addr) => ShortUrls {
                    base_url: http_url(addr),
                    warning: None,
                    note: None,
                },
            };
        }
        let b = &self.base_url;
        let warning = match (l.redirect, url::Url::parse(b)) {
            (None, _) => Some(format!(
                "links.base_url is {b} but {off}: its short URLs lead nowhere unless another \
                 server answers them"
            )),
            (Some(r), Ok(url)) => {
                let port = url.port_or_known_default().unwrap_or(0);
                let same = port == r.port();
                match url.scheme() {
                    // rushd's redirect listener speaks plain HTTP: an https
                    // prefix means a TLS proxy in front, mapping its own port.
                    "https" if same => Some(format!(
                        "links.base_url {b} is https on port {port}, this node's redirect \
                         listener, which speaks plain HTTP: put a TLS proxy in front or use http://"
                    )),
                    "https" => None,
                    _ if same => None,
                    _ if port == l.protocol.port() => Some(format!(
                        "links.base_url {b} names port {port}, this node's protocol listener; \
                         redirects are served on {r}"
                    )),
                    _ if l.http.is_some_and(|h| h.port() == port) => Some(format!(
                        "links.base_url {b} names port {port}, this node's HTTP listener for \
                         metrics and health; redirects are served on {r}"
                    )),
                    _ => Some(format!(
                        "links.base_url {b}: port {port} matches no listener of this node \
                         (redirects are served on {r}); short URLs lead nowhere unless a proxy \
                         forwards port {port} there"
                    )),
                }
            }
            // validate() parsed it already.
            (Some(_), Err(_)) => None,
        };
        ShortUrls {
            base_url: b.clone(),
            warning,
            note: None,
        }
    }
}

/// `http://ADDR/`, an IPv6 address in brackets (and without a zone, which
/// URLs can't carry).
fn http_url(addr: SocketAddr) -> String {
    format!("http://{}/", SocketAddr::new(addr.ip(), addr.port()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners(redirect: Option<&str>) -> Listeners {
        Listeners {
            protocol: "127.0.0.1:7379".parse().unwrap(),
            http: Some("127.0.0.1:7380".parse().unwrap()),
            redirect: redirect.map(|r| r.parse().unwrap()),
        }
    }

    fn with_base(base_url: &str) -> LinksConfig {
        LinksConfig {
            base_url: base_url.into(),
            ..LinksConfig::default()
        }
    }

    #[test]
    fn the_default_follows_the_redirect_listener() {
        let d = LinksConfig::default();
        let on = |addr| d.short_urls(&listeners(Some(addr)));
        let s = on("127.0.0.1:9100");
        assert_eq!(
            (s.base_url.as_str(), s.warning, s.note),
            ("http://127.0.0.1:9100/", None, None)
        );
        assert_eq!(on("[::1]:9100").base_url, "http://[::1]:9100/");
        assert_eq!(on("192.0.2.7:80").base_url, "http://192.0.2.7:80/");
        // On every interface: loopback, and a warning to set the public one.
        let s = on("0.0.0.0:7381");
        assert_eq!(s.base_url, "http://127.0.0.1:7381/");
        assert!(s.warning.unwrap().contains("set links.base_url"));
        assert_eq!(on("[::]:7381").base_url, "http://[::1]:7381/");
        // Off: the conventional address, and a note that nothing serves it.
        let s = d.short_urls(&listeners(None));
        assert_eq!(s.base_url, UNSERVED_BASE_URL);
        assert_eq!(s.warning, None);
        assert!(s.note.unwrap().contains("redirect listener is off"));
        // Every derived prefix is one validate() accepts.
        for addr in ["127.0.0.1:9100", "[::1]:9100", "0.0.0.0:1"] {
            with_base(&on(addr).base_url).validate().unwrap();
        }
    }

    #[test]
    fn a_configured_base_url_is_checked_against_the_listeners() {
        let warn = |base: &str, redirect: Option<&str>| {
            let c = with_base(base);
            c.validate().unwrap();
            let s = c.short_urls(&listeners(redirect));
            assert_eq!(s.base_url, base, "a configured prefix is used as is");
            s.warning
        };
        let on = Some("127.0.0.1:7381");
        assert_eq!(warn("http://127.0.0.1:7381/", on), None);
        assert_eq!(warn("http://s.example:7381/r/", on), None);
        // Behind a TLS proxy, whatever its port.
        assert_eq!(warn("https://s.example/", on), None);
        assert_eq!(warn("http://s.example/", Some("0.0.0.0:80")), None);
        for (base, redirect, says) in [
            ("https://s.example/", None, "redirect listener is off"),
            (
                "http://127.0.0.1:7381/",
                Some("127.0.0.1:9000"),
                "matches no listener",
            ),
            ("http://s.example/", on, "port 80 matches no listener"),
            (
                "http://127.0.0.1:7379/",
                on,
                "this node's protocol listener",
            ),
            ("http://127.0.0.1:7380/", on, "HTTP listener for metrics"),
            ("https://127.0.0.1:7381/", on, "speaks plain HTTP"),
        ] {
            let w = warn(base, redirect).unwrap_or_else(|| panic!("{base}: no warning"));
            assert!(w.contains(says), "{base}: {w}");
        }
    }

    #[test]
    fn base_url_must_be_a_url_codes_can_follow() {
        for bad in [
            "s.example/",
            "https://s.example",
            "ftp://s.example/",
            "https://s.example:99999/",
            "https://[::1/",
            "https://s.example:0/",
            "https://s.example/?q=/",
            "https://s.example/#x/",
            "https://s .example/",
        ] {
            assert!(with_base(bad).validate().is_err(), "{bad}");
        }
        for ok in ["", "https://s.example/", "http://[::1]:7381/l/"] {
            with_base(ok).validate().unwrap();
        }
    }
}
