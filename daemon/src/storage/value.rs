//! Stored values: `kind: u8 | expires_at: u64 BE (unix ms, 0 = never) | payload`.
//!
//! The expiry sits at a fixed offset in every value of every keyspace, so the
//! compaction filter can drop expired values without knowing their kind, and
//! every read can treat an expired value as absent. Every value written to a
//! shard column family must have this header — the filter reads bytes 1..9 of
//! whatever it finds.
//!
//! The kind byte's table is `keys::kind`, beside the keyspaces it is stored
//! in (all key and value layout is in `keys`).

use bytes::Bytes;
use std::collections::BTreeMap;

pub const HEADER: usize = 9;

#[derive(Debug, thiserror::Error)]
#[error("stored value is corrupt: {0}")]
pub struct Corrupt(pub String);

/// A decoded value header and its payload.
#[derive(Debug, Clone, Copy)]
pub struct Stored<'a> {
    pub kind: u8,
    pub expires_at: u64,
    pub payload: &'a [u8],
}

impl<'a> Stored<'a> {
    pub fn decode(raw: &'a [u8]) -> Result<Stored<'a>, Corrupt> {
        if raw.len() < HEADER {
            return Err(Corrupt(format!(
                "{} bytes is shorter than the header",
                raw.len()
            )));
        }
        Ok(Stored {
            kind: raw[0],
            expires_at: u64::from_be_bytes(raw[1..9].try_into().expect("8 bytes")),
            payload: &raw[HEADER..],
        })
    }

    pub fn is_live(&self, now_ms: u64) -> bool {
        is_live(self.expires_at, now_ms)
    }
}

pub fn is_live(expires_at: u64, now_ms: u64) -> bool {
    expires_at == 0 || expires_at > now_ms
}

/// The expiry of a raw value, if it has a header.
pub fn expiry_of(raw: &[u8]) -> Option<u64> {
    (raw.len() >= HEADER).then(|| u64::from_be_bytes(raw[1..9].try_into().expect("8 bytes")))
}

pub fn encode(kind: u8, expires_at: u64, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER + payload.len());
    put_header(&mut v, kind, expires_at);
    v.extend_from_slice(payload);
    v
}

/// A value's header, for a payload its caller then writes after it.
pub fn put_header(out: &mut impl bytes::BufMut, kind: u8, expires_at: u64) {
    out.put_u8(kind);
    out.put_u64(expires_at);
}

/// [`encode`], built the way the row cache holds a value
/// ([`super::inline`]: its reference count beside its bytes), for the
/// values a request writes and later requests read.
pub fn encode_shared(kind: u8, expires_at: u64, payload: &[u8]) -> Bytes {
    super::inline::concat(&[&[kind], &expires_at.to_be_bytes(), payload])
}

/// A hash as stored: `u32 count`, then `(u32 len, field, u32 len, value)`
/// sorted by field. Hashes are small in Rush's workloads (counters per user,
/// per order), so one value per hash keeps HGETALL one read and HSET one write.
pub type Hash = BTreeMap<Vec<u8>, Vec<u8>>;

pub fn encode_hash(h: &Hash) -> Vec<u8> {
    let size: usize = 4 + h.iter().map(|(f, v)| 8 + f.len() + v.len()).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    for (f, v) in h {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f);
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    }
    out
}

pub fn decode_hash(mut p: &[u8]) -> Result<Hash, Corrupt> {
    fn take<'a>(p: &mut &'a [u8], n: usize) -> Result<&'a [u8], Corrupt> {
        if p.len() < n {
            return Err(Corrupt("hash is truncated".into()));
        }
        let (a, b) = p.split_at(n);
        *p = b;
        Ok(a)
    }
    fn len(p: &mut &[u8]) -> Result<usize, Corrupt> {
        Ok(u32::from_be_bytes(take(p, 4)?.try_into().expect("4 bytes")) as usize)
    }
    let n = len(&mut p)?;
    let mut h = Hash::new();
    for _ in 0..n {
        let fl = len(&mut p)?;
        let f = take(&mut p, fl)?.to_vec();
        let vl = len(&mut p)?;
        let v = take(&mut p, vl)?.to_vec();
        h.insert(f, v);
    }
    if !p.is_empty() {
        return Err(Corrupt("trailing bytes after hash".into()));
    }
    Ok(h)
}

/// Reads a value's payload field by field (big-endian integers,
/// `u16`-length-prefixed text): the decoding half of the services' record
/// formats. Running out of bytes, or bytes left over, is [`Corrupt`], named
/// after `what` the payload is.
pub struct Cursor<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> Cursor<'a> {
    pub fn new(payload: &'a [u8], what: &'static str) -> Self {
        Cursor {
            rest: payload,
            what,
        }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Corrupt> {
        if self.rest.len() < n {
            return Err(Corrupt(format!("{} is truncated", self.what)));
        }
        let (a, b) = self.rest.split_at(n);
        self.rest = b;
        Ok(a)
    }

    pub fn u8(&mut self) -> Result<u8, Corrupt> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16, Corrupt> {
        Ok(u16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    pub fn u32(&mut self) -> Result<u32, Corrupt> {
        Ok(u32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    pub fn u64(&mut self) -> Result<u64, Corrupt> {
        Ok(u64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// `u16` length, then UTF-8.
    pub fn string(&mut self) -> Result<String, Corrupt> {
        self.str().map(str::to_string)
    }

    /// [`Cursor::string`] in place.
    pub fn str(&mut self) -> Result<&'a str, Corrupt> {
        let n = self.u16()? as usize;
        std::str::from_utf8(self.take(n)?)
            .map_err(|_| Corrupt(format!("{} holds non-UTF-8 text", self.what)))
    }

    /// Everything not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Every byte must have been read.
    pub fn end(&self) -> Result<(), Corrupt> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Corrupt(format!("trailing bytes in {}", self.what)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::keys::kind;

    #[test]
    fn header_round_trip() {
        let raw = encode(kind::STRING, 1234, b"v");
        let s = Stored::decode(&raw).unwrap();
        assert_eq!(
            (s.kind, s.expires_at, s.payload),
            (kind::STRING, 1234, &b"v"[..])
        );
        assert!(s.is_live(1233) && !s.is_live(1234));
        assert_eq!(expiry_of(&raw), Some(1234));
        assert!(Stored::decode(&raw[..5]).is_err());
    }

    #[test]
    fn hash_round_trip() {
        let mut h = Hash::new();
        h.insert(b"b".to_vec(), b"2".to_vec());
        h.insert(b"a".to_vec(), vec![]);
        assert_eq!(decode_hash(&encode_hash(&h)).unwrap(), h);
        assert!(decode_hash(&encode_hash(&h)[..6]).is_err());
    }
}
