//! ENVELOPE_CREATE.

use super::days::{day_of_month, epoch_day, DAY_MS};
use super::record::{self, EnvelopeRecord, IdempotencyRecord};
use super::{corrupt, storage_error, Envelopes, Live};
use crate::segments::{Segments, SeqSpec};
use crate::shard::txn::Txn;
use crate::storage::keys;
use hashbrown::HashMap;
use rush_protocol::cmd::{envelope_id, EnvelopeCreate, EnvelopeCreateReply, MAX_ENVELOPE_SEQ};
use rush_protocol::{key_slot, ErrorCode, Reply, RushError};

impl Envelopes {
    pub(super) fn create(
        &mut self,
        r: &EnvelopeCreate,
        now: u64,
        txn: &mut Txn,
        segments: &mut Segments,
    ) -> Result<Reply, RushError> {
        let cfg = &self.cfg;
        let bad = |m: String| Err(RushError::bad_request(m));
        if r.count == 0 {
            return bad("count must be at least 1".into());
        }
        if r.count > cfg.max_count {
            return bad(format!(
                "count {} is over this node's limit of {}",
                r.count, cfg.max_count
            ));
        }
        if r.total_cents < r.count as u64 {
            return bad(format!(
                "total of {} cents can't give each of {} shares a cent",
                r.total_cents, r.count
            ));
        }
        if r.total_cents > cfg.max_total_cents {
            return bad(format!(
                "total of {} cents is over this node's limit of {}",
                r.total_cents, cfg.max_total_cents
            ));
        }
        let expires_in = match r.expires_in_ms {
            0 => cfg.default_expiry_secs * 1000,
            ms => ms,
        };
        if expires_in > cfg.max_expiry_secs * 1000 {
            return bad(format!(
                "expiry of {expires_in} ms is over this node's limit of {} s",
                cfg.max_expiry_secs
            ));
        }
        let slot = key_slot(&r.sender);
        let idempotency = match &r.idempotency_key {
            Some(key) => {
                let k = keys::envelope::idempotency(slot, &r.sender, key);
                let stored = txn.get(&k).map_err(storage_error)?;
                if let Some(raw) = stored {
                    if let Some(prev) = IdempotencyRecord::decode(&raw, now).map_err(corrupt)? {
                        let same = prev.total == r.total_cents
                            && prev.count == r.count
                            && prev.mode == r.mode
                            && prev.expires_in == expires_in;
                        if !same {
                            return Err(RushError::new(
                                ErrorCode::Conflict,
                                "this idempotency key made an envelope with other arguments",
                            ));
                        }
                        return Ok(Reply::EnvelopeCreate(EnvelopeCreateReply {
                            id: prev.id,
                            expires_at_ms: prev.expires_at,
                        }));
                    }
                }
                Some(k)
            }
            None => None,
        };

        let spec = SeqSpec {
            kind: keys::seq::ENVELOPE_ID,
            step: self.cfg.id_step,
            limit: MAX_ENVELOPE_SEQ,
        };
        let seq = segments
            .next(slot, &spec, txn)
            .map_err(storage_error)?
            .ok_or_else(|| {
                RushError::new(ErrorCode::Exhausted, "this slot has used every envelope id")
            })?;
        let day = epoch_day(now);
        let id = envelope_id(seq, day_of_month(day), slot)
            .ok_or_else(|| RushError::internal("envelope id out of range"))?;
        let expires_at = now.saturating_add(expires_in);

        if !self.days.contains(slot, day) {
            // The first envelope of this slot's day: where the day starts in
            // its day-of-month bucket (retention cuts there).
            txn.put(
                keys::envelope::day_marker(slot, day),
                record::encode_day(id),
            );
            self.days.insert(slot, day, id);
        }
        let rec = EnvelopeRecord {
            sender: r.sender.as_ref().into(),
            mode: r.mode,
            total: r.total_cents,
            count: r.count,
            remaining: r.total_cents,
            remaining_count: r.count,
            created_at: now,
            expires_at,
            refunded: 0,
            refund_stamp: 0,
            refunded_at: 0,
        };
        txn.put(
            keys::envelope::record(slot, day_of_month(day), id),
            rec.encode(),
        );
        txn.put(
            keys::envelope::pending(slot, expires_at, id),
            record::encode_pending(r.total_cents),
        );
        if let Some(k) = idempotency {
            let remember = IdempotencyRecord {
                id,
                expires_at,
                total: r.total_cents,
                count: r.count,
                mode: r.mode,
                expires_in,
            };
            // Retries come within minutes; a day past the expiry is plenty,
            // and the TTL filter drops the key after that.
            txn.put(k, remember.encode(expires_at.saturating_add(DAY_MS)));
        }
        txn.require_sync();

        self.cache.insert(
            id,
            Live {
                rec,
                grabs: HashMap::new(),
                complete: true,
                touched: now,
            },
        );
        self.expiries.insert((expires_at, id));
        self.money_in(r.total_cents);
        self.metrics.envelopes.creates.inc();
        Ok(Reply::EnvelopeCreate(EnvelopeCreateReply {
            id,
            expires_at_ms: expires_at,
        }))
    }
}
