//! An order's record: what was counted, where, and what was answered, so a
//! replay answers the same and a release gives back exactly that.
//!
//! Value (after the 9-byte header, kind `LIMIT_ORDER`; it expires after the
//! policy's order retention):
//! `u8 state (1 acquired, 2 released) | u16 n | n × (u16 len, item, u64 qty)
//! (sorted by item) | u16 m | m × (u16 len, rule, u8 scope, u64 window id) |
//! u32 len, the first answer's AcquireReply body`.

use super::counter::{corrupt, storage_error};
use crate::shard::known::KeyFilter as Known;
use crate::shard::txn::Txn;
use crate::storage::keys;
use crate::storage::keys::kind;
use crate::storage::value::{self, Corrupt, Cursor, Stored};
use bytes::{BufMut, Bytes, BytesMut};
use rush_protocol::cmd::{AcquireReply, OrderItem, Scope};
use rush_protocol::{key_slot, RushError, Wire};

const ACQUIRED: u8 = 1;
const RELEASED: u8 = 2;

/// One rule's share of an order: which counters it touched (by scope) and in
/// which window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touched {
    pub rule: String,
    pub scope: Scope,
    pub window: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    pub released: bool,
    pub expires_at: u64,
    /// Sorted by item, so two orders with the same lines compare equal.
    pub items: Vec<OrderItem>,
    pub touched: Vec<Touched>,
    /// The first answer, encoded (`replayed` false).
    pub reply: Bytes,
}

/// An order's lines sorted by item: how records store and compare them.
pub fn sorted_items(items: &[OrderItem]) -> Vec<OrderItem> {
    let mut v = items.to_vec();
    v.sort_unstable_by(|a, b| a.item.cmp(&b.item));
    v
}

/// Where one order of a user under a policy is kept, all in the user's
/// slot: the order's record, and the user's book under the policy; and the
/// hashes the shard's key filter knows them by.
pub struct OrderKeys {
    pub record: Vec<u8>,
    pub book: Vec<u8>,
    pub hashes: KeyHashes,
}

#[derive(Clone, Copy)]
pub struct KeyHashes {
    pub record: u64,
    pub book: u64,
}

impl OrderKeys {
    pub fn of(user: &[u8], policy: &str, order_id: &str, known: &Known) -> OrderKeys {
        let slot = key_slot(user);
        let record = keys::limit_order(slot, user, policy, order_id);
        let book = keys::limit_book(slot, user, policy.as_bytes());
        let hashes = KeyHashes {
            record: known.hash(&record),
            book: known.hash(&book),
        };
        OrderKeys {
            record,
            book,
            hashes,
        }
    }

    /// The order's record, unless the filter knows the shard holds none.
    pub fn load_record(
        &self,
        known: &Known,
        txn: &Txn,
        now: u64,
    ) -> Result<Option<OrderRecord>, RushError> {
        if !known.may_hold(self.hashes.record) {
            return Ok(None);
        }
        OrderRecord::load(txn, &self.record, now)
    }

    /// The user's book as stored (to [`Book::decode`](super::book::Book::decode)), `None` when there
    /// is none (or the filter knows the shard holds none).
    pub fn load_book(&self, known: &Known, txn: &Txn) -> Result<Option<Bytes>, RushError> {
        if !known.may_hold(self.hashes.book) {
            return Ok(None);
        }
        txn.get(&self.book).map_err(storage_error)
    }
}

impl KeyHashes {
    /// The record and the book are being written.
    pub fn written(self, known: &mut Known) {
        known.add(self.record);
        known.add(self.book);
    }
}

/// An order's lines as the rules count them.
pub struct Lines<'a> {
    items: &'a [OrderItem],
    /// The whole order's quantity (what a total rule counts).
    total: u64,
}

impl<'a> Lines<'a> {
    pub fn new(items: &'a [OrderItem]) -> Lines<'a> {
        Lines {
            items,
            total: items.iter().map(|i| i.qty).sum(),
        }
    }

    /// The counts a rule of `scope` counts the order in, as (item,
    /// quantity): one per line for an item rule, one with item "" and the
    /// whole quantity for a total rule.
    pub fn counts(&self, scope: Scope) -> impl Iterator<Item = (&'a str, u64)> + '_ {
        let lines = match scope {
            Scope::Item => self.items.len(),
            Scope::Total => 1,
        };
        (0..lines).map(move |line| match scope {
            Scope::Item => (self.items[line].item.as_str(), self.items[line].qty),
            Scope::Total => ("", self.total),
        })
    }
}

impl OrderRecord {
    pub fn load(txn: &Txn, key: &[u8], now: u64) -> Result<Option<OrderRecord>, RushError> {
        match txn.get(key).map_err(storage_error)? {
            None => Ok(None),
            Some(raw) => OrderRecord::decode(&raw, now).map_err(corrupt),
        }
    }

    /// The first answer again.
    pub fn first_reply(&self) -> Result<AcquireReply, RushError> {
        AcquireReply::decode_body(self.reply.clone()).map_err(corrupt)
    }

    pub fn decode(raw: &[u8], now: u64) -> Result<Option<OrderRecord>, Corrupt> {
        let s = Stored::decode(raw)?;
        if s.kind != kind::LIMIT_ORDER {
            return Err(Corrupt(format!("limit order has value kind {}", s.kind)));
        }
        if !s.is_live(now) {
            return Ok(None);
        }
        let mut p = Cursor::new(s.payload, "a limit order");
        let released = match p.u8()? {
            ACQUIRED => false,
            RELEASED => true,
            b => return Err(Corrupt(format!("limit order state {b}"))),
        };
        let n = p.u16()?;
        let mut items = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let item = p.string()?;
            items.push(OrderItem {
                item,
                qty: p.u64()?,
            });
        }
        let m = p.u16()?;
        let mut touched = Vec::with_capacity(m as usize);
        for _ in 0..m {
            let rule = p.string()?;
            let scope = match p.u8()? {
                0 => Scope::Item,
                1 => Scope::Total,
                b => return Err(Corrupt(format!("limit order scope {b}"))),
            };
            touched.push(Touched {
                rule,
                scope,
                window: p.u64()?,
            });
        }
        let len = p.u32()? as usize;
        let reply = Bytes::copy_from_slice(p.take(len)?);
        p.end()?;
        Ok(Some(OrderRecord {
            released,
            expires_at: s.expires_at,
            items,
            touched,
            reply,
        }))
    }

    pub fn encode(&self) -> Bytes {
        encode_record(
            self.released,
            self.expires_at,
            &self.items.iter().collect::<Vec<_>>(),
            self.touched
                .iter()
                .map(|t| (t.rule.as_str(), t.scope, t.window)),
            |out| out.extend_from_slice(&self.reply),
        )
    }
}

/// A record's stored form, from its parts: `items` sorted by item, what
/// each rule `touched` (rule, scope, window id), and `reply` writing the
/// first answer's body. An acquire writes its record so, without making
/// an [`OrderRecord`] (or a copy of its answer) first.
pub fn encode_record<'t>(
    released: bool,
    expires_at: u64,
    items: &[&OrderItem],
    touched: impl ExactSizeIterator<Item = (&'t str, Scope, u64)>,
    reply: impl FnOnce(&mut BytesMut),
) -> Bytes {
    let mut p = BytesMut::with_capacity(value::HEADER + 160);
    value::put_header(&mut p, kind::LIMIT_ORDER, expires_at);
    p.put_u8(if released { RELEASED } else { ACQUIRED });
    p.put_u16(items.len() as u16);
    for i in items {
        put_str(&mut p, &i.item);
        p.put_u64(i.qty);
    }
    p.put_u16(touched.len() as u16);
    for (rule, scope, window) in touched {
        put_str(&mut p, rule);
        p.put_u8(match scope {
            Scope::Item => 0,
            Scope::Total => 1,
        });
        p.put_u64(window);
    }
    // The answer's length goes before it once it is written.
    let at = p.len();
    p.put_u32(0);
    reply(&mut p);
    let len = (p.len() - at - 4) as u32;
    p[at..at + 4].copy_from_slice(&len.to_be_bytes());
    p.freeze()
}

fn put_str(p: &mut BytesMut, s: &str) {
    p.put_u16(s.len() as u16);
    p.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use rush_protocol::cmd::Allowance;

    #[test]
    fn record_round_trips() {
        let reply = AcquireReply {
            replayed: false,
            released: false,
            allowances: vec![Allowance {
                rule: "total".into(),
                item: String::new(),
                count: 2,
                limit: 5,
                resets_at_ms: 99,
            }],
        };
        let rec = OrderRecord {
            released: false,
            expires_at: 1000,
            items: sorted_items(&[OrderItem::new("b", 1), OrderItem::new("a", 2)]),
            touched: vec![Touched {
                rule: "total".into(),
                scope: Scope::Total,
                window: 7,
            }],
            reply: {
                let mut b = BytesMut::new();
                reply.encode(&mut b);
                b.freeze()
            },
        };
        assert_eq!(rec.items[0].item, "a");
        let raw = rec.encode();
        let back = OrderRecord::decode(&raw, 999).unwrap().unwrap();
        assert_eq!(back, rec);
        assert_eq!(back.first_reply().unwrap(), reply);
        assert_eq!(OrderRecord::decode(&raw, 1000).unwrap(), None);
        assert!(OrderRecord::decode(&raw[..raw.len() - 1], 0).is_err());
    }
}
