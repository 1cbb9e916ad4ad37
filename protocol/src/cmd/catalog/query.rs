use super::{read_owner, read_text, RecordSet};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_ATTRIBUTE, MAX_ATTRIBUTES};
use crate::{key_slot, RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// Which of an owner's records a query wants: every attribute equality
/// holds, and (when set) the record is valid at `valid_at` (unix ms).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogFilter {
    pub attributes: Vec<(Bytes, Bytes)>,
    pub valid_at: Option<u64>,
}

impl CatalogFilter {
    pub fn attr(mut self, name: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        self.attributes.push((name.into(), value.into()));
        self
    }

    pub fn at(mut self, unix_ms: u64) -> Self {
        self.valid_at = Some(unix_ms);
        self
    }
}

/// `CATALOG_QUERY owner filter` → the owner's matching records, by id.
/// An owner with no records answers an empty list (not NOT_FOUND).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogQuery {
    pub owner: Bytes,
    pub filter: CatalogFilter,
}

/// The records are shared, not owned: a node answers from its cache by
/// handing out the set it holds, in its wire form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogQueryReply {
    pub records: RecordSet,
}

impl CatalogQuery {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(&self.owner)))
    }
}

impl Wire for CatalogQuery {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.owner);
        out.put_count(self.filter.attributes.len());
        for (n, v) in &self.filter.attributes {
            out.put_lp(n);
            out.put_lp(v);
        }
        match self.filter.valid_at {
            None => out.put_u8(0),
            Some(at) => {
                out.put_u8(1);
                out.put_u64(at);
            }
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let owner = read_owner(r)?;
        let attributes = r.list("filters", MAX_ATTRIBUTES, 8, |r| {
            Ok((
                read_text(r, "attribute name", MAX_ATTRIBUTE)?,
                read_text(r, "attribute value", MAX_ATTRIBUTE)?,
            ))
        })?;
        let valid_at = r.option("valid_at", |r| r.u64("valid_at"))?;
        Ok(CatalogQuery {
            owner,
            filter: CatalogFilter {
                attributes,
                valid_at,
            },
        })
    }
}

impl Wire for CatalogQueryReply {
    fn encode(&self, out: &mut BytesMut) {
        self.records.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CatalogQueryReply {
            records: RecordSet::decode(r)?,
        })
    }
}
