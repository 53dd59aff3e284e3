//! One decision: reproduce, search, verify, check for a further change, or end.

use super::*;

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
    let r = Round::new(graph, prep, settings, allowed, b, conf);
    let Round {
        ev,
        rpr,
        spent,
        endpoints,
        build_in_runs,
        of_interest,
        surely_below_interest,
        ..
    } = r;
    let prediction = r.prediction;
    let n = graph.len();
    let pending_at = |p: Point| r.pending_at(p);
    let top = |limit| r.top(limit);
    let give_up = |within: &str, ended: &str, small: bool| r.give_up(within, ended, small);
    let run_out = |extra: &str| r.run_out(extra);
    let measure = |phase, requests: Vec<Request>, why: String| r.measure(phase, requests, why);

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

    if let Some(decision) = reproduce(&r, runs) {
        return decision;
    }
    let (endpoint_runs, endpoint_cap) = r.endpoint_budget();
    findings.prediction = Some(prediction);

    // Verifying: one commit holds the target; confirm it against its parent on one host.
    let (k, pk) = (0..n)
        .map(|c| (c, b.p[c]))
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .expect("non-empty graph");
    let verify_from = r.verify_from();
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
            return check_one_change(&r, findings, k, pk, runs);
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

    search(&r, d, runs)
}

/// What every phase of one decision reads: the evidence, the belief, the settings, and
/// what follows from them before any phase starts.
pub(super) struct Round<'a> {
    pub(super) graph: &'a CandidateGraph,
    pub(super) prep: &'a Prepared<'a>,
    pub(super) ev: &'a Evidence,
    pub(super) settings: &'a Settings,
    pub(super) allowed: &'a [bool],
    pub(super) b: &'a Belief,
    pub(super) conf: f64,
    /// Runs a request asks for at most.
    pub(super) rpr: u32,
    /// Hosts free for this round's requests.
    pub(super) idle: usize,
    pub(super) spent: u32,
    pub(super) in_flight: u32,
    /// Runs left under `max_runs`, those in flight counted as spent.
    pub(super) budget: u32,
    pub(super) bad_point: Point,
    pub(super) endpoints: [Point; 2],
    pub(super) build_in_runs: f64,
    /// What the target confidence still needs, as predicted from this belief.
    pub(super) prediction: Prediction,
    /// The smallest change this bisect looks for.
    pub(super) of_interest: f64,
    /// The step as the belief sees it and as the endpoints measure it, both below
    /// `of_interest`; `surely_below_interest`: the endpoints' by one standard error too.
    pub(super) below_interest: bool,
    pub(super) surely_below_interest: bool,
    /// Runs each commit the search measures gets when the bad endpoint shows an
    /// intermittent change (`intermittent`), a few requests' worth at most.
    pub(super) to_show: Option<u32>,
}

impl<'a> Round<'a> {
    fn new(
        graph: &'a CandidateGraph,
        prep: &'a Prepared<'a>,
        settings: &'a Settings,
        allowed: &'a [bool],
        b: &'a Belief,
        conf: f64,
    ) -> Self {
        let ev = prep.ev;
        let rpr = settings.runs_per_request.max(1);
        let spent = ev.runs_spent();
        let in_flight = ev.runs_pending();
        let bad_point = Point::Candidate(graph.bad());
        let of_interest = smallest_of_interest(settings);
        // The endpoints' step and its standard error (a step below the size of interest by
        // one of these ends the endpoints' search for a change early: at CV 5% a real +3%
        // step measured after 50 runs a side comes out below 1% about once in 40 bisects).
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
        Round {
            graph,
            prep,
            ev,
            settings,
            allowed,
            b,
            conf,
            rpr,
            idle: settings.idle_hosts.max(1) as usize,
            spent,
            in_flight,
            budget: settings.max_runs.saturating_sub(spent + in_flight),
            bad_point,
            endpoints: [Point::Good, bad_point],
            build_in_runs: ev.costs.build_in_runs(),
            prediction: predict(b, ev.costs, conf, settings),
            of_interest,
            below_interest,
            surely_below_interest: below_interest
                && endpoints_change.abs() + endpoints_se < of_interest,
            to_show: b.to_show.map(|k| k.min(4 * rpr)),
        }
    }

    /// The probability at which the top commit's verification starts: a little before the
    /// target, since culprit-vs-parent pairs are also the runs that best settle the last
    /// doubt (is the parent good, is the culprit bad), so the end of the search and the
    /// verification share them.
    pub(super) fn verify_from(&self) -> f64 {
        (1.0 - VERIFY_START * (1.0 - self.conf))
            .max(0.5)
            .min(self.conf)
    }

    /// Runs the endpoints have had (failed ones counted), and what they may spend on "is
    /// there a change at all": the budget, but not past a fixed cap (a higher ceiling is
    /// there for hard searches, not for A/A ranges).
    pub(super) fn endpoint_budget(&self) -> (u32, u32) {
        let ev = self.ev;
        let runs = self
            .endpoints
            .iter()
            .map(|&p| ev.at(p).len() as u32 + ev.failed.get(&p).copied().unwrap_or(0))
            .sum();
        (runs, self.settings.max_runs.min(ENDPOINT_RUNS_CAP))
    }

    pub(super) fn pending_at(&self, p: Point) -> u32 {
        self.ev.pending.get(&p).copied().unwrap_or(0)
    }

    /// The smallest set of candidates that holds the target, at most `limit` of them.
    pub(super) fn top(&self, limit: usize) -> Vec<(usize, f64)> {
        smallest_set(&self.b.ranked, self.conf, limit)
    }

    /// What more the prediction `p` says would be needed, in words.
    pub(super) fn more(&self, p: &Prediction) -> String {
        match p.machine_secs {
            Some(s) => format!(
                "about {} more runs, {} builds and {:.0} s of machine time would be needed",
                p.runs, p.builds, s
            ),
            None => format!(
                "about {} more runs and {} builds would be needed",
                p.runs, p.builds
            ),
        }
    }

    /// The end of a bisect that cannot go on. `within`: "within the run cap of 400",
    /// `ended`: "run cap of 400 reached"; `small`: the step counts as below the size of
    /// interest.
    pub(super) fn give_up(&self, within: &str, ended: &str, small: bool) -> Decision {
        let (graph, b) = (self.graph, self.b);
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
                    100.0 * self.of_interest,
                    self.more(&self.prediction),
                    describe(graph, b)
                ),
            });
        }
        Decision::Done(Outcome::Inconclusive {
            reason: format!(
                "{ended}; {}; {}",
                self.more(&self.prediction),
                describe(graph, b)
            ),
            candidates: self.top(20),
        })
    }

    /// The run cap reached (`extra` says more about why).
    pub(super) fn run_out(&self, extra: &str) -> Decision {
        let cap = self.settings.max_runs;
        self.give_up(
            &format!("within the run cap of {cap}{extra}"),
            &format!("run cap of {cap} reached{extra}"),
            self.below_interest,
        )
    }

    /// `requests` as this round may ask for them: fresh deployments, the runs an
    /// intermittent change needs, under the budget; waiting, or out of runs, when none is left.
    pub(super) fn measure(&self, phase: Phase, requests: Vec<Request>, why: String) -> Decision {
        let ev = self.ev;
        let mut requests = deploy_fresh(requests, ev, self.b.boot_ratio);
        if let Some(k) = self.to_show {
            for r in requests
                .iter_mut()
                .filter(|r| r.pair_with.is_none() && !self.endpoints.contains(&r.point))
            {
                let have = ev.at(r.point).len() as u32 + self.pending_at(r.point);
                r.runs = r.runs.max(k.saturating_sub(have));
            }
        }
        let requests = cap(requests, self.budget);
        if requests.is_empty() {
            if self.in_flight == 0 {
                return self.run_out("");
            }
            return Decision::Wait { phase };
        }
        Decision::Measure {
            phase,
            requests,
            why,
        }
    }
}
