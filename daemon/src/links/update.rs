//! LINK_UPDATE: new target, TTL, app URLs, redirect kind or query
//! passthrough — durably.

use super::record::{FLAG_DROP_QUERY, FLAG_PERMANENT, FLAG_REUSE_INDEXED};
use super::visits::{load_stats, store_stats};
use super::{expiry, Links};
use crate::shard::txn::Txn;
use crate::storage::keys;
use crate::storage::keys::kind;
use crate::storage::value;
use rush_protocol::cmd::{AppLinkChange, LinkUpdate};
use rush_protocol::{Reply, RushError};

impl Links {
    pub(super) fn update(
        &mut self,
        r: &LinkUpdate,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let code = r.code.as_bytes();
        let link = self.live(&r.code, now, txn)?;
        let slot = link.slot;
        if let Some(url) = &r.url {
            self.rules.check_target("url", url)?;
        }
        for (field, change) in [("ios url", &r.ios), ("android url", &r.android)] {
            if let AppLinkChange::Set(u) = change {
                self.rules.check_app(field, u)?;
            }
        }
        let mut rec = link.record;
        let reuse_key = rec
            .has(FLAG_REUSE_INDEXED)
            .then(|| keys::link_reuse(slot, &rec.account, rec.target.as_bytes()));
        if let Some(url) = &r.url {
            if *url != rec.target {
                // The reuse index maps (account, old target) here; it no
                // longer holds. (The new target's entry would live in another
                // slot, so an updated link is not found by reuse.)
                if let Some(key) = &reuse_key {
                    if self.reuse_entry_points_to(key, code, txn)? {
                        txn.delete(key.clone());
                    }
                }
                rec.set(FLAG_REUSE_INDEXED, false);
                rec.target = url.clone();
            }
        }
        for (slot_ref, change) in [(&mut rec.ios, &r.ios), (&mut rec.android, &r.android)] {
            match change {
                AppLinkChange::Keep => {}
                AppLinkChange::Clear => *slot_ref = None,
                AppLinkChange::Set(u) => *slot_ref = Some(u.clone()),
            }
        }
        if let Some(p) = r.permanent {
            rec.set(FLAG_PERMANENT, p);
        }
        if let Some(d) = r.drop_query {
            rec.set(FLAG_DROP_QUERY, d);
        }
        let mut expires_at = link.expires_at;
        if let Some(ttl) = r.ttl_ms {
            rec.ttl_ms = ttl;
            expires_at = expiry(now, ttl);
            // Statistics and the reuse entry expire with the link.
            let stats = load_stats(slot, code, txn)?;
            if stats.total > 0 {
                store_stats(slot, code, &stats, expires_at, txn);
            }
            self.visits.set_expiry(code, expires_at);
            if rec.has(FLAG_REUSE_INDEXED) {
                if let Some(key) = reuse_key {
                    if self.reuse_entry_points_to(&key, code, txn)? {
                        txn.put(key, value::encode(kind::LINK_REUSE, expires_at, code));
                    }
                }
            }
        }
        txn.put(
            keys::link(slot, code),
            value::encode(kind::LINK, expires_at, &rec.encode()),
        );
        txn.require_sync();
        Ok(Reply::LinkUpdate(expires_at))
    }
}
