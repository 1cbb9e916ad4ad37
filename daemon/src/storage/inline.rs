//! Values whose reference count sits in the same allocation as their bytes.
//!
//! A row of the shard's row cache holds its value as [`Bytes`], and every
//! read of the row clones it (the answer outlives the row's borrow). A
//! `Bytes` made from a `Vec` keeps its count in a box allocated apart from
//! the bytes at the first clone, so a read that found its row and its
//! value's bytes already loaded (the shard prefetches both ahead of the
//! request) still waited for that box's cache line: 7.5 % of a GET's CPU on
//! `promotable_even_clone` at a million keys (bench/results/NOTES.md).
//!
//! Here the count comes first and the bytes follow in one allocation, sized
//! by the value's length class: loading the bytes' first line loads the
//! count (`RowCache::prefetch_value` asks for [`HEAD`] bytes before them).
//! Values over [`MAX_INLINE`] bytes are plain `Bytes`: their copy costs more
//! than the count's miss.

use bytes::Bytes;
use std::mem::MaybeUninit;

/// Bytes between the start of the allocation (the count) and the value.
pub const HEAD: usize = 12;

/// The longest value held inline; longer ones are ordinary `Bytes`.
pub const MAX_INLINE: usize = 500;

/// The value's bytes after its length, `N` of them of which `len` are set.
/// `bytes::Bytes::from_owner` puts an 8-byte count before it
/// (`#[repr(C)] Owned { ref_cnt, owner }`): with `N = 16k + 4` the whole
/// allocation is a multiple of 16 bytes, an allocator size class.
#[repr(C)]
struct Inline<const N: usize> {
    len: u32,
    buf: [MaybeUninit<u8>; N],
}

impl<const N: usize> AsRef<[u8]> for Inline<N> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `new` wrote the first `len` bytes and `len <= N`.
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.len as usize) }
    }
}

fn new<const N: usize>(parts: &[&[u8]], len: usize) -> Bytes {
    debug_assert!(len <= N);
    let mut v = Inline::<N> {
        len: len as u32,
        buf: [MaybeUninit::uninit(); N],
    };
    let mut at = 0;
    for p in parts {
        // SAFETY: the parts' lengths add up to `len <= N`; MaybeUninit<u8>
        // has u8's layout.
        unsafe {
            std::ptr::copy_nonoverlapping(p.as_ptr(), v.buf.as_mut_ptr().add(at).cast(), p.len());
        }
        at += p.len();
    }
    Bytes::from_owner(v)
}

/// The inline buffer sizes `N` (`16k + 4`, so `12 + N` is a multiple of 16),
/// passed to macro `$m` as one list: [`concat`] picks from them and the
/// tests check each.
macro_rules! with_classes {
    ($m:ident) => {
        $m!(20 36 52 68 84 100 116 132 148 180 212 244 308 372 436 500)
    };
}

/// The concatenation of `parts` as one `Bytes`, its count beside its bytes
/// when it is at most [`MAX_INLINE`] long.
pub fn concat(parts: &[&[u8]]) -> Bytes {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    macro_rules! pick {
        ($($n:literal)*) => {
            $(if len <= $n { return new::<$n>(parts, len); })*
        };
    }
    with_classes!(pick);
    let mut v = Vec::with_capacity(len);
    for p in parts {
        v.extend_from_slice(p);
    }
    Bytes::from(v)
}

/// A copy of `bytes` ([`concat`] of one part).
pub fn copy(bytes: &[u8]) -> Bytes {
    concat(&[bytes])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_round_trips_and_clones_share_the_bytes() {
        for len in 0..=MAX_INLINE + 70 {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let b = copy(&data);
            assert_eq!(&b[..], &data[..], "length {len}");
            let c = b.clone();
            assert_eq!(c.as_ptr(), b.as_ptr(), "a clone shares the bytes");
            drop(b);
            assert_eq!(&c[..], &data[..]);
            assert_eq!(&c.slice(len / 2..)[..], &data[len / 2..]);
        }
        let (a, b) = (b"kind-and-expiry".as_slice(), b"payload".as_slice());
        assert_eq!(&concat(&[a, b])[..], b"kind-and-expirypayload");
        assert_eq!(&concat(&[])[..], b"");
    }

    /// `bytes::Bytes::from_owner`'s allocation, as bytes 1.x lays it out.
    #[repr(C)]
    struct Owned<T> {
        ref_cnt: std::sync::atomic::AtomicUsize,
        owner: T,
    }

    #[test]
    fn the_count_sits_head_bytes_before_the_value_in_a_size_class() {
        macro_rules! check {
            ($($n:literal)*) => {$(
                assert_eq!(
                    std::mem::offset_of!(Owned<Inline<$n>>, owner)
                        + std::mem::offset_of!(Inline<$n>, buf),
                    HEAD
                );
                assert_eq!(std::mem::size_of::<Owned<Inline<$n>>>() % 16, 0, "class {}", $n);
            )*};
        }
        with_classes!(check);
    }
}
