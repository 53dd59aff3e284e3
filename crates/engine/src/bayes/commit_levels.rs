//! Commits that run at levels of their own (code layout): a change point is held against a
//! model in which every commit has a level of its own, weighed over a grid of its variance.

use super::*;

/// A commit's own level variances over the run variance (κ) a change point of a
/// multi-change outcome is checked under, with their prior probabilities. κ = 0 (commits
/// of a stretch run alike) is the prior's favourite: at 0.5 the check kept both of two real
/// +1.5% steps in 63% of bisect-sim's trials, at 0.8 in 77.5% and at 0.9 in 80% (84.5%
/// unchecked; the stretch's commits measured in all three), with layout noise of 0.5% a
/// commit naming a wrong commit in 2% of trials at each (14% unchecked). The grid ends at
/// a commit's own level half the run noise: with κ = 1 in it, the check (and a search
/// that never measures enough commits to rule so large a κ out) held clean culprits back.
pub(super) const COMMIT_RATIOS: [(f64, f64); 4] = [
    (0.0, 0.9),
    (1.0 / 64.0, 0.1 / 3.0),
    (1.0 / 16.0, 0.1 / 3.0),
    (0.25, 0.1 / 3.0),
];

/// The shares of the level a commit's own level may take beside the grid in noise units
/// (relative standard deviations): a layout's size is the binary's, not the runs'. At CV 2%
/// they are the grid itself; at a quiet metric they are many times the run noise, which a
/// grid in noise units cannot hold: at CV 0.2% with 0.5% a commit, the largest κ of the grid
/// (a commit's own level a tenth of a percent) read each commit's own level as a step, and
/// 17 of 100 bisect-sim bisects named a second change beside the culprit.
const LAYOUT_SHARES: [f64; 3] = [0.0025, 0.005, 0.01];

/// [`COMMIT_RATIOS`] for runs of relative noise `run_noise`: each κ at least the one that
/// puts a commit's own level at its share of [`LAYOUT_SHARES`]. Noisy metrics keep the grid
/// (measured there); runs without noise keep it too (their κ would be unbounded, and an
/// exact metric's own levels are judged apart: `naming`).
pub(super) fn commit_ratios(run_noise: f64) -> [(f64, f64); 4] {
    let mut out = COMMIT_RATIOS;
    if run_noise > NOISELESS && run_noise.is_finite() {
        for (o, share) in out[1..].iter_mut().zip(LAYOUT_SHARES) {
            o.0 = o.0.max((share / run_noise).powi(2));
        }
    }
    out
}

/// The belief (about a further change point when `fixed` holds the commits that carry a
/// known one) with every commit's own level weighed in (see [`commit_levels_weighed`]),
/// under the κ grid `ratios` ([`commit_ratios`]).
pub(crate) fn belief_with_commit_levels(
    graph: &CandidateGraph,
    prep: &Prepared,
    settings: &Settings,
    allowed: &[bool],
    no_change_prior: f64,
    fixed: Option<&[bool]>,
    ratios: [(f64, f64); 4],
) -> Belief {
    commit_levels_weighed(ratios.map(|(kappa, _)| {
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
pub(super) fn stretch(carry_a: &[bool], carry_b: &[bool]) -> Vec<usize> {
    (0..carry_a.len())
        .filter(|&c| carry_a[c] != carry_b[c])
        .collect()
}

/// A commit of a `stretch` to measure: the one whose measured neighbours in it are farthest
/// (never measured first; a stretch of one testable commit has nothing to add, so None).
pub(super) fn stretch_point(ev: &Evidence, stretch: &[usize], enough: usize) -> Option<usize> {
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
pub(super) fn commit_levels_weighed(beliefs: [Belief; COMMIT_RATIOS.len()]) -> Belief {
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
