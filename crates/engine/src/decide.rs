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
    /// More than one change in the range: one entry per change point, in history order.
    /// `settled` when every change point names its culprit at the target probability;
    /// otherwise the budget could not separate them and each gives its candidate set.
    Changes {
        changes: Vec<ChangePoint>,
        settled: bool,
        reason: String,
    },
}

/// One step of the metric inside the range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    /// The culprit, when one commit holds the target probability.
    pub culprit: Option<usize>,
    /// Probability of the culprit (or the mass of `candidates` when there is none).
    pub probability: f64,
    /// The most probable commits for this step, by decreasing probability.
    pub candidates: Vec<(usize, f64)>,
    /// Size of the step: (level after − level before) / good level.
    pub change: f64,
}

/// Runs and machine time the engine expects to still need for the target confidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub runs: u32,
    pub builds: u32,
    /// `runs × run cost + builds × build cost`, when both costs are measured.
    pub machine_secs: Option<f64>,
    /// |step| / noise of one run that the prediction was made from (the most probable
    /// hypothesis over every sample so far).
    pub step_in_noise: f64,
}

/// What the engine measured about the range, beside its decision (for the API and report).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Findings {
    /// (bad − good) / good from the endpoints' samples, once both are measured.
    pub change: Option<f64>,
    /// Noise (standard deviation of one run) relative to the good level.
    pub noise: Option<f64>,
    /// The user's direction and the measured change disagree (with some certainty).
    pub direction_contradicted: bool,
    /// Remaining runs, builds and machine time for the target confidence.
    pub prediction: Option<Prediction>,
    /// Every change point the engine sees, in history order (one entry for a single step).
    pub changes: Vec<ChangePoint>,
    /// The one-step model does not fit the measured commits (a predictive check).
    pub misfit: bool,
    /// Anytime-valid error bound of the verification (the e-value threshold is 1/this).
    pub verification_alpha: f64,
    /// The e-value of the verification so far (culprit against its parent).
    pub verification_evalue: Option<f64>,
}

/// [`decide`] with the findings that explain it.
#[derive(Debug, Clone)]
pub struct Explained {
    pub decision: Decision,
    pub assessments: Vec<Assessment>,
    pub findings: Findings,
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
    let e = decide_explained(graph, evidence, settings);
    (e.decision, e.assessments)
}

/// [`decide`], with the engine's [`Findings`] (measured change, prediction, change points).
pub fn decide_explained(
    graph: &CandidateGraph,
    evidence: &Evidence,
    settings: &Settings,
) -> Explained {
    match settings.strategy {
        Strategy::Bayes => crate::bayes::decide(graph, evidence, settings),
        Strategy::Threshold => {
            let (decision, assessments) = crate::threshold::decide(graph, evidence, settings);
            Explained {
                decision,
                assessments,
                findings: Findings::default(),
            }
        }
    }
}
