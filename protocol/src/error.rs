//! Typed error answers. An error answers one request; it never closes the
//! connection's other requests (except a frame too large to skip, see
//! PROTOCOL.md).

use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_TEXT;
use bytes::{BufMut, BytesMut};
use std::fmt;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $wire:literal;)*) => {
        /// The status byte of an error answer.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $name,)*
            /// A code this crate doesn't know: from a newer server, or a
            /// retired one ([`ErrorCode::RETIRED`]). It is still an error
            /// answer to its request, with message and detail; nothing says
            /// whether the request was applied.
            Other(u8),
        }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$name,)*];

            pub fn as_u8(self) -> u8 {
                match self {
                    $(ErrorCode::$name => $value,)*
                    ErrorCode::Other(v) => v,
                }
            }

            pub fn from_u8(v: u8) -> ErrorCode {
                match v {
                    $($value => ErrorCode::$name,)*
                    v => ErrorCode::Other(v),
                }
            }

            /// The name used in documents, logs and metric labels.
            pub fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$name => $wire,)*
                    ErrorCode::Other(_) => "OTHER",
                }
            }
        }
    };
}

error_codes! {
    /// The request is malformed or its arguments are invalid.
    BadRequest = 1, "BAD_REQUEST";
    /// A frame, field or list is over its limit.
    TooLarge = 2, "TOO_LARGE";
    /// The opcode is not one this server knows.
    UnknownOpcode = 3, "UNKNOWN_OPCODE";
    /// The key holds a value of another type (or a non-integer for INCRBY).
    WrongType = 4, "WRONG_TYPE";
    /// The keys of one request map to different slots.
    CrossSlot = 5, "CROSSSLOT";
    /// This node does not own the slot; detail says who does.
    Moved = 6, "MOVED";
    // 7 was ASK (redirect one request while a slot moves key by key). Rush
    // hands a slot over whole and never sent it: the code is retired, never
    // to be reused, and decodes as `Other(7)` (see `ErrorCode::RETIRED`).
    /// The shard's queue (or an envelope's admission cap) is full: retry later.
    Busy = 8, "BUSY";
    /// No such key, link, policy, envelope.
    NotFound = 9, "NOT_FOUND";
    /// The link or envelope has expired.
    Expired = 10, "EXPIRED";
    /// A purchase limit denies the order; detail names the rule.
    Limited = 11, "LIMITED";
    /// The envelope has no shares left.
    Empty = 12, "EMPTY";
    /// The node can't serve this now (storage failing, reads shed, draining).
    Unavailable = 13, "UNAVAILABLE";
    /// A bug or an unexpected storage error on the server.
    Internal = 14, "INTERNAL";
    /// HELLO with a valid token is required first, or the token is wrong.
    Unauthorized = 15, "UNAUTHORIZED";
    /// The name is taken (an alias, an idempotency key with other arguments).
    Conflict = 16, "CONFLICT";
    /// A code space or similar finite resource has no free element left.
    Exhausted = 17, "EXHAUSTED";
    /// The frame's protocol version is not supported.
    UnsupportedVersion = 18, "UNSUPPORTED_VERSION";
    /// A BATCH condition did not hold; nothing was written.
    ConditionFailed = 19, "CONDITION_FAILED";
    /// The request needs the admin token (or clock control is disabled).
    Forbidden = 20, "FORBIDDEN";
    /// The slot is being handed to another node right now (milliseconds):
    /// nothing was done; resend shortly (then it is served, or MOVED).
    TryAgain = 21, "TRYAGAIN";
}

impl ErrorCode {
    /// Codes that were assigned once and are never given another meaning,
    /// so an old peer can't misread a new answer. 7 was ASK. They decode as
    /// [`ErrorCode::Other`].
    pub const RETIRED: &'static [u8] = &[7];
}

/// Extra, code-specific information carried by an error answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ErrorDetail {
    #[default]
    None,
    /// MOVED: the slot and the address of the node that serves it.
    Redirect { slot: u16, addr: String },
    /// A BATCH was aborted by operation `index` (0-based); nothing was written.
    BatchIndex { index: u32 },
    /// LIMITED: which rule and item denied the order.
    Limit(LimitDenial),
}

/// Why an order was LIMITED: the first rule and item it would take over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitDenial {
    pub rule: String,
    /// Empty for a total rule.
    pub item: String,
    /// What the rule had counted before this order.
    pub current: u64,
    pub limit: u64,
    /// What the order asked for under the rule.
    pub requested: u64,
}

/// An error answer: a code, a human-readable message and optional detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RushError {
    pub code: ErrorCode,
    pub message: String,
    pub detail: ErrorDetail,
}

impl RushError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > MAX_TEXT {
            let mut cut = MAX_TEXT;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        RushError {
            code,
            message,
            detail: ErrorDetail::None,
        }
    }

    pub fn with_detail(mut self, detail: ErrorDetail) -> Self {
        self.detail = detail;
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn wrong_type(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::WrongType, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    pub fn busy(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Busy, message)
    }

    pub fn try_again(slot: u16) -> Self {
        Self::new(
            ErrorCode::TryAgain,
            format!("slot {slot} is moving to another node; retry shortly"),
        )
    }

    pub fn moved(slot: u16, addr: impl Into<String>) -> Self {
        let addr = addr.into();
        Self::new(ErrorCode::Moved, format!("slot {slot} is served by {addr}"))
            .with_detail(ErrorDetail::Redirect { slot, addr })
    }
}

impl fmt::Display for RushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl std::error::Error for RushError {}

impl From<DecodeError> for RushError {
    fn from(e: DecodeError) -> Self {
        let code = match e {
            DecodeError::TooLarge { .. } => ErrorCode::TooLarge,
            _ => ErrorCode::BadRequest,
        };
        RushError::new(code, e.to_string())
    }
}

const DETAIL_NONE: u8 = 0;
const DETAIL_REDIRECT: u8 = 1;
const DETAIL_BATCH: u8 = 2;
const DETAIL_LIMIT: u8 = 3;

/// Error body: `u8 code, bytes message, u8 detail kind, detail…`
impl Wire for RushError {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.code.as_u8());
        out.put_lp(self.message.as_bytes());
        match &self.detail {
            ErrorDetail::None => out.put_u8(DETAIL_NONE),
            ErrorDetail::Redirect { slot, addr } => {
                out.put_u8(DETAIL_REDIRECT);
                out.put_u16(*slot);
                out.put_lp(addr.as_bytes());
            }
            ErrorDetail::BatchIndex { index } => {
                out.put_u8(DETAIL_BATCH);
                out.put_u32(*index);
            }
            ErrorDetail::Limit(LimitDenial {
                rule,
                item,
                current,
                limit,
                requested,
            }) => {
                out.put_u8(DETAIL_LIMIT);
                out.put_lp(rule.as_bytes());
                out.put_lp(item.as_bytes());
                out.put_u64(*current);
                out.put_u64(*limit);
                out.put_u64(*requested);
            }
        }
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let code = ErrorCode::from_u8(r.u8("error code")?);
        if code.as_u8() == 0 {
            return Err(DecodeError::invalid("error code", "0 is not an error"));
        }
        let message = r.string("error message", MAX_TEXT)?;
        let detail = match r.u8("error detail")? {
            DETAIL_NONE => ErrorDetail::None,
            DETAIL_REDIRECT => ErrorDetail::Redirect {
                slot: r.u16("slot")?,
                addr: r.string("addr", MAX_TEXT)?,
            },
            DETAIL_BATCH => ErrorDetail::BatchIndex {
                index: r.u32("index")?,
            },
            DETAIL_LIMIT => ErrorDetail::Limit(LimitDenial {
                rule: r.string("rule", MAX_TEXT)?,
                item: r.string("item", MAX_TEXT)?,
                current: r.u64("current")?,
                limit: r.u64("limit")?,
                requested: r.u64("requested")?,
            }),
            k => return Err(DecodeError::invalid("error detail", format!("kind {k}"))),
        };
        Ok(RushError {
            code,
            message,
            detail,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_retired_ones_stay_unassigned() {
        for &code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_u8(code.as_u8()), code);
            assert!(
                !ErrorCode::RETIRED.contains(&code.as_u8()),
                "{} reuses a retired code",
                code.name()
            );
        }
        for &retired in ErrorCode::RETIRED {
            assert_eq!(ErrorCode::from_u8(retired), ErrorCode::Other(retired));
        }
    }

    #[test]
    fn an_unknown_code_decodes_with_its_message_and_detail() {
        // What an old server's ASK looked like: code 7 with a redirect.
        let mut b = BytesMut::new();
        b.put_u8(7);
        b.put_lp(b"ask elsewhere");
        b.put_u8(DETAIL_REDIRECT);
        b.put_u16(5);
        b.put_lp(b"10.0.0.2:7379");
        let e = RushError::decode_body(b.freeze()).unwrap();
        assert_eq!(e.code, ErrorCode::Other(7));
        assert_eq!(e.code.as_u8(), 7);
        assert_eq!(e.message, "ask elsewhere");
        assert_eq!(
            e.detail,
            ErrorDetail::Redirect {
                slot: 5,
                addr: "10.0.0.2:7379".into()
            }
        );
    }
}
