//! `ENVELOPE.CREATE`, `ENVELOPE.GRAB`, `ENVELOPE.INFO`, and the admin's
//! `ENVELOPE.REFUNDS`, `ENVELOPE.ACK`, `ENVELOPE.AUDIT`: red envelopes
//! (`daemon/src/envelopes/`).
//!
//! The sender is `ENVELOPE.CREATE`'s key (the envelope lives in its CRC16
//! slot). An envelope id carries that slot (`id % 16384`), which is not the
//! CRC16 of the id: `GRAB` and `INFO` declare no key and rely on `MOVED`.
//! The refund stream and the audit are the node's (every shard's).

use super::{once, ArgError, Args, Parsed, Value, Writer};
use rush_protocol::cmd::{
    EnvelopeAudit, EnvelopeAuditReply, EnvelopeCreate, EnvelopeGrab, EnvelopeInfo,
    EnvelopeInfoReply, EnvelopeMode, EnvelopeRefunds, EnvelopeRefundsAck, EnvelopeRefundsReply,
    RefundCursor,
};
use rush_protocol::limits::MAX_REFUNDS_PAGE;
use rush_protocol::{ErrorCode, Reply, RushError};

/// Refunds one `ENVELOPE.REFUNDS` returns without `COUNT`.
const DEFAULT_REFUNDS_PAGE: u32 = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    Created,
    Grabbed,
    Info,
    Refunds,
    Acked,
    Audit,
}

pub(super) fn decode(name: &str, a: &mut Args) -> Option<Parsed<Shape>> {
    Some(match name {
        "envelope.create" => create(a),
        "envelope.grab" => id(a).and_then(|id| {
            let user = a.bytes()?;
            Ok((EnvelopeGrab { id, user }.into(), Shape::Grabbed))
        }),
        "envelope.info" => id(a).map(|id| (EnvelopeInfo { id }.into(), Shape::Info)),
        "envelope.refunds" => refunds(a),
        "envelope.ack" => {
            cursor(a).map(|cursor| (EnvelopeRefundsAck { cursor }.into(), Shape::Acked))
        }
        "envelope.audit" => Ok((EnvelopeAudit {}.into(), Shape::Audit)),
        _ => return None,
    })
}

/// An envelope id, as `ENVELOPE.CREATE` answered it.
fn id(a: &mut Args) -> Result<u64, ArgError> {
    a.u64()
}

fn cursor(a: &mut Args) -> Result<RefundCursor, ArgError> {
    a.text("the cursor")?.parse().map_err(ArgError::Invalid)
}

/// `ENVELOPE.CREATE sender total_cents count [MODE RANDOM|FIXED] [EX s|PX ms]
/// [IDEMPOTENCY key]`.
fn create(a: &mut Args) -> Parsed<Shape> {
    let sender = a.bytes()?;
    let total_cents = a.u64()?;
    let count = u32::try_from(a.u64()?).map_err(|_| ArgError::NotInteger)?;
    let mut c = EnvelopeCreate::new(sender, total_cents, count);
    let (mut mode, mut expires, mut key) = (None, None, None);
    while !a.is_empty() {
        match a.keyword()?.as_slice() {
            b"MODE" => {
                let m = a.text("the mode")?.to_ascii_lowercase();
                once(
                    &mut mode,
                    m.parse::<EnvelopeMode>().map_err(ArgError::Invalid)?,
                )?
            }
            b"EX" => once(&mut expires, a.ttl_ms(true)?)?,
            b"PX" => once(&mut expires, a.ttl_ms(false)?)?,
            b"IDEMPOTENCY" => once(&mut key, a.bytes()?)?,
            _ => return Err(ArgError::Syntax),
        }
    }
    c.mode = mode.unwrap_or_default();
    c.expires_in_ms = expires.unwrap_or(0);
    c.idempotency_key = key;
    Ok((c.into(), Shape::Created))
}

/// `ENVELOPE.REFUNDS [AFTER cursor] [COUNT n]`.
fn refunds(a: &mut Args) -> Parsed<Shape> {
    let (mut after, mut count) = (None, None);
    while !a.is_empty() {
        match a.keyword()?.as_slice() {
            b"AFTER" => once(&mut after, cursor(a)?)?,
            b"COUNT" => {
                let n = a.u64()?;
                let n = u32::try_from(n)
                    .ok()
                    .filter(|&n| n >= 1 && n as usize <= MAX_REFUNDS_PAGE)
                    .ok_or_else(|| {
                        ArgError::Invalid(format!("COUNT must be within 1..={MAX_REFUNDS_PAGE}"))
                    })?;
                once(&mut count, n)?
            }
            _ => return Err(ArgError::Syntax),
        }
    }
    let r = EnvelopeRefunds {
        after: after.unwrap_or(RefundCursor::START),
        limit: count.unwrap_or(DEFAULT_REFUNDS_PAGE),
    };
    Ok((r.into(), Shape::Refunds))
}

pub(super) fn render(w: &mut Writer, shape: &Shape, result: Result<Reply, RushError>) {
    match (shape, result) {
        (Shape::Created, Ok(Reply::EnvelopeCreate(c))) => w.record(&[
            ("id", Value::U64(c.id)),
            ("expires_at_ms", Value::U64(c.expires_at_ms)),
        ]),
        (Shape::Grabbed, Ok(Reply::EnvelopeGrab(g))) => grab(w, g.amount_cents, g.repeated, ""),
        // No share for this user: a reply, not an error.
        (Shape::Grabbed, Err(e)) if e.code == ErrorCode::Empty => grab(w, 0, false, "empty"),
        (Shape::Grabbed, Err(e)) if e.code == ErrorCode::Expired => grab(w, 0, false, "expired"),
        (Shape::Info, Ok(Reply::EnvelopeInfo(i))) => info(w, &i),
        (Shape::Grabbed | Shape::Info, Err(e)) if e.code == ErrorCode::NotFound => w.null(),
        (Shape::Refunds, Ok(Reply::EnvelopeRefunds(r))) => refund_page(w, &r),
        (Shape::Acked, Ok(Reply::EnvelopeRefundsAck(n))) => w.u64(n),
        (Shape::Audit, Ok(Reply::EnvelopeAudit(a))) => audit(w, &a),
        (_, Err(e)) => w.error(&e),
        (_, Ok(_)) => w.unexpected(),
    }
}

/// The same four fields whether the user got a share or not.
fn grab(w: &mut Writer, amount_cents: u64, repeated: bool, denied: &str) {
    w.record(&[
        ("grabbed", Value::Flag(denied.is_empty())),
        ("amount_cents", Value::U64(amount_cents)),
        ("repeated", Value::Flag(repeated)),
        ("reason", Value::Bulk(denied.as_bytes())),
    ]);
}

fn info(w: &mut Writer, i: &EnvelopeInfoReply) {
    let fields = [
        ("id", Value::U64(i.id)),
        ("sender", Value::Bulk(&i.sender)),
        ("mode", Value::Bulk(i.mode.name().as_bytes())),
        ("state", Value::Bulk(i.state.name().as_bytes())),
        ("total_cents", Value::U64(i.total_cents)),
        ("remaining_cents", Value::U64(i.remaining_cents)),
        ("refunded_cents", Value::U64(i.refunded_cents)),
        ("count", Value::U64(u64::from(i.count))),
        ("grabbed", Value::U64(u64::from(i.grabbed))),
        ("created_at_ms", Value::U64(i.created_at_ms)),
        ("expires_at_ms", Value::U64(i.expires_at_ms)),
    ];
    w.map(fields.len() + 1);
    w.fields(&fields);
    w.field("grabs");
    w.array(i.grabs.len());
    for g in &i.grabs {
        w.record(&[
            ("user", Value::Bulk(&g.user)),
            ("amount_cents", Value::U64(g.amount_cents)),
            ("at_ms", Value::U64(g.at_ms)),
        ]);
    }
}

fn refund_page(w: &mut Writer, r: &EnvelopeRefundsReply) {
    w.map(3);
    w.field("refunds");
    w.array(r.refunds.len());
    for f in &r.refunds {
        w.record(&[
            ("envelope_id", Value::U64(f.envelope_id())),
            ("cursor", Value::Bulk(f.cursor.to_string().as_bytes())),
            ("sender", Value::Bulk(&f.sender)),
            ("amount_cents", Value::U64(f.amount_cents)),
            ("refunded_at_ms", Value::U64(f.refunded_at_ms)),
        ]);
    }
    w.field("next");
    w.bulk(r.next.to_string().as_bytes());
    w.field("more");
    w.flag(r.more);
}

fn audit(w: &mut Writer, a: &EnvelopeAuditReply) {
    let fields = [
        ("ok", Value::Flag(a.ok())),
        ("envelopes", Value::U64(a.envelopes)),
        ("grabs", Value::U64(a.grabs)),
        ("open", Value::U64(a.open)),
        ("in_flight_cents", Value::U64(a.in_flight_cents)),
        ("refunded", Value::U64(a.refunded)),
        ("problem_count", Value::U64(a.problem_count)),
    ];
    w.map(fields.len() + 1);
    w.fields(&fields);
    w.field("problems");
    w.array(a.problems.len());
    for p in &a.problems {
        w.bulk(p.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{refused, run};
    use super::super::ServiceShape;
    use super::*;
    use bytes::Bytes;
    use rush_protocol::Request;

    #[test]
    fn create_options() {
        match run("ENVELOPE.CREATE {s}bob 1000 10 MODE fixed EX 3600 IDEMPOTENCY k-1") {
            Ok((Request::EnvelopeCreate(c), ServiceShape::Envelope(Shape::Created))) => assert_eq!(
                c,
                EnvelopeCreate {
                    sender: Bytes::from_static(b"{s}bob"),
                    total_cents: 1000,
                    count: 10,
                    mode: EnvelopeMode::Fixed,
                    expires_in_ms: 3_600_000,
                    idempotency_key: Some(Bytes::from_static(b"k-1")),
                }
            ),
            other => panic!("{other:?}"),
        }
        match run("ENVELOPE.CREATE bob 5 2") {
            Ok((Request::EnvelopeCreate(c), _)) => {
                assert_eq!(
                    (c.mode, c.expires_in_ms, c.idempotency_key),
                    (EnvelopeMode::Random, 0, None)
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            refused("ENVELOPE.CREATE bob 5 4294967296"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            refused("ENVELOPE.CREATE bob 5.5 2"),
            "ERR value is not an integer or out of range"
        );
        assert!(refused("ENVELOPE.CREATE bob 5 2 MODE lucky").contains("is not a mode"));
        assert_eq!(
            refused("ENVELOPE.CREATE bob 5 2 EX 1 PX 1"),
            "ERR syntax error"
        );
        assert_eq!(
            refused("ENVELOPE.CREATE bob 5 2 PX 0"),
            "ERR invalid expire time in 'envelope.create' command"
        );
    }

    #[test]
    fn grab_and_info_take_an_id() {
        assert!(matches!(
            run("ENVELOPE.GRAB 18446744073709551615 amy"),
            Ok((Request::EnvelopeGrab(g), ServiceShape::Envelope(Shape::Grabbed))) if g.id == u64::MAX && g.user == "amy"
        ));
        assert!(matches!(
            run("ENVELOPE.INFO 16385"),
            Ok((Request::EnvelopeInfo(EnvelopeInfo { id: 16385 }), _))
        ));
        assert_eq!(
            refused("ENVELOPE.GRAB x amy"),
            "ERR value is not an integer or out of range"
        );
    }

    #[test]
    fn refunds_and_ack_take_cursors() {
        assert!(matches!(
            run("ENVELOPE.REFUNDS"),
            Ok((
                Request::EnvelopeRefunds(EnvelopeRefunds {
                    after: RefundCursor::START,
                    limit: 100
                }),
                _
            ))
        ));
        assert!(matches!(
            run("ENVELOPE.REFUNDS after 17-99 COUNT 5"),
            Ok((
                Request::EnvelopeRefunds(EnvelopeRefunds {
                    after: RefundCursor { stamp: 17, id: 99 },
                    limit: 5
                }),
                _
            ))
        ));
        assert!(refused("ENVELOPE.REFUNDS COUNT 0").contains("COUNT must be within 1..=10000"));
        assert!(refused("ENVELOPE.REFUNDS AFTER 17").contains("is not a refund cursor"));
        assert!(refused("ENVELOPE.REFUNDS AFTER").starts_with("ERR wrong number of arguments"));
        assert!(matches!(
            run("ENVELOPE.ACK 3-4"),
            Ok((Request::EnvelopeRefundsAck(a), ServiceShape::Envelope(Shape::Acked))) if a.cursor.id == 4
        ));
        assert!(matches!(
            run("ENVELOPE.AUDIT"),
            Ok((Request::EnvelopeAudit(_), _))
        ));
    }
}
