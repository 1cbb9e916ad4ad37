//! LINK_SHORTEN: one URL → a generated code (or a custom alias).

use super::record::{LinkRecord, FLAG_ALIAS, FLAG_DROP_QUERY, FLAG_PERMANENT, FLAG_REUSE_INDEXED};
use super::{expiry, Links};
use crate::kv::storage_error;
use crate::segments::Segments;
use crate::shard::txn::Txn;
use crate::storage::keys;
use crate::storage::keys::kind;
use crate::storage::value::{self, Stored};
use rush_protocol::cmd::links::code::generated_parts;
use rush_protocol::cmd::{LinkShorten, ShortenReply};
use rush_protocol::{link_slot, parts_slot, ErrorCode, Reply, RushError};

impl Links {
    pub(super) fn shorten(
        &mut self,
        r: &LinkShorten,
        now: u64,
        routed: Option<u16>,
        txn: &mut Txn,
        segments: &mut Segments,
    ) -> Result<Reply, RushError> {
        self.rules.check_target("url", &r.url)?;
        for (field, app) in [("ios url", &r.ios), ("android url", &r.android)] {
            if let Some(u) = app {
                self.rules.check_app(field, u)?;
            }
        }
        let ttl_ms = self.ttl(r.ttl_ms);
        let expires_at = expiry(now, ttl_ms);
        let mut record = LinkRecord {
            flags: if r.permanent { FLAG_PERMANENT } else { 0 },
            created_at: now,
            ttl_ms,
            account: r.account.to_vec(),
            target: r.url.clone(),
            ios: r.ios.clone(),
            android: r.android.clone(),
        };
        record.set(FLAG_DROP_QUERY, r.drop_query);
        if let Some(alias) = &r.alias {
            record.set(FLAG_ALIAS, true);
            return self.create_alias(alias, &record, expires_at, now, txn);
        }

        // Runs in this slot (the request's route, already worked out for a
        // request read from a connection: hashing the URL again was 3 % of a
        // shorten); the code is issued here.
        let slot = routed.unwrap_or_else(|| parts_slot(&[&r.account, r.url.as_bytes()]));
        debug_assert_eq!(slot, parts_slot(&[&r.account, r.url.as_bytes()]));
        let reuse_key = r
            .reuse
            .then(|| keys::link_reuse(slot, &r.account, r.url.as_bytes()));
        if let Some(key) = &reuse_key {
            if let Some(found) = self.find_reuse(slot, key, r, now, txn)? {
                return Ok(Reply::LinkShorten(found));
            }
        }
        let len = match r.length {
            0 => self.cfg.default_length,
            n => n,
        };
        let issued = self
            .issuer
            .issue(slot, len, now, txn, segments, &self.metrics.links)?;
        if let Some(key) = reuse_key {
            record.set(FLAG_REUSE_INDEXED, true);
            txn.put(
                key,
                value::encode(kind::LINK_REUSE, expires_at, issued.code.as_bytes()),
            );
        }
        self.store_new(slot, &issued, &record, expires_at, txn);
        let code = issued.code.as_str().to_string();
        Ok(Reply::LinkShorten(ShortenReply {
            short_url: self.short_url(&code),
            code,
            reused: false,
            expires_at,
        }))
    }

    /// The live link an earlier reuse-shorten of (account, url) made.
    fn find_reuse(
        &self,
        slot: u16,
        key: &[u8],
        r: &LinkShorten,
        now: u64,
        txn: &Txn,
    ) -> Result<Option<ShortenReply>, RushError> {
        let Some(raw) = txn.get(key).map_err(storage_error)? else {
            return Ok(None);
        };
        let stored = Stored::decode(&raw).map_err(super::corrupt)?;
        if !stored.is_live(now) {
            return Ok(None);
        }
        let code = String::from_utf8_lossy(stored.payload).into_owned();
        // The index may be stale (the link was updated or its code recycled):
        // only a live link with this very account and target counts.
        let Some(link) = self.load(slot, code.as_bytes(), now, txn)? else {
            return Ok(None);
        };
        if link.record.target != r.url || link.record.account != r.account[..] {
            return Ok(None);
        }
        Ok(Some(ShortenReply {
            short_url: self.short_url(&code),
            code,
            reused: true,
            expires_at: link.expires_at,
        }))
    }

    /// A custom alias: CONFLICT if any live link (alias or generated code)
    /// has that code. An alias shaped like a generated code reserves that
    /// code's index so the issuer never hands it out.
    fn create_alias(
        &mut self,
        alias: &str,
        record: &LinkRecord,
        expires_at: u64,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let code = alias.as_bytes();
        let slot = link_slot(code);
        let key = keys::link(slot, code);
        if let Some(raw) = txn.get(&key).map_err(storage_error)? {
            if value::expiry_of(&raw).is_some_and(|at| value::is_live(at, now)) {
                return Err(RushError::new(
                    ErrorCode::Conflict,
                    format!("{alias:?} is taken"),
                ));
            }
            // An expired link had this code: its leftovers go.
            txn.delete(keys::link_stats(slot, code));
        }
        self.visits.forget(code);
        txn.put(key, value::encode(kind::LINK, expires_at, &record.encode()));
        txn.require_sync();
        if let Some((s, len, index)) = generated_parts(code) {
            self.issuer.reserve(s, len, index, alias, txn)?;
        }
        self.metrics.links.issued_alias.inc();
        Ok(Reply::LinkShorten(ShortenReply {
            code: alias.to_string(),
            short_url: self.short_url(alias),
            reused: false,
            expires_at,
        }))
    }
}
