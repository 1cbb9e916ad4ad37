use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// Whether cache misses may read storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShedMode {
    /// Misses read storage (normal).
    #[default]
    Off = 0,
    /// Misses answer UNAVAILABLE; Bloom negatives and cache hits still answer.
    On = 1,
    /// Shed on a shard whose queue is deeper than its threshold.
    Auto = 2,
}

impl ShedMode {
    pub fn name(self) -> &'static str {
        match self {
            ShedMode::Off => "off",
            ShedMode::On => "on",
            ShedMode::Auto => "auto",
        }
    }

    pub fn parse(s: &str) -> Option<ShedMode> {
        match s {
            "off" => Some(ShedMode::Off),
            "on" => Some(ShedMode::On),
            "auto" => Some(ShedMode::Auto),
            _ => None,
        }
    }
}

/// `CATALOG_SHED mode` (admin, every shard): switch load shedding of
/// catalog storage reads. Lasts until the next switch or restart (then the
/// `catalog.shed` setting applies again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogShed {
    pub mode: ShedMode,
}

impl CatalogShed {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for CatalogShed {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.mode as u8);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let mode = match r.u8("mode")? {
            0 => ShedMode::Off,
            1 => ShedMode::On,
            2 => ShedMode::Auto,
            m => {
                return Err(DecodeError::invalid(
                    "mode",
                    format!("{m} (0 off, 1 on, 2 auto)"),
                ))
            }
        };
        Ok(CatalogShed { mode })
    }
}
