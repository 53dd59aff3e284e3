//! The parent-vs-culprit comparison table, laid out as lkp-tests' `compare.rb` does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::format::{
    ABS_WIDTH, ERR_WIDTH, REL_WIDTH, format_avg, format_change, format_fails, format_reproduction,
    format_std,
};
use crate::input::{Commit, Job, Run, Runs};
use crate::kpi::KpiTable;
use crate::stats::{RowPolicy, Summary, change, is_absolute_change};

/// The stat that flags runs that did not complete.
pub const INCOMPLETE_RUN_STAT: &str = "last_state.is_incomplete_run";

/// One performance stat's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatRow {
    pub stat: String,
    pub base: Summary,
    pub new: Summary,
    /// `%change`, or the absolute change when `absolute`.
    pub change: f64,
    pub absolute: bool,
}

impl StatRow {
    /// A row from the samples of both sides; `None` if a side has none.
    pub fn from_samples(stat: &str, base: &[f64], new: &[f64]) -> Option<StatRow> {
        let base = Summary::of(base)?;
        let new = Summary::of(new)?;
        Some(StatRow {
            stat: stat.to_owned(),
            change: change(stat, base.mean, new.mean),
            absolute: is_absolute_change(stat),
            base,
            new,
        })
    }

    /// `   1218093           +54.8%    1885792        fio.write_iops`
    pub fn render(&self) -> String {
        format!(
            "{}{}{}{}{}  {}",
            format_avg(self.base.mean),
            format_std(self.base.pct_stddev()),
            format_change(self.change, self.absolute),
            format_avg(self.new.mean),
            format_std(self.new.pct_stddev()),
            self.stat
        )
    }
}

/// One failure stat's row: how many runs failed out of how many.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureRow {
    pub stat: String,
    pub base_fails: u32,
    pub base_runs: u32,
    pub new_fails: u32,
    pub new_runs: u32,
}

fn rate(fails: u32, runs: u32) -> f64 {
    if runs == 0 {
        0.0
    } else {
        f64::from(fails) / f64::from(runs)
    }
}

impl FailureRow {
    /// `100·(fails_new/runs_new − fails_base/runs_base)`.
    pub fn reproduction(&self) -> f64 {
        100.0 * (rate(self.new_fails, self.new_runs) - rate(self.base_fails, self.base_runs))
    }

    /// `          6:6          -50%           3:6     dmesg.WARNING`
    pub fn render(&self) -> String {
        format!(
            "{}{}{}  {}",
            format_fails(self.base_fails, self.base_runs),
            format_reproduction(self.reproduction()),
            format_fails(self.new_fails, self.new_runs),
            self.stat
        )
    }
}

/// A commit as the table header names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCommit {
    pub sha: String,
    pub subject: String,
}

impl From<&Commit> for TableCommit {
    fn from(c: &Commit) -> Self {
        TableCommit {
            sha: c.sha.clone(),
            subject: c.subject.clone(),
        }
    }
}

/// The whole comparison of one job: header, failure block, performance block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparisonTable {
    /// Every axis except commit, sorted by key.
    pub axes: Vec<(String, String)>,
    pub base: TableCommit,
    pub new: TableCommit,
    pub failures: Vec<FailureRow>,
    pub rows: Vec<StatRow>,
}

/// A line of 89 `=`, which opens every table.
pub fn rule() -> String {
    "=".repeat(89)
}

fn prefix(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

impl ComparisonTable {
    /// Compare the complete runs of `runs.parent` and `runs.culprit`, keeping the rows
    /// that `policy` shows (the bisected `metric` always), the testcase's own stats
    /// first, then by name.
    pub fn compare(
        job: &Job,
        metric: &str,
        parent: &Commit,
        culprit: &Commit,
        runs: &Runs,
        kpi: &KpiTable,
        policy: &RowPolicy,
    ) -> ComparisonTable {
        let mut samples: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        let complete = |rs: &'_ [Run]| {
            rs.iter()
                .filter(|r| r.completed)
                .cloned()
                .collect::<Vec<_>>()
        };
        let (parent_runs, culprit_runs) = (complete(&runs.parent), complete(&runs.culprit));
        for r in &parent_runs {
            for (k, v) in &r.metrics {
                samples.entry(k).or_default().0.push(*v);
            }
        }
        for r in &culprit_runs {
            for (k, v) in &r.metrics {
                samples.entry(k).or_default().1.push(*v);
            }
        }
        let own = own_prefixes(job, metric);
        let is_own = |stat: &str| {
            own.iter()
                .any(|p| stat.split('.').next() == Some(p.as_str()))
        };
        let mut rows: Vec<StatRow> = samples
            .iter()
            .filter(|(stat, (base, new))| {
                let perf = policy.is_perf_metric(stat, is_own(stat), kpi.direction(stat).is_some());
                **stat == metric || policy.shows(stat, base, new, perf)
            })
            .filter_map(|(stat, (base, new))| StatRow::from_samples(stat, base, new))
            .collect();
        rows.sort_by(|a, b| {
            (!is_own(&a.stat), a.stat.as_str()).cmp(&(!is_own(&b.stat), b.stat.as_str()))
        });

        let total = |rs: &[Run]| u32::try_from(rs.len()).unwrap_or(u32::MAX);
        let (base_runs, new_runs) = (total(&runs.parent), total(&runs.culprit));
        let incomplete = |rs: &[Run]| total(rs) - total(&complete(rs));
        let mut failures: Vec<FailureRow> = runs
            .failures
            .iter()
            .map(|f| FailureRow {
                stat: f.stat.clone(),
                base_fails: f.parent,
                base_runs,
                new_fails: f.culprit,
                new_runs,
            })
            .collect();
        if !failures.iter().any(|f| f.stat == INCOMPLETE_RUN_STAT) {
            failures.push(FailureRow {
                stat: INCOMPLETE_RUN_STAT.to_owned(),
                base_fails: incomplete(&runs.parent),
                base_runs,
                new_fails: incomplete(&runs.culprit),
                new_runs,
            });
        }
        failures.retain(|f| rate(f.base_fails, f.base_runs) != rate(f.new_fails, f.new_runs));
        failures.sort_by(|a, b| a.stat.cmp(&b.stat));

        ComparisonTable {
            axes: job.axes(),
            base: parent.into(),
            new: culprit.into(),
            failures,
            rows,
        }
    }

    /// The row of one stat, if shown.
    pub fn row(&self, stat: &str) -> Option<&StatRow> {
        self.rows.iter().find(|r| r.stat == stat)
    }

    /// From the `=` rule through the `commit:` block to the two sha cells and their
    /// dashes (both lines end with a space, as compare.rb prints them).
    pub fn header(&self) -> String {
        let keys: Vec<&str> = self.axes.iter().map(|(k, _)| k.as_str()).collect();
        let values: Vec<&str> = self.axes.iter().map(|(_, v)| v.as_str()).collect();
        let first = ABS_WIDTH + ERR_WIDTH;
        let width = first + REL_WIDTH + 1;
        let mut s = String::new();
        s += &rule();
        s += "\n";
        s += &format!("{}:\n  {}\n\n", keys.join("/"), values.join("/"));
        s += "commit: \n";
        for c in [&self.base, &self.new] {
            s += &format!("  {} (\"{}\")\n", prefix(&c.sha, 10), c.subject);
        }
        s += "\n";
        s += &format!(
            "{:>first$} {:>width$} \n",
            prefix(&self.base.sha, first),
            prefix(&self.new.sha, width)
        );
        s += &format!("{} {} \n", "-".repeat(first), "-".repeat(width));
        s
    }

    /// Header, failure block and performance block; every line ends with `\n`.
    pub fn render(&self) -> String {
        let mut s = self.header();
        if !self.failures.is_empty() {
            s += "       fail:runs  %reproduction    fail:runs\n";
            s += "           |             |             |    \n";
            for f in &self.failures {
                s += &f.render();
                s += "\n";
            }
        }
        if !self.rows.is_empty() {
            s += "         %stddev     %change         %stddev\n";
            s += "             \\          |                \\  \n";
            for r in &self.rows {
                s += &r.render();
                s += "\n";
            }
        }
        s
    }
}

/// The program names whose stats are the testcase's own: the testcase (`fxmark`) and the
/// bisected metric's first component (`fio` for testcase `fio-basic`).
fn own_prefixes(job: &Job, metric: &str) -> Vec<String> {
    let mut v = vec![job.testcase.clone()];
    if let Some(p) = metric.split('.').next() {
        v.push(p.to_owned());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::FailureCount;

    fn run(completed: bool, kv: &[(&str, f64)]) -> Run {
        Run {
            completed,
            metrics: kv.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        }
    }

    fn commit(sha: &str) -> Commit {
        Commit {
            sha: sha.into(),
            subject: "s".into(),
            author: None,
        }
    }

    #[test]
    fn incomplete_runs_leave_stats_but_count_as_failures() {
        let runs = Runs {
            parent: vec![
                run(true, &[("t.ops", 100.0), ("meminfo.x", 5000.0)]),
                run(true, &[("t.ops", 101.0), ("meminfo.x", 5000.0)]),
                run(true, &[("t.ops", 102.0), ("meminfo.x", 5000.0)]),
            ],
            culprit: vec![
                run(true, &[("t.ops", 120.0), ("meminfo.x", 5001.0)]),
                run(true, &[("t.ops", 121.0), ("meminfo.x", 5001.0)]),
                run(true, &[("t.ops", 122.0), ("meminfo.x", 5001.0)]),
                run(false, &[("t.ops", 0.0)]),
            ],
            failures: vec![FailureCount {
                stat: "dmesg.WARNING".into(),
                parent: 0,
                culprit: 2,
            }],
        };
        let job = Job {
            testcase: "t".into(),
            kconfig: None,
            compiler: None,
            rootfs: None,
            tbox_group: None,
            parameters: vec![],
        };
        let t = ComparisonTable::compare(
            &job,
            "t.ops",
            &commit(&"a".repeat(40)),
            &commit(&"b".repeat(40)),
            &runs,
            &KpiTable::builtin(),
            &RowPolicy::default(),
        );
        let ops = t.row("t.ops").unwrap();
        assert_eq!(ops.new.n, 3);
        assert!((ops.new.mean - 121.0).abs() < 1e-9);
        // meminfo.x barely moved: no row.
        assert!(t.row("meminfo.x").is_none());
        let names: Vec<_> = t.failures.iter().map(|f| f.stat.as_str()).collect();
        assert_eq!(names, ["dmesg.WARNING", INCOMPLETE_RUN_STAT]);
        assert_eq!(t.failures[1].new_fails, 1);
        assert_eq!(t.failures[1].new_runs, 4);
        assert_eq!(
            t.failures[0].render(),
            "           :3           50%           2:4     dmesg.WARNING"
        );
        let text = t.render();
        assert!(text.contains("       fail:runs  %reproduction    fail:runs\n"));
        assert!(text.contains("           |             |             |    \n"));
    }
}
