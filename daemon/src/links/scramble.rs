//! The keyed bijection that makes codes unpredictable.
//!
//! Segments hand out a slot's indices in order (0, 1, 2, …); a code built
//! from them would tell everyone the next code. Each index goes through a
//! Feistel network over the slot's index space instead: a permutation, so
//! distinct sequence numbers still give distinct codes (no collision check
//! needed), and with SipHash-2-4 under a secret 128-bit node key as the
//! round function (a PRF), knowing codes doesn't reveal the next one.
//!
//! The network works on `2k` bits (the smallest even width covering the
//! space); outputs beyond the space are fed through again ("cycle walking"),
//! which keeps it a bijection on `[0, n)` and takes < 4 rounds on average.
//! The slot and length are mixed into every round, so each slot and length
//! has its own permutation.

/// Feistel rounds: 4 make a PRP from a PRF (Luby–Rackoff); 6 for margin.
const ROUNDS: u64 = 6;

#[derive(Clone)]
pub struct Scrambler {
    k0: u64,
    k1: u64,
}

// The key stays out of logs.
impl std::fmt::Debug for Scrambler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scrambler(<key>)")
    }
}

impl Scrambler {
    pub fn new(key: [u8; 16]) -> Self {
        Scrambler {
            k0: u64::from_le_bytes(key[..8].try_into().expect("8 bytes")),
            k1: u64::from_le_bytes(key[8..].try_into().expect("8 bytes")),
        }
    }

    /// The image of `x` (< `n`) under the permutation of `[0, n)` for this
    /// slot and length.
    pub fn permute(&self, slot: u16, len: u8, n: u64, x: u64) -> u64 {
        debug_assert!(x < n);
        if n <= 1 {
            return x;
        }
        let mut bits = 64 - (n - 1).leading_zeros();
        bits += bits % 2;
        let half = bits / 2;
        let mask = (1u64 << half) - 1;
        let tweak = (u64::from(slot) << 16) | (u64::from(len) << 8);
        let mut y = x;
        loop {
            let (mut l, mut r) = (y >> half, y & mask);
            for round in 0..ROUNDS {
                let f = siphash24(self.k0, self.k1, tweak | round, r) & mask;
                (l, r) = (r, l ^ f);
            }
            y = (l << half) | r;
            if y < n {
                return y;
            }
        }
    }
}

/// SipHash-2-4 of the 16-byte message `m0 ‖ m1` (little-endian words).
fn siphash24(k0: u64, k1: u64, m0: u64, m1: u64) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    // The final block of a 16-byte message is just its length.
    for m in [m0, m1, 16u64 << 56] {
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_reference_vector() {
        // Reference vector 16: key 00..0f, message 00..0f.
        let k0 = 0x0706_0504_0302_0100;
        let k1 = 0x0f0e_0d0c_0b0a_0908;
        assert_eq!(siphash24(k0, k1, k0, k1), 0x3f2a_cc7f_57c2_9bdb);
    }

    #[test]
    fn permutation_is_a_bijection() {
        let s = Scrambler::new(*b"0123456789abcdef");
        for n in [1u64, 2, 3, 17, 1000, 55_917] {
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = s.permute(42, 5, n, x);
                assert!(y < n);
                assert!(!seen[y as usize], "{y} hit twice for n={n}");
                seen[y as usize] = true;
            }
        }
    }

    #[test]
    fn keys_slots_and_lengths_scramble_differently() {
        let a = Scrambler::new([1; 16]);
        let b = Scrambler::new([2; 16]);
        let n = 55_917;
        let first = |s: &Scrambler, slot, len| {
            (0..8)
                .map(|x| s.permute(slot, len, n, x))
                .collect::<Vec<_>>()
        };
        assert_ne!(first(&a, 1, 5), first(&b, 1, 5));
        assert_ne!(first(&a, 1, 5), first(&a, 2, 5));
        assert_ne!(first(&a, 1, 5), first(&a, 1, 6));
        // Consecutive inputs land far apart.
        let v = first(&a, 1, 5);
        assert!(v.windows(2).all(|w| w[0].abs_diff(w[1]) > 1), "{v:?}");
    }
}
