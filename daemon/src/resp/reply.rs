//! Rush answers → RESP replies, and the one table from Rush error codes to
//! Redis error prefixes.

use super::command::{Greeting, Shape};
use bytes::{Bytes, BytesMut};
use rush_protocol::cmd::TtlReply;
use rush_protocol::frame::{self, STATUS_OK};
use rush_protocol::resp::write;
use rush_protocol::{ErrorCode, ErrorDetail, Opcode, Reply, RushError};

/// An answer frame's body as a reply or the server's error.
pub fn decode_answer(opcode: u8, body: Bytes) -> Result<Reply, RushError> {
    let Some(op) = Opcode::from_u8(opcode) else {
        return Err(RushError::internal("an answer with an unknown opcode"));
    };
    if body.first() == Some(&STATUS_OK) {
        Reply::decode(op, body.slice(1..))
            .map_err(|e| RushError::internal(format!("undecodable answer: {e}")))
    } else {
        match frame::decode_response::<()>(body) {
            Ok(Err(e)) => Err(e),
            _ => Err(RushError::internal("undecodable error answer")),
        }
    }
}

/// The Redis error prefix of each Rush error code, and the message Redis
/// clients know where Redis has a fixed one.
pub fn error_line(e: &RushError) -> String {
    let prefix = match e.code {
        ErrorCode::WrongType if e.message.contains("not an integer") => {
            return "ERR value is not an integer or out of range".into()
        }
        ErrorCode::WrongType => {
            return "WRONGTYPE Operation against a key holding the wrong kind of value".into()
        }
        // The address is the RESP one ([`redirect_to_resp`] made it so).
        ErrorCode::Moved => {
            if let ErrorDetail::Redirect { slot, addr } = &e.detail {
                return format!("MOVED {slot} {addr}");
            }
            "MOVED"
        }
        ErrorCode::CrossSlot => {
            return "CROSSSLOT Keys in request don't hash to the same slot".into()
        }
        // Mid-move (the slot is frozen while it is copied): nothing was
        // done, resend shortly, as Redis's TRYAGAIN. Rush never answers
        // ASK (a slot moves whole: see `crate::cluster`).
        ErrorCode::TryAgain => "TRYAGAIN",
        ErrorCode::Busy => "BUSY",
        ErrorCode::Unauthorized => {
            return "WRONGPASS invalid username-password pair or user is disabled.".into()
        }
        ErrorCode::Forbidden => "NOPERM",
        ErrorCode::BadRequest
        | ErrorCode::TooLarge
        | ErrorCode::UnknownOpcode
        | ErrorCode::NotFound
        | ErrorCode::Expired
        | ErrorCode::Limited
        | ErrorCode::Empty
        | ErrorCode::Unavailable
        | ErrorCode::Internal
        | ErrorCode::Conflict
        | ErrorCode::Exhausted
        | ErrorCode::UnsupportedVersion
        | ErrorCode::ConditionFailed
        | ErrorCode::Other(_) => "ERR",
    };
    format!("{prefix} {}", e.message)
}

/// A MOVED answer names the owner by its binary address; a RESP client is
/// sent to the owner's RESP address instead: the map's `resp_addr`, else
/// the default layout's (same host, port + 2) — [`Cluster::resp_addr`].
/// Without a node to ask (tests), the default.
///
/// [`Cluster::resp_addr`]: crate::cluster::Cluster::resp_addr
pub fn redirect_to_resp(mut e: RushError, cluster: Option<&crate::cluster::Cluster>) -> RushError {
    if let ErrorDetail::Redirect { addr, .. } = &mut e.detail {
        *addr = match cluster {
            Some(c) => c.resp_addr_of(addr),
            None => rush_protocol::cmd::ClusterNode {
                id: String::new(),
                addr: std::mem::take(addr),
                ranges: Vec::new(),
                resp_addr: None,
                replica_of: None,
            }
            .resp_addr(),
        };
    }
    e
}

/// Write one answer in `shape`. `proto` is the connection's protocol
/// version; HELLO changes it.
pub fn render(out: &mut BytesMut, proto: &mut u8, shape: &Shape, result: Result<Reply, RushError>) {
    if let Shape::Service(s) = shape {
        return super::services::render(out, *proto == 3, s, result);
    }
    let resp3 = *proto == 3;
    let reply = match (shape, result) {
        (Shape::Exec(exec), result) => {
            return super::transaction::render(out, *proto, exec, result)
        }
        (_, Ok(r)) => r,
        // MSETNX, HSETNX: a CHECK of theirs aborted the batch.
        (Shape::IfAllHold { checks }, Err(e))
            if e.code == ErrorCode::ConditionFailed
                && matches!(e.detail, ErrorDetail::BatchIndex { index } if (index as usize) < *checks) =>
        {
            return write::integer(out, 0)
        }
        (Shape::Watch(read), Err(e)) if e.code == ErrorCode::WrongType => {
            let key = match e.detail {
                ErrorDetail::BatchIndex { index } => read.keys.get(index as usize),
                _ => None,
            };
            let key = key.map_or_else(String::new, |k| {
                format!(" '{}'", String::from_utf8_lossy(&k[..k.len().min(128)]))
            });
            return write::error(
                out,
                &format!("ERR WATCH compares string values; the key{key} holds a hash"),
            );
        }
        (_, Err(e)) => return write::error(out, &error_line(&batch_cause(e))),
    };
    match (shape, reply) {
        (Shape::Bulk, Reply::Get(v) | Reply::HGet(v)) => bulk_or_null(out, v, resp3),
        (Shape::Ok | Shape::Watch(_), _) => write::simple(out, "OK"),
        (
            Shape::SetOk,
            Reply::Set(true) | Reply::SetKeepTtl(true) | Reply::Del(true) | Reply::Exists(false),
        ) => write::simple(out, "OK"),
        (
            Shape::SetOk,
            Reply::Set(false) | Reply::SetKeepTtl(false) | Reply::Del(false) | Reply::Exists(true),
        ) => write::null(out, resp3),
        (Shape::SetGet, Reply::Batch(b)) => match b.results.into_iter().next() {
            Some(Reply::Get(v)) => bulk_or_null(out, v, resp3),
            _ => unexpected(out),
        },
        (
            Shape::Flag,
            Reply::Del(f) | Reply::Exists(f) | Reply::Expire(f) | Reply::Set(f) | Reply::Check(f),
        ) => write::integer(out, i64::from(f)),
        (Shape::Present, Reply::HGet(v) | Reply::Get(v)) => {
            write::integer(out, i64::from(v.is_some()))
        }
        (Shape::Integer, Reply::HSet(n) | Reply::HDel(n) | Reply::HLen(n) | Reply::DbSize(n)) => {
            write::integer(out, i64::try_from(n).unwrap_or(i64::MAX))
        }
        (Shape::Integer, Reply::IncrBy(n) | Reply::HIncrBy(n)) => write::integer(out, n),
        (Shape::CountTrue, Reply::Batch(b)) => {
            let n = b
                .results
                .iter()
                .filter(|r| matches!(r, Reply::Del(true) | Reply::Exists(true)))
                .count();
            write::integer(out, n as i64)
        }
        (Shape::Values, Reply::Batch(b)) => {
            write::array(out, b.results.len());
            for r in b.results {
                match r {
                    Reply::Get(v) | Reply::HGet(v) => bulk_or_null(out, v, resp3),
                    _ => write::null(out, resp3),
                }
            }
        }
        (Shape::Persist, Reply::Batch(b)) => {
            let had_ttl = matches!(b.results.first(), Some(Reply::Ttl(TtlReply::Remaining(_))));
            write::integer(out, i64::from(had_ttl))
        }
        (Shape::IfAllHold { .. }, Reply::Batch(_)) => write::integer(out, 1),
        (Shape::Ttl { ms }, Reply::Ttl(t)) => write::integer(
            out,
            match t {
                TtlReply::Missing => -2,
                TtlReply::Persistent => -1,
                // Redis rounds to the nearest second.
                TtlReply::Remaining(r) if !ms => ((r + 500) / 1000) as i64,
                TtlReply::Remaining(r) => r as i64,
            },
        ),
        (Shape::Map, Reply::HGetAll(h)) => {
            write::map(out, h.fields.len(), resp3);
            for (f, v) in h.fields {
                write::bulk(out, &f);
                write::bulk(out, &v);
            }
        }
        (Shape::Hello { proto: None, .. }, Reply::Hello(_)) => write::simple(out, "OK"),
        (
            Shape::Hello {
                proto: Some(p),
                greeting,
            },
            Reply::Hello(_),
        ) => {
            *proto = *p;
            hello_map(out, *p == 3, greeting)
        }
        _ => unexpected(out),
    }
}

/// A BATCH that one RESP command became fails as that command would: its
/// operation's error, without the batch's index.
fn batch_cause(e: RushError) -> RushError {
    match e.detail {
        ErrorDetail::BatchIndex { .. } => RushError::new(e.code, e.message),
        _ => e,
    }
}

fn bulk_or_null(out: &mut BytesMut, v: Option<Bytes>, resp3: bool) {
    match v {
        Some(v) => write::bulk(out, &v),
        None => write::null(out, resp3),
    }
}

fn unexpected(out: &mut BytesMut) {
    write::error(out, "ERR internal: an answer of an unexpected kind");
}

/// HELLO's map: what Redis answers, with Rush's own version.
pub fn hello_map(out: &mut BytesMut, resp3: bool, greeting: &Greeting) {
    write::map(out, 7, resp3);
    write::bulk(out, b"server");
    write::bulk(out, b"rush");
    // The Redis version whose commands Rush follows, as INFO's
    // redis_version: clients read it to pick what they may send.
    write::bulk(out, b"version");
    write::bulk(out, super::node::REDIS_VERSION.as_bytes());
    write::bulk(out, b"proto");
    write::integer(out, if resp3 { 3 } else { 2 });
    write::bulk(out, b"id");
    write::integer(out, i64::try_from(greeting.id).unwrap_or(i64::MAX));
    write::bulk(out, b"mode");
    write::bulk(
        out,
        if greeting.cluster {
            &b"cluster"[..]
        } else {
            b"standalone"
        },
    );
    write::bulk(out, b"role");
    write::bulk(out, b"master");
    write::bulk(out, b"modules");
    write::array(out, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_table() {
        let moved = redirect_to_resp(RushError::moved(12, "10.0.0.2:7379"), None);
        assert_eq!(error_line(&moved), "MOVED 12 10.0.0.2:7381");
        assert_eq!(error_line(&RushError::busy("full")), "BUSY full");
        assert!(error_line(&RushError::wrong_type("GET on a hash")).starts_with("WRONGTYPE "));
        assert!(error_line(&RushError::wrong_type("value is not an integer")).starts_with("ERR "));
        assert_eq!(
            error_line(&RushError::try_again(3)).split(' ').next(),
            Some("TRYAGAIN")
        );
        assert!(error_line(&RushError::new(ErrorCode::CrossSlot, "x")).starts_with("CROSSSLOT "));
        let moved = redirect_to_resp(RushError::moved(1, "[::1]:7379"), None);
        assert_eq!(error_line(&moved), "MOVED 1 [::1]:7381");
    }
}
