//! Requests for another shard of the same node, and their answers, in
//! batches: one message (and at most one wake-up) per destination shard per
//! pass, answered back the same way after the destination's commit.
//!
//! A forwarded request travels decoded (its `Bytes` borrow the origin
//! connection's read buffer; nothing is copied), with the slot it was
//! routed by, so the destination neither decodes nor hashes it again. The
//! answer travels encoded: the destination writes every answer of the pass
//! for one origin into one buffer, and the origin copies each frame into
//! its connection's output.

use super::conn::ConnId;
use bytes::{Bytes, BytesMut};
use rush_protocol::frame;
use rush_protocol::{Request, RushError};
use std::time::Instant;

/// One request on its way to the shard that owns its slot.
pub struct Forwarded {
    pub conn: ConnId,
    pub request_id: u64,
    pub opcode: u8,
    pub slot: u16,
    /// Its frame's bytes (the origin counts them in flight until the answer).
    pub size: usize,
    pub request: Request,
    /// When its frame was read (for the latency metric).
    pub received: Instant,
    /// Its connection said READONLY.
    pub replica_read: bool,
}

/// This pass's requests from one shard to another.
pub struct Batch {
    pub from: usize,
    pub items: Vec<Forwarded>,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Encoded answers for connections of one shard.
pub struct Answers {
    /// (connection, the request's size, the answer frame).
    pub frames: Vec<(ConnId, usize, Bytes)>,
    /// Connections whose answers went past their output budget here: the
    /// origin closes them (their other answers were dropped).
    pub overflowed: Vec<ConnId>,
}

/// A pass's answers to one origin shard, being gathered.
#[derive(Default)]
pub struct AnswersOut {
    buf: BytesMut,
    entries: Vec<Entry>,
    /// Answer bytes gathered per connection this pass: a client asking for
    /// more than its output budget at once (and not reading) must not make
    /// this shard hold it all.
    per_conn: hashbrown::HashMap<ConnId, usize>,
    overflowed: Vec<ConnId>,
    /// Bytes one connection's answers may take in one batch.
    budget: usize,
}

impl AnswersOut {
    pub fn with_budget(budget: usize) -> AnswersOut {
        AnswersOut {
            budget,
            ..AnswersOut::default()
        }
    }
}

struct Entry {
    conn: ConnId,
    request_id: u64,
    opcode: u8,
    size: usize,
    /// The frame, `buf[start..end]`.
    start: usize,
    end: usize,
    /// Waits for the commit.
    held: bool,
}

impl AnswersOut {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.overflowed.is_empty()
    }

    /// Append one answer; `encode` writes the whole frame into the buffer.
    pub fn push(
        &mut self,
        conn: ConnId,
        request_id: u64,
        opcode: u8,
        size: usize,
        held: bool,
        encode: impl FnOnce(&mut BytesMut),
    ) {
        let start = self.buf.len();
        encode(&mut self.buf);
        let end = self.buf.len();
        let used = self.per_conn.entry(conn).or_default();
        if *used == usize::MAX {
            self.buf.truncate(start);
            return;
        }
        if *used > 0 && *used + (end - start) > self.budget {
            // Over budget: this connection is closed by its shard.
            self.buf.truncate(start);
            *used = usize::MAX;
            self.entries.retain(|e| e.conn != conn);
            self.overflowed.push(conn);
            return;
        }
        *used += end - start;
        self.entries.push(Entry {
            conn,
            request_id,
            opcode,
            size,
            start,
            end,
            held,
        });
    }

    /// The pass's commit failed: every answer that waited for it becomes
    /// `err` (nothing of those requests is on disk).
    pub fn fail_held(&mut self, err: &RushError) {
        for e in self.entries.iter_mut().filter(|e| e.held) {
            e.start = self.buf.len();
            frame::encode_error(&mut self.buf, e.opcode, e.request_id, err);
            e.end = self.buf.len();
        }
    }

    /// Everything gathered, as one message's worth of frames.
    pub fn take(&mut self) -> Answers {
        let bytes = std::mem::take(&mut self.buf).freeze();
        let frames = self
            .entries
            .drain(..)
            .map(|e| (e.conn, e.size, bytes.slice(e.start..e.end)))
            .collect();
        self.per_conn.clear();
        Answers {
            frames,
            overflowed: std::mem::take(&mut self.overflowed),
        }
    }
}
