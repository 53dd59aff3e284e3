//! Reproducing: both endpoints measured, each in two deployments, and a change more likely
//! than not, before the search leans on them.

use super::*;
use decision::Round;

/// The endpoints' decision while they still decide: more of their runs (or, on hosts they
/// do not need, what the search would ask for first), or "not reproduced". None once the
/// search may start. `runs`: what a request asks for at a new point.
pub(super) fn reproduce(r: &Round, runs: u32) -> Option<Decision> {
    let (graph, ev, allowed, b) = (r.graph, r.ev, r.allowed, r.b);
    let (rpr, idle, endpoints, bad_point) = (r.rpr, r.idle, r.endpoints, r.bad_point);
    let (build_in_runs, surely_below_interest) = (r.build_in_runs, r.surely_below_interest);
    let n = graph.len();
    let pending_at = |p: Point| r.pending_at(p);
    let measure = |phase, requests: Vec<Request>, why: String| r.measure(phase, requests, why);
    let min_end = rpr.min(3) as usize;
    let n_end = |p: Point| ev.at(p).len();
    let (endpoint_runs, endpoint_cap) = r.endpoint_budget();
    let endpoints_spent = endpoint_runs >= endpoint_cap / 4;
    // A change that is more likely than not is searched for once half of their cap went to
    // the endpoints.
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
            return Some(Decision::Done(Outcome::NotReproduced { reason }));
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
        let verify_from = r.verify_from();
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
        return Some(measure(Phase::Reproducing, requests, why));
    }
    None
}
