//! Frames: `u32 length | u8 version | u8 opcode | u16 flags | u64 request id | body`.
//!
//! `length` counts the bytes after itself (header + body), big-endian. Decoding
//! is two steps (STYLE 2): [`check`] looks at buffered bytes without allocating
//! and says "incomplete, read more" or "this frame can never be accepted";
//! only then [`parse`] splits the frame off the buffer.

use crate::codec::{DecodeError, Reader, Wire};
use crate::error::RushError;
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes of the length prefix.
pub const LENGTH_PREFIX: usize = 4;
/// Bytes of the header after the length prefix.
pub const HEADER_LEN: usize = 12;
/// The only protocol version so far.
pub const VERSION: u8 = 1;
/// Header flag set on every response frame.
pub const FLAG_RESPONSE: u16 = 0x0001;
/// Every flag bit version 1 defines. The others are reserved: a request
/// with any of them set is BAD_REQUEST, so a later meaning can never be
/// silently ignored by an older server.
pub const KNOWN_FLAGS: u16 = FLAG_RESPONSE;
/// The first body byte of a successful response.
pub const STATUS_OK: u8 = 0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub opcode: u8,
    pub flags: u16,
    pub request_id: u64,
}

impl Header {
    pub fn request(opcode: u8, request_id: u64) -> Self {
        Header {
            version: VERSION,
            opcode,
            flags: 0,
            request_id,
        }
    }

    pub fn is_response(&self) -> bool {
        self.flags & FLAG_RESPONSE != 0
    }

    /// Why a server must refuse this header as a request's (BAD_REQUEST,
    /// nothing executed, the connection stays open): it is a response, or
    /// it sets a reserved flag bit. The version is checked apart, as it
    /// has a code of its own (UNSUPPORTED_VERSION).
    pub fn request_flags_error(&self) -> Option<RushError> {
        if self.is_response() {
            return Some(RushError::bad_request("a client sent a response frame"));
        }
        let unknown = self.flags & !KNOWN_FLAGS;
        (unknown != 0).then(|| {
            RushError::bad_request(format!(
                "unknown flag bits 0x{unknown:04x}: a request's flags must be 0"
            ))
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub header: Header,
    pub body: Bytes,
}

/// Why no frame can be taken off the buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Not all of the frame has arrived: read more.
    #[error("incomplete frame")]
    Incomplete,
    /// The announced length is over the limit. The body is never read (it may
    /// be gigabytes), so the stream can't be resynchronised: answer and close.
    /// The header is reported when it has arrived, so the answer can carry the
    /// request id.
    #[error("frame of {len} bytes is over the limit of {max}")]
    TooLarge {
        len: u64,
        max: usize,
        header: Option<Header>,
    },
    /// The announced length can't even hold a header: the stream is garbage.
    #[error("frame length {len} is shorter than the {HEADER_LEN}-byte header")]
    TooShort { len: u32 },
}

fn peek_header(buf: &[u8]) -> Option<Header> {
    if buf.len() < LENGTH_PREFIX + HEADER_LEN {
        return None;
    }
    let h = &buf[LENGTH_PREFIX..LENGTH_PREFIX + HEADER_LEN];
    Some(Header {
        version: h[0],
        opcode: h[1],
        flags: u16::from_be_bytes([h[2], h[3]]),
        request_id: u64::from_be_bytes(h[4..12].try_into().expect("8 bytes")),
    })
}

/// Step 1: is a whole, acceptable frame at the start of `buf`? Returns its
/// total size (prefix included). Never allocates.
pub fn check(buf: &[u8], max_frame: usize) -> Result<usize, FrameError> {
    if buf.len() < LENGTH_PREFIX {
        return Err(FrameError::Incomplete);
    }
    let len = u32::from_be_bytes(buf[..4].try_into().expect("4 bytes"));
    if (len as usize) < HEADER_LEN {
        return Err(FrameError::TooShort { len });
    }
    if len as usize > max_frame {
        return Err(FrameError::TooLarge {
            len: len as u64,
            max: max_frame,
            header: peek_header(buf),
        });
    }
    let total = LENGTH_PREFIX + len as usize;
    if buf.len() < total {
        return Err(FrameError::Incomplete);
    }
    Ok(total)
}

/// The whole frames at the start of `buf`, left where they are: each one's
/// opcode and body. Stops at the first frame that hasn't fully arrived or
/// that [`check`] refuses. For looking ahead (a server prefetching what
/// the requests will touch), never for answering: [`parse`] takes them.
pub fn peek_frames(buf: &[u8], max_frame: usize) -> impl Iterator<Item = (u8, &[u8])> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        let total = check(rest, max_frame).ok()?;
        let opcode = rest[LENGTH_PREFIX + 1];
        let body = &rest[LENGTH_PREFIX + HEADER_LEN..total];
        rest = &rest[total..];
        Some((opcode, body))
    })
}

/// Step 2: take the next frame off `buf`, if a whole one is there.
pub fn parse(buf: &mut BytesMut, max_frame: usize) -> Result<Option<Frame>, FrameError> {
    let total = match check(buf, max_frame) {
        Ok(total) => total,
        Err(FrameError::Incomplete) => return Ok(None),
        Err(e) => return Err(e),
    };
    let header = peek_header(buf).expect("checked length covers the header");
    let mut frame = buf.split_to(total);
    frame.advance(LENGTH_PREFIX + HEADER_LEN);
    Ok(Some(Frame {
        header,
        body: frame.freeze(),
    }))
}

/// Append one frame: header, then whatever `body` writes; the length prefix is
/// filled in afterwards.
pub fn encode(out: &mut BytesMut, header: Header, body: impl FnOnce(&mut BytesMut)) {
    let start = out.len();
    out.put_u32(0);
    out.put_u8(header.version);
    out.put_u8(header.opcode);
    out.put_u16(header.flags);
    out.put_u64(header.request_id);
    body(out);
    let len = (out.len() - start - LENGTH_PREFIX) as u32;
    out[start..start + LENGTH_PREFIX].copy_from_slice(&len.to_be_bytes());
}

fn response_header(opcode: u8, request_id: u64) -> Header {
    Header {
        version: VERSION,
        opcode,
        flags: FLAG_RESPONSE,
        request_id,
    }
}

/// Append a successful response: status 0, then the reply body.
pub fn encode_ok(
    out: &mut BytesMut,
    opcode: u8,
    request_id: u64,
    reply: impl FnOnce(&mut BytesMut),
) {
    encode(out, response_header(opcode, request_id), |out| {
        out.put_u8(STATUS_OK);
        reply(out);
    })
}

/// Append an error response: the error code is the status byte.
pub fn encode_error(out: &mut BytesMut, opcode: u8, request_id: u64, error: &RushError) {
    encode(out, response_header(opcode, request_id), |out| {
        error.encode(out)
    })
}

/// Decode a response body into the reply type `R` or the server's error.
/// Bytes after what this decoder knows are fields a later release
/// appended, and are ignored (PROTOCOL.md, "Compatibility").
pub fn decode_response<R: Wire>(body: Bytes) -> Result<Result<R, RushError>, DecodeError> {
    let mut r = Reader::new(body);
    let status = {
        let mut peek = r.clone();
        peek.u8("status")?
    };
    if status == STATUS_OK {
        r.u8("status")?;
        Ok(Ok(R::decode(&mut r)?))
    } else {
        Ok(Err(RushError::decode(&mut r)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomplete_then_complete() {
        let mut out = BytesMut::new();
        encode(&mut out, Header::request(1, 7), |b| b.put_slice(b"hi"));
        for cut in 0..out.len() {
            assert_eq!(check(&out[..cut], 1024), Err(FrameError::Incomplete));
        }
        assert_eq!(check(&out, 1024), Ok(out.len()));
        let frame = parse(&mut out, 1024).unwrap().unwrap();
        assert_eq!(frame.header, Header::request(1, 7));
        assert_eq!(&frame.body[..], b"hi");
        assert!(out.is_empty());
    }

    #[test]
    fn huge_length_is_rejected_without_the_body() {
        let mut buf = BytesMut::new();
        buf.put_u32(u32::MAX);
        assert!(matches!(
            check(&buf, 1 << 20),
            Err(FrameError::TooLarge { header: None, .. })
        ));
        buf.put_slice(&[1, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]);
        match check(&buf, 1 << 20) {
            Err(FrameError::TooLarge {
                header: Some(h), ..
            }) => assert_eq!(h.request_id, 9),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_request_sets_no_flag() {
        let mut h = Header::request(1, 7);
        assert_eq!(h.request_flags_error(), None);
        for flags in [FLAG_RESPONSE, 0x0002, 0x8000, 0xffff] {
            h.flags = flags;
            let e = h.request_flags_error().expect("refused");
            assert_eq!(e.code, crate::ErrorCode::BadRequest, "{flags:#06x}");
        }
    }

    #[test]
    fn peeking_sees_the_whole_frames_and_takes_none() {
        use crate::cmd::{Get, IncrBy};
        use crate::Request;
        let mut buf = BytesMut::new();
        let get = Request::Get(Get { key: "k1".into() });
        let incr = Request::IncrBy(IncrBy {
            key: "counter".into(),
            delta: 2,
        });
        for (i, r) in [&get, &incr].into_iter().enumerate() {
            encode(
                &mut buf,
                Header::request(r.opcode().as_u8(), i as u64),
                |b| r.encode_body(b),
            );
        }
        let whole = buf.len();
        // A third frame, cut short: not seen.
        encode(&mut buf, Header::request(get.opcode().as_u8(), 9), |b| {
            get.encode_body(b)
        });
        buf.truncate(buf.len() - 1);
        let seen: Vec<(u8, &[u8])> = peek_frames(&buf, 1024).collect();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].0, get.opcode().as_u8());
        assert_eq!(crate::codec::peek_lp(seen[0].1), Some(&b"k1"[..]));
        assert_eq!(crate::codec::peek_lp(seen[1].1), Some(&b"counter"[..]));
        assert!(buf.len() > whole, "nothing was taken off the buffer");
        // A frame over the limit stops the walk; so does garbage.
        assert_eq!(peek_frames(&buf, 8).count(), 0);
        assert_eq!(peek_frames(&[0, 0, 0, 3, 1, 2, 3], 1024).count(), 0);
        // A body too short for its announced field is no key.
        assert_eq!(crate::codec::peek_lp(&[0, 0, 0, 9, b'a']), None);
        assert_eq!(crate::codec::peek_lp(&[0, 0]), None);
        let two = [0, 0, 0, 1, b'p', 0, 0, 0, 2, b'u', b'1', 7];
        let (first, rest) = crate::codec::split_lp(&two).unwrap();
        assert_eq!(
            (first, crate::codec::peek_lp(rest)),
            (&b"p"[..], Some(&b"u1"[..]))
        );
    }

    #[test]
    fn short_length_is_garbage() {
        assert_eq!(
            check(&[0, 0, 0, 3, 1, 2, 3], 1024),
            Err(FrameError::TooShort { len: 3 })
        );
    }
}
