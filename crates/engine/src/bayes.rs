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
//! Reproduce (both endpoints measured, "no change" below 1/2), search (W commits at the
//! quantiles i/(W+1) of the culprit mass over the DAG, plus the endpoints whenever they hold
//! less than a tenth of the samples), verify (interleaved culprit-vs-parent runs on one host
//! once a commit holds the target probability), then `Found`.

use crate::decide::{
    Assessment, Decision, Direction, Outcome, Phase, Point, Request, Settings, Verdict,
};
use crate::{CandidateGraph, Evidence};
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::HashMap;
use std::fmt::Write;

/// Prior probability that the range holds no change at all.
const NO_CHANGE_PRIOR: f64 = 0.2;
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
/// Verification starts at probability 1 − this × (1 − confidence) (0.9 for 0.99).
const VERIFY_START: f64 = 10.0;
/// One-sided level of the paired test that verifies the culprit against its parent.
const VERIFY_ALPHA: f64 = 0.1;

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
    /// Samples used.
    pub samples: usize,
    /// Tail index of the noise model chosen (Student-t degrees of freedom; None: Gaussian).
    pub tail: Option<f64>,
    /// The most probable candidates (up to 64), by decreasing probability.
    pub ranked: Vec<(usize, f64)>,
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
    let scales = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32];
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
) -> (Vec<Vec<f64>>, f64, Option<f64>) {
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
        return (ones(), rms, None);
    }
    let choices: &[Option<f64>] = if fit.len() >= 20 {
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
    let Some(nu) = nu else {
        return (ones(), scale, None);
    };
    let s2 = scale * scale;
    let weights = residuals
        .iter()
        .map(|v| v.iter().map(|r| (nu + 1.0) / (nu + r * r / s2)).collect())
        .collect();
    (weights, scale, Some(nu))
}

/// The posterior. `allowed` masks the candidates that may be the culprit.
pub(crate) fn belief(
    graph: &CandidateGraph,
    ev: &Evidence,
    settings: &Settings,
    allowed: &[bool],
) -> Belief {
    let n = graph.len();
    // Points with samples: the good endpoint first, then measured candidates.
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
    let good_i = points.iter().position(|&p| p == Point::Good);
    let bad_i = points
        .iter()
        .position(|&p| p == Point::Candidate(graph.bad()));
    let (weights, scale, tail) = robust_weights(&zs, good_i, bad_i);
    let stats: Vec<Stats> = zs
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
    let mut total = Stats::default();
    for st in &stats {
        total.add(st);
    }

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
    let mut sig_index: HashMap<&[u64], u32, BuildFx> = HashMap::default();
    let mut sig_of = vec![0u32; n];
    let mut sig_rows: Vec<usize> = Vec::new();
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

    // Marginal likelihood per signature (constants shared by all hypotheses dropped).
    let prior = delta_prior(settings);
    let count = total.n;
    // With Student-t weights held fixed, the weighted Gaussian likelihood is sharper than the
    // t likelihood it stands for: its information per sample is 1/s² where the t model's is
    // (ν+1)/((ν+3)s²). Temper the fit by that ratio so the posterior stays calibrated.
    let temper = tail.map_or(1.0, |nu| (nu + 1.0) / (nu + 3.0));
    let power = temper * (count - 1.0).max(0.0) / 2.0;
    let floor = 1e-18 * count.max(1.0);
    let scale2 = (scale * scale).max(1e-12);
    let log_ml0 = -power * (total.ss() + floor).ln();
    let mut sig_stats: Vec<(Stats, Stats)> = Vec::with_capacity(sig_rows.len());
    let log_ml: Vec<f64> = sig_rows
        .iter()
        .map(|&c| {
            let row = &bits[c * words..(c + 1) * words];
            let mut b = Stats::default();
            for (j, &(_, i)) in measured.iter().enumerate() {
                if row[j / 64] >> (j % 64) & 1 == 1 {
                    b.add(&stats[i]);
                }
            }
            let g = total.sub(&b);
            sig_stats.push((g, b));
            if g.w <= 1e-12 || b.w <= 1e-12 {
                return log_ml0;
            }
            let h = g.w * b.w / (g.w + b.w);
            let d = b.mean() - g.mean();
            let ssw = g.ss() + b.ss() + floor;
            log_sum_exp(prior.iter().map(|&(pi, mu, tau)| {
                let gg = tau * tau / scale2;
                pi.ln()
                    - 0.5 * (1.0 + h * gg).ln()
                    - power * (ssw + (d - mu).powi(2) / (1.0 / h + gg)).ln()
            }))
        })
        .collect();

    let allowed_count = allowed.iter().filter(|&&a| a).count().max(1) as f64;
    let no_change_prior = NO_CHANGE_PRIOR;
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
    let (change, noise) = if g.n > 0.0 && b.n > 0.0 {
        let change = b.us / b.n - g.us / g.n;
        let noise = ((g.uss() + b.uss()) / (count - 2.0).max(1.0)).sqrt();
        (change, noise)
    } else {
        (0.0, (total.uss() / (count - 1.0).max(1.0)).sqrt())
    };
    let ranked = ranked(&p, 64);
    Belief {
        p,
        no_change,
        bad,
        change,
        noise,
        samples,
        tail,
        ranked,
    }
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
        "P(no change) {:.4}; change {:+.2}% with noise {:.2}% ({}) over {} samples; top:",
        b.no_change,
        100.0 * b.change,
        100.0 * b.noise,
        match b.tail {
            None => "gaussian".to_string(),
            Some(nu) => format!("student-t {nu}"),
        },
        b.samples
    );
    for (c, p) in smallest_set(&b.ranked, 0.99, 5) {
        let _ = write!(s, " {} {:.4}", short(graph, c), p);
    }
    s
}

fn assess(graph: &CandidateGraph, ev: &Evidence, b: &Belief, conf: f64) -> Vec<Assessment> {
    let mut out = vec![Assessment {
        point: Point::Good,
        verdict: Verdict::Good,
        culprit_probability: None,
        bad_probability: Some(0.0),
    }];
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

/// Pairs needed to verify a change of `d` noise units with a one-sided paired test at 5%
/// and 80% power (the differences have twice the variance of one run).
fn verify_pairs(b: &Belief) -> usize {
    let d = if b.noise > 0.0 {
        (b.change / b.noise).abs()
    } else {
        10.0
    };
    let need = (2.0 * (1.645f64 + 0.842).powi(2) / (d * d).max(1e-6)).ceil();
    need.clamp(3.0, 60.0) as usize
}

/// One-sided paired t-test p-value that `point − pair_with` moved in the direction of `sign`.
fn paired_p(pairs: &[(f64, f64)], sign: f64) -> f64 {
    let d: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| sign * (a - b))
        .filter(|x| x.is_finite())
        .collect();
    let n = d.len();
    if n < 2 {
        return 1.0;
    }
    let mean = d.iter().sum::<f64>() / n as f64;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    if var <= 0.0 {
        return if mean > 0.0 { 0.0 } else { 1.0 };
    }
    let t = mean / (var / n as f64).sqrt();
    StudentsT::new(0.0, 1.0, (n - 1) as f64).map_or(1.0, |dist| dist.sf(t))
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

pub(crate) fn decide(
    graph: &CandidateGraph,
    ev: &Evidence,
    settings: &Settings,
) -> (Decision, Vec<Assessment>) {
    let n = graph.len();
    let conf = settings.confidence.clamp(0.5, 1.0 - 1e-9);
    let rpr = settings.runs_per_request.max(1);
    let idle = settings.idle_hosts.max(1) as usize;
    let allowed: Vec<bool> = if settings.first_parent {
        graph.first_parent_chain()
    } else {
        vec![true; n]
    };
    let b = belief(graph, ev, settings, &allowed);
    let assessments = assess(graph, ev, &b, conf);
    let spent = ev.runs_spent();
    let in_flight = ev.runs_pending();
    let budget = settings.max_runs.saturating_sub(spent + in_flight);
    let pending_at = |p: Point| ev.pending.get(&p).copied().unwrap_or(0);
    let bad_point = Point::Candidate(graph.bad());
    let endpoints = [Point::Good, bad_point];
    let top = |limit| smallest_set(&b.ranked, conf, limit);
    let done = |o: Outcome| (Decision::Done(o), assessments.clone());
    let measure = |phase, requests: Vec<Request>, why: String| {
        let requests = cap(requests, budget);
        if requests.is_empty() {
            if in_flight == 0 {
                let reason = format!(
                    "run cap of {} reached; {}",
                    settings.max_runs,
                    describe(graph, &b)
                );
                return (
                    Decision::Done(Outcome::Inconclusive {
                        reason,
                        candidates: top(20),
                    }),
                    assessments.clone(),
                );
            }
            return (Decision::Wait { phase }, assessments.clone());
        }
        (
            Decision::Measure {
                phase,
                requests,
                why,
            },
            assessments.clone(),
        )
    };

    // "No change" may end the bisect at a lower bar than a culprit: stopping early here costs
    // a missed change at worst, never a wrong culprit (the simulator checks the rate).
    let not_reproduced_at = (1.0 - NOT_REPRODUCED_FACTOR * (1.0 - conf)).max(0.9);
    if b.no_change >= not_reproduced_at {
        let reason = format!("no change between the endpoints: {}", describe(graph, &b));
        return done(Outcome::NotReproduced { reason });
    }
    if ev.untestable.contains(&graph.bad()) {
        let reason = "the bad commit cannot be built or booted: nothing to reproduce".to_string();
        return done(Outcome::Inconclusive {
            reason,
            candidates: vec![],
        });
    }
    if spent >= settings.max_runs {
        let reason = format!(
            "run cap of {} reached; {}",
            settings.max_runs,
            describe(graph, &b)
        );
        return done(Outcome::Inconclusive {
            reason,
            candidates: top(20),
        });
    }

    // Reproducing: both endpoints measured, and a change more likely than not.
    let min_end = rpr.min(3) as usize;
    let n_end = |p: Point| ev.at(p).len();
    if endpoints.iter().any(|&p| n_end(p) < min_end) || b.no_change > 0.5 {
        let endpoint_runs: u32 = endpoints
            .iter()
            .map(|&p| n_end(p) as u32 + ev.failed.get(&p).copied().unwrap_or(0))
            .sum();
        if endpoints.iter().all(|&p| n_end(p) >= min_end) && endpoint_runs >= settings.max_runs / 4
        {
            let reason = format!(
                "no change of interest after {endpoint_runs} runs of the endpoints: {}",
                describe(graph, &b)
            );
            return done(Outcome::NotReproduced { reason });
        }
        let mut order = endpoints;
        order.sort_by_key(|&p| n_end(p));
        let requests: Vec<Request> = order
            .iter()
            .filter(|&&p| pending_at(p) == 0)
            .map(|&p| Request::new(p, rpr))
            .take(idle)
            .collect();
        let why = format!(
            "reproducing the change at the endpoints: {}",
            describe(graph, &b)
        );
        return measure(Phase::Reproducing, requests, why);
    }

    // Verifying: one commit holds the target; confirm it against its parent on one host.
    let (k, pk) = (0..n)
        .map(|c| (c, b.p[c]))
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .expect("non-empty graph");
    // Verification starts a little before the target: culprit-vs-parent pairs are also the
    // runs that best settle the last doubt (is the parent good, is the culprit bad), so the
    // end of the search and the verification share them.
    let verify_from = (1.0 - VERIFY_START * (1.0 - conf)).max(0.5).min(conf);
    if pk >= verify_from && ev.untestable.contains(&k) {
        if pk >= conf {
            let reason = format!(
                "the most probable culprit {} ({pk:.4}) cannot be built or booted, so it cannot be \
                 verified against its parent; {}",
                short(graph, k),
                describe(graph, &b)
            );
            return done(Outcome::Inconclusive {
                reason,
                candidates: top(20),
            });
        }
    } else if pk >= verify_from {
        let parent = graph
            .first_parent(k)
            .filter(|p| !ev.untestable.contains(p))
            .map_or(Point::Good, Point::Candidate);
        let pairs = ev
            .pairs
            .get(&(Point::Candidate(k), parent))
            .map_or(&[][..], Vec::as_slice);
        let need = verify_pairs(&b);
        let p_value = paired_p(pairs, b.change.signum());
        let verdict = format!(
            "{} pairs against {}: one-sided paired p = {:.4}",
            pairs.len(),
            match parent {
                Point::Good => "the good commit".to_string(),
                Point::Candidate(c) => short(graph, c),
            },
            p_value
        );
        if pk >= conf && pairs.len() >= 3 && p_value < VERIFY_ALPHA {
            return done(Outcome::Found {
                culprit: k,
                confidence: pk,
            });
        }
        if pk >= conf && pairs.len() >= 3 * need {
            let reason = format!(
                "verification of {} failed ({verdict}); {}",
                short(graph, k),
                describe(graph, &b)
            );
            return done(Outcome::Inconclusive {
                reason,
                candidates: top(20),
            });
        }
        let busy = pending_at(Point::Candidate(k)) > 0 || pending_at(parent) > 0;
        if pk >= conf && busy {
            return (
                Decision::Wait {
                    phase: Phase::Verifying,
                },
                assessments,
            );
        }
        if pk >= conf || (pairs.len() < need && !busy) {
            // In chunks, checking after each: most changes verify long before `need` pairs.
            let chunk = (need as f64 * VERIFY_CHUNK).ceil().max(3.0) as u32;
            let request = Request {
                point: Point::Candidate(k),
                runs: chunk.min(2 * rpr),
                pair_with: Some(parent),
            };
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
                describe(graph, &b)
            );
            return done(Outcome::Inconclusive {
                reason,
                candidates: set,
            });
        }
    }

    // Searching.
    let d = if b.noise > 0.0 {
        (b.change / b.noise).abs()
    } else {
        10.0
    };
    let runs = ((RUNS_Z / d.max(1e-3)).powi(2).ceil() as u32).clamp(1, rpr);
    let mut requests: Vec<Request> = Vec::new();
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
    let balance = BALANCE;
    for (p, mine, other) in [
        (Point::Good, side_good, side_bad),
        (bad_point, side_bad, side_good),
    ] {
        let have = n_end(p) as f64 + pending_at(p) as f64;
        let behind = (mine < side_need && mine < balance * other) || have < ENDPOINT_SHARE * total;
        if behind && pending_at(p) == 0 && requests.len() < idle {
            requests.push(Request::new(p, runs));
        }
    }
    let slots = idle - requests.len();
    let f = |c: usize| b.bad[c] / cand_mass;
    // Pending measurements already cover some quantiles.
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
    // The testable commit nearest each remaining target.
    let mut blocked = vec![false; n];
    for &c in &ev.untestable {
        if c < n {
            blocked[c] = true;
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
    let mut best: Vec<Option<(f64, usize)>> = vec![None; targets.len()];
    if !targets.is_empty() {
        for (c, &skip) in blocked.iter().enumerate() {
            if c == graph.bad() || skip {
                continue;
            }
            let fc = f(c);
            let j = targets.partition_point(|&t| t < fc);
            for j in [j.saturating_sub(1), j.min(targets.len() - 1)] {
                let dist = (targets[j] - fc).abs();
                if best[j].is_none_or(|(bd, _)| dist < bd) {
                    best[j] = Some((dist, c));
                }
            }
        }
    }
    for (dist, c) in best.into_iter().flatten() {
        // A point only helps if the culprit mass is on both sides of it.
        if dist < 0.5 && f(c) > 1e-9 && f(c) < 1.0 - 1e-9 && requests.len() < idle {
            requests.push(Request::new(Point::Candidate(c), runs));
        }
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
        describe(graph, &b)
    );
    measure(Phase::Searching, requests, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paired_test_sides() {
        let up: Vec<(f64, f64)> = (0..10)
            .map(|i| (101.0 + (i % 3) as f64 * 0.1, 100.0))
            .collect();
        assert!(paired_p(&up, 1.0) < 0.001);
        assert!(paired_p(&up, -1.0) > 0.999);
        assert_eq!(paired_p(&up[..1], 1.0), 1.0);
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
