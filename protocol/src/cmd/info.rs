use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_LIST, MAX_TEXT};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `INFO` → rows of (name, value): version, uptime, shards, keys, connections…
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Info {}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InfoReply {
    pub rows: Vec<(String, String)>,
}

impl InfoReply {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.rows
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Info {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for Info {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Info {})
    }
}

impl Wire for InfoReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.rows.len());
        for (n, v) in &self.rows {
            out.put_lp(n.as_bytes());
            out.put_lp(v.as_bytes());
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let rows = r.list("rows", MAX_LIST, 8, |r| {
            Ok((r.string("name", MAX_TEXT)?, r.string("value", MAX_TEXT)?))
        })?;
        Ok(InfoReply { rows })
    }
}
