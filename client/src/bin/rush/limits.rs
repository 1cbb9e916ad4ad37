//! `rush limit …`: purchase-limit policies, acquire (exit 0 allowed, 2
//! limited, 1 error), release, status.

use crate::exit;
use crate::out::{self, Out};
use clap::Subcommand;
use rush_client::protocol::cmd::{Allowance, OrderItem, PolicyDef, Rule, Scope, Window};
use rush_client::protocol::ErrorCode;
use rush_client::{calendar, Client};
use serde_json::{json, Value};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum LimitCmd {
    /// Create, replace, show or list policies.
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// Count an order: rush limit acquire POLICY USER ORDER ITEM[:QTY]...
    /// Exit code 0 allowed (also for a replayed order), 2 limited, 1 error.
    Acquire {
        policy: String,
        user: String,
        order: String,
        /// ITEM or ITEM:QTY (QTY defaults to 1). An item id that itself ends
        /// in ":DIGITS" needs an explicit quantity: "sku:7:1".
        #[arg(required = true)]
        items: Vec<String>,
    },
    /// Give an order's counts back (once).
    Release {
        policy: String,
        user: String,
        order: String,
    },
    /// A user's counts and resets under a policy.
    Status { policy: String, user: String },
}

#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    /// Create or replace a policy (admin): a rule "item" (each item at most
    /// N per window) and/or a rule "total" (at most N per window in all).
    #[command(group = clap::ArgGroup::new("max").args(["item_max", "total_max"]).required(true).multiple(true))]
    Set {
        name: String,
        /// Each item at most N per window.
        #[arg(long)]
        item_max: Option<u64>,
        /// At most N per window in total.
        #[arg(long)]
        total_max: Option<u64>,
        /// day[:TZ] (local midnight; TZ an IANA zone, default the node's),
        /// fixed:SECONDS (aligned to the epoch) or sliding:SECONDS[/BUCKETS].
        #[arg(long)]
        window: Window,
        /// Answer before the fsync (survives a rushd crash, not a power loss).
        #[arg(long)]
        relaxed: bool,
    },
    /// Show one policy.
    Get { name: String },
    /// Every policy of the node.
    List,
}

/// `ITEM` or `ITEM:QTY`.
fn parse_item(s: &str) -> OrderItem {
    match s.rsplit_once(':') {
        Some((item, qty)) if !qty.is_empty() && qty.bytes().all(|b| b.is_ascii_digit()) => {
            match qty.parse() {
                Ok(qty) => OrderItem::new(item, qty),
                // Too many digits for a u64: let the server refuse it.
                Err(_) => OrderItem::new(item, u64::MAX),
            }
        }
        _ => OrderItem::new(s, 1),
    }
}

pub async fn run(c: &Client, cmd: LimitCmd, out: Out) -> anyhow::Result<ExitCode> {
    match cmd {
        LimitCmd::Policy(PolicyCmd::Set {
            name,
            item_max,
            total_max,
            window,
            relaxed,
        }) => {
            let rules = [
                ("item", Scope::Item, item_max),
                ("total", Scope::Total, total_max),
            ]
            .into_iter()
            .filter_map(|(rule, scope, max)| {
                max.map(|max| Rule {
                    name: rule.into(),
                    scope,
                    max,
                    window: window.clone(),
                })
            })
            .collect();
            let reply = c
                .limit_policy_set(PolicyDef {
                    name,
                    relaxed,
                    rules,
                })
                .await?;
            out.print(
                || {
                    let created = if reply.created { "created" } else { "replaced" };
                    format!("{created}\n{}", policy_text(&reply.policy))
                },
                || json!({ "created": reply.created, "policy": policy_json(&reply.policy) }),
            )?;
        }
        LimitCmd::Policy(PolicyCmd::Get { name }) => {
            let p = c.limit_policy_get(name).await?;
            out.print(|| policy_text(&p), || policy_json(&p))?;
        }
        LimitCmd::Policy(PolicyCmd::List) => {
            let list = c.limit_policy_list().await?;
            out.print(
                || list.iter().map(policy_text).collect::<Vec<_>>().join("\n"),
                || json!(list.iter().map(policy_json).collect::<Vec<_>>()),
            )?;
        }
        LimitCmd::Acquire {
            policy,
            user,
            order,
            items,
        } => {
            let items: Vec<OrderItem> = items.iter().map(|s| parse_item(s)).collect();
            match c.limit_acquire(policy, user, order, items).await {
                Ok(reply) => out.print(
                    || {
                        let head = match (reply.replayed, reply.released) {
                            (false, _) => "allowed",
                            (true, false) => {
                                "allowed (replayed: this order was counted before; counts as of now)"
                            }
                            (true, true) => {
                                "released (replayed: this order was counted, then released; counts as of now)"
                            }
                        };
                        format!("{head}{}", allowances_text(&reply.allowances))
                    },
                    || {
                        json!({
                            "allowed": !reply.released,
                            "replayed": reply.replayed,
                            "released": reply.released,
                            "allowances": allowances_json(&reply.allowances),
                        })
                    },
                )?,
                Err(e) if e.code() == Some(ErrorCode::Limited) => {
                    let denial = e.limit_denial();
                    if out.json {
                        out.json(json!({
                            "allowed": false,
                            "denial": denial.as_ref().map(|d| json!({
                                "rule": d.rule,
                                "item": d.item,
                                "current": d.current,
                                "requested": d.requested,
                                "limit": d.limit,
                            })),
                            "message": e.to_string(),
                        }))?;
                        return Ok(exit::code(exit::DENIED));
                    }
                    println!("limited");
                    match denial {
                        Some(d) => println!(
                            "rule {} item {}: {} counted + {} requested > limit {}",
                            d.rule,
                            if d.item.is_empty() {
                                "(total)"
                            } else {
                                &d.item
                            },
                            d.current,
                            d.requested,
                            d.limit
                        ),
                        None => println!("{e}"),
                    }
                    return Ok(exit::code(exit::DENIED));
                }
                Err(e) => return Err(e.into()),
            }
        }
        LimitCmd::Release {
            policy,
            user,
            order,
        } => {
            let reply = c.limit_release(policy, user, order).await?;
            out.print(
                || {
                    let mut text = if reply.replayed {
                        "already released (nothing given back now)"
                    } else {
                        "released"
                    }
                    .to_string();
                    for i in &reply.items {
                        text.push_str(&format!("\n{} {}", i.item, i.qty));
                    }
                    text
                },
                || {
                    json!({
                        "released": !reply.replayed,
                        "already_released": reply.replayed,
                        "items": reply.items.iter().map(|i| json!({ "item": i.item, "qty": i.qty })).collect::<Vec<_>>(),
                    })
                },
            )?;
        }
        LimitCmd::Status { policy, user } => {
            let reply = c.limit_status(policy, user).await?;
            if out.json {
                out.json(json!({
                    "allowances": allowances_json(&reply.allowances),
                    "truncated": reply.truncated,
                }))?;
            } else {
                let text = allowances_text(&reply.allowances);
                if let Some(text) = text.strip_prefix('\n') {
                    println!("{text}");
                }
                if reply.truncated {
                    println!("(more items not listed)");
                }
            }
        }
    }
    Ok(exit::code(exit::OK))
}

fn policy_text(p: &PolicyDef) -> String {
    let mut text = format!(
        "policy {} durability {}",
        p.name,
        if p.relaxed { "relaxed" } else { "sync" }
    );
    for r in &p.rules {
        text.push_str(&format!(
            "\n  rule {} per {} max {} window {}",
            r.name, r.scope, r.max, r.window
        ));
    }
    text
}

fn policy_json(p: &PolicyDef) -> Value {
    json!({
        "name": p.name,
        "durability": if p.relaxed { "relaxed" } else { "sync" },
        "rules": p.rules.iter().map(|r| json!({
            "name": r.name,
            "scope": r.scope.to_string(),
            "max": r.max,
            "window": r.window.to_string(),
        })).collect::<Vec<_>>(),
    })
}

/// One line per allowance, each after a newline:
/// `RULE ITEM COUNT/LIMIT remaining N resets TIME`.
fn allowances_text(list: &[Allowance]) -> String {
    let mut text = String::new();
    for a in list {
        let item = if a.item.is_empty() {
            "(total)"
        } else {
            &a.item
        };
        let resets = if a.resets_at_ms == 0 {
            "-".to_string()
        } else {
            calendar::timestamp(a.resets_at_ms)
        };
        text.push_str(&format!(
            "\n{} {} {}/{} remaining {} resets {}",
            a.rule,
            item,
            a.count,
            a.limit,
            a.remaining(),
            resets
        ));
    }
    text
}

fn allowances_json(list: &[Allowance]) -> Value {
    json!(list
        .iter()
        .map(|a| json!({
            "rule": a.rule,
            "item": if a.item.is_empty() { Value::Null } else { json!(a.item) },
            "count": a.count,
            "limit": a.limit,
            "remaining": a.remaining(),
            "resets_at_ms": a.resets_at_ms,
            "resets_at": out::time(a.resets_at_ms),
        }))
        .collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_and_quantities() {
        assert_eq!(parse_item("sku-1"), OrderItem::new("sku-1", 1));
        assert_eq!(parse_item("sku-1:3"), OrderItem::new("sku-1", 3));
        assert_eq!(parse_item("sku:7:1"), OrderItem::new("sku:7", 1));
        assert_eq!(parse_item("a:b"), OrderItem::new("a:b", 1));
        assert_eq!(parse_item("x:"), OrderItem::new("x:", 1));
    }
}
