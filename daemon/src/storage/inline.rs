//! Values whose reference count sits in the same allocation as their bytes,
//! and values short enough to sit in a row of the row cache ([`Held`]).
//!
//! A row of the shard's row cache holds a value longer than [`SMALL`]
//! bytes as [`Bytes`], and a read that needs it whole clones it (the answer
//! outlives the row's borrow). A
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

/// The longest value a row of the row cache holds in place
/// ([`Held::Small`]): a counter (a 9-byte header and up to 20 digits) or a
/// short string. It fills the room a shared value takes anyway.
pub const SMALL: usize = 38;

/// A value as a row of the row cache holds it: a short one in the row
/// itself, a longer one shared.
///
/// An INCR replaces its counter's value at every commit; held as `Bytes`,
/// each replacement was an allocation made cold and the old value's free,
/// and each read followed a pointer away from the row (8 % of a kv-incr
/// profile: bench/results/NOTES.md). In place there is nothing to allocate,
/// free or follow.
#[derive(Clone)]
pub enum Held {
    Small { len: u8, bytes: [u8; SMALL] },
    Shared(Bytes),
}

/// What a shared value takes beyond its bytes: its reference count and
/// length ([`HEAD`]), and the allocator's rounding to a size class.
const SHARED_OVERHEAD: usize = HEAD + 12;

// A row's value takes what a shared one and its variant's tag take.
const _: () = assert!(std::mem::size_of::<Option<Held>>() == 40);

impl Held {
    /// `v` as a row holds it: copied into the row when short (the `Bytes`
    /// is dropped: a value just made goes back to the allocator at once).
    #[inline]
    pub fn new(v: Bytes) -> Held {
        if v.len() <= SMALL {
            Held::small(&v)
        } else {
            Held::Shared(v)
        }
    }

    /// A copy of `v` as a row holds it.
    pub fn copy(v: &[u8]) -> Held {
        if v.len() <= SMALL {
            Held::small(v)
        } else {
            Held::Shared(copy(v))
        }
    }

    #[inline]
    fn small(v: &[u8]) -> Held {
        let mut bytes = [0; SMALL];
        bytes[..v.len()].copy_from_slice(v);
        Held::Small {
            len: v.len() as u8,
            bytes,
        }
    }

    /// The value, to read.
    #[inline]
    pub fn view(&self) -> ValueRef<'_> {
        match self {
            Held::Small { len, bytes } => ValueRef::Small(&bytes[..*len as usize]),
            Held::Shared(b) => ValueRef::Shared(b),
        }
    }

    /// The value's bytes.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        self.view().into_slice()
    }

    /// The bytes the value takes outside the row: none when it is in
    /// place; a shared one's bytes, its reference count and length
    /// ([`HEAD`]), and the allocator's rounding to a size class (about).
    pub fn outside(&self) -> usize {
        match self {
            Held::Small { .. } => 0,
            Held::Shared(b) => b.len() + SHARED_OVERHEAD,
        }
    }
}

/// A value read in place: in a row ([`Held::Small`]) or shared (a row's
/// longer value, or one a request wrote).
#[derive(Clone, Copy)]
pub enum ValueRef<'a> {
    Small(&'a [u8]),
    Shared(&'a Bytes),
}

impl<'a> ValueRef<'a> {
    /// The value's bytes, borrowed for as long as the value is.
    #[inline]
    pub fn into_slice(self) -> &'a [u8] {
        match self {
            ValueRef::Small(v) => v,
            ValueRef::Shared(b) => b,
        }
    }

    /// The value as `Bytes`: shared when it is, else a copy.
    #[inline]
    pub fn to_bytes(self) -> Bytes {
        match self {
            ValueRef::Small(v) => Bytes::copy_from_slice(v),
            ValueRef::Shared(b) => b.clone(),
        }
    }

    /// The value from byte `from` on, as `Bytes` (shared when it is).
    #[inline]
    pub fn slice_from(self, from: usize) -> Bytes {
        match self {
            ValueRef::Small(v) => Bytes::copy_from_slice(&v[from..]),
            ValueRef::Shared(b) => b.slice(from..),
        }
    }
}

impl std::ops::Deref for ValueRef<'_> {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.into_slice()
    }
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
        for len in [0, SMALL - 1, SMALL, SMALL + 1, 200] {
            let data: Vec<u8> = (0..len).map(|i| (i * 3 + 1) as u8).collect();
            let held = Held::new(copy(&data));
            assert_eq!(matches!(held, Held::Small { .. }), len <= SMALL, "{len}");
            assert_eq!(&held.view()[..], &data[..], "length {len}");
            assert_eq!(&Held::copy(&data).view().to_bytes()[..], &data[..]);
            assert_eq!(&held.view().slice_from(len / 2)[..], &data[len / 2..]);
            assert_eq!(held.outside() == 0, len <= SMALL);
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
