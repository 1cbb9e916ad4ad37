//! The `[limits]` config section: node defaults and policies.
//!
//! ```toml
//! [limits]
//! default_time_zone = "Asia/Shanghai"
//!
//! # The seed's rules: each item once a day, at most 5 a day in total.
//! [limits.policies.flash-sale]
//! window = "day"          # shorthand: rules "item" and "total" share it
//! item_max = 1
//! total_max = 5
//!
//! # Any list of rules, each with its own window.
//! [limits.policies.coupons]
//! durability = "relaxed"
//! rules = [
//!   { name = "per-hour", per = "total", max = 3, window = "sliding:3600" },
//!   { name = "per-coupon", per = "item", max = 1, window = "fixed:604800" },
//! ]
//! ```

use super::policy::resolve;
use crate::config::Durability;
use rush_protocol::cmd::{PolicyDef, Rule, Scope, Window};
use rush_protocol::limits::MAX_POLICIES;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Zone of a `day` window that names none.
pub const DEFAULT_TIME_ZONE: &str = "UTC";
/// Orders are remembered (replays recognised, releases possible) for at
/// least this long, and at least as long as the policy's longest window.
pub const DEFAULT_ORDER_RETENTION_SECS: u64 = 86_400;
/// Longest order retention accepted (a year).
pub const MAX_ORDER_RETENTION_SECS: u64 = 366 * 86_400;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// IANA zone of daily windows that name none (`window = "day"`). It is
    /// written into a policy when the policy is loaded or set, so a stored
    /// policy keeps its zone if this changes later.
    pub default_time_zone: String,
    /// Minimum time an order id is remembered. An order is kept for the
    /// longer of this and its policy's longest window, so a message
    /// redelivered a bit after a short window ends still isn't counted twice.
    pub order_retention_secs: u64,
    /// Policies by name. A policy set at run time (LIMIT_POLICY_SET) with the
    /// same name overrides the one here, also after restarts.
    pub policies: BTreeMap<String, PolicyConfig>,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            default_time_zone: DEFAULT_TIME_ZONE.into(),
            order_retention_secs: DEFAULT_ORDER_RETENTION_SECS,
            policies: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// "sync" (default): an acquisition is fsynced before it is answered.
    /// "relaxed": in the WAL only (survives a rushd crash, not a power loss).
    #[serde(default = "sync")]
    pub durability: Durability,
    /// Shorthand window for `item_max` / `total_max`.
    pub window: Option<String>,
    /// Shorthand: a rule named "item", each item at most this many per window.
    pub item_max: Option<u64>,
    /// Shorthand: a rule named "total", at most this many per window in all.
    pub total_max: Option<u64>,
    /// Rules in full.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
}

fn sync() -> Durability {
    Durability::Sync
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// Defaults to the value of `per` ("item" or "total").
    pub name: Option<String>,
    pub per: ScopeConfig,
    pub max: u64,
    /// `day[:ZONE]`, `fixed:SECONDS` or `sliding:SECONDS[/BUCKETS]`.
    pub window: String,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScopeConfig {
    Item,
    Total,
}

impl PolicyConfig {
    fn to_def(&self, name: &str) -> Result<PolicyDef, String> {
        let mut rules = Vec::new();
        if self.item_max.is_some() || self.total_max.is_some() {
            let window: Window = self
                .window
                .as_deref()
                .ok_or("item_max / total_max need a window")?
                .parse()?;
            for (rule, scope, max) in [
                ("item", Scope::Item, self.item_max),
                ("total", Scope::Total, self.total_max),
            ] {
                if let Some(max) = max {
                    rules.push(Rule {
                        name: rule.into(),
                        scope,
                        max,
                        window: window.clone(),
                    });
                }
            }
        } else if self.window.is_some() {
            return Err("window without item_max or total_max".into());
        }
        for r in &self.rules {
            let scope = match r.per {
                ScopeConfig::Item => Scope::Item,
                ScopeConfig::Total => Scope::Total,
            };
            rules.push(Rule {
                name: r.name.clone().unwrap_or_else(|| scope.to_string()),
                scope,
                max: r.max,
                window: r.window.parse()?,
            });
        }
        Ok(PolicyDef {
            name: name.to_string(),
            relaxed: self.durability == Durability::Relaxed,
            rules,
        })
    }
}

impl LimitsConfig {
    /// The configured policies, checked and with defaults filled in.
    pub fn policy_defs(&self) -> Result<Vec<PolicyDef>, String> {
        self.policies
            .iter()
            .map(|(name, p)| {
                p.to_def(name)
                    .and_then(|def| resolve(def, self))
                    .map_err(|e| format!("limits.policies.{name}: {e}"))
            })
            .collect()
    }

    pub fn validate(&self) -> Result<(), String> {
        jiff::tz::TimeZone::get(&self.default_time_zone)
            .map_err(|e| format!("limits.default_time_zone {:?}: {e}", self.default_time_zone))?;
        if self.order_retention_secs > MAX_ORDER_RETENTION_SECS {
            return Err(format!(
                "limits.order_retention_secs must be at most {MAX_ORDER_RETENTION_SECS}"
            ));
        }
        if self.policies.len() > MAX_POLICIES {
            return Err(format!("limits: at most {MAX_POLICIES} policies"));
        }
        self.policy_defs().map(|_| ())
    }
}
