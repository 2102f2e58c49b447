//! Student's t and the normal distribution, as far as small-sample
//! intervals need them: the two-sided quantile at a confidence.

/// P(|T| < t) for Student's t with `nu` ≥ 1 degrees of freedom, by the
/// finite series of Abramowitz and Stegun 26.7.3 (odd ν) and 26.7.4 (even
/// ν), exact for integer ν.
fn t_central(t: f64, nu: u32) -> f64 {
    let theta = (t / f64::from(nu).sqrt()).atan();
    let (s, c2) = (theta.sin(), theta.cos().powi(2));
    if nu % 2 == 0 {
        // sinθ · (1 + ½cos²θ + (1·3)/(2·4)cos⁴θ + … up to cos^(ν−2)θ)
        let (mut term, mut sum) = (1.0, 1.0);
        for j in 1..nu / 2 {
            term *= c2 * f64::from(2 * j - 1) / f64::from(2 * j);
            sum += term;
        }
        s * sum
    } else {
        // (2/π) · (θ + sinθ · (cosθ + (2/3)cos³θ + … up to cos^(ν−2)θ))
        let c = theta.cos();
        let mut sum = 0.0;
        if nu > 1 {
            let mut term = c;
            sum = c;
            for j in 1..(nu - 1) / 2 {
                term *= c2 * f64::from(2 * j) / f64::from(2 * j + 1);
                sum += term;
            }
        }
        std::f64::consts::FRAC_2_PI * (theta + s * sum)
    }
}

/// P(|Z| < z) for a standard normal Z (Simpson's rule on the density;
/// error below 1e-9 for the z an interval uses, z < 5).
fn normal_central(z: f64) -> f64 {
    let steps = 200;
    let h = z / f64::from(steps);
    let f = |x: f64| (-0.5 * x * x).exp();
    let inner: f64 = (1..steps)
        .map(|i| f(f64::from(i) * h) * if i % 2 == 1 { 4.0 } else { 2.0 })
        .sum();
    (f(0.0) + inner + f(z)) * h / 3.0 * 2.0 / std::f64::consts::TAU.sqrt()
}

/// The x ≥ 0 with `central(x)` = `confidence`, by bisection (`central`
/// rises from 0 to 1).
fn invert(confidence: f64, central: impl Fn(f64) -> f64) -> f64 {
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while central(hi) < confidence && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if central(mid) < confidence {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The two-sided t quantile: the t with P(|T| < t) = `confidence` for ν =
/// `nu` (2.776 for 0.95 and ν = 4). `confidence` in (0, 1), `nu` ≥ 1.
pub fn t_two_sided(confidence: f64, nu: u32) -> f64 {
    invert(confidence, |t| t_central(t, nu.max(1)))
}

/// The two-sided normal quantile (1.960 for 0.95).
pub fn z_two_sided(confidence: f64) -> f64 {
    invert(confidence, normal_central)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_the_tables() {
        // Two-sided 95 % and 99 % points of t (any statistics table).
        for (nu, t95, t99) in [
            (1, 12.706, 63.657),
            (2, 4.303, 9.925),
            (3, 3.182, 5.841),
            (4, 2.776, 4.604),
            (5, 2.571, 4.032),
            (9, 2.262, 3.250),
            (30, 2.042, 2.750),
        ] {
            assert!((t_two_sided(0.95, nu) - t95).abs() < 1e-3, "ν={nu}");
            assert!((t_two_sided(0.99, nu) - t99).abs() < 1e-3, "ν={nu}");
        }
        assert!((z_two_sided(0.95) - 1.959_964).abs() < 1e-5);
        assert!((z_two_sided(0.90) - 1.644_854).abs() < 1e-5);
        assert!(t_two_sided(0.95, 1000) > z_two_sided(0.95));
    }
}
