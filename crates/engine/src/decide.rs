//! What to measure next, and when the answer is known.

use crate::{CandidateGraph, Evidence};
use serde::{Deserialize, Serialize};

/// A place the engine can ask to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Point {
    /// The good endpoint (outside the candidate set).
    Good,
    /// A candidate commit by index; `graph.bad()` is the bad endpoint.
    Candidate(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The metric went up from good to bad.
    Increase,
    /// The metric went down from good to bad.
    Decrease,
}

/// The bisect's parameters, as the user gave them (or the defaults).
#[derive(Debug, Clone)]
pub struct Settings {
    /// Target probability that the reported culprit is right (default 0.99).
    pub confidence: f64,
    /// Runs asked for in one request (one task); the Bayesian engine asks for fewer when
    /// the change is large against the noise (one run then tells good from bad).
    pub runs_per_request: u32,
    /// Hard cap on all runs of the bisect; reaching it ends with `Inconclusive`.
    pub max_runs: u32,
    /// Expected direction of the change, if the user knows it.
    pub direction: Option<Direction>,
    /// Expected relative magnitude (0.03 = 3%), if the user knows it.
    pub magnitude: Option<f64>,
    /// Hosts free to take a request now (W). At least 1.
    pub idle_hosts: u32,
    /// Which decision rule to use (default: [`Strategy::Bayes`]).
    pub strategy: Strategy,
    /// Answer at merge level: only commits on the bad commit's first-parent chain can be the
    /// culprit (a merge stands for everything it brought in).
    pub first_parent: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            confidence: 0.99,
            runs_per_request: 5,
            max_runs: 400,
            direction: None,
            magnitude: None,
            idle_hosts: 1,
            strategy: Strategy::default(),
            first_parent: false,
        }
    }
}

/// The decision rule behind [`decide`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// A posterior over every candidate and "no change", levels and noise integrated out,
    /// a robust (Student-t weighted) likelihood, quantile proposals and a verification step.
    #[default]
    Bayes,
    /// Engine v1: endpoint thresholds and git's halving on the remaining set.
    Threshold,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Reproducing,
    Searching,
    Verifying,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub point: Point,
    pub runs: u32,
    /// When set, run `point` and this point interleaved on one host (`runs` runs of each,
    /// alternating), and report both commits' samples.
    #[serde(default)]
    pub pair_with: Option<Point>,
}

impl Request {
    pub fn new(point: Point, runs: u32) -> Self {
        Self {
            point,
            runs,
            pair_with: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Good,
    Bad,
    Unknown,
    Skipped,
}

/// The engine's view of one measured or candidate point, for the API and the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub point: Point,
    pub verdict: Verdict,
    /// Probability that this candidate is the culprit, where the engine computes one.
    pub culprit_probability: Option<f64>,
    /// Probability that this point carries the change (the culprit is an ancestor-or-self).
    #[serde(default)]
    pub bad_probability: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    Found {
        culprit: usize,
        confidence: f64,
    },
    NotReproduced {
        reason: String,
    },
    Inconclusive {
        reason: String,
        candidates: Vec<(usize, f64)>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Decision {
    /// Measure these now (at most `settings.idle_hosts` requests).
    Measure {
        phase: Phase,
        requests: Vec<Request>,
        why: String,
    },
    /// Nothing new to ask: wait for pending results.
    Wait { phase: Phase },
    /// The bisect is over.
    Done(Outcome),
}

/// The decision for the current evidence, plus the per-point assessments that explain it.
pub fn decide(
    graph: &CandidateGraph,
    evidence: &Evidence,
    settings: &Settings,
) -> (Decision, Vec<Assessment>) {
    match settings.strategy {
        Strategy::Bayes => crate::bayes::decide(graph, evidence, settings),
        Strategy::Threshold => crate::threshold::decide(graph, evidence, settings),
    }
}
