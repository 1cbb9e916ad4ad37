//! Short links (opcodes 0x30–0x3f): one file per request, and the code
//! format every client needs to route (see [`code`]).

pub mod code;
mod delete;
mod info;
mod resolve;
mod shorten;
mod shorten_batch;
mod update;

pub use code::{link_slot, Code};
pub use delete::LinkDelete;
pub use info::{LinkInfo, LinkInfoReply, STATS_DAYS};
pub use resolve::{LinkResolve, ResolveReply};
pub use shorten::{LinkShorten, ShortenReply};
pub use shorten_batch::{BatchLink, BatchShortenItem, LinkShortenBatch, ShortenBatchReply};
pub use update::{AppLinkChange, LinkUpdate};

use crate::codec::{DecodeError, Reader, WriteExt};
use crate::limits::{MAX_CODE, MAX_URL};
use bytes::{BufMut, BytesMut};

/// A target or app URL (≤ [`MAX_URL`] bytes, UTF-8). Its content (scheme,
/// characters, percent-encoding) is checked by the server, which knows the
/// configured app schemes.
pub(crate) fn read_url(r: &mut Reader, field: &'static str) -> Result<String, DecodeError> {
    r.string(field, MAX_URL)
}

pub(crate) fn read_opt_url(
    r: &mut Reader,
    field: &'static str,
) -> Result<Option<String>, DecodeError> {
    r.option(field, |r| read_url(r, field))
}

/// A code or alias, checked for shape (see [`code::check_code`]).
pub(crate) fn read_code(r: &mut Reader, field: &'static str) -> Result<String, DecodeError> {
    let code = r.string(field, MAX_CODE)?;
    code::check_code(field, &code)?;
    Ok(code)
}

/// Code length: 0 = the server's default, else 5–8.
pub(crate) fn read_length(r: &mut Reader) -> Result<u8, DecodeError> {
    let len = r.u8("code length")?;
    if len != 0 && !(code::MIN_CODE_LEN..=code::MAX_CODE_LEN).contains(&len) {
        return Err(DecodeError::invalid(
            "code length",
            format!("{len} (use 5-8, or 0 for the server default)"),
        ));
    }
    Ok(len)
}

pub(crate) fn put_opt_str(out: &mut BytesMut, v: &Option<String>) {
    match v {
        None => out.put_u8(0),
        Some(s) => {
            out.put_u8(1);
            out.put_lp(s.as_bytes());
        }
    }
}

pub(crate) fn put_opt_u64(out: &mut BytesMut, v: Option<u64>) {
    match v {
        None => out.put_u8(0),
        Some(n) => {
            out.put_u8(1);
            out.put_u64(n);
        }
    }
}

pub(crate) fn read_opt_u64(r: &mut Reader, field: &'static str) -> Result<Option<u64>, DecodeError> {
    r.option(field, |r| r.u64(field))
}
