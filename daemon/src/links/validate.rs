//! What a link may point to. Every rule answers BAD_REQUEST naming the field
//! and the rule, and runs before anything is written:
//!
//! - targets are `http` or `https` URLs with a host; app (deep) links may
//!   also use a scheme listed in `links.app_schemes`;
//! - `javascript:`, `data:` (and `vbscript:`, `file:`, `blob:`) never, in
//!   any letter case, whatever the configuration says;
//! - at most 4 KiB (longer is TOO_LARGE, at decode);
//! - no control characters and no whitespace anywhere;
//! - every `%` starts a valid escape (`%` and two hex digits);
//! - the URL parses as a browser parses it (WHATWG URL, the `url` crate):
//!   a port within 1-65535, a well-formed IPv4 or bracketed IPv6 address
//!   or domain name, so what we store is what the visitor's browser will
//!   follow. The text is stored as given; parsing only judges it.

use super::config::FORBIDDEN_SCHEMES;
use rush_protocol::limits::MAX_URL;
use rush_protocol::{ErrorCode, RushError};

#[derive(Debug, Clone, Default)]
pub struct UrlRules {
    /// Configured app schemes, lowercase.
    app_schemes: Vec<String>,
}

impl UrlRules {
    pub fn new(app_schemes: &[String]) -> Self {
        UrlRules {
            app_schemes: app_schemes.iter().map(|s| s.to_ascii_lowercase()).collect(),
        }
    }

    /// A redirect target: http or https only.
    pub fn check_target(&self, field: &str, url: &str) -> Result<(), RushError> {
        self.check(field, url, false)
    }

    /// An app link: http, https or a configured app scheme.
    pub fn check_app(&self, field: &str, url: &str) -> Result<(), RushError> {
        self.check(field, url, true)
    }

    fn check(&self, field: &str, url: &str, app: bool) -> Result<(), RushError> {
        let bad = |why: String| Err(RushError::bad_request(format!("{field}: {why}")));
        if url.is_empty() {
            return bad("is empty".into());
        }
        if url.len() > MAX_URL {
            return Err(RushError::new(
                ErrorCode::TooLarge,
                format!("{field}: {} bytes, over the limit of {MAX_URL}", url.len()),
            ));
        }
        // One pass: a control character anywhere is the error, else the
        // first whitespace (every shorten checks its URL: two passes
        // decoding UTF-8 were a few % of it, bench/results/NOTES.md).
        let mut space = None;
        if url.is_ascii() {
            for (i, &b) in url.as_bytes().iter().enumerate() {
                if b < 0x20 || b == 0x7f {
                    return bad(format!("control character {:?} at byte {i}", b as char));
                }
                if b == b' ' && space.is_none() {
                    space = Some(i);
                }
            }
        } else {
            for (i, c) in url.char_indices() {
                if c.is_control() {
                    return bad(format!("control character {c:?} at byte {i}"));
                }
                if c.is_whitespace() && space.is_none() {
                    space = Some(i);
                }
            }
        }
        if let Some(i) = space {
            return bad(format!("whitespace at byte {i}"));
        }
        let b = url.as_bytes();
        for (i, _) in b.iter().enumerate().filter(|(_, &c)| c == b'%') {
            let ok =
                b.len() > i + 2 && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit();
            if !ok {
                return bad(format!("invalid percent-encoding at byte {i}"));
            }
        }
        let Some(colon) = url.find(':') else {
            return bad("has no scheme (use an absolute http or https URL)".into());
        };
        let scheme = &url[..colon];
        let valid_scheme = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !valid_scheme {
            return bad("has no scheme (use an absolute http or https URL)".into());
        }
        let rest = &url[colon + 1..];
        if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") {
            let scheme = || scheme.to_ascii_lowercase();
            // WHATWG parsing forgives `https:host` and `https:\\host`;
            // a link's target is written for people, so it says `//`.
            if !rest.starts_with("//") {
                return bad(format!("{} URL needs //host", scheme()));
            }
            // Every shorten checks its URL: the parser is skipped where it
            // could refuse nothing (see `plain_authority`).
            if plain_authority(&rest[2..]) {
                return Ok(());
            }
            let parsed =
                parse(url).map_err(|why| RushError::bad_request(format!("{field}: {why}")))?;
            if parsed.host_str().is_none_or(str::is_empty) {
                return bad(format!("{} URL has no host", scheme()));
            }
            if parsed.port() == Some(0) {
                return bad(format!("port 0 is not a port ({PORTS})"));
            }
            return Ok(());
        }
        let scheme = scheme.to_ascii_lowercase();
        if FORBIDDEN_SCHEMES.contains(&scheme.as_str()) {
            return bad(format!("{scheme}: URLs are never allowed"));
        }
        match scheme.as_str() {
            s if app && self.app_schemes.iter().any(|a| a == s) => {
                if rest.is_empty() {
                    return bad(format!("{s}: URL is empty after the scheme"));
                }
                parse(url).map_err(|why| RushError::bad_request(format!("{field}: {why}")))?;
                Ok(())
            }
            s if app => bad(format!(
                "scheme {s:?} is not allowed (http, https or a configured app scheme)"
            )),
            s => bad(format!("scheme {s:?} is not allowed (only http and https)")),
        }
    }
}

const PORTS: &str = "ports are 1-65535";

/// Whether the authority of an http(s) URL (what follows `//`, up to the
/// path) is plainly valid: a domain name of ASCII letters, digits and `-`
/// in non-empty dot-separated labels, none starting `xn--` (punycode, which
/// must decode), the last starting with a letter (so it is not read as an
/// IPv4 address), then optionally `:` and a port of 1-65535. For such a
/// URL, whose bytes passed the checks before (no control character, no
/// whitespace, valid escapes), the WHATWG parser can refuse nothing — it
/// percent-encodes the path, query and fragment, never refusing them — so
/// it need not run (it was 9 % of a shorten's CPU; bench/results/NOTES.md).
/// Anything else (user info, IP addresses, `\`, other characters) is left
/// to the parser. A property test holds this against `url::Url::parse`.
fn plain_authority(after_slashes: &str) -> bool {
    let end = after_slashes
        .find(['/', '?', '#', '\\'])
        .unwrap_or(after_slashes.len());
    let authority = &after_slashes[..end];
    let host = match authority.split_once(':') {
        Some((host, port)) => {
            let digits =
                !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
            if !digits || !(1..=65535).contains(&port.parse::<u32>().unwrap_or(0)) {
                return false;
            }
            host
        }
        None => authority,
    };
    let mut last_first = None;
    for label in host.split('.') {
        let b = label.as_bytes();
        let plain = !b.is_empty() && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-');
        if !plain || (b.len() >= 4 && b[..4].eq_ignore_ascii_case(b"xn--")) {
            return false;
        }
        last_first = b.first().copied();
    }
    last_first.is_some_and(|c| c.is_ascii_alphabetic())
}

/// Parse as a browser does; the error says what is wrong in words a person
/// who typed the URL recognises.
fn parse(text: &str) -> Result<url::Url, String> {
    use url::ParseError as P;
    url::Url::parse(text).map_err(|e| match e {
        P::EmptyHost => "has no host".to_string(),
        P::InvalidPort => format!("invalid port ({PORTS})"),
        P::InvalidIpv4Address => "invalid IPv4 address in the host".to_string(),
        P::InvalidIpv6Address => {
            "invalid IPv6 address in the host (written in brackets: https://[2001:db8::1]/)"
                .to_string()
        }
        P::InvalidDomainCharacter | P::IdnaError => {
            "the host is not a valid domain name".to_string()
        }
        other => format!("not a valid URL ({other})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Where `plain_authority` skips the parser, the parser would have
        /// accepted the URL with a host and a port other than 0.
        #[test]
        fn a_plain_authority_is_one_the_parser_accepts(
            scheme in "(http|HTTPS|hTtp|https)",
            authority in "[a-zA-Z0-9.:@%\\[\\]_~-]{0,24}",
            tail in "([/?#\\\\][a-z0-9/?#:@.%_-]{0,12})?",
        ) {
            let url = format!("{scheme}://{authority}{tail}");
            if plain_authority(&url[scheme.len() + 3..]) {
                let parsed = url::Url::parse(&url);
                prop_assert!(parsed.is_ok(), "{url}: {parsed:?}");
                let parsed = parsed.unwrap();
                prop_assert!(parsed.host_str().is_some_and(|h| !h.is_empty()), "{url}");
                prop_assert!(parsed.port() != Some(0), "{}", url);
            }
        }
    }

    #[test]
    fn plain_authorities() {
        for plain in [
            "e.com",
            "a-b.example.COM:8080",
            "x:1",
            "x:65535/p",
            "e.com?q",
            "e.com#f",
        ] {
            assert!(plain_authority(plain), "{plain}");
        }
        for other in [
            "",
            ":80",
            "e.com:",
            "e.com:0",
            "e.com:65536",
            "e.com:123456",
            "1.2.3.4",
            "e.123",
            "e.0x1f",
            "e..com",
            "e.com.",
            "xn--a.com",
            "a.XN--b",
            "u@e.com",
            "[::1]",
            "e_x.com",
            "e%41.com",
            "é.com",
        ] {
            assert!(!plain_authority(other), "{other}");
        }
    }

    /// A control character anywhere is named before an earlier space; the
    /// byte offsets are the same for ASCII and other URLs.
    #[test]
    fn control_characters_and_whitespace_are_named_with_their_offset() {
        let r = UrlRules::new(&[]);
        let msg = |u: &str| r.check_target("url", u).unwrap_err().message;
        assert_eq!(
            msg("https://a b/\u{1}"),
            "url: control character '\\u{1}' at byte 12"
        );
        assert_eq!(msg("https://a b/c d"), "url: whitespace at byte 9");
        assert_eq!(
            msg("https://é b/\u{85}"),
            "url: control character '\\u{85}' at byte 13"
        );
        assert_eq!(msg("https://é\u{a0}b/"), "url: whitespace at byte 10");
        assert_eq!(
            msg("https://a/\u{7f}"),
            "url: control character '\\u{7f}' at byte 10"
        );
    }

    #[test]
    fn rules() {
        let r = UrlRules::new(&["MyApp".into()]);
        for ok in [
            "https://example.com",
            "http://example.com:8080/a/b?c=d&e=%20f#frag",
            "HTTPS://user@example.com/",
            "https://[::1]:80/x",
            "https://例え.jp/パス",
            "https://example.com:65535/",
            "http://192.0.2.1:80/",
        ] {
            assert!(r.check_target("url", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "example.com",
            "/relative",
            "ftp://example.com",
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,<script>",
            "https://exa mple.com",
            "https://example.com/\u{7f}",
            "https://example.com/\tx",
            "https://example.com/\u{a0}",
            "https://example.com/%zz",
            "https://example.com/%4",
            "https:/example.com",
            "https://",
            "https://:80/",
            "myapp://open",
            "https:\\\\example.com/",
        ] {
            let e = r.check_target("url", bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest, "{bad}");
        }
        // What the URL parser refuses, each with a message naming the part.
        for (bad, says) in [
            (
                "https://example.com:99999/",
                "invalid port (ports are 1-65535)",
            ),
            ("https://example.com:0/", "port 0 is not a port"),
            ("https://example.com:8o/", "invalid port"),
            ("https://[::1/x", "invalid IPv6 address"),
            ("https://[::g]/", "invalid IPv6 address"),
            ("http://1.2.3.999/", "invalid IPv4 address"),
            (
                "https://exa<mple.com/",
                "the host is not a valid domain name",
            ),
            ("https://xn--a.com/", "the host is not a valid domain name"),
        ] {
            let e = r.check_target("url", bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest, "{bad}");
            assert!(e.message.starts_with("url: "), "{bad}: {}", e.message);
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
        assert!(r.check_app("ios", "myapp://a<b").is_err());
        assert!(r.check_app("ios", "myapp://open/1").is_ok());
        assert!(r.check_app("ios", "https://app.example/1").is_ok());
        assert!(r.check_app("ios", "otherapp://x").is_err());
        assert!(r.check_app("ios", "myapp:").is_err());
        assert!(r.check_app("ios", "javascript:x").is_err());
        let long = format!("https://e.com/{}", "a".repeat(MAX_URL));
        assert_eq!(
            r.check_target("url", &long).unwrap_err().code,
            ErrorCode::TooLarge
        );
    }
}
