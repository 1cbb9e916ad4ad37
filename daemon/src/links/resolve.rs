//! LINK_RESOLVE: the target, a counted visit and the sliding expiry.

use super::record::{FLAG_DROP_QUERY, FLAG_PERMANENT, FLAG_REUSE_INDEXED};
use super::{no_link, with_expiry, Links};
use crate::shard::txn::Txn;
use crate::storage::keys;
use crate::storage::keys::kind;
use crate::storage::value;
use rush_protocol::cmd::{LinkResolve, ResolveReply};
use rush_protocol::{Reply, RushError};

impl Links {
    pub(super) fn resolve(
        &mut self,
        r: &LinkResolve,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let code = r.code.as_bytes();
        let Some(link) = self.find(&r.code, now, txn)? else {
            self.metrics.links.resolve_miss.inc();
            return Err(no_link(&r.code));
        };
        let (slot, rec) = (link.slot, &link.record);
        let mut expires_at = link.expires_at;
        if rec.ttl_ms > 0 {
            // Slide: the visit pushes the expiry to now + TTL, but the link is
            // rewritten only when that moves it by more than the interval (or
            // half the TTL, for short TTLs), so a hot link costs one write per
            // interval. Not synced: a lost slide is redone by the next visit.
            let fresh = now.saturating_add(rec.ttl_ms);
            let interval = self.slide_ms.min(rec.ttl_ms / 2);
            if expires_at < fresh.saturating_sub(interval) {
                txn.put(keys::link(slot, code), with_expiry(&link.raw, fresh));
                if rec.has(FLAG_REUSE_INDEXED) {
                    let key = keys::link_reuse(slot, &rec.account, rec.target.as_bytes());
                    if self.reuse_entry_points_to(&key, code, txn)? {
                        txn.put(key, value::encode(kind::LINK_REUSE, fresh, code));
                    }
                }
                expires_at = fresh;
                self.metrics.links.slides.inc();
            }
        }
        self.visits.record(slot, code, now, expires_at, txn)?;
        self.metrics.links.resolve_hit.inc();
        let rec = link.record;
        Ok(Reply::LinkResolve(ResolveReply {
            permanent: rec.has(FLAG_PERMANENT),
            drop_query: rec.has(FLAG_DROP_QUERY),
            target: rec.target,
            ios: rec.ios,
            android: rec.android,
            expires_at,
        }))
    }
}
