//! MULTI / EXEC / DISCARD and WATCH / UNWATCH: a connection's transaction,
//! run as ONE binary BATCH, so it is atomic on the shard that owns its slot
//! — all of it is written, in one storage write, or none.
//!
//! - MULTI starts queueing: each command is decoded and checked when it
//!   comes (arity, arguments, its own keys' slot, whether it can go in a
//!   BATCH) and answers `+QUEUED`, or its error — which makes EXEC answer
//!   `-EXECABORT` (Redis does so for the errors it finds while queueing;
//!   Rush finds argument errors then too, where Redis reports them inside
//!   EXEC's array).
//! - EXEC sends the queued commands' operations as one BATCH and answers
//!   the array of each command's reply in its own shape. A command that
//!   fails while the batch runs (WRONGTYPE, a counter that is no integer)
//!   fails all of it: nothing is written and EXEC answers `-EXECABORT`
//!   naming the command (Redis would run the others).
//! - WATCH reads its keys' values (a BATCH of GETs) and the connection
//!   keeps them; EXEC puts a CHECK per key (equal to that value, or
//!   missing) at the head of its batch. A key whose value changed (or
//!   expired, or came or went) answers EXEC with a null array and nothing
//!   is written. A key rewritten with the same value, or whose TTL alone
//!   changed, does not abort; nor can a key holding a hash be watched.
//!
//! `protocol/RESP.md` ("Transactions") says the same for users.

use super::command::{self, Decoded, Now, Shape};
use super::reply;
use bytes::{Bytes, BytesMut};
use rush_protocol::cmd::{Batch, BatchReply, Check, Cond, Get, HGet};
use rush_protocol::limits::{DEFAULT_MAX_FRAME, MAX_BATCH_OPS};
use rush_protocol::resp::write;
use rush_protocol::{ErrorCode, ErrorDetail, Reply, Request, RushError};

/// The commands that act on the transaction itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
}

impl Word {
    const ALL: [(&'static str, Word); 5] = [
        ("multi", Word::Multi),
        ("exec", Word::Exec),
        ("discard", Word::Discard),
        ("watch", Word::Watch),
        ("unwatch", Word::Unwatch),
    ];

    /// The word a command's name is, if it is one (any case; no allocation,
    /// as every command is asked).
    pub fn of(name: &[u8]) -> Option<Word> {
        Word::ALL
            .iter()
            .find(|(w, _)| name.eq_ignore_ascii_case(w.as_bytes()))
            .map(|&(_, word)| word)
    }

    /// Lower case, as in the command table.
    pub fn name(self) -> &'static str {
        Word::ALL
            .iter()
            .find(|(_, w)| *w == self)
            .map_or("", |(n, _)| n)
    }
}

/// WATCH's read: the keys it reads, in order, and the epoch it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRead {
    pub keys: Vec<Bytes>,
    epoch: u64,
}

/// EXEC's answer: `watches` CHECKs, then each queued command's part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    pub watches: usize,
    pub parts: Vec<Part>,
}

/// One queued command's place in EXEC's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Answered without a request (PING, ECHO…), in its place.
    Now(Now),
    /// A command of `ops` operations of the batch. `batch`: it was a BATCH
    /// of its own, so its shape reads a batch reply of those operations.
    Op {
        name: String,
        ops: usize,
        batch: bool,
        shape: Shape,
    },
}

/// What MULTI has queued.
#[derive(Default)]
struct Queued {
    parts: Vec<Part>,
    ops: Vec<Request>,
    /// Bytes of the queued commands' arguments, held until EXEC.
    bytes: usize,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    refused: bool,
}

/// Most bytes of arguments a transaction may queue: its BATCH is one
/// request, and the default frame limit bounds what one request holds.
pub const MAX_QUEUED_BYTES: usize = DEFAULT_MAX_FRAME;

/// A connection's transaction state.
#[derive(Default)]
pub struct Transaction {
    /// Some between MULTI and EXEC / DISCARD.
    queued: Option<Queued>,
    /// Watched keys, each with the value WATCH read (None: missing), in
    /// the order watched; a key watched twice keeps its first value.
    watched: Vec<(Bytes, Option<Bytes>)>,
    /// WATCH reads of this epoch not answered yet.
    watch_pending: usize,
    /// Moved on by EXEC, DISCARD and UNWATCH: a WATCH read of an earlier
    /// epoch that comes back after them is dropped.
    epoch: u64,
}

impl Transaction {
    pub fn in_multi(&self) -> bool {
        self.queued.is_some()
    }

    /// One of the transaction words, its arguments checked by the table.
    pub fn word(&mut self, word: Word, args: &[Bytes]) -> Decoded {
        let in_multi = self.in_multi();
        match word {
            Word::Multi if in_multi => command::err("ERR MULTI calls can not be nested"),
            Word::Multi => {
                self.queued = Some(Queued::default());
                Decoded::Now(Now::Simple("OK"))
            }
            Word::Exec => self.exec(),
            Word::Discard => {
                if self.queued.take().is_none() {
                    return command::err("ERR DISCARD without MULTI");
                }
                self.unwatch();
                Decoded::Now(Now::Simple("OK"))
            }
            Word::Watch if in_multi => command::err("ERR WATCH inside MULTI is not allowed"),
            Word::Watch => self.watch(&args[1..]),
            // Redis queues UNWATCH in MULTI; EXEC unwatches anyway.
            Word::Unwatch if in_multi => self.queue_now(Now::Simple("OK")),
            Word::Unwatch => {
                self.unwatch();
                Decoded::Now(Now::Simple("OK"))
            }
        }
    }

    /// A command refused before it ran (unknown, arity, NOAUTH): in MULTI
    /// it also aborts the transaction.
    pub fn refused(&mut self, refusal: Decoded) -> Decoded {
        if let Some(q) = &mut self.queued {
            q.refused = true;
        }
        refusal
    }

    /// A decoded command while in MULTI: queued (`+QUEUED`) or refused.
    /// `name`: as the client wrote it, for messages. `size`: its
    /// arguments' bytes.
    pub fn queue(&mut self, name: &[u8], size: usize, decoded: Decoded) -> Decoded {
        let name = String::from_utf8_lossy(name).to_ascii_uppercase();
        let (request, shape) = match decoded {
            // Redis runs QUIT at once, in MULTI too.
            Decoded::Quit => return Decoded::Quit,
            Decoded::Now(Now::Error(e)) => return self.refused(command::err(e)),
            Decoded::Now(Now::Hello { .. }) => return self.refused(cannot_queue(&name)),
            Decoded::Now(now) => return self.queue_now(now),
            Decoded::Run(request, shape) => (request, shape),
        };
        let (request, shape) = match in_batch(request, shape) {
            Some(r) => r,
            None => return self.refused(cannot_queue(&name)),
        };
        // The checks a request gets on its own: limits (through its wire
        // form) and its keys' slot.
        if let Err(e) = validate(&request).and_then(|r| r.target().map(|_| r)) {
            return self.refused(command::err(reply::error_line(&e)));
        }
        let Some(q) = &mut self.queued else {
            return command::err("ERR internal: a command queued outside MULTI");
        };
        let (ops, batch): (Vec<Request>, bool) = match request {
            Request::Batch(b) => (b.ops, true),
            op => (vec![op], false),
        };
        if q.ops.len() + ops.len() > MAX_BATCH_OPS {
            return self.refused(command::err(format!(
                "ERR a transaction runs as one BATCH of at most {MAX_BATCH_OPS} operations"
            )));
        }
        if q.bytes + size > MAX_QUEUED_BYTES {
            return self.refused(command::err(format!(
                "ERR a transaction's commands may hold at most {MAX_QUEUED_BYTES} bytes"
            )));
        }
        q.bytes += size;
        q.parts.push(Part::Op {
            name,
            ops: ops.len(),
            batch,
            shape,
        });
        q.ops.extend(ops);
        Decoded::Now(Now::Simple("QUEUED"))
    }

    fn queue_now(&mut self, now: Now) -> Decoded {
        if let Some(q) = &mut self.queued {
            q.parts.push(Part::Now(now));
        }
        Decoded::Now(Now::Simple("QUEUED"))
    }

    fn exec(&mut self) -> Decoded {
        let Some(q) = self.queued.take() else {
            return command::err("ERR EXEC without MULTI");
        };
        let pending = self.watch_pending > 0;
        let watched = std::mem::take(&mut self.watched);
        self.unwatch();
        if q.refused {
            return command::err("EXECABORT Transaction discarded because of previous errors.");
        }
        if pending {
            return command::err(
                "EXECABORT Transaction discarded: EXEC came before WATCH's reply; \
                 Rush reads the watched values when WATCH runs, so wait for its +OK",
            );
        }
        if watched.len() + q.ops.len() > MAX_BATCH_OPS {
            return command::err(format!(
                "EXECABORT Transaction discarded: {} watched keys and {} operations, \
                 over a BATCH's {MAX_BATCH_OPS}",
                watched.len(),
                q.ops.len()
            ));
        }
        if watched.is_empty() && q.ops.is_empty() {
            let nows = q
                .parts
                .into_iter()
                .filter_map(|p| match p {
                    Part::Now(now) => Some(now),
                    Part::Op { .. } => None,
                })
                .collect();
            return Decoded::Now(Now::Array(nows));
        }
        let watches = watched.len();
        let mut ops: Vec<Request> = watched
            .into_iter()
            .map(|(key, value)| {
                let cond = value.map_or(Cond::Missing, Cond::Eq);
                Check {
                    key,
                    field: None,
                    cond,
                }
                .into()
            })
            .collect();
        ops.extend(q.ops);
        let exec = Exec {
            watches,
            parts: q.parts,
        };
        Decoded::Run(Batch { ops }.into(), Shape::Exec(Box::new(exec)))
    }

    /// `WATCH key [key ...]`: read the keys' values now (one BATCH of GETs,
    /// so the keys must share a slot, as in Redis Cluster).
    fn watch(&mut self, keys: &[Bytes]) -> Decoded {
        if keys.len() > MAX_BATCH_OPS {
            return command::err(format!("ERR watch takes at most {MAX_BATCH_OPS} keys"));
        }
        self.watch_pending += 1;
        let ops = keys.iter().map(|k| Get { key: k.clone() }.into()).collect();
        let read = WatchRead {
            keys: keys.to_vec(),
            epoch: self.epoch,
        };
        Decoded::Run(Batch { ops }.into(), Shape::Watch(read))
    }

    fn unwatch(&mut self) {
        self.watched.clear();
        self.watch_pending = 0;
        self.epoch += 1;
    }

    /// WATCH's read came back (ahead of its turn, perhaps): keep the
    /// values, unless EXEC, DISCARD or UNWATCH came since it was sent.
    pub fn watched(&mut self, read: &WatchRead, result: &Result<Reply, RushError>) {
        if read.epoch != self.epoch {
            return;
        }
        self.watch_pending = self.watch_pending.saturating_sub(1);
        let Ok(Reply::Batch(b)) = result else {
            return;
        };
        for (key, r) in read.keys.iter().zip(&b.results) {
            let Reply::Get(value) = r else { continue };
            if !self.watched.iter().any(|(k, _)| k == key) {
                self.watched.push((key.clone(), value.clone()));
            }
        }
    }
}

/// A command's request as it goes in EXEC's batch, or None if it can't.
/// HEXISTS's CHECK would abort the batch when the field is missing, so in a
/// transaction it reads the field (HGET) instead.
fn in_batch(request: Request, shape: Shape) -> Option<(Request, Shape)> {
    match (request, shape) {
        // MSETNX, HSETNX: their answer is whether their CHECKs aborted.
        (_, Shape::IfAllHold { .. } | Shape::Hello { .. } | Shape::Watch(_) | Shape::Exec(_)) => {
            None
        }
        (
            Request::Check(Check {
                key,
                field: Some(field),
                cond: Cond::Exists,
            }),
            Shape::Flag,
        ) => Some((HGet { key, field }.into(), Shape::Present)),
        (Request::Check(_), _) => None,
        (request, shape)
            if matches!(request, Request::Batch(_)) || Batch::allows(request.opcode()) =>
        {
            Some((request, shape))
        }
        _ => None,
    }
}

fn cannot_queue(name: &str) -> Decoded {
    command::err(format!(
        "ERR {name} can't be queued in MULTI: Rush runs a transaction as one BATCH of key operations"
    ))
}

/// A request through its wire form: the limits a binary request is held to.
fn validate(request: &Request) -> Result<Request, RushError> {
    let mut body = BytesMut::new();
    request.encode_body(&mut body);
    Request::decode(request.opcode().as_u8(), body.freeze())
}

/// Write EXEC's answer.
pub fn render(out: &mut BytesMut, proto: u8, exec: &Exec, result: Result<Reply, RushError>) {
    let resp3 = proto == 3;
    let results = match result {
        Ok(Reply::Batch(b)) => b.results,
        Ok(_) => return write::error(out, "ERR internal: an answer of an unexpected kind"),
        Err(e) => return failed(out, resp3, exec, e),
    };
    let mut results = results.into_iter().skip(exec.watches);
    // HELLO can't be queued: no part changes the version.
    let mut proto = proto;
    write::array(out, exec.parts.len());
    for part in &exec.parts {
        match part {
            Part::Now(now) => super::write_now(out, &mut proto, now.clone()),
            Part::Op {
                ops,
                batch: true,
                shape,
                ..
            } => {
                let results = results.by_ref().take(*ops).collect();
                let reply = Reply::Batch(BatchReply { results });
                reply::render(out, &mut proto, shape, Ok(reply));
            }
            Part::Op { shape, .. } => match results.next() {
                Some(reply) => reply::render(out, &mut proto, shape, Ok(reply)),
                None => write::error(out, "ERR internal: EXEC's batch answered too few results"),
            },
        }
    }
}

/// EXEC's batch failed. A watched key's CHECK (a changed value; a hash
/// where a string was is WRONGTYPE) → the null array of a WATCH failure.
/// A queued command's operation → EXECABORT naming it. Anything else
/// (CROSSSLOT, MOVED, BUSY…) as it is.
fn failed(out: &mut BytesMut, resp3: bool, exec: &Exec, e: RushError) {
    let ErrorDetail::BatchIndex { index } = e.detail else {
        return write::error(out, &reply::error_line(&e));
    };
    let index = index as usize;
    if index < exec.watches && matches!(e.code, ErrorCode::ConditionFailed | ErrorCode::WrongType) {
        return write::null_array(out, resp3);
    }
    let mut first = exec.watches;
    let mut nth = 0;
    for part in &exec.parts {
        nth += 1;
        if let Part::Op { name, ops, .. } = part {
            if index < first + ops {
                let cause = RushError::new(e.code, cause_of(&e.message));
                return write::error(
                    out,
                    &format!(
                        "EXECABORT Transaction discarded because command {nth} ({name}) failed: {}",
                        reply::error_line(&cause)
                    ),
                );
            }
            first += ops;
        }
    }
    write::error(out, &reply::error_line(&e))
}

/// The operation's own message, without the batch's "batch operation i
/// (OP): " before it.
fn cause_of(message: &str) -> String {
    match message.strip_prefix("batch operation ") {
        Some(rest) => match rest.split_once("): ") {
            Some((_, cause)) => cause.to_string(),
            None => message.to_string(),
        },
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests;
