//! What to measure next: the search's proposals, runs per request, fresh deployments and
//! the budget's cap on a round.

use super::*;

/// Runs worth taking on one deployment when a boot's level varies ρ times the runs' variance
/// and a boot costs `boot_in_runs` runs (B, `Costs::boot_in_runs`): a deployment of m runs
/// costs B + m and its mean carries σ²(ρ + 1/m), so the information per unit of machine
/// time, 1 / ((ρ + 1/m)(B + m)), is largest at m = √(B/ρ).
pub(super) fn runs_per_boot(boot_ratio: f64, boot_in_runs: f64) -> u32 {
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
pub(super) fn deploy_fresh(
    mut requests: Vec<Request>,
    ev: &Evidence,
    boot_ratio: f64,
) -> Vec<Request> {
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

pub(super) fn cap(mut requests: Vec<Request>, mut budget: u32) -> Vec<Request> {
    requests.retain_mut(|r| {
        let per_run = if r.pair_with.is_some() { 2 } else { 1 };
        r.runs = r.runs.min(budget / per_run);
        budget -= r.runs * per_run;
        r.runs > 0
    });
    requests
}

/// Quantile proposals over a belief's culprit mass: `slots` commits at i/(slots+1), pending
/// measurements covering their quantile, preferring built commits when a build is dear.
#[expect(
    clippy::too_many_arguments,
    reason = "one call site per search; all inputs differ"
)]
pub(super) fn propose(
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
pub(super) fn runs_for(d: f64, build_in_runs: f64, rpr: u32) -> u32 {
    let z = (RUNS_Z * (1.0 + build_in_runs).powf(0.25)).clamp(RUNS_Z, 2.5);
    ((z / d.max(1e-3)).powi(2).ceil() as u32).clamp(1, rpr.max(1))
}
