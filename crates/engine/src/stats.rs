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

/// The variance rounding adds to a run where the values sit on a grid (a metric reported to
/// a fixed resolution: whole milliseconds, two decimals): q²/12 for a grid step q (Sheppard's
/// correction). q is the smallest gap between two different values of one point, and counts
/// only where runs of one point tie often (in at least half the runs of points measured twice
/// or more). Values that do not repeat are not rounded to anything that shows, and a
/// deterministic metric (every point repeats one value) has no gap within a point: 0 for both.
///
/// Runs of one deployment that all read the same grid value show no scatter there, though the
/// metric has some; read as none, that scatter made the boot variance 10¹⁵ times the run
/// variance, and the search then re-measured one commit to the run cap.
pub(crate) fn rounding_variance<'a>(points: impl Iterator<Item = &'a [f64]>) -> f64 {
    let (mut runs, mut ties, mut q) = (0usize, 0usize, f64::INFINITY);
    for values in points {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.len() < 2 {
            continue;
        }
        runs += v.len();
        v.sort_by(f64::total_cmp);
        for w in v.windows(2) {
            let gap = w[1] - w[0];
            if gap > 0.0 {
                q = q.min(gap);
            } else {
                ties += 1;
            }
        }
    }
    if runs >= 8 && 2 * ties >= runs && q.is_finite() {
        q * q / 12.0
    } else {
        0.0
    }
}

/// Whether every point's runs repeat one value exactly (a deterministic metric), with at
/// least one point measured twice.
pub(crate) fn repeats_exactly<'a>(points: impl Iterator<Item = &'a [f64]>) -> bool {
    let mut seen = false;
    for values in points {
        let mut v = values.iter().filter(|x| x.is_finite());
        if let Some(first) = v.next() {
            for x in v {
                if x != first {
                    return false;
                }
                seen = true;
            }
        }
    }
    seen
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
    fn rounding_shows_only_where_runs_of_one_point_tie_on_a_grid() {
        // Whole units at a noise of about half a unit: most runs of a point tie, the grid
        // step is 1, and rounding adds 1/12.
        let grid: Vec<Vec<f64>> = vec![
            vec![100.0, 100.0, 101.0, 100.0, 100.0],
            vec![103.0, 103.0, 103.0, 102.0],
            vec![100.0, 100.0, 100.0],
        ];
        let v = rounding_variance(grid.iter().map(Vec::as_slice));
        assert!(close(v, 1.0 / 12.0, 1e-12), "{v}");
        // Values that never repeat: nothing to correct.
        let smooth: Vec<Vec<f64>> = vec![
            vec![100.013, 99.871, 100.242, 100.108],
            vec![103.117, 102.902, 103.305, 102.998, 103.051],
        ];
        assert_eq!(rounding_variance(smooth.iter().map(Vec::as_slice)), 0.0);
        // A deterministic metric: each point one value, the gaps are between points only.
        let exact: Vec<Vec<f64>> = vec![vec![100.0; 5], vec![103.0; 5], vec![101.5; 3]];
        assert_eq!(rounding_variance(exact.iter().map(Vec::as_slice)), 0.0);
        assert!(repeats_exactly(exact.iter().map(Vec::as_slice)));
        assert!(!repeats_exactly(grid.iter().map(Vec::as_slice)));
        // One run a point says nothing either way.
        let single: Vec<Vec<f64>> = vec![vec![100.0], vec![103.0]];
        assert!(!repeats_exactly(single.iter().map(Vec::as_slice)));
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
