//! Change-point detection over the series of a watched branch's heads. Pure: no I/O, no
//! clock, no randomness.
//!
//! A series holds one value per measured head (the mean of that head's runs), in the order
//! the heads arrived. After each new head the detector asks one question: did the level of
//! the series move somewhere in the recent window, with at least [`Config::min_after`] heads
//! on the new level? The answer is a windowed generalised likelihood-ratio test for one shift
//! in mean (the family of E-Divisive and of Hunter/Otava's windowed Student test):
//!
//! - every split of the current segment's window is scored by the standardised difference of
//!   the means on its two sides;
//! - the noise scale comes from the median of successive differences, which one step or one
//!   outlier barely moves;
//! - each value is winsorised at [`Config::clip`] scales from the window's median before it
//!   enters a mean, so one outlier can add at most that much to a side: with three heads
//!   required after a split, one wild head is never a change;
//! - the best split's two-sided p-value is multiplied by the number of splits tried
//!   (Bonferroni), and a change is declared when it is below [`Config::alpha`].
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
    /// Standardised difference of the two sides (robust scale), signed like `after - before`.
    pub z: f64,
    /// The Bonferroni-adjusted two-sided p-value of the best split.
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

/// The value of one head: the mean of its finite samples; None when it has none.
pub fn head_value(samples: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    Some(finite.iter().sum::<f64>() / finite.len() as f64)
}
