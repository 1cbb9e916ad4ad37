//! How an envelope's money is split, in integer cents.
//!
//! Both modes keep two invariants by construction, whatever the RNG does:
//! every share is at least 1 cent (a grab never leaves less than one cent
//! per remaining share), and the last share is exactly what is left, so the
//! shares always sum to the total.

use rand::{Rng, RngExt};
use rush_protocol::cmd::EnvelopeMode;

/// The amount of the next grab. `remaining` cents are left for
/// `remaining_count` shares (`remaining >= remaining_count >= 1`); the
/// envelope was `total` cents in `count` shares.
///
/// - Random (double average): uniform in `[1, 2 × remaining / remaining_count]`,
///   capped at `remaining - (remaining_count - 1)` so every later grab can
///   still get a cent; the last grab takes the remainder.
/// - Fixed: `total / count` each, and the `total % count` spare cents go one
///   each to the first grabs — deterministic, so the same envelope always
///   splits the same way. The last grab still takes the remainder (which
///   is exactly its equal share).
pub fn next_share(
    mode: EnvelopeMode,
    total: u64,
    count: u32,
    remaining: u64,
    remaining_count: u32,
    rng: &mut impl Rng,
) -> u64 {
    debug_assert!(remaining_count >= 1 && remaining >= remaining_count as u64);
    if remaining_count <= 1 {
        return remaining;
    }
    let n = remaining_count as u64;
    match mode {
        EnvelopeMode::Random => {
            // remaining >= n, so 2·remaining/n >= 2; u128 so 2·remaining can't overflow.
            let double_average = ((remaining as u128 * 2) / n as u128) as u64;
            let max = double_average.min(remaining - (n - 1));
            rng.random_range(1..=max)
        }
        EnvelopeMode::Fixed => {
            let count = count.max(1) as u64;
            let index = count - n; // 0-based position of this grab
            total / count + u64::from(index < total % count)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    /// Split a whole envelope; checks the per-grab bounds on the way.
    fn split_all(mode: EnvelopeMode, total: u64, count: u32, seed: u64) -> Vec<u64> {
        let mut rng = SmallRng::seed_from_u64(seed);
        let (mut remaining, mut left) = (total, count);
        let mut shares = Vec::with_capacity(count as usize);
        while left > 0 {
            let share = next_share(mode, total, count, remaining, left, &mut rng);
            assert!(share >= 1, "share of {share} cents");
            if left > 1 {
                assert!(
                    remaining - share >= (left - 1) as u64,
                    "later grabs must still get a cent each"
                );
                if mode == EnvelopeMode::Random {
                    assert!(share as u128 <= 2 * remaining as u128 / left as u128);
                }
            } else {
                assert_eq!(share, remaining, "the last grab takes the remainder");
            }
            remaining -= share;
            left -= 1;
            shares.push(share);
        }
        assert_eq!(remaining, 0);
        shares
    }

    proptest! {
        #[test]
        fn random_split_is_exact_and_bounded(
            count in 1u32..2_000,
            extra in 0u64..5_000_000,
            seed in any::<u64>(),
        ) {
            let total = count as u64 + extra;
            let shares = split_all(EnvelopeMode::Random, total, count, seed);
            prop_assert_eq!(shares.len(), count as usize);
            prop_assert_eq!(shares.iter().sum::<u64>(), total);
        }

        #[test]
        fn random_split_handles_huge_totals(
            count in 1u32..50,
            total in (u64::MAX / 2)..u64::MAX,
            seed in any::<u64>(),
        ) {
            let shares = split_all(EnvelopeMode::Random, total, count, seed);
            prop_assert_eq!(shares.iter().map(|&s| s as u128).sum::<u128>(), total as u128);
        }

        #[test]
        fn fixed_split_is_exact_and_even(
            count in 1u32..2_000,
            extra in 0u64..5_000_000,
        ) {
            let total = count as u64 + extra;
            let shares = split_all(EnvelopeMode::Fixed, total, count, 0);
            prop_assert_eq!(shares.iter().sum::<u64>(), total);
            let (lo, hi) = (total / count as u64, total / count as u64 + 1);
            prop_assert!(shares.iter().all(|&s| s == lo || s == hi));
            // The spare cents go to the first grabs, deterministically.
            let spare = (total % count as u64) as usize;
            prop_assert!(shares[..spare].iter().all(|&s| s == hi));
            prop_assert!(shares[spare..].iter().all(|&s| s == lo));
        }
    }

    #[test]
    fn one_cent_each_is_forced() {
        assert_eq!(split_all(EnvelopeMode::Random, 5, 5, 1), vec![1; 5]);
        assert_eq!(split_all(EnvelopeMode::Fixed, 5, 5, 1), vec![1; 5]);
        assert_eq!(split_all(EnvelopeMode::Random, 7, 1, 1), vec![7]);
    }

    #[test]
    fn random_shares_vary() {
        let shares = split_all(EnvelopeMode::Random, 10_000, 100, 42);
        let distinct: std::collections::HashSet<_> = shares.iter().collect();
        assert!(distinct.len() > 20, "{shares:?}");
    }
}
