//! ENVELOPE_AUDIT: check every stored envelope's books against its grabs,
//! its pending entry and the refund stream, straight from storage.
//!
//! Runs on the shard thread (so it sees one consistent state: nothing else
//! writes this shard's column family meanwhile) and reads committed data
//! only — the state before the audit's own group. It stalls the shard for
//! the length of the scan: an admin request, not for the hot path.

use super::record::{self, EnvelopeRecord, GrabRecord, RefundRecord};
use super::{storage_error, Envelopes};
use crate::shard::txn::Txn;
use crate::storage::keys::{self, envelope::EnvelopeKey};
use hashbrown::{HashMap, HashSet};
use rush_protocol::cmd::{envelope_day, envelope_slot, EnvelopeAuditReply};
use rush_protocol::limits::MAX_AUDIT_PROBLEMS;
use rush_protocol::{Reply, RushError};

/// One envelope being checked while its grabs stream past.
struct Open {
    id: u64,
    rec: EnvelopeRecord,
    grabs_sum: u128,
    grabs: u64,
    seqs: HashSet<u32>,
}

struct Audit {
    reply: EnvelopeAuditReply,
}

impl Audit {
    fn problem(&mut self, what: String) {
        self.reply.problem_count += 1;
        if self.reply.problems.len() < MAX_AUDIT_PROBLEMS {
            self.reply.problems.push(what);
        }
    }
}

impl Envelopes {
    pub(super) fn audit(&mut self, txn: &Txn) -> Result<Reply, RushError> {
        let mut a = Audit {
            reply: EnvelopeAuditReply::default(),
        };
        self.audit_shard(txn, &mut a).map_err(storage_error)?;
        Ok(Reply::EnvelopeAudit(a.reply))
    }

    fn audit_shard(&self, txn: &Txn, a: &mut Audit) -> Result<(), crate::storage::StorageError> {
        // Open envelopes' pending entries: id → (expires_at, remaining).
        let mut pending: HashMap<u64, (u64, u64)> = HashMap::new();
        self.scan_keyspace(txn, keys::ks::ENVELOPE_PENDING, |slot, k, v| {
            match (keys::envelope::parse_pending(k), record::decode_pending(v)) {
                (Some((at, id)), Ok(rem)) => {
                    if pending.insert(id, (at, rem)).is_some() {
                        a.problem(format!("envelope {id}: two pending entries"));
                    }
                }
                _ => a.problem(format!("slot {slot}: unreadable pending entry {k:02x?}")),
            }
        })?;
        // Unacknowledged refunds: id → (stamp, amount). One per envelope.
        let mut refunds: HashMap<u64, (u64, u64)> = HashMap::new();
        self.scan_keyspace(txn, keys::ks::ENVELOPE_REFUND, |slot, k, v| {
            match (keys::envelope::parse_refund(k), RefundRecord::decode(v)) {
                (Some((stamp, id)), Ok(r)) => {
                    if r.amount == 0 {
                        a.problem(format!("envelope {id}: refund of 0 cents"));
                    }
                    if refunds.insert(id, (stamp, r.amount)).is_some() {
                        a.problem(format!("envelope {id}: refunded twice"));
                    }
                }
                _ => a.problem(format!("slot {slot}: unreadable refund {k:02x?}")),
            }
        })?;

        // Envelopes, each followed by its grabs.
        let mut current: Option<Open> = None;
        self.scan_keyspace(txn, keys::ks::ENVELOPE, |slot, k, v| {
            let (id, user) = match keys::envelope::parse(k) {
                Some(EnvelopeKey::Grab { id, user, .. }) => (id, user),
                Some(EnvelopeKey::Record { day, id }) => {
                    if let Some(done) = current.take() {
                        finish(done, &mut pending, &refunds, a);
                    }
                    match EnvelopeRecord::decode(v) {
                        Ok(rec) => {
                            if envelope_day(id) != day || envelope_slot(id) != slot {
                                a.problem(format!(
                                    "envelope {id}: stored under slot {slot} day {day}"
                                ));
                            }
                            current = Some(Open {
                                id,
                                rec,
                                grabs_sum: 0,
                                grabs: 0,
                                seqs: HashSet::new(),
                            });
                        }
                        Err(e) => a.problem(format!("envelope {id}: {e}")),
                    }
                    return;
                }
                None => {
                    a.problem(format!("slot {slot}: unreadable envelope key {k:02x?}"));
                    return;
                }
            };
            let user = String::from_utf8_lossy(user);
            let Some(open) = current.as_mut().filter(|o| o.id == id) else {
                a.problem(format!(
                    "envelope {id}: grab by {user:?} without its envelope"
                ));
                return;
            };
            match GrabRecord::decode(v) {
                Ok(g) => {
                    if g.amount == 0 {
                        a.problem(format!("envelope {id}: {user:?} grabbed 0 cents"));
                    }
                    if !open.seqs.insert(g.seq) {
                        a.problem(format!("envelope {id}: two grabs in turn {}", g.seq));
                    }
                    open.grabs_sum += g.amount as u128;
                    open.grabs += 1;
                }
                Err(e) => a.problem(format!("envelope {id}: grab by {user:?}: {e}")),
            }
        })?;
        if let Some(done) = current.take() {
            finish(done, &mut pending, &refunds, a);
        }
        for id in pending.keys() {
            a.problem(format!(
                "envelope {id}: pending entry without an open envelope"
            ));
        }
        Ok(())
    }
}

/// Check one envelope's books once all its grabs were seen.
fn finish(
    o: Open,
    pending: &mut HashMap<u64, (u64, u64)>,
    refunds: &HashMap<u64, (u64, u64)>,
    a: &mut Audit,
) {
    let (id, rec) = (o.id, &o.rec);
    a.reply.envelopes += 1;
    a.reply.grabs += o.grabs;
    let books = o.grabs_sum + rec.refunded as u128 + rec.remaining as u128;
    if books != rec.total as u128 {
        a.problem(format!(
            "envelope {id}: grabs {} + refunded {} + remaining {} != total {}",
            o.grabs_sum, rec.refunded, rec.remaining, rec.total
        ));
    }
    if o.grabs != rec.grabbed() as u64 || rec.remaining_count > rec.count {
        a.problem(format!(
            "envelope {id}: {} grabs stored, books say {} of {}",
            o.grabs,
            rec.grabbed(),
            rec.count
        ));
    }
    if o.seqs.iter().any(|&s| s >= rec.count) {
        a.problem(format!(
            "envelope {id}: a grab's turn is past the share count"
        ));
    }
    let in_pending = pending.remove(&id);
    if rec.settled() {
        if in_pending.is_some() {
            a.problem(format!("envelope {id}: settled but still pending"));
        }
        if rec.remaining != 0 {
            a.problem(format!(
                "envelope {id}: settled with {} cents left",
                rec.remaining
            ));
        }
        if rec.refund_stamp != 0 {
            a.reply.refunded += 1;
            if rec.refunded == 0 {
                a.problem(format!("envelope {id}: refunded 0 cents"));
            }
        } else if rec.refunded != 0 {
            a.problem(format!("envelope {id}: refunded cents without a refund"));
        }
    } else {
        a.reply.open += 1;
        a.reply.in_flight_cents += rec.remaining;
        if rec.remaining < rec.remaining_count as u64 {
            a.problem(format!(
                "envelope {id}: {} cents can't cover {} shares",
                rec.remaining, rec.remaining_count
            ));
        }
        if rec.refunded != 0 {
            a.problem(format!("envelope {id}: open but refunded {}", rec.refunded));
        }
        match in_pending {
            None => a.problem(format!("envelope {id}: open but not pending expiry")),
            Some((at, rem)) if at != rec.expires_at || rem != rec.remaining => a.problem(format!(
                "envelope {id}: pending entry says {rem} cents at {at}, books {} at {}",
                rec.remaining, rec.expires_at
            )),
            Some(_) => {}
        }
    }
    if let Some(&(stamp, amount)) = refunds.get(&id) {
        if stamp != rec.refund_stamp || amount != rec.refunded {
            a.problem(format!(
                "envelope {id}: refund record ({amount} cents, stamp {stamp}) disagrees with the books ({} cents, stamp {})",
                rec.refunded, rec.refund_stamp
            ));
        }
    }
}
