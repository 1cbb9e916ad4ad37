//! Scalable Bloom filters: the catalog's per-shard filter over owners that
//! have records and over aliases, the limits' over order records and
//! books, and the generic keys' (`kv`).
//!
//! A [`Bloom`] is a plain bit array probed at `k` positions derived from one
//! 64-bit hash by enhanced double hashing (Dillinger & Manolios), reduced to
//! the array with a multiply-shift instead of `%`. Its size comes from the
//! standard formulas: `m = -n·ln p / ln²2` bits and `k = m/n · ln 2` probes
//! for `n` items at false-positive rate `p`.
//!
//! [`ScalableBloom`] (Almeida et al., 2007) stacks such filters: when the
//! newest layer holds its capacity, a new layer twice as large with half the
//! false-positive rate is added. Layer `i` has rate `p₀·rⁱ` with
//! `p₀ = target·(1 − r)` and `r = ½`, so the compound rate of any number of
//! layers stays below `Σ p₀·rⁱ = target`. A lookup probes every layer; an
//! insert goes to the newest. Items are only added when the filter doesn't
//! already report them, so re-putting an owner doesn't use capacity.
//!
//! Nothing can be removed. The owning service rebuilds the filter from
//! storage when removed or expired entries pile up (a walk over the shard's
//! slots a slice at a time: [`crate::shard::walk`]).

/// Each new layer's false-positive rate is this fraction of the previous one's.
const TIGHTENING: f64 = 0.5;
/// Each new layer holds this many times the previous one's items.
const GROWTH: u64 = 2;
/// Most probes per lookup in one layer (a target rate of 1e-9 needs 30).
const MAX_PROBES: u32 = 32;
/// Odd 64-bit constant (2⁶⁴/φ) that separates the layers' hash streams.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// One Bloom filter layer.
#[derive(Debug, Clone)]
pub struct Bloom {
    words: Box<[u64]>,
    /// Bits in `words` (a multiple of 64).
    bits: u64,
    probes: u32,
    /// Items this layer is sized for at its false-positive rate.
    capacity: u64,
    len: u64,
    /// Separates this layer's positions from other layers' for one hash.
    seed: u64,
    /// All of an item's bits in one 512-bit block (a cache line), so an
    /// insert or a lookup costs one cache miss instead of one per probe, for
    /// a slightly higher false-positive rate (the blocks fill unevenly).
    blocked: bool,
}

/// Bits in a block of a blocked layer.
const BLOCK_BITS: u64 = 512;

/// The SplitMix64 finalizer: a bijective 64-bit mix with full avalanche.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Bloom {
    /// A layer for `capacity` items at false-positive rate `fp`.
    pub fn new(capacity: u64, fp: f64, seed: u64) -> Bloom {
        Bloom::with_layout(capacity, fp, seed, false)
    }

    fn with_layout(capacity: u64, fp: f64, seed: u64, blocked: bool) -> Bloom {
        let capacity = capacity.max(1);
        let ln2 = std::f64::consts::LN_2;
        let bits_per_item = -fp.ln() / (ln2 * ln2);
        let bits = ((capacity as f64 * bits_per_item).ceil() as u64).max(64);
        let word_bits = if blocked { BLOCK_BITS } else { 64 };
        let words = bits.div_ceil(word_bits) * (word_bits / 64);
        let bits = words * 64;
        let probes = ((bits as f64 / capacity as f64) * ln2).round() as u32;
        Bloom {
            words: vec![0u64; words as usize].into_boxed_slice(),
            bits,
            probes: probes.clamp(1, MAX_PROBES),
            capacity,
            len: 0,
            seed,
            blocked,
        }
    }

    /// Visit the bit positions of `hash` until `f` returns false; returns
    /// whether every visit returned true.
    #[inline]
    fn probe(&self, hash: u64, mut f: impl FnMut(u64) -> bool) -> bool {
        let mut x = mix(hash ^ self.seed);
        let mut y = mix(x) | 1;
        if self.blocked {
            // The block from x, each probe's bit in it from 9 bits of y.
            let blocks = self.bits / BLOCK_BITS;
            let base = ((x as u128 * blocks as u128) >> 64) as u64 * BLOCK_BITS;
            for i in 0..self.probes {
                if i > 0 && i % 7 == 0 {
                    y = mix(y);
                }
                if !f(base + (y & (BLOCK_BITS - 1))) {
                    return false;
                }
                y >>= 9;
            }
            return true;
        }
        for i in 0..self.probes {
            // Multiply-shift maps x uniformly onto 0..bits without a division.
            let pos = ((x as u128 * self.bits as u128) >> 64) as u64;
            if !f(pos) {
                return false;
            }
            x = x.wrapping_add(y);
            y = y.wrapping_add(i as u64);
        }
        true
    }

    pub fn contains(&self, hash: u64) -> bool {
        self.probe(hash, |pos| {
            self.words[(pos / 64) as usize] & (1 << (pos % 64)) != 0
        })
    }

    pub fn insert(&mut self, hash: u64) {
        let mut positions = [0u64; MAX_PROBES as usize];
        let mut n = 0;
        self.probe(hash, |pos| {
            positions[n] = pos;
            n += 1;
            true
        });
        for pos in &positions[..n] {
            self.words[(pos / 64) as usize] |= 1 << (pos % 64);
        }
        self.len += 1;
    }

    pub fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// Start loading the memory a lookup of `hash` reads first (a blocked
    /// layer's whole block: the words are not aligned to cache lines, so
    /// its first and last word), so that a lookup a little later doesn't
    /// wait for it.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        let mut first = None;
        self.probe(hash, |pos| {
            first = Some(pos);
            false
        });
        let Some(pos) = first else { return };
        let (from, to) = if self.blocked {
            let base = pos - pos % BLOCK_BITS;
            (base / 64, (base + BLOCK_BITS) / 64 - 1)
        } else {
            (pos / 64, pos / 64)
        };
        for w in [from, to] {
            crate::shard::rows::prefetch(std::ptr::from_ref(&self.words[w as usize]).cast());
        }
    }
}

/// A Bloom filter that grows without exceeding its target false-positive rate.
#[derive(Debug, Clone)]
pub struct ScalableBloom {
    layers: Vec<Bloom>,
    blocked: bool,
    target_fp: f64,
    items: u64,
}

impl ScalableBloom {
    /// Sized for `expected` items at `target_fp`; grows past that.
    pub fn new(expected: u64, target_fp: f64) -> ScalableBloom {
        ScalableBloom::with_layout(expected, target_fp, false)
    }

    /// As [`ScalableBloom::new`], each layer blocked: one cache line per
    /// insert or lookup and layer, the rate somewhat over the design's.
    pub fn blocked(expected: u64, target_fp: f64) -> ScalableBloom {
        ScalableBloom::with_layout(expected, target_fp, true)
    }

    fn with_layout(expected: u64, target_fp: f64, blocked: bool) -> ScalableBloom {
        let fp = target_fp * (1.0 - TIGHTENING);
        ScalableBloom {
            layers: vec![Bloom::with_layout(expected, fp, GOLDEN, blocked)],
            blocked,
            target_fp,
            items: 0,
        }
    }

    /// Might `hash` have been inserted? False means certainly not.
    #[inline]
    pub fn contains(&self, hash: u64) -> bool {
        // Newest first: it holds the most items.
        self.layers.iter().rev().any(|l| l.contains(hash))
    }

    /// Start loading what a lookup of `hash` reads, in every layer.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        for l in &self.layers {
            l.prefetch(hash);
        }
    }

    /// Add `hash` unless the filter already reports it; returns whether it
    /// was added.
    pub fn insert(&mut self, hash: u64) -> bool {
        if self.contains(hash) {
            return false;
        }
        self.insert_absent(hash);
        true
    }

    /// Add `hash`, which the caller has just seen the filter report absent
    /// (no second probe of every layer).
    pub fn insert_absent(&mut self, hash: u64) {
        let last = self.layers.last().expect("at least one layer");
        if last.is_full() {
            let n = self.layers.len() as u64;
            let fp = last_fp(self.target_fp, n);
            let next = Bloom::with_layout(
                last.capacity.saturating_mul(GROWTH),
                fp,
                GOLDEN.wrapping_mul(n + 1),
                self.blocked,
            );
            self.layers.push(next);
        }
        self.layers
            .last_mut()
            .expect("at least one layer")
            .insert(hash);
        self.items += 1;
    }

    /// Items added (distinct as far as the filter could tell).
    pub fn items(&self) -> u64 {
        self.items
    }

    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    pub fn bytes(&self) -> usize {
        self.layers.iter().map(Bloom::bytes).sum()
    }

    /// The false-positive rate the layers are designed for when full (an
    /// upper bound of the real one; always below the target).
    pub fn design_fp(&self) -> f64 {
        (0..self.layers.len() as u64)
            .map(|i| last_fp(self.target_fp, i))
            .sum()
    }
}

/// The design rate of layer `i`: `target·(1 − r)·rⁱ`.
fn last_fp(target: f64, i: u64) -> f64 {
    target * (1.0 - TIGHTENING) * TIGHTENING.powi(i as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn absent_rate(f: &ScalableBloom, from: u64, n: u64) -> f64 {
        let hits = (from..from + n).filter(|&i| f.contains(mix(i))).count();
        hits as f64 / n as f64
    }

    /// A prefetch names words of the layer only, whichever block or bit a
    /// hash falls on (the last block's last word included), in filters of
    /// one and several layers, blocked or not.
    #[test]
    fn prefetches_stay_inside_the_layers() {
        for blocked in [false, true] {
            let mut f = ScalableBloom::with_layout(100, 0.01, blocked);
            for i in 0..1_000u64 {
                f.insert(mix(i));
            }
            assert!(f.layers() > 2);
            for i in 0..200_000u64 {
                f.prefetch(mix(i ^ 0xdead_beef));
            }
            f.prefetch(0);
            f.prefetch(u64::MAX);
        }
    }

    #[test]
    fn sizing_follows_the_formulas() {
        let b = Bloom::new(1_000, 0.01, 1);
        // 9.59 bits per item and 7 probes for 1 %.
        assert!((9_585..=9_650).contains(&b.bits), "{}", b.bits);
        assert_eq!(b.probes(), 7);
        assert_eq!(Bloom::new(0, 0.5, 1).bits, 64);
    }

    #[test]
    fn growth_keeps_the_rate_under_target() {
        let target = 0.01;
        let mut f = ScalableBloom::new(1_000, target);
        for i in 0..20_000u64 {
            assert!(f.insert(mix(i)) || f.contains(mix(i)));
        }
        assert!(f.layers() >= 4, "grew to {} layers", f.layers());
        assert!(f.design_fp() < target);
        let rate = absent_rate(&f, 1 << 40, 200_000);
        assert!(rate <= target, "measured {rate} over target {target}");
        for i in 0..20_000u64 {
            assert!(f.contains(mix(i)), "false negative for {i}");
        }
    }

    #[test]
    fn a_full_single_layer_is_near_its_design_rate() {
        let mut f = ScalableBloom::new(50_000, 0.02);
        for i in 0..50_000u64 {
            f.insert(mix(i));
        }
        assert_eq!(f.layers(), 1);
        let rate = absent_rate(&f, 1 << 40, 200_000);
        // Designed for 1 % (half the target); allow sampling noise.
        assert!((0.007..0.013).contains(&rate), "measured {rate}");
    }

    #[test]
    fn a_blocked_layer_is_near_its_design_rate_and_misses_nothing() {
        let mut f = ScalableBloom::blocked(50_000, 0.02);
        for i in 0..50_000u64 {
            f.insert(mix(i));
        }
        assert_eq!(f.layers(), 1);
        assert_eq!(f.bytes() % 64, 0, "whole blocks");
        for i in 0..50_000u64 {
            assert!(f.contains(mix(i)), "false negative for {i}");
        }
        let rate = absent_rate(&f, 1 << 40, 200_000);
        // Designed for 1 %; uneven blocks cost a little more.
        assert!((0.007..0.016).contains(&rate), "measured {rate}");
    }

    #[test]
    fn reinserting_uses_no_capacity() {
        let mut f = ScalableBloom::new(10, 0.01);
        assert!(f.insert(7));
        assert!(!f.insert(7));
        assert_eq!(f.items(), 1);
    }

    proptest! {
        /// No false negatives, whatever was inserted and however far the
        /// filter had to grow.
        #[test]
        fn no_false_negatives(
            expected in 1u64..200,
            fp in 0.0001f64..0.3,
            items in proptest::collection::vec(any::<u64>(), 0..2_000),
        ) {
            let mut f = ScalableBloom::new(expected, fp);
            for &h in &items {
                f.insert(h);
            }
            for &h in &items {
                prop_assert!(f.contains(h));
            }
        }
    }
}
