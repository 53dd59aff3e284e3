//! The Bayesian engine: a posterior over "commit k is the culprit" for every candidate k,
//! plus "no change in this range".
//!
//! ## Model
//! Under hypothesis k, a point carries the change iff k is one of its ancestors-or-self; the
//! good endpoint never does. Samples are taken relative to a reference (z = y / ref − 1) and
//! modelled as `z ~ N(μ, σ²/λ)` below the change and `N(μ + δ, σ²/λ)` above it, where λ is a
//! per-sample robustness weight (the Student-t scale mixture, ν = 4, fitted to all residuals
//! at once, so outliers and heavy tails lose their pull). μ has a flat prior, σ the Jeffreys
//! prior, and δ | σ a mixture of normals (the user's magnitude and direction when given,
//! otherwise zero-mean scales from 1% to 32%): all three are integrated out in closed form.
//! Nothing is plugged in from the endpoints; every measured commit informs both levels under
//! each hypothesis.
//!
//! Hypotheses that put the same measured points above the change have the same likelihood,
//! so the engine computes one likelihood per distinct "signature" (the set of measured
//! points that descend from k, as a bitset) rather than per commit.
//!
//! ## Decisions
//! Reproduce (both endpoints measured, "no change" below [`REPRODUCED`]), search (W commits
//! at the quantiles i/(W+1) of the culprit mass over the DAG, plus the endpoints whenever they
//! hold less than their share of the samples), verify (interleaved culprit-vs-parent runs on
//! one host once a commit holds the target probability), then the predictive check: a second
//! step given the first (`belief` with `fixed`), anywhere in the DAG; `Found` when the culprit
//! survives it, `Outcome::Changes` when there are two.

use crate::types::{
    Assessment, ChangePoint, Decision, Direction, Explained, Findings, Outcome, Phase, Point,
    Prediction, Request, Settings, Verdict,
};
use crate::{CandidateGraph, Evidence};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write;

mod assess;
mod belief;
mod check;
mod commit_levels;
mod decision;
mod naming;
mod noise;
mod partial;
mod predict;
mod reproduce;
mod requests;
mod robust;
mod search;
#[cfg(test)]
mod tests;
mod verify;

use assess::*;
use belief::*;
use check::*;
use commit_levels::*;
pub(crate) use decision::decide;
use naming::*;
use noise::*;
use partial::*;
use predict::*;
use reproduce::*;
use requests::*;
use robust::*;
use search::*;
use verify::*;

/// The endpoints are measured until "no change" falls below this. They answer "is there a
/// change at all" best (the bad one carries it under every hypothesis); a search that starts
/// while "no change" is still likely fits noise at whichever split looks best.
const REPRODUCED: f64 = 0.25;
/// The budget the endpoints' "is there a change" question is sized from, at most: "no change
/// of interest" after a quarter of it at the endpoints, the search once half of it went there.
const ENDPOINT_RUNS_CAP: u32 = 400;
/// Runs a request: enough for one point to show (RUNS_Z / d)² noise units of evidence.
const RUNS_Z: f64 = 1.0;
/// Error bound of the anytime-valid verification: a commit that did not move the metric
/// passes with probability at most this, however often the test is looked at.
const VERIFY_ALPHA: f64 = 0.1;
/// The belief's noise over the runs' own scatter beyond which a point's level counts as
/// pinned once it has [`PINNED_RUNS`] runs, and the search stops asking for more of them.
const PINNED_NOISE_RATIO: f64 = 3.0;
/// Prior probability that the range holds no change at all.
const NO_CHANGE_PRIOR: f64 = 0.2;
/// Relative noise of one run below which the runs count as showing none ([`noiseless`]).
const NOISELESS: f64 = 1e-9;
/// Runs that pin a point's level where [`PINNED_NOISE_RATIO`] holds.
const PINNED_RUNS: usize = 5;

/// The engine's belief after the evidence.
#[derive(Debug, Clone)]
pub(crate) struct Belief {
    /// Culprit probability per candidate.
    pub p: Vec<f64>,
    /// Probability of "no change in this range".
    pub no_change: f64,
    /// Probability that each candidate carries the change.
    pub bad: Vec<f64>,
    /// Relative change (bad vs good) under the most probable hypothesis.
    pub change: f64,
    /// Relative noise (standard deviation) around the levels of the most probable hypothesis.
    pub noise: f64,
    /// The noise the search works against, after robust weighting (for predictions).
    pub effective_noise: f64,
    /// The endpoints' pooled median absolute deviation, as a standard deviation (relative):
    /// what a prediction plans with when one wild run among an endpoint's first few still
    /// holds `effective_noise` far above it (see [`predict`]).
    pub endpoint_mad_noise: Option<f64>,
    /// The noise the search plans and judges robust levels with: `effective_noise`, or the
    /// plain `noise` where the endpoints show the sides' noises differ (by their standard
    /// deviations and by their median absolute deviations, which a few wild runs do not
    /// move). With the plain noise, 5% of runs 20–100% slow made the noise read 9–13% at
    /// CV 2%: every verification chunk asked for 9 couples where 3 settle most culprits,
    /// and the partial-step check held a culprit at P 1.0000 for 345 runs. Where the sides
    /// differ, a quiet and a noisier side read as heavy tails whose robust scale is the
    /// quiet side's; judged with it, a tripled noise named a spurious second change.
    /// (Sizing search requests with it too saved 5 runs in the outlier cell but took twice
    /// the rounds and builds: not done.)
    pub planning_noise: f64,
    /// Samples used.
    pub samples: usize,
    /// Tail index of the noise model chosen (Student-t degrees of freedom; None: Gaussian).
    pub tail: Option<f64>,
    /// The fraction of wild runs, when the noise model chosen is a Gaussian core with a few
    /// wild runs.
    pub wild: Option<f64>,
    /// The most probable candidates (up to 64), by decreasing probability.
    pub ranked: Vec<(usize, f64)>,
    /// Per candidate, which measured points descend from it (an id: equal ids, equal sets).
    pub signature: Vec<u32>,
    /// Per measured point: its robust mean (relative to the median of all samples, host
    /// drift and warm-up removed, Student-t weighted) and the weight behind it.
    pub means: HashMap<Point, (f64, f64)>,
    /// The bad endpoint's noise variance over the good one's, when the endpoints show one
    /// (see [`endpoint_noise_ratio`]; None for a further change point's belief).
    pub noise_ratio: Option<f64>,
    /// The boot variance over the run variance (ρ, see `boots`): 0 unless the points'
    /// deployments show one. A new run, deployed apart, then weighs 1/(1 + ρ) of one.
    pub boot_ratio: f64,
    /// Runs a commit needs to show an intermittent change, when the endpoints show one
    /// (`intermittent`; its runs then weigh alike).
    pub to_show: Option<u32>,
    /// The level runs are taken relative to (the median of all runs): a run y is y/r − 1.
    pub reference: f64,
    /// The variance rounding to the values' grid adds to a run, in the runs' own units
    /// ([`crate::stats::rounding_variance`]; 0 off a grid).
    pub rounding: f64,
    /// Every point's runs repeat one value exactly ([`crate::stats::repeats_exactly`]).
    pub runs_exact: bool,
    /// The intermittent change the runs show, relative to `reference` (None: none shown).
    pub mixture: Option<crate::intermittent::Mixture>,
    /// ln of the evidence's marginal likelihood under this belief's model, up to constants
    /// every κ shares (see [`commit_levels_weighed`]).
    log_evidence: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    /// Count, weight sum, weighted sum and weighted sum of squares.
    n: f64,
    w: f64,
    s: f64,
    q: f64,
    /// Unweighted sum and sum of squares (for the reported noise).
    us: f64,
    uq: f64,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.n += o.n;
        self.w += o.w;
        self.s += o.s;
        self.q += o.q;
        self.us += o.us;
        self.uq += o.uq;
    }

    fn sub(&self, o: &Stats) -> Stats {
        Stats {
            n: self.n - o.n,
            w: self.w - o.w,
            s: self.s - o.s,
            q: self.q - o.q,
            us: self.us - o.us,
            uq: self.uq - o.uq,
        }
    }

    /// Weighted sum of squares around the weighted mean.
    fn ss(&self) -> f64 {
        if self.w > 0.0 {
            (self.q - self.s * self.s / self.w).max(0.0)
        } else {
            0.0
        }
    }

    fn mean(&self) -> f64 {
        self.s / self.w
    }

    /// The same samples with their weights times `f` (a noise variance 1/f times larger).
    fn scaled(&self, f: f64) -> Stats {
        Stats {
            w: self.w * f,
            s: self.s * f,
            q: self.q * f,
            ..*self
        }
    }

    /// Unweighted sum of squares around the unweighted mean.
    fn uss(&self) -> f64 {
        if self.n > 0.0 {
            (self.uq - self.us * self.us / self.n).max(0.0)
        } else {
            0.0
        }
    }
}

/// A fast, non-cryptographic hasher for bitset rows (FxHash's multiply-rotate).
#[derive(Default, Clone, Copy)]
struct Fx(u64);

impl std::hash::Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

type BuildFx = std::hash::BuildHasherDefault<Fx>;

/// One component of the prior on δ (relative units): weight, mean, standard deviation.
type Component = (f64, f64, f64);

/// The prior on the relative change δ under "there is a change".
///
/// Non-local: normals centred at ±1%, ±2%, ... ±32% with a third of that as standard
/// deviation, so the prior covers 0.5%–45% in both directions but puts almost no mass near
/// zero. A range without change then gathers evidence for "no change" exponentially fast
/// instead of at the √n rate of a prior that allows arbitrarily small changes; changes
/// below about half a percent count as "no change" (not worth a bisect). A direction keeps
/// one sign; a magnitude m adds ±m (sd m/2.5) with 80% of the weight.
fn delta_prior(settings: &Settings) -> Vec<Component> {
    let signs: &[f64] = match settings.direction {
        Some(Direction::Increase) => &[1.0],
        Some(Direction::Decrease) => &[-1.0],
        None => &[1.0, -1.0],
    };
    let scales = PRIOR_SCALES;
    let k = (scales.len() * signs.len()) as f64;
    let broad = |weight: f64| {
        scales
            .iter()
            .flat_map(move |&tau| signs.iter().map(move |&s| (weight / k, s * tau, tau / 3.0)))
    };
    match settings.magnitude.filter(|m| m.is_finite() && *m != 0.0) {
        None => broad(1.0).collect(),
        Some(m) => {
            let m = m.abs();
            let hint = signs
                .iter()
                .map(|&s| (0.8 / signs.len() as f64, s * m, m / 2.5));
            hint.chain(broad(0.2)).collect()
        }
    }
}

/// Scales of the prior's change components (relative), smallest first.
const PRIOR_SCALES: [f64; 6] = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32];

/// The smallest change a bisect looks for: the prior's smallest scale (1%), or half the
/// magnitude the submitter gave when that is smaller.
fn smallest_of_interest(settings: &Settings) -> f64 {
    let smallest = PRIOR_SCALES[0];
    settings
        .magnitude
        .filter(|m| m.is_finite() && *m != 0.0)
        .map_or(smallest, |m| (m.abs() / 2.0).min(smallest))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn log_sum_exp(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = xs.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + xs.map(|x| (x - m).exp()).sum::<f64>().ln()
}

impl Point {
    fn candidate(self) -> Option<usize> {
        match self {
            Point::Good => None,
            Point::Candidate(c) => Some(c),
        }
    }
}

/// The good level in the metric's units (1 when unknown), to turn relative noise back.
fn level_of_good(ev: &Evidence) -> f64 {
    mean(ev.at(Point::Good)).map_or(1.0, f64::abs)
}

fn mean(v: &[f64]) -> Option<f64> {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Whether the runs have shown no noise at all (a deterministic metric such as an
/// instruction count; the fit's residue of rounding is not noise).
fn noiseless(b: &Belief) -> bool {
    b.noise <= NOISELESS
}
