//! Which key a request touches: uniform over the key space, or Zipf-skewed
//! (a few hot keys, a long cold tail), as `--dist uniform|zipf:S` says.

use rand::rngs::SmallRng;
use rand::RngExt;
use std::fmt;
use std::str::FromStr;

/// A key distribution over `0..keys`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Dist {
    Uniform,
    /// Zipf with exponent `s` (> 0): key `k` (0-based) has weight `1/(k+1)^s`,
    /// so key 0 is the hottest.
    Zipf(f64),
}

impl FromStr for Dist {
    type Err = String;

    fn from_str(s: &str) -> Result<Dist, String> {
        if s == "uniform" {
            return Ok(Dist::Uniform);
        }
        if let Some(exp) = s.strip_prefix("zipf:") {
            let exp: f64 = exp
                .parse()
                .map_err(|_| format!("zipf exponent {exp:?} is not a number"))?;
            if !(exp > 0.0 && exp <= 10.0) {
                return Err(format!("zipf exponent must be in (0, 10], not {exp}"));
            }
            return Ok(Dist::Zipf(exp));
        }
        if s == "zipf" {
            return Ok(Dist::Zipf(0.99));
        }
        Err(format!(
            "unknown distribution {s:?}: use uniform or zipf:S (e.g. zipf:0.99)"
        ))
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dist::Uniform => write!(f, "uniform"),
            Dist::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

/// Draws key indexes from a [`Dist`]. Cheap to copy: every lane has its own.
#[derive(Debug, Clone, Copy)]
pub enum KeySampler {
    Uniform { keys: u64 },
    Zipf(Zipf),
}

impl KeySampler {
    pub fn new(dist: Dist, keys: u64) -> KeySampler {
        let keys = keys.max(1);
        match dist {
            Dist::Uniform => KeySampler::Uniform { keys },
            Dist::Zipf(s) => KeySampler::Zipf(Zipf::new(keys, s)),
        }
    }

    /// A key index in `0..keys`.
    #[inline]
    pub fn sample(&self, rng: &mut SmallRng) -> u64 {
        match self {
            KeySampler::Uniform { keys } => rng.random_range(0..*keys),
            KeySampler::Zipf(z) => z.sample(rng) - 1,
        }
    }
}

/// Zipf sampling by rejection-inversion (W. Hörmann and G. Derflinger,
/// "Rejection-inversion to generate variates from monotone discrete
/// distributions", 1996), as in Apache Commons RNG: O(1) time and memory per
/// draw whatever the key count, so 10M keys cost no table. Returns ranks in
/// `1..=n`.
#[derive(Debug, Clone, Copy)]
pub struct Zipf {
    n: f64,
    exponent: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    s: f64,
}

impl Zipf {
    pub fn new(n: u64, exponent: f64) -> Zipf {
        assert!(
            n >= 1 && exponent > 0.0,
            "zipf needs n >= 1 and exponent > 0"
        );
        let mut z = Zipf {
            n: n as f64,
            exponent,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            s: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.s = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    pub fn sample(&self, rng: &mut SmallRng) -> u64 {
        loop {
            let r: f64 = rng.random();
            let u = self.h_integral_n + r * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.s || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.exponent * x.ln()).exp()
    }

    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        helper2((1.0 - self.exponent) * log_x) * log_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.exponent)).max(-1.0);
        (helper1(t) * x).exp()
    }
}

/// `ln(1+x)/x`, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// `(e^x - 1)/x`, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn parses() {
        assert_eq!("uniform".parse::<Dist>(), Ok(Dist::Uniform));
        assert_eq!("zipf:1.2".parse::<Dist>(), Ok(Dist::Zipf(1.2)));
        assert_eq!("zipf".parse::<Dist>(), Ok(Dist::Zipf(0.99)));
        assert!("zipf:0".parse::<Dist>().is_err());
        assert!("zipf:x".parse::<Dist>().is_err());
        assert!("normal".parse::<Dist>().is_err());
        assert_eq!(Dist::Zipf(0.99).to_string(), "zipf:0.99");
    }

    #[test]
    fn uniform_stays_in_range_and_covers_it() {
        let mut rng = SmallRng::seed_from_u64(1);
        let s = KeySampler::new(Dist::Uniform, 10);
        let mut seen = [0u32; 10];
        for _ in 0..10_000 {
            seen[s.sample(&mut rng) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800 && c < 1200), "{seen:?}");
    }

    /// The sampled frequencies match the Zipf probabilities `k^-s / H(n,s)`.
    #[test]
    fn zipf_matches_its_probabilities() {
        for &(n, exp) in &[(1000u64, 1.0f64), (100, 0.5), (50, 2.0)] {
            let mut rng = SmallRng::seed_from_u64(7);
            let s = KeySampler::new(Dist::Zipf(exp), n);
            let draws = 200_000;
            let mut counts = vec![0u32; n as usize];
            for _ in 0..draws {
                let k = s.sample(&mut rng);
                assert!(k < n);
                counts[k as usize] += 1;
            }
            let norm: f64 = (1..=n).map(|k| (k as f64).powf(-exp)).sum();
            for k in [1u64, 2, 3, 10] {
                let want = (k as f64).powf(-exp) / norm;
                let got = counts[k as usize - 1] as f64 / draws as f64;
                assert!(
                    (got - want).abs() < 0.01 + want * 0.05,
                    "n={n} s={exp} k={k}: got {got}, want {want}"
                );
            }
        }
    }

    #[test]
    fn zipf_with_one_key() {
        let mut rng = SmallRng::seed_from_u64(3);
        let s = KeySampler::new(Dist::Zipf(0.99), 1);
        assert!((0..100).all(|_| s.sample(&mut rng) == 0));
    }
}
