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

/// Prior probability that the range holds no change at all.
const NO_CHANGE_PRIOR: f64 = 0.2;
/// The endpoints are measured until "no change" falls below this. They answer "is there a
/// change at all" best (the bad one carries it under every hypothesis); a search that starts
/// while "no change" is still likely fits noise at whichever split looks best.
const REPRODUCED: f64 = 0.25;
/// The budget the endpoints' "is there a change" question is sized from, at most: "no change
/// of interest" after a quarter of it at the endpoints, the search once half of it went there.
const ENDPOINT_RUNS_CAP: u32 = 400;
/// Each endpoint is topped up to at least this share of all samples while searching.
const ENDPOINT_SHARE: f64 = 0.12;
/// An endpoint is measured when its side holds less than this fraction of the other's
/// samples and fewer than `SIDE_PRECISION / d²` (d: the change in noise units).
const BALANCE: f64 = 0.5;
const SIDE_PRECISION: f64 = 0.0;
/// "No change" ends the bisect at probability 1 − this × (1 − confidence) (0.95 for 0.99).
const NOT_REPRODUCED_FACTOR: f64 = 5.0;
/// Runs a request: enough for one point to show (RUNS_Z / d)² noise units of evidence.
const RUNS_Z: f64 = 1.0;
/// Verification pairs are asked in chunks of this share of the pairs a full test needs.
const VERIFY_CHUNK: f64 = 0.15;
/// Verification starts at probability 1 − this × (1 − confidence) (0.9 for 0.99, never
/// below 0.5): the couples of the leading commit and its parent are also the runs that best
/// settle the last doubt, so starting early shares them with the end of the search.
const VERIFY_START: f64 = 10.0;
/// Error bound of the anytime-valid verification: a commit that did not move the metric
/// passes with probability at most this, however often the test is looked at.
const VERIFY_ALPHA: f64 = 0.1;
/// Scale of the normal prior on the standardised effect in the verification's e-value.
const VERIFY_TAU: f64 = 1.0;
/// Bounds on the known-noise mixture's prior scale when it follows the measured step.
const VERIFY_TAU_MIN: f64 = 0.2;
const VERIFY_TAU_MAX: f64 = 3.0;
/// How much wider than the core the wild runs' normal is (see `fit_wild`).
const WILD_SPREAD: f64 = 10.0;
/// What the wild-runs fit is tempered by beyond the core's share.
const WILD_TEMPER: f64 = 0.85;
/// The largest fraction of wild runs fitted.
const WILD_MAX: f64 = 0.25;
/// At the run cap, a step below [`smallest_of_interest`] ends "not reproduced" while "no
/// change" keeps at least this probability.
const OF_INTEREST_FLOOR: f64 = 0.01;
/// A range whose search and whose "no change" both need more than this many times the
/// bisect's ceiling ends inconclusive (or "no change of interest") at once: the ceiling
/// would be spent for the same outcome.
const BEYOND_CEILING: f64 = 3.0;
/// ... once the endpoints hold this share of [`ENDPOINT_RUNS_CAP`] (the noise is then known
/// well enough to say so).
const ENDPOINTS_BEFORE_CEILING: u32 = 4;
/// Mean runs an A/A range takes to end "not reproduced", per (noise / size of interest)²:
/// bisect-sim's A/A cells (1% of interest, N = 1000) took 717 runs at CV 10% (92% within
/// 2000) and 1416 at CV 15% (70%), about 7–8 × (σ/δ)².
const NO_CHANGE_RUNS: f64 = 8.0;
/// Verification gives up after this many times the expected pairs.
const VERIFY_MAX_FACTOR: usize = 8;
/// An endpoint holds enough samples once its level is known to 1/this of the change... in
/// noise units: n ≥ (this / d)².
const ENDPOINT_DECIDED: f64 = 10.0;
/// Prior probability of "no further change" on either side of a found change point.
const SIDE_NO_CHANGE_PRIOR: f64 = 0.5;
/// A side whose "no change" falls to this holds another change (the one-step model misfits).
const MISFIT: f64 = 0.02;
/// A side whose "no change" is at least this is taken as clean; between, it is measured more.
const SIDE_CLEAR: f64 = 0.5;
/// Second steps whose conditional fit is computed to see whether the
/// first change point survives them (the rest count as the worst of these).
const SURVIVAL_TERMS: usize = 12;
/// Prior probability that a verified step is only part of the range's change (its parent
/// already partly changed: two changed lines meeting at a merge, or a change below it).
const PARTIAL_PRIOR: f64 = 0.2;
/// Prior probability that a verified step overshoots the range's change: k beyond the bad
/// level, or a parent beyond the good one (a change of the other sign elsewhere in the
/// range: a regression and a later partial fix), by up to [`OVERSHOOT_REACH`] times the
/// range's change.
const OVERSHOOT_PRIOR: f64 = 0.1;
const OVERSHOOT_REACH: f64 = 2.0;
/// Above this probability of "only part of the change" (or "beyond it"), `Found` waits for
/// more runs at the good endpoint and the parent.
const PARTIAL_DOUBT: f64 = 0.2;
/// A merge's parents' doubts add up until each holds this much sample weight (outlier
/// noise that never settles then costs a merge culprit at most about 40 runs per parent).
const MERGE_PARENT_SAMPLES: f64 = 40.0;
/// Weight of the swap e-value in the verification's e-value (the rest: the average of the
/// t, known-noise and sign e-values).
const SWAP_WEIGHT: f64 = 0.5;
/// Runs an endpoint needs outside the couples before the swap e-value judges with it.
const SWAP_MIN_SAMPLES: usize = 5;
/// Degrees of freedom of the swap e-value's densities.
const SWAP_NU: f64 = 5.0;
/// A partial-step doubt is dropped once the point's level is known to this fraction of the
/// smallest change of interest and the partial part, one standard error added, is below
/// that size: what could remain is not a change this bisect looks for.
const PARTIAL_PRECISION: f64 = 1.0 / 3.0;
/// The endpoints' log variance ratio is shrunk towards 0 by this many times its sampling
/// variance over its square (positive-part James–Stein): a ratio the endpoints show clearly
/// is kept nearly whole, one within noise is dropped.
const NOISE_RATIO_SHRINK: f64 = 2.0;
const NOISE_RATIO_MIN_SAMPLES: usize = 8;
/// The ratio of noise standard deviations used at most (and at least).
const NOISE_RATIO_RANGE: (f64, f64) = (0.5, 2.0);
/// A point with this many samples is measured well: a predictive check that can only ask
/// for more runs at such points ends (when the culprit holds given any further step).
const CHECK_SETTLED_SAMPLES: usize = 10;
/// Above this probability of "only part of the change", spare hosts also search the range
/// for the rest of it.
const PARTIAL_SEARCH: f64 = 0.5;
/// The engine's measured overhead over the information bound, for predictions.
const PREDICT_OVERHEAD: f64 = 2.5;
/// The belief's noise over the runs' own scatter beyond which a point's level counts as
/// pinned once it has [`PINNED_RUNS`] runs, and the search stops asking for more of them.
const PINNED_NOISE_RATIO: f64 = 3.0;
/// Relative noise of one run below which the runs count as showing none ([`noiseless`]).
const NOISELESS: f64 = 1e-9;
/// Runs each endpoint needs before endpoints that repeat one value end a bisect as "no
/// change" (see `exact_unearned` in `decide_with`).
const EXACT_NO_CHANGE_RUNS: usize = 5;
/// Runs that pin a point's level where [`PINNED_NOISE_RATIO`] holds.
const PINNED_RUNS: usize = 5;
/// |t| of the endpoints' difference beyond which a contrary direction hint is reported.
const DIRECTION_T: f64 = 3.0;
/// A commit's probability of carrying the change (or not) at which its runs may join an
/// endpoint's to show an intermittent change.
const SURE_SIDE: f64 = 0.99;

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

/// Log-likelihood of residuals `r` under Student-t with `nu` degrees of freedom (None:
/// Gaussian), with the scale fitted by EM; returns it with the scale.
fn fit_scale(r: &[f64], nu: Option<f64>, start: f64) -> (f64, f64) {
    let n = r.len() as f64;
    let mut s2 = start * start;
    match nu {
        None => {
            s2 = (r.iter().map(|x| x * x).sum::<f64>() / n).max(1e-300);
            let ll = -0.5 * n * (2.0 * std::f64::consts::PI * s2).ln() - 0.5 * n;
            (ll, s2.sqrt())
        }
        Some(nu) => {
            for _ in 0..50 {
                let acc: f64 = r
                    .iter()
                    .map(|x| (nu + 1.0) / (nu + x * x / s2) * x * x)
                    .sum();
                let next = (acc / n).max(s2 * 1e-6);
                let done = (next - s2).abs() <= 1e-7 * s2;
                s2 = next;
                if done {
                    break;
                }
            }
            use statrs::function::gamma::ln_gamma;
            let c = ln_gamma((nu + 1.0) / 2.0)
                - ln_gamma(nu / 2.0)
                - 0.5 * (nu * std::f64::consts::PI).ln()
                - 0.5 * s2.ln();
            let ll: f64 = r
                .iter()
                .map(|x| c - (nu + 1.0) / 2.0 * (1.0 + x * x / (nu * s2)).ln())
                .sum();
            (ll, s2.sqrt())
        }
    }
}

/// The noise shape `robust_weights` chose.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tail {
    Gaussian,
    StudentT(f64),
    /// A Gaussian core and this fraction of wild runs.
    Wild(f64),
}

/// A Gaussian core with a fraction ε of wild runs (a normal [`WILD_SPREAD`] times wider),
/// fitted by EM from `start`: the log-likelihood, the core's scale and ε.
fn fit_wild(r: &[f64], start: f64) -> (f64, f64, f64) {
    let n = r.len() as f64;
    let (mut s2, mut eps) = (start * start, 0.05);
    let k2 = WILD_SPREAD * WILD_SPREAD;
    let dens =
        |x: f64, v: f64| (-x * x / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt();
    let core = |x: f64, s2: f64, eps: f64| {
        let a = (1.0 - eps) * dens(x, s2);
        let b = eps * dens(x, k2 * s2);
        (a / (a + b).max(1e-300), (a + b).max(1e-300))
    };
    for _ in 0..100 {
        let (mut g, mut gx2) = (0.0, 0.0);
        for &x in r {
            let (w, _) = core(x, s2, eps);
            g += w;
            gx2 += w * x * x;
        }
        let next = (gx2 / g.max(1e-300)).max(s2 * 1e-6);
        let next_eps = (1.0 - g / n).clamp(1e-4, WILD_MAX);
        let done = (next - s2).abs() <= 1e-7 * s2 && (next_eps - eps).abs() < 1e-6;
        (s2, eps) = (next, next_eps);
        if done {
            break;
        }
    }
    let ll = r.iter().map(|&x| core(x, s2, eps).1.ln()).sum();
    (ll, s2.sqrt(), eps)
}

/// Robustness weights for every sample of every point (same shape as `zs`), the scale of
/// the noise, and the tail index chosen (None: Gaussian).
///
/// Residuals are taken from the median of the point's other samples (points with three or
/// more), else from the nearer endpoint median. The noise shape is chosen among Student-t
/// with 3, 5 and 10 degrees of freedom and the Gaussian by likelihood, so Gaussian noise
/// keeps weights of 1 (and the exact conjugate model) while heavy tails are down-weighted
/// the way the t model would.
fn robust_weights(
    zs: &[Vec<f64>],
    good: Option<usize>,
    bad: Option<usize>,
    intermittent: bool,
) -> (Vec<Vec<f64>>, f64, Tail) {
    let endpoint_median = |i: Option<usize>| {
        i.filter(|&i| !zs[i].is_empty())
            .map(|i| median(&mut zs[i].clone()))
    };
    let (mg, mb) = (endpoint_median(good), endpoint_median(bad));
    let mut residuals: Vec<Vec<f64>> = Vec::with_capacity(zs.len());
    let mut fit: Vec<f64> = Vec::new();
    for v in zs {
        if v.len() >= 10 {
            // Many samples: the point's own median is as good as leaving one out.
            let m = median(&mut v.clone());
            let r: Vec<f64> = v.iter().map(|&z| z - m).collect();
            fit.extend(&r);
            residuals.push(r);
        } else if v.len() >= 3 {
            let mut others = Vec::with_capacity(v.len() - 1);
            let r: Vec<f64> = (0..v.len())
                .map(|i| {
                    others.clear();
                    others.extend(
                        v.iter()
                            .enumerate()
                            .filter(|&(j, _)| j != i)
                            .map(|(_, &x)| x),
                    );
                    v[i] - median(&mut others)
                })
                .collect();
            fit.extend(&r);
            residuals.push(r);
        } else {
            residuals.push(
                v.iter()
                    .map(|&z| {
                        let reference = match (mg, mb) {
                            (Some(a), Some(b)) if (z - a).abs() > (z - b).abs() => b,
                            (Some(a), _) | (None, Some(a)) => a,
                            (None, None) => 0.0,
                        };
                        z - reference
                    })
                    .collect(),
            );
        }
    }
    if fit.len() < 12 {
        fit = residuals.iter().flatten().copied().collect();
    }
    let mut abs: Vec<f64> = fit.iter().map(|r| r.abs()).collect();
    let mad = 1.4826 * median(&mut abs);
    let ones = || zs.iter().map(|v| vec![1.0; v.len()]).collect();
    if mad <= 0.0 || !mad.is_finite() {
        // Identical samples (a deterministic metric): every weight 1.
        let rms = (fit.iter().map(|x| x * x).sum::<f64>() / fit.len().max(1) as f64).sqrt();
        return (ones(), rms, Tail::Gaussian);
    }
    // Runs that show an intermittent change are the change, not noise to weigh down: heavy
    // tails and wild runs explained them away (P(no change) 0.95 with a +2.5% step).
    let choices: &[Option<f64>] = if intermittent {
        &[None]
    } else if fit.len() >= 20 {
        &[None, Some(10.0), Some(5.0), Some(3.0)]
    } else {
        &[Some(10.0)]
    };
    // Heavier tails must beat the Gaussian clearly (2 nats a step), not by chance.
    let (mut nu, mut best, mut scale) = (None, f64::NEG_INFINITY, mad);
    for (step, &c) in choices.iter().enumerate() {
        let (ll, sc) = fit_scale(&fit, c, mad);
        if ll - 2.0 * step as f64 > best {
            (nu, best, scale) = (c, ll - 2.0 * step as f64, sc);
        }
    }
    // A clean core with a few wild runs (a slow run now and then) must beat the best of
    // those as clearly again: Student-t down-weights every run a little and its fit is
    // tempered to (ν+1)/(ν+3) of the runs' information (0.67 at ν = 3); the core keeps
    // nearly all of it.
    if fit.len() >= 20 && !intermittent {
        let (ll, sc, eps) = fit_wild(&fit, mad);
        if ll - 2.0 * choices.len() as f64 > best {
            let (s2, k2) = (sc * sc, WILD_SPREAD * WILD_SPREAD);
            let weights = residuals
                .iter()
                .map(|v| {
                    v.iter()
                        .map(|r| {
                            let a = (1.0 - eps) * (-r * r / (2.0 * s2)).exp();
                            let b = eps / WILD_SPREAD * (-r * r / (2.0 * k2 * s2)).exp();
                            a / (a + b).max(1e-300)
                        })
                        .collect()
                })
                .collect();
            return (weights, sc, Tail::Wild(eps));
        }
    }
    let Some(nu) = nu else {
        return (ones(), scale, Tail::Gaussian);
    };
    let s2 = scale * scale;
    let weights = residuals
        .iter()
        .map(|v| v.iter().map(|r| (nu + 1.0) / (nu + r * r / s2)).collect())
        .collect();
    (weights, scale, Tail::StudentT(nu))
}

/// The bad endpoint's noise variance over the good one's (at least
/// [`NOISE_RATIO_MIN_SAMPLES`] a side), its logarithm shrunk towards 0 by
/// [`NOISE_RATIO_SHRINK`] and clamped to [`NOISE_RATIO_RANGE`]; None when shrunk to nothing.
/// An F test at 1% used to gate it: at CV 2% it let a doubled noise through only after
/// dozens of endpoint runs, and the search judged every point with the pooled noise until
/// then (2.0× the runs of a clean step). Heavy tails can fool the estimate; the likelihood
/// therefore only averages the ratio in, beside equal noise (see `belief`).
fn endpoint_noise_ratio(good: &[f64], bad: &[f64]) -> Option<f64> {
    noise_ratio_by(good, bad, Scale::StandardDeviation)
}

/// How [`noise_ratio_by`] measures each side's spread.
#[derive(Clone, Copy, PartialEq)]
enum Scale {
    StandardDeviation,
    /// The median absolute deviation: blind to a few wild runs, worth 37% of a standard
    /// deviation's degrees of freedom under Gaussian noise.
    Mad,
}

fn noise_ratio_by(good: &[f64], bad: &[f64], scale: Scale) -> Option<f64> {
    if good.len() < NOISE_RATIO_MIN_SAMPLES || bad.len() < NOISE_RATIO_MIN_SAMPLES {
        return None;
    }
    let sd = |v: &[f64]| match scale {
        Scale::StandardDeviation => {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
        }
        Scale::Mad => {
            let m = median(&mut v.to_vec());
            1.4826 * median(&mut v.iter().map(|x| (x - m).abs()).collect::<Vec<_>>())
        }
    };
    let (sg, sb) = (sd(good), sd(bad));
    if sg <= 0.0 || sb <= 0.0 || !sg.is_finite() || !sb.is_finite() {
        return None;
    }
    let log_f = (sb / sg).powi(2).ln();
    // The sampling variance of a log variance ratio: 2/df for each side.
    let efficiency = if scale == Scale::Mad { 0.37 } else { 1.0 };
    let df = |n: usize| (efficiency * (n - 1) as f64).max(1.0);
    let var = 2.0 / df(good.len()) + 2.0 / df(bad.len());
    let shrink = 1.0 - NOISE_RATIO_SHRINK * var / (log_f * log_f).max(1e-12);
    let (lo, hi) = NOISE_RATIO_RANGE;
    (shrink > 0.0).then(|| (log_f * shrink).exp().clamp(lo * lo, hi * hi))
}

/// The posterior. `allowed` masks the candidates that may be the culprit.
///
/// `fixed`: the commits carrying a change already known (the descendants of a first change
/// point). Then the hypotheses are about a *further* change: every point's level is
/// `μ + δ₁·[carries the known change] + δ₂·[carries this one]`, with μ and δ₁ flat (both
/// are in every hypothesis, so their improper priors cancel) and δ₂ under the same prior as
/// a single change. Its culprit may lie anywhere, also on a branch merged after the known
/// change, which a split of the range into "below" and "above" cannot see.
pub(crate) fn belief(
    graph: &CandidateGraph,
    prep: &Prepared,
    settings: &Settings,
    allowed: &[bool],
    no_change_prior: f64,
    fixed: Option<&[bool]>,
) -> Belief {
    let ev = prep.ev;
    let under = |m| {
        belief_with(
            graph,
            prep,
            settings,
            allowed,
            no_change_prior,
            fixed,
            m,
            0.0,
        )
    };
    let b = under(None);
    if b.to_show.is_some() || fixed.is_some() {
        return b;
    }
    // The endpoints' runs may be too few to show an intermittent change (eight runs, four
    // of them far, fit one wide level about as well); the commits the belief already
    // places surely on either side hold more of the same two distributions.
    // In the points' order, not the map's: the same evidence gives the same belief.
    let mut points: Vec<Point> = b.means.keys().copied().collect();
    points.sort();
    let sure = |want_bad: bool| -> Vec<f64> {
        points
            .iter()
            .filter(|p| match p {
                Point::Good => !want_bad,
                Point::Candidate(c) => {
                    let pb = b.bad.get(*c).copied().unwrap_or(0.0);
                    if want_bad {
                        pb >= SURE_SIDE
                    } else {
                        pb <= 1.0 - SURE_SIDE
                    }
                }
            })
            .flat_map(|&p| ev.at(p).iter().copied())
            .collect()
    };
    match crate::intermittent::fit(&sure(false), &sure(true)) {
        // Fitted to the runs as measured; the belief works relative to its reference level.
        Some(m) => {
            let r = b.reference;
            let m = crate::intermittent::Mixture {
                core: m.core / r - 1.0,
                far: m.far / r - 1.0,
                scale: m.scale / r,
                ..m
            };
            under(Some(m))
        }
        None => b,
    }
}

/// The noise's change placed by the runs' scatter within points alone, apart from any
/// change of level. The endpoints may show that one side is noisier (`noise_ratio`); the
/// level's hypotheses judge the changed side with that ratio, which makes the noise's
/// pattern evidence of where the *level* changed. Where the two move at one commit (a
/// change that makes runs noisier) that is right; where a commit adds jitter but no cost,
/// that commit won the posterior, and with the noise tripled there bisect-sim named it in
/// 5.5% of trials. So a second reading: the noise changes at a commit j of its own, with
/// its posterior from the points' within-point sums of squares (their levels free, so no
/// level enters it), and every point's noise is its expected one under it. Its likelihood
/// carries the Occam factor of placing j, `log_occam`, so the coincident reading wins where
/// the level's change and the noise's fall together.
struct NoiseApart {
    /// Every point's statistics, weighted by its expected noise variance.
    stats: Vec<Stats>,
    total: Stats,
    /// −½ Σ n·ln v over the points (tempered), v each point's expected variance factor.
    log_det: f64,
    /// ln Σ_j π(j)·L(j) − max_j ln L(j): what placing the noise's change costs.
    log_occam: f64,
}

impl NoiseApart {
    fn new(
        stats: &[Stats],
        prep: &Prepared,
        allowed: &[bool],
        r2: f64,
        temper: f64,
    ) -> Option<Self> {
        if !(r2 > 0.0 && r2.is_finite()) || r2 == 1.0 {
            return None;
        }
        let (measured, bits, words) = (&prep.measured, &prep.bits, prep.words);
        let (sig_rows, sig_of) = (&prep.sig_rows, &prep.sig_of);
        let within: Vec<(f64, f64)> = stats
            .iter()
            .map(|st| (st.ss(), (st.n - 1.0).max(0.0)))
            .collect();
        let (ss_all, df_all) = within
            .iter()
            .fold((0.0, 0.0), |(a, b), &(s, d)| (a + s, b + d));
        if df_all < 2.0 || ss_all <= 0.0 {
            return None;
        }
        let mut per_sig = vec![0usize; sig_rows.len()];
        for (c, &a) in allowed.iter().enumerate() {
            if a {
                per_sig[sig_of[c] as usize] += 1;
            }
        }
        let allowed_count = per_sig.iter().sum::<usize>().max(1) as f64;
        let carries = |c: usize, j: usize| bits[c * words + j / 64] >> (j % 64) & 1 == 1;
        // ln L(j) of the within-point scatter with the noise r times larger after j.
        let log_l: Vec<Option<f64>> = sig_rows
            .iter()
            .zip(&per_sig)
            .map(|(&c, &k)| {
                if k == 0 {
                    return None;
                }
                let (mut ss_a, mut df_a) = (0.0, 0.0);
                for (j, &(_, i)) in measured.iter().enumerate() {
                    if carries(c, j) {
                        ss_a += within[i].0;
                        df_a += within[i].1;
                    }
                }
                let rest = ss_all - ss_a;
                Some(
                    -temper
                        * (df_all / 2.0 * (rest.max(0.0) + ss_a / r2 + 1e-300).ln()
                            + df_a / 2.0 * r2.ln()),
                )
            })
            .collect();
        let top = log_l
            .iter()
            .flatten()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        if !top.is_finite() {
            return None;
        }
        let terms: Vec<f64> = log_l
            .iter()
            .zip(&per_sig)
            .filter_map(|(l, &k)| l.map(|l| (k as f64 / allowed_count).ln() + l - top))
            .collect();
        let log_z = log_sum_exp(terms.iter().copied());
        // P(point carries the noise's change), summed over j.
        let mut noisy = vec![0.0f64; stats.len()];
        for ((&c, l), &k) in sig_rows.iter().zip(&log_l).zip(&per_sig) {
            let Some(l) = l else { continue };
            let p = ((k as f64 / allowed_count).ln() + l - top - log_z).exp();
            if p < 1e-12 {
                continue;
            }
            for (j, &(_, i)) in measured.iter().enumerate() {
                if carries(c, j) {
                    noisy[i] += p;
                }
            }
        }
        let mut total = Stats::default();
        let mut log_det = 0.0;
        let stats: Vec<Stats> = stats
            .iter()
            .zip(&noisy)
            .map(|(st, &p)| {
                let v = 1.0 + (r2 - 1.0) * p.min(1.0);
                log_det -= temper * 0.5 * st.n * v.ln();
                let x = st.scaled(1.0 / v);
                total.add(&x);
                x
            })
            .collect();
        Some(Self {
            stats,
            total,
            log_det,
            log_occam: log_z,
        })
    }
}

/// What every belief of one decision shares, because it depends on the evidence and the
/// graph only: the measured points, their runs relative to the reference level with host
/// drift taken out, and which measured points descend from each commit (its signature). A
/// decision weighs many hypotheses (the one-change check fits up to 14 conditional beliefs),
/// and on a 100,000-commit range the drift fit and the signatures were most of each one's
/// cost, so they are prepared once per decision. It holds the evidence it was made from, so a
/// belief cannot be given the runs of one evidence and the drift fit of another.
pub(crate) struct Prepared<'a> {
    ev: &'a Evidence,
    /// Points with samples: the good endpoint first, then measured candidates.
    points: Vec<Point>,
    samples: usize,
    reference: f64,
    /// Relative runs, detrended, by point.
    zs: Vec<Vec<f64>>,
    /// (candidate, index in `points`) of every measured candidate, in `points` order.
    measured: Vec<(usize, usize)>,
    /// Bit rows: which of `measured` descend from each commit, `words` words a commit.
    bits: Vec<u64>,
    words: usize,
    /// Each commit's signature, and the first commit of each signature.
    sig_of: Vec<u32>,
    sig_rows: Vec<usize>,
    /// The variance rounding adds to a run, in the runs' own units (0 unless the values sit
    /// on a grid: [`crate::stats::rounding_variance`]).
    rounding: f64,
    /// Every point's runs repeat one value exactly (a deterministic metric).
    runs_exact: bool,
}

impl<'a> Prepared<'a> {
    pub(crate) fn new(graph: &CandidateGraph, ev: &'a Evidence) -> Self {
        let n = graph.len();
        let mut points: Vec<Point> = Vec::new();
        let mut raw: Vec<&[f64]> = Vec::new();
        for (&p, s) in &ev.samples {
            let s = s.as_slice();
            if s.iter().any(|x| x.is_finite()) && p.candidate().is_none_or(|c| c < n) {
                points.push(p);
                raw.push(s);
            }
        }
        let mut all: Vec<f64> = raw
            .iter()
            .flat_map(|s| s.iter().copied())
            .filter(|x| x.is_finite())
            .collect();
        let samples = all.len();
        let reference = {
            let m = median(&mut all);
            if m.abs() > 0.0 && m.is_finite() {
                m.abs()
            } else {
                1.0
            }
        };
        let zs: Vec<Vec<f64>> = raw
            .iter()
            .map(|s| {
                s.iter()
                    .filter(|x| x.is_finite())
                    .map(|&y| y / reference - 1.0)
                    .collect()
            })
            .collect();
        // Host drift, fitted within re-measured points, is taken out first.
        let zs = crate::drift::detrend(ev, &points, zs);

        // Signatures: which measured candidates descend from each commit.
        let measured: Vec<(usize, usize)> = points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.candidate().map(|c| (c, i)))
            .collect();
        let words = measured.len().div_ceil(64).max(1);
        let mut bits = vec![0u64; n * words];
        for (j, &(c, _)) in measured.iter().enumerate() {
            bits[c * words + j / 64] |= 1 << (j % 64);
        }
        for c in (1..n).rev() {
            let (lo, hi) = bits.split_at_mut(c * words);
            let row = &hi[..words];
            if row.iter().all(|&x| x == 0) {
                continue;
            }
            for &p in graph.parents(c) {
                for (a, b) in lo[p * words..(p + 1) * words].iter_mut().zip(row) {
                    *a |= *b;
                }
            }
        }
        let mut sig_of = vec![0u32; n];
        let mut sig_rows: Vec<usize> = Vec::new();
        {
            let mut sig_index: HashMap<&[u64], u32, BuildFx> = HashMap::default();
            for c in 0..n {
                let row = &bits[c * words..(c + 1) * words];
                if c > 0 && row == &bits[(c - 1) * words..c * words] {
                    // Runs of commits between measured points share a signature: skip the hash.
                    sig_of[c] = sig_of[c - 1];
                    continue;
                }
                let next = sig_rows.len() as u32;
                let id = *sig_index.entry(row).or_insert_with(|| {
                    sig_rows.push(c);
                    next
                });
                sig_of[c] = id;
            }
        }
        Prepared {
            ev,
            points,
            samples,
            reference,
            zs,
            measured,
            bits,
            words,
            sig_of,
            sig_rows,
            rounding: crate::stats::rounding_variance(raw.iter().copied()),
            runs_exact: crate::stats::repeats_exactly(raw.iter().copied()),
        }
    }
}

/// The belief under the intermittent change `mixture` when given, else under the one the
/// endpoints show, if any; every point's mean with a commit's own level of variance
/// `kappa` times the run variance (see [`commit_levels_weighed`]).
#[expect(
    clippy::too_many_arguments,
    reason = "the model's parts, each chosen by the caller"
)]
fn belief_with(
    graph: &CandidateGraph,
    prep: &Prepared,
    settings: &Settings,
    allowed: &[bool],
    no_change_prior: f64,
    fixed: Option<&[bool]>,
    mixture: Option<crate::intermittent::Mixture>,
    kappa: f64,
) -> Belief {
    let n = graph.len();
    let ev = prep.ev;
    let points = &prep.points;
    let (samples, reference) = (prep.samples, prep.reference);
    let zs = &prep.zs;
    let good_i = points.iter().position(|&p| p == Point::Good);
    let bad_i = points
        .iter()
        .position(|&p| p == Point::Candidate(graph.bad()));
    let mixture = mixture.or_else(|| {
        good_i
            .zip(bad_i)
            .and_then(|(g, b)| crate::intermittent::fit(&zs[g], &zs[b]))
    });
    let to_show = mixture.map(|m| m.runs_to_show());
    let (mut weights, scale, shape) = robust_weights(zs, good_i, bad_i, mixture.is_some());
    // A host that jitters more than the others weighs less, run by run (`hosts`).
    if let Some(by_host) = crate::hosts::weights(ev, points, zs, &weights) {
        for (w, h) in weights.iter_mut().zip(by_host) {
            for (l, f) in w.iter_mut().zip(h) {
                *l *= f;
            }
        }
    }
    let (tail, wild) = match shape {
        Tail::Gaussian => (None, None),
        Tail::StudentT(nu) => (Some(nu), None),
        Tail::Wild(eps) => (None, Some(eps)),
    };
    let mut stats: Vec<Stats> = zs
        .iter()
        .zip(&weights)
        .map(|(v, w)| {
            let mut st = Stats::default();
            for (&z, &l) in v.iter().zip(w) {
                st.n += 1.0;
                st.w += l;
                st.s += l * z;
                st.q += l * z * z;
                st.us += z;
                st.uq += z * z;
            }
            st
        })
        .collect();
    // Runs of one deployment share its boot's part: where the points' deployments show one
    // (ρ > 0), each deployment's mean weighs 1/(ρ + 1/W) runs (`boots`), and its runs'
    // scatter around that mean still counts in full (their sum of squares stays).
    let deployed: Option<Vec<Vec<crate::boots::Deployment>>> =
        crate::boots::deployments(ev, points, zs).map(|ids| {
            zs.iter()
                .zip(&weights)
                .zip(&ids)
                .map(|((z, l), ids)| crate::boots::group(z, l, ids))
                .collect()
        });
    let boot_ratio = deployed.as_deref().map_or(0.0, |d| {
        crate::boots::ratio(d, prep.rounding / (prep.reference * prep.reference))
    });
    if boot_ratio > 0.0
        && let Some(deployed) = &deployed
    {
        for (st, ds) in stats.iter_mut().zip(deployed) {
            let (mut w, mut s, mut q) = (0.0, 0.0, 0.0);
            for d in ds.iter().filter(|d| d.w > 0.0) {
                let we = 1.0 / (boot_ratio + 1.0 / d.w);
                w += we;
                s += we * d.mean;
                q += we * d.mean * d.mean + d.ss;
            }
            st.w = w;
            st.s = s;
            st.q = q;
        }
    }
    let noise_ratio = good_i
        .zip(bad_i)
        .and_then(|(g, b)| endpoint_noise_ratio(&zs[g], &zs[b]));
    // Given a known change whose side is noisier, that side's samples weigh by the ratio in
    // every hypothesis about a further change, "no further change" included (judged with
    // one pooled noise, the noisier side looked like a further step: the predictive check
    // spent 5× the runs of a clean bisect on it).
    let stats: Vec<Stats> = match (fixed, noise_ratio) {
        (Some(f), Some(r2)) if shape == Tail::Gaussian => stats
            .into_iter()
            .zip(points)
            .map(|(st, p)| match p {
                Point::Candidate(c) if f.get(*c) == Some(&true) => st.scaled(1.0 / r2),
                _ => st,
            })
            .collect(),
        _ => stats,
    };
    // A commit's own level (κ): a point's mean of W runs' worth then weighs 1/(κ + 1/W)
    // runs, its runs' scatter around it still counts in full; the density of the means
    // gains −½·ln(1 + κW) a point.
    let mut log_det_kappa = 0.0;
    let stats: Vec<Stats> = if kappa > 0.0 {
        stats
            .into_iter()
            .map(|st| {
                if st.w <= 0.0 {
                    return st;
                }
                let (m, ss) = (st.mean(), st.ss());
                let we = 1.0 / (kappa + 1.0 / st.w);
                log_det_kappa -= 0.5 * (1.0 + kappa * st.w).ln();
                Stats {
                    w: we,
                    s: we * m,
                    q: we * m * m + ss,
                    ..st
                }
            })
            .collect()
    } else {
        stats
    };
    // Each point's robust level (the Student-t weighted mean) and the weight behind it.
    let means: HashMap<Point, (f64, f64)> = points
        .iter()
        .zip(&stats)
        .filter(|(_, st)| st.w > 0.0)
        .map(|(&p, st)| (p, (st.mean(), st.w)))
        .collect();
    let mut total = Stats::default();
    for st in &stats {
        total.add(st);
    }
    // Which group each point is in: 1 when it carries the known change.
    let group: Vec<usize> = points
        .iter()
        .map(|p| match (p, fixed) {
            (Point::Candidate(c), Some(f)) if f.get(*c) == Some(&true) => 1,
            _ => 0,
        })
        .collect();
    let mut totals = [Stats::default(); 2];
    for (st, &g) in stats.iter().zip(&group) {
        totals[g].add(st);
    }
    let groups = totals.iter().filter(|t| t.n > 0.0).count().max(1) as f64;

    let (measured, bits, words) = (&prep.measured, &prep.bits, prep.words);
    let (sig_of, sig_rows) = (&prep.sig_of, &prep.sig_rows);

    // Marginal likelihood per signature (constants shared by all hypotheses dropped).
    let prior = delta_prior(settings);
    let count = total.n;
    // With Student-t weights held fixed, the weighted Gaussian likelihood is sharper than the
    // t likelihood it stands for: its information per sample is 1/s² where the t model's is
    // (ν+1)/((ν+3)s²). Temper the fit by that ratio so the posterior stays calibrated.
    // With a clean core and wild runs, the weights are near 1 or near 0: the fit counts
    // every run, the wild ones as if they had no residual, so it is tempered to the core's
    // share.
    let temper = match shape {
        Tail::Gaussian => 1.0,
        Tail::StudentT(nu) => (nu + 1.0) / (nu + 3.0),
        Tail::Wild(eps) => (1.0 - eps) * WILD_TEMPER,
    };
    let power = temper * (count - groups).max(0.0) / 2.0;
    let floor = 1e-18 * count.max(1.0);
    let scale2 = (scale * scale).max(1e-12);
    let ss0 = totals[0].ss() + totals[1].ss();
    let log_ml0 = -power * (ss0 + floor).ln();
    // Within each group, the points carrying this change (`b`) against the others: the
    // step's information h and its estimate d pool the groups' contrasts. `r2`: the noise
    // variance of the points carrying the change over that of the others. Returns the log
    // marginal likelihood, d, the residual sum of squares and h.
    let fit_on = |totals: &[Stats; 2], b: &[Stats; 2], r2: f64| -> Option<(f64, f64, f64, f64)> {
        let (mut h, mut x, mut ss) = (0.0, 0.0, 0.0);
        for (t, bg) in totals.iter().zip(b) {
            let g = t.sub(bg);
            let bg = bg.scaled(1.0 / r2);
            let mut both = g;
            both.add(&bg);
            ss += both.ss();
            if g.w > 1e-12 && bg.w > 1e-12 {
                let hg = g.w * bg.w / (g.w + bg.w);
                h += hg;
                x += hg * (bg.mean() - g.mean());
            }
        }
        if h <= 1e-12 {
            return None;
        }
        let d = x / h;
        let ssw = (ss - x * x / h).max(0.0) + floor;
        let ml = log_sum_exp(prior.iter().map(|&(pi, mu, tau)| {
            let gg = tau * tau / scale2;
            pi.ln()
                - 0.5 * (1.0 + h * gg).ln()
                - power * (ssw + (d - mu).powi(2) / (1.0 / h + gg)).ln()
        }));
        let carried: f64 = b.iter().map(|x| x.n).sum();
        // The density of the changed points' samples under a noise r times larger.
        Some((ml - temper * carried * 0.5 * r2.ln(), d, ssw, h))
    };
    // Where the noise changes need not be where the level does (a commit that adds jitter
    // but no cost, elsewhere in the range): see `NoiseApart`.
    let apart = match noise_ratio {
        Some(r2) if fixed.is_none() => NoiseApart::new(&stats, prep, allowed, r2, temper),
        _ => None,
    };
    let log_ml0 = match &apart {
        Some(a) => {
            let ss = a.total.ss();
            let ml = -power * (ss + floor).ln() + a.log_det + a.log_occam;
            log_sum_exp([0.5f64.ln() + log_ml0, 0.5f64.ln() + ml].into_iter())
        }
        None => log_ml0,
    };
    let mut sig_stats: Vec<(Stats, Stats)> = Vec::with_capacity(sig_rows.len());
    // The step and the residual sum of squares under each signature.
    let mut sig_fit: Vec<(f64, f64)> = Vec::with_capacity(sig_rows.len());
    let log_ml: Vec<f64> = sig_rows
        .iter()
        .map(|&c| {
            let row = &bits[c * words..(c + 1) * words];
            let mut b = [Stats::default(); 2];
            for (j, &(_, i)) in measured.iter().enumerate() {
                if row[j / 64] >> (j % 64) & 1 == 1 {
                    b[group[i]].add(&stats[i]);
                }
            }
            let mut above = b[0];
            above.add(&b[1]);
            sig_stats.push((total.sub(&above), above));
            let fit = |r2: f64| fit_on(&totals, &b, r2);
            let Some((ml, d, ssw, _)) = fit(1.0) else {
                sig_fit.push((0.0, ss0));
                return log_ml0;
            };
            sig_fit.push((d, ssw));
            // The noise may change with the change (a change that makes runs noisier, a
            // side that lands on a busier code path): when the endpoints show it clearly,
            // every hypothesis may judge the changed side with that ratio, so a step that
            // doubles the noise is not judged with one pooled scale alone (which cost 2.6×
            // the runs of a clean step in bisect-sim). One ratio for all: a ratio chosen per
            // hypothesis from a grid let a wrong one absorb a misplaced point in an inflated
            // side.
            // Not for a further change point: given a known change, a further "step" that
            // moved the noise alone would stand for the known change's own noisier side.
            // Averaged with the same noise on both sides, half and half: a ratio misread
            // from heavy-tailed endpoints must not make every change fit worse than "no
            // change" (forced, it ended 1.5 to 6% of bisect-sim's CV 5% Student-t trials as
            // "not reproduced").
            // Half of the noise's change is taken where the level changes, half where the
            // runs' own scatter places it (`NoiseApart`); a commit that moved the noise
            // alone then gains from it only what placing that noise change there earns.
            match (noise_ratio, &apart) {
                (Some(r2), Some(a)) => {
                    let mut bp = [Stats::default(); 2];
                    for (j, &(_, i)) in measured.iter().enumerate() {
                        if row[j / 64] >> (j % 64) & 1 == 1 {
                            bp[0].add(&a.stats[i]);
                        }
                    }
                    let totals_p = [a.total, Stats::default()];
                    let placed = fit_on(&totals_p, &bp, 1.0).map(|f| f.0 + a.log_det + a.log_occam);
                    let with_level = fit(r2).map(|f| f.0);
                    log_sum_exp(
                        std::iter::once(0.5f64.ln() + ml)
                            .chain(with_level.map(|x| 0.25f64.ln() + x))
                            .chain(placed.map(|x| 0.25f64.ln() + x))
                            .collect::<Vec<f64>>()
                            .into_iter(),
                    )
                }
                (Some(r2), None) if fixed.is_none() => fit(r2).map_or(ml, |f| {
                    log_sum_exp([0.5f64.ln() + ml, 0.5f64.ln() + f.0].into_iter())
                }),
                _ => ml,
            }
        })
        .collect();
    // An intermittent change: a commit that carries it is a mixture of the good level and
    // the far one, not a shifted copy. Under the shift, runs of a changed commit that
    // happened not to show it read as good for certain (k such runs: about k·d²/2σ² nats);
    // under the mixture, as what they are worth, k·ln(1 − q). The mixture's parameters are
    // the endpoints'; each hypothesis is the sum of its changed points' log ratios.
    let (log_ml, log_ml0) = match mixture.filter(|_| fixed.is_none()) {
        Some(m) => {
            let lr: Vec<f64> = zs
                .iter()
                .map(|v| v.iter().map(|&z| m.log_ratio(z)).sum())
                .collect();
            let log_ml = sig_rows
                .iter()
                .map(|&c| {
                    let row = &bits[c * words..(c + 1) * words];
                    measured
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| row[j / 64] >> (j % 64) & 1 == 1)
                        .map(|(_, &(_, i))| lr[i])
                        .sum()
                })
                .collect();
            (log_ml, 0.0)
        }
        None => (log_ml, log_ml0),
    };

    let allowed_count = allowed.iter().filter(|&&a| a).count().max(1) as f64;
    let log_prior = ((1.0 - no_change_prior) / allowed_count).ln();
    // Every allowed commit with the same signature has the same posterior: work per signature.
    let mut allowed_per_sig = vec![0usize; log_ml.len()];
    for c in 0..n {
        if allowed[c] {
            allowed_per_sig[sig_of[c] as usize] += 1;
        }
    }
    let log0 = no_change_prior.ln() + log_ml0;
    let z = log_sum_exp(
        (0..log_ml.len())
            .filter(|&i| allowed_per_sig[i] > 0)
            .map(|i| log_prior + (allowed_per_sig[i] as f64).ln() + log_ml[i])
            .chain(std::iter::once(log0)),
    );
    let sig_p: Vec<f64> = log_ml.iter().map(|&l| (log_prior + l - z).exp()).collect();
    let p: Vec<f64> = (0..n)
        .map(|c| {
            if allowed[c] {
                sig_p[sig_of[c] as usize]
            } else {
                0.0
            }
        })
        .collect();
    let no_change = (log0 - z).exp();
    let bad = graph.ancestor_mass(&p);

    // Estimates under the most probable hypothesis, for explanations and run counts.
    let map = (0..n)
        .max_by(|&a, &b| p[a].total_cmp(&p[b]))
        .unwrap_or(graph.bad());
    let (g, b) = sig_stats[sig_of[map] as usize];
    let (change, noise) = if fixed.is_some() && g.n > 0.0 && b.n > 0.0 {
        // A further step: its own size (the known one fitted apart), against the good level.
        let (d, ssw) = sig_fit[sig_of[map] as usize];
        let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
        let noise = (ssw / (count - 3.0).max(1.0)).sqrt() / good_level;
        (d / good_level, noise)
    } else if g.n > 0.0 && b.n > 0.0 {
        // Samples are relative to the median of all samples; the change and noise shown are
        // relative to the good level: (bad − good) / good.
        let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
        let change = (b.us / b.n - g.us / g.n) / good_level;
        let noise = ((g.uss() + b.uss()) / (count - 2.0).max(1.0)).sqrt() / good_level;
        (change, noise)
    } else {
        (0.0, (total.uss() / (count - 1.0).max(1.0)).sqrt())
    };
    // The noise the search effectively works against: the robust (Student-t weighted)
    // scale, over the tempering that keeps the weighted fit honest. Under Gaussian noise it
    // is `noise`; under heavy tails, far less than the plain standard deviation (which made
    // predictions 10 to 100 times too high for Student-t and outlier noise in bisect-sim).
    let effective_noise = if fixed.is_none() && g.n > 2.0 && b.n > 0.0 && g.w > 0.0 {
        let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
        let s2 = (g.ss() + b.ss()) / (count - 2.0).max(1.0);
        ((s2 / temper).sqrt() / good_level).min(noise)
    } else {
        noise
    };
    let endpoint_mad_noise = good_i
        .zip(bad_i)
        .filter(|_| fixed.is_none() && g.n > 0.0)
        .and_then(|(gi, bi)| {
            let (zg, zb) = (&zs[gi], &zs[bi]);
            if zg.len() < 3 || zb.len() < 3 {
                return None;
            }
            let deviations = |v: &[f64]| {
                let m = median(&mut v.to_vec());
                v.iter().map(|x| (x - m).abs()).collect::<Vec<f64>>()
            };
            let mut all = deviations(zg);
            all.extend(deviations(zb));
            let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
            let mad = 1.4826 * median(&mut all) / good_level;
            (mad > 0.0 && mad.is_finite()).then_some(mad)
        });
    let sides_differ = fixed.is_none()
        && noise_ratio.is_some()
        && good_i
            .zip(bad_i)
            .and_then(|(g, b)| noise_ratio_by(&zs[g], &zs[b], Scale::Mad))
            .is_some();
    let planning_noise = if sides_differ { noise } else { effective_noise };
    let ranked = ranked(&p, 64);
    Belief {
        p,
        no_change,
        bad,
        change,
        noise,
        effective_noise,
        endpoint_mad_noise,
        planning_noise,
        samples,
        tail,
        wild,
        ranked,
        signature: sig_of.clone(),
        means,
        noise_ratio: noise_ratio.filter(|_| fixed.is_none()),
        boot_ratio,
        to_show,
        reference,
        rounding: prep.rounding,
        runs_exact: prep.runs_exact,
        mixture: mixture.filter(|_| fixed.is_none()),
        log_evidence: z + temper * log_det_kappa,
    }
}

/// A commit's own level variances over the run variance (κ) a change point of a
/// multi-change outcome is checked under, with their prior probabilities. κ = 0 (commits
/// of a stretch run alike) is the prior's favourite: at 0.5 the check kept both of two real
/// +1.5% steps in 63% of bisect-sim's trials, at 0.8 in 77.5% and at 0.9 in 80% (84.5%
/// unchecked; the stretch's commits measured in all three), with layout noise of 0.5% a
/// commit naming a wrong commit in 2% of trials at each (14% unchecked). The grid ends at
/// a commit's own level half the run noise: with κ = 1 in it, the check (and a search
/// that never measures enough commits to rule so large a κ out) held clean culprits back.
const COMMIT_RATIOS: [(f64, f64); 4] = [
    (0.0, 0.9),
    (1.0 / 64.0, 0.1 / 3.0),
    (1.0 / 16.0, 0.1 / 3.0),
    (0.25, 0.1 / 3.0),
];

/// The belief (about a further change point when `fixed` holds the commits that carry a
/// known one) with every commit's own level weighed in (see [`commit_levels_weighed`]).
pub(crate) fn belief_with_commit_levels(
    graph: &CandidateGraph,
    prep: &Prepared,
    settings: &Settings,
    allowed: &[bool],
    no_change_prior: f64,
    fixed: Option<&[bool]>,
) -> Belief {
    commit_levels_weighed(COMMIT_RATIOS.map(|(kappa, _)| {
        belief_with(
            graph,
            prep,
            settings,
            allowed,
            no_change_prior,
            fixed,
            None,
            kappa,
        )
    }))
}

/// The stretch between two change points: the commits that carry exactly one of them,
/// given each one's descendants.
fn stretch(carry_a: &[bool], carry_b: &[bool]) -> Vec<usize> {
    (0..carry_a.len())
        .filter(|&c| carry_a[c] != carry_b[c])
        .collect()
}

/// A commit of a `stretch` to measure: the one whose measured neighbours in it are farthest
/// (never measured first; a stretch of one testable commit has nothing to add, so None).
fn stretch_point(ev: &Evidence, stretch: &[usize], enough: usize) -> Option<usize> {
    let stretch: Vec<usize> = stretch
        .iter()
        .copied()
        .filter(|c| !ev.untestable.contains(c))
        .collect();
    if stretch.len() < 2 {
        return None;
    }
    let measured = |c: usize| !ev.at(Point::Candidate(c)).is_empty();
    // Distance (in the stretch's order) to the nearest measured commit of it, in two sweeps
    // (a stretch can hold most of a 100,000-commit range).
    let mut gap = vec![usize::MAX; stretch.len()];
    let mut last: Option<usize> = None;
    for (i, &c) in stretch.iter().enumerate() {
        if measured(c) {
            last = Some(i);
        }
        if let Some(j) = last {
            gap[i] = i - j;
        }
    }
    last = None;
    for (i, &c) in stretch.iter().enumerate().rev() {
        if measured(c) {
            last = Some(i);
        }
        if let Some(j) = last {
            gap[i] = gap[i].min(j - i);
        }
    }
    // Every commit of the stretch measured: the one with the fewest runs, while it has
    // fewer than `enough` (past that a commit's own level is most of what its mean does not
    // know, and more of its runs cannot tell it from a step).
    let fewest = || {
        stretch
            .iter()
            .map(|&c| (ev.at(Point::Candidate(c)).len(), c))
            .filter(|&(n, _)| n < enough)
            .min()
            .map(|(_, c)| c)
    };
    (0..stretch.len())
        .filter(|&i| !measured(stretch[i]))
        .max_by_key(|&i| gap[i])
        .map(|i| stretch[i])
        .or_else(fewest)
}

/// Beliefs made under each commit-level variance of [`COMMIT_RATIOS`] (in its order),
/// weighed by their evidence: the first one's estimates, the hypotheses' posterior averaged.
///
/// Every commit changes the binary: code moves, alignment and inlining shift, the link
/// order changes. A benchmark sensitive to layout then runs at a level of the commit's own,
/// and more runs of that commit do not remove it. A commit measured fifty times (the
/// endpoints, the culprit and its parent under verification) is known to a seventh of the
/// noise, so under one level per stretch its own offset read as a further step: bisect-sim
/// with 0.5% per commit at CV 2% and a +3% step named a spurious second change point (most
/// often the culprit's parent or child) in 14% of trials.
/// A step persists in the commits after it, a commit's own level does not: under the
/// random-effect model (a commit's runs are `level + own + noise`, the own part of variance
/// κσ²) a step shown by one heavily measured commit is worth what one commit is worth,
/// while one shown by several commits is worth their number. κ is not estimated apart (an
/// estimate from the points a one-step belief puts on each side read the middle commits of
/// two +1.5% steps as layout and hid the second step in all but 0.5% of trials): the
/// two-step model itself weighs each κ of the grid by its marginal likelihood, so the middle
/// commits of two real steps, which agree with each other, favour κ = 0, and commits that
/// scatter favour κ > 0.
/// Only the change points of a multi-change outcome are checked this way. Every belief
/// made so (the search's included) cost the clean CV 2% cell 12.5% of its culprits with a
/// grid up to κ = 1 (a large κ dies only as more *commits* are measured, and the search
/// measures the same ones again), and with the grid up to 1/16 it named both of two +1.5%
/// steps in 1% of trials: the one-step belief's doubt between them never settled.
fn commit_levels_weighed(beliefs: [Belief; COMMIT_RATIOS.len()]) -> Belief {
    let logs: Vec<f64> = beliefs
        .iter()
        .zip(COMMIT_RATIOS)
        .map(|(b, (_, prior))| prior.ln() + b.log_evidence)
        .collect();
    let top = log_sum_exp(logs.iter().copied());
    let weights: Vec<f64> = logs.iter().map(|l| (l - top).exp()).collect();
    let mut out = beliefs[0].clone();
    out.p.iter_mut().for_each(|x| *x = 0.0);
    out.bad.iter_mut().for_each(|x| *x = 0.0);
    out.no_change = 0.0;
    for (b, &w) in beliefs.iter().zip(&weights) {
        for (o, x) in out.p.iter_mut().zip(&b.p) {
            *o += w * x;
        }
        for (o, x) in out.bad.iter_mut().zip(&b.bad) {
            *o += w * x;
        }
        out.no_change += w * b.no_change;
    }
    out.ranked = ranked(&out.p, 64);
    out.log_evidence = top;
    out
}

impl Point {
    fn candidate(self) -> Option<usize> {
        match self {
            Point::Good => None,
            Point::Candidate(c) => Some(c),
        }
    }
}

/// Candidates by decreasing probability until they hold `target` (at most `limit` of them).
fn ranked(p: &[f64], limit: usize) -> Vec<(usize, f64)> {
    let max = p.iter().copied().fold(0.0, f64::max);
    let mut order: Vec<usize> = (0..p.len())
        .filter(|&c| p[c] > 0.0 && p[c] >= 1e-12 * max)
        .collect();
    let by_p = |a: &usize, b: &usize| p[*b].total_cmp(&p[*a]).then(a.cmp(b));
    if order.len() > limit {
        order.select_nth_unstable_by(limit, by_p);
        order.truncate(limit);
    }
    order.sort_by(by_p);
    order.into_iter().map(|c| (c, p[c])).collect()
}

/// The most probable candidates, by decreasing probability, until they hold `target` (at most
/// `limit` of them), from a [`ranked`] list.
fn smallest_set(ranked: &[(usize, f64)], target: f64, limit: usize) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    let mut acc = 0.0;
    for &(c, p) in ranked.iter().take(limit) {
        out.push((c, p));
        acc += p;
        if acc >= target {
            break;
        }
    }
    out
}

fn short(graph: &CandidateGraph, c: usize) -> String {
    let id = graph.id(c);
    id.chars().take(12).collect()
}

fn describe(graph: &CandidateGraph, b: &Belief) -> String {
    let mut s = format!(
        "P(no change) {:.4}; change {:+.2}% with noise {:.2}% ({}) over {} samples",
        b.no_change,
        100.0 * b.change,
        100.0 * b.noise,
        match (b.tail, b.wild) {
            (Some(nu), _) => format!("student-t {nu}"),
            (None, Some(eps)) => format!("gaussian, {:.0}% wild runs", 100.0 * eps),
            (None, None) => "gaussian".to_string(),
        },
        b.samples
    );
    if b.boot_ratio > 0.0 {
        // Said where a reader of the status sees why runs of one boot count for less.
        let _ = write!(
            s,
            ", each deployment's own level {:.2}× the run variance",
            b.boot_ratio
        );
    }
    s.push_str("; top:");
    for (c, p) in smallest_set(&b.ranked, 0.99, 5) {
        let _ = write!(s, " {} {:.4}", short(graph, c), p);
    }
    s
}

fn assess(graph: &CandidateGraph, ev: &Evidence, b: &Belief, conf: f64) -> Vec<Assessment> {
    let mut out = Vec::with_capacity(graph.len() + 1);
    out.push(Assessment {
        point: Point::Good,
        verdict: Verdict::Good,
        culprit_probability: None,
        bad_probability: Some(0.0),
    });
    for c in 0..graph.len() {
        let verdict = if ev.untestable.contains(&c) {
            Verdict::Skipped
        } else if b.bad[c] >= conf {
            Verdict::Bad
        } else if 1.0 - b.bad[c] >= conf {
            Verdict::Good
        } else {
            Verdict::Unknown
        };
        out.push(Assessment {
            point: Point::Candidate(c),
            verdict,
            culprit_probability: Some(b.p[c]),
            bad_probability: Some(b.bad[c]),
        });
    }
    out
}

/// Pairs a verification is expected to need for a change of `d` noise units (a step of the
/// e-value test, for sizing requests; the test itself may stop at any time).
fn verify_pairs(b: &Belief) -> usize {
    verify_pairs_for(b, b.noise).max(min_pairs(b))
}

/// Couples a verification needs at the least: 3, or 2 for a metric whose runs have shown
/// no noise at all (the t-test's evidence is then unbounded from 2 identical differences,
/// and a deterministic metric's cost is its builds, not a third couple per parent).
fn min_pairs(b: &Belief) -> usize {
    if b.noise <= 0.0 { 2 } else { 3 }
}

/// Couples to ask for next, with `have` couples measured: a share of the full test, at
/// least [`min_pairs`] (for a noiseless metric, only what is missing of it).
fn verify_chunk(b: &Belief, have: usize) -> u32 {
    if b.noise <= 0.0 {
        return min_pairs(b).saturating_sub(have).max(1) as u32;
    }
    // Sized at the planning noise: the chunk sets only how many couples are asked for at
    // once, never what they prove.
    let need = verify_pairs_for(b, b.planning_noise).max(min_pairs(b));
    (need as f64 * VERIFY_CHUNK).ceil().max(min_pairs(b) as f64) as u32
}

fn verify_pairs_for(b: &Belief, noise: f64) -> usize {
    let d = if noise > 0.0 {
        (b.change / noise).abs()
    } else {
        10.0
    };
    let need = (2.0 * (1.645f64 + 0.842).powi(2) / (d * d).max(1e-6)).ceil();
    need.clamp(2.0, 60.0) as usize
}

/// Anytime-valid e-value that `point − pair_with` moved in the direction of `sign`.
///
/// The Bayes factor of the one-sample t-test with a normal prior (scale [`VERIFY_TAU`]) on
/// the standardised mean of the differences and the right-Haar prior 1/σ on their scale.
/// Because that prior is the scale group's right-Haar measure, the factor is a test
/// martingale under "no difference" whatever σ is (Lai 1976; Grünwald, de Heide and Koolen,
/// "Safe Testing", 2024), so it may be checked after every couple: the chance that it ever
/// reaches 1/α when the commit did not move the metric is at most α. Only a mean in the
/// direction of `sign` counts, which keeps the bound (it is a subset of the same event).
#[cfg(test)]
pub(crate) fn paired_e(pairs: &[(f64, f64)], sign: f64, noise: Option<f64>) -> f64 {
    paired_e_expecting(pairs, sign, noise, None)
}

/// [`paired_e`] with the size of the step the bisect measured (metric units), which sets
/// the scale of the known-noise mixture's prior (a prior fixed before these couples are
/// looked at, like the noise, so the bound holds as far as they are known).
pub(crate) fn paired_e_expecting(
    pairs: &[(f64, f64)],
    sign: f64,
    noise: Option<f64>,
    effect: Option<f64>,
) -> f64 {
    let d: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| sign * (a - b))
        .filter(|x| x.is_finite())
        .collect();
    let n = d.len();
    if n < 2 {
        return 1.0;
    }
    let nf = n as f64;
    let mean = d.iter().sum::<f64>() / nf;
    if mean <= 0.0 {
        return 0.0;
    }
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    let scale = d.iter().map(|x| x.abs()).fold(0.0, f64::max).max(1e-300);
    let known = noise.filter(|s| *s > 0.0 && s.is_finite());
    let e_t = if var > 1e-24 * scale * scale {
        let t2 = mean * mean / (var / nf);
        let nu = nf - 1.0;
        let g = nf * VERIFY_TAU * VERIFY_TAU;
        let log_bf = -0.5 * (1.0 + g).ln()
            + (nu + 1.0) / 2.0 * ((1.0 + t2 / nu).ln() - (1.0 + t2 / (nu * (1.0 + g))).ln());
        log_bf.exp()
    } else if known.is_none() {
        // Identical differences from a metric that has shown no noise anywhere (a
        // deterministic one): unbounded evidence.
        return f64::INFINITY;
    } else {
        // Identical differences from a metric that is noisy elsewhere: its values come in
        // steps (a coarse resolution), and a few couples that happen to differ by one step
        // each say nothing about the scale. The t-test is left out (an e-value of 1), and
        // the known-noise and sign e-values judge them. Read as unbounded, three such
        // couples passed a wrong commit at a resolution of 4% and CV 2%.
        1.0
    };
    // With the noise of one run known from the rest of the bisect (σ), the mixture SPRT of
    // a normal mean (Robbins; Johari, Pekelis and Walsh) is far sharper on a few couples. The
    // average of two e-values is an e-value, so the bound holds for the mix (the z half is
    // exact only as far as σ is: it comes from every run of the bisect).
    // Outliers inflate both of those; the signs of the differences do not care. Under "no
    // difference" interleaved runs are exchangeable, so each sign is a fair coin, and the
    // mixture over P(sign +) uniform on [1/2, 1] of the coin's likelihood ratio is a test
    // martingale too.
    let e_s = sign_e(&d);
    let Some(sigma) = known else {
        return (e_t + e_s) / 2.0;
    };
    let sd = sigma * std::f64::consts::SQRT_2;
    let sum = nf * mean / sd;
    // The prior's scale: the measured step in couple-difference units, when known.
    let tau = effect
        .map(|x| (x.abs() / sd).clamp(VERIFY_TAU_MIN, VERIFY_TAU_MAX))
        .filter(|t| t.is_finite())
        .unwrap_or(VERIFY_TAU);
    let g = nf * tau * tau;
    let log_z = -0.5 * (1.0 + g).ln() + sum * sum * tau * tau / (2.0 * (1.0 + g));
    // The direction is known, so the mixture is over effects of that sign only (a half-normal
    // prior): the symmetric mixture times 2·Φ(S·τ/√(1 + nτ²)), still a test martingale.
    let half =
        statrs::function::erf::erfc(-sum * tau / (1.0 + g).sqrt() / std::f64::consts::SQRT_2);
    (e_t + (log_z.min(700.0).exp() * half) + e_s) / 3.0
}

/// The sign test's e-value: 2ⁿ · 2 ∫_{1/2}^{1} pᵏ (1 − p)ⁿ⁻ᵏ dp for k positive differences
/// out of n non-zero ones.
fn sign_e(d: &[f64]) -> f64 {
    use statrs::function::beta::{beta_reg, ln_beta};
    let n = d.iter().filter(|x| **x != 0.0).count() as f64;
    let k = d.iter().filter(|x| **x > 0.0).count() as f64;
    if n == 0.0 {
        return 1.0;
    }
    let (a, b) = (k + 1.0, n - k + 1.0);
    let upper = (1.0 - beta_reg(a, b, 0.5)).max(1e-300);
    let log_e = (n + 1.0) * std::f64::consts::LN_2 + ln_beta(a, b) + upper.ln();
    log_e.min(700.0).exp()
}

/// Runs worth taking on one deployment when a boot's level varies ρ times the runs' variance
/// and a boot costs `boot_in_runs` runs (B, `Costs::boot_in_runs`): a deployment of m runs
/// costs B + m and its mean carries σ²(ρ + 1/m), so the information per unit of machine
/// time, 1 / ((ρ + 1/m)(B + m)), is largest at m = √(B/ρ).
fn runs_per_boot(boot_ratio: f64, boot_in_runs: f64) -> u32 {
    if boot_ratio > 0.0 {
        ((boot_in_runs / boot_ratio).sqrt().round().min(1e6) as u32).max(1)
    } else {
        u32::MAX
    }
}

/// Requests for a point that already has runs ask for a deployment of its own: runs of one
/// boot share its level, and a runner that keeps what it booted would otherwise add runs to
/// the boot it measured last, which tell the point's level no better than that boot did (and
/// leave boot-to-boot variance unseen, as two deployments are what shows it). Where the
/// deployments show such a variance, a request takes no more runs than one boot is worth.
/// Couples alternate their two commits, so each of their runs is a deployment already.
fn deploy_fresh(mut requests: Vec<Request>, ev: &Evidence, boot_ratio: f64) -> Vec<Request> {
    let per_boot = runs_per_boot(boot_ratio, ev.costs.boot_in_runs());
    for r in requests.iter_mut().filter(|r| r.pair_with.is_none()) {
        let measured = !ev.at(r.point).is_empty()
            || ev.failed.get(&r.point).is_some_and(|&n| n > 0)
            || ev.pending.get(&r.point).is_some_and(|&n| n > 0);
        r.fresh_deploy = measured;
        r.runs = r.runs.min(per_boot);
    }
    requests
}

fn cap(mut requests: Vec<Request>, mut budget: u32) -> Vec<Request> {
    requests.retain_mut(|r| {
        let per_run = if r.pair_with.is_some() { 2 } else { 1 };
        r.runs = r.runs.min(budget / per_run);
        budget -= r.runs * per_run;
        r.runs > 0
    });
    requests
}

/// Commits that descend from `k` (k included).
fn descendants(graph: &CandidateGraph, k: usize) -> Vec<bool> {
    let n = graph.len();
    let mut m = vec![false; n];
    if k < n {
        m[k] = true;
        for c in k + 1..n {
            m[c] = graph.parents(c).iter().any(|&p| m[p]);
        }
    }
    m
}

/// The point `k` is verified against next, and the interleaved couples measured so far.
///
/// `k` is verified against each of its parents in the range that can be built (the first
/// parent, or the good commit when that cannot be built). A merge carries a change of its
/// own only when it differs from every parent: a topic branch whose tip carries the change
/// makes the merge differ from its first parent too, and one slow run at that tip once made
/// the merge the named culprit. Requiring every test to pass is an intersection-union test,
/// so each at `VERIFY_ALPHA` keeps the bound. The parent returned is the one whose evidence
/// is weakest (least e-value, the first on ties), so `k` passes when that one does.
///
/// Only parents that may themselves be the culprit (`allowed`) count: in first-parent mode
/// the merge that brought a topic branch in is the answer, so its topic parent is not one.
fn verification<'a>(
    graph: &CandidateGraph,
    ev: &'a Evidence,
    b: &Belief,
    allowed: &[bool],
    k: usize,
) -> (Point, Cow<'a, [(f64, f64)]>) {
    let first = graph.first_parent(k);
    let others = graph
        .parents(k)
        .iter()
        .copied()
        .filter(|&p| Some(p) != first && allowed[p] && !ev.untestable.contains(&p))
        .map(Point::Candidate);
    let first = first
        .filter(|p| !ev.untestable.contains(p))
        .map_or(Point::Good, Point::Candidate);
    let pairs_with = |parent: Point| -> Cow<'a, [(f64, f64)]> {
        let interleaved = ev
            .pairs
            .get(&(Point::Candidate(k), parent))
            .map_or(&[][..], Vec::as_slice);
        if b.noise > 0.0 {
            return Cow::Borrowed(interleaved);
        }
        // A metric whose runs have shown no noise at all has no drift to interleave
        // against: every run of k against every run of the parent is as good a couple.
        let (at_k, at_parent) = (ev.at(Point::Candidate(k)), ev.at(parent));
        let zipped = at_k.iter().copied().zip(at_parent.iter().copied());
        if zipped.len() > interleaved.len() {
            Cow::Owned(zipped.collect())
        } else {
            Cow::Borrowed(interleaved)
        }
    };
    let mut best = (first, pairs_with(first));
    let mut weakest = evalue(ev, b, &best.1, graph.bad());
    for parent in others {
        let pairs = pairs_with(parent);
        let e = evalue(ev, b, &pairs, graph.bad());
        if e < weakest {
            (best, weakest) = ((parent, pairs), e);
        }
    }
    best
}

/// The verification's e-value of `pairs` (culprit, parent) for the step `b` believes in.
///
/// The known-noise, t and sign e-values judge the couples' differences alone; the swap
/// e-value ([`swap_e`]) also sees a change of noise. Their weighted average is an e-value.
fn evalue(ev: &Evidence, b: &Belief, pairs: &[(f64, f64)], bad: usize) -> f64 {
    // An intermittent change: a couple's difference is 0 in most couples and the far level
    // in some, on either side when both commits carry the change; a normal test of the
    // differences read a few such couples as a step. The swap e-value with the mixture's
    // densities keeps its bound whatever f is, and a couple where only the parent shows
    // the change all but zeroes it.
    if let Some(m) = b.mixture {
        let r = b.reference;
        let log_e: f64 = pairs
            .iter()
            .filter(|(a, c)| a.is_finite() && c.is_finite())
            .map(|&(a, c)| {
                let llr = m.log_ratio(a / r - 1.0) - m.log_ratio(c / r - 1.0);
                std::f64::consts::LN_2 - (-llr).exp().ln_1p()
            })
            .sum();
        return log_e.min(700.0).exp();
    }
    // A couple's two runs are two deployments on a runner that boots each commit, so each
    // carries a boot's level of its own: the known noise of a difference counts it (with
    // a run's noise alone, a per-boot level of 3% at CV 2% passed couples of two commits
    // at one level).
    // On a grid, a commit whose level sits between two grid values reads one or the other:
    // its runs scatter by up to half a step, whatever the belief's one noise says (three
    // couples one step apart each, judged at a belief noise of 0.5% on a 2% grid, named a
    // second change point).
    let half_step = (3.0 * b.rounding).sqrt();
    let run_noise = (b.noise * level_of_good(ev)).max(half_step);
    // Runs that repeat exactly give couples of one difference: unbounded evidence, which no
    // known noise may replace (a deterministic metric whose commits each move it a little
    // has a belief noise of the fit, not of the runs).
    let known = !noiseless(b) && !b.runs_exact;
    let differences = paired_e_expecting(
        pairs,
        b.change.signum(),
        known.then(|| run_noise * (1.0 + b.boot_ratio).sqrt()),
        Some(b.change * level_of_good(ev)),
    );
    match endpoint_sides(ev, pairs, bad) {
        Some(sides) => (1.0 - SWAP_WEIGHT) * differences + SWAP_WEIGHT * swap_e(pairs, sides),
        None => differences,
    }
}

/// Each endpoint's level and scale (median, MAD) from its runs outside `pairs`, so that the
/// model a couple is judged with does not depend on the order of that couple's two runs.
fn endpoint_sides(ev: &Evidence, pairs: &[(f64, f64)], bad: usize) -> Option<[(f64, f64); 2]> {
    let mut in_pairs: Vec<f64> = pairs.iter().flat_map(|&(a, c)| [a, c]).collect();
    in_pairs.sort_by(f64::total_cmp);
    let side = |p: Point| -> Option<(f64, f64)> {
        let mut left = in_pairs.clone();
        let mut v: Vec<f64> = Vec::new();
        for &y in ev.at(p).iter().filter(|y| y.is_finite()) {
            match left.binary_search_by(|u| u.total_cmp(&y)) {
                Ok(i) => {
                    left.remove(i);
                }
                Err(_) => v.push(y),
            }
        }
        if v.len() < SWAP_MIN_SAMPLES {
            return None;
        }
        let m = median(&mut v.clone());
        let mut dev: Vec<f64> = v.iter().map(|y| (y - m).abs()).collect();
        let s = 1.4826 * median(&mut dev);
        (s > 0.0 && s.is_finite()).then_some((m, s))
    };
    Some([side(Point::Good)?, side(Point::Candidate(bad))?])
}

/// The swap e-value of couples (culprit, parent). Under "the culprit runs as its parent
/// does", the two runs of an interleaved couple are exchangeable: either order is as likely,
/// so 2·f(a, b) / (f(a, b) + f(b, a)) has mean 1 for any f fixed apart from the couple, and
/// the product over couples is a test martingale (valid at any number of looks). f is the
/// bad endpoint's density for the culprit's run times the good endpoint's for the parent's,
/// so a change of noise counts as well as a change of level (a step that doubles the noise
/// needed 2.4× the couples of a clean step by their differences alone). Student-t densities
/// keep one wild run from zeroing it; each couple at most doubles it.
fn swap_e(pairs: &[(f64, f64)], sides: [(f64, f64); 2]) -> f64 {
    let [(mg, sg), (mb, sb)] = sides;
    let ln_t = |x: f64, m: f64, s: f64| {
        -(SWAP_NU + 1.0) / 2.0 * (1.0 + ((x - m) / s).powi(2) / SWAP_NU).ln() - s.ln()
    };
    let log_e: f64 = pairs
        .iter()
        .filter(|(a, c)| a.is_finite() && c.is_finite())
        .map(|&(a, c)| {
            let llr = ln_t(a, mb, sb) + ln_t(c, mg, sg) - ln_t(c, mb, sb) - ln_t(a, mg, sg);
            std::f64::consts::LN_2 - (-llr).exp().ln_1p()
        })
        .sum();
    log_e.min(700.0).exp()
}

/// Capacity in bits of one run for a step of `d` noise units (a binary-input Gaussian
/// channel with inputs ±d/2), by numerical integration.
fn capacity(d: f64) -> f64 {
    if !d.is_finite() || d > 12.0 {
        return 1.0;
    }
    let a = d / 2.0;
    let steps = 400;
    let (lo, hi) = (-a - 8.0, a + 8.0);
    let h = (hi - lo) / steps as f64;
    let mut acc = 0.0;
    for i in 0..=steps {
        let y = lo + i as f64 * h;
        let p = (-(y - a).powi(2) / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
        // log2(2 / (1 + exp(-2 a y)))
        let l = std::f64::consts::LN_2 - (1.0 + (-2.0 * a * y).exp()).ln();
        let w = if i == 0 || i == steps { 0.5 } else { 1.0 };
        acc += w * p * l / std::f64::consts::LN_2;
    }
    (acc * h).clamp(1e-6, 1.0)
}

/// What the bound-times-overhead prediction is multiplied by so that it is the engine's
/// mean: measured by bisect-sim (`--phases` prints the first prediction against the runs
/// taken after it), 100 trials a cell, n = 1000 with merges, one host. Taken/predicted was
/// 0.55, 0.56, 0.61, 0.74, 0.82, 1.06, 1.21 and 1.33 for steps of 6, 4, 3, 2, 1.5, 1, 0.75
/// and 0.6 noise standard deviations (about 0.45 + 0.55/d): the search's overhead over the
/// information bound grows as the step shrinks. With several hosts a round's points are
/// chosen before the others' results are known; w = 4, 8 and 32 cost 1.47, 1.9 and 3.0 the
/// runs of one host at 1.5 σ (about w^0.3).
fn predict_calibration(d: f64, hosts: u32) -> f64 {
    let per_step = (0.45 + 0.55 / d.max(1e-3)).clamp(0.5, 2.5);
    per_step * f64::from(hosts.max(1)).powf(0.3)
}

/// The size of the step a prediction is made for: the median of |δ| under the posterior of
/// the step, with the prior the model searches under ([`delta_prior`]) and the step as
/// measured between the two sides of the most probable split, with its standard error.
///
/// The measured step alone is no ground for a prediction while it is measured within its
/// own noise: the runs a step needs grow as 1/d², and from 5 + 5 endpoint runs a +3% step
/// at CV 2% whose bad side is twice as noisy read +0.01% once in 60 bisects, predicting
/// 26,357,567 more runs (87 more did it). Under the prior a change is at least about
/// half a percent, so an unmeasured step predicts what a step of that size costs. The
/// median is used only where it is larger than the step measured: the prior pulls a step
/// measured from a few runs towards its smaller scales too, and the calibration of the
/// predictions ([`predict_calibration`]) was measured with the step as measured (taking the
/// median everywhere moved the first prediction from 0.94× to 0.67× the runs then taken at
/// CV 2%, and from 0.82× to 0.46× at CV 5%, 400 bisects each).
fn step_for_prediction(b: &Belief, settings: &Settings) -> f64 {
    let measured = b.change.abs();
    // Weight on either side of the split: a point's weight times the probability that it
    // carries the change (the good endpoint never does).
    let (mut w_good, mut w_bad) = (0.0, 0.0);
    for (&p, &(_, w)) in &b.means {
        let carries = match p {
            Point::Good => 0.0,
            Point::Candidate(c) => b.bad.get(c).copied().unwrap_or(0.0),
        };
        w_good += w * (1.0 - carries);
        w_bad += w * carries;
    }
    let se = b.effective_noise * (1.0 / w_good + 1.0 / w_bad).sqrt();
    if !(se.is_finite() && se > 0.0 && b.change.is_finite()) {
        return measured;
    }
    // Each prior component N(μ, s²) times the measurement N(δ̂; δ, se²): a normal with
    // weight w·N(δ̂; μ, s² + se²).
    let post: Vec<(f64, f64, f64)> = delta_prior(settings)
        .into_iter()
        .map(|(w, mu, s)| {
            let v = s * s + se * se;
            let log_w = w.ln() - (b.change - mu).powi(2) / (2.0 * v) - 0.5 * v.ln();
            let mean = (mu * se * se + b.change * s * s) / v;
            (log_w, mean, (s * s * se * se / v).sqrt())
        })
        .collect();
    let top = post.iter().map(|c| c.0).fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = post.iter().map(|c| (c.0 - top).exp()).sum();
    let phi = |x: f64| 0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2);
    // P(|δ| ≤ t), increasing in t: its median by bisection.
    let below = |t: f64| {
        post.iter()
            .map(|&(lw, m, sd)| (lw - top).exp() * (phi((t - m) / sd) - phi((-t - m) / sd)) / total)
            .sum::<f64>()
    };
    let (mut lo, mut hi) = (0.0, 1.0f64.max(4.0 * measured));
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if below(mid) < 0.5 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    measured.max(0.5 * (lo + hi))
}

/// How far the robust scale may sit above the endpoints' median absolute deviation before a
/// prediction plans with the latter.
const MAD_GAP: f64 = 3.0;

/// The noise a prediction plans with: the robust scale, unless it is more than [`MAD_GAP`]
/// times the endpoints' median absolute deviation. From an endpoint's first five runs the
/// Student-t weighting cannot yet tell one run 60% slow from the noise: in bisect-sim's
/// outliers cell (5% of runs 20–100% slow, CV 2%) the first prediction after 5 + 5 runs
/// said 4,710 to 21,533 more runs in 7 bisects of 200 (139 was the mean taken), a mean of
/// 791 against 139.
fn prediction_noise(b: &Belief) -> f64 {
    match b.endpoint_mad_noise {
        Some(mad) if b.effective_noise > MAD_GAP * mad => mad,
        _ => b.effective_noise,
    }
}

/// Runs and builds still needed for the target, from the remaining entropy of the culprit
/// distribution, the information a run carries at the step (see [`step_for_prediction`])
/// and noise, and the engine's measured overhead over that bound (about 2.5×), plus the
/// verification.
fn predict(b: &Belief, costs: crate::Costs, conf: f64, settings: &Settings) -> Prediction {
    let hosts = settings.idle_hosts;
    // A run still to come brings its boot's part too: at a per-boot level of 3% (CV 2%),
    // runs predicted from the run noise alone were 9.25× too few.
    let run_noise = prediction_noise(b) * (1.0 + b.boot_ratio).sqrt();
    let measured_d = if run_noise > 0.0 {
        (b.change / run_noise).abs()
    } else {
        12.0
    };
    let d = if run_noise > 0.0 {
        step_for_prediction(b, settings) / run_noise
    } else {
        12.0
    };
    let mass = (1.0 - b.no_change).max(1e-12);
    let q: Vec<f64> = b.ranked.iter().map(|&(_, p)| p / mass).collect();
    let rest = (1.0 - q.iter().sum::<f64>()).max(0.0);
    let spread = (b.p.len().saturating_sub(q.len())).max(1) as f64;
    // Bits still to learn: the entropy of the culprit distribution, none once one commit
    // holds the target.
    let entropy: f64 = q
        .iter()
        .filter(|&&x| x > 0.0)
        .map(|&x| -x * x.log2())
        .sum::<f64>()
        + if rest > 1e-12 {
            -rest * rest.log2() + rest * spread.log2()
        } else {
            0.0
        };
    let left = if q.first().is_some_and(|&x| x * mass >= conf) {
        0.0
    } else {
        entropy.max(0.0)
    };
    let search = PREDICT_OVERHEAD * left / capacity(d);
    let verify = 2.0 * verify_pairs(b) as f64;
    let runs = ((search + verify) * predict_calibration(d, hosts))
        .ceil()
        .max(0.0) as u32;
    let builds = left.ceil() as u32;
    let machine_secs = (costs.build_secs > 0.0 && costs.run_secs > 0.0)
        .then_some(runs as f64 * costs.run_secs + builds as f64 * costs.build_secs);
    Prediction {
        runs,
        builds,
        machine_secs,
        step_in_noise: measured_d,
    }
}

/// The change point a belief pins down (its culprit when one commit holds `conf`).
fn change_point(
    graph: &CandidateGraph,
    ev: &Evidence,
    b: &Belief,
    conf: f64,
    verified: bool,
) -> ChangePoint {
    let set = smallest_set(&b.ranked, conf, 20);
    let top = set.first().copied();
    let settled = verified && top.is_some_and(|(_, p)| p >= conf);
    let change = top.map_or(b.change, |(k, _)| {
        local_change(graph, ev, k).unwrap_or(b.change)
    });
    ChangePoint {
        culprit: settled.then(|| top.map(|t| t.0)).flatten(),
        probability: if settled {
            top.map_or(0.0, |t| t.1)
        } else {
            set.iter().map(|t| t.1).sum()
        },
        candidates: set,
        change,
        below_interest: false,
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

/// (level of k − level of its parent) / good level, from the samples at hand.
fn local_change(graph: &CandidateGraph, ev: &Evidence, k: usize) -> Option<f64> {
    let parent = graph
        .first_parent(k)
        .filter(|p| !ev.at(Point::Candidate(*p)).is_empty())
        .map_or(Point::Good, Point::Candidate);
    let good = mean(ev.at(Point::Good))?;
    let above = mean(ev.at(Point::Candidate(k)))?;
    let below = mean(ev.at(parent))?;
    (good != 0.0).then(|| (above - below) / good.abs())
}

/// The runs' noise within points (pooled over every point with two runs or more, relative
/// to the good level): what a commit's runs scatter by around their own mean, whatever
/// level of its own the commit runs at, and never less than rounding to the values' grid
/// adds (`b.rounding`: runs that read one grid value). None with fewer than two degrees of
/// freedom.
fn within_point_noise(ev: &Evidence, b: &Belief) -> Option<f64> {
    let good = mean(ev.at(Point::Good))?;
    let (mut ss, mut df) = (0.0, 0usize);
    for v in ev.samples.values() {
        let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        if v.len() >= 2 {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            ss += v.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            df += v.len() - 1;
        }
    }
    (df >= 2 && good != 0.0).then(|| (ss / df as f64).max(b.rounding).sqrt() / good.abs())
}

/// A merge's two parents as points (a first parent outside the range is the good side).
/// None for a commit that is not a merge of two.
fn merge_parents(graph: &CandidateGraph, m: usize) -> Option<[Point; 2]> {
    match (graph.first_parent(m), graph.parents(m)) {
        (None, [p2]) => Some([Point::Good, Point::Candidate(*p2)]),
        (Some(_), [p1, p2]) => Some([Point::Candidate(*p1), Point::Candidate(*p2)]),
        _ => None,
    }
}

/// The newest commit of the range that both `a` and `b` descend from, or the good commit.
fn merge_base(graph: &CandidateGraph, a: Point, b: Point) -> Point {
    let (Point::Candidate(a), Point::Candidate(b)) = (a, b) else {
        return Point::Good;
    };
    let (aa, ab) = (graph.ancestors(&[a]), graph.ancestors(&[b]));
    (0..=a.min(b))
        .rev()
        .find(|&c| aa[c] && ab[c])
        .map_or(Point::Good, Point::Candidate)
}

/// The merge base to measure before merge `k` is named, in a metric whose runs repeat
/// exactly: its parents read apart, so one branch may bring a change the merge only passes
/// on (see [`merges_without_a_step`]), and the base is not measured yet.
fn base_to_measure(
    graph: &CandidateGraph,
    ev: &Evidence,
    b: &Belief,
    settings: &Settings,
    k: usize,
) -> Option<Point> {
    if settings.first_parent || !b.runs_exact {
        return None;
    }
    let [p1, p2] = merge_parents(graph, k)?;
    if ev.at(p1).is_empty() || ev.at(p2).is_empty() {
        return None;
    }
    let base = merge_base(graph, p1, p2);
    let untestable = matches!(base, Point::Candidate(c) if ev.untestable.contains(&c));
    if !ev.at(base).is_empty() || untestable {
        return None;
    }
    (mean(ev.at(p1))? != mean(ev.at(p2))?).then_some(base)
}

/// A merge's own step, relative to the good level: what it adds to what its two branches
/// bring, level(m) − level(p1) − level(p2) + level(base). None while any of the four is
/// unmeasured.
fn merge_own_step(graph: &CandidateGraph, ev: &Evidence, m: usize) -> Option<f64> {
    let [p1, p2] = merge_parents(graph, m)?;
    if ev.at(p1).is_empty() || ev.at(p2).is_empty() {
        return None;
    }
    let base = merge_base(graph, p1, p2);
    let good = mean(ev.at(Point::Good)).filter(|g| *g != 0.0)?;
    let level = |p: Point| mean(ev.at(p));
    let own = level(Point::Candidate(m))? - level(p1)? - level(p2)? + level(base)?;
    Some(own / good.abs())
}

/// Merges that add nothing of interest to what their branches bring, in a metric whose
/// runs repeat exactly (every level read without error): each differs from its parents
/// only because the other branch carries a change (its own step, see [`merge_own_step`],
/// is under the size of interest). Where the level walks along both branches, such a merge differs from every
/// parent and was named for a step made on its branch: bisect-sim's exact metric walking
/// 0.1% a commit named the merges c516, c364 and c299 for steps at c515, c362 and c294.
fn merges_without_a_step(graph: &CandidateGraph, ev: &Evidence, of_interest: f64) -> Vec<usize> {
    ev.samples
        .keys()
        .filter_map(|p| match p {
            Point::Candidate(m) if merge_parents(graph, *m).is_some() => Some(*m),
            _ => None,
        })
        .filter(|&m| merge_own_step(graph, ev, m).is_some_and(|own| own.abs() < of_interest))
        .collect()
}

/// Whether the runs have shown no noise at all (a deterministic metric such as an
/// instruction count; the fit's residue of rounding is not noise).
fn noiseless(b: &Belief) -> bool {
    b.noise <= NOISELESS
}

/// Whether the belief's noise is mostly the commits' own moves: the runs scatter less than
/// a [`PINNED_NOISE_RATIO`]th of it, so a point's level is pinned after [`PINNED_RUNS`]
/// runs and more of them cannot settle what the model misfits.
fn levels_pinned(ev: &Evidence, b: &Belief) -> bool {
    within_point_noise(ev, b).is_some_and(|w| w * PINNED_NOISE_RATIO < b.noise)
}

/// Whether commit `c`'s measured step, against the parent it differs from least (a merge
/// carries a change of its own only when it differs from every parent; the good commit when
/// `c` has none in the range), stays under `of_interest` by `z` standard errors of
/// `run_noise`. False while `c` or all of its parents are unmeasured.
fn step_below_interest(
    graph: &CandidateGraph,
    ev: &Evidence,
    c: usize,
    run_noise: f64,
    of_interest: f64,
    z: f64,
) -> bool {
    let parents: Vec<Point> = if graph.parents(c).is_empty() {
        vec![Point::Good]
    } else {
        graph
            .parents(c)
            .iter()
            .map(|&p| Point::Candidate(p))
            .collect()
    };
    parents
        .into_iter()
        .any(|p| apart_below_interest(ev, Point::Candidate(c), p, run_noise, of_interest, z))
}

/// Whether the measured difference between points `a` and `b`, relative to the good level,
/// stays under `of_interest` by `z` standard errors of `run_noise`. False while either (or
/// the good endpoint) is unmeasured.
fn apart_below_interest(
    ev: &Evidence,
    a: Point,
    b: Point,
    run_noise: f64,
    of_interest: f64,
    z: f64,
) -> bool {
    let at = |p: Point| ev.at(p);
    let (Some(at_a), Some(at_b), Some(good)) = (mean(at(a)), mean(at(b)), mean(at(Point::Good)))
    else {
        return false;
    };
    if good == 0.0 {
        return false;
    }
    let n_at = |p: Point| at(p).len().max(1) as f64;
    let se = run_noise * (1.0 / n_at(a) + 1.0 / n_at(b)).sqrt();
    ((at_a - at_b) / good.abs()).abs() + z * se < of_interest
}

/// Standard errors (of the runs' own noise) a change point's measured step must stay under
/// the size of interest by before it is no culprit (see the multi-change branch of
/// `decide_with`).
const SMALL_CHANGE_Z: f64 = 1.0;

/// Standard errors by which a change point's own step must stay under the size of interest
/// before an outcome of several changes stops naming its commit (see
/// [`withdraw_small_names`]): the runs' own noise must place the step surely below.
const UNNAMED_CHANGE_Z: f64 = 2.0;
/// The same for the one culprit of a `Found`, which its posterior and its verification
/// already hold: three standard errors.
const UNNAMED_CULPRIT_Z: f64 = 3.0;

/// An outcome of several changes names a commit only when its own step (against the parent
/// it differs from least) may be of interest. Where the level moves a little at every
/// commit (an instruction count along a history, a near-exact metric with a walk of 0.1% a
/// commit) the multi-change search settles on such moves, each as certain as the change
/// asked about: bisect-sim named commits whose own steps were −0.86%, +0.80%, +0.53%,
/// −0.46% and +0.30% beside (or instead of) the planted +3% one. Such a change point stays
/// in the outcome, its candidates and size listed, without a name; the reason says why.
/// Returns the withdrawn names with their measured steps.
fn withdraw_small_names(
    graph: &CandidateGraph,
    ev: &Evidence,
    b: &Belief,
    of_interest: f64,
    changes: &mut [ChangePoint],
) -> Vec<(usize, f64)> {
    // The runs' own noise, not the belief's: commits' own moves are most of what the
    // belief reads as noise where the level walks.
    let run_noise = within_point_noise(ev, b).unwrap_or(b.noise);
    let mut withdrawn = Vec::new();
    for cp in changes.iter_mut() {
        if let Some(c) = cp.culprit
            && step_below_interest(graph, ev, c, run_noise, of_interest, UNNAMED_CHANGE_Z)
        {
            cp.culprit = None;
            cp.below_interest = true;
            withdrawn.push((c, local_change(graph, ev, c).unwrap_or(cp.change)));
        }
    }
    withdrawn
}

/// The range's measured change, (bad − good) / good from the endpoints' runs, with its
/// standard error under `run_noise`. None while either endpoint is unmeasured.
fn range_change(graph: &CandidateGraph, ev: &Evidence, run_noise: f64) -> Option<(f64, f64)> {
    let (good, bad) = (ev.at(Point::Good), ev.at(Point::Candidate(graph.bad())));
    let (g, b) = (mean(good)?, mean(bad)?);
    if g == 0.0 {
        return None;
    }
    let n = |xs: &[f64]| xs.len().max(1) as f64;
    Some((
        (b - g) / g.abs(),
        run_noise * (1.0 / n(good) + 1.0 / n(bad)).sqrt(),
    ))
}

/// No commit is named whose own step is surely below the size of interest: in an outcome
/// of several changes such a change point keeps its candidates and size without a name
/// ([`withdraw_small_names`]); the one culprit of a `Found` is withdrawn where the range is
/// surely small too, or where its step surely falls short of the range's change.
fn unname_small_steps(
    graph: &CandidateGraph,
    ev: &Evidence,
    b: &Belief,
    settings: &Settings,
    conf: f64,
    decision: Decision,
    findings: &mut Findings,
) -> Decision {
    // A merge is named only once its merge base is measured where its parents differ.
    let named: Vec<usize> = match &decision {
        Decision::Done(Outcome::Found { culprit, .. }) => vec![*culprit],
        Decision::Done(Outcome::Changes { changes, .. }) => {
            changes.iter().filter_map(|cp| cp.culprit).collect()
        }
        _ => Vec::new(),
    };
    if let Some((k, base)) = named
        .iter()
        .find_map(|&k| base_to_measure(graph, ev, b, settings, k).map(|base| (k, base)))
    {
        if ev.pending.get(&base).copied().unwrap_or(0) > 0 {
            return Decision::Wait {
                phase: Phase::Verifying,
            };
        }
        // Runs that repeat exactly (the only metric this is asked for): two tell its level.
        let runs = 2;
        let base_name = match base {
            Point::Good => "the good commit".to_string(),
            Point::Candidate(c) => short(graph, c),
        };
        return Decision::Measure {
            phase: Phase::Verifying,
            requests: vec![Request::new(base, runs)],
            why: format!(
                "{} is a merge whose parents differ: measuring their merge base {base_name} to \
                 tell a step of its own from one its branch brings",
                short(graph, k)
            ),
        };
    }
    match decision {
        Decision::Done(Outcome::Changes {
            mut changes,
            settled,
            mut reason,
        }) if changes.len() > 1 => {
            let of_interest = smallest_of_interest(settings);
            let withdrawn = withdraw_small_names(graph, ev, b, of_interest, &mut changes);
            for (c, step) in &withdrawn {
                let _ = write!(
                    reason,
                    "; {} is not named: its own step ({:+.2}%) is below the {:.1}% this \
                     bisect looks for",
                    short(graph, *c),
                    100.0 * step,
                    100.0 * of_interest
                );
            }
            if !withdrawn.is_empty() {
                findings.changes = changes.clone();
            }
            Decision::Done(Outcome::Changes {
                changes,
                settled,
                reason,
            })
        }
        // The same for one culprit: a commit whose own step is surely below the size of
        // interest is not the culprit of a change this bisect looks for (a near-exact metric
        // that walks 0.1% a commit: bisect-sim named commits whose steps were +0.36% and
        // −0.26% as the one culprit of a +3% range, the second after a multi-change search
        // settled on it). Where the range is surely below that size too, nothing of
        // interest happened in it; otherwise the culprit is withdrawn only where its step
        // surely falls short of the range's too: a true +1% step read +0.73% over the range
        // and +0.47% at its commit after 1680 runs is still that commit's.
        Decision::Done(Outcome::Found {
            culprit,
            confidence,
        }) => {
            let of_interest = smallest_of_interest(settings);
            let run_noise = within_point_noise(ev, b).unwrap_or(b.noise);
            let z = UNNAMED_CULPRIT_Z;
            let range = range_change(graph, ev, run_noise);
            let small = step_below_interest(graph, ev, culprit, run_noise, of_interest, z);
            let range_small = range.is_some_and(|(change, se)| change.abs() + z * se < of_interest);
            let short_of_range = range.is_some_and(|(change, se)| {
                step_below_interest(graph, ev, culprit, run_noise, change.abs() - z * se, z)
            });
            if small && (range_small || short_of_range) {
                let step = local_change(graph, ev, culprit).unwrap_or(b.change);
                let range = range.map_or(b.change, |(change, _)| change);
                for cp in &mut findings.changes {
                    if cp.culprit == Some(culprit) {
                        cp.culprit = None;
                        cp.below_interest = true;
                    }
                }
                let why = format!(
                    "the most probable culprit {} moves the metric by {:+.2}% itself, below \
                     the {:.1}% this bisect looks for",
                    short(graph, culprit),
                    100.0 * step,
                    100.0 * of_interest
                );
                if range_small {
                    Decision::Done(Outcome::NotReproduced {
                        reason: format!(
                            "no change of interest: {why}, and so does the range ({:+.2}%); {}",
                            100.0 * range,
                            describe(graph, b)
                        ),
                    })
                } else {
                    Decision::Done(Outcome::Inconclusive {
                        reason: format!(
                            "{why} and short of the range's {:+.2}%: the change is not one \
                             commit's; {}",
                            100.0 * range,
                            describe(graph, b)
                        ),
                        candidates: smallest_set(&b.ranked, conf, 20),
                    })
                }
            } else {
                Decision::Done(Outcome::Found {
                    culprit,
                    confidence,
                })
            }
        }
        other => other,
    }
}

/// Probability that `k`'s step is only part of the range's change, with the point that says
/// so most and the endpoint it is held against. One step at k puts every parent of k at the
/// good level and k itself at the bad level; the alternative puts a parent at
/// good + f·(bad − good), or k at bad − f·(bad − good), f uniform on (0, 1) (another change
/// below k, on a branch k merges, or above k). Levels after drift and warm-up removal, with
/// the bisect's noise; prior [`PARTIAL_PRIOR`] for each. A second alternative puts the point
/// beyond its reference, f on (−[`OVERSHOOT_REACH`], −of_interest/|bad − good|) under
/// [`OVERSHOOT_PRIOR`]: k's step larger than the range's change, which a change of the
/// other sign elsewhere in the range has partly undone. A point whose partial part is
/// surely below `of_interest` (see [`PARTIAL_PRECISION`]) raises no doubt.
fn partial_step(
    graph: &CandidateGraph,
    k: usize,
    b: &Belief,
    of_interest: f64,
) -> (f64, Point, Point) {
    let bad_point = Point::Candidate(graph.bad());
    let none = (0.0, Point::Good, Point::Good);
    let (Some(&(good, n_good)), Some(&(bad, n_bad))) =
        (b.means.get(&Point::Good), b.means.get(&bad_point))
    else {
        return none;
    };
    // Means are relative to the median of all samples; the noise is relative to the good
    // level: both near 1 for the changes a bisect looks at. The means are the robust
    // (Student-t weighted) levels and their counts are weights, so their standard error is
    // the robust scale's (see `Belief::planning_noise`).
    let sigma = b.planning_noise * (1.0 + good).abs();
    let delta = bad - good;
    if sigma <= 0.0 || !sigma.is_finite() || delta == 0.0 {
        return none;
    }
    // (point, its reference endpoint, the reference's level and count, the direction in
    // which a partial level departs from the reference).
    let mut checks: Vec<(Point, Point, f64, f64, f64)> = graph
        .parents(k)
        .iter()
        .map(|&p| (Point::Candidate(p), Point::Good, good, n_good, delta))
        .collect();
    if k != graph.bad() {
        checks.push((Point::Candidate(k), bad_point, bad, n_bad, -delta));
    }
    let mut best = none;
    // A merge's parents are each a way for part of the change to come in (two changed lines
    // meeting at k): k's step is partial when any of them is, so their doubts add up, until
    // every parent holds [`MERGE_PARENT_SAMPLES`] of weight. Past that each parent's own
    // doubt decides: noise that never shrinks (outliers) would keep the sum of two priors
    // above the bar for ever.
    let merge = graph.parents(k).len() > 1;
    let mut clean_parents = 1.0;
    let mut parents_measured = true;
    for (point, reference, level, n_ref, towards) in checks {
        let Some(&(m, n_p)) = b.means.get(&point) else {
            continue;
        };
        // With the noise shown to differ between the sides, each check at its own side's
        // noise (a parent against the good level, k against the bad one): the pooled noise
        // made a noisier bad side read as a partial step.
        let side_sigma = match b.noise_ratio {
            Some(r2) if reference == Point::Good => sigma * (2.0 / (1.0 + r2)).sqrt(),
            Some(r2) => sigma * (2.0 * r2 / (1.0 + r2)).sqrt(),
            None => sigma,
        };
        let se = side_sigma * (1.0 / n_p + 1.0 / n_ref.max(1.0)).sqrt();
        let x = m - level;
        // Bayes factors of "partial" (f on (0, 1)) and "beyond" (f negative, below) against
        // "at the reference level", each on a grid of f.
        let steps = 64;
        let bf = |lo: f64, hi: f64| {
            let log0 = -(x / se).powi(2) / 2.0;
            let log_alt = log_sum_exp((0..steps).map(|i| {
                let f = lo + (hi - lo) * (i as f64 + 0.5) / steps as f64;
                -((x - f * towards) / se).powi(2) / 2.0 - (steps as f64).ln()
            }));
            (log_alt - log0).min(700.0).exp()
        };
        // Beyond by at least the size of interest: a smaller change of the other sign is not
        // one this bisect looks for, and an alternative that reaches down to 0 cannot be
        // told from "at the reference" without many more runs.
        let least = of_interest / towards.abs();
        let beyond = if least < OVERSHOOT_REACH {
            bf(-OVERSHOOT_REACH, -least)
        } else {
            0.0
        };
        // Each reading against "at the reference" under its own prior, the likelier one
        // counting: pooled into one alternative, their priors added up to a doubt that
        // runs without information did not clear (wild runs kept it above the bar for 300
        // runs of one bisect).
        let posterior = |prior: f64, bf: f64| {
            let odds = prior / (1.0 - prior) * bf;
            odds / (1.0 + odds)
        };
        // A point measured far past the size of interest that still reads a little off its
        // reference is noise that lingers, not a change: the posterior of "partial" falls
        // only as 1/√n at a fixed distance in standard errors, and a CV 5% bisect spent 1400
        // runs on k and the bad endpoint (600 each, 2.5 SE apart, 0.7% of a 3% step) and ran
        // out of its 2000 with the culprit at 1.0000.
        let settled = se <= PARTIAL_PRECISION * of_interest && x.abs() + se < of_interest;
        let post = if settled {
            0.0
        } else {
            posterior(PARTIAL_PRIOR, bf(0.0, 1.0)).max(posterior(OVERSHOOT_PRIOR, beyond))
        };
        if merge && reference == Point::Good {
            clean_parents *= 1.0 - post;
            parents_measured &= n_p >= MERGE_PARENT_SAMPLES;
        }
        if post > best.0 {
            best = (post, point, reference);
        }
    }
    if merge && !parents_measured && 1.0 - clean_parents > best.0 {
        best.0 = 1.0 - clean_parents;
    }
    best
}

/// Quantile proposals over a belief's culprit mass: `slots` commits at i/(slots+1), pending
/// measurements covering their quantile, preferring built commits when a build is dear.
#[expect(
    clippy::too_many_arguments,
    reason = "one call site per search; all inputs differ"
)]
fn propose(
    graph: &CandidateGraph,
    ev: &Evidence,
    b: &Belief,
    allowed: &[bool],
    slots: usize,
    runs: u32,
    skip_point: Option<usize>,
    build_in_runs: f64,
) -> Vec<Request> {
    let n = graph.len();
    let cand_mass = (1.0 - b.no_change).max(1e-300);
    let f = |c: usize| b.bad[c] / cand_mass;
    let mut busy: Vec<f64> = Vec::new();
    for (&p, &k) in &ev.pending {
        if let Point::Candidate(c) = p
            && c != graph.bad()
            && c < n
        {
            for _ in 0..k.div_ceil(runs).max(1) {
                busy.push(f(c));
            }
        }
    }
    let slots_total = slots + busy.len();
    let mut targets: Vec<f64> = (1..=slots_total)
        .map(|i| i as f64 / (slots_total + 1) as f64)
        .collect();
    for fb in busy {
        if let Some(j) = (0..targets.len())
            .min_by(|&x, &y| (targets[x] - fb).abs().total_cmp(&(targets[y] - fb).abs()))
        {
            targets.remove(j);
        }
    }
    let mut blocked = vec![false; n];
    for &c in &ev.untestable {
        if c < n {
            blocked[c] = true;
        }
    }
    // Where the belief's noise is mostly the commits' own moves (its runs scatter far less
    // than the belief reads: a near-exact metric whose level walks), a point measured a few
    // times already has its level pinned; more of its runs move the posterior only as far
    // as a misfit model lets them, one run at a time (bisect-sim, CV 0.1% with a walk of
    // 0.1% a commit: a bisect re-measured c538, c700 and c702 for 1,990 runs to the cap).
    // The search measures other commits there.
    if levels_pinned(ev, b) {
        for (p, v) in &ev.samples {
            if let Point::Candidate(c) = *p
                && c < n
                && v.len() >= PINNED_RUNS
            {
                blocked[c] = true;
            }
        }
    }
    // Built points marked by index: two ordered-map lookups (`Evidence::is_built`) for
    // each of 100,000 candidates were 5.5% of a large range's decision in B-tree search
    // alone (median 5.6 -> 4.3 ms with the assessments allocated once).
    let mut built = vec![false; n];
    for p in ev.built.iter().chain(ev.samples.keys()) {
        if let Point::Candidate(c) = *p
            && c < n
            && ev.is_built(*p)
        {
            built[c] = true;
        }
    }
    for (p, &k) in &ev.pending {
        if let Point::Candidate(c) = *p
            && c < n
            && k > 0
        {
            blocked[c] = true;
        }
    }
    // A built commit this close to a target wins over an unbuilt nearer one when a build
    // costs more than the runs it would take.
    let built_slack = if build_in_runs > 3.0 * runs as f64 {
        0.1
    } else {
        0.0
    };
    let mut best: Vec<Option<(f64, usize)>> = vec![None; targets.len()];
    if !targets.is_empty() {
        for (c, &skip) in blocked.iter().enumerate() {
            if c == graph.bad() || skip || Some(c) == skip_point {
                continue;
            }
            // Outside this range's commits, a point can still split the mass (below range:
            // any non-descendant), so `allowed` only limits culprits, not points.
            let _ = allowed;
            let fc = f(c);
            let bonus = if built[c] { built_slack } else { 0.0 };
            let j = targets.partition_point(|&t| t < fc);
            for j in [j.saturating_sub(1), j.min(targets.len() - 1)] {
                let dist = ((targets[j] - fc).abs() - bonus).max(0.0);
                let raw = (targets[j] - fc).abs();
                if best[j].is_none_or(|(bd, _)| dist < bd) && raw < 0.5 {
                    best[j] = Some((dist, c));
                }
            }
        }
    }
    let mut out: Vec<Request> = Vec::new();
    for (_, c) in best.into_iter().flatten() {
        // A point only helps if the culprit mass is on both sides of it.
        if f(c) > 1e-9
            && f(c) < 1.0 - 1e-9
            && out.len() < slots
            && !out.iter().any(|r| r.point == Point::Candidate(c))
        {
            out.push(Request::new(Point::Candidate(c), runs));
        }
    }
    out
}

/// Runs a request asks for at a new point: enough for (z / d)² noise units of evidence, z
/// growing with the cost of a build so that a dear build is not wasted on too few runs.
fn runs_for(d: f64, build_in_runs: f64, rpr: u32) -> u32 {
    let z = (RUNS_Z * (1.0 + build_in_runs).powf(0.25)).clamp(RUNS_Z, 2.5);
    ((z / d.max(1e-3)).powi(2).ceil() as u32).clamp(1, rpr.max(1))
}

pub(crate) fn decide(graph: &CandidateGraph, ev: &Evidence, settings: &Settings) -> Explained {
    let conf = settings.confidence.clamp(0.5, 1.0 - 1e-9);
    let n = graph.len();
    let mut allowed: Vec<bool> = if settings.first_parent {
        graph.first_parent_chain()
    } else {
        vec![true; n]
    };
    let prep = Prepared::new(graph, ev);
    // A merge that only combines what its branches bring is no culprit: the step is on a
    // branch, and the search goes on there. (At merge level a merge stands for its branch.)
    // Only for an exact metric, where the four levels are read without error: with noise,
    // or with commits' own levels (code layout, four of them in the sum), it named a second
    // change point beside the culprit in a near-exact layout world, and cost near-exact
    // walks 5–15% more runs for no wrong name saved.
    if !settings.first_parent && prep.runs_exact {
        for m in merges_without_a_step(graph, ev, smallest_of_interest(settings)) {
            allowed[m] = false;
        }
    }
    let mut findings = Findings {
        verification_alpha: VERIFY_ALPHA,
        ..Findings::default()
    };
    let good = ev.at(Point::Good);
    let bad = ev.at(Point::Candidate(graph.bad()));
    if let (Some(g), Some(x)) = (mean(good), mean(bad))
        && g != 0.0
    {
        findings.change = Some((x - g) / g.abs());
        let sd = |v: &[f64], m: f64| {
            (v.iter().map(|y| (y - m).powi(2)).sum::<f64>() / (v.len().max(2) - 1) as f64).sqrt()
        };
        let (sg, sb) = (sd(good, g), sd(bad, x));
        if good.len() >= 2 && bad.len() >= 2 {
            findings.noise = Some(((sg * sg + sb * sb) / 2.0).sqrt() / g.abs());
            let se = (sg * sg / good.len() as f64 + sb * sb / bad.len() as f64).sqrt();
            let t = if se > 0.0 {
                (x - g) / se
            } else if x != g {
                (x - g).signum() * f64::INFINITY
            } else {
                0.0
            };
            findings.direction_contradicted = match settings.direction {
                Some(Direction::Increase) => t < -DIRECTION_T,
                Some(Direction::Decrease) => t > DIRECTION_T,
                None => false,
            };
        }
    }
    // A direction the endpoints contradict is dropped, not kept as a prior that only one
    // sign can meet: with it, the posterior of a clear −3% range under "increase" swung
    // between "no change" and the contrary change as runs came in, and 17 of 100 bisects
    // ended "no change between the endpoints" (P(no change) 0.95, the endpoints 3.5%
    // apart) where the other 83 found the commit. The findings say the hint was
    // contradicted; the report and the dashboard show it.
    let undirected;
    let settings = if findings.direction_contradicted {
        undirected = Settings {
            direction: None,
            ..settings.clone()
        };
        &undirected
    } else {
        settings
    };
    let b = belief(graph, &prep, settings, &allowed, NO_CHANGE_PRIOR, None);
    let assessments = assess(graph, ev, &b, conf);
    let decision = decide_with(graph, &prep, settings, &allowed, &b, conf, &mut findings);
    let decision = unname_small_steps(graph, ev, &b, settings, conf, decision, &mut findings);
    if findings.prediction.is_none()
        && matches!(decision, Decision::Done(Outcome::Inconclusive { .. }))
        && b.samples > 0
    {
        // A bisect that ran out while its endpoints were still being topped up: what more
        // would cost is still the question (for its reason and for the budget rule).
        findings.prediction = Some(predict(&b, ev.costs, conf, settings));
    }
    if findings.changes.is_empty() && b.no_change < 0.5 {
        findings.changes = vec![change_point(
            graph,
            ev,
            &b,
            conf,
            matches!(decision, Decision::Done(Outcome::Found { .. })),
        )];
    }
    Explained {
        decision,
        assessments,
        findings,
    }
}

fn decide_with(
    graph: &CandidateGraph,
    prep: &Prepared,
    settings: &Settings,
    allowed: &[bool],
    b: &Belief,
    conf: f64,
    findings: &mut Findings,
) -> Decision {
    let ev = prep.ev;
    let n = graph.len();
    let rpr = settings.runs_per_request.max(1);
    let idle = settings.idle_hosts.max(1) as usize;
    let spent = ev.runs_spent();
    let in_flight = ev.runs_pending();
    let budget = settings.max_runs.saturating_sub(spent + in_flight);
    let pending_at = |p: Point| ev.pending.get(&p).copied().unwrap_or(0);
    let bad_point = Point::Candidate(graph.bad());
    let endpoints = [Point::Good, bad_point];
    let top = |limit| smallest_set(&b.ranked, conf, limit);
    let build_in_runs = ev.costs.build_in_runs();
    let prediction = predict(b, ev.costs, conf, settings);
    let more = |p: &Prediction| match p.machine_secs {
        Some(s) => format!(
            "about {} more runs, {} builds and {:.0} s of machine time would be needed",
            p.runs, p.builds, s
        ),
        None => format!(
            "about {} more runs and {} builds would be needed",
            p.runs, p.builds
        ),
    };
    // The step as the belief sees it and as the endpoints measure it, both below the
    // smallest change this bisect looks for.
    let of_interest = smallest_of_interest(settings);
    // The endpoints' step and its standard error (a step below the size of interest by one
    // of these ends the endpoints' search for a change early: at CV 5% a real +3% step
    // measured after 50 runs a side comes out below 1% about once in 40 bisects).
    let (endpoints_change, endpoints_se) =
        match (b.means.get(&Point::Good), b.means.get(&bad_point)) {
            (Some(&(g, n_g)), Some(&(x, n_b)))
                if (1.0 + g).abs() > 0.0 && n_g > 0.0 && n_b > 0.0 =>
            {
                (
                    (x - g) / (1.0 + g),
                    b.noise * (1.0 / n_g + 1.0 / n_b).sqrt(),
                )
            }
            _ => (f64::INFINITY, f64::INFINITY),
        };
    let below_interest = b.change.abs().max(endpoints_change.abs()) < of_interest;
    let surely_below_interest =
        below_interest && endpoints_change.abs() + endpoints_se < of_interest;
    // `within`: "within the run cap of 400", `ended`: "run cap of 400 reached".
    // `small`: the step counts as below the size of interest.
    let give_up = |within: &str, ended: &str, small: bool| {
        // A range whose measured step is below the smallest change the prior looks for, and
        // where "no change" still holds some probability, did not reproduce a change of
        // interest: calling it inconclusive would ask for runs that cannot find a commit
        // for a step that size (the A/A ranges that ran out all had |step| 0.6–1.0% at CV
        // 2%, each predicting 2–10× the cap still to go).
        if small && b.no_change >= OF_INTEREST_FLOOR {
            return Decision::Done(Outcome::NotReproduced {
                reason: format!(
                    "no change of interest {within}: the measured change {:+.2}% is below the \
                     {:.1}% this bisect looks for, and {}; {}",
                    100.0 * b.change,
                    100.0 * of_interest,
                    more(&prediction),
                    describe(graph, b)
                ),
            });
        }
        Decision::Done(Outcome::Inconclusive {
            reason: format!("{ended}; {}; {}", more(&prediction), describe(graph, b)),
            candidates: top(20),
        })
    };
    let run_out = |extra: &str| {
        let cap = settings.max_runs;
        give_up(
            &format!("within the run cap of {cap}{extra}"),
            &format!("run cap of {cap} reached{extra}"),
            below_interest,
        )
    };
    // A change the bad endpoint shows in some runs only: each commit the search measures gets
    // the runs that show it (`intermittent`), a few requests' worth at most.
    let to_show = b.to_show.map(|k| k.min(4 * rpr));
    let measure = |phase, requests: Vec<Request>, why: String| {
        let mut requests = deploy_fresh(requests, ev, b.boot_ratio);
        if let Some(k) = to_show {
            for r in requests
                .iter_mut()
                .filter(|r| r.pair_with.is_none() && !endpoints.contains(&r.point))
            {
                let have = ev.at(r.point).len() as u32 + pending_at(r.point);
                r.runs = r.runs.max(k.saturating_sub(have));
            }
        }
        let requests = cap(requests, budget);
        if requests.is_empty() {
            if in_flight == 0 {
                return run_out("");
            }
            return Decision::Wait { phase };
        }
        Decision::Measure {
            phase,
            requests,
            why,
        }
    };

    // "No change" may end the bisect at a lower bar than a culprit: stopping early here costs
    // a missed change at worst, never a wrong culprit (the simulator checks the rate).
    let not_reproduced_at = (1.0 - NOT_REPRODUCED_FACTOR * (1.0 - conf)).max(0.9);
    // Endpoints that have repeated one value exactly are a deterministic metric's A/A range,
    // or a coarse metric's runs that happened to land on one step: three runs a side all
    // alike ended a real +3% change at a resolution of 4% and CV 2% as "no change" in 1% of
    // bisect-sim's trials. A few more runs a side tell the two apart.
    let exact_unearned = noiseless(b)
        && endpoints
            .iter()
            .any(|&p| ev.at(p).len() < EXACT_NO_CHANGE_RUNS);
    if b.no_change >= not_reproduced_at && !exact_unearned {
        // Under a direction hint the prior holds changes of that sign only: "no change" is
        // then "no increase" (or decrease), whatever the endpoints show the other way.
        let what = match settings.direction {
            Some(Direction::Increase) => "no increase",
            Some(Direction::Decrease) => "no decrease",
            None => "no change",
        };
        let reason = format!("{what} between the endpoints: {}", describe(graph, b));
        return Decision::Done(Outcome::NotReproduced { reason });
    }
    if ev.untestable.contains(&graph.bad()) {
        let reason = "the bad commit cannot be built or booted: nothing to reproduce".to_string();
        return Decision::Done(Outcome::Inconclusive {
            reason,
            candidates: vec![],
        });
    }
    if spent >= settings.max_runs {
        return run_out("");
    }

    let d = if b.noise > 0.0 {
        (b.change / b.noise).abs()
    } else {
        10.0
    };
    let runs = runs_for(d, build_in_runs, rpr);

    // Reproducing: both endpoints measured, and a change more likely than not.
    let min_end = rpr.min(3) as usize;
    let n_end = |p: Point| ev.at(p).len();
    let endpoint_runs: u32 = endpoints
        .iter()
        .map(|&p| n_end(p) as u32 + ev.failed.get(&p).copied().unwrap_or(0))
        .sum();
    // What the endpoints may spend on "is there a change at all" follows the budget, but not
    // past a fixed cap: a higher ceiling is there for hard searches, not for A/A ranges.
    let endpoint_cap = settings.max_runs.min(ENDPOINT_RUNS_CAP);
    let endpoints_spent = endpoint_runs >= endpoint_cap / 4;
    // A change that is more likely than not is searched for once half of that went to the
    // endpoints.
    let unsure =
        b.no_change > 0.5 || (b.no_change > REPRODUCED && endpoint_runs < endpoint_cap / 2);
    // A metric that repeats itself exactly at one endpoint needs no more than a few runs at
    // the other.
    // Only while no point's runs have differed: a metric whose values come in coarse steps
    // repeats itself at one endpoint now and then (three runs of 104 at a resolution of 4%
    // and CV 2%) while the other varies.
    let exact = b.runs_exact && endpoints.iter().any(|&p| ev.at(p).len() >= 2);
    // Each endpoint is measured in two deployments before the search leans on it: runs of one
    // boot share its level, and until a point has two deployments nothing shows how far a
    // boot's level wanders. With one boot an endpoint, a per-boot level of 3% at CV 2% read a
    // +3% step as +6% (each endpoint's boot off by 1.5%), and the search followed boots.
    // Where the runner does not deploy again (one that keeps what it booted and ignores
    // `fresh_deploy`), twice a request's runs end the wait.
    let one_deployment = |p: Point| {
        !exact && n_end(p) < 2 * rpr as usize && crate::boots::count(ev, p).is_some_and(|d| d < 2)
    };
    if endpoints
        .iter()
        .any(|&p| n_end(p) < min_end || one_deployment(p))
        || unsure
    {
        // A step the endpoints do not place surely below the size of interest gets twice the
        // runs before "no change" is concluded from weak evidence (at CV 5% a +2% step
        // measured after 100 runs once ended a real +3% change as not reproduced).
        if endpoints.iter().all(|&p| n_end(p) >= min_end)
            && endpoints_spent
            && b.no_change > 0.5
            && (surely_below_interest || endpoint_runs >= endpoint_cap / 2)
        {
            let reason = format!(
                "no change of interest after {endpoint_runs} runs of the endpoints: {}",
                describe(graph, b)
            );
            return Decision::Done(Outcome::NotReproduced { reason });
        }
        // One endpoint measured, the other still to come (a slow build, a busy host).
        let waiting = endpoints.iter().any(|&p| n_end(p) < min_end)
            && endpoints.iter().any(|&p| n_end(p) >= min_end);
        let mut order = endpoints;
        order.sort_by_key(|&p| n_end(p));
        // While one endpoint is still unmeasured, the other is not measured again: its
        // samples decide nothing until the first arrives. Idle hosts build the commits the
        // search would ask for first instead.
        // A first deployment takes a few runs and the second the rest of a request, so two
        // deployments cost no more runs than one did.
        let end_runs = |p: Point| {
            if exact || n_end(p) == 0 {
                min_end as u32
            } else if one_deployment(p) {
                rpr.saturating_sub(n_end(p) as u32).max(2)
            } else {
                rpr
            }
        };
        // Once both endpoints run, and more than one host is in play, they are measured as
        // interleaved couples on one host each: a host's own level then falls on both
        // sides alike even when the same hosts keep taking the same commit (a build
        // cache), and couples on several hosts show how the hosts differ. With hosts 2%
        // apart at CV 2% and each endpoint always on hosts of its own, 10.5% of
        // bisect-sim's 4-host bisects ended without a culprit. With one host, blocks of
        // runs cost the same and tell a warm-up apart better.
        let several_hosts = idle >= 2 || {
            let mut seen = ev.taken.values().flatten().map(|t| t.host);
            let first = seen.next();
            seen.any(|h| Some(h) != first)
        };
        let couples = several_hosts
            && !exact
            && endpoints
                .iter()
                .all(|&p| n_end(p) >= 1 && pending_at(p) == 0);
        // When all that is missing is an endpoint's second deployment, one couple of the rest
        // of a request's runs brings it (two couples of half a request each cost 8 more runs
        // a bisect at 8 hosts).
        let second_only = !unsure && endpoints.iter().all(|&p| n_end(p) >= min_end);
        let (couple_count, couple_runs) = if second_only {
            let rest = endpoints.iter().map(|&p| end_runs(p)).min().unwrap_or(rpr);
            (1, rest)
        } else {
            (idle.min(2), rpr.div_ceil(2))
        };
        let mut requests: Vec<Request> = if couples {
            (0..couple_count)
                .map(|_| Request::paired(bad_point, Point::Good, couple_runs))
                .collect()
        } else {
            order
                .iter()
                .filter(|&&p| pending_at(p) == 0 && !(waiting && n_end(p) >= min_end))
                .map(|&p| Request::new(p, end_runs(p)))
                .take(idle)
                .collect()
        };
        let (k, pk) = (0..n)
            .map(|c| (c, b.p[c]))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .expect("non-empty graph");
        let verify_from = (1.0 - VERIFY_START * (1.0 - conf)).max(0.5).min(conf);
        let settled_search = pk >= verify_from && !ev.untestable.contains(&k);
        if (waiting || second_only) && requests.len() < idle && settled_search {
            // The search already points at one commit: its verification against the parent
            // needs no endpoint, so it can run while the endpoint builds, and nothing more
            // runs ahead of the endpoints once it has its pairs. The search's own proposal
            // here measured the culprit and its parent one run a deployment for as long as an
            // endpoint's second deployment took to build (18 runs of a 49-run end-to-end
            // bisect whose good commit builds in 12 s).
            let (parent, have) = verification(graph, ev, b, allowed, k);
            if have.len() < min_pairs(b)
                && pending_at(Point::Candidate(k)) == 0
                && pending_at(parent) == 0
            {
                requests.push(Request::paired(
                    Point::Candidate(k),
                    parent,
                    verify_chunk(b, have.len()),
                ));
            }
        } else if (waiting || second_only) && requests.len() < idle {
            // Hosts the endpoints do not need build and measure what the search would ask
            // for first (a change is already likely when only a second deployment is missing).
            let ahead = propose(
                graph,
                ev,
                b,
                allowed,
                idle - requests.len(),
                runs.min(2),
                None,
                build_in_runs,
            );
            requests.extend(ahead);
        }
        let why = format!(
            "reproducing the change at the endpoints: {}",
            describe(graph, b)
        );
        return measure(Phase::Reproducing, requests, why);
    }
    findings.prediction = Some(prediction);

    // Verifying: one commit holds the target; confirm it against its parent on one host.
    let (k, pk) = (0..n)
        .map(|c| (c, b.p[c]))
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .expect("non-empty graph");
    // Verification starts a little before the target: culprit-vs-parent pairs are also the
    // runs that best settle the last doubt (is the parent good, is the culprit bad), so the
    // end of the search and the verification share them.
    let verify_from = (1.0 - VERIFY_START * (1.0 - conf)).max(0.5).min(conf);
    // A range that needs several times what any budget of this bisect may spend ends now,
    // saying what it would cost, rather than spend the ceiling and end the same way. The
    // prediction is the engine's mean cost; one bisect that finishes at a third of it is
    // rare. Not once one commit is being verified: the end is then near whatever it says.
    let ceiling = settings.ceiling.unwrap_or(0).max(settings.max_runs);
    // Both questions are beyond it: which commit (the prediction), and whether there is a
    // change of interest at all ([`NO_CHANGE_RUNS`]).
    let to_rule_out = NO_CHANGE_RUNS * (b.noise / of_interest).powi(2);
    if pk < verify_from
        && endpoint_runs >= endpoint_cap / ENDPOINTS_BEFORE_CEILING
        && f64::from(prediction.runs) > BEYOND_CEILING * f64::from(ceiling)
        && to_rule_out > BEYOND_CEILING * f64::from(ceiling)
    {
        let noise = format!("{:.1}%", 100.0 * b.noise);
        return give_up(
            &format!("that the ceiling of {ceiling} runs could settle at the noise of {noise}"),
            &format!(
                "ended after {spent} runs: the ceiling of {ceiling} cannot settle this range at \
                 the noise of {noise}: ruling out a change of {:.1}% takes about {:.0} runs, \
                 and naming a commit more",
                100.0 * of_interest,
                to_rule_out.ceil()
            ),
            // At such noise a step measured under the size of interest is far from surely
            // under it: "no change of interest" needs the endpoints to place it there.
            surely_below_interest,
        );
    }
    if pk >= verify_from && ev.untestable.contains(&k) {
        if pk >= conf {
            let reason = format!(
                "the most probable culprit {} ({pk:.4}) cannot be built or booted, so it cannot be \
                 verified against its parent; {}",
                short(graph, k),
                describe(graph, b)
            );
            return Decision::Done(Outcome::Inconclusive {
                reason,
                candidates: top(20),
            });
        }
    } else if pk >= verify_from {
        let (parent, pairs) = verification(graph, ev, b, allowed, k);
        let need = verify_pairs(b);
        let e = evalue(ev, b, &pairs, graph.bad());
        findings.verification_evalue = Some(e);
        let verdict = format!(
            "{} pairs against {}: e-value {:.3} (passes at {:.0})",
            pairs.len(),
            match parent {
                Point::Good => "the good commit".to_string(),
                Point::Candidate(c) => short(graph, c),
            },
            e,
            1.0 / VERIFY_ALPHA
        );
        let verified = pk >= conf && pairs.len() >= min_pairs(b) && e >= 1.0 / VERIFY_ALPHA;
        if verified {
            // The predictive check: is there a further step once this one is fitted? Its
            // culprit may be anywhere (also on a branch merged above k); when there is one,
            // each change point is judged given the other, so a commit between two steps
            // that the one-step model preferred is not kept.
            let neutral = Settings {
                direction: None,
                magnitude: None,
                ..settings.clone()
            };
            let without = |x: usize| -> Vec<bool> {
                let mut a = allowed.to_vec();
                a[x] = false;
                a
            };
            let given = |x: usize| {
                belief(
                    graph,
                    prep,
                    &neutral,
                    &without(x),
                    SIDE_NO_CHANGE_PRIOR,
                    Some(&descendants(graph, x)),
                )
            };
            let second = given(k);
            let one_step = || {
                let mut cp = change_point(graph, ev, b, conf, true);
                cp.change = local_change(graph, ev, k).unwrap_or(cp.change);
                cp
            };
            let mut requests: Vec<Request> = Vec::new();
            // k must hold the target also when a second step may exist: P(k is a change
            // point) ≈ P(no further step)·P(k) + Σ P(second at k₂)·P(k | k₂), summed over
            // the likeliest k₂ and counting the rest as against k (a commit between two
            // steps would not survive them).
            // A second step at a commit no measured point tells from k (the same points
            // descend from both) is k's own step seen twice: it leaves k as it is.
            let twin_sig = second.signature[k];
            let k2 = second.ranked.first().map_or(k, |t| t.0);
            let first = given(k2);
            // A second step the data do not favour (posterior below its prior) fits like no
            // further step, so k keeps its probability under it; the favoured ones are
            // fitted once per set of measured points they explain (the likeliest first),
            // and any left over count against k.
            let allowed_second = allowed.iter().filter(|&&a| a).count().saturating_sub(1);
            let prior_each = (1.0 - SIDE_NO_CHANGE_PRIOR) / allowed_second.max(1) as f64;
            let mut survives = second.no_change * pk;
            let mut favoured: Vec<(usize, f64)> = Vec::new();
            for (c2, &p2) in second.p.iter().enumerate() {
                if p2 <= prior_each || second.signature[c2] == twin_sig {
                    survives += p2 * pk;
                } else {
                    favoured.push((c2, p2));
                }
            }
            favoured.sort_by(|a, b| b.1.total_cmp(&a.1));
            let mut fitted: HashMap<u32, f64> = HashMap::new();
            for (c2, p2) in favoured {
                if survives >= conf {
                    break;
                }
                let sig = second.signature[c2];
                let at_k = match fitted.get(&sig) {
                    Some(&x) => x,
                    None if fitted.len() < SURVIVAL_TERMS => {
                        let x = if c2 == k2 { first.p[k] } else { given(c2).p[k] };
                        fitted.insert(sig, x);
                        x
                    }
                    // Past the likeliest ones, a second step is no more of a threat to k
                    // than the worst of those fitted (they are the ones the data favour
                    // most): counting it as certainly against k left a clean culprit
                    // waiting forever behind a diffuse "maybe a second step somewhere".
                    None => fitted.values().copied().fold(1.0, f64::min),
                };
                survives += p2 * at_k;
            }
            let holds = survives >= conf;
            // One step at k puts k's parents at the good level and k at the bad one. A
            // parent, or k, measured between the two levels (two changed lines meeting at
            // a merge, another change below or above) means k's step is only part of the
            // range's change, so k alone is not the answer: that point and its endpoint are
            // measured again, and the search goes on where a further step would be.
            let (p_partial, worst, reference) = partial_step(graph, k, b, of_interest);
            let partial_ok = p_partial <= PARTIAL_DOUBT;
            if second.no_change >= SIDE_CLEAR && holds && partial_ok {
                findings.changes = vec![one_step()];
                return Decision::Done(Outcome::Found {
                    culprit: k,
                    confidence: pk,
                });
            }
            let proposals = |bl: &Belief, requests: &mut Vec<Request>| {
                let ds = if bl.noise > 0.0 {
                    (bl.change / bl.noise).abs()
                } else {
                    10.0
                };
                let r = runs_for(ds, build_in_runs, rpr);
                let slots = idle.saturating_sub(requests.len()).max(1);
                for q in propose(graph, ev, bl, allowed, slots, r, None, build_in_runs) {
                    if !requests.iter().any(|x| x.point == q.point) {
                        requests.push(q);
                    }
                }
            };
            if second.no_change > MISFIT {
                // Unsure whether another step exists (search for it where it would be), or
                // sure enough but k does not survive it (search where the first step would
                // then be).
                let doubt = if second.no_change >= SIDE_CLEAR && partial_ok {
                    &first
                } else {
                    &second
                };
                if !partial_ok {
                    let mut order = [reference, worst];
                    order.sort_by_key(|&p| n_end(p));
                    for p in order {
                        let untestable =
                            matches!(p, Point::Candidate(c) if ev.untestable.contains(&c));
                        if pending_at(p) == 0 && requests.len() < idle && !untestable {
                            requests.push(Request::new(p, runs.max(2)));
                        }
                    }
                }
                // When no second step is in sight and the only doubt is whether k's step is
                // the whole change, the partial check's two points settle it; searching the
                // range for the rest of the change on every spare host (as a likely partial
                // step deserves) cost w = 8 bisects 200 runs of 320 in bisect-sim.
                if second.no_change < SIDE_CLEAR || p_partial > PARTIAL_SEARCH {
                    proposals(doubt, &mut requests);
                }
                // k holds whatever a further step would be, and the search for one only
                // re-measures points already measured well: more runs there cannot settle a
                // doubt that noise keeps alive (a 7-commit range with slow runs now and then
                // spent 356 of 400 runs this way in bisect-sim, then ran out).
                let well_measured = |r: &Request| ev.at(r.point).len() >= CHECK_SETTLED_SAMPLES;
                if holds && partial_ok && !requests.is_empty() && requests.iter().all(well_measured)
                {
                    findings.changes = vec![one_step()];
                    return Decision::Done(Outcome::Found {
                        culprit: k,
                        confidence: pk,
                    });
                }
                let (parent, have) = verification(graph, ev, b, allowed, k);
                if requests.is_empty()
                    && pending_at(Point::Candidate(k)) == 0
                    && pending_at(parent) == 0
                {
                    // Nothing left to split: more couples of k and its parent pin both
                    // levels, which is what the doubt is about.
                    let chunk = verify_chunk(b, have.len());
                    requests.push(Request::paired(
                        Point::Candidate(k),
                        parent,
                        chunk.min(2 * rpr),
                    ));
                }
                requests.truncate(idle);
                if budget == 0 || cap(requests.clone(), budget).is_empty() {
                    if in_flight > 0 {
                        return Decision::Wait {
                            phase: Phase::Verifying,
                        };
                    }
                    if holds && partial_ok {
                        findings.changes = vec![one_step()];
                        return Decision::Done(Outcome::Found {
                            culprit: k,
                            confidence: pk,
                        });
                    }
                    return run_out(", and a second change would move the first");
                }
                let why = format!(
                    "checking that one change explains the range around {}: P(no further change) {:.3}, P({0} with a second step) {:.4}, P(the step at {0} is not the whole change: part of it, or beyond it) {:.3}; {}",
                    short(graph, k),
                    second.no_change,
                    survives,
                    p_partial,
                    describe(graph, b)
                );
                return measure(Phase::Verifying, requests, why);
            }
            findings.misfit = true;
            // Two steps: each change point given the other.
            let k1 = first.ranked.first().map_or(k, |t| t.0);
            let mut pair = [(k1, first), (k2, second)];
            pair.sort_by_key(|(c, _)| *c);
            let mut settled = true;
            let mut list: Vec<ChangePoint> = Vec::new();
            for (c, bl) in &pair {
                let (c, pc) = (*c, bl.ranked.first().map_or(0.0, |t| t.1));
                let (parent, cpairs) = verification(graph, ev, bl, allowed, c);
                let ec = evalue(ev, bl, &cpairs, graph.bad());
                let ok = pc >= conf && cpairs.len() >= min_pairs(bl) && ec >= 1.0 / VERIFY_ALPHA;
                settled &= ok;
                if !ok {
                    if pc >= verify_from && !ev.untestable.contains(&c) {
                        if pending_at(Point::Candidate(c)) == 0 && pending_at(parent) == 0 {
                            let chunk = verify_chunk(bl, cpairs.len());
                            requests.push(Request::paired(
                                Point::Candidate(c),
                                parent,
                                chunk.min(2 * rpr),
                            ));
                        }
                    } else {
                        proposals(bl, &mut requests);
                    }
                }
                let mut cp = change_point(graph, ev, bl, conf, ok);
                cp.change = local_change(graph, ev, c).unwrap_or(cp.change);
                list.push(cp);
            }
            // A change point whose step is smaller than the smallest change this bisect
            // looks for (measured against the parent it differs from least, by one standard
            // error of the runs' own noise) is not a culprit of it, however sure its place:
            // a near-exact metric (instruction counts) moves a little at many commits, and
            // each of those moves is as certain as the change the bisect was asked about.
            // The other change point, once settled given it, is the answer. bisect-sim, +3%
            // step, commits with levels of their own, 100 trials (wrong / mean runs, before
            // → after): CV 0 with 0.3% a commit 11% / 51.3 → 0 / 26.2; CV 0.1% with 0.2%
            // 10% / 41.0 → 0 / 34.8; CV 0.2% with 0.3% 12% / 67.9 → 5% / 38.1. At three
            // standard errors, moves of 0.87–0.96% measured to ±0.1–0.16% stayed named.
            {
                // The runs' own noise, not the belief's: in an exact metric the commits'
                // own levels are most of what the belief reads as noise.
                let run_noise = within_point_noise(ev, b).unwrap_or(b.noise);
                let small: Vec<bool> = pair
                    .iter()
                    .map(|(c, bl)| {
                        bl.change.abs() < of_interest
                            && step_below_interest(
                                graph,
                                ev,
                                *c,
                                run_noise,
                                of_interest,
                                SMALL_CHANGE_Z,
                            )
                    })
                    .collect();
                if let [first_small, second_small] = small[..]
                    && first_small != second_small
                {
                    let keep = usize::from(first_small);
                    let cp = list[keep].clone();
                    // An unsettled small one is dropped only when the metric is exact (every
                    // point's runs repeat one value): more runs of its commits cannot settle
                    // it there, and the search asked for them one at a time (an exact metric
                    // that moves 0.01% a commit: 302 runs a bisect, 62 with this). Elsewhere
                    // its belief may still be moving, and the other one was settled given a
                    // partner that is not yet the true one (CV 0.1%, two +1.5% steps, read
                    // against the belief's noise instead: a −0.16% partner at its first
                    // guess, and a merge of both steps named alone).
                    let exact_metric = run_noise < 1e-9;
                    if let Some(culprit) = cp.culprit
                        && (list[1 - keep].culprit.is_some() || exact_metric)
                    {
                        findings.misfit = false;
                        findings.changes = vec![cp.clone()];
                        return Decision::Done(Outcome::Found {
                            culprit,
                            confidence: cp.probability,
                        });
                    }
                }
            }
            // Once both hold, each must also hold when every commit may run at a level of
            // its own: a second "step" that one heavily measured commit shows is as much
            // that commit's layout (see [`commit_levels_weighed`]). Where only that keeps
            // it, more runs of its couple cannot help: another commit of the stretch that
            // carries one change and not the other is measured, since a step persists in
            // every commit of it and a commit's own level does not. (Checked before the
            // other change point was found, it spent the budget on stretches that were
            // not yet there: both of two +1.5% steps named in 76% of trials, not 84.5%.)
            // Each is checked given the other one named (the one-step check above held the
            // second change point given the likeliest single one, which can be a merge that
            // both changes reach).
            let named = [pair[0].0, pair[1].0];
            // A change point other than k that fails the check with a stretch of one commit
            // (two adjacent "steps": a level up at c and back at its child: that one
            // commit's own level, which no measurement can tell from a step), or that the
            // commit-level belief given k finds no further change at all, is dropped: k,
            // verified as one change, is the answer. Kept, such pairs ended with neither
            // named, or measured commit after commit of a long stretch until the budget
            // ran out (bisect-sim, layout 0.5% a commit on four hosts: 9.5% of bisects
            // without a culprit, 378.6 runs; 7.5% and 349.5 since).
            let mut lone = false;
            if settled {
                for (((c, bl), cp), other) in
                    pair.iter().zip(list.iter_mut()).zip([&named[1], &named[0]])
                {
                    let carry_other = descendants(graph, *other);
                    let mixed = belief_with_commit_levels(
                        graph,
                        prep,
                        &neutral,
                        &without(*other),
                        SIDE_NO_CHANGE_PRIOR,
                        Some(&carry_other),
                    );
                    if mixed.p[*c] >= conf {
                        continue;
                    }
                    settled = false;
                    let between = stretch(&descendants(graph, *c), &carry_other);
                    lone |= *c != k
                        && (between.len() <= 1 || (*other == k && mixed.no_change >= SIDE_CLEAR));
                    *cp = ChangePoint {
                        culprit: None,
                        ..change_point(graph, ev, bl, conf, false)
                    };
                    cp.change = local_change(graph, ev, *c).unwrap_or(cp.change);
                    // Enough runs that the largest κ of the grid shows against the run
                    // noise (κ·W ≥ 2): a commit of two runs says little about whether
                    // commits differ beyond their noise.
                    let own = (2.0 / COMMIT_RATIOS[COMMIT_RATIOS.len() - 1].0) as u32;
                    if let Some(q) = stretch_point(ev, &between, own as usize)
                        && pending_at(Point::Candidate(q)) == 0
                    {
                        let ds = if bl.noise > 0.0 {
                            (bl.change / bl.noise).abs()
                        } else {
                            10.0
                        };
                        let have = ev.at(Point::Candidate(q)).len() as u32;
                        let r = runs_for(ds, build_in_runs, rpr).max(own.saturating_sub(have));
                        requests.push(Request::new(Point::Candidate(q), r));
                        // What is left is at least this stretch's commit: the prediction
                        // says so, so a budget set for one change does not end a bisect
                        // that has both (see `budget`: a bisect close to its end may
                        // finish past its budget, under the cap).
                        if let Some(p) = findings.prediction.as_mut() {
                            p.runs = p.runs.max(r);
                            p.builds = p.builds.max(1);
                        }
                    }
                }
            }
            // ... when k holds with commits' own levels too: two adjacent commits whose
            // levels sit one near each side leave the step at either of them (without
            // this, two of 200 such bisects on four hosts named the wrong one of the two).
            let k_holds = || {
                belief_with_commit_levels(graph, prep, settings, allowed, NO_CHANGE_PRIOR, None).p
                    [k]
                    >= conf
            };
            if lone && named.contains(&k) && k_holds() {
                findings.misfit = false;
                findings.changes = vec![one_step()];
                return Decision::Done(Outcome::Found {
                    culprit: k,
                    confidence: pk,
                });
            }
            findings.changes = list.clone();
            let names: Vec<String> = list
                .iter()
                .map(|c| match c.culprit {
                    Some(x) => format!("{} ({:+.2}%)", short(graph, x), 100.0 * c.change),
                    None => format!(
                        "one of {} commits ({:+.2}%)",
                        c.candidates.len(),
                        100.0 * c.change
                    ),
                })
                .collect();
            if settled {
                return Decision::Done(Outcome::Changes {
                    changes: list,
                    settled: true,
                    reason: format!("{} changes: {}", names.len(), names.join(", ")),
                });
            }
            requests.truncate(idle);
            // A change point that is not settled, whose step its belief reads below half
            // the size of interest, and whose search only re-measures points already
            // measured well, will not settle on more of their runs: the commits around it
            // move by less than the bisect looks for, one a little each (an instruction
            // count along a history). The change points found so far are the answer.
            // Only beside the verified one-change culprit k, settled. bisect-sim, CV 0.1%
            // with a walk of 0.01% a commit: 6% of bisects searched a −0.3% change point
            // one run at a time up to the 2000-run cap (94 / 6 / 0 / 191.1 runs; with this
            // 100 / 0 / 0 / 44.5). At the full size of interest, two +1.5% steps were both
            // named in 80.5% of 600 bisects, with 4 wrong (82.0% and 2 without); beside
            // any settled change point (not only k), a walk of 0.1% at CV 0.1% named a
            // wrong commit in 26% of bisects (21% beside k only, 17% without the rule).
            // Where levels are pinned (see [`levels_pinned`]) the search no longer asks for
            // well-measured points again but for new ones; for a change point this small
            // those are the walk's next moves, not a settling of it.
            let pinned = levels_pinned(ev, b);
            let idle_search = !requests.is_empty()
                && requests.iter().all(|r| {
                    r.pair_with.is_none()
                        && (pinned || ev.at(r.point).len() >= CHECK_SETTLED_SAMPLES)
                });
            let small_unsettled = pair
                .iter()
                .zip(&list)
                .all(|((_, bl), cp)| cp.culprit.is_some() || bl.change.abs() < 0.5 * of_interest);
            if idle_search && small_unsettled && list.iter().any(|c| c.culprit == Some(k)) {
                return Decision::Done(Outcome::Changes {
                    changes: list,
                    settled: false,
                    reason: format!(
                        "more than one change, and the search for the unsettled one only \
                         measures commits already measured well; its step is below the \
                         {:.1}% this bisect looks for: {}",
                        100.0 * of_interest,
                        names.join(", ")
                    ),
                });
            }
            if budget == 0 || cap(requests.clone(), budget).is_empty() {
                if in_flight > 0 {
                    return Decision::Wait {
                        phase: Phase::Searching,
                    };
                }
                return Decision::Done(Outcome::Changes {
                    changes: list,
                    settled: false,
                    reason: format!(
                        "more than one change, and the run cap of {} cannot separate them: {}",
                        settings.max_runs,
                        names.join(", ")
                    ),
                });
            }
            let why = format!(
                "more than one change: {}; searching the others",
                names.join(", ")
            );
            return measure(Phase::Searching, requests, why);
        }
        if pk >= conf && pairs.len() >= VERIFY_MAX_FACTOR * need {
            let reason = format!(
                "verification of {} failed ({verdict}); {}",
                short(graph, k),
                describe(graph, b)
            );
            return Decision::Done(Outcome::Inconclusive {
                reason,
                candidates: top(20),
            });
        }
        let busy = pending_at(Point::Candidate(k)) > 0 || pending_at(parent) > 0;
        if pk >= conf && busy {
            return Decision::Wait {
                phase: Phase::Verifying,
            };
        }
        if pk >= conf || (pairs.len() < need && !busy) {
            // In chunks, checking after each: most changes verify long before `need` pairs.
            let chunk = verify_chunk(b, pairs.len());
            let request = Request::paired(Point::Candidate(k), parent, chunk.min(2 * rpr));
            let why = format!(
                "verifying {} ({pk:.4}) against its parent, interleaved: {verdict}",
                short(graph, k)
            );
            return measure(Phase::Verifying, vec![request], why);
        }
        // Below the target with enough pairs: the doubt is elsewhere, so search on.
    }

    // A culprit set that no testable commit can split: report it.
    let set = top(64);
    let mass: f64 = set.iter().map(|&(_, p)| p).sum();
    if mass >= conf && set.len() > 1 {
        let mut in_set = vec![0.0; n];
        for &(c, p) in &set {
            in_set[c] = p;
        }
        let below = graph.ancestor_mass(&in_set);
        let splittable = (0..n).any(|c| {
            !ev.untestable.contains(&c) && below[c] > 1e-12 * mass && below[c] < mass * (1.0 - 1e-9)
        });
        if !splittable {
            let skipped: Vec<String> = set
                .iter()
                .filter(|(c, _)| ev.untestable.contains(c))
                .map(|&(c, _)| short(graph, c))
                .collect();
            let reason = format!(
                "the culprit is one of {} commits that no testable commit can tell apart (untestable: {}); {}",
                set.len(),
                skipped.join(", "),
                describe(graph, b)
            );
            return Decision::Done(Outcome::Inconclusive {
                reason,
                candidates: set,
            });
        }
    }

    // Searching.
    let mut requests: Vec<Request> = Vec::new();
    let pinned = levels_pinned(ev, b);
    // Keep both sides measured: the change is only as well known as the level of the side
    // with fewer samples, so top up the endpoint of a side that falls behind.
    let total = (spent + in_flight) as f64;
    let cand_mass = (1.0 - b.no_change).max(1e-300);
    let (mut side_good, mut side_bad) = (0.0, 0.0);
    for (&p, s) in &ev.samples {
        let k = s.len() as f64 + pending_at(p) as f64;
        let bad = match p {
            Point::Good => 0.0,
            Point::Candidate(c) if c < n => (b.bad[c] / cand_mass).min(1.0),
            Point::Candidate(_) => continue,
        };
        side_good += k * (1.0 - bad);
        side_bad += k * bad;
    }
    // Enough samples on a side to know its level to a quarter of the change.
    let side_need = SIDE_PRECISION / (d * d).max(1e-6);
    // An endpoint whose level is already known to a small fraction of the change is decided:
    // more runs there would not move the search.
    let decided_at = (ENDPOINT_DECIDED / d.max(1e-3)).powi(2);
    for (p, mine, other) in [
        (Point::Good, side_good, side_bad),
        (bad_point, side_bad, side_good),
    ] {
        let have = n_end(p) as f64 + pending_at(p) as f64;
        let behind = ((mine < side_need && mine < BALANCE * other)
            || (have < ENDPOINT_SHARE * total && have < decided_at))
            && !(pinned && n_end(p) >= PINNED_RUNS);
        if behind && pending_at(p) == 0 && requests.len() < idle {
            requests.push(Request::new(p, runs));
        }
    }
    let slots = idle - requests.len();
    requests.extend(propose(
        graph,
        ev,
        b,
        allowed,
        slots,
        runs,
        None,
        build_in_runs,
    ));
    if requests.is_empty() && pinned {
        // Nothing left to split, and every point in the way has its level pinned: more
        // runs only move a misfit model (a near-exact metric whose level walks spent up to
        // 1,800 runs of a bisect re-measuring its endpoints here).
        if in_flight > 0 {
            return Decision::Wait {
                phase: Phase::Searching,
            };
        }
        return Decision::Done(Outcome::Inconclusive {
            reason: format!(
                "every commit that could split the candidates is measured as well as its runs \
                 allow (they scatter {:.2}%, while the levels the model fits scatter {:.2}%: \
                 the commits move the metric by more than one step), so more runs cannot \
                 settle it; {}",
                100.0 * within_point_noise(ev, b).unwrap_or(0.0),
                100.0 * b.noise,
                describe(graph, b)
            ),
            candidates: smallest_set(&b.ranked, conf, 20),
        });
    }
    if requests.is_empty() {
        // Nothing splits the mass: measure the endpoints to settle the levels.
        let mut order = endpoints;
        order.sort_by_key(|&p| n_end(p));
        requests = order
            .iter()
            .filter(|&&p| pending_at(p) == 0)
            .map(|&p| Request::new(p, runs))
            .take(idle)
            .collect();
    }
    let why = format!(
        "searching at the quantiles of the culprit mass: {}",
        describe(graph, b)
    );
    measure(Phase::Searching, requests, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clean_core_with_wild_runs_is_told_from_heavy_tails() {
        use rand::{Rng, SeedableRng, rngs::StdRng};
        use rand_distr::{Distribution, StandardNormal, StudentT};
        let mut rng = StdRng::seed_from_u64(7);
        // Eight points of 12 runs: CV 2% with one run in twenty 20-100% slow.
        let wild: Vec<Vec<f64>> = (0..8)
            .map(|_| {
                (0..12)
                    .map(|_| {
                        let z: f64 = StandardNormal.sample(&mut rng);
                        let slow = if rng.random::<f64>() < 0.05 {
                            0.2 + 0.8 * rng.random::<f64>()
                        } else {
                            0.0
                        };
                        0.02 * z + slow
                    })
                    .collect()
            })
            .collect();
        let (weights, scale, shape) = robust_weights(&wild, Some(0), Some(1), false);
        let Tail::Wild(eps) = shape else {
            panic!("chose {shape:?}");
        };
        assert!((0.01..0.15).contains(&eps), "wild share {eps}");
        assert!((0.015..0.025).contains(&scale), "scale {scale}");
        for (v, w) in wild.iter().flatten().zip(weights.iter().flatten()) {
            if *v > 0.15 {
                assert!(*w < 0.01, "a wild run {v} weighs {w}");
            } else if v.abs() < 0.03 {
                // Residuals are from each point's median: 0.03 may lie 2.5σ from it.
                assert!(*w > 0.8, "a core run {v} weighs {w}");
            }
        }
        // Student-t noise (3 degrees of freedom) stays Student-t: its fit is tempered more.
        let t3 = StudentT::new(3.0).expect("t3");
        let heavy: Vec<Vec<f64>> = (0..8)
            .map(|_| (0..12).map(|_| 0.02 * t3.sample(&mut rng)).collect())
            .collect();
        let (_, _, shape) = robust_weights(&heavy, Some(0), Some(1), false);
        assert!(matches!(shape, Tail::StudentT(_)), "chose {shape:?}");
        // Gaussian noise stays Gaussian.
        let clean: Vec<Vec<f64>> = (0..8)
            .map(|_| {
                (0..12)
                    .map(|_| {
                        let z: f64 = StandardNormal.sample(&mut rng);
                        0.02 * z
                    })
                    .collect()
            })
            .collect();
        let (_, _, shape) = robust_weights(&clean, Some(0), Some(1), false);
        assert_eq!(shape, Tail::Gaussian);
    }

    #[test]
    fn runs_of_one_boot_weigh_as_one_boot_not_as_many() {
        // c0 - c1 - c2 (the bad endpoint). Each endpoint booted four times, ten runs a boot:
        // the boots' levels scatter by ±3 while runs of one boot scatter by about 0.5. c1
        // booted once and read the bad level. Ten runs of one boot say little more than one
        // boot does, so "c2 changed it" (c1's boot was merely high) must keep some mass.
        let graph = CandidateGraph::new(
            vec!["a".into(), "b".into(), "c".into()],
            vec![vec![], vec![0], vec![1]],
        )
        .expect("graph");
        let wiggle = [0.5, -0.5, 0.3, -0.3, 0.7, -0.7, 0.1, -0.1, 0.4, -0.4];
        let mut ev = Evidence::default();
        let mut add = |p: Point, host: i64, boots: &[f64]| {
            for &b in boots {
                for (seq, w) in wiggle.iter().enumerate() {
                    ev.samples.entry(p).or_default().push(b + w);
                    ev.taken.entry(p).or_default().push(crate::Taken {
                        at: 0.0,
                        host,
                        seq: seq as u32,
                    });
                }
            }
        };
        add(Point::Good, 1, &[97.0, 103.0, 100.0, 100.0]);
        add(Point::Candidate(2), 2, &[103.0, 109.0, 106.0, 106.0]);
        add(Point::Candidate(1), 3, &[106.0]);
        let settings = Settings::default();
        let plain = |ev: &Evidence| {
            let prep = Prepared::new(&graph, ev);
            belief(&graph, &prep, &settings, &[true; 3], 0.2, None)
        };
        let b = plain(&ev);
        assert!(b.p[2] > 0.01, "c2 kept {:.2e} of the mass", b.p[2]);
        // The boots' scatter (variance about 6) over the runs' (about 0.2).
        assert!(b.boot_ratio > 10.0, "ρ read as {}", b.boot_ratio);
        // A run still to come brings a boot of its own: the prediction counts it.
        let with_boots = predict(&b, crate::Costs::default(), 0.99, &settings);
        // Counted as 40, 40 and 10 independent runs, c1's boot settles it.
        ev.taken.clear();
        let b = plain(&ev);
        assert!(b.p[2] < 1e-4, "c2 kept {:.2e} of the mass", b.p[2]);
        assert_eq!(b.boot_ratio, 0.0);
        let without = predict(&b, crate::Costs::default(), 0.99, &settings);
        assert!(
            with_boots.step_in_noise < without.step_in_noise,
            "{with_boots:?} against {without:?}"
        );
    }

    /// Adds one deployment of `values` at `p` on `host` (places since the boot 0, 1, ...).
    fn deploy(ev: &mut Evidence, p: Point, host: i64, values: &[f64]) {
        for (seq, &y) in values.iter().enumerate() {
            ev.samples.entry(p).or_default().push(y);
            ev.taken.entry(p).or_default().push(crate::Taken {
                at: 0.0,
                host,
                seq: seq as u32,
            });
        }
    }

    #[test]
    fn each_endpoint_is_measured_in_two_deployments_and_a_point_again_on_one_of_its_own() {
        let n = 16;
        let graph = CandidateGraph::new(
            (0..n).map(|i| format!("c{i}")).collect(),
            (0..n)
                .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
                .collect(),
        )
        .expect("graph");
        let bad = Point::Candidate(n - 1);
        let settings = Settings {
            idle_hosts: 1,
            ..Settings::default()
        };
        let requests = |ev: &Evidence| match decide(&graph, ev, &settings).decision {
            Decision::Measure {
                phase, requests, ..
            } => (phase, requests),
            other => panic!("{other:?}"),
        };
        // Nothing measured: a first deployment of a few runs, not a fresh one.
        let (phase, first) = requests(&Evidence::default());
        assert_eq!(phase, Phase::Reproducing);
        assert_eq!(first.len(), 1);
        assert!(!first[0].fresh_deploy);
        assert!(first[0].runs < settings.runs_per_request);
        // A clear step, but each endpoint seen on one boot: they are measured again, each on
        // a deployment of its own, for the rest of a request's runs.
        let mut ev = Evidence::default();
        deploy(&mut ev, Point::Good, 0, &[100.0, 100.4, 99.7]);
        deploy(&mut ev, bad, 0, &[110.0, 110.3, 109.8]);
        let (phase, again) = requests(&ev);
        assert_eq!(phase, Phase::Reproducing);
        assert!(!again.is_empty());
        for r in &again {
            assert!(r.point == Point::Good || r.point == bad, "{r:?}");
            assert!(r.fresh_deploy, "{r:?}");
            assert_eq!(r.runs, settings.runs_per_request - 3);
        }
        // A second deployment each: the search begins, on commits never measured.
        let mut two = ev.clone();
        deploy(&mut two, Point::Good, 0, &[100.2, 99.9]);
        deploy(&mut two, bad, 0, &[110.1, 109.9]);
        let (phase, search) = requests(&two);
        assert_eq!(phase, Phase::Searching);
        for r in search.iter().filter(|r| r.pair_with.is_none()) {
            assert_eq!(r.fresh_deploy, !two.at(r.point).is_empty(), "{r:?}");
        }
        // A runner that never deploys again (its places run on): twice a request's runs
        // end the wait all the same.
        let mut kept = Evidence::default();
        let runs = 2 * settings.runs_per_request as usize;
        let level = |base: f64| -> Vec<f64> {
            (0..runs)
                .map(|i| base + 0.3 * (i as f64 % 3.0 - 1.0))
                .collect()
        };
        deploy(&mut kept, Point::Good, 0, &level(100.0));
        deploy(&mut kept, bad, 1, &level(110.0));
        assert_eq!(crate::boots::count(&kept, Point::Good), Some(1));
        assert_eq!(requests(&kept).0, Phase::Searching);
    }

    #[test]
    fn with_boot_variance_a_request_takes_what_one_boot_is_worth() {
        // (ρ + 1/m)(B + m) is least at m = √(B/ρ), B one run: ρ = 2.25 (a 3% boot level at
        // CV 2%) wants one run a boot, ρ = 0.1 three, no boot variance any number.
        assert_eq!(runs_per_boot(2.25, 1.0), 1);
        assert_eq!(runs_per_boot(0.1, 1.0), 3);
        assert_eq!(runs_per_boot(0.0, 1.0), u32::MAX);
        // A boot that costs nine runs (a slow firmware): three runs a boot at ρ = 1.
        assert_eq!(runs_per_boot(1.0, 9.0), 3);
        let costs = crate::Costs {
            build_secs: 0.0,
            run_secs: 20.0,
            boot_secs: 180.0,
        };
        assert_eq!(costs.boot_in_runs(), 9.0);
        assert_eq!(crate::Costs::default().boot_in_runs(), 1.0);
        let mut ev = Evidence::default();
        deploy(&mut ev, Point::Candidate(3), 0, &[1.0, 2.0]);
        let asked = vec![
            Request::new(Point::Candidate(3), 5),
            Request::new(Point::Candidate(4), 5),
            Request::paired(Point::Candidate(3), Point::Candidate(2), 5),
        ];
        let got = deploy_fresh(asked.clone(), &ev, 0.1);
        // The point measured before: a boot of its own, three runs; the new one: three runs on
        // whatever deployment it gets; the couple (each of its runs a deployment) as asked.
        assert_eq!((got[0].runs, got[0].fresh_deploy), (3, true));
        assert_eq!((got[1].runs, got[1].fresh_deploy), (3, false));
        assert_eq!(got[2], asked[2]);
        // Without boot variance only the deployment changes.
        let got = deploy_fresh(asked.clone(), &ev, 0.0);
        assert_eq!((got[0].runs, got[0].fresh_deploy), (5, true));
        assert_eq!((got[1].runs, got[1].fresh_deploy), (5, false));
    }

    #[test]
    fn the_noise_ratio_is_used_only_when_the_endpoints_show_it() {
        // Deterministic "noise": a fixed pattern scaled per side.
        let pattern = [
            -1.2, 0.4, 0.9, -0.3, 1.5, -0.8, 0.1, -0.6, 1.1, -1.1, 0.7, -0.7,
        ];
        // 24 samples a side: the pattern and its mirror.
        let side = |scale: f64, level: f64| -> Vec<f64> {
            pattern
                .iter()
                .chain(pattern.iter().rev())
                .map(|x| level + scale * x)
                .collect()
        };
        // Same noise, different levels: no ratio.
        assert_eq!(
            endpoint_noise_ratio(&side(0.02, 0.0), &side(0.02, 0.03)),
            None
        );
        // Twice the noise after the change: the variance ratio 4, its logarithm shrunk by
        // 2 · (2/23 + 2/23) / ln²4 (24 samples a side): 4^0.819 = 3.11.
        let r2 = endpoint_noise_ratio(&side(0.02, 0.0), &side(0.04, 0.03)).unwrap();
        let shrink = 1.0 - 2.0 * (4.0 / 23.0) / 4f64.ln().powi(2);
        assert!((r2 - 4f64.powf(shrink)).abs() < 1e-9, "{r2}");
        assert!(r2 > 3.0 && r2 < 4.0, "{r2}");
        // A ratio of 1.2 from 24 samples a side is within noise: dropped.
        assert_eq!(
            endpoint_noise_ratio(&side(0.02, 0.0), &side(0.02 * 1.2f64.sqrt(), 0.03)),
            None
        );
        // Three times: clamped to the range's end.
        let r2 = endpoint_noise_ratio(&side(0.02, 0.0), &side(0.06, 0.03)).unwrap();
        assert!((r2 - 4.0).abs() < 1e-9, "{r2}");
        // Too few samples to tell.
        assert_eq!(
            endpoint_noise_ratio(&side(0.02, 0.0)[..5], &side(0.08, 0.03)[..5]),
            None
        );
    }

    #[test]
    fn identical_differences_are_unbounded_only_for_runs_without_noise() {
        // Three couples that each differ by one grid step of a metric known to be noisy: the
        // t-test cannot judge them (no scatter), so they count as what the known noise and
        // the signs make of them, not as certain.
        let grid = [(104.0, 100.0); 3];
        let noisy = paired_e_expecting(&grid, 1.0, Some(2.0), Some(3.0));
        assert!(noisy.is_finite() && noisy < 1.0 / VERIFY_ALPHA, "{noisy}");
        // A deterministic metric's couples: unbounded, as before.
        assert_eq!(paired_e_expecting(&grid, 1.0, None, None), f64::INFINITY);
    }

    #[test]
    fn paired_e_value_sides_and_bound() {
        let up: Vec<(f64, f64)> = (0..10)
            .map(|i| (101.0 + (i % 3) as f64 * 0.1, 100.0))
            .collect();
        assert!(paired_e(&up, 1.0, None) > 1000.0);
        assert!(paired_e(&up, -1.0, None) < 1.0);
        assert_eq!(paired_e(&up[..1], 1.0, None), 1.0);
        // Under "no difference", the e-value crosses 1/α on at most about α of sequences,
        // looked at after every couple.
        use rand::{SeedableRng, rngs::StdRng};
        use rand_distr::{Distribution, StandardNormal};
        let mut rng = StdRng::seed_from_u64(7);
        let (trials, mut crossed) = (2000, 0);
        for _ in 0..trials {
            let mut pairs = Vec::new();
            for _ in 0..60 {
                let a: f64 = StandardNormal.sample(&mut rng);
                let b: f64 = StandardNormal.sample(&mut rng);
                pairs.push((100.0 + a, 100.0 + b));
                if pairs.len() >= 3 && paired_e(&pairs, 1.0, Some(1.0)) >= 1.0 / VERIFY_ALPHA {
                    crossed += 1;
                    break;
                }
            }
        }
        let rate = crossed as f64 / trials as f64;
        assert!(rate <= VERIFY_ALPHA, "crossed on {rate}");
        // The same with the prior's scale set from a measured step (one-sided, half-normal).
        for effect in [0.3, 1.0, 3.0] {
            let mut crossed = 0;
            for _ in 0..trials {
                let mut pairs = Vec::new();
                for _ in 0..60 {
                    let a: f64 = StandardNormal.sample(&mut rng);
                    let b: f64 = StandardNormal.sample(&mut rng);
                    pairs.push((100.0 + a, 100.0 + b));
                    let e = paired_e_expecting(&pairs, 1.0, Some(1.0), Some(effect));
                    if pairs.len() >= 3 && e >= 1.0 / VERIFY_ALPHA {
                        crossed += 1;
                        break;
                    }
                }
            }
            let rate = crossed as f64 / trials as f64;
            assert!(rate <= VERIFY_ALPHA, "effect {effect}: crossed on {rate}");
        }
    }

    #[test]
    fn the_swap_e_value_keeps_its_bound_and_sees_a_change_of_noise() {
        use rand::{SeedableRng, rngs::StdRng};
        use rand_distr::{Distribution, StandardNormal};
        let mut rng = StdRng::seed_from_u64(11);
        let mut z = || -> f64 { StandardNormal.sample(&mut rng) };
        // Endpoints: good 100 ± 1, bad 103 ± 2.
        let sides = [(100.0, 1.0), (103.0, 2.0)];
        // Culprit and parent alike (here both at the good level, or both between): the
        // e-value crosses 1/α on at most about α of sequences, looked at after every couple.
        for level in [100.0, 101.5] {
            let (trials, mut crossed) = (2000, 0);
            for _ in 0..trials {
                let mut pairs = Vec::new();
                for _ in 0..60 {
                    pairs.push((level + z(), level + z()));
                    if swap_e(&pairs, sides) >= 1.0 / VERIFY_ALPHA {
                        crossed += 1;
                        break;
                    }
                }
            }
            let rate = crossed as f64 / trials as f64;
            assert!(rate <= VERIFY_ALPHA, "level {level}: crossed on {rate}");
        }
        // A culprit at the bad level and noise against a parent at the good one passes
        // within a few couples; one wild parent run does not sink it.
        let mut pairs: Vec<(f64, f64)> = (0..8).map(|_| (103.0 + 2.0 * z(), 100.0 + z())).collect();
        assert!(swap_e(&pairs, sides) > 10.0, "{}", swap_e(&pairs, sides));
        pairs.push((103.0, 150.0));
        assert!(swap_e(&pairs, sides) > 1.0, "{}", swap_e(&pairs, sides));
        // Only the noise changed (same mean, twice the spread): differences alone see
        // nothing, the swap e-value grows.
        let noisy: Vec<(f64, f64)> = (0..40).map(|_| (100.0 + 2.0 * z(), 100.0 + z())).collect();
        let only_noise = [(100.0, 1.0), (100.0, 2.0)];
        assert!(
            swap_e(&noisy, only_noise) > 10.0,
            "{}",
            swap_e(&noisy, only_noise)
        );
    }

    #[test]
    fn the_sign_e_value_grows_with_positive_signs_only() {
        let up = vec![1.0; 20];
        assert!(sign_e(&up) > 1e4);
        let mixed: Vec<f64> = (0..20)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        assert!(sign_e(&mixed) < 2.0);
        assert_eq!(sign_e(&[]), 1.0);
    }

    #[test]
    fn smallest_set_reaches_the_target() {
        let p = [0.5, 0.3, 0.15, 0.05];
        let r = ranked(&p, 64);
        assert_eq!(r[0], (0, 0.5));
        assert_eq!(smallest_set(&r, 0.9, 10).len(), 3);
        assert_eq!(smallest_set(&r, 0.9, 2).len(), 2);
    }
}
