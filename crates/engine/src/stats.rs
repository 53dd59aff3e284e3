//! Sample statistics the engine and the reports share.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// n, mean, population and sample stddev, min, median, max of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 when n < 2.
    pub stddev: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Summary {
    /// The summary of the finite values of `samples`; None when there are none.
    pub fn of(samples: &[f64]) -> Option<Self> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let stddev = if n < 2 {
            0.0
        } else {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        };
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Self {
            n,
            mean,
            stddev,
            min: v[0],
            median,
            max: v[n - 1],
        })
    }

    /// Sample variance (n − 1).
    pub fn variance(&self) -> f64 {
        self.stddev * self.stddev
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WelchTest {
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
}

/// Welch's unequal-variance two-sample t-test (statrs has none). None when either side has n < 2.
///
/// `t` is positive when the mean of `a` is above the mean of `b`. The degrees of freedom
/// follow Welch–Satterthwaite. When both samples have zero variance the test degenerates:
/// equal means give t = 0, p = 1; different means give t = ±∞, p = 0.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<WelchTest> {
    let sa = Summary::of(a)?;
    let sb = Summary::of(b)?;
    if sa.n < 2 || sb.n < 2 {
        return None;
    }
    let (na, nb) = (sa.n as f64, sb.n as f64);
    let (qa, qb) = (sa.variance() / na, sb.variance() / nb);
    let se2 = qa + qb;
    let diff = sa.mean - sb.mean;
    if se2 <= 0.0 {
        let df = na + nb - 2.0;
        return Some(if diff == 0.0 {
            WelchTest {
                t: 0.0,
                df,
                p_value: 1.0,
            }
        } else {
            WelchTest {
                t: diff.signum() * f64::INFINITY,
                df,
                p_value: 0.0,
            }
        });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0));
    Some(WelchTest {
        t,
        df,
        p_value: students_t_two_sided(t, df),
    })
}

/// Two-sided tail probability of Student's t with `df` degrees of freedom at `t`.
pub(crate) fn students_t_two_sided(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return if t.is_nan() { 1.0 } else { 0.0 };
    }
    let dist = StudentsT::new(0.0, 1.0, df).expect("positive degrees of freedom");
    (2.0 * dist.sf(t.abs())).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn summary_of_small_samples() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN]), None);
        let one = Summary::of(&[3.0]).unwrap();
        assert_eq!(
            (one.n, one.mean, one.stddev, one.median),
            (1, 3.0, 0.0, 3.0)
        );
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, s² = 32/7.
        let s = Summary::of(&[9.0, 4.0, 2.0, 4.0, 5.0, 4.0, 7.0, 5.0]).unwrap();
        assert_eq!(s.n, 8);
        assert!(close(s.mean, 5.0, 1e-12));
        assert!(close(s.stddev, (32.0f64 / 7.0).sqrt(), 1e-12));
        assert_eq!((s.min, s.median, s.max), (2.0, 4.5, 9.0));
        let odd = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!(odd.median, 3.0);
    }

    #[test]
    fn welch_matches_hand_computation() {
        // a: mean 2, s² = 1 (n 3); b: mean 5, s² = 2 (n 3).
        // se² = 1/3 + 2/3 = 1, t = -3, df = 1 / ((1/9)/2 + (4/9)/2) = 3.6.
        let r = 2f64.sqrt();
        let w = welch_t_test(&[1.0, 2.0, 3.0], &[5.0 - r, 5.0, 5.0 + r]).unwrap();
        assert!(close(w.t, -3.0, 1e-12), "{w:?}");
        assert!(close(w.df, 3.6, 1e-12), "{w:?}");
        // Reference: 2·P(T_3.6 > 3) = 0.045699 (Simpson integration of the t density).
        assert!(close(w.p_value, 0.045699, 1e-5), "{w:?}");
    }

    #[test]
    fn welch_with_integer_df_matches_tables() {
        // Equal n and variances: df = 2n - 2. n = 5, both s² = 2.5, means differ by 3.16227766:
        // se = 1, t = 3.16227766, df = 8; t-tables give two-sided p = 0.013349.
        let d = 10f64.sqrt();
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b: Vec<f64> = a.iter().map(|x| x + d).collect();
        let w = welch_t_test(&b, &a).unwrap();
        assert!(close(w.t, d, 1e-12));
        assert!(close(w.df, 8.0, 1e-9));
        assert!(close(w.p_value, 0.013349, 1e-5), "{w:?}");
    }

    #[test]
    fn welch_degenerate_cases() {
        assert_eq!(welch_t_test(&[1.0], &[1.0, 2.0]), None);
        let same = welch_t_test(&[1.0, 1.0], &[1.0, 1.0]).unwrap();
        assert_eq!((same.t, same.p_value), (0.0, 1.0));
        let apart = welch_t_test(&[1.0, 1.0], &[2.0, 2.0]).unwrap();
        assert_eq!((apart.t, apart.p_value), (f64::NEG_INFINITY, 0.0));
        let null = welch_t_test(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap();
        assert!(close(null.p_value, 1.0, 1e-12));
    }
}
