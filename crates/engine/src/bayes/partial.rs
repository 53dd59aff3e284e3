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
/// that size: what could remain is not a change this bisect looks for. A merge's parents
/// are judged by the sum of their parts (and the root of the sum of their variances).
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
/// surely below `of_interest` (see [`PARTIAL_PRECISION`]) raises no doubt; a merge's parents
/// only when the sum of their parts is.
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
    // Each check's reading: the point's mean against its reference, and the standard error of
    // that difference. With the noise shown to differ between the sides, each check at its
    // own side's noise (a parent against the good level, k against the bad one): the pooled
    // noise made a noisier bad side read as a partial step.
    let read = |point: Point, reference: Point, level: f64, n_ref: f64| {
        let &(m, n_p) = b.means.get(&point)?;
        let side_sigma = match b.noise_ratio {
            Some(r2) if reference == Point::Good => sigma * (2.0 / (1.0 + r2)).sqrt(),
            Some(r2) => sigma * (2.0 * r2 / (1.0 + r2)).sqrt(),
            None => sigma,
        };
        Some((
            m - level,
            side_sigma * (1.0 / n_p + 1.0 / n_ref.max(1.0)).sqrt(),
            n_p,
        ))
    };
    // A point measured far past the size of interest that still reads a little off its
    // reference is noise that lingers, not a change: the posterior of "partial" falls only
    // as 1/√n at a fixed distance in standard errors, and a CV 5% bisect spent 1400 runs on
    // k and the bad endpoint (600 each, 2.5 SE apart, 0.7% of a 3% step) and ran out of its
    // 2000 with the culprit at 1.0000.
    let settled =
        |x: f64, se: f64| se <= PARTIAL_PRECISION * of_interest && x.abs() + se < of_interest;
    // A merge's parents are settled together: the parts they carry add up at the merge (signed:
    // two lines' changes of one sign add, and readings of either sign are noise that cancels),
    // so two parents each under the size of interest may not be under it together (git.git,
    // two +1.5% steps, seed 367001118: parents at +0.53% ± 0.31 and +0.35% ± 0.36 against a
    // good endpoint that read high; the first one's doubt was dropped as surely under the 1%
    // of interest, and the merge was named alone).
    let parent_reads: Vec<(f64, f64)> = checks
        .iter()
        .filter(|c| c.1 == Point::Good)
        .filter_map(|&(p, r, l, n, _)| read(p, r, l, n).map(|(x, se, _)| (x, se)))
        .collect();
    let parents_settled = merge
        && parent_reads
            .iter()
            .all(|&(_, se)| se <= PARTIAL_PRECISION * of_interest)
        && settled(
            parent_reads.iter().map(|r| r.0).sum::<f64>(),
            parent_reads.iter().map(|r| r.1 * r.1).sum::<f64>().sqrt(),
        );
    for (point, reference, level, n_ref, towards) in checks {
        let Some((x, se, n_p)) = read(point, reference, level, n_ref) else {
            continue;
        };
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
        let surely_small = if merge && reference == Point::Good {
            parents_settled
        } else {
            settled(x, se)
        };
        let post = if surely_small {
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

/// A parent reads towards the bad level when its mean is past the good level's by more than
/// this many standard errors of their difference.
const LEANING_SE: f64 = 1.0;

/// Whether `k` merges two or more candidates (`allowed`) that all read towards the bad level
/// ([`LEANING_SE`]): what two changed lines meeting at `k` look like, even where the
/// partial-step doubt reads low. Levels and noise as [`partial_step`] takes them.
pub(super) fn parents_lean(graph: &CandidateGraph, k: usize, b: &Belief, allowed: &[bool]) -> bool {
    let parents: Vec<usize> = graph
        .parents(k)
        .iter()
        .copied()
        .filter(|&p| allowed[p])
        .collect();
    let (Some(&(good, n_good)), Some(&(bad, _))) = (
        b.means.get(&Point::Good),
        b.means.get(&Point::Candidate(graph.bad())),
    ) else {
        return false;
    };
    let sigma = b.planning_noise * (1.0 + good).abs();
    let towards = (bad - good).signum();
    parents.len() > 1
        && sigma > 0.0
        && parents.iter().all(|&p| {
            b.means.get(&Point::Candidate(p)).is_some_and(|&(m, n)| {
                let se = sigma * (1.0 / n + 1.0 / n_good.max(1.0)).sqrt();
                (m - good) * towards > LEANING_SE * se
            })
        })
}

/// Prior probability that a merge named beside another change point has no step of its own
/// (see [`merge_step`]). Even odds: the name rests on the four points' runs, not on a prior
/// that favours it.
const MERGE_PARTS_PRIOR: f64 = 0.5;
/// A merge is named only below this probability that it has no step of its own, and is no
/// candidate above 1 − this. Three +1.5% steps at CV 2%, 100 bisects: at 0.05, 2 named a
/// merge of two changed lines (one whose base read 1.5 standard errors high; one named
/// alone, by the one-change check, which does not apply this); at 0.01, only the latter.
/// The two-change cells took 1–5% more runs at 0.01, within a trial of the same outcomes.
const MERGE_DOUBT: f64 = 0.01;
/// Runs each of the four points needs before the merge is ruled out: in a first form of
/// this rule, four runs of a base whose noise drew +3.8, +0.8, +2.4 and +1.2 standard
/// deviations ruled out a merge with a +3% step of its own, and the check searched for the
/// change elsewhere until the run cap.
const MERGE_RULED_OUT_RUNS: usize = 10;

/// What a merge's parents and their base say of its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MergeStep {
    /// Not a merge of two candidates, or one with a step of its own.
    Own,
    /// Undecided: this point's runs would settle it best.
    Measure(Point),
    /// Its parents carry the change between them: not a culprit.
    Parts,
}

/// Whether merge `k` has a step of its own, or its parents already carry the change between
/// them (two changed lines meeting at k).
///
/// A merge introduces a change of its own when level(k) − level(p₁) − level(p₂) +
/// level(base) ≠ 0 ([`merge_own_step`], which the exact-metric rule reads), the base being
/// the parents' latest common ancestor ([`merge_base`]; the good commit when the branch
/// forked before the range): whatever came in on either line since the base cancels.
/// Verification against each parent does not see this: with one change on each line since
/// the base, k differs from both parents by the other line's change. Where the
/// model holds two change points, a third change elsewhere in the range leaves such a merge
/// as the best single explanation of the two lines, and it was named (bisect-sim, three +1%
/// steps at CV 0.5%: 8 of 100 bisects named a merge whose parents each carried one).
///
/// The own step is read from the four points' runs and held against two hypotheses under
/// even odds ([`MERGE_PARTS_PRIOR`]): "no step of its own" (0) and "k's step is its own"
/// (k against the parent it differs from least: what verification passed it on). Levels
/// are the runs' plain means against the good one's, with the runs' own noise. Read from
/// the belief's levels instead (drift taken out, robust weights), two +1.5% steps under a
/// drift of 3% per 100 runs were both named in 51 of 100 bisects, 25 running out, against
/// 72 and 5 with the means (the same as without this rule); the three-change and git.git
/// cells read the same either way.
///
/// `Own` for a commit that is not a merge of two parents that may carry the change
/// (`allowed`: in first-parent mode a merge answers for its topic branch), and for a step
/// under half the size of interest: where the level walks a little at every commit, every
/// merge's lines carry parts of its step, and the rule for small steps decides (with this
/// check on every step, a walk of 0.1% a commit at CV 0.1% took 339.4 runs a bisect instead
/// of 262.0).
pub(super) fn merge_step(
    graph: &CandidateGraph,
    ev: &Evidence,
    k: usize,
    b: &Belief,
    allowed: &[bool],
    of_interest: f64,
) -> MergeStep {
    let &[p1, p2] = graph.parents(k) else {
        return MergeStep::Own;
    };
    if !allowed[p1] || !allowed[p2] {
        return MergeStep::Own;
    }
    let base = merge_base(graph, Point::Candidate(p1), Point::Candidate(p2));
    let points = [
        Point::Candidate(k),
        Point::Candidate(p1),
        Point::Candidate(p2),
        base,
    ];
    let g = level_of_good(ev);
    let mut read = [(0.0, 0usize); 4];
    for (slot, p) in read.iter_mut().zip(points) {
        let v: Vec<f64> = ev.at(p).iter().copied().filter(|x| x.is_finite()).collect();
        match mean(&v) {
            Some(m) => *slot = (m / g - 1.0, v.len()),
            None => return MergeStep::Measure(p),
        }
    }
    let sigma = within_point_noise(ev, b).unwrap_or(b.noise);
    if sigma <= 0.0 || !sigma.is_finite() {
        return MergeStep::Own;
    }
    let [(mk, _), (m1, _), (m2, _), (mb, _)] = read;
    let step = [mk - m1, mk - m2]
        .into_iter()
        .min_by(|x, y| x.abs().total_cmp(&y.abs()))
        .expect("two parents");
    if step.abs() < 0.5 * of_interest {
        return MergeStep::Own;
    }
    let own = mk - m1 - m2 + mb;
    let se = sigma * read.iter().map(|r| 1.0 / r.1 as f64).sum::<f64>().sqrt();
    let log_bf = (-(own / se).powi(2) + ((own - step) / se).powi(2)) / 2.0;
    let odds = MERGE_PARTS_PRIOR / (1.0 - MERGE_PARTS_PRIOR) * log_bf.min(700.0).exp();
    let doubt = odds / (1.0 + odds);
    let (least, fewest) = (0..4)
        .map(|i| (points[i], read[i].1))
        .min_by_key(|x| x.1)
        .expect("four points");
    if doubt <= MERGE_DOUBT {
        MergeStep::Own
    } else if doubt >= 1.0 - MERGE_DOUBT && fewest >= MERGE_RULED_OUT_RUNS {
        MergeStep::Parts
    } else {
        MergeStep::Measure(least)
    }
}
