//! The bisection engine. Pure: no I/O, no clock, no randomness of its own.
//!
//! The server stores every run in Postgres and, after each result, rebuilds an
//! [`Evidence`] from the stored runs and asks [`decide`] what to do next. Because
//! the decision is a pure function of the graph and the evidence, a restarted
//! server (or another replica) reaches the same decision from the same rows.

mod dag;
mod decide;
pub mod sim;
mod stats;
pub mod synth;
mod threshold;

pub use dag::{CandidateGraph, GraphError};
pub use decide::{
    Assessment, Decision, Direction, Outcome, Phase, Point, Request, Settings, Strategy, Verdict,
    decide,
};
pub use stats::{Summary, WelchTest, welch_t_test};

use std::collections::{BTreeMap, BTreeSet};

/// Everything measured so far for one bisect, by point.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// Samples of the bisect's metric from complete runs, by point. Incomplete runs are not here.
    pub samples: BTreeMap<Point, Vec<f64>>,
    /// Commits that could not be measured (build or boot failure).
    pub untestable: BTreeSet<usize>,
    /// Runs already requested (queued or running) but not yet reported, by point.
    pub pending: BTreeMap<Point, u32>,
}
