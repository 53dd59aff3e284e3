//! Change-point detection over the series of a watched branch's heads. Pure: no I/O, no
//! clock, no randomness.
//!
//! A series holds one value per measured head (the mean of that head's runs), in the order
//! the heads arrived. After each new head the detector asks one question: did the level of
//! the series move somewhere in the recent window, with at least [`Config::min_after`] heads
//! on the new level? The answer is a windowed generalised likelihood-ratio test for one shift
//! in mean (E-Divisive means with α = 2, whose divergence is the difference of the means, one
//! split per window and a Student significance test, as Hunter/Otava use it):
//!
//! - every split of the current segment's window is scored by the standardised difference of
//!   the means on its two sides;
//! - the noise scale comes from the median of successive differences, which one step or one
//!   outlier barely moves;
//! - each value is winsorised at [`Config::clip`] scales from the window's median before it
//!   enters a mean, so one outlier can add at most that much to a side: with three heads
//!   required after a split, one wild head is never a change;
//! - each split's two-sided p-value is adjusted by a weighted Bonferroni that gives the split
//!   with `m` heads after it a share of the budget proportional to `1/m` (a fresh change,
//!   seen by few heads, gets the largest share); a change is declared when the smallest
//!   adjusted p-value is below [`Config::alpha`], so at most `alpha` false alarms per head;
//! - the change is then placed at the split where each side fits its own level best
//!   (winsorised around its own median), so a large step is cut at its first head even when
//!   the head before it leans the new way;
//! - its size (what a watch's threshold judges) compares those two levels, so a head that
//!   a bad run pulled far off cannot shrink a fresh step below the threshold.
//!
//! A head's value ([`head_value`]) is the mean of its runs without a run far from the
//! others: one slow run among five would otherwise move the whole head.
//!
//! The work for one new head is bounded by [`Config::window`], not by the history: a change
//! starts a new segment, and only the last `window` heads of the current segment are looked
//! at. [`Detector`] keeps the series and its segments; [`detect`] is the same test as a
//! function of the stored values, so a server can replay it from its rows.

mod robust;
mod test;

pub use test::{Config, detect};

use serde::{Deserialize, Serialize};

/// A detected shift of the series' level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// Index of the first head on the new level: the change lies between heads
    /// `index - 1` and `index`.
    pub index: usize,
    /// Index of the head whose arrival made the change significant.
    pub detected_at: usize,
    /// Mean of the heads before the change (back to the previous change or the window's start).
    pub before: f64,
    /// Mean of the heads from `index` to `detected_at`.
    pub after: f64,
    /// `(after - before) / |before|`; 0 when `before` is 0.
    pub relative: f64,
    /// The test's standardised difference of the two sides at its best split (winsorised
    /// values, robust scale), signed like `after - before`.
    pub z: f64,
    /// The (weighted) Bonferroni-adjusted two-sided p-value of the best split.
    pub p_value: f64,
}

impl Change {
    /// 1 − p: how sure the test is that the level moved.
    pub fn confidence(&self) -> f64 {
        1.0 - self.p_value
    }
}

/// A series with its detected changes, fed one head at a time.
#[derive(Debug, Clone)]
pub struct Detector {
    config: Config,
    values: Vec<f64>,
    changes: Vec<Change>,
}

impl Detector {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            values: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// Adds the next head's value; returns the change it revealed, if any. Non-finite
    /// values are ignored (a head whose runs all failed has no value).
    pub fn push(&mut self, value: f64) -> Option<Change> {
        if !value.is_finite() {
            return None;
        }
        self.values.push(value);
        let change = detect(&self.config, &self.values, self.segment_start())?;
        self.changes.push(change);
        Some(change)
    }

    /// Where the current segment starts: the last change's index, or 0.
    pub fn segment_start(&self) -> usize {
        self.changes.last().map_or(0, |c| c.index)
    }

    pub fn values(&self) -> &[f64] {
        &self.values
    }

    pub fn changes(&self) -> &[Change] {
        &self.changes
    }
}

/// With three runs, a run further than this many robust scales (1.4826 × MAD) from their
/// median is left out of the head's value.
const RUN_REJECT: f64 = 5.0;

/// With four runs or more, the run furthest from the median is left out when it lies more
/// than this many scales of the other runs (their mean absolute deviation from their own
/// median, × √(π/2)) from their median.
const RUN_REJECT_OTHERS: f64 = 6.0;

/// The value of one head: the mean of its finite samples, leaving out a run that lies far
/// from the others. One slow run among five moves a plain mean by a fifth of its excursion,
/// which the series would see as a whole head off its level; normal runs are almost never
/// that far out, so the mean keeps its efficiency. The scale is at least 0.1% of the level.
///
/// - Four runs or more: the run furthest from the median is judged against the spread of
///   the *other* runs, which it cannot inflate. The MAD of five runs, which the outlier
///   takes part in, is small often enough that a rule on it leaves out ordinary runs too:
///   at 5 runs of CV 2% with 1% outliers, judging against the others brings the head's
///   standard deviation from 1.01% to 0.97% of the level (0.94% → 0.93% without outliers;
///   0.89% is the mean of five), which `cp-bench` sees as a shorter detection delay.
/// - Three runs: the two others are too few to measure a spread; a run further than
///   [`RUN_REJECT`] MAD-scales from the median of the three is left out.
/// - Fewer than three samples: nothing can be told apart; the plain mean.
///
/// None when there is no finite sample.
pub fn head_value(samples: &[f64]) -> Option<f64> {
    let mut finite: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    if finite.len() < 3 {
        return Some(mean(&finite));
    }
    let center = robust::median(&mut finite.clone())?;
    if finite.len() >= 4 {
        let (furthest, _) = finite
            .iter()
            .enumerate()
            .max_by(|a, b| (a.1 - center).abs().total_cmp(&(b.1 - center).abs()))?;
        let mut others = finite.clone();
        let x = others.swap_remove(furthest);
        let middle = robust::median(&mut others.clone())?;
        let spread = others.iter().map(|v| (v - middle).abs()).sum::<f64>() / others.len() as f64
            * (std::f64::consts::PI / 2.0).sqrt();
        let limit = RUN_REJECT_OTHERS * spread.max(1e-3 * middle.abs());
        return Some(if (x - middle).abs() > limit {
            mean(&others)
        } else {
            mean(&finite)
        });
    }
    let mut deviations: Vec<f64> = finite.iter().map(|x| (x - center).abs()).collect();
    let mad = robust::median(&mut deviations)? * 1.4826;
    let limit = RUN_REJECT * mad.max(1e-3 * center.abs());
    finite.retain(|x| (x - center).abs() <= limit);
    Some(mean(&finite))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_leaves_out_a_run_far_from_the_others() {
        let five = [100.0, 101.0, 99.0, 100.5, 85.0];
        assert_eq!(head_value(&five), Some(100.125));
        // Ordinary spread is kept whole.
        assert_eq!(head_value(&[98.0, 100.0, 102.0]), Some(100.0));
        // Two runs cannot outvote each other.
        assert_eq!(head_value(&[100.0, 85.0]), Some(92.5));
        // A deterministic metric: equal runs, and a rounding difference kept.
        assert_eq!(head_value(&[7.0, 7.0, 7.0, 7.0]), Some(7.0));
        assert_eq!(head_value(&[1000.0, 1000.0, 1000.0, 1001.0]), Some(1000.25));
        // Three runs close together and two a little further out on either side: the MAD of
        // the five is tiny and would leave both out; against the spread of the others, both
        // are kept.
        let kept = head_value(&[100.0, 100.01, 100.02, 99.0, 101.0]).unwrap();
        assert!((kept - 100.006).abs() < 1e-9, "{kept}");
        assert_eq!(head_value(&[f64::NAN]), None);
        assert_eq!(head_value(&[]), None);
    }

    #[test]
    fn one_slow_run_never_makes_a_change() {
        // Five runs a head, steady level, and one head with a run 30% slow.
        let mut d = Detector::new(Config::default());
        for i in 0..60 {
            let wobble = [0.3, -0.8, 1.1, -0.2, 0.6][i % 5];
            let mut runs: Vec<f64> = (0..5).map(|k| 100.0 + wobble + 0.4 * k as f64).collect();
            if i == 40 {
                runs[2] = 70.0;
            }
            d.push(head_value(&runs).unwrap());
        }
        assert!(d.changes().is_empty(), "{:?}", d.changes());
    }
}
