//! Short-link keys, all in the code's slot: the link by code, the reuse
//! index, indices reserved by aliases, visit statistics and a moved slot's
//! code key.

use super::{ks, rest_in, KeyBuf};

/// A link (generated code or alias) by its code.
pub fn link(slot: u16, code: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(super::PREFIX_LEN + 1 + code.len());
    link_into(&mut out, slot, code);
    out
}

/// [`link`] written into `out` (emptied first): the one place its layout
/// is spelled out.
pub fn link_into(out: &mut Vec<u8>, slot: u16, code: &[u8]) {
    debug_assert!(code.len() <= u8::MAX as usize);
    out.clear();
    out.extend_from_slice(&super::slot_prefix(slot));
    out.push(ks::LINK);
    out.push(code.len() as u8);
    out.extend_from_slice(code);
}

/// The code inside a [`link`] key.
pub fn link_code(raw: &[u8]) -> Option<&[u8]> {
    rest_in(raw, ks::LINK)?.get(1..)
}

/// `[start, end)` covering the links of one code length in a slot.
pub fn link_length_range(slot: u16, len: u8) -> (Vec<u8>, Vec<u8>) {
    (
        KeyBuf::new(slot, ks::LINK).u8(len).build(),
        KeyBuf::new(slot, ks::LINK).u8(len + 1).build(),
    )
}

/// The reuse index entry of (account, url).
pub fn link_reuse(slot: u16, account: &[u8], url: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_REUSE)
        .part(account)
        .tail(url)
        .build()
}

/// A generated-code index held by an alias of that shape.
pub fn link_reserved(slot: u16, len: u8, index: u64) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_RESERVED)
        .u8(len)
        .u64(index)
        .build()
}

/// (length, index) of a [`link_reserved`] key.
pub fn link_reserved_parts(raw: &[u8]) -> Option<(u8, u64)> {
    let (&len, index) = rest_in(raw, ks::LINK_RESERVED)?.split_first()?;
    let index: [u8; 8] = index.try_into().ok()?;
    Some((len, u64::from_be_bytes(index)))
}

/// A link's visit statistics.
pub fn link_stats(slot: u16, code: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_STATS).tail(code).build()
}

/// The code key a moved slot's codes were issued with.
pub fn link_code_key(slot: u16) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_CODE_KEY).build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_keys_group_by_length_in_code_order() {
        let (start, end) = link_length_range(9, 5);
        let a = link(9, b"0000A");
        let b = link(9, b"0000a");
        assert!(start <= a && a < b && b < end);
        assert!(link(9, b"zzzz") < start && link(9, b"000000") >= end);
        assert_eq!(link_code(&a), Some(&b"0000A"[..]));
        assert_eq!(link_code(&link_stats(9, b"0000A")), None);
        let r = link_reserved(9, 6, 1 << 33);
        assert_eq!(link_reserved_parts(&r), Some((6, 1 << 33)));
        assert_eq!(link_reserved_parts(&a), None);
        assert_eq!(link_reserved_parts(&r[..11]), None);
    }
}
