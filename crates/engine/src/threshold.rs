//! Engine v1: reproduce with a Welch test, then halve git's remaining set, classifying each
//! measured commit by which endpoint its mean is nearer, with more runs while it is ambiguous.
//!
//! Simple and honest about its inputs, but it plugs endpoint estimates into thresholds, so
//! its stated confidence is optimistic under noise. Kept as a baseline for the simulator.

use crate::stats::{Summary, welch_t_test};
use crate::types::{Assessment, Decision, Outcome, Phase, Point, Request, Settings, Verdict};
use crate::{CandidateGraph, Evidence};
use statrs::distribution::{ContinuousCDF, Normal};

/// Runs asked for at most at one commit before its verdict is forced by side.
const MAX_REQUESTS_PER_POINT: u32 = 4;

pub(crate) fn decide(
    graph: &CandidateGraph,
    ev: &Evidence,
    settings: &Settings,
) -> (Decision, Vec<Assessment>) {
    let rpr = settings.runs_per_request.max(1);
    let idle = settings.idle_hosts.max(1) as usize;
    let alpha = (1.0 - settings.confidence).clamp(1e-12, 0.5);
    let bad = graph.bad();
    let n_at = |p: Point| ev.samples.get(&p).map_or(0, |s| s.len() as u32);
    let pending_at = |p: Point| ev.pending.get(&p).copied().unwrap_or(0);
    let complete: u32 = ev.samples.values().map(|s| s.len() as u32).sum();
    let in_flight: u32 = ev.pending.values().sum();
    let endpoints = [Point::Good, Point::Candidate(bad)];
    let empty = Vec::new();
    let good_s = ev.samples.get(&Point::Good).unwrap_or(&empty);
    let bad_s = ev.samples.get(&Point::Candidate(bad)).unwrap_or(&empty);

    // Reproducing.
    let test = welch_t_test(good_s, bad_s);
    let enough = endpoints.iter().all(|&p| n_at(p) >= rpr);
    let reproduced = enough && test.is_some_and(|t| t.p_value < alpha);
    if !reproduced {
        let assessments = assess(graph, ev, &[], &[], None);
        if endpoints.iter().all(|&p| n_at(p) >= 3 * rpr) {
            let reason = match (Summary::of(good_s), Summary::of(bad_s), test) {
                (Some(g), Some(b), Some(t)) => format!(
                    "good mean {:.6} (sd {:.4}, n {}) vs bad mean {:.6} (sd {:.4}, n {}): Welch t = {:.3}, df = {:.1}, p = {:.4} ≥ {:.4}",
                    g.mean, g.stddev, g.n, b.mean, b.stddev, b.n, t.t, t.df, t.p_value, alpha
                ),
                _ => "the endpoints could not be compared".to_string(),
            };
            return (
                Decision::Done(Outcome::NotReproduced { reason }),
                assessments,
            );
        }
        if complete >= settings.max_runs {
            let reason = format!("run cap of {} reached while reproducing", settings.max_runs);
            return (
                Decision::Done(Outcome::Inconclusive {
                    reason,
                    candidates: vec![],
                }),
                assessments,
            );
        }
        let target = if enough {
            (endpoints.iter().map(|&p| n_at(p)).min().unwrap_or(0) / rpr + 1) * rpr
        } else {
            rpr
        };
        let mut requests = Vec::new();
        for p in endpoints {
            let need = target.saturating_sub(n_at(p) + pending_at(p));
            if need > 0 && requests.len() < idle {
                requests.push(Request::new(p, need));
            }
        }
        let requests = cap(
            requests,
            settings.max_runs.saturating_sub(complete + in_flight),
        );
        return if requests.is_empty() {
            (
                Decision::Wait {
                    phase: Phase::Reproducing,
                },
                assessments,
            )
        } else {
            let why =
                format!("measure both endpoints to {target} runs before testing for the change");
            (
                Decision::Measure {
                    phase: Phase::Reproducing,
                    requests,
                    why,
                },
                assessments,
            )
        };
    }

    // Searching: classify measured commits against the midpoint of the endpoints.
    let g = Summary::of(good_s).expect("reproduced");
    let b = Summary::of(bad_s).expect("reproduced");
    let mid = (g.mean + b.mean) / 2.0;
    let sign = (b.mean - g.mean).signum();
    let sd = ((g.variance() * (g.n - 1) as f64 + b.variance() * (b.n - 1) as f64)
        / (g.n + b.n - 2) as f64)
        .sqrt()
        .max(f64::MIN_POSITIVE);
    let z = Normal::standard().inverse_cdf(1.0 - alpha / 2.0);
    let mut goods = Vec::new();
    let mut bads = vec![bad];
    let mut ambiguous = Vec::new();
    let mut confidence = 1.0;
    for (&p, s) in &ev.samples {
        let Point::Candidate(c) = p else { continue };
        if c == bad || ev.untestable.contains(&c) || s.is_empty() {
            continue;
        }
        let x = Summary::of(s).expect("non-empty");
        let t = sign * (x.mean - mid) / (sd / (x.n as f64).sqrt());
        let forced = x.n as u32 >= MAX_REQUESTS_PER_POINT * rpr;
        if t.abs() < z && !forced {
            ambiguous.push(c);
            continue;
        }
        confidence *= Normal::standard().cdf(t.abs());
        if t > 0.0 { bads.push(c) } else { goods.push(c) }
    }
    let remaining = graph.remaining(&goods, &bads);
    let assessments = assess(graph, ev, &goods, &bads, Some(&remaining));
    let live: Vec<usize> = (0..graph.len()).filter(|&c| remaining[c]).collect();
    if live.is_empty() {
        let reason =
            "the verdicts contradict each other (a good commit above a bad one)".to_string();
        return (
            Decision::Done(Outcome::Inconclusive {
                reason,
                candidates: vec![],
            }),
            assessments,
        );
    }
    if live.len() == 1 {
        return (
            Decision::Done(Outcome::Found {
                culprit: live[0],
                confidence,
            }),
            assessments,
        );
    }
    let uniform = |why: &str| {
        let p = 1.0 / live.len() as f64;
        Outcome::Inconclusive {
            reason: why.to_string(),
            candidates: live.iter().map(|&c| (c, p)).collect(),
        }
    };
    if complete >= settings.max_runs {
        let why = format!(
            "run cap of {} reached with {} candidates left",
            settings.max_runs,
            live.len()
        );
        return (Decision::Done(uniform(&why)), assessments);
    }

    // Re-measure ambiguous commits that still matter, then split what remains.
    let mut requests: Vec<Request> = ambiguous
        .iter()
        .filter(|&&c| remaining[c] && pending_at(Point::Candidate(c)) == 0)
        .map(|&c| Request::new(Point::Candidate(c), rpr))
        .collect();
    requests.truncate(idle);
    let mut skip: Vec<bool> = (0..graph.len())
        .map(|c| ev.untestable.contains(&c))
        .collect();
    for &c in bads.iter().chain(&ambiguous) {
        skip[c] = true;
    }
    let in_flight_points: Vec<usize> = ev
        .pending
        .iter()
        .filter_map(|(p, &k)| match p {
            Point::Candidate(c) if k > 0 => Some(*c),
            _ => None,
        })
        .collect();
    let slots = idle - requests.len();
    if slots > 0 {
        for c in split_points(graph, &remaining, &skip, slots + in_flight_points.len()) {
            if requests.len() >= idle {
                break;
            }
            if !in_flight_points.contains(&c)
                && requests.iter().all(|r| r.point != Point::Candidate(c))
            {
                requests.push(Request::new(Point::Candidate(c), rpr));
            }
        }
    }
    let useful = graph
        .best_split(&remaining, &skip)
        .is_some_and(|(_, d)| d > 0);
    if requests.is_empty() && in_flight == 0 && ambiguous.iter().all(|&c| !remaining[c]) && !useful
    {
        let why = format!(
            "{} candidates remain and none can be told apart: the others are untestable (build or boot failure)",
            live.len()
        );
        return (Decision::Done(uniform(&why)), assessments);
    }
    let requests = cap(
        requests,
        settings.max_runs.saturating_sub(complete + in_flight),
    );
    if requests.is_empty() {
        return (
            Decision::Wait {
                phase: Phase::Searching,
            },
            assessments,
        );
    }
    let why = format!(
        "{} candidates remain; measuring at their halving points",
        live.len()
    );
    (
        Decision::Measure {
            phase: Phase::Searching,
            requests,
            why,
        },
        assessments,
    )
}

/// Trims requests so their runs fit in `budget`.
fn cap(mut requests: Vec<Request>, mut budget: u32) -> Vec<Request> {
    requests.retain_mut(|r| {
        r.runs = r.runs.min(budget);
        budget -= r.runs;
        r.runs > 0
    });
    requests
}

/// Up to `k` commits of `set` whose ancestor counts sit nearest the quantiles i/(k+1).
fn split_points(graph: &CandidateGraph, set: &[bool], skip: &[bool], k: usize) -> Vec<usize> {
    let ones: Vec<f64> = set.iter().map(|&s| if s { 1.0 } else { 0.0 }).collect();
    let total: f64 = ones.iter().sum();
    let w = graph.weights(set, &ones);
    let choosable: Vec<usize> = (0..graph.len()).filter(|&c| set[c] && !skip[c]).collect();
    let mut chosen: Vec<usize> = Vec::new();
    for i in 1..=k {
        let target = total * i as f64 / (k + 1) as f64;
        let best = choosable
            .iter()
            .copied()
            .filter(|c| !chosen.contains(c) && w[*c] < total)
            .min_by(|&a, &b| {
                (w[a] - target)
                    .abs()
                    .total_cmp(&(w[b] - target).abs())
                    .then(a.cmp(&b))
            });
        if let Some(c) = best {
            chosen.push(c);
        }
    }
    chosen
}

/// Verdicts for the good endpoint and every candidate.
fn assess(
    graph: &CandidateGraph,
    ev: &Evidence,
    goods: &[usize],
    bads: &[usize],
    remaining: Option<&[bool]>,
) -> Vec<Assessment> {
    let below_good = graph.ancestors(goods);
    let mut above_bad = vec![false; graph.len()];
    for &b in bads {
        above_bad[b] = true;
    }
    for c in 0..graph.len() {
        if graph.parents(c).iter().any(|&p| above_bad[p]) {
            above_bad[c] = true;
        }
    }
    let live = remaining.map_or(0, |r| r.iter().filter(|&&x| x).count());
    let mut out = vec![Assessment {
        point: Point::Good,
        verdict: Verdict::Good,
        culprit_probability: None,
        bad_probability: None,
    }];
    for c in 0..graph.len() {
        let verdict = if ev.untestable.contains(&c) {
            Verdict::Skipped
        } else if below_good[c] {
            Verdict::Good
        } else if above_bad[c] {
            Verdict::Bad
        } else {
            Verdict::Unknown
        };
        let culprit_probability = remaining.map(|r| if r[c] { 1.0 / live as f64 } else { 0.0 });
        out.push(Assessment {
            point: Point::Candidate(c),
            verdict,
            culprit_probability,
            bad_probability: None,
        });
    }
    out
}
