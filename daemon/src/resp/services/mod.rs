//! Rush's four services as RESP commands, the way Redis modules add theirs
//! (redis-cell's `CL.THROTTLE`, RedisBloom's `BF.*`): `LINK.*`, `LIMIT.*`,
//! `CATALOG.*` and `ENVELOPE.*`, one file per family.
//!
//! Each command becomes the binary request a Rush client would send, so
//! routing, admission, group commit, durability and the admin rule are the
//! binary path's; only the reply is written here, in the family's own
//! [`ServiceShape`]. Replies are maps in RESP3 and flat field/value arrays in
//! RESP2 (like `HGETALL`), with their fields always in the documented order,
//! so a RESP2 caller may read them by position too. A denial (an order over
//! its limit, an envelope with no share left) is such a reply, never an
//! error string to parse; a missing link, order or envelope is null. True
//! errors (bad arguments, `NOPERM`, `BUSY`, `MOVED`...) go through
//! [`super::reply::error_line`], the one table of Rush codes → Redis errors.
//!
//! `protocol/RESP.md` ("Services") documents every command.

mod catalog;
mod envelopes;
mod limits;
mod links;

use super::command::{parse_i64, Decoded, Now, Shape};
use super::reply::error_line;
use bytes::{BufMut, Bytes, BytesMut};
use rush_protocol::resp::write;
use rush_protocol::{Reply, Request, RushError};

/// How a service command's answer is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceShape {
    Link(links::Shape),
    Limit(limits::Shape),
    Catalog(catalog::Shape),
    Envelope(envelopes::Shape),
}

/// A service command (`name` in lower case, `args` after the name), or
/// `None` when `name` is no service command. Arity was checked against the
/// command table already.
pub fn decode(name: &str, args: &[Bytes]) -> Option<Decoded> {
    let (family, _) = name.split_once('.')?;
    let mut a = Args::new(args);
    let decoded = match family {
        "link" => in_family(links::decode(name, &mut a)?, ServiceShape::Link),
        "limit" => in_family(limits::decode(name, &mut a)?, ServiceShape::Limit),
        "catalog" => in_family(catalog::decode(name, &mut a)?, ServiceShape::Catalog),
        "envelope" => in_family(envelopes::decode(name, &mut a)?, ServiceShape::Envelope),
        _ => return None,
    };
    Some(match decoded {
        Ok((request, shape)) => Decoded::Run(request, Shape::Service(shape)),
        Err(e) => Decoded::Now(Now::Error(e.line(name))),
    })
}

/// Write a service command's answer.
pub fn render(
    out: &mut BytesMut,
    resp3: bool,
    shape: &ServiceShape,
    result: Result<Reply, RushError>,
) {
    let mut w = Writer { out, resp3 };
    match shape {
        ServiceShape::Link(s) => links::render(&mut w, s, result),
        ServiceShape::Limit(s) => limits::render(&mut w, s, result),
        ServiceShape::Catalog(s) => catalog::render(&mut w, s, result),
        ServiceShape::Envelope(s) => envelopes::render(&mut w, s, result),
    }
}

/// What one family's decoder makes of a command.
type Parsed<S> = Result<(Request, S), ArgError>;

/// A family's answer shape as a [`ServiceShape`].
fn in_family<S>(parsed: Parsed<S>, shape: fn(S) -> ServiceShape) -> Parsed<ServiceShape> {
    parsed.map(|(request, s)| (request, shape(s)))
}

/// Why a command's arguments are refused, before anything is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// Too few or too many arguments, or an option without its value.
    Arity,
    /// An unknown, repeated or misplaced option (Redis's `ERR syntax error`).
    Syntax,
    /// Not an integer, or out of the argument's range.
    NotInteger,
    /// A time to live that is not positive.
    ExpireTime,
    /// A subcommand the command does not have; the hint names the ones it has.
    UnknownSubcommand(String, &'static str),
    /// A well-formed argument that is wrong: why, in a sentence.
    Invalid(String),
}

impl ArgError {
    /// `sub` is none of the subcommands `hint` names.
    fn unknown_subcommand(sub: &[u8], hint: &'static str) -> Self {
        ArgError::UnknownSubcommand(String::from_utf8_lossy(sub).into_owned(), hint)
    }

    /// More than `max` of something: "`holder` has at most `max` `items`".
    fn at_most(holder: &str, max: usize, items: &str) -> Self {
        ArgError::Invalid(format!("{holder} has at most {max} {items}"))
    }

    /// The error line (Redis's wording where Redis has one).
    pub fn line(&self, command: &str) -> String {
        match self {
            ArgError::Arity => {
                format!("ERR wrong number of arguments for '{command}' command")
            }
            ArgError::Syntax => "ERR syntax error".into(),
            ArgError::NotInteger => "ERR value is not an integer or out of range".into(),
            ArgError::ExpireTime => format!("ERR invalid expire time in '{command}' command"),
            ArgError::UnknownSubcommand(sub, hint) => format!(
                "ERR unknown subcommand '{sub}'. Try {} {hint}.",
                command.to_ascii_uppercase()
            ),
            ArgError::Invalid(why) => format!("ERR {why}"),
        }
    }
}

/// A command's arguments, read left to right.
struct Args<'a> {
    args: &'a [Bytes],
    at: usize,
}

impl<'a> Args<'a> {
    fn new(args: &'a [Bytes]) -> Self {
        Args { args, at: 0 }
    }

    fn is_empty(&self) -> bool {
        self.at >= self.args.len()
    }

    fn left(&self) -> usize {
        self.args.len().saturating_sub(self.at)
    }

    /// Nothing may follow.
    fn end(&self) -> Result<(), ArgError> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(ArgError::Arity)
        }
    }

    /// The rest of the arguments, two at a time, each pair read by `pair`:
    /// at least one pair, and no more than `max` ([`ArgError::at_most`] says
    /// so with `holder` and `items`).
    fn pairs<T>(
        &mut self,
        max: usize,
        (holder, items): (&str, &str),
        mut pair: impl FnMut(&mut Self) -> Result<T, ArgError>,
    ) -> Result<Vec<T>, ArgError> {
        if self.is_empty() || !self.left().is_multiple_of(2) {
            return Err(ArgError::Arity);
        }
        if self.left() / 2 > max {
            return Err(ArgError::at_most(holder, max, items));
        }
        let mut pairs = Vec::with_capacity(self.left() / 2);
        while !self.is_empty() {
            pairs.push(pair(self)?);
        }
        Ok(pairs)
    }

    /// The next argument as it came.
    fn bytes(&mut self) -> Result<Bytes, ArgError> {
        let b = self.args.get(self.at).cloned().ok_or(ArgError::Arity)?;
        self.at += 1;
        Ok(b)
    }

    /// The next argument as UTF-8 text.
    fn text(&mut self, what: &str) -> Result<String, ArgError> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec())
            .map_err(|_| ArgError::Invalid(format!("{what} must be UTF-8 text")))
    }

    /// The next argument as an option keyword, upper case.
    fn keyword(&mut self) -> Result<Vec<u8>, ArgError> {
        Ok(self.bytes()?.to_ascii_uppercase())
    }

    /// The next argument as a non-negative integer.
    fn u64(&mut self) -> Result<u64, ArgError> {
        parse_u64(&self.bytes()?).ok_or(ArgError::NotInteger)
    }

    /// The next argument as a positive time to live: `EX` seconds or `PX`
    /// milliseconds, in ms.
    fn ttl_ms(&mut self, seconds: bool) -> Result<u64, ArgError> {
        let n = parse_i64(&self.bytes()?).ok_or(ArgError::NotInteger)?;
        if n <= 0 {
            return Err(ArgError::ExpireTime);
        }
        let ms = if seconds {
            n.checked_mul(1000)
        } else {
            Some(n)
        };
        ms.map(|ms| ms as u64).ok_or(ArgError::ExpireTime)
    }
}

/// An option may be given once.
fn once<T>(slot: &mut Option<T>, value: T) -> Result<(), ArgError> {
    if slot.is_some() {
        return Err(ArgError::Syntax);
    }
    *slot = Some(value);
    Ok(())
}

/// A decimal u64 as Redis reads integers (no sign, no spaces, no leading
/// zeros).
fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || (b.len() > 1 && b[0] == b'0') || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// A field's value in a reply map, as [`Writer`] writes it.
#[derive(Clone, Copy)]
enum Value<'a> {
    Bulk(&'a [u8]),
    OptBulk(Option<&'a [u8]>),
    U64(u64),
    OptU64(Option<u64>),
    Int(i64),
    Flag(bool),
}

/// Writes one reply in the connection's protocol version.
struct Writer<'a> {
    out: &'a mut BytesMut,
    resp3: bool,
}

impl Writer<'_> {
    /// A map of `pairs` fields (a flat array of 2 × `pairs` in RESP2).
    fn map(&mut self, pairs: usize) {
        write::map(self.out, pairs, self.resp3);
    }

    fn array(&mut self, len: usize) {
        write::array(self.out, len);
    }

    fn bulk(&mut self, v: &[u8]) {
        write::bulk(self.out, v);
    }

    /// A field name, then its value is written by the caller.
    fn field(&mut self, name: &str) {
        write::bulk(self.out, name.as_bytes());
    }

    /// A map of these fields, in order: its size is theirs.
    fn record(&mut self, fields: &[(&str, Value)]) {
        self.map(fields.len());
        self.fields(fields);
    }

    /// These fields, in order, inside a map the caller sized (fields with
    /// nested values follow them).
    fn fields(&mut self, fields: &[(&str, Value)]) {
        for (name, v) in fields {
            self.field(name);
            match *v {
                Value::Bulk(v) => self.bulk(v),
                Value::OptBulk(v) => self.opt_bulk(v),
                Value::U64(v) => self.u64(v),
                Value::OptU64(v) => self.opt_u64(v),
                Value::Int(v) => self.int(v),
                Value::Flag(v) => self.flag(v),
            }
        }
    }

    fn int(&mut self, v: i64) {
        write::integer(self.out, v);
    }

    /// An unsigned count, amount or time: an integer, or past `i64::MAX`
    /// (no count of Rush's gets there) a big number in RESP3 and its
    /// decimal digits as bulk in RESP2.
    fn u64(&mut self, v: u64) {
        match i64::try_from(v) {
            Ok(v) => write::integer(self.out, v),
            Err(_) if self.resp3 => {
                self.out.put_u8(b'(');
                self.out.put_slice(v.to_string().as_bytes());
                self.out.put_slice(b"\r\n");
            }
            Err(_) => write::bulk(self.out, v.to_string().as_bytes()),
        }
    }

    /// `:1` / `:0`, as Redis commands answer yes and no.
    fn flag(&mut self, v: bool) {
        write::integer(self.out, i64::from(v));
    }

    fn null(&mut self) {
        write::null(self.out, self.resp3);
    }

    fn opt_bulk(&mut self, v: Option<&[u8]>) {
        match v {
            Some(v) => self.bulk(v),
            None => self.null(),
        }
    }

    fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(v) => self.u64(v),
            None => self.null(),
        }
    }

    fn ok(&mut self) {
        write::simple(self.out, "OK");
    }

    /// A true error, through the one table of Rush codes → Redis errors.
    fn error(&mut self, e: &RushError) {
        write::error(self.out, &error_line(e));
    }

    /// An answer that doesn't fit the command: a bug, said as one.
    fn unexpected(&mut self) {
        write::error(self.out, "ERR internal: an answer of an unexpected kind");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn args(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|w| Bytes::from(w.to_string())).collect()
    }

    /// A line of arguments (the command's name first) decoded, as the
    /// listener decodes it.
    pub(super) fn run(line: &str) -> Result<(Request, ServiceShape), String> {
        let a = args(line);
        let name = a[0].to_ascii_lowercase();
        let name = std::str::from_utf8(&name).unwrap();
        match super::super::command::decode(a.clone(), true, false, 0) {
            Decoded::Run(r, Shape::Service(s)) => Ok((r, s)),
            Decoded::Now(Now::Error(e)) => Err(e),
            _ => panic!("{name}: not a service command"),
        }
    }

    pub(super) fn refused(line: &str) -> String {
        match run(line) {
            Err(e) => e,
            Ok((r, _)) => panic!("{line:?} was accepted: {r:?}"),
        }
    }

    #[test]
    fn integers_are_read_as_redis_reads_them() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b"01",
            b"1.5",
            b"18446744073709551616",
            b" 1",
        ] {
            assert_eq!(parse_u64(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn big_unsigned_values_stay_exact() {
        let mut out = BytesMut::new();
        Writer {
            out: &mut out,
            resp3: true,
        }
        .u64(u64::MAX);
        Writer {
            out: &mut out,
            resp3: false,
        }
        .u64(u64::MAX);
        Writer {
            out: &mut out,
            resp3: false,
        }
        .u64(7);
        assert_eq!(
            &out[..],
            b"(18446744073709551615\r\n$20\r\n18446744073709551615\r\n:7\r\n"
        );
    }

    #[test]
    fn error_lines() {
        assert_eq!(
            ArgError::Arity.line("limit.acquire"),
            "ERR wrong number of arguments for 'limit.acquire' command"
        );
        assert_eq!(
            ArgError::UnknownSubcommand("x".into(), "SET, GET or LIST").line("limit.policy"),
            "ERR unknown subcommand 'x'. Try LIMIT.POLICY SET, GET or LIST."
        );
        assert_eq!(
            ArgError::ExpireTime.line("link.shorten"),
            "ERR invalid expire time in 'link.shorten' command"
        );
    }
}
