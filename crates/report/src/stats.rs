//! Per-stat numbers and LKP's "did this stat change" rule.
//!
//! One definition of the per-commit numbers for the whole service, the engine's
//! (`perfbisect_engine::Summary`): arithmetic mean, **sample** standard deviation (divided by
//! n − 1), and the median as the middle value (the mean of the two middle values for an even
//! count). The API, the dashboard, the CLI and the report print these. From lkp-tests
//! (`lib/compare.rb`): `%stddev = 100·stddev/avg`, `%change = 100·(new−base)/base`, and an
//! absolute change for `perf-profile*` and `*%` stats. The row rule follows `lib/stats.rb`
//! and `lib/changed_stat.rb` (with LKP's own median, element n/2, for its separation test);
//! [`RowPolicy`] documents each step.

use serde::{Deserialize, Serialize};

use crate::glob;

/// The summary of one stat's samples at one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divide by n − 1); `None` for a single sample.
    pub stddev: Option<f64>,
    pub min: f64,
    /// The middle value; the mean of the two middle values for an even count.
    pub median: f64,
    pub max: f64,
}

impl Summary {
    /// Summarise samples; `None` when there are none. Non-finite samples are ignored.
    ///
    /// ```
    /// use perfbisect_report::stats::Summary;
    /// let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    /// assert_eq!((s.n, s.mean, s.median), (5, 3.0, 3.0));
    /// assert_eq!(s.stddev, Some(2.5f64.sqrt()), "sample stddev: divided by n - 1");
    /// assert_eq!(Summary::of(&[1.0, 2.0]).unwrap().median, 1.5);
    /// ```
    pub fn of(values: &[f64]) -> Option<Summary> {
        let s = perfbisect_engine::Summary::of(values)?;
        Some(Summary {
            n: s.n,
            mean: s.mean,
            stddev: (s.n > 1).then_some(s.stddev),
            min: s.min,
            median: s.median,
            max: s.max,
        })
    }

    /// `100·stddev/|mean|`; the bare stddev when the mean is zero (as compare.rb does).
    pub fn pct_stddev(&self) -> Option<f64> {
        let sd = self.stddev?;
        Some(if self.mean != 0.0 {
            100.0 * sd / self.mean.abs()
        } else {
            sd
        })
    }
}

/// Whether a stat's change is shown as an absolute difference (`perf-profile*`, `*%`).
pub fn is_absolute_change(stat: &str) -> bool {
    stat.starts_with("perf-profile") || stat.ends_with('%')
}

/// The change from `base` to `new`: `100·(new−base)/base`, or `new−base` for absolute
/// stats. A zero base is replaced by 1e-100, as compare.rb does, so a stat that appears
/// from nothing shows a huge change instead of a division error.
pub fn change(stat: &str, base: f64, new: f64) -> f64 {
    if is_absolute_change(stat) {
        new - base
    } else {
        let base = if base == 0.0 { 1e-100 } else { base };
        100.0 * (new - base) / base
    }
}

/// The plain relative change in percent, `None` when the base is zero.
pub fn relative_change(base: f64, new: f64) -> Option<f64> {
    (base != 0.0).then(|| 100.0 * (new - base) / base.abs())
}

/// A minimum size a stat must reach before a change of it is believable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    /// Glob over stat names.
    pub pattern: String,
    /// The larger of both sides' maxima must exceed this.
    #[serde(default)]
    pub min_max: Option<f64>,
    /// The difference of the medians must exceed this.
    #[serde(default)]
    pub min_delta: Option<f64>,
}

/// Which stats get a row in the comparison table.
///
/// A stat is shown when all of these hold (lkp-tests' rule, `a` = culprit, `b` = parent):
/// 1. both sides have samples, and at least one side has `min_samples` (3) of them;
/// 2. the samples are separated: all of one side lies above the other side's median and
///    that side's median lies above all of the other (after LKP's outlier trimming of
///    n/32 samples per end, at most 3);
/// 3. the ratio of the medians is above `1 + min_perf_change` (1%), or above
///    `1 + min_other_change` (5%) for stats that are not performance metrics;
/// 4. the first matching [`Floor`] is met (e.g. interrupts must exceed 10000).
///
/// `perf-profile.*` stats additionally need a median above `perf_profile_threshold` on
/// one side. The bisected metric is always shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RowPolicy {
    pub min_samples: usize,
    pub min_perf_change: f64,
    pub min_other_change: f64,
    pub perf_profile_threshold: f64,
    /// Globs of stats that are performance metrics (besides the testcase's own stats and
    /// every stat with a KPI direction).
    pub perf_metrics: Vec<String>,
    pub floors: Vec<Floor>,
    /// Globs of stats never shown.
    pub exclude: Vec<String>,
}

impl Default for RowPolicy {
    fn default() -> Self {
        let globs = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect();
        let floor = |pattern: &str, min_max: Option<f64>, min_delta: Option<f64>| Floor {
            pattern: pattern.to_owned(),
            min_max,
            min_delta,
        };
        RowPolicy {
            min_samples: 3,
            min_perf_change: 0.01,
            min_other_change: 0.05,
            perf_profile_threshold: 5.0,
            // lkp-tests' etc/perf-metrics-prefixes, plus /usr/bin/time's stats.
            perf_metrics: globs(&[
                "boot-time.*",
                "energy.*",
                "interrupts.CAL:Function_call_interrupts",
                "iostat.*",
                "perf-c2c.HITM.total",
                "perf-stat.*",
                "pmeter.*",
                "proc-vmstat.*",
                "turbostat.*",
                "vmstat.cpu.*",
                "vmstat.io.*",
                "vmstat.swap.*",
                "vmstat.system.*",
                "time.*",
            ]),
            // lkp-tests' reasonable_perf_change?.
            floors: vec![
                floor("iostat.*", Some(1.0), None),
                floor("pagetypeinfo.*", None, Some(100.0)),
                floor("buddyinfo.*", None, Some(100.0)),
                floor("slabinfo.*", None, Some(100.0)),
                floor("proc-vmstat.*", Some(1000.0), None),
                floor("*meminfo*", Some(1000.0), None),
                floor("lock_stat.*", None, Some(10_000.0)),
                floor("interrupts.*", Some(10_000.0), None),
                floor("softirqs.*", Some(10_000.0), None),
            ],
            exclude: Vec::new(),
        }
    }
}

/// Cap of the median ratio, as in lkp-tests (`MAX_RATIO`).
const MAX_RATIO: f64 = 5.0;

fn trimmed(values: &[f64], max_margin: usize) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let margin = (v.len() >> 5).min(max_margin);
    v[margin..v.len() - margin].to_vec()
}

/// (min, LKP's median — the element at index n/2 of the sorted samples —, max): what LKP's
/// row rule compares. Only the rule uses this median; the printed one is [`Summary`]'s.
fn lkp_spread(values: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some((v[0], v[v.len() / 2], v[v.len() - 1]))
}

/// LKP's separation test on sorted samples: `min_a > median_b && median_a > max_b` or the
/// mirror case (LKP's median).
pub fn separated(base: &[f64], new: &[f64]) -> bool {
    let (Some((a_min, a_med, a_max)), Some((b_min, b_med, b_max))) =
        (lkp_spread(new), lkp_spread(base))
    else {
        return false;
    };
    (b_min > a_med && b_med > a_max) || (a_min > b_med && a_med > b_max)
}

impl RowPolicy {
    /// Whether `stat` is a performance metric: one of the testcase's own stats
    /// (`own_prefixes`, e.g. `fio.`), a KPI, or a match of `perf_metrics`.
    pub fn is_perf_metric(&self, stat: &str, own: bool, has_direction: bool) -> bool {
        own || has_direction || self.perf_metrics.iter().any(|p| glob::matches(p, stat))
    }

    /// Whether the stat gets a row. `perf` says whether it is a performance metric
    /// (see [`RowPolicy::is_perf_metric`]).
    pub fn shows(&self, stat: &str, base: &[f64], new: &[f64], perf: bool) -> bool {
        if self.exclude.iter().any(|p| glob::matches(p, stat)) {
            return false;
        }
        if base.is_empty() || new.is_empty() {
            return false;
        }
        if base.len() < self.min_samples && new.len() < self.min_samples {
            return false;
        }
        // The base keeps at most 3 outliers out, 1 when it is small; the new side 3.
        let b = trimmed(base, if base.len() <= 3 { 1 } else { 3 });
        let a = trimmed(new, 3);
        let (Some((_, a_med, a_max)), Some((_, b_med, b_max))) = (lkp_spread(&a), lkp_spread(&b))
        else {
            return false;
        };
        if stat.starts_with("perf-profile.")
            && a_med <= self.perf_profile_threshold
            && b_med <= self.perf_profile_threshold
        {
            return false;
        }
        if !separated(&b, &a) {
            return false;
        }
        let (high, low) = if a_med > b_med {
            (a_med, b_med)
        } else {
            (b_med, a_med)
        };
        let ratio = if low > 0.0 {
            (high / low).min(MAX_RATIO)
        } else {
            MAX_RATIO
        };
        if ratio <= 1.0 + self.min_perf_change {
            return false;
        }
        if !perf && ratio <= 1.0 + self.min_other_change {
            return false;
        }
        if let Some(f) = self.floors.iter().find(|f| glob::matches(&f.pattern, stat)) {
            let max = a_max.max(b_max);
            let delta = high - low;
            if f.min_max.is_some_and(|m| max <= m) || f.min_delta.is_some_and(|d| delta <= d) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_stddev_and_undefined_for_one_sample() {
        let s = Summary::of(&[10.0]).unwrap();
        assert_eq!(s.stddev, None);
        assert_eq!(s.pct_stddev(), None);
        let s = Summary::of(&[9.0, 11.0]).unwrap();
        assert_eq!(s.stddev, Some(2f64.sqrt()));
        assert!((s.pct_stddev().unwrap() - 10.0 * 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.median, 10.0);
        // The same numbers as the engine's (and so the API's and the dashboard's).
        let v = [3.0, 9.0, 4.0, 7.0];
        let e = perfbisect_engine::Summary::of(&v).unwrap();
        let r = Summary::of(&v).unwrap();
        assert_eq!(
            (r.mean, r.stddev, r.median),
            (e.mean, Some(e.stddev), e.median)
        );
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn change_is_relative_or_absolute() {
        assert!((change("fio.write_iops", 1218093.0, 1885792.0) - 54.8153).abs() < 1e-3);
        assert!((change("fio.latency_2us%", 0.08, 0.02) + 0.06).abs() < 1e-12);
        assert!((change("perf-profile.self.cycles-pp.foo", 7.19, 7.89) - 0.7).abs() < 1e-9);
        assert!(change("x", 0.0, 1.0) > 1e90);
    }

    #[test]
    fn separated_needs_medians_beyond_the_other_side() {
        assert!(separated(&[1.0, 1.1, 1.2], &[2.0, 2.1, 2.2]));
        assert!(separated(&[2.0, 2.1, 2.2], &[1.0, 1.1, 1.2]));
        // Overlap: the new side's minimum sits below the base median.
        assert!(!separated(&[1.0, 1.5, 2.0], &[1.4, 2.5, 2.6]));
    }

    #[test]
    fn shows_applies_samples_ratio_and_floors() {
        let p = RowPolicy::default();
        let base = [100.0, 100.5, 101.0];
        let up3 = [103.0, 103.5, 104.0];
        // 3% change: enough for a performance metric, not for another stat.
        assert!(p.shows("fio.write_iops", &base, &up3, true));
        assert!(!p.shows("meminfo.Dirty", &base, &up3, false));
        // Too few samples on both sides.
        assert!(!p.shows("fio.write_iops", &base[..2], &up3[..2], true));
        // 0.5% change is below LKP's 1% floor.
        assert!(!p.shows("fio.write_iops", &base, &[101.1, 101.2, 101.4], true));
        // Interrupts need a maximum above 10000.
        assert!(!p.shows("interrupts.CPU0.LOC", &base, &[300.0, 301.0, 302.0], false));
        assert!(p.shows(
            "interrupts.CPU0.LOC",
            &[20_000.0, 20_100.0, 20_200.0],
            &[30_000.0, 30_100.0, 30_200.0],
            false
        ));
        // Excluded stats never show.
        let p = RowPolicy {
            exclude: vec!["fio.*".into()],
            ..RowPolicy::default()
        };
        assert!(!p.shows("fio.write_iops", &base, &up3, true));
    }
}
