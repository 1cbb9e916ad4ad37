//! One count: a rule's count for one user and one item (or for the whole
//! order under a total rule), kept in the user's [`Book`](super::book).
//!
//! Form (an entry of a book):
//! - daily / fixed window: `u8 1 | u64 window start ms | u64 count`, ending
//!   at the window's end;
//! - sliding window: `u8 2 | u64 bucket ms | u16 n | n × (u64 bucket, u64
//!   count)`, buckets ascending, at most `buckets + 1` of them (older ones are
//!   dropped on every write), ending when the newest bucket stops counting.
//!
//! The window (start, or bucket width) is stored with the count, so a count
//! from another window — an earlier day, or a rule whose window was changed
//! by a policy replacement — reads as 0 instead of being misread.
//!
//! Before books, each count was a value of its own (this form behind a
//! 9-byte header of kind `LIMIT_COUNTER`); [`Counter::decode`] still reads
//! those for the conversion (`limits::legacy`).

use super::policy::Pos;
use crate::storage::keys::kind;
use crate::storage::value::{Corrupt, Stored};
use rush_protocol::RushError;

const WINDOWED: u8 = 1;
const SLIDING: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counter {
    Empty,
    Windowed {
        start: u64,
        count: u64,
    },
    Sliding {
        bucket_ms: u64,
        buckets: Vec<(u64, u64)>,
    },
}

pub(super) fn storage_error(e: impl std::fmt::Display) -> RushError {
    RushError::unavailable(format!("storage: {e}"))
}

pub(super) fn corrupt(e: impl std::fmt::Display) -> RushError {
    RushError::internal(e.to_string())
}

impl Counter {
    /// A value of the one-count-per-key layout; expired values are empty.
    pub fn decode(raw: &[u8], now: u64) -> Result<Counter, Corrupt> {
        let s = Stored::decode(raw)?;
        if s.kind != kind::LIMIT_COUNTER {
            return Err(Corrupt(format!("limit counter has value kind {}", s.kind)));
        }
        if !s.is_live(now) {
            return Ok(Counter::Empty);
        }
        Counter::decode_payload(s.payload)
    }

    /// Decode [`Counter::encode_into`]'s form.
    pub fn decode_payload(p: &[u8]) -> Result<Counter, Corrupt> {
        let u64_at = |i: usize| -> Result<u64, Corrupt> {
            p.get(i..i + 8)
                .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
                .ok_or_else(|| Corrupt("limit counter is truncated".into()))
        };
        match p.first() {
            Some(&WINDOWED) if p.len() == 17 => Ok(Counter::Windowed {
                start: u64_at(1)?,
                count: u64_at(9)?,
            }),
            Some(&SLIDING) if p.len() >= 11 => {
                let bucket_ms = u64_at(1)?;
                let n = u16::from_be_bytes([p[9], p[10]]) as usize;
                if p.len() != 11 + n * 16 {
                    return Err(Corrupt("sliding limit counter has a bad length".into()));
                }
                let buckets = (0..n)
                    .map(|i| Ok((u64_at(11 + i * 16)?, u64_at(19 + i * 16)?)))
                    .collect::<Result<_, Corrupt>>()?;
                Ok(Counter::Sliding { bucket_ms, buckets })
            }
            _ => Err(Corrupt("limit counter has an unknown format".into())),
        }
    }

    /// What counts at `pos`.
    pub fn count_at(&self, pos: &Pos) -> u64 {
        match (self, pos) {
            (Counter::Windowed { start, count }, Pos::Window { start: s, .. }) if start == s => {
                *count
            }
            (
                Counter::Sliding { bucket_ms, buckets },
                Pos::Sliding {
                    bucket,
                    bucket_ms: ms,
                    buckets: n,
                },
            ) if bucket_ms == ms => {
                let oldest = bucket.saturating_sub(*n);
                buckets
                    .iter()
                    .filter(|(b, _)| *b >= oldest)
                    .map(|(_, c)| *c)
                    .fold(0u64, |a, c| a.saturating_add(c))
            }
            _ => 0,
        }
    }

    /// The counter after adding `qty` at `pos` (counts of other windows and
    /// buckets that no longer count are dropped).
    pub fn add(&self, pos: &Pos, qty: u64) -> Counter {
        let current = self.count_at(pos);
        match *pos {
            Pos::Window { start, .. } => Counter::Windowed {
                start,
                count: current.saturating_add(qty),
            },
            Pos::Sliding {
                bucket,
                bucket_ms,
                buckets: n,
            } => {
                let oldest = bucket.saturating_sub(n);
                let mut kept: Vec<(u64, u64)> = match self {
                    Counter::Sliding {
                        bucket_ms: ms,
                        buckets,
                    } if *ms == bucket_ms => buckets
                        .iter()
                        .copied()
                        .filter(|(b, _)| *b >= oldest)
                        .collect(),
                    _ => Vec::with_capacity(1),
                };
                match kept.binary_search_by_key(&bucket, |(b, _)| *b) {
                    Ok(i) => kept[i].1 = kept[i].1.saturating_add(qty),
                    Err(i) => kept.insert(i, (bucket, qty)),
                }
                Counter::Sliding {
                    bucket_ms,
                    buckets: kept,
                }
            }
        }
    }

    /// Give `qty` back to the window `id` (a window start or a bucket), if
    /// this counter still holds it. `None` when there was nothing to give
    /// back to (the window has ended, or the rule's window changed).
    pub fn give_back(&self, id: u64, qty: u64) -> Option<Counter> {
        match self {
            Counter::Windowed { start, count } if *start == id => Some(Counter::Windowed {
                start: *start,
                count: count.saturating_sub(qty),
            }),
            Counter::Sliding { bucket_ms, buckets } => {
                let i = buckets.iter().position(|(b, _)| *b == id)?;
                let mut buckets = buckets.clone();
                buckets[i].1 = buckets[i].1.saturating_sub(qty);
                if buckets[i].1 == 0 {
                    buckets.remove(i);
                }
                Some(Counter::Sliding {
                    bucket_ms: *bucket_ms,
                    buckets,
                })
            }
            _ => None,
        }
    }

    pub fn is_zero(&self) -> bool {
        match self {
            Counter::Empty => true,
            Counter::Windowed { count, .. } => *count == 0,
            Counter::Sliding { buckets, .. } => buckets.iter().all(|(_, c)| *c == 0),
        }
    }

    /// When the count at `pos` next drops: the window's end, or when the
    /// oldest counted bucket stops counting (0 when nothing is counted).
    pub fn resets_at(&self, pos: &Pos) -> u64 {
        match *pos {
            Pos::Window { end, .. } => end,
            Pos::Sliding {
                bucket,
                bucket_ms,
                buckets: n,
            } => match self {
                Counter::Sliding {
                    bucket_ms: ms,
                    buckets,
                } if *ms == bucket_ms => {
                    let oldest = bucket.saturating_sub(n);
                    buckets
                        .iter()
                        .find(|(b, c)| *b >= oldest && *c > 0)
                        .map(|(b, _)| (b + n + 1).saturating_mul(bucket_ms))
                        .unwrap_or(0)
                }
                _ => 0,
            },
        }
    }

    /// When the stored value can go once written at `pos`: the window's
    /// end, or when the newest bucket stops counting.
    pub fn expiry(&self, pos: &Pos) -> u64 {
        match (*pos, self) {
            (Pos::Window { end, .. }, _) => end,
            (Pos::Sliding { buckets: n, .. }, Counter::Sliding { bucket_ms, buckets }) => buckets
                .last()
                .map(|(b, _)| (b + n + 1).saturating_mul(*bucket_ms))
                .unwrap_or(1),
            // Nothing to keep: already expired.
            _ => 1,
        }
    }

    /// The stored form (a book entry's counter), appended to `p`.
    pub fn encode_into(&self, p: &mut Vec<u8>) {
        match self {
            Counter::Empty => {}
            Counter::Windowed { start, count } => {
                p.push(WINDOWED);
                p.extend_from_slice(&start.to_be_bytes());
                p.extend_from_slice(&count.to_be_bytes());
            }
            Counter::Sliding { bucket_ms, buckets } => {
                p.reserve(buckets.len() * 16);
                p.push(SLIDING);
                p.extend_from_slice(&bucket_ms.to_be_bytes());
                p.extend_from_slice(&(buckets.len() as u16).to_be_bytes());
                for (b, c) in buckets {
                    p.extend_from_slice(&b.to_be_bytes());
                    p.extend_from_slice(&c.to_be_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::value;

    /// A count as the one-count-per-key layout stored it.
    fn legacy(c: &Counter, expires_at: u64) -> Vec<u8> {
        let mut p = Vec::new();
        c.encode_into(&mut p);
        value::encode(kind::LIMIT_COUNTER, expires_at, &p)
    }

    fn sliding(bucket: u64) -> Pos {
        Pos::Sliding {
            bucket,
            bucket_ms: 1000,
            buckets: 3,
        }
    }

    #[test]
    fn windowed_counts_only_their_window() {
        let day1 = Pos::Window { start: 0, end: 100 };
        let day2 = Pos::Window {
            start: 100,
            end: 200,
        };
        let c = Counter::Empty.add(&day1, 2).add(&day1, 3);
        assert_eq!(c.count_at(&day1), 5);
        assert_eq!(c.count_at(&day2), 0);
        assert_eq!(c.add(&day2, 1).count_at(&day2), 1);
        let raw = legacy(&c, c.expiry(&day1));
        assert_eq!(value::expiry_of(&raw), Some(100));
        assert_eq!(Counter::decode(&raw, 50).unwrap(), c);
        assert_eq!(Counter::decode(&raw, 100).unwrap(), Counter::Empty);
        assert_eq!(c.give_back(0, 4).unwrap().count_at(&day1), 1);
        assert_eq!(c.give_back(100, 4), None);
    }

    #[test]
    fn sliding_keeps_buckets_plus_one() {
        // Buckets of 1 s, 3 of them: an acquisition in bucket b counts in
        // buckets b..=b+3, i.e. for more than 3 s and at most 4 s.
        let c = Counter::Empty.add(&sliding(10), 1);
        for b in 10..=13 {
            assert_eq!(c.count_at(&sliding(b)), 1, "bucket {b}");
        }
        assert_eq!(c.count_at(&sliding(14)), 0);
        assert_eq!(c.resets_at(&sliding(10)), 14_000);
        let c = c.add(&sliding(12), 2).add(&sliding(12), 1);
        assert_eq!(c.count_at(&sliding(12)), 4);
        assert_eq!(c.count_at(&sliding(14)), 3);
        // A write far later drops what no longer counts.
        let c2 = c.add(&sliding(16), 1);
        assert_eq!(
            c2,
            Counter::Sliding {
                bucket_ms: 1000,
                buckets: vec![(16, 1)]
            }
        );
        let raw = legacy(&c, c.expiry(&sliding(12)));
        assert_eq!(value::expiry_of(&raw), Some(16_000));
        assert_eq!(Counter::decode(&raw, 15_999).unwrap(), c);
        // Give back to bucket 12 only.
        let back = c.give_back(12, 3).unwrap();
        assert_eq!(back.count_at(&sliding(12)), 1);
        assert_eq!(c.give_back(11, 1), None);
        // Another bucket width reads as nothing.
        let other = Pos::Sliding {
            bucket: 12,
            bucket_ms: 500,
            buckets: 3,
        };
        assert_eq!(c.count_at(&other), 0);
    }

    #[test]
    fn corrupt_values_are_errors() {
        assert!(Counter::decode(&value::encode(kind::LIMIT_COUNTER, 0, &[1, 2]), 0).is_err());
        assert!(Counter::decode(&value::encode(kind::STRING, 0, b"x"), 0).is_err());
        assert!(Counter::decode(
            &value::encode(kind::LIMIT_COUNTER, 0, &[2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1]),
            0
        )
        .is_err());
    }
}
