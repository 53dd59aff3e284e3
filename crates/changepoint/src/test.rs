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
    /// found already, and fewer splits tried leaves more of `alpha` to each.
    pub max_after: usize,
    /// Values are winsorised at the window's median ± `clip` noise scales.
    pub clip: f64,
    /// Largest adjusted p-value (weighted Bonferroni over the splits tried) declared a
    /// change: a bound on the false alarms per head.
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
            alpha: 1e-3,
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
    let bound = config.clip * rough;

    let first = config
        .min_before
        .max(1)
        .max(len.saturating_sub(config.max_after.max(config.min_after)));
    let last = len - config.min_after.max(1);
    // The scale is an estimate: a Student t with the degrees of freedom the successive
    // differences are worth keeps a young series, whose scale rests on a few differences,
    // from alarming more often than an old one.
    let df = (SCALE_EFFICIENCY * diffs as f64).max(1.0);
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    // Weighted Bonferroni: the split with `m` heads after it gets a share `(1/m) / H` of
    // alpha (H the sum of 1/m over the splits tried). A recent change, seen by few heads,
    // needs every bit of the budget; an older one has had more heads to grow its z (√m), so
    // its smaller share costs it little. The union bound still holds: at most alpha per head.
    let harmonic: f64 = (first..=last).map(|tau| 1.0 / (len - tau) as f64).sum();
    let mut best: Option<(usize, f64, f64)> = None;
    for tau in first..=last {
        let (k, m) = (tau as f64, (len - tau) as f64);
        let (Some(before), Some(after)) = (
            winsorised_mean(&seg[..tau], bound),
            winsorised_mean(&seg[tau..], bound),
        ) else {
            continue;
        };
        let z = (after - before) / (scale * (1.0 / k + 1.0 / m).sqrt());
        let adjusted = 2.0 * t.sf(z.abs()) * m * harmonic;
        // Far in the tail the p-values underflow to 0: the larger z wins.
        if best.is_none_or(|(_, b, bz)| adjusted < b || (adjusted == b && z.abs() > bz.abs())) {
            best = Some((tau, adjusted, z));
        }
    }
    let (best_tau, adjusted, z) = best?;
    let p_value = adjusted.min(1.0);
    if p_value >= config.alpha {
        return None;
    }
    // The place may lie later than the splits the test could try (the test's best split
    // leaned a head early): then the new level has fewer than `min_after` heads yet, and
    // the next head decides.
    let tau = locate(seg, first, len - 1, config.clip * scale).unwrap_or(best_tau);
    if tau > last {
        return None;
    }
    // The levels (and so the size that the watch's threshold is judged by) are each side's
    // mean winsorised around its own median, as `locate` fits them: a commit whose value a
    // bad run pulled far off (two slow runs of three: the commit's value is the slow one)
    // moves a level by at most a few scales, where a raw mean of the three commits after a
    // fresh change moved it by a third of the change and had an 8% step judged as 2.6%,
    // below its watch's threshold.
    let side_bound = config.clip * scale;
    let before = winsorised_mean(&seg[..tau], side_bound)?;
    let after = winsorised_mean(&seg[tau..], side_bound)?;
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

/// `side` winsorised at `bound` from its own median; None when empty.
fn winsorised(side: &[f64], bound: f64) -> Option<Vec<f64>> {
    let center = median(&mut side.to_vec())?;
    Some(
        side.iter()
            .map(|x| x.clamp(center - bound, center + bound))
            .collect(),
    )
}

/// The mean of `side` winsorised at `bound` from its own median: one value moves it by at
/// most `bound / len`, and a step between the sides is never cut down.
fn winsorised_mean(side: &[f64], bound: f64) -> Option<f64> {
    let w = winsorised(side, bound)?;
    Some(w.iter().sum::<f64>() / w.len() as f64)
}

/// Where the shift lies, once the test has found one: the split whose two sides fit their
/// own levels best (least squares, each value winsorised at `bound` from its side's median).
///
/// The test's own best split is not the place to cut: it winsorises around one centre for
/// the whole window, so a step much larger than the noise is flattened to `clip` scales on
/// the new side, and an old head that happened to lean the new way by a scale or so then
/// looks like part of the new level. At the first detection, with three heads after, the
/// test prefers the split one head early; the bisect between the wrong pair of heads would
/// not reproduce; or the test fires with its split one head early, before the true split
/// has `min_after` heads after it. Fitting each side to its own centre keeps the step whole,
/// and one outlier can still cost no more than `bound`.
fn locate(seg: &[f64], first: usize, last: usize, bound: f64) -> Option<usize> {
    let fit = |side: &[f64]| -> Option<f64> {
        let clipped = winsorised(side, bound)?;
        let mean = clipped.iter().sum::<f64>() / clipped.len() as f64;
        Some(clipped.iter().map(|x| (x - mean).powi(2)).sum())
    };
    let mut best: Option<(usize, f64)> = None;
    for tau in first..=last {
        let cost = fit(&seg[..tau])? + fit(&seg[tau..])?;
        if best.is_none_or(|(_, c)| cost < c) {
            best = Some((tau, cost));
        }
    }
    best.map(|(tau, _)| tau)
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
    fn a_fresh_step_keeps_its_size_when_one_commit_after_it_came_out_slow() {
        // Head values seen by a watch (CV 0.5%, 3 runs a commit): an 8% step at index 9,
        // whose first commit had two slow runs of three, so its value is the slow one.
        let values = [
            1000.7, 1002.1, 1001.5, 1000.4, 999.3, 994.6, 999.0, 995.1, 999.9, 918.2, 1079.2,
            1078.2,
        ];
        let c = detect(&Config::default(), &values, 0).expect("the step is significant");
        assert_eq!(c.index, 9, "{c:?}");
        assert!(
            c.relative > 0.06,
            "an 8% step judged as {:.1}%",
            100.0 * c.relative
        );
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
    fn a_large_step_is_cut_at_its_head_when_the_head_before_leans_its_way() {
        // The last old head is 1.5 noise scales low and the level then drops by 20 scales:
        // the cut must still fall between heads 39 and 40, at the first detection.
        let mut values: Vec<f64> = (0..40).map(|i| 100.0 + wobble(i)).collect();
        values[39] = 98.5;
        values.extend((40..43).map(|i| 80.0 + wobble(i)));
        let d = feed(&values);
        assert_eq!(d.changes().len(), 1, "{:?}", d.changes());
        assert_eq!(d.changes()[0].index, 40, "{:?}", d.changes());
        assert!(d.changes()[0].detected_at <= 42, "{:?}", d.changes());
    }

    #[test]
    fn a_large_step_after_a_short_segment_is_found_three_heads_on() {
        // A segment of six heads, then a step of 7%: winsorising around one centre for the
        // whole window capped such a step's z below the threshold, however large the step.
        let values: Vec<f64> = (0..18)
            .map(|i| {
                0.2 * wobble(i)
                    + match i {
                        0..9 => 100.0,
                        9..15 => 108.0,
                        _ => 100.4,
                    }
            })
            .collect();
        let d = feed(&values);
        let found: Vec<(usize, usize)> = d
            .changes()
            .iter()
            .map(|c| (c.index, c.detected_at))
            .collect();
        assert_eq!(found, vec![(9, 11), (15, 17)], "{:?}", d.changes());
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
