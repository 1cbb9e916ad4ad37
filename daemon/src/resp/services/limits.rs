//! `LIMIT.ACQUIRE`, `LIMIT.RELEASE`, `LIMIT.STATUS`, `LIMIT.POLICY
//! SET|GET|LIST`: purchase limits (`daemon/src/limits/`).
//!
//! The user is the key (its CRC16 slot, `{hashtag}` rule included, is where
//! the counts live), so cluster clients route these exactly. Policies are
//! the node's, on every shard: `LIMIT.POLICY` declares no key.

use super::{once, ArgError, Args, Parsed, Value, Writer};
use rush_protocol::cmd::{
    AcquireReply, Allowance, LimitAcquire, LimitPolicyGet, LimitPolicyList, LimitPolicySet,
    LimitRelease, LimitStatus, OrderItem, PolicyDef, ReleaseReply, Rule, Scope, StatusReply,
    Window,
};
use rush_protocol::limits::{MAX_ORDER_ITEMS, MAX_POLICY_RULES};
use rush_protocol::{ErrorCode, ErrorDetail, LimitDenial, Reply, RushError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    Acquired,
    Released,
    Status,
    PolicySet,
    Policy,
    Policies,
}

pub(super) fn decode(name: &str, a: &mut Args) -> Option<Parsed<Shape>> {
    Some(match name {
        "limit.acquire" => acquire(a),
        "limit.release" => release(a),
        "limit.status" => status(a),
        "limit.policy" => policy(a),
        _ => return None,
    })
}

/// `LIMIT.ACQUIRE policy user order_id item qty [item qty ...]`.
fn acquire(a: &mut Args) -> Parsed<Shape> {
    let policy = a.text("the policy")?;
    let user = a.bytes()?;
    let order_id = a.text("the order id")?;
    let item = |a: &mut Args| {
        Ok(OrderItem {
            item: a.text("an item")?,
            qty: a.u64()?,
        })
    };
    let items = a.pairs(MAX_ORDER_ITEMS, ("an order", "items"), item)?;
    let r = LimitAcquire {
        policy,
        user,
        order_id,
        items,
    };
    Ok((r.into(), Shape::Acquired))
}

/// `LIMIT.RELEASE policy user order_id`.
fn release(a: &mut Args) -> Parsed<Shape> {
    let r = LimitRelease {
        policy: a.text("the policy")?,
        user: a.bytes()?,
        order_id: a.text("the order id")?,
    };
    Ok((r.into(), Shape::Released))
}

/// `LIMIT.STATUS policy user`.
fn status(a: &mut Args) -> Parsed<Shape> {
    let r = LimitStatus {
        policy: a.text("the policy")?,
        user: a.bytes()?,
    };
    Ok((r.into(), Shape::Status))
}

/// `LIMIT.POLICY SET name [RELAXED] RULE rule ITEM|TOTAL max window [RULE ...]`,
/// `LIMIT.POLICY GET name`, `LIMIT.POLICY LIST`.
fn policy(a: &mut Args) -> Parsed<Shape> {
    let sub = a.bytes()?;
    match sub.to_ascii_uppercase().as_slice() {
        b"SET" => policy_set(a),
        b"GET" => {
            let name = a.text("the policy")?;
            a.end()?;
            Ok((LimitPolicyGet { name }.into(), Shape::Policy))
        }
        b"LIST" => {
            a.end()?;
            Ok((LimitPolicyList {}.into(), Shape::Policies))
        }
        _ => Err(ArgError::unknown_subcommand(&sub, "SET, GET or LIST")),
    }
}

fn policy_set(a: &mut Args) -> Parsed<Shape> {
    let name = a.text("the policy")?;
    let mut relaxed = None;
    let mut rules = Vec::new();
    while !a.is_empty() {
        match a.keyword()?.as_slice() {
            b"RELAXED" => once(&mut relaxed, true)?,
            b"RULE" => {
                if rules.len() == MAX_POLICY_RULES {
                    return Err(ArgError::at_most("a policy", MAX_POLICY_RULES, "rules"));
                }
                let rule = a.text("the rule")?;
                let scope = match a.keyword()?.as_slice() {
                    b"ITEM" => Scope::Item,
                    b"TOTAL" => Scope::Total,
                    _ => {
                        return Err(ArgError::Invalid(format!(
                            "rule {rule:?}: the scope is ITEM (each item) or TOTAL (all items together)"
                        )))
                    }
                };
                let max = a.u64()?;
                let window = a.text("the window")?;
                let window: Window = window
                    .parse()
                    .map_err(|e: String| ArgError::Invalid(format!("rule {rule:?}: {e}")))?;
                rules.push(Rule {
                    name: rule,
                    scope,
                    max,
                    window,
                });
            }
            _ => return Err(ArgError::Syntax),
        }
    }
    if rules.is_empty() {
        return Err(ArgError::Invalid(
            "a policy needs at least one RULE name ITEM|TOTAL max window".into(),
        ));
    }
    let policy = PolicyDef {
        name,
        relaxed: relaxed.unwrap_or(false),
        rules,
    };
    Ok((LimitPolicySet { policy }.into(), Shape::PolicySet))
}

pub(super) fn render(w: &mut Writer, shape: &Shape, result: Result<Reply, RushError>) {
    match (shape, result) {
        (Shape::Acquired, Ok(Reply::LimitAcquire(r))) => acquired(w, &r),
        (Shape::Acquired, Err(e)) if e.code == ErrorCode::Limited => match &e.detail {
            ErrorDetail::Limit(d) => denied(w, d),
            _ => w.error(&e),
        },
        (Shape::Released, Ok(Reply::LimitRelease(r))) => released(w, &r),
        (Shape::Status, Ok(Reply::LimitStatus(s))) => status_reply(w, &s),
        (Shape::PolicySet, Ok(Reply::LimitPolicySet(r))) => {
            w.map(2);
            w.field("created");
            w.flag(r.created);
            w.field("policy");
            policy_map(w, &r.policy);
        }
        (Shape::Policy, Ok(Reply::LimitPolicyGet(p))) => policy_map(w, &p),
        (Shape::Policies, Ok(Reply::LimitPolicyList(l))) => {
            w.array(l.policies.len());
            for p in &l.policies {
                policy_map(w, p);
            }
        }
        // No such order (LIMIT.RELEASE) or policy (LIMIT.POLICY GET).
        (Shape::Released | Shape::Policy, Err(e)) if e.code == ErrorCode::NotFound => w.null(),
        (_, Err(e)) => w.error(&e),
        (_, Ok(_)) => w.unexpected(),
    }
}

fn acquired(w: &mut Writer, r: &AcquireReply) {
    // The rule with the least room left speaks for the order.
    let tightest = r.allowances.iter().min_by_key(|a| a.remaining());
    verdict(w, true, r.replayed, r.released, tightest, &r.allowances);
}

/// LIMITED: nothing was counted; the rule that said no.
fn denied(w: &mut Writer, d: &LimitDenial) {
    let said_no = Allowance {
        rule: d.rule.clone(),
        item: d.item.clone(),
        // What the rule had counted before this order.
        count: d.current,
        limit: d.limit,
        // A denial does not say when the rule's count drops: LIMIT.STATUS does.
        resets_at_ms: 0,
    };
    verdict(w, false, false, false, Some(&said_no), &[]);
}

/// The order's verdict: the same ten fields, allowed or not, with the
/// standing of the rule that speaks for the order.
fn verdict(
    w: &mut Writer,
    allowed: bool,
    replayed: bool,
    released: bool,
    rule: Option<&Allowance>,
    list: &[Allowance],
) {
    w.map(10);
    w.field("allowed");
    w.flag(allowed);
    w.field("replayed");
    w.flag(replayed);
    w.field("released");
    w.flag(released);
    standing(w, rule);
    w.field("allowances");
    allowances(w, list);
}

fn released(w: &mut Writer, r: &ReleaseReply) {
    w.map(2);
    w.field("replayed");
    w.flag(r.replayed);
    w.field("items");
    w.map(r.items.len());
    for i in &r.items {
        w.bulk(i.item.as_bytes());
        w.u64(i.qty);
    }
}

fn status_reply(w: &mut Writer, s: &StatusReply) {
    w.map(2);
    w.field("allowances");
    allowances(w, &s.allowances);
    w.field("truncated");
    w.flag(s.truncated);
}

fn allowances(w: &mut Writer, list: &[Allowance]) {
    w.array(list.len());
    for a in list {
        w.map(6);
        standing(w, Some(a));
    }
}

/// One rule's six fields (empty and zero for no rule).
fn standing(w: &mut Writer, a: Option<&Allowance>) {
    w.fields(&[
        (
            "rule",
            Value::Bulk(a.map_or("", |a| a.rule.as_str()).as_bytes()),
        ),
        (
            "item",
            Value::Bulk(a.map_or("", |a| a.item.as_str()).as_bytes()),
        ),
        ("count", Value::U64(a.map_or(0, |a| a.count))),
        ("limit", Value::U64(a.map_or(0, |a| a.limit))),
        ("remaining", Value::U64(a.map_or(0, Allowance::remaining))),
        ("resets_at_ms", Value::U64(a.map_or(0, |a| a.resets_at_ms))),
    ]);
}

fn policy_map(w: &mut Writer, p: &PolicyDef) {
    w.map(3);
    w.field("name");
    w.bulk(p.name.as_bytes());
    w.field("durability");
    w.bulk(if p.relaxed { "relaxed" } else { "sync" }.as_bytes());
    w.field("rules");
    w.array(p.rules.len());
    for r in &p.rules {
        w.record(&[
            ("name", Value::Bulk(r.name.as_bytes())),
            ("scope", Value::Bulk(r.scope.to_string().as_bytes())),
            ("max", Value::U64(r.max)),
            ("window", Value::Bulk(r.window.to_string().as_bytes())),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{refused, run};
    use super::super::ServiceShape;
    use super::*;
    use bytes::Bytes;
    use rush_protocol::Request;

    #[test]
    fn acquire_takes_item_quantity_pairs() {
        match run("LIMIT.ACQUIRE daily {u1}alice o-1 sku-1 2 sku-2 1") {
            Ok((Request::LimitAcquire(r), ServiceShape::Limit(Shape::Acquired))) => assert_eq!(
                r,
                LimitAcquire {
                    policy: "daily".into(),
                    user: Bytes::from_static(b"{u1}alice"),
                    order_id: "o-1".into(),
                    items: vec![OrderItem::new("sku-1", 2), OrderItem::new("sku-2", 1)],
                }
            ),
            other => panic!("{other:?}"),
        }
        assert!(refused("LIMIT.ACQUIRE p u o sku").starts_with("ERR wrong number of arguments"));
        assert!(refused("LIMIT.ACQUIRE p u o a 1 b").starts_with("ERR wrong number of arguments"));
        assert_eq!(
            refused("LIMIT.ACQUIRE p u o a -1"),
            "ERR value is not an integer or out of range"
        );
        let many: String = (0..=MAX_ORDER_ITEMS).map(|i| format!(" i{i} 1")).collect();
        assert!(refused(&format!("LIMIT.ACQUIRE p u o{many}")).contains("at most 100 items"));
    }

    #[test]
    fn policy_set_reads_rules() {
        match run(
            "LIMIT.POLICY set p1 RELAXED RULE each item 2 day:UTC rule all TOTAL 5 sliding:60/6",
        ) {
            Ok((Request::LimitPolicySet(s), ServiceShape::Limit(Shape::PolicySet))) => {
                assert_eq!(
                    s.policy,
                    PolicyDef {
                        name: "p1".into(),
                        relaxed: true,
                        rules: vec![
                            Rule {
                                name: "each".into(),
                                scope: Scope::Item,
                                max: 2,
                                window: Window::Day { tz: "UTC".into() },
                            },
                            Rule {
                                name: "all".into(),
                                scope: Scope::Total,
                                max: 5,
                                window: Window::Sliding {
                                    secs: 60,
                                    buckets: 6
                                },
                            },
                        ],
                    }
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(refused("LIMIT.POLICY SET p").contains("at least one RULE"));
        assert!(
            refused("LIMIT.POLICY SET p RULE r some 1 day").contains("ITEM (each item) or TOTAL")
        );
        assert!(refused("LIMIT.POLICY SET p RULE r item 1 week").contains("is not a window"));
        assert!(refused("LIMIT.POLICY SET p RULE r item 1")
            .starts_with("ERR wrong number of arguments"));
        assert_eq!(
            refused("LIMIT.POLICY SET p RELAXED RELAXED RULE r item 1 day"),
            "ERR syntax error"
        );
        assert_eq!(
            refused("LIMIT.POLICY DROP p"),
            "ERR unknown subcommand 'DROP'. Try LIMIT.POLICY SET, GET or LIST."
        );
    }

    #[test]
    fn policy_get_and_list() {
        assert!(matches!(
            run("LIMIT.POLICY GET p"),
            Ok((Request::LimitPolicyGet(g), ServiceShape::Limit(Shape::Policy))) if g.name == "p"
        ));
        assert!(matches!(
            run("limit.policy list"),
            Ok((
                Request::LimitPolicyList(_),
                ServiceShape::Limit(Shape::Policies)
            ))
        ));
        assert!(refused("LIMIT.POLICY LIST x").starts_with("ERR wrong number of arguments"));
        assert!(refused("LIMIT.POLICY GET").starts_with("ERR wrong number of arguments"));
    }

    #[test]
    fn release_and_status() {
        assert!(matches!(
            run("LIMIT.RELEASE p u o"),
            Ok((Request::LimitRelease(r), ServiceShape::Limit(Shape::Released))) if r.order_id == "o"
        ));
        assert!(matches!(
            run("LIMIT.STATUS p u"),
            Ok((Request::LimitStatus(s), ServiceShape::Limit(Shape::Status))) if s.user == "u"
        ));
    }
}
