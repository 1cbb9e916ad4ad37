//! How a hash is stored: a header under the key (`kind::HASH_HEAD`: version,
//! field count, bytes; the hash's expiry) and one value per field under
//! `keys::hash_field(slot, key, version, field)`. HSET, HGET, HDEL and
//! HINCRBY touch the header and the fields they name; HLEN reads only the
//! header; HGETALL scans one range of one slot; DEL and EXPIRE rewrite only
//! the header.
//!
//! A hash made on a key gets a random version, so a new hash on the same key
//! never sees an old one's fields. Fields outlive their hash only until
//! compaction: when the header is deleted, overwritten by a string, expired or
//! replaced by a newer version, the compaction filter (`storage::ttl`) drops
//! them.
//!
//! A hash written before per-field storage is one value (`kind::HASH`): it is
//! read as it is, and its first write stores it field by field.

use super::{storage_error, Entry, Kv};
use crate::shard::txn::Txn;
use crate::storage::keys::{self, kind};
use crate::storage::value::{self, Hash};
use bytes::Bytes;
use rush_protocol::limits::MAX_HASH_FIELDS;
use rush_protocol::{ErrorCode, RushError};

/// Most bytes of field names and values one hash holds, so HGETALL's answer
/// stays bounded.
pub const MAX_HASH_BYTES: u64 = 8 << 20;

/// A hash's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// Names this hash's fields (see the module doc).
    pub version: u64,
    pub fields: u32,
    /// Bytes of field names and values.
    pub bytes: u64,
}

const HEAD_LEN: usize = 8 + 4 + 8;

impl Head {
    fn fresh() -> Head {
        Head {
            version: rand::random(),
            fields: 0,
            bytes: 0,
        }
    }

    pub fn encode(&self, expires_at: u64) -> Vec<u8> {
        let mut p = [0u8; HEAD_LEN];
        p[..8].copy_from_slice(&self.version.to_be_bytes());
        p[8..12].copy_from_slice(&self.fields.to_be_bytes());
        p[12..].copy_from_slice(&self.bytes.to_be_bytes());
        value::encode(kind::HASH_HEAD, expires_at, &p)
    }

    pub fn decode(payload: &[u8]) -> Result<Head, value::Corrupt> {
        let mut c = value::Cursor::new(payload, "hash header");
        let head = Head {
            version: c.u64()?,
            fields: c.u32()?,
            bytes: c.u64()?,
        };
        c.end()?;
        Ok(head)
    }
}

/// A live hash as found in storage, in the layout it was written in.
pub(crate) enum Layout {
    Fields(Head),
    /// The layout before per-field storage: every field in one value.
    Whole(Hash),
}

impl Layout {
    pub fn len(&self) -> u64 {
        match self {
            Layout::Fields(h) => u64::from(h.fields),
            Layout::Whole(h) => h.len() as u64,
        }
    }
}

/// A field's value, read through the group, at its storage key.
fn read_field(txn: &Txn, field_key: &[u8]) -> Result<Option<Bytes>, RushError> {
    txn.get(field_key)
        .map_err(storage_error)?
        .map(field_value)
        .transpose()
}

fn field_value(raw: Bytes) -> Result<Bytes, RushError> {
    match value::Stored::decode(&raw) {
        Ok(s) if s.kind == kind::HASH_FIELD => Ok(raw.slice(value::HEADER..)),
        Ok(s) => Err(RushError::internal(format!(
            "hash field holds value kind {}",
            s.kind
        ))),
        Err(e) => Err(RushError::internal(e.to_string())),
    }
}

impl Kv {
    /// One field of a live hash.
    pub(super) fn hash_field(
        &self,
        key: &[u8],
        hash: &Layout,
        field: &[u8],
        txn: &Txn,
    ) -> Result<Option<Bytes>, RushError> {
        match hash {
            Layout::Whole(h) => Ok(h.get(field).map(|v| Bytes::copy_from_slice(v))),
            Layout::Fields(head) => {
                let k = keys::hash_field(rush_protocol::key_slot(key), key, head.version, field);
                read_field(txn, &k)
            }
        }
    }

    /// Every field of a live hash, in field order.
    pub(super) fn hash_all(
        &self,
        key: &[u8],
        hash: Layout,
        txn: &Txn,
    ) -> Result<Vec<(Bytes, Bytes)>, RushError> {
        match hash {
            Layout::Whole(h) => Ok(h
                .into_iter()
                .map(|(f, v)| (Bytes::from(f), Bytes::from(v)))
                .collect()),
            Layout::Fields(head) => {
                let (from, to) = keys::hash_fields(rush_protocol::key_slot(key), key, head.version);
                let (found, _) = txn
                    .scan(&from, &to, MAX_HASH_FIELDS)
                    .map_err(storage_error)?;
                found
                    .into_iter()
                    .map(|(k, v)| {
                        let field = Bytes::copy_from_slice(&k[from.len()..]);
                        Ok((field, field_value(Bytes::from(v))?))
                    })
                    .collect()
            }
        }
    }

    /// The hash at `key`, ready to change: a new one when the key is
    /// missing; WRONG_TYPE on a string. A hash in the old one-value layout
    /// is stored field by field here, in the same transaction.
    pub(super) fn hash_for_write(
        &self,
        key: &[u8],
        now: u64,
        txn: &mut Txn,
    ) -> Result<HashWrite, RushError> {
        let slot = rush_protocol::key_slot(key);
        let w = match self.load(key, now, txn)? {
            Entry::Missing => HashWrite {
                slot,
                expires_at: 0,
                head: Head::fresh(),
                converted: false,
                read: None,
            },
            Entry::Hash {
                expires_at,
                hash: Layout::Fields(head),
            } => HashWrite {
                slot,
                expires_at,
                head,
                converted: false,
                read: Some((head, expires_at)),
            },
            Entry::Hash {
                expires_at,
                hash: Layout::Whole(fields),
            } => {
                let mut w = HashWrite {
                    slot,
                    expires_at,
                    head: Head::fresh(),
                    converted: true,
                    read: None,
                };
                for (f, v) in &fields {
                    w.put(key, f, v, Some(None), txn)?;
                }
                w
            }
            Entry::String { .. } => {
                return Err(RushError::wrong_type("hash operation on a string"))
            }
        };
        Ok(w)
    }
}

/// A hash being changed by one request: fields are written as they change;
/// [`HashWrite::finish`] writes the header (or, when no field is left,
/// deletes it).
pub(crate) struct HashWrite {
    slot: u16,
    pub expires_at: u64,
    head: Head,
    /// The hash was in the one-value layout and its fields were staged in
    /// the new one: [`HashWrite::finish`] must run even if nothing else
    /// changes.
    converted: bool,
    /// The header as read (`None`: there was none), so an unchanged one
    /// is not written again.
    read: Option<(Head, u64)>,
}

impl HashWrite {
    fn field_key(&self, key: &[u8], field: &[u8]) -> Vec<u8> {
        keys::hash_field(self.slot, key, self.head.version, field)
    }

    pub fn converted(&self) -> bool {
        self.converted
    }

    /// A field's value as this request sees it.
    pub fn get(&self, key: &[u8], field: &[u8], txn: &Txn) -> Result<Option<Bytes>, RushError> {
        if self.head.fields == 0 {
            return Ok(None);
        }
        read_field(txn, &self.field_key(key, field))
    }

    /// Set a field; `old` is its current value if the caller has read it
    /// (else it is read here). True when the field is new. TOO_LARGE past
    /// the hash's limits.
    pub fn put(
        &mut self,
        key: &[u8],
        field: &[u8],
        v: &[u8],
        old: Option<Option<Bytes>>,
        txn: &mut Txn,
    ) -> Result<bool, RushError> {
        let old = match old {
            Some(old) => old,
            None => self.get(key, field, txn)?,
        };
        let added = old.is_none();
        let old_bytes = old.map_or(0, |o| (field.len() + o.len()) as u64);
        let fields = u64::from(self.head.fields) + u64::from(added);
        if fields > MAX_HASH_FIELDS as u64 {
            return Err(RushError::new(
                ErrorCode::TooLarge,
                format!("hash would have {fields} fields, over the limit of {MAX_HASH_FIELDS}"),
            ));
        }
        let bytes =
            self.head.bytes - old_bytes.min(self.head.bytes) + (field.len() + v.len()) as u64;
        if bytes > MAX_HASH_BYTES {
            return Err(RushError::new(
                ErrorCode::TooLarge,
                format!("hash would hold {bytes} bytes, over the limit of {MAX_HASH_BYTES}"),
            ));
        }
        txn.put(
            self.field_key(key, field),
            value::encode(kind::HASH_FIELD, 0, v),
        );
        self.head.fields = fields as u32;
        self.head.bytes = bytes;
        Ok(added)
    }

    /// Remove a field; true when it was there.
    pub fn remove(&mut self, key: &[u8], field: &[u8], txn: &mut Txn) -> Result<bool, RushError> {
        let Some(old) = self.get(key, field, txn)? else {
            return Ok(false);
        };
        txn.delete(self.field_key(key, field));
        self.head.fields -= 1;
        self.head.bytes = self
            .head
            .bytes
            .saturating_sub((field.len() + old.len()) as u64);
        Ok(true)
    }

    /// Write the header: the hash's count, bytes and expiry, unless they are
    /// what was read (a field replaced by one of the same size); a hash left
    /// with no field is deleted (as in Redis).
    pub fn finish(self, kv: &mut Kv, key: &[u8], txn: &mut Txn) {
        let skey = keys::kv(self.slot, key);
        if self.read == Some((self.head, self.expires_at)) {
            // Only fields changed: they were staged as they changed.
        } else if self.head.fields == 0 {
            txn.delete(skey);
        } else {
            kv.written(&skey);
            txn.put(skey, self.head.encode(self.expires_at));
        }
        kv.mark_durable(txn);
    }
}
