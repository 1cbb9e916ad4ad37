//! `rush limit …`: purchase-limit policies, acquire (exit 0 allowed, 2
//! limited, 1 error), release, status.

use clap::Subcommand;
use rush_client::protocol::cmd::{Allowance, OrderItem, PolicyDef, Rule, Scope, Window};
use rush_client::protocol::ErrorCode;
use rush_client::Client;
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
        window: String,
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

pub async fn run(c: &Client, cmd: LimitCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        LimitCmd::Policy(PolicyCmd::Set {
            name,
            item_max,
            total_max,
            window,
            relaxed,
        }) => {
            if item_max.is_none() && total_max.is_none() {
                anyhow::bail!("give --item-max and/or --total-max");
            }
            let window: Window = window.parse().map_err(anyhow::Error::msg)?;
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
            println!("{}", if reply.created { "created" } else { "replaced" });
            print_policy(&reply.policy);
        }
        LimitCmd::Policy(PolicyCmd::Get { name }) => print_policy(&c.limit_policy_get(name).await?),
        LimitCmd::Policy(PolicyCmd::List) => {
            for p in c.limit_policy_list().await? {
                print_policy(&p);
            }
        }
        LimitCmd::Acquire {
            policy,
            user,
            order,
            items,
        } => {
            let items: Vec<OrderItem> = items.iter().map(|s| parse_item(s)).collect();
            match c.limit_acquire(policy, user, order, items).await {
                Ok(reply) => {
                    println!(
                        "{}",
                        if reply.replayed {
                            "allowed (replayed: this order was counted before)"
                        } else {
                            "allowed"
                        }
                    );
                    print_allowances(&reply.allowances);
                }
                Err(e) if e.code() == Some(ErrorCode::Limited) => {
                    println!("limited");
                    match e.limit_denial() {
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
                    return Ok(ExitCode::from(2));
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
            println!(
                "{}",
                if reply.replayed {
                    "already released (nothing given back now)"
                } else {
                    "released"
                }
            );
            for i in reply.items {
                println!("{} {}", i.item, i.qty);
            }
        }
        LimitCmd::Status { policy, user } => {
            let reply = c.limit_status(policy, user).await?;
            print_allowances(&reply.allowances);
            if reply.truncated {
                println!("(more items not listed)");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_policy(p: &PolicyDef) {
    println!(
        "policy {} durability {}",
        p.name,
        if p.relaxed { "relaxed" } else { "sync" }
    );
    for r in &p.rules {
        println!(
            "  rule {} per {} max {} window {}",
            r.name, r.scope, r.max, r.window
        );
    }
}

/// One line per allowance: `RULE ITEM COUNT/LIMIT remaining N resets TIME`.
fn print_allowances(list: &[Allowance]) {
    for a in list {
        let item = if a.item.is_empty() {
            "(total)"
        } else {
            &a.item
        };
        let resets = if a.resets_at_ms == 0 {
            "-".to_string()
        } else {
            utc(a.resets_at_ms)
        };
        println!(
            "{} {} {}/{} remaining {} resets {}",
            a.rule,
            item,
            a.count,
            a.limit,
            a.remaining(),
            resets
        );
    }
}

/// Unix ms as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
fn utc(ms: u64) -> String {
    let (date, h, m, s) = rush_client::calendar::utc_parts((ms / 1000) as i64);
    format!("{date}T{h:02}:{m:02}:{s:02}Z")
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

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_772_380_800_000), "2026-03-01T16:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
    }
}
