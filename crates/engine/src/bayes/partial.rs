//! Whether a culprit's step is only part of the range's change, or goes beyond it.

use super::*;

/// Prior probability that a verified step is only part of the range's change (its parent
/// already partly changed: two changed lines meeting at a merge, or a change below it).
const PARTIAL_PRIOR: f64 = 0.2;
/// Prior probability that a verified step overshoots the range's change: k beyond the bad
/// level, or a parent beyond the good one (a change of the other sign elsewhere in the
/// range: a regression and a later partial fix), by up to [`OVERSHOOT_REACH`] times the
/// range's change.
const OVERSHOOT_PRIOR: f64 = 0.1;
const OVERSHOOT_REACH: f64 = 2.0;
/// A merge's parents' doubts add up until each holds this much sample weight (outlier
/// noise that never settles then costs a merge culprit at most about 40 runs per parent).
const MERGE_PARENT_SAMPLES: f64 = 40.0;
/// A partial-step doubt is dropped once the point's level is known to this fraction of the
/// smallest change of interest and the partial part, one standard error added, is below
/// that size: what could remain is not a change this bisect looks for.
const PARTIAL_PRECISION: f64 = 1.0 / 3.0;

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
pub(super) fn partial_step(
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
