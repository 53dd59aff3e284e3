//! LKP-style bisect reports: the comparison table, text and SVG plots, the subject and
//! the text and HTML bodies. Pure: no I/O, no database, no mail transport.
//!
//! The layout follows lkp-tests (`lib/compare.rb`, `lib/stats.rb`, `lib/changed_stat.rb`)
//! and the reports the Intel 0-day "kernel test robot" sends, so kernel developers read
//! it as they always have. Entry point: [`render`] a [`ReportInput`] with a
//! [`ReportConfig`] into a [`Report`] (subject, text, HTML, plots, structured rows), all
//! of it serde-serializable for the API.

pub mod format;
pub mod glob;
pub mod html;
pub mod input;
pub mod kpi;
pub mod mail;
pub mod plot;
pub mod stats;
pub mod table;

pub use input::{
    Addition, Candidate, Commit, CommitSamples, FailureCount, Job, Judgement, Machine, Outcome,
    ReportInput, Repository, Robot, Run, Runs,
};
pub use kpi::{Direction, KpiTable, Verdict};
pub use mail::{Headline, OutcomeKind, Report, ReportConfig, ReportError, render, subject};
pub use plot::{TextPlot, svg_plot, text_plot};
pub use stats::{RowPolicy, Summary};
pub use table::{ComparisonTable, FailureRow, StatRow};
