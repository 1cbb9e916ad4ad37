//! Red envelope keys.
//!
//! Keys ordered (slot, day of month, id): one slot's envelopes of one day of
//! month are one key range, and an envelope's grabs sit right behind it, so a
//! load or an audit reads an envelope and its grabs in one forward scan.
//! Within (slot, day) ids grow with creation time (they come from the slot's
//! sequence), so the days of two months that share a day of month are two
//! consecutive id ranges: retention cuts them apart at the first id of the
//! later day (see `ENVELOPE_DAY`).

use super::{ks, rest_in, slot_range, KeyBuf};

/// After the id: the envelope record itself.
pub const RECORD: u8 = 0x00;
/// After the id: a grab, followed by the user.
pub const GRAB: u8 = 0x01;

/// `slot | ENVELOPE | day | id | RECORD`
pub fn record(slot: u16, day: u8, id: u64) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE)
        .u8(day)
        .u64(id)
        .u8(RECORD)
        .build()
}

/// [`record`] written into `out` (no allocation: a grab's key looked at
/// ahead of its turn).
pub fn record_into(out: &mut Vec<u8>, slot: u16, day: u8, id: u64) {
    out.clear();
    out.extend_from_slice(&super::slot_prefix(slot));
    out.push(ks::ENVELOPE);
    out.push(day);
    out.extend_from_slice(&id.to_be_bytes());
    out.push(RECORD);
}

/// `slot | ENVELOPE | day | id | GRAB | user`
pub fn grab(slot: u16, day: u8, id: u64, user: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE)
        .u8(day)
        .u64(id)
        .u8(GRAB)
        .tail(user)
        .build()
}

/// Bytes before the user in a grab key.
pub const GRAB_USER_OFFSET: usize = super::PREFIX_LEN + 1 + 8 + 1;

/// What a key of the `ENVELOPE` keyspace names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvelopeKey<'a> {
    /// An envelope's record: its day of month and id.
    Record { day: u8, id: u64 },
    /// One grab of envelope `id` (of day `day`) by `user`.
    Grab { day: u8, id: u64, user: &'a [u8] },
}

/// Decode a key of the `ENVELOPE` keyspace (the inverse of [`record`] and
/// [`grab`]); `None` for any other key.
pub fn parse(raw: &[u8]) -> Option<EnvelopeKey<'_>> {
    let (&day, rest) = rest_in(raw, ks::ENVELOPE)?.split_first()?;
    let (id, rest) = rest.split_first_chunk::<8>()?;
    let id = u64::from_be_bytes(*id);
    match rest.split_first()? {
        (&RECORD, []) => Some(EnvelopeKey::Record { day, id }),
        (&GRAB, user) => Some(EnvelopeKey::Grab { day, id, user }),
        _ => None,
    }
}

/// `[start, end)` of one envelope: its record, then its grabs.
pub fn envelope_range(slot: u16, day: u8, id: u64) -> (Vec<u8>, Vec<u8>) {
    let start = KeyBuf::new(slot, ks::ENVELOPE).u8(day).u64(id).build();
    let end = match id.checked_add(1) {
        Some(next) => KeyBuf::new(slot, ks::ENVELOPE).u8(day).u64(next).build(),
        None => day_id_end(slot, day),
    };
    (start, end)
}

/// Where envelope `id` of `day` starts: everything of the day with a
/// smaller id sorts before it.
pub fn day_from_id(slot: u16, day: u8, id: u64) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE).u8(day).u64(id).build()
}

/// The start of `day`'s range in `slot`.
pub fn day_start(slot: u16, day: u8) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE).u8(day).build()
}

/// The end (exclusive) of `day`'s range in `slot`.
pub fn day_id_end(slot: u16, day: u8) -> Vec<u8> {
    match day.checked_add(1) {
        Some(next) => KeyBuf::new(slot, ks::ENVELOPE).u8(next).build(),
        None => KeyBuf::new(slot, ks::ENVELOPE + 1).build(),
    }
}

/// `slot | ENVELOPE_REFUND | stamp | id`: one unacknowledged refund.
pub fn refund(slot: u16, stamp: u64, id: u64) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE_REFUND)
        .u64(stamp)
        .u64(id)
        .build()
}

/// `(stamp, id)` of a refund key.
pub fn parse_refund(raw: &[u8]) -> Option<(u64, u64)> {
    two_u64(rest_in(raw, ks::ENVELOPE_REFUND)?)
}

/// Exactly two big-endian `u64`s.
fn two_u64(rest: &[u8]) -> Option<(u64, u64)> {
    let (a, b) = rest.split_first_chunk::<8>()?;
    let b: [u8; 8] = b.try_into().ok()?;
    Some((u64::from_be_bytes(*a), u64::from_be_bytes(b)))
}

/// `slot | ENVELOPE_PENDING | expires_at | id`: an open envelope.
pub fn pending(slot: u16, expires_at: u64, id: u64) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE_PENDING)
        .u64(expires_at)
        .u64(id)
        .build()
}

/// `(expires_at, id)` of a pending key.
pub fn parse_pending(raw: &[u8]) -> Option<(u64, u64)> {
    two_u64(rest_in(raw, ks::ENVELOPE_PENDING)?)
}

/// `slot | ENVELOPE_DAY | days since the epoch (u32)`.
pub fn day_marker(slot: u16, epoch_day: u32) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE_DAY)
        .tail(&epoch_day.to_be_bytes())
        .build()
}

pub fn parse_day_marker(raw: &[u8]) -> Option<u32> {
    let day: [u8; 4] = rest_in(raw, ks::ENVELOPE_DAY)?.try_into().ok()?;
    Some(u32::from_be_bytes(day))
}

/// `slot | ENVELOPE_IDEMPOTENCY | sender (u16 length) | key`
pub fn idempotency(slot: u16, sender: &[u8], key: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::ENVELOPE_IDEMPOTENCY)
        .part(sender)
        .tail(key)
        .build()
}

/// Every envelope key of `slot`, all keyspaces (tests, migration).
pub fn everything(slot: u16) -> (Vec<u8>, Vec<u8>) {
    let (start, _) = super::keyspace_range(slot, ks::ENVELOPE);
    let (_, end) = super::keyspace_range(slot, ks::ENVELOPE_IDEMPOTENCY);
    debug_assert!(end <= slot_range(slot).1);
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_keys_group_by_slot_day_then_id() {
        let rec = record(7, 5, 1000);
        let g = grab(7, 5, 1000, b"zed");
        let next = record(7, 5, 1001);
        let (start, end) = envelope_range(7, 5, 1000);
        // An envelope's grabs follow its record, before the next envelope.
        assert!(start <= rec && rec < g && g < end && end <= next);
        assert_eq!(&g[GRAB_USER_OFFSET..], b"zed");
        // A day is one range; days of a slot in order; slots first.
        assert!(day_start(7, 5) <= rec && rec < day_id_end(7, 5));
        assert!(day_id_end(7, 5) <= day_start(7, 6));
        assert!(record(7, 31, u64::MAX) < day_id_end(7, 31));
        assert!(day_id_end(7, 31) <= refund(7, 0, 0));
        assert!(record(7, 31, 0) < record(8, 1, 0));
        // Cutting a day at an id splits older ids from newer ones.
        assert!(record(7, 5, 999) < day_from_id(7, 5, 1000));
        assert!(day_from_id(7, 5, 1000) <= record(7, 5, 1000));
        assert_eq!(parse_refund(&refund(3, 11, 22)), Some((11, 22)));
        assert_eq!(parse_pending(&pending(3, 11, 22)), Some((11, 22)));
        assert_eq!(parse_day_marker(&day_marker(3, 20_000)), Some(20_000));
        let (s, e) = everything(7);
        for k in [rec, refund(7, 1, 1), pending(7, 1, 1), day_marker(7, 1)] {
            assert!(s <= k && k < e);
        }
        assert!(idempotency(7, b"s", b"k") < e);
    }

    #[test]
    fn a_record_key_written_in_place_is_the_same_key() {
        let mut out = b"left over".to_vec();
        record_into(&mut out, 7, 5, 1000);
        assert_eq!(out, record(7, 5, 1000));
    }

    #[test]
    fn envelope_keys_parse_back() {
        assert_eq!(
            parse(&record(7, 5, 1000)),
            Some(EnvelopeKey::Record { day: 5, id: 1000 })
        );
        let g = grab(7, 5, 1000, b"zed");
        assert_eq!(
            parse(&g),
            Some(EnvelopeKey::Grab {
                day: 5,
                id: 1000,
                user: b"zed"
            })
        );
        // Cut short, another keyspace, an unknown tag, bytes after a record.
        assert_eq!(parse(&g[..GRAB_USER_OFFSET - 1]), None);
        assert_eq!(parse(&refund(7, 5, 1000)), None);
        let mut tagged = record(7, 5, 1000);
        *tagged.last_mut().unwrap() = 9;
        assert_eq!(parse(&tagged), None);
        let mut longer = record(7, 5, 1000);
        longer.push(0);
        assert_eq!(parse(&longer), None);
        // Each parser takes its own keyspace only, and whole keys only.
        assert_eq!(parse_refund(&pending(3, 11, 22)), None);
        assert_eq!(parse_pending(&refund(3, 11, 22)), None);
        assert_eq!(parse_refund(&refund(3, 11, 22)[..18]), None);
        assert_eq!(parse_day_marker(&refund(3, 11, 22)), None);
    }
}
