//! Verification of a culprit against its parents: interleaved couples judged by an
//! anytime-valid e-value (t, known-noise, sign and swap e-values).

use super::*;

/// Verification pairs are asked in chunks of this share of the pairs a full test needs.
const VERIFY_CHUNK: f64 = 0.15;
/// Scale of the normal prior on the standardised effect in the verification's e-value.
const VERIFY_TAU: f64 = 1.0;
/// Bounds on the known-noise mixture's prior scale when it follows the measured step.
const VERIFY_TAU_MIN: f64 = 0.2;
const VERIFY_TAU_MAX: f64 = 3.0;
/// Weight of the swap e-value in the verification's e-value (the rest: the average of the
/// t, known-noise and sign e-values).
const SWAP_WEIGHT: f64 = 0.5;
/// Runs an endpoint needs outside the couples before the swap e-value judges with it.
const SWAP_MIN_SAMPLES: usize = 5;
/// Degrees of freedom of the swap e-value's densities.
const SWAP_NU: f64 = 5.0;

/// Pairs a verification is expected to need for a change of `d` noise units (a step of the
/// e-value test, for sizing requests; the test itself may stop at any time).
pub(super) fn verify_pairs(b: &Belief) -> usize {
    verify_pairs_for(b, b.noise).max(min_pairs(b))
}

/// Couples a verification needs at the least: 3, or 2 for a metric whose runs have shown
/// no noise at all (the t-test's evidence is then unbounded from 2 identical differences,
/// and a deterministic metric's cost is its builds, not a third couple per parent).
pub(super) fn min_pairs(b: &Belief) -> usize {
    if b.noise <= 0.0 { 2 } else { 3 }
}

/// Couples to ask for next, with `have` couples measured: a share of the full test, at
/// least [`min_pairs`] (for a noiseless metric, only what is missing of it).
pub(super) fn verify_chunk(b: &Belief, have: usize) -> u32 {
    if b.noise <= 0.0 {
        return min_pairs(b).saturating_sub(have).max(1) as u32;
    }
    // Sized at the planning noise: the chunk sets only how many couples are asked for at
    // once, never what they prove.
    let need = verify_pairs_for(b, b.planning_noise).max(min_pairs(b));
    (need as f64 * VERIFY_CHUNK).ceil().max(min_pairs(b) as f64) as u32
}

pub(super) fn verify_pairs_for(b: &Belief, noise: f64) -> usize {
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
pub(super) fn sign_e(d: &[f64]) -> f64 {
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

/// Commits that descend from `k` (k included).
pub(super) fn descendants(graph: &CandidateGraph, k: usize) -> Vec<bool> {
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
pub(super) fn verification<'a>(
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
pub(super) fn evalue(ev: &Evidence, b: &Belief, pairs: &[(f64, f64)], bad: usize) -> f64 {
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
pub(super) fn endpoint_sides(
    ev: &Evidence,
    pairs: &[(f64, f64)],
    bad: usize,
) -> Option<[(f64, f64); 2]> {
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
pub(super) fn swap_e(pairs: &[(f64, f64)], sides: [(f64, f64); 2]) -> f64 {
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
