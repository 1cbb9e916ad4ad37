//! RESP, the Redis serialization protocol: commands as Redis clients send
//! them, and the writers for the replies they expect. The daemon maps the
//! commands onto [`crate::Request`]s (see `protocol/RESP.md`); this module
//! knows only the bytes.
//!
//! Requests come in two forms, both accepted on one connection and
//! pipelined freely:
//! - multibulk: `*<n>\r\n` then `n` times `$<len>\r\n<bytes>\r\n` (what
//!   every client library and `redis-cli` send);
//! - inline: one line of space-separated words ending in `\n` (what
//!   `telnet` sends). Quotes are not interpreted.
//!
//! Decoding is two steps (STYLE 2): [`check`] walks the buffered bytes
//! without allocating and says "incomplete, read more", "this can never be
//! accepted" or "a whole command of this many bytes and arguments is here";
//! only then [`parse`] splits it off the buffer and slices its arguments out
//! of it without copying. Every limit (argument count, bulk length, inline
//! line, whole command) is checked against what the client *announces*,
//! before a byte of it is buffered for it.

use bytes::{BufMut, Bytes, BytesMut};

/// Most arguments one multibulk command may announce (Redis's own bound).
pub const DEFAULT_MAX_ARGS: usize = 1024 * 1024;
/// Longest inline command line, and longest `*`/`$` header line (Redis's
/// `PROTO_INLINE_MAX_SIZE`).
pub const DEFAULT_MAX_INLINE: usize = 64 * 1024;

/// The bounds a connection's commands are held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Arguments of one command (a larger `*<n>` is refused as announced).
    pub max_args: usize,
    /// Bytes of one argument (a larger `$<len>` is refused as announced).
    pub max_bulk: usize,
    /// Bytes of an inline line, or of a `*`/`$` header line.
    pub max_inline: usize,
    /// Bytes of one whole command, headers included: what the read buffer
    /// may have to hold for it.
    pub max_command: usize,
}

impl Limits {
    /// The defaults for a server whose frames may be `max_command` bytes.
    pub fn with_max_command(max_command: usize) -> Limits {
        Limits {
            max_args: DEFAULT_MAX_ARGS,
            max_bulk: max_command,
            max_inline: DEFAULT_MAX_INLINE,
            max_command,
        }
    }
}

/// Bytes that can never become a command. The server answers
/// `-ERR Protocol error: <this>` and closes the connection, as Redis does:
/// after garbage there is no telling where the next command starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RespError {
    #[error("invalid multibulk length")]
    MultibulkLength,
    #[error("invalid bulk length")]
    BulkLength,
    #[error("expected '$', got '{}'", char::from(*.0).escape_default())]
    ExpectedBulk(u8),
    #[error("too big mbulk count string")]
    CountLineTooLong,
    #[error("too big bulk count string")]
    BulkLineTooLong,
    #[error("too big inline request")]
    InlineTooLong,
    #[error("bulk data not followed by CRLF")]
    MissingCrlf,
    #[error("command is larger than {max} bytes")]
    TooLarge { max: usize },
}

/// What [`check`] found at the start of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scan {
    /// Bytes of the command, terminators included.
    pub len: usize,
    /// Its arguments (0: an empty command, which is skipped).
    pub args: usize,
    pub inline: bool,
}

/// Look at buffered bytes without allocating: `Ok(None)` when the command
/// is not complete yet (and may still be accepted), `Ok(Some(scan))` when
/// one is.
pub fn check(buf: &[u8], limits: &Limits) -> Result<Option<Scan>, RespError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => check_multibulk(buf, limits),
        Some(_) => check_inline(buf, limits),
    }
}

fn check_inline(buf: &[u8], limits: &Limits) -> Result<Option<Scan>, RespError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        return if buf.len() > limits.max_inline {
            Err(RespError::InlineTooLong)
        } else {
            Ok(None)
        };
    };
    if nl > limits.max_inline {
        return Err(RespError::InlineTooLong);
    }
    let args = inline_words(&buf[..nl]).count();
    if args > limits.max_args {
        return Err(RespError::MultibulkLength);
    }
    Ok(Some(Scan {
        len: nl + 1,
        args,
        inline: true,
    }))
}

/// The words of an inline line (without its `\n`; a `\r` before it is
/// whitespace like any other).
fn inline_words(line: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return None;
        }
        let start = i;
        while i < line.len() && !line[i].is_ascii_whitespace() {
            i += 1;
        }
        Some((start, i))
    })
}

/// A header line at `buf[at..]` (`*` or `$` already seen at `at`): its
/// number and where the next line starts, or `None` when not all here.
fn header_line(
    buf: &[u8],
    at: usize,
    limits: &Limits,
    too_long: RespError,
    invalid: RespError,
) -> Result<Option<(i64, usize)>, RespError> {
    let rest = &buf[at + 1..];
    let Some(cr) = rest.iter().position(|&b| b == b'\r') else {
        return if rest.len() > limits.max_inline {
            Err(too_long)
        } else {
            Ok(None)
        };
    };
    if cr > limits.max_inline {
        return Err(too_long);
    }
    let Some(&lf) = rest.get(cr + 1) else {
        return Ok(None);
    };
    if lf != b'\n' {
        return Err(invalid);
    }
    let n = parse_int(&rest[..cr]).ok_or(invalid)?;
    Ok(Some((n, at + 1 + cr + 2)))
}

/// A decimal integer as Redis's `string2ll` accepts it: an optional `-`,
/// digits, no leading zeros (but "0"), no `+`, no spaces, no overflow.
fn parse_int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if neg {
        (v != 0).then_some(v)
    } else {
        v.checked_neg()
    }
}

fn check_multibulk(buf: &[u8], limits: &Limits) -> Result<Option<Scan>, RespError> {
    let Some((count, mut at)) = header_line(
        buf,
        0,
        limits,
        RespError::CountLineTooLong,
        RespError::MultibulkLength,
    )?
    else {
        return Ok(None);
    };
    if count <= 0 {
        // `*0` and `*-1`: nothing to run (Redis skips them too).
        return Ok(Some(Scan {
            len: at,
            args: 0,
            inline: false,
        }));
    }
    let count = count as u64;
    if count > limits.max_args as u64 {
        return Err(RespError::MultibulkLength);
    }
    let too_large = RespError::TooLarge {
        max: limits.max_command,
    };
    for _ in 0..count {
        if at > limits.max_command {
            return Err(too_large);
        }
        let Some(&first) = buf.get(at) else {
            return Ok(None);
        };
        if first != b'$' {
            return Err(RespError::ExpectedBulk(first));
        }
        let Some((len, data)) = header_line(
            buf,
            at,
            limits,
            RespError::BulkLineTooLong,
            RespError::BulkLength,
        )?
        else {
            return Ok(None);
        };
        if len < 0 || len as u64 > limits.max_bulk as u64 {
            return Err(RespError::BulkLength);
        }
        let end = data + len as usize;
        if end + 2 > limits.max_command {
            return Err(too_large);
        }
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(RespError::MissingCrlf);
        }
        at = end + 2;
    }
    Ok(Some(Scan {
        len: at,
        args: count as usize,
        inline: false,
    }))
}

/// The complete multibulk commands at the start of `buf`, left where they
/// are: each one's first two arguments (the name, and the first argument
/// when there is one). Stops at the first command that hasn't fully
/// arrived, that [`check`] refuses, or that is an inline command. For
/// looking ahead (a server prefetching what the commands will touch), never
/// for answering: [`parse`] takes them.
pub fn peek_commands<'a>(
    buf: &'a [u8],
    limits: &'a Limits,
) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
    let mut rest = buf;
    std::iter::from_fn(move || loop {
        if rest.first() != Some(&b'*') {
            return None;
        }
        let scan = check_multibulk(rest, limits).ok()??;
        let (command, after) = rest.split_at(scan.len);
        rest = after;
        if scan.args == 0 {
            continue;
        }
        // Checked: every header is well formed and in bounds.
        let mut args = bulk_args(command).take(2);
        let name = args.next()?;
        return Some((name, args.next()));
    })
}

/// The arguments of a multibulk command [`check_multibulk`] accepted.
fn bulk_args(command: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = command
        .iter()
        .position(|&b| b == b'\n')
        .map_or(command.len(), |p| p + 1);
    std::iter::from_fn(move || {
        let rest = command.get(at..)?;
        let nl = rest.iter().position(|&b| b == b'\n')?;
        let len = parse_int(rest.get(1..nl.checked_sub(1)?)?)? as usize;
        let data = at + nl + 1;
        let arg = command.get(data..data + len)?;
        at = data + len + 2;
        Some(arg)
    })
}

/// Split the next command off `buf`: its arguments, sliced out of the
/// buffer without copying. `Ok(None)`: not complete yet. Empty commands
/// (`*0`, blank lines) are consumed and skipped.
pub fn parse(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, RespError> {
    loop {
        let Some(scan) = check(buf, limits)? else {
            return Ok(None);
        };
        let raw = buf.split_to(scan.len).freeze();
        if scan.args == 0 {
            continue;
        }
        let mut args = Vec::with_capacity(scan.args);
        if scan.inline {
            let line = &raw[..raw.len() - 1];
            args.extend(inline_words(line).map(|(s, e)| raw.slice(s..e)));
        } else {
            // Checked above: every header is well formed and in bounds.
            args.extend(bulk_args(&raw).map(|a| raw.slice_ref(a)));
        }
        return Ok(Some(args));
    }
}

/// Reply writers. `resp3`: the connection said `HELLO 3`; where RESP3 has a
/// type of its own (null, map) it is used, otherwise RESP2's.
pub mod write {
    use super::*;

    /// `+OK` and the like. Line breaks in `s` become spaces.
    pub fn simple(out: &mut BytesMut, s: &str) {
        out.put_u8(b'+');
        put_line(out, s.as_bytes());
    }

    /// `-PREFIX message`. Line breaks in `s` become spaces.
    pub fn error(out: &mut BytesMut, s: &str) {
        out.put_u8(b'-');
        put_line(out, s.as_bytes());
    }

    pub fn integer(out: &mut BytesMut, v: i64) {
        out.put_u8(b':');
        put_decimal(out, v);
        out.put_slice(b"\r\n");
    }

    pub fn bulk(out: &mut BytesMut, v: &[u8]) {
        out.put_u8(b'$');
        put_decimal(out, v.len() as i64);
        out.put_slice(b"\r\n");
        out.put_slice(v);
        out.put_slice(b"\r\n");
    }

    /// The null reply: `$-1` in RESP2, `_` in RESP3.
    pub fn null(out: &mut BytesMut, resp3: bool) {
        out.put_slice(if resp3 { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// A null array (RESP2 `*-1`, RESP3 `_`).
    pub fn null_array(out: &mut BytesMut, resp3: bool) {
        out.put_slice(if resp3 { b"_\r\n" } else { b"*-1\r\n" });
    }

    pub fn array(out: &mut BytesMut, len: usize) {
        out.put_u8(b'*');
        put_decimal(out, len as i64);
        out.put_slice(b"\r\n");
    }

    /// A map of `pairs` entries: `%` in RESP3, a flat array of twice as
    /// many elements in RESP2.
    pub fn map(out: &mut BytesMut, pairs: usize, resp3: bool) {
        if resp3 {
            out.put_u8(b'%');
            put_decimal(out, pairs as i64);
            out.put_slice(b"\r\n");
        } else {
            array(out, pairs * 2);
        }
    }

    fn put_line(out: &mut BytesMut, s: &[u8]) {
        out.extend(
            s.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        out.put_slice(b"\r\n");
    }

    fn put_decimal(out: &mut BytesMut, v: i64) {
        let mut digits = [0u8; 20];
        let mut n = v.unsigned_abs();
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        if v < 0 {
            out.put_u8(b'-');
        }
        out.put_slice(&digits[i..]);
    }
}

#[cfg(test)]
mod tests;
