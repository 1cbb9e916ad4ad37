//! Stored forms of links and their visit statistics (the payload after the
//! 9-byte value header, whose expiry is the link's).

use crate::storage::value::{Corrupt, Cursor};
use rush_protocol::cmd::links::STATS_DAYS;

const FORMAT: u8 = 1;
pub const FLAG_PERMANENT: u8 = 0x01;
pub const FLAG_ALIAS: u8 = 0x02;
/// The reuse index (account, target) → this code points here (and lives in
/// this link's slot).
pub const FLAG_REUSE_INDEXED: u8 = 0x04;
/// A visit's query string is dropped instead of passed on to the target.
///
/// Added to format 1 without a new format number: records written before
/// it have the bit clear, which is the default (the query passes through),
/// so they decode unchanged and mean what they meant. Older binaries
/// ignore the bit (they never passed queries on).
pub const FLAG_DROP_QUERY: u8 = 0x08;

/// A link: `u8 format, u8 flags, u64 created, u64 ttl, u16+account,
/// u16+target, (u8 tag, u16+url) ios, (u8 tag, u16+url) android`.
///
/// Flags: 0x01 permanent (301), 0x02 alias, 0x04 reuse-indexed, 0x08 drop
/// the visit's query string; other bits are 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRecord {
    pub flags: u8,
    pub created_at: u64,
    /// Sliding TTL; 0 = the link never expires.
    pub ttl_ms: u64,
    pub account: Vec<u8>,
    pub target: String,
    pub ios: Option<String>,
    pub android: Option<String>,
}

impl LinkRecord {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    pub fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let size = 22
            + self.account.len()
            + self.target.len()
            + 6
            + self.ios.as_ref().map_or(0, |s| s.len())
            + self.android.as_ref().map_or(0, |s| s.len());
        let mut out = Vec::with_capacity(size);
        out.push(FORMAT);
        out.push(self.flags);
        out.extend_from_slice(&self.created_at.to_be_bytes());
        out.extend_from_slice(&self.ttl_ms.to_be_bytes());
        put_bytes(&mut out, &self.account);
        put_bytes(&mut out, self.target.as_bytes());
        for app in [&self.ios, &self.android] {
            match app {
                None => out.push(0),
                Some(url) => {
                    out.push(1);
                    put_bytes(&mut out, url.as_bytes());
                }
            }
        }
        out
    }

    pub fn decode(payload: &[u8]) -> Result<LinkRecord, Corrupt> {
        let mut p = Cursor::new(payload, "a link record");
        if p.u8()? != FORMAT {
            return Err(Corrupt("unknown link record format".into()));
        }
        let flags = p.u8()?;
        let created_at = p.u64()?;
        let ttl_ms = p.u64()?;
        let n = p.u16()? as usize;
        let account = p.take(n)?.to_vec();
        let target = p.string()?;
        let mut apps = [None, None];
        for app in apps.iter_mut() {
            if p.u8()? == 1 {
                *app = Some(p.string()?);
            }
        }
        p.end()?;
        let [ios, android] = apps;
        Ok(LinkRecord {
            flags,
            created_at,
            ttl_ms,
            account,
            target,
            ios,
            android,
        })
    }
}

/// (unix day, visits): almost always one or two days, held inline (a
/// visit's counter and its merge operand allocate nothing for them).
pub type DayCounts = smallvec::SmallVec<[(u32, u64); 2]>;

/// Visit statistics: `u64 total, u64 last visit, u8 n, n × (u32 day, u64)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub total: u64,
    pub last_visit: u64,
    /// Oldest first, at most [`STATS_DAYS`] days.
    pub days: DayCounts,
}

impl Stats {
    /// Add `n` visits on `day`, keep only the last [`STATS_DAYS`] days
    /// up to `today`.
    pub fn add(&mut self, day: u32, n: u64, last_visit: u64, today: u32) {
        self.total = self.total.saturating_add(n);
        self.last_visit = self.last_visit.max(last_visit);
        match self.days.binary_search_by_key(&day, |(d, _)| *d) {
            Ok(i) => self.days[i].1 = self.days[i].1.saturating_add(n),
            Err(i) => self.days.insert(i, (day, n)),
        }
        self.prune(today);
    }

    /// Add `other` (visits counted since, or before): totals and days add
    /// up, the last visit is the later one, and only the last
    /// [`STATS_DAYS`] days up to the newest day either has are kept. In any
    /// order the result is the same (the storage merge relies on it).
    pub fn absorb(&mut self, other: &Stats) {
        self.total = self.total.saturating_add(other.total);
        self.last_visit = self.last_visit.max(other.last_visit);
        for &(day, n) in &other.days {
            match self.days.binary_search_by_key(&day, |(d, _)| *d) {
                Ok(i) => self.days[i].1 = self.days[i].1.saturating_add(n),
                Err(i) => self.days.insert(i, (day, n)),
            }
        }
        if let Some(&(newest, _)) = self.days.last() {
            let oldest = newest.saturating_sub(STATS_DAYS - 1);
            self.days.retain(|(d, _)| *d >= oldest);
        }
    }

    pub fn prune(&mut self, today: u32) {
        let oldest = today.saturating_sub(STATS_DAYS - 1);
        self.days.retain(|(d, _)| *d >= oldest && *d <= today);
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(17 + 12 * self.days.len());
        self.encode_into(&mut out);
        out
    }

    /// [`Stats::encode`], appended to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.total.to_be_bytes());
        out.extend_from_slice(&self.last_visit.to_be_bytes());
        out.push(self.days.len().min(u8::MAX as usize) as u8);
        for (d, n) in self.days.iter().take(u8::MAX as usize) {
            out.extend_from_slice(&d.to_be_bytes());
            out.extend_from_slice(&n.to_be_bytes());
        }
    }

    pub fn decode(payload: &[u8]) -> Result<Stats, Corrupt> {
        let mut p = Cursor::new(payload, "link stats");
        let total = p.u64()?;
        let last_visit = p.u64()?;
        let n = p.u8()? as usize;
        let mut days = DayCounts::with_capacity(n);
        for _ in 0..n {
            let d = p.u32()?;
            days.push((d, p.u64()?));
        }
        p.end()?;
        Ok(Stats {
            total,
            last_visit,
            days,
        })
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Accounts (≤ 1 KiB) and URLs (≤ 4 KiB) are checked at decode.
    debug_assert!(b.len() <= u16::MAX as usize);
    out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_round_trip() {
        let r = LinkRecord {
            flags: FLAG_PERMANENT | FLAG_ALIAS,
            created_at: 17,
            ttl_ms: 86_400_000,
            account: b"acme".to_vec(),
            target: "https://example.com/a?b=c".into(),
            ios: Some("myapp://x".into()),
            android: None,
        };
        let raw = r.encode();
        assert_eq!(LinkRecord::decode(&raw).unwrap(), r);
        assert!(LinkRecord::decode(&raw[..raw.len() - 1]).is_err());
    }

    /// A record written before [`FLAG_DROP_QUERY`] existed — these exact
    /// bytes — decodes with query passthrough on.
    #[test]
    fn record_before_drop_query_passes_queries() {
        let mut raw = vec![FORMAT, FLAG_PERMANENT];
        raw.extend_from_slice(&5u64.to_be_bytes());
        raw.extend_from_slice(&0u64.to_be_bytes());
        raw.extend_from_slice(b"\x00\x00\x00\x0ehttps://e.com/\x00\x00");
        let r = LinkRecord::decode(&raw).unwrap();
        assert_eq!(r.target, "https://e.com/");
        assert!(r.has(FLAG_PERMANENT));
        assert!(!r.has(FLAG_DROP_QUERY));
        let mut dropped = r.clone();
        dropped.set(FLAG_DROP_QUERY, true);
        assert_eq!(LinkRecord::decode(&dropped.encode()).unwrap(), dropped);
        assert_eq!(dropped.encode()[1], FLAG_PERMANENT | FLAG_DROP_QUERY);
    }

    #[test]
    fn stats_keep_thirty_days() {
        let mut s = Stats::default();
        for day in 100..140 {
            s.add(day, 2, u64::from(day) * 1000, day);
        }
        assert_eq!(s.total, 80);
        assert_eq!(s.days.len(), 30);
        assert_eq!(s.days[0], (110, 2));
        assert_eq!(s.last_visit, 139_000);
        assert_eq!(Stats::decode(&s.encode()).unwrap(), s);
        s.add(139, 5, 0, 139);
        assert_eq!(s.days.last(), Some(&(139, 7)));
    }
}
