//! Routing a request to the node that serves its slot.
//!
//! The client keeps the cluster map as a slot → node table ([`Routes`]):
//! loaded from any node at connect (CLUSTER_SLOTS), patched in place when a
//! node answers MOVED (one atomic store: no lock on the request path), and
//! replaced by a fresh map from the node that sent the MOVED, in the
//! background. A node that was never given a map (epoch 0) gets every
//! request, at the address the client was given (which may differ from
//! the address the node advertises: port forwards, NAT).
//!
//! Requests that run on every shard of a node (admin broadcasts: COMPACT,
//! CLOCK_ADVANCE, audits, refunds…) go to every node of the cluster, and
//! the answers are merged here ([`merge`]).

use rush_protocol::cmd::{ClusterSlotsReply, EnvelopeRefundsReply};
use rush_protocol::{ErrorCode, Opcode, Reply, Request, RushError, SLOTS};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};

/// No node known for the slot: ask the seed.
const UNKNOWN: u16 = u16::MAX;

/// The slot → node table.
pub(crate) struct Routes {
    pub epoch: u64,
    /// Index into `addrs` per slot.
    slots: Box<[AtomicU16]>,
    /// Addresses to connect to (the seed's address for the seed node).
    pub addrs: Vec<String>,
    /// Map address → connect address, for MOVED answers naming the seed.
    alias: HashMap<String, String>,
    /// The map as loaded (None: a lone node, or not loaded).
    pub map: Option<ClusterSlotsReply>,
}

impl Routes {
    /// Everything to one address.
    pub fn single(addr: &str) -> Routes {
        Routes {
            epoch: 0,
            slots: (0..SLOTS).map(|_| AtomicU16::new(0)).collect(),
            addrs: vec![addr.to_string()],
            alias: HashMap::new(),
            map: None,
        }
    }

    /// From a map; the node with id `seed_id` is reached at `seed`.
    pub fn from_map(
        map: ClusterSlotsReply,
        seed: &str,
        seed_id: Option<&str>,
    ) -> Result<Routes, String> {
        if map.epoch == 0 {
            return Ok(Routes::single(seed));
        }
        let owners = map.owners()?;
        let mut alias = HashMap::new();
        let addrs: Vec<String> = map
            .nodes
            .iter()
            .map(|n| {
                if Some(n.id.as_str()) == seed_id {
                    alias.insert(n.addr.clone(), seed.to_string());
                    seed.to_string()
                } else {
                    n.addr.clone()
                }
            })
            .collect();
        Ok(Routes {
            epoch: map.epoch,
            slots: owners.iter().map(|&o| AtomicU16::new(o)).collect(),
            addrs,
            alias,
            map: Some(map),
        })
    }

    /// Where to send a request for `slot` (the seed when unknown).
    pub fn addr_for<'a>(&'a self, slot: u16, seed: &'a str) -> &'a str {
        match self.slots[slot as usize].load(Ordering::Relaxed) {
            UNKNOWN => seed,
            i => self.addrs.get(i as usize).map_or(seed, String::as_str),
        }
    }

    /// The address to connect to for an address a node named.
    pub fn resolve<'a>(&'a self, addr: &'a str) -> &'a str {
        self.alias.get(addr).map_or(addr, String::as_str)
    }

    /// MOVED: the slot is at `addr` now. False when `addr` is not one of
    /// ours (the caller then rebuilds the table with it).
    pub fn patch(&self, slot: u16, addr: &str) -> bool {
        let addr = self.resolve(addr);
        match self.addrs.iter().position(|a| a == addr) {
            Some(i) => {
                self.slots[slot as usize].store(i as u16, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// A copy with one more address, and `slot` routed to it.
    pub fn with_addr(&self, slot: u16, addr: &str) -> Routes {
        let mut addrs = self.addrs.clone();
        addrs.push(addr.to_string());
        let r = Routes {
            epoch: self.epoch,
            slots: self
                .slots
                .iter()
                .map(|s| AtomicU16::new(s.load(Ordering::Relaxed)))
                .collect(),
            addrs,
            alias: self.alias.clone(),
            map: self.map.clone(),
        };
        r.slots[slot as usize].store((r.addrs.len() - 1) as u16, Ordering::Relaxed);
        r
    }

    /// Every node's address, once each.
    pub fn nodes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in &self.addrs {
            if !out.contains(a) {
                out.push(a.clone());
            }
        }
        out
    }
}

/// What a client did, for operators and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Calls made (each counted once however often it was sent).
    pub requests: u64,
    /// Resends after a lost connection, TRYAGAIN, BUSY or UNAVAILABLE,
    /// and further attempts to reach the node given at connect.
    pub retries: u64,
    /// MOVED answers followed.
    pub moved: u64,
    /// Maps loaded from a node.
    pub refreshes: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub retries: AtomicU64,
    pub moved: AtomicU64,
    pub refreshes: AtomicU64,
}

impl Counters {
    pub fn snapshot(&self) -> ClientStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ClientStats {
            requests: l(&self.requests),
            retries: l(&self.retries),
            moved: l(&self.moved),
            refreshes: l(&self.refreshes),
        }
    }
}

/// Safe to resend after a lost connection: idempotent by its opcode, or by
/// the idempotency key it carries (an envelope create with a key, a
/// shorten that reuses the live code of the same account and URL).
pub(crate) fn retry_safe(req: &Request) -> bool {
    match req {
        Request::EnvelopeCreate(c) => c.idempotency_key.is_some(),
        Request::LinkShorten(s) => s.reuse && s.alias.is_none(),
        other => other.opcode().idempotent(),
    }
}

/// Merge the answers of every node to a request that ran on all of them.
pub(crate) fn merge(req: &Request, replies: Vec<Reply>) -> Result<Reply, RushError> {
    let opcode = req.opcode();
    let bad = || RushError::internal(format!("unexpected answer to {}", opcode.name()));
    let mut it = replies.into_iter();
    let first = it.next().ok_or_else(bad)?;
    let rest: Vec<Reply> = it.collect();
    Ok(match (opcode, first) {
        (Opcode::ClockAdvance, Reply::ClockAdvance(t)) => {
            let mut max = t;
            for r in rest {
                let Reply::ClockAdvance(t) = r else {
                    return Err(bad());
                };
                max = max.max(t);
            }
            Reply::ClockAdvance(max)
        }
        (Opcode::Compact, r @ Reply::Compact(()))
        | (Opcode::CatalogShed, r @ Reply::CatalogShed(())) => r,
        (Opcode::CatalogRebuild, Reply::CatalogRebuild(n)) => {
            let mut sum = n;
            for r in rest {
                let Reply::CatalogRebuild(n) = r else {
                    return Err(bad());
                };
                sum += n;
            }
            Reply::CatalogRebuild(sum)
        }
        (Opcode::CatalogWarm, Reply::CatalogWarm(mut w)) => {
            for r in rest {
                let Reply::CatalogWarm(x) = r else {
                    return Err(bad());
                };
                w.loaded += x.loaded;
                w.absent += x.absent;
            }
            Reply::CatalogWarm(w)
        }
        (Opcode::LimitPolicySet, Reply::LimitPolicySet(mut p)) => {
            for r in rest {
                let Reply::LimitPolicySet(x) = r else {
                    return Err(bad());
                };
                p.created |= x.created;
            }
            Reply::LimitPolicySet(p)
        }
        (Opcode::EnvelopeRefundsAck, Reply::EnvelopeRefundsAck(n)) => {
            let mut sum = n;
            for r in rest {
                let Reply::EnvelopeRefundsAck(n) = r else {
                    return Err(bad());
                };
                sum += n;
            }
            Reply::EnvelopeRefundsAck(sum)
        }
        (Opcode::EnvelopeAudit, Reply::EnvelopeAudit(mut all)) => {
            for r in rest {
                let Reply::EnvelopeAudit(a) = r else {
                    return Err(bad());
                };
                all.absorb(a);
            }
            Reply::EnvelopeAudit(all)
        }
        (Opcode::EnvelopeRefunds, Reply::EnvelopeRefunds(p)) => {
            let Request::EnvelopeRefunds(r) = req else {
                return Err(bad());
            };
            let mut parts = vec![p];
            for x in rest {
                let Reply::EnvelopeRefunds(x) = x else {
                    return Err(bad());
                };
                parts.push(x);
            }
            // Nodes' clocks differ: refunds of a node whose clock runs ahead
            // wait for the slowest node's bound. A refund read on one node
            // but not acknowledged before its slot moved is delivered again
            // by the new owner (at least once, as always: the envelope id is
            // the payment's idempotency key).
            Reply::EnvelopeRefunds(
                EnvelopeRefundsReply::merge(parts, r.limit as usize).ok_or_else(bad)?,
            )
        }
        // Anything else that runs on every shard: the nodes agree (or
        // the first answer is as good as any).
        (_, first) => first,
    })
}

/// MOVED: the request was certainly not applied, and `slot` is served by
/// the node at the address named. (The only redirect there is: Rush hands a
/// slot over whole, so there is no ASK; a retired code 7 from an old server
/// is an error like any unknown code, never followed.)
pub(crate) fn moved(e: &RushError) -> Option<(u16, &str)> {
    match (&e.code, &e.detail) {
        (ErrorCode::Moved, rush_protocol::ErrorDetail::Redirect { slot, addr }) => {
            Some((*slot, addr.as_str()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rush_protocol::cmd::{EnvelopeRefunds, Refund, RefundCursor};

    fn refund(stamp: u64, id: u64) -> Refund {
        Refund {
            cursor: RefundCursor { stamp, id },
            sender: "s".into(),
            amount_cents: 1,
            refunded_at_ms: stamp,
        }
    }

    fn page(refunds: Vec<Refund>, next: u64, more: bool) -> Reply {
        Reply::EnvelopeRefunds(EnvelopeRefundsReply {
            refunds,
            next: RefundCursor {
                stamp: next,
                id: u64::MAX,
            },
            more,
        })
    }

    #[test]
    fn refund_streams_merge_up_to_the_lowest_bound() {
        let req = Request::EnvelopeRefunds(EnvelopeRefunds {
            after: RefundCursor::START,
            limit: 10,
        });
        // Node 1 is complete to 100, node 2 to 50: node 1's refund at 70
        // waits for node 2's bound to pass it.
        let merged = merge(
            &req,
            vec![
                page(vec![refund(10, 1), refund(70, 2)], 100, false),
                page(vec![refund(20, 3)], 50, false),
            ],
        )
        .unwrap();
        let Reply::EnvelopeRefunds(p) = merged else {
            panic!()
        };
        let ids: Vec<u64> = p.refunds.iter().map(|r| r.cursor.id).collect();
        assert_eq!(ids, vec![1, 3]);
        assert_eq!(p.next.stamp, 50);
        assert!(!p.more);
        // A full page ends at its last refund, and says there is more.
        let req = Request::EnvelopeRefunds(EnvelopeRefunds {
            after: RefundCursor::START,
            limit: 1,
        });
        let Reply::EnvelopeRefunds(p) = merge(
            &req,
            vec![
                page(vec![refund(10, 1)], 100, false),
                page(vec![refund(20, 3)], 50, false),
            ],
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(p.refunds.len(), 1);
        assert_eq!(p.next, RefundCursor { stamp: 10, id: 1 });
        assert!(p.more);
    }

    #[test]
    fn sums_and_maxima() {
        let req = Request::ClockAdvance(rush_protocol::cmd::ClockAdvance { ms: 1 });
        assert_eq!(
            merge(&req, vec![Reply::ClockAdvance(5), Reply::ClockAdvance(9)]).unwrap(),
            Reply::ClockAdvance(9)
        );
        let req = Request::EnvelopeRefundsAck(rush_protocol::cmd::EnvelopeRefundsAck {
            cursor: RefundCursor::START,
        });
        assert_eq!(
            merge(
                &req,
                vec![Reply::EnvelopeRefundsAck(2), Reply::EnvelopeRefundsAck(3)]
            )
            .unwrap(),
            Reply::EnvelopeRefundsAck(5)
        );
        let req = Request::Compact(rush_protocol::cmd::Compact {});
        assert_eq!(
            merge(&req, vec![Reply::Compact(()), Reply::Compact(())]).unwrap(),
            Reply::Compact(())
        );
    }

    #[test]
    fn what_is_safe_to_resend() {
        use rush_protocol::cmd::{EnvelopeCreate, IncrBy, LinkShorten};
        assert!(!retry_safe(&Request::IncrBy(IncrBy {
            key: "k".into(),
            delta: 1
        })));
        let mut create = EnvelopeCreate::new("s", 10, 1);
        assert!(!retry_safe(&Request::EnvelopeCreate(create.clone())));
        create.idempotency_key = Some("k".into());
        assert!(retry_safe(&Request::EnvelopeCreate(create)));
        let mut shorten = LinkShorten::new("https://e.com");
        assert!(!retry_safe(&Request::LinkShorten(shorten.clone())));
        shorten.reuse = true;
        assert!(retry_safe(&Request::LinkShorten(shorten)));
    }
}
