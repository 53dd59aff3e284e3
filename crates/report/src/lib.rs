//! LKP-style bisect reports: the comparison table, text and SVG plots, the subject and
//! the text and HTML bodies. Pure: no I/O, no database, no mail transport.
//!
//! The layout follows lkp-tests (`lib/compare.rb`, `lib/stats.rb`, `lib/changed_stat.rb`)
//! and the reports the Intel 0-day "kernel test robot" sends, so kernel developers read
//! it as they always have. Entry point: [`render`] a [`ReportInput`] with a
//! [`ReportConfig`] into a [`Report`] (subject, text, HTML, plots, structured rows), all
//! of it serde-serializable for the API.
//!
//! ```
//! use std::collections::BTreeMap;
//! use perfbisect_report::*;
//!
//! let run = |v: f64| Run { completed: true, metrics: BTreeMap::from([("fio.write_iops".to_owned(), v)]) };
//! let commit = |sha: &str, subject: &str| Commit { sha: sha.repeat(40), subject: subject.into(), author: None };
//! let input = ReportInput {
//!     repository: Repository { url: "https://git.kernel.org/linux.git".into(), name: Some("linus".into()), branch: Some("master".into()) },
//!     good: commit("a", "old"),
//!     bad: commit("c", "new"),
//!     job: Job { testcase: "fio-basic".into(), kconfig: None, compiler: None, rootfs: None, tbox_group: None, parameters: vec![] },
//!     machine: Machine::default(),
//!     metric: "fio.write_iops".into(),
//!     direction: None,
//!     outcome: Outcome::Found {
//!         culprit: commit("b", "ext4: avoid a transaction"),
//!         parent: commit("9", "ext4: before"),
//!         runs: Runs { parent: vec![run(100.0), run(101.0), run(99.0)], culprit: vec![run(150.0), run(151.0), run(149.0)], failures: vec![] },
//!         confidence: Some(0.99),
//!         also: vec![],
//!     },
//!     samples: vec![],
//!     subject_prefix: None,
//!     robot: Robot::default(),
//!     dashboard_url: None,
//!     found_by: None,
//!     findings: None,
//! };
//! let report = render(&input, &ReportConfig::default()).unwrap();
//! assert_eq!(report.subject, "[linus:master] [ext4]  bbbbbbbbbb:  fio.write_iops 50.0% improvement");
//! assert!(report.text.contains("perfbisect noticed a 50.0% improvement of fio.write_iops on:"));
//! ```
//!
//! Where the seed reports and the format reference disagree, this crate follows the
//! reference and lkp-tests' code: the subject has LKP's double spaces around the short id,
//! the repository URL goes on the line under `commit:`, and the line of sha cells ends
//! with a space (compare.rb prints `"%16s " "%27s "`). The tests say so where they
//! compare with the seeds.

pub mod findings;
pub mod format;
pub mod glob;
pub mod html;
pub mod input;
pub mod kpi;
pub mod mail;
pub mod materials;
pub mod plot;
pub mod stats;
pub mod table;

pub use findings::{Budget, ChangeStep, Cost, RangeFindings, StatedDirection};
pub use input::{
    Addition, Candidate, Commit, CommitSamples, FailureCount, FoundBy, Job, Judgement, Machine,
    Outcome, ReportInput, Repository, Robot, Run, Runs,
};
pub use kpi::{Direction, KpiTable, Verdict};
pub use mail::{Headline, OutcomeKind, Report, ReportConfig, ReportError, render, subject};
pub use plot::{TextPlot, svg_plot, text_plot};
pub use stats::{RowPolicy, Summary};
pub use table::{ComparisonTable, FailureRow, StatRow};
