//! RocksDB's merge operator for the shard column families: values written
//! as an operand to add to whatever the key holds, without reading it first.
//!
//! One kind merges today: a link's visit statistics (`kind::LINK_STATS`).
//! The visit counter's flush adds each link's visits as an operand instead
//! of reading the statistics row, adding to it and writing it back: at 10M
//! links those reads, one per distinct link visited in each interval, were
//! half of a links-resolve's storage reads (bench/results/NOTES.md).
//!
//! An operand is a value like any other (`kind | expires_at | payload`, see
//! `value`), so an operand and a merged value have one format and merging is
//! one associative step, [`merge`]: RocksDB's full merge (a stored value and
//! its operands), its partial merge (operands among themselves) and the
//! shard's own merges of operands it still holds (`shard::pending`) are all
//! the same fold. The newest operand's expiry wins (it is the link's expiry
//! as of its last visit). An operand of any other kind replaces what it
//! merges into, as a put would.

use super::keys::kind;
use super::value::{self, Stored};
use crate::links::record::Stats;

/// The name RocksDB records with the column families.
pub const NAME: &str = "rush.merge.v1";

/// `base` (a stored value, or `None`: absent or a deletion) with `operand`
/// added.
pub fn merge(base: Option<&[u8]>, operand: &[u8]) -> Vec<u8> {
    let (Some(base), Ok(op)) = (base, Stored::decode(operand)) else {
        return operand.to_vec();
    };
    match (Stored::decode(base), op.kind) {
        (Ok(b), kind::LINK_STATS) if b.kind == kind::LINK_STATS => {
            match (Stats::decode(b.payload), Stats::decode(op.payload)) {
                (Ok(mut stats), Ok(added)) => {
                    stats.absorb(&added);
                    value::encode(kind::LINK_STATS, op.expires_at, &stats.encode())
                }
                // A corrupt side counts as nothing.
                (Ok(_), Err(_)) => value::encode(kind::LINK_STATS, op.expires_at, b.payload),
                (Err(_), _) => operand.to_vec(),
            }
        }
        _ => operand.to_vec(),
    }
}

/// The merge operator's callback (full and partial merges alike).
pub fn rocksdb_merge(
    _key: &[u8],
    existing: Option<&[u8]>,
    operands: &rocksdb::MergeOperands,
) -> Option<Vec<u8>> {
    let mut acc: Option<Vec<u8>> = existing.map(<[u8]>::to_vec);
    for op in operands {
        acc = Some(merge(acc.as_deref(), op));
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(total: u64, last: u64, days: &[(u32, u64)], expires_at: u64) -> Vec<u8> {
        let s = Stats {
            total,
            last_visit: last,
            days: days.into(),
        };
        value::encode(kind::LINK_STATS, expires_at, &s.encode())
    }

    #[test]
    fn visits_add_up_and_the_newest_expiry_wins() {
        let base = stats(5, 100, &[(10, 2), (11, 3)], 1_000);
        let op = stats(4, 90, &[(11, 1), (12, 3)], 2_000);
        assert_eq!(
            merge(Some(&base), &op),
            stats(9, 100, &[(10, 2), (11, 4), (12, 3)], 2_000)
        );
        assert_eq!(merge(None, &op), op, "nothing stored: the operand");
    }

    #[test]
    fn merging_is_associative() {
        let (a, b, c) = (
            stats(1, 10, &[(3, 1)], 7),
            stats(2, 30, &[(3, 1), (4, 1)], 8),
            stats(3, 20, &[(40, 3)], 9),
        );
        let left = merge(Some(&merge(Some(&a), &b)), &c);
        let right = merge(Some(&a), &merge(Some(&b), &c));
        assert_eq!(left, right);
        let s = Stats::decode(Stored::decode(&left).unwrap().payload).unwrap();
        assert_eq!(s.total, 6);
        assert!(
            s.days
                .iter()
                .all(|(d, _)| *d + rush_protocol::cmd::links::STATS_DAYS > 40),
            "only the last days are kept: {:?}",
            s.days
        );
    }

    #[test]
    fn another_kind_replaces_what_it_merges_into() {
        let base = stats(5, 100, &[(10, 2)], 0);
        let other = value::encode(kind::LINK, 0, b"x");
        assert_eq!(merge(Some(&base), &other), other);
        assert_eq!(merge(Some(&other), &base), base);
        assert_eq!(merge(Some(b"short"), &base), base);
    }
}
