//! Policies as a shard uses them: rules with their windows ready to place a
//! moment in time, and their metric handles resolved once.

use super::config::LimitsConfig;
use super::metrics::{LimitsMetrics, PolicyMetrics};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use rush_protocol::cmd::{PolicyDef, Scope, Window, DEFAULT_SLIDING_BUCKETS};
use rush_protocol::RushError;
use std::cell::Cell;

/// Check a definition and fill in the node's defaults (a daily window's zone,
/// a sliding window's buckets), so what is stored and broadcast means the
/// same on every shard and after every restart.
pub fn resolve(mut def: PolicyDef, cfg: &LimitsConfig) -> Result<PolicyDef, String> {
    def.check().map_err(|e| e.to_string())?;
    for rule in &mut def.rules {
        match &mut rule.window {
            Window::Day { tz } => {
                if tz.is_empty() {
                    tz.clone_from(&cfg.default_time_zone);
                }
                let zone = TimeZone::get(tz)
                    .map_err(|e| format!("rule {:?}: time zone {tz:?}: {e}", rule.name))?;
                // The database's spelling ("asia/shanghai" → "Asia/Shanghai").
                if let Some(name) = zone.iana_name() {
                    *tz = name.to_string();
                }
            }
            Window::Sliding { buckets, .. } if *buckets == 0 => {
                *buckets = DEFAULT_SLIDING_BUCKETS;
            }
            _ => {}
        }
    }
    Ok(def)
}

/// Where a moment falls in a rule's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pos {
    /// A daily or fixed window `[start, end)` in unix ms.
    Window { start: u64, end: u64 },
    /// Sub-bucket `bucket` (of `bucket_ms`); buckets `bucket - buckets ..=
    /// bucket` are counted.
    Sliding {
        bucket: u64,
        bucket_ms: u64,
        buckets: u64,
    },
}

impl Pos {
    /// What identifies "this window" in counters and order records: the
    /// window's start, or the sub-bucket's number.
    pub fn id(&self) -> u64 {
        match self {
            Pos::Window { start, .. } => *start,
            Pos::Sliding { bucket, .. } => *bucket,
        }
    }
}

/// A rule's window, ready to use.
#[derive(Debug)]
enum Span {
    /// Local days of `tz`. `cache` holds the last day computed: time zone
    /// arithmetic costs a few hundred ns and nearly every request falls in
    /// the same day as the one before. A `Cell` because the policy table is
    /// owned by one shard thread.
    Day {
        tz: TimeZone,
        cache: Cell<(u64, u64)>,
    },
    Fixed {
        ms: u64,
    },
    Sliding {
        bucket_ms: u64,
        buckets: u64,
    },
}

impl Span {
    fn new(w: &Window) -> Result<Span, String> {
        Ok(match w {
            Window::Day { tz } => Span::Day {
                tz: TimeZone::get(tz).map_err(|e| format!("time zone {tz:?}: {e}"))?,
                cache: Cell::new((0, 0)),
            },
            Window::Fixed { secs } => Span::Fixed { ms: secs * 1000 },
            Window::Sliding { secs, buckets } => {
                let buckets = (*buckets).max(1) as u64;
                Span::Sliding {
                    bucket_ms: (secs * 1000).div_ceil(buckets),
                    buckets,
                }
            }
        })
    }

    fn pos(&self, now: u64) -> Result<Pos, RushError> {
        Ok(match self {
            Span::Day { tz, cache } => {
                let (start, end) = cache.get();
                if start <= now && now < end {
                    return Ok(Pos::Window { start, end });
                }
                let (start, end) = local_day(tz, now)?;
                cache.set((start, end));
                Pos::Window { start, end }
            }
            Span::Fixed { ms } => {
                let start = now / ms * ms;
                Pos::Window {
                    start,
                    end: start + ms,
                }
            }
            Span::Sliding { bucket_ms, buckets } => Pos::Sliding {
                bucket: now / bucket_ms,
                bucket_ms: *bucket_ms,
                buckets: *buckets,
            },
        })
    }
}

/// `[local midnight, next local midnight)` around `now` in `tz`, in unix ms.
fn local_day(tz: &TimeZone, now: u64) -> Result<(u64, u64), RushError> {
    let err = |e: jiff::Error| RushError::internal(format!("local day of {now} ms: {e}"));
    let zdt = Timestamp::from_millisecond(now as i64)
        .map_err(err)?
        .to_zoned_datetime(tz.clone());
    let start = zdt.start_of_day().map_err(err)?.timestamp();
    let end = zdt
        .tomorrow()
        .map_err(err)?
        .start_of_day()
        .map_err(err)?
        .timestamp();
    Ok((start.as_millisecond() as u64, end.as_millisecond() as u64))
}

#[derive(Debug)]
pub struct CompiledRule {
    pub name: String,
    pub scope: Scope,
    pub max: u64,
    span: Span,
    pub denials: crate::metrics::local::Counter,
    /// How a LIMITED answer names the rule: `rule "NAME" (MAX per WINDOW): `
    /// (made once: a flash sale's storm of denials is hot traffic).
    pub denial: String,
}

impl CompiledRule {
    pub fn pos(&self, now: u64) -> Result<Pos, RushError> {
        self.span.pos(now)
    }
}

/// A policy on one shard.
#[derive(Debug)]
pub struct Policy {
    /// As set (defaults filled in): LIMIT_POLICY_GET answers it.
    pub def: PolicyDef,
    pub rules: Vec<CompiledRule>,
    /// How long an order of this policy is remembered.
    pub order_ttl_ms: u64,
    pub metrics: PolicyMetrics,
}

impl Policy {
    pub fn compile(
        def: PolicyDef,
        cfg: &LimitsConfig,
        metrics: &LimitsMetrics,
    ) -> Result<Policy, String> {
        let def = resolve(def, cfg)?;
        let rules = def
            .rules
            .iter()
            .map(|r| {
                Ok(CompiledRule {
                    name: r.name.clone(),
                    scope: r.scope,
                    max: r.max,
                    span: Span::new(&r.window)?,
                    denials: metrics.denials.with_label_values(&[&def.name, &r.name]),
                    denial: format!("rule {:?} ({} per {}): ", r.name, r.scope, r.window),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Policy {
            order_ttl_ms: def
                .max_span_ms()
                .max(cfg.order_retention_secs.saturating_mul(1000)),
            metrics: PolicyMetrics::new(metrics, &def.name),
            rules,
            def,
        })
    }

    pub fn relaxed(&self) -> bool {
        self.def.relaxed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> u64 {
        s.parse::<Timestamp>().unwrap().as_millisecond() as u64
    }

    #[test]
    fn shanghai_days_start_at_local_midnight() {
        let tz = TimeZone::get("Asia/Shanghai").unwrap();
        // 15:59:59 UTC is 23:59:59 in Shanghai; 16:00 UTC is the next day.
        let (start, end) = local_day(&tz, ms("2026-03-01T15:59:59Z")).unwrap();
        assert_eq!(start, ms("2026-02-28T16:00:00Z"));
        assert_eq!(end, ms("2026-03-01T16:00:00Z"));
        let (start2, _) = local_day(&tz, ms("2026-03-01T16:00:00Z")).unwrap();
        assert_eq!(start2, end);
    }

    #[test]
    fn dst_days_are_23_and_25_hours() {
        let tz = TimeZone::get("America/New_York").unwrap();
        let (s, e) = local_day(&tz, ms("2026-03-08T12:00:00Z")).unwrap();
        assert_eq!(e - s, 23 * 3_600_000);
        let (s, e) = local_day(&tz, ms("2026-11-01T12:00:00Z")).unwrap();
        assert_eq!(e - s, 25 * 3_600_000);
    }

    #[test]
    fn day_cache_is_used_only_inside_its_day() {
        let span = Span::new(&Window::Day {
            tz: "Asia/Shanghai".into(),
        })
        .unwrap();
        let a = span.pos(ms("2026-03-01T10:00:00Z")).unwrap();
        let b = span.pos(ms("2026-03-01T15:00:00Z")).unwrap();
        let c = span.pos(ms("2026-03-01T16:00:00Z")).unwrap();
        assert_eq!(a, b);
        assert_ne!(b, c);
        assert_eq!(c.id(), ms("2026-03-01T16:00:00Z"));
    }

    #[test]
    fn fixed_windows_align_to_the_epoch() {
        let span = Span::new(&Window::Fixed { secs: 60 }).unwrap();
        assert_eq!(
            span.pos(125_000).unwrap(),
            Pos::Window {
                start: 120_000,
                end: 180_000
            }
        );
    }

    #[test]
    fn resolve_fills_defaults_and_refuses_unknown_zones() {
        let cfg = LimitsConfig::default();
        let def = |w: &str| PolicyDef {
            name: "p".into(),
            relaxed: false,
            rules: vec![rush_protocol::cmd::Rule {
                name: "r".into(),
                scope: Scope::Item,
                max: 1,
                window: w.parse().unwrap(),
            }],
        };
        let r = resolve(def("day"), &cfg).unwrap();
        assert_eq!(r.rules[0].window.to_string(), "day:UTC");
        let r = resolve(def("day:asia/shanghai"), &cfg).unwrap();
        assert_eq!(r.rules[0].window.to_string(), "day:Asia/Shanghai");
        let r = resolve(def("sliding:600"), &cfg).unwrap();
        assert_eq!(r.rules[0].window.to_string(), "sliding:600/60");
        assert!(resolve(def("day:Mars/Olympus"), &cfg).is_err());
    }
}
