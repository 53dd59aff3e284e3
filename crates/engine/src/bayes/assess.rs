//! What a belief says in words and in ranked sets: the top candidates, the smallest set
//! that holds the target, the one-line description every decision carries.

use super::*;

/// Candidates by decreasing probability until they hold `target` (at most `limit` of them).
pub(super) fn ranked(p: &[f64], limit: usize) -> Vec<(usize, f64)> {
    let max = p.iter().copied().fold(0.0, f64::max);
    let mut order: Vec<usize> = (0..p.len())
        .filter(|&c| p[c] > 0.0 && p[c] >= 1e-12 * max)
        .collect();
    let by_p = |a: &usize, b: &usize| p[*b].total_cmp(&p[*a]).then(a.cmp(b));
    if order.len() > limit {
        order.select_nth_unstable_by(limit, by_p);
        order.truncate(limit);
    }
    order.sort_by(by_p);
    order.into_iter().map(|c| (c, p[c])).collect()
}

/// The most probable candidates, by decreasing probability, until they hold `target` (at most
/// `limit` of them), from a [`ranked`] list.
pub(super) fn smallest_set(
    ranked: &[(usize, f64)],
    target: f64,
    limit: usize,
) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    let mut acc = 0.0;
    for &(c, p) in ranked.iter().take(limit) {
        out.push((c, p));
        acc += p;
        if acc >= target {
            break;
        }
    }
    out
}

pub(super) fn short(graph: &CandidateGraph, c: usize) -> String {
    let id = graph.id(c);
    id.chars().take(12).collect()
}

pub(super) fn describe(graph: &CandidateGraph, b: &Belief) -> String {
    let mut s = format!(
        "P(no change) {:.4}; change {:+.2}% with noise {:.2}% ({}) over {} samples",
        b.no_change,
        100.0 * b.change,
        100.0 * b.noise,
        match (b.tail, b.wild) {
            (Some(nu), _) => format!("student-t {nu}"),
            (None, Some(eps)) => format!("gaussian, {:.0}% wild runs", 100.0 * eps),
            (None, None) => "gaussian".to_string(),
        },
        b.samples
    );
    if b.boot_ratio > 0.0 {
        // Said where a reader of the status sees why runs of one boot count for less.
        let _ = write!(
            s,
            ", each deployment's own level {:.2}× the run variance",
            b.boot_ratio
        );
    }
    s.push_str("; top:");
    for (c, p) in smallest_set(&b.ranked, 0.99, 5) {
        let _ = write!(s, " {} {:.4}", short(graph, c), p);
    }
    s
}

pub(super) fn assess(
    graph: &CandidateGraph,
    ev: &Evidence,
    b: &Belief,
    conf: f64,
) -> Vec<Assessment> {
    let mut out = Vec::with_capacity(graph.len() + 1);
    out.push(Assessment {
        point: Point::Good,
        verdict: Verdict::Good,
        culprit_probability: None,
        bad_probability: Some(0.0),
    });
    for c in 0..graph.len() {
        let verdict = if ev.untestable.contains(&c) {
            Verdict::Skipped
        } else if b.bad[c] >= conf {
            Verdict::Bad
        } else if 1.0 - b.bad[c] >= conf {
            Verdict::Good
        } else {
            Verdict::Unknown
        };
        out.push(Assessment {
            point: Point::Candidate(c),
            verdict,
            culprit_probability: Some(b.p[c]),
            bad_probability: Some(b.bad[c]),
        });
    }
    out
}
