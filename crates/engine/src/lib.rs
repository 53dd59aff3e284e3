//! The bisection engine. Pure: no I/O, no clock, no randomness of its own.
//!
//! The server stores every run in Postgres and, after each result, rebuilds an
//! [`Evidence`] from the stored runs and asks [`decide`] what to do next. Because
//! the decision is a pure function of the graph and the evidence, a restarted
//! server (or another replica) reaches the same decision from the same rows.
//!
//! Map:
//! - `types`: the shared vocabulary ([`Settings`], [`Evidence`], [`Decision`], [`Outcome`],
//!   [`Findings`], ...); `decide` dispatches to `bayes` or `threshold`, and all three (and
//!   the simulator) import their types from here, never from `decide`.
//! - `dag`: the candidate DAG, git's remaining set and split point, and sums of a mass over
//!   every commit's ancestors in about linear time ([`CandidateGraph::ancestor_mass`]).
//! - `bayes`: the default [`Strategy::Bayes`] — a posterior over every candidate and "no
//!   change", with levels and noise integrated out, proposals at the quantiles of the
//!   culprit mass, and verification against the parent (see the module's docs).
//! - `threshold`: engine v1 ([`Strategy::Threshold`]), kept as a baseline.
//! - `drift`, `boots` and `hosts`: what hosts and deployments add to a run (drift, warm-up,
//!   a cold start, each host's level; a level per boot; each host's noise), read within
//!   re-measured points.
//! - [`budget`]: how a bisect's budget of runs follows the engine's predictions.
//! - `stats`: summaries and Welch's test, shared with the reports.
//! - [`synth`] and [`sim`]: synthetic histories and a simulated lab, for tests, the
//!   `bisect-sim` binary and benchmarks (the only code that draws random numbers);
//!   [`histories`]: real projects' release ranges, stored, for the same.

mod bayes;
mod boots;
pub mod budget;
mod dag;
mod decide;
mod drift;
pub mod histories;
mod hosts;
mod intermittent;
pub mod sim;
mod stats;
pub mod synth;
mod threshold;
mod types;

pub use dag::{CandidateGraph, GraphError};
pub use decide::{decide, decide_explained};
pub use stats::{Summary, WelchTest, welch_t_test};
pub use types::{
    Assessment, ChangePoint, Costs, Decision, Direction, Evidence, Explained, Findings, Outcome,
    Phase, Point, Prediction, Request, Settings, Strategy, Taken, Verdict,
};
