use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_AUDIT_PROBLEMS, MAX_TEXT};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `ENVELOPE_AUDIT` (admin) → the books of every stored envelope on the node,
/// checked: `sum(grabs) + refunded + remaining == total`, every amount ≥ 1
/// cent, no user twice, counts consistent, open envelopes indexed for expiry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvelopeAudit {}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvelopeAuditReply {
    /// Envelopes checked.
    pub envelopes: u64,
    /// Grabs checked.
    pub grabs: u64,
    /// Envelopes still open (shares left, not settled).
    pub open: u64,
    /// Cents in open envelopes.
    pub in_flight_cents: u64,
    /// Envelopes whose rest was refunded.
    pub refunded: u64,
    /// Books that are off, in total (only the first
    /// [`MAX_AUDIT_PROBLEMS`] are described).
    pub problem_count: u64,
    pub problems: Vec<String>,
}

impl EnvelopeAuditReply {
    pub fn ok(&self) -> bool {
        self.problem_count == 0
    }

    /// Add another part's books (a shard's or a node's) to these.
    pub fn absorb(&mut self, other: EnvelopeAuditReply) {
        self.envelopes += other.envelopes;
        self.grabs += other.grabs;
        self.open += other.open;
        self.in_flight_cents += other.in_flight_cents;
        self.refunded += other.refunded;
        self.problem_count += other.problem_count;
        let room = MAX_AUDIT_PROBLEMS.saturating_sub(self.problems.len());
        self.problems.extend(other.problems.into_iter().take(room));
    }
}

impl EnvelopeAudit {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for EnvelopeAudit {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeAudit {})
    }
}

impl Wire for EnvelopeAuditReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.envelopes);
        out.put_u64(self.grabs);
        out.put_u64(self.open);
        out.put_u64(self.in_flight_cents);
        out.put_u64(self.refunded);
        out.put_u64(self.problem_count);
        out.put_count(self.problems.len());
        for p in &self.problems {
            out.put_lp(p.as_bytes());
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeAuditReply {
            envelopes: r.u64("envelopes")?,
            grabs: r.u64("grabs")?,
            open: r.u64("open")?,
            in_flight_cents: r.u64("in_flight_cents")?,
            refunded: r.u64("refunded")?,
            problem_count: r.u64("problem_count")?,
            problems: r.list("problems", MAX_AUDIT_PROBLEMS, 4, |r| {
                r.string("problem", MAX_TEXT)
            })?,
        })
    }
}
