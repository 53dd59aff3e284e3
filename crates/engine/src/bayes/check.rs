//! After a culprit is verified: does one change explain the range? A further step given
//! the first (anywhere in the DAG), a step that is only part of the range's change or goes
//! beyond it, and, when there are two, each change point judged given the other.

use super::*;
use decision::Round;

/// Prior probability of "no further change" on either side of a found change point.
const SIDE_NO_CHANGE_PRIOR: f64 = 0.5;
/// A side whose "no change" falls to this holds another change (the one-step model misfits).
const MISFIT: f64 = 0.02;
/// A side whose "no change" is at least this is taken as clean; between, it is measured more.
const SIDE_CLEAR: f64 = 0.5;
/// Second steps whose conditional fit is computed to see whether the
/// first change point survives them (the rest count as the worst of these).
const SURVIVAL_TERMS: usize = 12;
/// Above this probability of "only part of the change" (or "beyond it"), `Found` waits for
/// more runs at the good endpoint and the parent.
const PARTIAL_DOUBT: f64 = 0.2;
/// The bar instead of [`PARTIAL_DOUBT`] for a merge whose parents all read towards the bad
/// level ([`parents_lean`]): two changed lines meeting at it look so. On git.git's history
/// the one-change check named such a merge alone once its doubt dipped under 0.2 by chance
/// (bisect-sim seed 164000509: parents that carry +1.5% read +0.6%, the good endpoint 0.5%
/// high). A merge with a step of its own has its parents at the good level, so the lower
/// bar seldom holds it back: the standard set's single-change cells keep their outcomes,
/// nine of them at 0.1–1.4 more runs.
const MERGE_LEANING_DOUBT: f64 = 0.05;
/// A point with this many samples is measured well: a predictive check that can only ask
/// for more runs at such points ends (when the culprit holds given any further step).
const CHECK_SETTLED_SAMPLES: usize = 10;
/// Above this probability of "only part of the change", spare hosts also search the range
/// for the rest of it.
const PARTIAL_SEARCH: f64 = 0.5;

/// The decision once `k` (at probability `pk`) has passed its verification against its
/// parents: `Found`, `Changes`, or the runs the check still needs (`runs`: what a request
/// asks for at a new point).
pub(super) fn check_one_change(
    r: &Round,
    findings: &mut Findings,
    k: usize,
    pk: f64,
    runs: u32,
) -> Decision {
    let (graph, prep, ev, settings, allowed, b, conf) =
        (r.graph, r.prep, r.ev, r.settings, r.allowed, r.b, r.conf);
    let (rpr, idle, budget, in_flight) = (r.rpr, r.idle, r.budget, r.in_flight);
    let (build_in_runs, of_interest) = (r.build_in_runs, r.of_interest);
    let pending_at = |p: Point| r.pending_at(p);
    let n_end = |p: Point| ev.at(p).len();
    let measure = |phase, requests: Vec<Request>, why: String| r.measure(phase, requests, why);
    let run_out = |extra: &str| r.run_out(extra);
    let verify_from = r.verify_from();
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
    let bar = if parents_lean(graph, k, b, allowed) {
        MERGE_LEANING_DOUBT
    } else {
        PARTIAL_DOUBT
    };
    let partial_ok = p_partial <= bar;
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
                let untestable = matches!(p, Point::Candidate(c) if ev.untestable.contains(&c));
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
        if holds && partial_ok && !requests.is_empty() && requests.iter().all(well_measured) {
            findings.changes = vec![one_step()];
            return Decision::Done(Outcome::Found {
                culprit: k,
                confidence: pk,
            });
        }
        let (parent, have) = verification(graph, ev, b, allowed, k);
        if requests.is_empty() && pending_at(Point::Candidate(k)) == 0 && pending_at(parent) == 0 {
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
    for (i, (c, bl)) in pair.iter().enumerate() {
        let (c, pc) = (*c, bl.ranked.first().map_or(0.0, |t| t.1));
        // A merge named beside another change point must show a step of its own: the
        // model's two change points may not be all the range holds (see
        // [`merge_step`]). Its parents and their base are measured until they
        // say; one whose parents surely carry the change is no candidate, and this change
        // point is searched for without it.
        let merge = merge_step(graph, ev, c, bl, allowed, of_interest);
        if merge == MergeStep::Parts {
            settled = false;
            let other = pair[1 - i].0;
            let mut not_these = without(other);
            not_these[c] = false;
            let elsewhere = belief(
                graph,
                prep,
                &neutral,
                &not_these,
                SIDE_NO_CHANGE_PRIOR,
                Some(&descendants(graph, other)),
            );
            proposals(&elsewhere, &mut requests);
            let mut cp = change_point(graph, ev, &elsewhere, conf, false);
            if let Some(&(top, _)) = elsewhere.ranked.first() {
                cp.change = local_change(graph, ev, top).unwrap_or(cp.change);
            }
            list.push(cp);
            continue;
        }
        let (parent, cpairs) = verification(graph, ev, bl, allowed, c);
        let ec = evalue(ev, bl, &cpairs, graph.bad());
        let verified = pc >= conf && cpairs.len() >= min_pairs(bl) && ec >= 1.0 / VERIFY_ALPHA;
        let ok = verified && merge == MergeStep::Own;
        settled &= ok;
        if !ok {
            if let (true, MergeStep::Measure(p)) = (verified, merge) {
                let untestable = matches!(p, Point::Candidate(x) if ev.untestable.contains(&x));
                if pending_at(p) == 0 && !untestable {
                    requests.push(Request::new(p, runs.max(2)));
                }
            } else if pc >= verify_from && !ev.untestable.contains(&c) {
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
    // The runs' own noise, not the belief's: in an exact metric the commits' own levels are
    // most of what the belief reads as noise (and the commit-level check below sizes its
    // grid with it).
    let run_noise = within_point_noise(ev, b).unwrap_or(b.noise);
    {
        let small: Vec<bool> = pair
            .iter()
            .map(|(c, bl)| {
                bl.change.abs() < of_interest
                    && step_below_interest(graph, ev, *c, run_noise, of_interest, SMALL_CHANGE_Z)
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
    let ratios = commit_ratios(run_noise);
    if settled {
        for (((c, bl), cp), other) in pair.iter().zip(list.iter_mut()).zip([&named[1], &named[0]]) {
            let carry_other = descendants(graph, *other);
            let mixed = belief_with_commit_levels(
                graph,
                prep,
                &neutral,
                &without(*other),
                SIDE_NO_CHANGE_PRIOR,
                Some(&carry_other),
                ratios,
            );
            if mixed.p[*c] >= conf {
                continue;
            }
            settled = false;
            let between = stretch(&descendants(graph, *c), &carry_other);
            lone |=
                *c != k && (between.len() <= 1 || (*other == k && mixed.no_change >= SIDE_CLEAR));
            *cp = ChangePoint {
                culprit: None,
                ..change_point(graph, ev, bl, conf, false)
            };
            cp.change = local_change(graph, ev, *c).unwrap_or(cp.change);
            // Enough runs that the largest κ of the grid shows against the run
            // noise (κ·W ≥ 2): a commit of two runs says little about whether
            // commits differ beyond their noise.
            let own = (2.0 / ratios[ratios.len() - 1].0).ceil().max(1.0) as u32;
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
        belief_with_commit_levels(
            graph,
            prep,
            settings,
            allowed,
            NO_CHANGE_PRIOR,
            None,
            ratios,
        )
        .p[k]
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
            r.pair_with.is_none() && (pinned || ev.at(r.point).len() >= CHECK_SETTLED_SAMPLES)
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
    measure(Phase::Searching, requests, why)
}
