//! Wire primitives shared by every body: big-endian integers, length-prefixed
//! byte strings, counted lists.
//!
//! Decoding reads from a [`Bytes`] so keys and values are zero-copy slices of
//! the received frame. Every length is checked against what is left in the
//! body *before* anything is allocated, and against a named limit from
//! [`crate::limits`], so a hostile length can't make the reader allocate.

use bytes::{BufMut, Bytes, BytesMut};

/// Why a body could not be decoded. Every variant maps to a `BAD_REQUEST`
/// (or `TOO_LARGE`) answer for that one request; none closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("body ends early while reading {0}")]
    Truncated(&'static str),
    #[error("{field} is {len} long, over the limit of {max}")]
    TooLarge {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("{0} unexpected bytes after the body")]
    Trailing(usize),
}

impl DecodeError {
    pub fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        DecodeError::Invalid {
            field,
            reason: reason.into(),
        }
    }
}

/// The first field of `body` when it is a length-prefixed byte string (as
/// the key of GET, SET or INCRBY and the code of LINK_RESOLVE are), without
/// decoding the rest; `None` when `body` is too short to hold it.
pub fn peek_lp(body: &[u8]) -> Option<&[u8]> {
    split_lp(body).map(|(field, _)| field)
}

/// [`peek_lp`], and what follows the field (to peek at the next one).
pub fn split_lp(body: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = body.split_first_chunk::<4>()?;
    let len = u32::from_be_bytes(*len) as usize;
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// A cursor over one frame body.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// How far it has read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// What it read since `position` was `start` (zero-copy).
    pub fn since(&self, start: usize) -> Bytes {
        self.buf.slice(start..self.pos)
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&[u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated(field));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, field)?[0])
    }

    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, field)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A `u16` slot number, which must be below [`crate::SLOTS`].
    pub fn slot(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        let slot = self.u16(field)?;
        if slot >= crate::SLOTS {
            return Err(DecodeError::invalid(field, format!("{slot} is past 16383")));
        }
        Ok(slot)
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, field)?;
        Ok(u32::from_be_bytes(b.try_into().expect("4 bytes")))
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let b = self.take(8, field)?;
        Ok(u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    pub fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(self.u64(field)? as i64)
    }

    pub fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(DecodeError::invalid(field, format!("bool byte {b}"))),
        }
    }

    /// A `u32` length followed by that many bytes, at most `max`.
    pub fn bytes(&mut self, field: &'static str, max: usize) -> Result<Bytes, DecodeError> {
        let len = self.u32(field)? as usize;
        if len > max {
            return Err(DecodeError::TooLarge { field, len, max });
        }
        if self.remaining() < len {
            return Err(DecodeError::Truncated(field));
        }
        let out = self.buf.slice(self.pos..self.pos + len);
        self.pos += len;
        Ok(out)
    }

    /// Like [`Reader::bytes`], and the bytes must be UTF-8.
    pub fn string(&mut self, field: &'static str, max: usize) -> Result<String, DecodeError> {
        let b = self.bytes(field, max)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::invalid(field, "not UTF-8"))
    }

    /// A `u8` presence tag (0 absent, 1 present), then the value.
    pub fn option<T>(
        &mut self,
        field: &'static str,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        if self.bool(field)? {
            f(self).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A `u32` element count, at most `max`, and plausible: each element takes
    /// at least `min_element` bytes, so a count the body can't hold is rejected
    /// before a `Vec` of that capacity is made.
    pub fn count(
        &mut self,
        field: &'static str,
        max: usize,
        min_element: usize,
    ) -> Result<usize, DecodeError> {
        let n = self.u32(field)? as usize;
        if n > max {
            return Err(DecodeError::TooLarge { field, len: n, max });
        }
        if n.saturating_mul(min_element.max(1)) > self.remaining() {
            return Err(DecodeError::Truncated(field));
        }
        Ok(n)
    }

    /// A counted list of elements decoded by `f`.
    pub fn list<T>(
        &mut self,
        field: &'static str,
        max: usize,
        min_element: usize,
        mut f: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.count(field, max, min_element)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(f(self)?);
        }
        Ok(out)
    }

    /// A field added at the end of its body after protocol version 1
    /// first shipped: `None` when the body ends before it (the sender
    /// predates the field), else what `f` reads. See PROTOCOL.md,
    /// "Compatibility".
    pub fn added<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        if self.remaining() == 0 {
            Ok(None)
        } else {
            f(self).map(Some)
        }
    }

    /// The rest of the body, unparsed (used by BATCH for nested bodies).
    pub fn rest(&mut self) -> Bytes {
        let out = self.buf.slice(self.pos..);
        self.pos = self.buf.len();
        out
    }

    /// Everything must have been read.
    pub fn finish(self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

/// Encoding helpers, the mirror of [`Reader`].
pub trait WriteExt: BufMut {
    fn put_lp(&mut self, b: &[u8]) {
        self.put_u32(b.len() as u32);
        self.put_slice(b);
    }

    fn put_bool(&mut self, v: bool) {
        self.put_u8(v as u8);
    }

    fn put_count(&mut self, n: usize) {
        self.put_u32(n as u32);
    }
}

impl<B: BufMut + ?Sized> WriteExt for B {}

/// A value with one wire form: request bodies, reply bodies, nested parts.
pub trait Wire: Sized {
    fn encode(&self, out: &mut BytesMut);
    fn decode(r: &mut Reader) -> Result<Self, DecodeError>;

    /// Decode a whole body: the value must use every byte. Requests (and
    /// what is stored) are read this way.
    fn decode_body(body: Bytes) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let v = Self::decode(&mut r)?;
        r.finish()?;
        Ok(v)
    }

    /// Decode a reply body: the fields this decoder knows, and nothing of
    /// what follows them — fields a later release appended, which a reader
    /// of this release ignores (PROTOCOL.md, "Compatibility").
    fn decode_reply_body(body: Bytes) -> Result<Self, DecodeError> {
        Self::decode(&mut Reader::new(body))
    }

    fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::new();
        self.encode(&mut b);
        b.freeze()
    }
}

impl Wire for () {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(())
    }
}

impl Wire for bool {
    fn encode(&self, out: &mut BytesMut) {
        out.put_bool(*self)
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        r.bool("bool")
    }
}

impl Wire for u64 {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(*self)
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        r.u64("u64")
    }
}

impl Wire for i64 {
    fn encode(&self, out: &mut BytesMut) {
        out.put_i64(*self)
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        r.i64("i64")
    }
}

/// An optional value (tag byte, then the bytes): GET, HGET.
impl Wire for Option<Bytes> {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            None => out.put_u8(0),
            Some(b) => {
                out.put_u8(1);
                out.put_lp(b);
            }
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        r.option("value", |r| r.bytes("value", usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_count_is_rejected_before_allocating() {
        let mut b = BytesMut::new();
        b.put_u32(u32::MAX);
        let mut r = Reader::new(b.freeze());
        assert!(matches!(
            r.count("items", usize::MAX, 1),
            Err(DecodeError::Truncated("items"))
        ));
    }

    #[test]
    fn oversized_bytes_name_their_field() {
        let mut b = BytesMut::new();
        b.put_lp(&[0u8; 10]);
        let mut r = Reader::new(b.freeze());
        assert_eq!(
            r.bytes("key", 4),
            Err(DecodeError::TooLarge {
                field: "key",
                len: 10,
                max: 4
            })
        );
    }

    #[test]
    fn trailing_bytes_are_an_error() {
        let r = Reader::new(Bytes::from_static(&[1, 2]));
        assert_eq!(r.finish(), Err(DecodeError::Trailing(2)));
        // Unless a reply is read: what a later release appended is ignored.
        let body = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 7, 1, 2]);
        assert_eq!(u64::decode_reply_body(body.clone()), Ok(7));
        assert_eq!(u64::decode_body(body), Err(DecodeError::Trailing(2)));
    }

    #[test]
    fn a_field_added_later_may_be_absent() {
        let mut old = Reader::new(Bytes::from_static(&[5]));
        assert_eq!(old.u8("first"), Ok(5));
        assert_eq!(old.added(|r| r.bool("added")), Ok(None));
        let mut new = Reader::new(Bytes::from_static(&[5, 1]));
        new.u8("first").unwrap();
        assert_eq!(new.added(|r| r.bool("added")), Ok(Some(true)));
        // Present but malformed is still an error, not "absent".
        let mut bad = Reader::new(Bytes::from_static(&[5, 9]));
        bad.u8("first").unwrap();
        assert!(bad.added(|r| r.bool("added")).is_err());
    }
}
