//! The test run after each new head: one shift in mean, anywhere in the recent window.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::Change;
use crate::robust::{diff_scale, median};

/// Degrees of freedom per successive difference of the scale estimate: the mean squared
/// successive difference has about 2/3 of the sample variance's efficiency under normal noise.
const SCALE_EFFICIENCY: f64 = 0.67;

/// The detector's knobs. The defaults are what `cp-bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// How many recent heads one test looks at: the cost of a new head is O(window·log window).
    pub window: usize,
    /// Heads needed on the old level before a split is tried.
    pub min_before: usize,
    /// Heads needed on the new level: with 3, one outlier (clipped to `clip` scales) cannot
    /// move the mean after a split far enough to be significant.
    pub min_after: usize,
    /// Most heads after a split that are tried: a change older than this would have been
    /// found already, and fewer splits tried means a smaller Bonferroni factor.
    pub max_after: usize,
    /// Values are winsorised at the window's median ± `clip` noise scales.
    pub clip: f64,
    /// Largest Bonferroni-adjusted p-value declared a change: about the false alarms per head.
    pub alpha: f64,
    /// Floor on the noise scale, relative to the level: keeps a perfectly steady series (a
    /// deterministic benchmark) from turning a rounding difference into a change.
    pub min_relative_scale: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            window: 100,
            min_before: 5,
            min_after: 3,
            max_after: 30,
            clip: 3.0,
            alpha: 2e-3,
            min_relative_scale: 1e-3,
        }
    }
}

/// Tests the last head of `values`: is there one significant shift in mean between
/// `segment_start` (the previous change, or 0) and the end, within the last `config.window`
/// heads, with at least `config.min_after` heads after it? Returns the best such split.
///
/// Reads only the last `config.window` values, so replaying it over stored rows costs the
/// same as [`crate::Detector::push`].
pub fn detect(config: &Config, values: &[f64], segment_start: usize) -> Option<Change> {
    let n = values.len();
    let window_start = n.saturating_sub(config.window.max(config.min_before + config.min_after));
    let start = segment_start.max(window_start);
    let seg = values.get(start..)?;
    let len = seg.len();
    if len < config.min_before.max(1) + config.min_after.max(1) {
        return None;
    }
    let center = median(&mut seg.to_vec())?;
    // The scale comes from the whole window, across segment boundaries: a fresh segment
    // is too short to estimate it. A rough, very robust scale (median of differences) bounds
    // each successive difference; the root mean square of the bounded differences is the
    // scale the test uses (more efficient, and one step or outlier adds a bounded amount).
    let floor = (config.min_relative_scale * center.abs()).max(f64::MIN_POSITIVE);
    let window = &values[window_start..];
    let rough = diff_scale(window).unwrap_or(0.0).max(floor);
    let bound = config.clip * std::f64::consts::SQRT_2 * rough;
    let squares: f64 = window
        .windows(2)
        .map(|w| (w[1] - w[0]).clamp(-bound, bound).powi(2))
        .sum();
    let diffs = window.len() - 1;
    let scale = (squares / (2.0 * diffs as f64)).sqrt().max(floor);
    let (lo, hi) = (center - config.clip * rough, center + config.clip * rough);

    // Prefix sums of the clipped values (for the test) and the raw ones (for the sizes).
    let mut clipped = Vec::with_capacity(len + 1);
    let mut raw = Vec::with_capacity(len + 1);
    clipped.push(0.0);
    raw.push(0.0);
    for &x in seg {
        clipped.push(clipped.last().copied().unwrap_or(0.0) + x.clamp(lo, hi));
        raw.push(raw.last().copied().unwrap_or(0.0) + x);
    }

    let first = config
        .min_before
        .max(1)
        .max(len.saturating_sub(config.max_after.max(config.min_after)));
    let last = len - config.min_after.max(1);
    let mut best: Option<(usize, f64)> = None;
    for tau in first..=last {
        let (k, m) = (tau as f64, (len - tau) as f64);
        let before = clipped[tau] / k;
        let after = (clipped[len] - clipped[tau]) / m;
        let z = (after - before) / (scale * (1.0 / k + 1.0 / m).sqrt());
        if best.is_none_or(|(_, b)| z.abs() > b.abs()) {
            best = Some((tau, z));
        }
    }
    let (tau, z) = best?;
    let tries = (last - first + 1) as f64;
    // The scale is an estimate: a Student t with the degrees of freedom the successive
    // differences are worth keeps a young series, whose scale rests on a few differences,
    // from alarming more often than an old one.
    let df = (SCALE_EFFICIENCY * diffs as f64).max(1.0);
    let p_value = match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => (2.0 * t.sf(z.abs()) * tries).min(1.0),
        Err(_) => 1.0,
    };
    if p_value >= config.alpha {
        return None;
    }
    let before = raw[tau] / tau as f64;
    let after = (raw[len] - raw[tau]) / (len - tau) as f64;
    let relative = if before == 0.0 {
        0.0
    } else {
        (after - before) / before.abs()
    };
    Some(Change {
        index: start + tau,
        detected_at: n - 1,
        before,
        after,
        relative,
        z,
        p_value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Detector;

    /// A deterministic noise of about ±1 (no randomness in the crate's tests).
    fn wobble(i: usize) -> f64 {
        [0.3, -0.8, 1.1, -0.2, 0.6, -1.0, 0.1, 0.9, -0.5, -0.4][i % 10]
    }

    fn feed(values: &[f64]) -> Detector {
        let mut d = Detector::new(Config::default());
        for &v in values {
            d.push(v);
        }
        d
    }

    #[test]
    fn a_steady_series_has_no_change() {
        let values: Vec<f64> = (0..300).map(|i| 100.0 + wobble(i)).collect();
        assert!(feed(&values).changes().is_empty());
    }

    #[test]
    fn a_step_is_found_at_its_head_with_size_and_confidence() {
        let values: Vec<f64> = (0..60)
            .map(|i| 100.0 + wobble(i) + if i >= 40 { 10.0 } else { 0.0 })
            .collect();
        let d = feed(&values);
        assert_eq!(d.changes().len(), 1, "{:?}", d.changes());
        let c = d.changes()[0];
        assert_eq!(c.index, 40);
        assert!(c.detected_at <= 40 + 4, "detected at {}", c.detected_at);
        assert!((c.relative - 0.10).abs() < 0.02, "{c:?}");
        assert!(c.confidence() > 0.999, "{c:?}");
    }

    #[test]
    fn one_outlier_is_not_a_change_however_large() {
        let mut values: Vec<f64> = (0..80).map(|i| 100.0 + wobble(i)).collect();
        values[50] = 1000.0;
        values[70] = -500.0;
        assert!(feed(&values).changes().is_empty());
    }

    #[test]
    fn two_changes_are_two_segments() {
        let values: Vec<f64> = (0..90)
            .map(|i| {
                100.0
                    + wobble(i)
                    + match i {
                        0..30 => 0.0,
                        30..60 => 8.0,
                        _ => -5.0,
                    }
            })
            .collect();
        let d = feed(&values);
        let idx: Vec<usize> = d.changes().iter().map(|c| c.index).collect();
        assert_eq!(idx, vec![30, 60]);
        assert!(d.changes()[1].relative < 0.0);
    }

    #[test]
    fn detect_reads_only_the_window() {
        // The same last 100 values after different histories give the same answer.
        let tail: Vec<f64> = (0..100)
            .map(|i| 50.0 + wobble(i) + if i >= 95 { 6.0 } else { 0.0 })
            .collect();
        let mut long: Vec<f64> = (0..5000).map(|i| 50.0 + wobble(i + 3)).collect();
        long.extend(&tail);
        let c = Config::default();
        let a = detect(&c, &tail, 0).expect("change");
        let b = detect(&c, &long, 0).expect("change");
        assert_eq!(a.index + 5000, b.index);
        assert_eq!(a.z, b.z);
    }

    #[test]
    fn a_deterministic_series_uses_the_scale_floor() {
        let values: Vec<f64> = (0..20)
            .map(|i| if i < 12 { 1000.0 } else { 1050.0 })
            .collect();
        let d = feed(&values);
        assert_eq!(d.changes().len(), 1);
        assert_eq!(d.changes()[0].index, 12);
    }
}
