//! Key → slot, exactly Redis Cluster's rule: `CRC16/XMODEM(tag) & 16383`,
//! where `tag` is the part between the first `{` and the next `}` when that
//! part is non-empty, else the whole key.

/// Number of hash slots; every node owns a set of them.
pub const SLOTS: u16 = 16384;

/// Sixteen tables (8 KiB, slice-by-16): every request's key is hashed at
/// least once, and the byte-at-a-time table was 5 % of a kv-incr profile
/// (bench/results/NOTES.md).
const CRC16: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

/// The bytes of `key` that decide its slot.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    CRC16.checksum(hash_tag(key)) & (SLOTS - 1)
}

/// The slot of a group of parts hashed as one (e.g. account + URL for a
/// shorten): the parts are joined with a 0 byte, so ("ab","c") ≠ ("a","bc").
pub fn parts_slot(parts: &[&[u8]]) -> u16 {
    let mut digest = CRC16.digest();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            digest.update(&[0]);
        }
        digest.update(p);
    }
    digest.finalize() & (SLOTS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_check_value() {
        assert_eq!(CRC16.checksum(b"123456789"), 0x31C3);
    }

    #[test]
    fn redis_cluster_vectors() {
        // From the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"123456789"), 0x31C3 & 16383);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"hello"), 866);
        assert_eq!(key_slot(b"somekey"), 11058);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.followers"), key_slot(b"user1000"));
        assert_eq!(
            key_slot(b"mall:sale:freq:ctrl:{860000000000001}"),
            key_slot(b"860000000000001")
        );
    }

    #[test]
    fn hash_tag_edge_cases() {
        // Empty tag: the whole key is hashed.
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        // Only the first { and the next } count.
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        // No closing brace.
        assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
        assert_eq!(hash_tag(b""), b"");
    }

    #[test]
    fn parts_are_separated() {
        assert_ne!(parts_slot(&[b"ab", b"c"]), parts_slot(&[b"a", b"bc"]));
        assert_eq!(parts_slot(&[b"abc"]), key_slot(b"abc"));
    }
}
