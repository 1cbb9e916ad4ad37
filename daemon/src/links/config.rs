//! `[links]`: short links and their HTTP redirect listener.

use crate::config::ConfigError;
use serde::Deserialize;
use std::net::SocketAddr;

/// Prefix of every short URL (the redirect listener's public address).
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:7381/";
/// Off: redirects are opt-in, like exposing any listener.
pub const DEFAULT_REDIRECT_LISTEN: &str = "";
pub const DEFAULT_LENGTH: u8 = 7;
/// 30 days.
pub const DEFAULT_TTL_SECS: u64 = 30 * 86_400;
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
    /// Short URLs are `base_url + code`; must end with `/`.
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
        if !(b.starts_with("http://") || b.starts_with("https://")) || !b.ends_with('/') {
            return bad(format!(
                "links.base_url {b:?} must be an http(s) URL ending with '/'"
            ));
        }
        if b.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad(format!("links.base_url {b:?} contains whitespace"));
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
