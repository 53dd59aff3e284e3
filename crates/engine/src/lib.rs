//! The bisection engine. Pure: no I/O, no clock, no randomness of its own.
//!
//! The server stores every run in Postgres and, after each result, rebuilds an
//! [`Evidence`] from the stored runs and asks [`decide`] what to do next. Because
//! the decision is a pure function of the graph and the evidence, a restarted
//! server (or another replica) reaches the same decision from the same rows.
//!
//! Map:
//! - `dag`: the candidate DAG, git's remaining set and split point, and sums of a mass over
//!   every commit's ancestors in about linear time ([`CandidateGraph::ancestor_mass`]).
//! - `bayes`: the default [`Strategy::Bayes`] — a posterior over every candidate and "no
//!   change", with levels and noise integrated out, proposals at the quantiles of the
//!   culprit mass, and verification against the parent (see the module's docs).
//! - `threshold`: engine v1 ([`Strategy::Threshold`]), kept as a baseline.
//! - [`budget`]: how a bisect's budget of runs follows the engine's predictions.
//! - `stats`: summaries and Welch's test, shared with the reports.
//! - [`synth`] and [`sim`]: synthetic histories and a simulated lab, for tests, the
//!   `bisect-sim` binary and benchmarks (the only code that draws random numbers).

mod bayes;
pub mod budget;
mod dag;
mod decide;
mod drift;
pub mod sim;
mod stats;
pub mod synth;
mod threshold;

pub use dag::{CandidateGraph, GraphError};
pub use decide::{
    Assessment, ChangePoint, Decision, Direction, Explained, Findings, Outcome, Phase, Point,
    Prediction, Request, Settings, Strategy, Verdict, decide, decide_explained,
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
    /// Interleaved runs on one host (answers to a [`Request`] with `pair_with`), keyed by
    /// `(request.point, request.pair_with)`: one `(point's sample, pair_with's sample)` per
    /// couple of complete runs, in run order. These samples are also in `samples`.
    pub pairs: BTreeMap<(Point, Point), Vec<(f64, f64)>>,
    /// Runs that did not complete, by point: no sample, but they count against `max_runs`.
    pub failed: BTreeMap<Point, u32>,
    /// Points whose build exists (a task for them finished its build): measuring them again
    /// costs runs only. Empty when the caller does not know; then every point counts as built
    /// once it has a sample.
    pub built: BTreeSet<Point>,
    /// What a build and a run cost on this job, measured by the caller from finished tasks.
    pub costs: Costs,
    /// When and on which host each sample of `samples` was taken (same order and length per
    /// point). Empty, or not matching `samples`: the engine assumes a host that neither
    /// drifts nor differs from the others.
    pub taken: BTreeMap<Point, Vec<Taken>>,
}

/// When (any increasing clock, e.g. seconds since the epoch) and where one sample was taken.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Taken {
    pub at: f64,
    pub host: i64,
}

/// Machine time of one build and one run, in seconds (0: not measured yet). The engine only
/// uses their ratio, so any unit works as long as both share it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Costs {
    pub build_secs: f64,
    pub run_secs: f64,
}

impl Costs {
    /// A build's cost in runs (1 when either cost is unknown).
    pub fn build_in_runs(&self) -> f64 {
        if self.build_secs > 0.0 && self.run_secs > 0.0 {
            (self.build_secs / self.run_secs).clamp(0.0, 1e4)
        } else {
            1.0
        }
    }
}

impl Evidence {
    /// Runs spent so far: complete and failed (pending runs not included).
    pub fn runs_spent(&self) -> u32 {
        let complete: usize = self.samples.values().map(Vec::len).sum();
        complete as u32 + self.failed.values().sum::<u32>()
    }

    /// Runs requested and not yet reported.
    pub fn runs_pending(&self) -> u32 {
        self.pending.values().sum()
    }

    /// True when measuring `point` needs no new build.
    pub fn is_built(&self, point: Point) -> bool {
        self.built.contains(&point) || !self.at(point).is_empty()
    }

    /// The complete samples at `point` (empty when none).
    pub fn at(&self, point: Point) -> &[f64] {
        self.samples.get(&point).map_or(&[], Vec::as_slice)
    }
}
