//! Which way is better for a metric, and what a change therefore is.
//!
//! A [`KpiTable`] is an ordered list of (glob pattern, [`Direction`]); the first
//! pattern that matches a stat name decides. The built-in defaults cover the usual
//! LKP KPIs; callers put their own entries in front (from YAML or JSON), either as a
//! list of `{pattern, direction}` or as a map `pattern: direction` (order kept), with
//! directions spelled `higher`/`lower`, `higher_is_better`/`lower_is_better` or, as
//! in lkp-tests' `index-perf-all.yaml`, `1`/`-1`.

use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::glob;

/// Whether bigger numbers are better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
}

impl<'de> Deserialize<'de> for Direction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Direction;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "\"higher\", \"lower\", \"higher_is_better\", \"lower_is_better\", 1 or -1",
                )
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Direction, E> {
                match s {
                    "higher" | "higher_is_better" | "1" | "+1" => Ok(Direction::HigherIsBetter),
                    "lower" | "lower_is_better" | "-1" => Ok(Direction::LowerIsBetter),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Direction, E> {
                match v.signum() {
                    1 => Ok(Direction::HigherIsBetter),
                    -1 => Ok(Direction::LowerIsBetter),
                    _ => Err(E::invalid_value(de::Unexpected::Signed(v), &self)),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Direction, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Direction, E> {
                if v > 0.0 {
                    Ok(Direction::HigherIsBetter)
                } else if v < 0.0 {
                    Ok(Direction::LowerIsBetter)
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// What a change is, given the metric's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improvement,
    Regression,
    /// The metric's direction is unknown, or it did not move.
    Change,
}

impl Verdict {
    /// Direction × sign of the change. No direction, or no change, gives [`Verdict::Change`].
    ///
    /// ```
    /// use perfbisect_report::kpi::{Direction, Verdict};
    /// assert_eq!(Verdict::of(Some(Direction::HigherIsBetter), 54.8), Verdict::Improvement);
    /// assert_eq!(Verdict::of(Some(Direction::LowerIsBetter), 54.8), Verdict::Regression);
    /// assert_eq!(Verdict::of(None, -3.0), Verdict::Change);
    /// ```
    pub fn of(direction: Option<Direction>, change: f64) -> Verdict {
        match direction {
            _ if change == 0.0 || change.is_nan() => Verdict::Change,
            None => Verdict::Change,
            Some(Direction::HigherIsBetter) if change > 0.0 => Verdict::Improvement,
            Some(Direction::LowerIsBetter) if change < 0.0 => Verdict::Improvement,
            Some(_) => Verdict::Regression,
        }
    }

    /// The word used in subjects and headlines.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Improvement => "improvement",
            Verdict::Regression => "regression",
            Verdict::Change => "change",
        }
    }
}

/// One entry of a [`KpiTable`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KpiEntry {
    /// Glob over stat names (see [`crate::glob`]).
    pub pattern: String,
    pub direction: Direction,
}

/// Ordered (pattern → direction) list; the first match wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(transparent)]
pub struct KpiTable {
    pub entries: Vec<KpiEntry>,
}

const DEFAULT_HIGHER: &[&str] = &[
    "aim7.jobs-per-min",
    "fio.*_iops",
    "fio.*_bw_MBps",
    "fxmark.*.works/sec",
    "will-it-scale.*_ops",
    "hackbench.throughput",
    "netperf.Throughput_*",
    "stress-ng.*.ops_per_sec",
    "stress-ng.*.ops",
    "vm-scalability.throughput",
    "unixbench.score",
    "*.throughput",
];

const DEFAULT_LOWER: &[&str] = &[
    "*_per_iteration",
    "*time.elapsed_time",
    "*time.elapsed_time.max",
    "*.latency",
    "*_latency",
    "*_latency_*",
    "*.max_latency*",
    "*_clat_*",
    "*_lat_*",
];

impl KpiTable {
    /// The built-in directions (the seed reports' KPIs and a few common ones).
    pub fn builtin() -> KpiTable {
        let entry = |direction| {
            move |p: &&str| KpiEntry {
                pattern: (*p).to_owned(),
                direction,
            }
        };
        let mut entries: Vec<KpiEntry> = DEFAULT_HIGHER
            .iter()
            .map(entry(Direction::HigherIsBetter))
            .collect();
        entries.extend(DEFAULT_LOWER.iter().map(entry(Direction::LowerIsBetter)));
        KpiTable { entries }
    }

    /// `self`'s entries first, then `other`'s.
    pub fn then(mut self, other: KpiTable) -> KpiTable {
        self.entries.extend(other.entries);
        self
    }

    /// The direction of the first matching pattern.
    pub fn direction(&self, stat: &str) -> Option<Direction> {
        self.entries
            .iter()
            .find(|e| glob::matches(&e.pattern, stat))
            .map(|e| e.direction)
    }
}

impl<'de> Deserialize<'de> for KpiTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = KpiTable;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of {pattern, direction} or a map pattern: direction")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KpiTable, A::Error> {
                let mut entries = Vec::new();
                while let Some(e) = seq.next_element::<KpiEntry>()? {
                    entries.push(e);
                }
                Ok(KpiTable { entries })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KpiTable, A::Error> {
                let mut entries = Vec::new();
                while let Some((pattern, direction)) = map.next_entry::<String, Direction>()? {
                    entries.push(KpiEntry { pattern, direction });
                }
                Ok(KpiTable { entries })
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_covers_the_seed_metrics() {
        let t = KpiTable::builtin();
        let higher = Some(Direction::HigherIsBetter);
        let lower = Some(Direction::LowerIsBetter);
        assert_eq!(t.direction("aim7.jobs-per-min"), higher);
        assert_eq!(t.direction("fio.write_iops"), higher);
        assert_eq!(t.direction("fio.write_bw_MBps"), higher);
        assert_eq!(
            t.direction("fxmark.ssd_ext4_dbench_client_32_directio.works/sec"),
            higher
        );
        assert_eq!(t.direction("will-it-scale.per_process_ops"), higher);
        assert_eq!(t.direction("kbuild.buildtime_per_iteration"), lower);
        assert_eq!(t.direction("time.elapsed_time"), lower);
        assert_eq!(t.direction("aim7.time.elapsed_time"), lower);
        assert_eq!(t.direction("fio.write_clat_mean_ns"), lower);
        assert_eq!(t.direction("fio.latency_2us%"), None);
        assert_eq!(t.direction("meminfo.Dirty"), None);
    }

    #[test]
    fn caller_entries_take_precedence() {
        let user = KpiTable {
            entries: vec![KpiEntry {
                pattern: "fio.write_iops".into(),
                direction: Direction::LowerIsBetter,
            }],
        };
        let t = user.then(KpiTable::builtin());
        assert_eq!(
            t.direction("fio.write_iops"),
            Some(Direction::LowerIsBetter)
        );
        assert_eq!(
            t.direction("fio.read_iops"),
            Some(Direction::HigherIsBetter)
        );
    }

    #[test]
    fn verdict_is_direction_times_sign() {
        use Direction::*;
        assert_eq!(Verdict::of(Some(HigherIsBetter), 1.0), Verdict::Improvement);
        assert_eq!(Verdict::of(Some(HigherIsBetter), -1.0), Verdict::Regression);
        assert_eq!(Verdict::of(Some(LowerIsBetter), -1.0), Verdict::Improvement);
        assert_eq!(Verdict::of(Some(LowerIsBetter), 1.0), Verdict::Regression);
        assert_eq!(Verdict::of(Some(LowerIsBetter), 0.0), Verdict::Change);
    }
}
