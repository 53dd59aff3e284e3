//! Which change points get a name: steps below the size of interest, merges that only pass
//! a branch's step on, levels pinned by exact metrics.

use super::*;

/// The change point a belief pins down (its culprit when one commit holds `conf`).
pub(super) fn change_point(
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

/// (level of k − level of its parent) / good level, from the samples at hand.
pub(super) fn local_change(graph: &CandidateGraph, ev: &Evidence, k: usize) -> Option<f64> {
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
pub(super) fn within_point_noise(ev: &Evidence, b: &Belief) -> Option<f64> {
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
pub(super) fn merge_parents(graph: &CandidateGraph, m: usize) -> Option<[Point; 2]> {
    match (graph.first_parent(m), graph.parents(m)) {
        (None, [p2]) => Some([Point::Good, Point::Candidate(*p2)]),
        (Some(_), [p1, p2]) => Some([Point::Candidate(*p1), Point::Candidate(*p2)]),
        _ => None,
    }
}

/// The newest commit of the range that both `a` and `b` descend from, or the good commit.
pub(super) fn merge_base(graph: &CandidateGraph, a: Point, b: Point) -> Point {
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
pub(super) fn base_to_measure(
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
pub(super) fn merge_own_step(graph: &CandidateGraph, ev: &Evidence, m: usize) -> Option<f64> {
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
pub(super) fn merges_without_a_step(
    graph: &CandidateGraph,
    ev: &Evidence,
    of_interest: f64,
) -> Vec<usize> {
    ev.samples
        .keys()
        .filter_map(|p| match p {
            Point::Candidate(m) if merge_parents(graph, *m).is_some() => Some(*m),
            _ => None,
        })
        .filter(|&m| merge_own_step(graph, ev, m).is_some_and(|own| own.abs() < of_interest))
        .collect()
}

/// Whether the belief's noise is mostly the commits' own moves: the runs scatter less than
/// a [`PINNED_NOISE_RATIO`]th of it, so a point's level is pinned after [`PINNED_RUNS`]
/// runs and more of them cannot settle what the model misfits.
pub(super) fn levels_pinned(ev: &Evidence, b: &Belief) -> bool {
    within_point_noise(ev, b).is_some_and(|w| w * PINNED_NOISE_RATIO < b.noise)
}

/// Whether commit `c`'s measured step, against the parent it differs from least (a merge
/// carries a change of its own only when it differs from every parent; the good commit when
/// `c` has none in the range), stays under `of_interest` by `z` standard errors of
/// `run_noise`. False while `c` or all of its parents are unmeasured.
pub(super) fn step_below_interest(
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
pub(super) fn apart_below_interest(
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
pub(super) const SMALL_CHANGE_Z: f64 = 1.0;

/// Standard errors by which a change point's own step must stay under the size of interest
/// before an outcome of several changes stops naming its commit (see
/// [`withdraw_small_names`]): the runs' own noise must place the step surely below.
pub(super) const UNNAMED_CHANGE_Z: f64 = 2.0;
/// The same for the one culprit of a `Found`, which its posterior and its verification
/// already hold: three standard errors.
pub(super) const UNNAMED_CULPRIT_Z: f64 = 3.0;

/// An outcome of several changes names a commit only when its own step (against the parent
/// it differs from least) may be of interest. Where the level moves a little at every
/// commit (an instruction count along a history, a near-exact metric with a walk of 0.1% a
/// commit) the multi-change search settles on such moves, each as certain as the change
/// asked about: bisect-sim named commits whose own steps were −0.86%, +0.80%, +0.53%,
/// −0.46% and +0.30% beside (or instead of) the planted +3% one. Such a change point stays
/// in the outcome, its candidates and size listed, without a name; the reason says why.
/// Returns the withdrawn names with their measured steps.
pub(super) fn withdraw_small_names(
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
pub(super) fn range_change(
    graph: &CandidateGraph,
    ev: &Evidence,
    run_noise: f64,
) -> Option<(f64, f64)> {
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
pub(super) fn unname_small_steps(
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
