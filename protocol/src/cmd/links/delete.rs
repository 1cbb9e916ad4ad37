use super::read_code;
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `LINK_DELETE code` → whether a live link was removed. The code answers
/// NOT_FOUND from then on; a generated code may be issued again only once
/// its slot's code space has wrapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkDelete {
    pub code: String,
}

impl LinkDelete {
    pub fn new(code: impl Into<String>) -> Self {
        LinkDelete { code: code.into() }
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(super::link_slot(self.code.as_bytes())))
    }
}

impl Wire for LinkDelete {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.code.as_bytes());
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LinkDelete {
            code: read_code(r, "code")?,
        })
    }
}
