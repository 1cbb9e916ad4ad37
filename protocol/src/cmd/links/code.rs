//! Short codes and their slots.
//!
//! A generated code of length `L` (5–8) is the base62 form, `L` digits with
//! leading zeros, of a number `v < 62^L`, and `v % 16384` is its slot: the
//! code carries its slot, so a client routes every request for it without a
//! lookup, and the node that issued it never asks another node. The rest,
//! `v / 16384`, is the code's index within its slot's code space for that
//! length (the server scrambles which index it hands out next).
//!
//! Any other code is a custom alias and lives in the CRC16 slot of its bytes
//! (as a key would). An alias that happens to look like a generated code
//! (5–8 base62 characters) is routed like one: every code string has exactly
//! one slot.

use crate::codec::DecodeError;
use crate::limits::MAX_CODE;
use crate::{key_slot, SLOTS};

/// The base62 digits, in ASCII order, so fixed-length codes sort like their
/// numbers (storage scans of a slot's codes walk them in index order).
pub const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Shortest generated code.
pub const MIN_CODE_LEN: u8 = 5;
/// Longest generated code.
pub const MAX_CODE_LEN: u8 = 8;

const fn pow62(len: u8) -> u64 {
    let mut v = 1u64;
    let mut i = 0;
    while i < len {
        v *= 62;
        i += 1;
    }
    v
}

/// How many codes of `len` characters exist (`62^len`).
pub fn code_space(len: u8) -> u64 {
    pow62(len)
}

/// How many codes of `len` characters live in `slot`: the `v < 62^len` with
/// `v % 16384 == slot`. About 55,917 five-character codes per slot.
pub fn codes_per_slot(len: u8, slot: u16) -> u64 {
    let space = pow62(len);
    let slot = u64::from(slot);
    if slot >= space {
        0
    } else {
        (space - slot - 1) / u64::from(SLOTS) + 1
    }
}

/// A code of at most 8 characters, held inline (no allocation on the
/// issuing path).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code {
    bytes: [u8; MAX_CODE_LEN as usize],
    len: u8,
}

impl Code {
    /// The generated code with `index` in `slot`'s space for `len`.
    /// `index` must be below [`codes_per_slot`].
    pub fn generated(slot: u16, len: u8, index: u64) -> Code {
        debug_assert!((MIN_CODE_LEN..=MAX_CODE_LEN).contains(&len));
        debug_assert!(index < codes_per_slot(len, slot));
        let mut v = index * u64::from(SLOTS) + u64::from(slot);
        let mut bytes = [b'0'; MAX_CODE_LEN as usize];
        for i in (0..len as usize).rev() {
            bytes[i] = ALPHABET[(v % 62) as usize];
            v /= 62;
        }
        Code { bytes, len }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("base62 is ASCII")
    }

    pub fn len(&self) -> u8 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Code({})", self.as_str())
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Each byte's base62 value, [`NOT_A_DIGIT`] for the rest: a code's digits
/// are random, so a table lookup where a range match mispredicts a branch
/// per character (a resolve's code is read this way to route it and again
/// to find its record).
const DIGITS: [u8; 256] = {
    let mut t = [NOT_A_DIGIT; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};
const NOT_A_DIGIT: u8 = u8::MAX;

fn digit(b: u8) -> Option<u64> {
    match DIGITS[usize::from(b)] {
        NOT_A_DIGIT => None,
        d => Some(u64::from(d)),
    }
}

/// Where a code with the shape of a generated one sits: its slot, length and
/// index within the slot's space. `None` for any other string (an alias).
pub fn generated_parts(code: &[u8]) -> Option<(u16, u8, u64)> {
    let len = code.len();
    if !(MIN_CODE_LEN as usize..=MAX_CODE_LEN as usize).contains(&len) {
        return None;
    }
    let mut v = 0u64;
    for &b in code {
        v = v * 62 + digit(b)?;
    }
    let slots = u64::from(SLOTS);
    Some(((v % slots) as u16, len as u8, v / slots))
}

/// True when `code` has the shape of a generated code (5–8 base62 characters).
pub fn is_generated_shape(code: &[u8]) -> bool {
    generated_parts(code).is_some()
}

/// The slot a code (generated or alias) lives in. Clients route every link
/// request for a code by this.
pub fn link_slot(code: &[u8]) -> u16 {
    match generated_parts(code) {
        Some((slot, _, _)) => slot,
        None => key_slot(code),
    }
}

/// Codes and aliases are 1–64 characters of `A–Z a–z 0–9 _ -`: safe in a
/// URL path without escaping, and never a path the redirect server uses.
pub fn check_code(field: &'static str, code: &str) -> Result<(), DecodeError> {
    if code.is_empty() {
        return Err(DecodeError::invalid(field, "is empty"));
    }
    if code.len() > MAX_CODE {
        return Err(DecodeError::TooLarge {
            field,
            len: code.len(),
            max: MAX_CODE,
        });
    }
    if let Some(c) = code
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(DecodeError::invalid(
            field,
            format!("{c:?} is not allowed (use A-Z a-z 0-9 _ -)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_codes_round_trip_and_carry_their_slot() {
        for len in MIN_CODE_LEN..=MAX_CODE_LEN {
            for slot in [0u16, 1, 777, SLOTS - 1] {
                let n = codes_per_slot(len, slot);
                for index in [0, 1, n / 2, n - 1] {
                    let c = Code::generated(slot, len, index);
                    assert_eq!(c.len(), len);
                    assert_eq!(generated_parts(c.as_bytes()), Some((slot, len, index)));
                    assert_eq!(link_slot(c.as_bytes()), slot);
                }
            }
        }
    }

    #[test]
    fn slot_spaces_add_up() {
        for len in MIN_CODE_LEN..=MAX_CODE_LEN {
            let total: u64 = (0..SLOTS).map(|s| codes_per_slot(len, s)).sum();
            assert_eq!(total, code_space(len));
        }
        // About 56k five-character codes per slot.
        assert!((55_916..=55_917).contains(&codes_per_slot(5, 9)));
        // The largest index of a slot still encodes in `len` characters.
        let last = Code::generated(0, 5, codes_per_slot(5, 0) - 1);
        assert_eq!(last.len(), 5);
    }

    #[test]
    fn fixed_length_codes_sort_like_their_numbers() {
        let a = Code::generated(3, 6, 99);
        let b = Code::generated(3, 6, 100);
        assert!(a.as_bytes() < b.as_bytes());
        assert!(ALPHABET.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn every_byte_reads_as_its_base62_digit_or_none() {
        for b in 0..=u8::MAX {
            let expected = ALPHABET.iter().position(|&a| a == b).map(|d| d as u64);
            assert_eq!(digit(b), expected, "byte {b}");
        }
    }

    #[test]
    fn aliases_route_by_crc() {
        assert_eq!(link_slot(b"spring-sale"), key_slot(b"spring-sale"));
        assert_eq!(link_slot(b"abcd"), key_slot(b"abcd"));
        assert_eq!(generated_parts(b"abcdefghi"), None);
        assert!(is_generated_shape(b"Promo1"));
        assert!(!is_generated_shape(b"pro-1"));
        assert!(check_code("alias", "ok_Alias-1").is_ok());
        assert!(check_code("alias", "").is_err());
        assert!(check_code("alias", "a/b").is_err());
        assert!(check_code("alias", "späť").is_err());
        assert!(check_code("alias", &"a".repeat(65)).is_err());
    }
}
