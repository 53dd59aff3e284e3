//! Robust location and scale of a short window.

/// The median of `values` (which it reorders, in linear time); None when empty.
pub(crate) fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let (below, mid, _) = values.select_nth_unstable_by(n / 2, f64::total_cmp);
    let mid = *mid;
    Some(if n % 2 == 1 {
        mid
    } else {
        // The largest of the lower half is the other middle value.
        let lower = below.iter().copied().max_by(f64::total_cmp).unwrap_or(mid);
        (lower + mid) / 2.0
    })
}

/// The noise's standard deviation estimated from successive differences: for independent
/// normal values `|x[i] − x[i−1]|` has median `σ·√2·0.6745`. A level shift touches one
/// difference and an outlier two, so neither moves the median much (unlike the sample
/// standard deviation, which a step inflates). None with fewer than three values.
pub(crate) fn diff_scale(values: &[f64]) -> Option<f64> {
    if values.len() < 3 {
        return None;
    }
    let mut diffs: Vec<f64> = values.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    let m = median(&mut diffs)?;
    Some(m / (std::f64::consts::SQRT_2 * 0.674_489_750_196_081_7))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn diff_scale_ignores_one_step() {
        // Alternating ±1 around a level that jumps by 100 halfway: the step is one difference.
        let values: Vec<f64> = (0..40)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 } + if i >= 20 { 100.0 } else { 0.0 })
            .collect();
        let s = diff_scale(&values).unwrap();
        // Every other difference is 2: σ ≈ 2 / (√2·0.6745) ≈ 2.10.
        assert!(
            (s - 2.0 / (std::f64::consts::SQRT_2 * 0.6745)).abs() < 0.01,
            "{s}"
        );
    }
}
