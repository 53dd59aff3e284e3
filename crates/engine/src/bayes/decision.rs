//! One decision: reproduce, search, verify, check for a further change, or end.

use super::*;

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
/// Verification starts at probability 1 − this × (1 − confidence) (0.9 for 0.99, never
/// below 0.5): the couples of the leading commit and its parent are also the runs that best
/// settle the last doubt, so starting early shares them with the end of the search.
const VERIFY_START: f64 = 10.0;
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
/// Above this probability of "only part of the change" (or "beyond it"), `Found` waits for
/// more runs at the good endpoint and the parent.
const PARTIAL_DOUBT: f64 = 0.2;
/// A point with this many samples is measured well: a predictive check that can only ask
/// for more runs at such points ends (when the culprit holds given any further step).
const CHECK_SETTLED_SAMPLES: usize = 10;
/// Above this probability of "only part of the change", spare hosts also search the range
/// for the rest of it.
const PARTIAL_SEARCH: f64 = 0.5;
/// Runs each endpoint needs before endpoints that repeat one value end a bisect as "no
/// change" (see `exact_unearned` in `decide_with`).
const EXACT_NO_CHANGE_RUNS: usize = 5;
/// |t| of the endpoints' difference beyond which a contrary direction hint is reported.
const DIRECTION_T: f64 = 3.0;

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

pub(super) fn decide_with(
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
            let ratios = commit_ratios(within_point_noise(ev, b).unwrap_or(b.noise));
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
                        ratios,
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
