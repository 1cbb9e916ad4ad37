use super::{read_id, read_name, read_user, OrderItem};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_ID, MAX_ORDER_ITEMS};
use crate::{key_slot, RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `LIMIT_RELEASE policy user order_id` → the items given back.
///
/// A cancelled or refunded order gives its counts back, once: counts of
/// windows that have since ended are not touched (they are gone already).
/// Releasing it again answers the same items with `replayed` set and gives
/// nothing back. An order id that was never acquired (or is no longer
/// remembered) is NOT_FOUND.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitRelease {
    pub policy: String,
    pub user: Bytes,
    pub order_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReleaseReply {
    /// The order had been released before; nothing was given back now.
    pub replayed: bool,
    /// The order's items and quantities.
    pub items: Vec<OrderItem>,
}

impl LimitRelease {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(&self.user)))
    }
}

impl Wire for LimitRelease {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.policy.as_bytes());
        out.put_lp(&self.user);
        out.put_lp(self.order_id.as_bytes());
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LimitRelease {
            policy: read_name(r, "policy")?,
            user: read_user(r)?,
            order_id: read_id(r, "order id")?,
        })
    }
}

impl Wire for ReleaseReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_bool(self.replayed);
        out.put_count(self.items.len());
        for i in &self.items {
            out.put_lp(i.item.as_bytes());
            out.put_u64(i.qty);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReleaseReply {
            replayed: r.bool("replayed")?,
            items: r.list("items", MAX_ORDER_ITEMS, 12, |r| {
                Ok(OrderItem {
                    item: r.string("item", MAX_ID)?,
                    qty: r.u64("quantity")?,
                })
            })?,
        })
    }
}
