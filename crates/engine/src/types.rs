//! The engine's vocabulary, shared by `decide`, `bayes`, `threshold` and the simulator: what
//! it is asked (`Settings`, `Evidence`), what it answers (`Decision`, `Outcome`, `Assessment`,
//! `Findings`). Types only: every other module may depend on this one, it depends on none.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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
    /// The most runs any budget of this bisect may reach (the operator's ceiling, or the
    /// submitter's number when lower: [`crate::budget::Budget::cap`]), when `max_runs` is a
    /// budget set below it. None: `max_runs` is the ceiling.
    pub ceiling: Option<u32>,
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
            ceiling: None,
            direction: None,
            magnitude: None,
            idle_hosts: 1,
            strategy: Strategy::default(),
            first_parent: false,
        }
    }
}

/// The decision rule behind [`decide`](crate::decide()).
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
    /// Deploy the commit afresh before the first run, even on a host already running it (a
    /// new boot on a runner that keeps what it booted): runs of one boot share its level, so
    /// a point measured again learns more from a boot of its own (see `boots`).
    #[serde(default)]
    pub fresh_deploy: bool,
}

impl Request {
    pub fn new(point: Point, runs: u32) -> Self {
        Self {
            point,
            runs,
            pair_with: None,
            fresh_deploy: false,
        }
    }

    /// `runs` couples of `point` and `with`, interleaved on one host.
    pub fn paired(point: Point, with: Point, runs: u32) -> Self {
        Self {
            pair_with: Some(with),
            ..Self::new(point, runs)
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
    /// Not named because its commit's own step is surely below the size of change the
    /// bisect looks for (a level that moves a little at every commit); `candidates` still
    /// says where it is.
    #[serde(default)]
    pub below_interest: bool,
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

/// [`decide`](crate::decide()) with the findings that explain it.
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
    /// How many runs of this commit the host made since the commit was deployed on it (0:
    /// the first). The runner's `runs_since_deploy` where it deploys (a VM a run: always 0;
    /// a boot per side of a couple: always 0); otherwise the run's place among its task's
    /// runs of this commit (the worker's `PERFBISECT_RUN`). After a deployment (a kernel
    /// booted, a binary installed) the first runs are often off: cold caches, a CPU not yet
    /// at its steady clock. 0 for every sample when unknown.
    pub seq: u32,
}

/// Machine time of one build, one run and one boot, in seconds (0: not measured yet). The
/// engine only uses their ratios, so any unit works as long as all share it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Costs {
    pub build_secs: f64,
    pub run_secs: f64,
    /// What a deployment adds to the run after it (a boot on a runner that keeps what it
    /// booted): 0 where no runner says which runs came right after one.
    pub boot_secs: f64,
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

    /// A boot's cost in runs (1 when unknown: a kexec or a reboot of a test host takes about
    /// as long as one benchmark run).
    pub fn boot_in_runs(&self) -> f64 {
        if self.boot_secs > 0.0 && self.run_secs > 0.0 {
            (self.boot_secs / self.run_secs).clamp(0.01, 1e4)
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

    /// When and where each complete sample at `point` was taken, in the samples' order;
    /// None when `taken` does not say it for every sample.
    pub(crate) fn taken_complete(&self, point: Point) -> Option<Vec<Taken>> {
        let (taken, raw) = (self.taken.get(&point)?, self.at(point));
        (taken.len() == raw.len()).then(|| {
            raw.iter()
                .zip(taken)
                .filter(|(y, _)| y.is_finite())
                .map(|(_, t)| *t)
                .collect()
        })
    }
}
