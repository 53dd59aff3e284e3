//! Searching: where the culprit mass splits best, with each side's level kept known; and
//! the ends of a search that nothing can split.

use super::*;
use decision::Round;

/// Each endpoint is topped up to at least this share of all samples while searching.
const ENDPOINT_SHARE: f64 = 0.12;
/// An endpoint is measured when its side holds less than this fraction of the other's
/// samples and fewer than `SIDE_PRECISION / d²` (d: the change in noise units).
const BALANCE: f64 = 0.5;
const SIDE_PRECISION: f64 = 0.0;
/// An endpoint holds enough samples once its level is known to 1/this of the change... in
/// noise units: n ≥ (this / d)².
const ENDPOINT_DECIDED: f64 = 10.0;

/// The search's requests for this round: the endpoints of a side that falls behind, then
/// commits at the quantiles of the culprit mass (`propose`). Ends the bisect where no
/// testable commit can split the candidates, or where every commit in the way has its level
/// pinned. `d`: the step in noise units; `runs`: what a request asks for at a new point.
pub(super) fn search(r: &Round, d: f64, runs: u32) -> Decision {
    let (graph, ev, allowed, b, conf) = (r.graph, r.ev, r.allowed, r.b, r.conf);
    let (idle, spent, in_flight) = (r.idle, r.spent, r.in_flight);
    let (endpoints, bad_point, build_in_runs) = (r.endpoints, r.bad_point, r.build_in_runs);
    let n = graph.len();
    let pending_at = |p: Point| r.pending_at(p);
    let n_end = |p: Point| ev.at(p).len();
    let top = |limit| r.top(limit);
    let measure = |phase, requests: Vec<Request>, why: String| r.measure(phase, requests, why);

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
