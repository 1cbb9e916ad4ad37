use super::{over_limit_is_invalid, read_id, read_name, read_user, Allowance, ALLOWANCE_MIN};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_ORDER_ITEMS, MAX_ORDER_QTY, MAX_POLICY_RULES};
use crate::{key_slot, RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderItem {
    pub item: String,
    /// 1 ..= `MAX_ORDER_QTY`.
    pub qty: u64,
}

impl OrderItem {
    pub fn new(item: impl Into<String>, qty: u64) -> Self {
        OrderItem {
            item: item.into(),
            qty,
        }
    }
}

/// `LIMIT_ACQUIRE policy user order_id items` → the remaining allowance.
///
/// Runs in the slot of `user` (the `{hashtag}` rule applies to the user
/// string). Checks every rule of the policy for every item; if all pass, every
/// count is recorded in one atomic write (fsynced before the answer unless the
/// policy is relaxed), else nothing is recorded and the answer is LIMITED
/// naming the first failing rule and item. Repeating an order id counts
/// nothing and answers `replayed` with the counts as they are now (and
/// `released` when the order was released since); the same order id with
/// other items is CONFLICT.
///
/// Items are 1–100 distinct ids (no item twice), each with a quantity of
/// 1–1,000,000; anything else is BAD_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitAcquire {
    pub policy: String,
    pub user: Bytes,
    pub order_id: String,
    pub items: Vec<OrderItem>,
}

/// The allowance after the order: per item for each per-item rule (in the
/// order's item order), one entry per total rule, rules in policy order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AcquireReply {
    /// This order id had been acquired before: nothing was counted now, and
    /// the allowances are the current counts of the rules it was counted in.
    pub replayed: bool,
    /// A replayed order that was released since: its counts were given back.
    /// Never set without `replayed`.
    pub released: bool,
    pub allowances: Vec<Allowance>,
}

/// The reply's first byte: how this answer relates to the order id.
const COUNTED: u8 = 0;
const REPLAYED: u8 = 1;
const REPLAYED_RELEASED: u8 = 2;

impl LimitAcquire {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(&self.user)))
    }
}

impl Wire for LimitAcquire {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.policy.as_bytes());
        out.put_lp(&self.user);
        out.put_lp(self.order_id.as_bytes());
        out.put_count(self.items.len());
        for i in &self.items {
            out.put_lp(i.item.as_bytes());
            out.put_u64(i.qty);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let policy = read_name(r, "policy")?;
        let user = read_user(r)?;
        let order_id = read_id(r, "order id")?;
        let items = r
            .list("items", MAX_ORDER_ITEMS, 4 + 8, |r| {
                let item = read_id(r, "item")?;
                let qty = r.u64("quantity")?;
                if qty == 0 || qty > MAX_ORDER_QTY {
                    return Err(DecodeError::invalid(
                        "quantity",
                        format!("{qty} for {item:?} is not within 1..={MAX_ORDER_QTY}"),
                    ));
                }
                Ok(OrderItem { item, qty })
            })
            .map_err(over_limit_is_invalid)?;
        if items.is_empty() {
            return Err(DecodeError::invalid(
                "items",
                "an order needs at least one item",
            ));
        }
        // At most 100 items: the quadratic check is ~5,000 comparisons.
        for (i, it) in items.iter().enumerate() {
            if items[..i].iter().any(|o| o.item == it.item) {
                return Err(DecodeError::invalid(
                    "items",
                    format!("{:?} is listed twice; give one line per item", it.item),
                ));
            }
        }
        Ok(LimitAcquire {
            policy,
            user,
            order_id,
            items,
        })
    }
}

impl Wire for AcquireReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(match (self.replayed, self.released) {
            (false, _) => COUNTED,
            (true, false) => REPLAYED,
            (true, true) => REPLAYED_RELEASED,
        });
        out.put_count(self.allowances.len());
        for a in &self.allowances {
            a.encode(out);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (replayed, released) = match r.u8("replay")? {
            COUNTED => (false, false),
            REPLAYED => (true, false),
            REPLAYED_RELEASED => (true, true),
            b => return Err(DecodeError::invalid("replay", format!("replay byte {b}"))),
        };
        Ok(AcquireReply {
            replayed,
            released,
            allowances: r.list(
                "allowances",
                MAX_POLICY_RULES * MAX_ORDER_ITEMS,
                ALLOWANCE_MIN,
                Allowance::decode,
            )?,
        })
    }
}
