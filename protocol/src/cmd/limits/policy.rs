use super::{check_name, over_limit_is_invalid, read_name};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_POLICY_RULES, MAX_SLIDING_BUCKETS, MAX_TIME_ZONE, MAX_WINDOW_SECS};
use bytes::{BufMut, BytesMut};
use std::fmt;
use std::str::FromStr;

/// Sub-buckets of a sliding window when the definition names none.
pub const DEFAULT_SLIDING_BUCKETS: u32 = 60;

/// What a rule's counts are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One count per item: "each item at most N per window".
    Item,
    /// One count for all items together: "at most N per window in total".
    Total,
}

/// The span a rule counts over.
///
/// - `Day`: a calendar day in an IANA time zone; resets at local midnight
///   (DST days are 23 or 25 hours long). An empty zone means the node's
///   `limits.default_time_zone`; the node fills it in when it stores the
///   policy, so a stored policy never changes meaning with the config.
/// - `Fixed`: windows of `secs` seconds aligned to the Unix epoch
///   (`fixed:3600` resets on the hour, UTC).
/// - `Sliding`: the last `secs` seconds, kept as `buckets` sub-buckets of
///   `ceil(secs·1000 / buckets)` ms. An acquisition counts from the moment it
///   is made until the end of the sub-bucket `secs` later: at least `secs`,
///   at most `secs` plus one sub-bucket. So no span of `secs` seconds ever
///   holds more than the limit, and a counter stores at most `buckets + 1`
///   (bucket, count) pairs. `buckets` 0 means [`DEFAULT_SLIDING_BUCKETS`]
///   (filled in by the node, like the zone).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Window {
    Day { tz: String },
    Fixed { secs: u64 },
    Sliding { secs: u64, buckets: u32 },
}

/// One rule: at most `max` per `window`, per item or in total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Names the rule in LIMITED answers, status and metrics; unique in its policy.
    pub name: String,
    pub scope: Scope,
    pub max: u64,
    pub window: Window,
}

/// A named policy: every rule must pass for an order to be recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyDef {
    pub name: String,
    /// Acknowledge acquisitions once they are in the WAL, without waiting for
    /// the fsync (survives a rushd crash, not a power loss). Off by default.
    pub relaxed: bool,
    pub rules: Vec<Rule>,
}

impl Window {
    /// The longest this window can span, in ms (a local day may have 25 hours).
    pub fn max_span_ms(&self) -> u64 {
        match self {
            Window::Day { .. } => 25 * 3_600_000,
            Window::Fixed { secs } => secs * 1000,
            Window::Sliding { secs, buckets } => {
                let b = (*buckets).max(1) as u64;
                (secs * 1000).div_ceil(b) * (b + 1)
            }
        }
    }

    fn check(&self) -> Result<(), String> {
        match self {
            Window::Day { tz } => {
                if tz.len() > MAX_TIME_ZONE {
                    return Err(format!("time zone is over {MAX_TIME_ZONE} bytes"));
                }
            }
            Window::Fixed { secs } => check_secs(*secs)?,
            Window::Sliding { secs, buckets } => {
                check_secs(*secs)?;
                if *buckets > MAX_SLIDING_BUCKETS {
                    return Err(format!(
                        "a sliding window has at most {MAX_SLIDING_BUCKETS} buckets"
                    ));
                }
            }
        }
        Ok(())
    }
}

fn check_secs(secs: u64) -> Result<(), String> {
    if secs == 0 || secs > MAX_WINDOW_SECS {
        return Err(format!(
            "window seconds must be within 1..={MAX_WINDOW_SECS}"
        ));
    }
    Ok(())
}

/// `day`, `day:ZONE`, `fixed:SECONDS`, `sliding:SECONDS` or
/// `sliding:SECONDS/BUCKETS` — the form the CLI and the config file use.
impl FromStr for Window {
    type Err = String;

    fn from_str(s: &str) -> Result<Window, String> {
        let (kind, arg) = match s.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (s, None),
        };
        let secs = |a: Option<&str>| -> Result<u64, String> {
            a.and_then(|a| a.parse().ok())
                .ok_or_else(|| format!("{s:?}: {kind} needs a number of seconds, e.g. {kind}:60"))
        };
        let w = match kind {
            "day" => Window::Day {
                tz: arg.unwrap_or("").to_string(),
            },
            "fixed" => Window::Fixed { secs: secs(arg)? },
            "sliding" => {
                let (s_part, b_part) = match arg.and_then(|a| a.split_once('/')) {
                    Some((s, b)) => (Some(s), Some(b)),
                    None => (arg, None),
                };
                let buckets = match b_part {
                    None => 0,
                    Some(b) => b
                        .parse()
                        .map_err(|_| format!("{s:?}: buckets must be a number"))?,
                };
                Window::Sliding {
                    secs: secs(s_part)?,
                    buckets,
                }
            }
            _ => {
                return Err(format!(
                "{s:?} is not a window: use day[:ZONE], fixed:SECONDS or sliding:SECONDS[/BUCKETS]"
            ))
            }
        };
        w.check().map_err(|e| format!("{s:?}: {e}"))?;
        Ok(w)
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Window::Day { tz } if tz.is_empty() => write!(f, "day"),
            Window::Day { tz } => write!(f, "day:{tz}"),
            Window::Fixed { secs } => write!(f, "fixed:{secs}"),
            Window::Sliding { secs, buckets: 0 } => write!(f, "sliding:{secs}"),
            Window::Sliding { secs, buckets } => write!(f, "sliding:{secs}/{buckets}"),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Item => "item",
            Scope::Total => "total",
        })
    }
}

impl PolicyDef {
    /// Everything that can be checked without a time zone database.
    pub fn check(&self) -> Result<(), DecodeError> {
        check_name("policy", &self.name)?;
        if self.rules.is_empty() || self.rules.len() > MAX_POLICY_RULES {
            return Err(DecodeError::invalid(
                "rules",
                format!("a policy has 1 to {MAX_POLICY_RULES} rules"),
            ));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            check_name("rule", &rule.name)?;
            if self.rules[..i].iter().any(|r| r.name == rule.name) {
                return Err(DecodeError::invalid(
                    "rule",
                    format!("two rules are named {:?}", rule.name),
                ));
            }
            rule.window
                .check()
                .map_err(|e| DecodeError::invalid("window", e))?;
        }
        Ok(())
    }

    /// The longest span any rule counts over, in ms.
    pub fn max_span_ms(&self) -> u64 {
        self.rules
            .iter()
            .map(|r| r.window.max_span_ms())
            .max()
            .unwrap_or(0)
    }
}

impl Wire for Window {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            Window::Day { tz } => {
                out.put_u8(0);
                out.put_lp(tz.as_bytes());
            }
            Window::Fixed { secs } => {
                out.put_u8(1);
                out.put_u64(*secs);
            }
            Window::Sliding { secs, buckets } => {
                out.put_u8(2);
                out.put_u64(*secs);
                out.put_u32(*buckets);
            }
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let w = match r.u8("window")? {
            0 => Window::Day {
                tz: r
                    .string("time zone", MAX_TIME_ZONE)
                    .map_err(over_limit_is_invalid)?,
            },
            1 => Window::Fixed {
                secs: r.u64("seconds")?,
            },
            2 => Window::Sliding {
                secs: r.u64("seconds")?,
                buckets: r.u32("buckets")?,
            },
            k => return Err(DecodeError::invalid("window", format!("kind {k}"))),
        };
        w.check().map_err(|e| DecodeError::invalid("window", e))?;
        Ok(w)
    }
}

impl Wire for Rule {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.name.as_bytes());
        out.put_u8(match self.scope {
            Scope::Item => 0,
            Scope::Total => 1,
        });
        out.put_u64(self.max);
        self.window.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let name = read_name(r, "rule")?;
        let scope = match r.u8("scope")? {
            0 => Scope::Item,
            1 => Scope::Total,
            s => return Err(DecodeError::invalid("scope", format!("{s}"))),
        };
        Ok(Rule {
            name,
            scope,
            max: r.u64("max")?,
            window: Window::decode(r)?,
        })
    }
}

/// `string name, u8 durability (0 sync, 1 relaxed), list<rule>`.
impl Wire for PolicyDef {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.name.as_bytes());
        out.put_u8(self.relaxed as u8);
        out.put_count(self.rules.len());
        for rule in &self.rules {
            rule.encode(out);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let name = read_name(r, "policy")?;
        let relaxed = match r.u8("durability")? {
            0 => false,
            1 => true,
            d => return Err(DecodeError::invalid("durability", format!("{d}"))),
        };
        // Smallest rule: 1-byte name, scope, max, and the smallest window
        // (a day window's kind and an empty time zone's length: 5 bytes; a
        // fixed window takes 9, so counting 9 refused a rule "a" per UTC day).
        let rules = r
            .list("rules", MAX_POLICY_RULES, 4 + 1 + 1 + 8 + 5, Rule::decode)
            .map_err(over_limit_is_invalid)?;
        let p = PolicyDef {
            name,
            relaxed,
            rules,
        };
        p.check()?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_strings_round_trip() {
        for s in [
            "day",
            "day:Asia/Shanghai",
            "fixed:60",
            "sliding:600",
            "sliding:600/10",
        ] {
            let w: Window = s.parse().unwrap();
            assert_eq!(w.to_string(), s);
        }
        for bad in [
            "week",
            "fixed",
            "fixed:0",
            "fixed:x",
            "sliding:60/x",
            "sliding:60/5000",
            "fixed:99999999999",
        ] {
            assert!(bad.parse::<Window>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sliding_span_covers_the_window() {
        let w = Window::Sliding {
            secs: 10,
            buckets: 3,
        };
        // 3334 ms buckets; 4 of them are counted.
        assert_eq!(w.max_span_ms(), 3334 * 4);
        assert!(w.max_span_ms() >= 10_000);
    }

    #[test]
    fn the_smallest_rule_decodes() {
        // One-letter names and a day window in "UTC": 22 bytes per rule,
        // less than a fixed window's rule (found by the round-trip test).
        let p = PolicyDef {
            name: "p".into(),
            relaxed: false,
            rules: vec![Rule {
                name: "a".into(),
                scope: Scope::Item,
                max: 1,
                window: Window::Day { tz: "UTC".into() },
            }],
        };
        assert_eq!(PolicyDef::decode_body(p.to_bytes()).unwrap(), p);
    }

    #[test]
    fn duplicate_rule_names_are_invalid() {
        let rule = Rule {
            name: "r".into(),
            scope: Scope::Item,
            max: 1,
            window: Window::Fixed { secs: 1 },
        };
        let p = PolicyDef {
            name: "p".into(),
            relaxed: false,
            rules: vec![rule.clone(), rule],
        };
        assert!(p.check().is_err());
        let bytes = p.to_bytes();
        assert!(PolicyDef::decode_body(bytes).is_err());
    }
}
