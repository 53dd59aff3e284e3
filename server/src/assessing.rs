//! Stores one round of the engine's assessments without rewriting them all.
//!
//! The advance holding the bisect's lock compares the new assessments with the copy of what
//! was last written (kept with the graph, reloaded from `bisect_assessments` when another
//! replica wrote since) and upserts only the candidates whose verdict changed or whose culprit
//! probability moved by at least `P_STEP`. `bisects.assessments` keeps the measured and skipped
//! points only, `bisects.candidates_remaining` the size of the credible set, and `bisects.belief`
//! the belief in brief (`progress::Belief`) that the running bisect's page polls.

use crate::graphs::{AssessedCopy, LoadedGraph};
use crate::store::assessments::{self, RoundWrite};
use perfbisect_engine::{Assessment, Evidence, Point};
use perfbisect_wire::states::Verdict;

/// Smallest change of a culprit probability worth a write (below it the page and the API
/// show the same thing).
pub const P_STEP: f32 = 1e-4;

fn verdict(v: perfbisect_engine::Verdict) -> Verdict {
    match v {
        perfbisect_engine::Verdict::Good => Verdict::Good,
        perfbisect_engine::Verdict::Bad => Verdict::Bad,
        perfbisect_engine::Verdict::Unknown => Verdict::Unknown,
        perfbisect_engine::Verdict::Skipped => Verdict::Skipped,
    }
}

fn moved(old: Option<f32>, new: Option<f32>) -> bool {
    match (old, new) {
        (None, None) => false,
        (None, Some(x)) | (Some(x), None) => x.abs() >= P_STEP,
        (Some(a), Some(b)) => (a - b).abs() >= P_STEP,
    }
}

/// The changed candidates: (idx, verdict, p) for every one that differs from `known`.
pub fn changes(
    known: &[(Verdict, Option<f32>)],
    assessments: &[Assessment],
) -> Vec<(i32, Verdict, Option<f32>)> {
    let mut out = Vec::new();
    for a in assessments {
        let Point::Candidate(i) = a.point else {
            continue;
        };
        let new = (verdict(a.verdict), a.culprit_probability.map(|p| p as f32));
        let old = known.get(i).copied().unwrap_or((Verdict::Unknown, None));
        if new.0 != old.0 || moved(old.1, new.1) {
            out.push((i as i32, new.0, new.1));
        }
    }
    out
}

/// How many candidates are still in the running: with probabilities, the size of the smallest
/// set holding `confidence` of the mass (the credible set); without, the undecided ones.
pub fn remaining(assessments: &[Assessment], confidence: f64) -> usize {
    let candidates = assessments
        .iter()
        .filter(|a| matches!(a.point, Point::Candidate(_)));
    let ps: Vec<f64> = candidates
        .clone()
        .filter_map(|a| a.culprit_probability)
        .collect();
    if ps.is_empty() {
        return candidates
            .filter(|a| a.verdict == perfbisect_engine::Verdict::Unknown)
            .count();
    }
    crate::progress::largest_holding(&ps, confidence)
}

/// Writes the round: changed rows, the measured points' JSON, the credible-set size.
pub async fn store_round(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    loaded: &LoadedGraph,
    stored_round: i64,
    evidence: &Evidence,
    assessments: &[Assessment],
    confidence: f64,
) -> sqlx::Result<()> {
    let graph = &loaded.graph;
    let started = std::time::Instant::now();
    let taken = loaded.assessed.lock().expect("assessed copy").take();
    let mut copy = match taken {
        Some(c) if c.round == stored_round => c,
        _ => {
            let rows = assessments::load(&mut *tx, bisect).await?;
            let verdicts = assessments::verdicts(&mut *tx, bisect).await?;
            AssessedCopy {
                round: stored_round,
                values: assessments::combine(graph.len(), rows, verdicts.as_deref()),
            }
        }
    };
    let changed = changes(&copy.values, assessments);
    // A verdict that flipped rewrites the verdict bytes (a side of the range decided at once
    // flips tens of thousands); a row is written only where the probability moved.
    let flipped = changed
        .iter()
        .filter(|&&(i, v, _)| copy.values[i as usize].0 != v)
        .count();
    let rows: Vec<(i32, Verdict, Option<f32>)> = changed
        .iter()
        .filter(|&&(i, _, p)| moved(copy.values[i as usize].1, p))
        .copied()
        .collect();
    let compared = started.elapsed();
    // The copy stays what is stored: the verdict always, the probability where a row is
    // written (one that moved less than `P_STEP` keeps its stored value).
    for &(i, v, _) in &changed {
        copy.values[i as usize].0 = v;
    }
    for &(i, _, p) in &rows {
        copy.values[i as usize].1 = p;
    }
    let verdict_bytes: Option<Vec<u8>> = (flipped > 0).then(|| {
        copy.values
            .iter()
            .map(|&(v, _)| assessments::verdict_byte(v))
            .collect()
    });
    // The points with evidence, marked by index: four map lookups for each of 100,000
    // candidates were a measurable part of a large range's round.
    let mut has_evidence = vec![false; graph.len()];
    let points = (evidence.samples.keys())
        .chain(evidence.failed.keys())
        .chain(evidence.pending.keys());
    for p in points {
        if let Point::Candidate(i) = *p
            && let Some(mark) = has_evidence.get_mut(i)
        {
            *mark = true;
        }
    }
    for &i in &evidence.untestable {
        if let Some(mark) = has_evidence.get_mut(i) {
            *mark = true;
        }
    }
    let measured: Vec<serde_json::Value> = assessments
        .iter()
        .filter(|a| match a.point {
            Point::Good => true,
            Point::Candidate(i) => has_evidence.get(i).copied().unwrap_or(false),
        })
        .map(|a| {
            let sha = match a.point {
                Point::Good => None,
                Point::Candidate(i) => Some(graph.id(i).to_string()),
            };
            serde_json::json!({ "sha": sha, "verdict": a.verdict, "p": a.culprit_probability })
        })
        .collect();
    let probabilities: Vec<(&str, f64)> = assessments
        .iter()
        .filter_map(|a| match (a.point, a.culprit_probability) {
            (Point::Candidate(i), Some(p)) => Some((graph.id(i), p)),
            _ => None,
        })
        .collect();
    let belief = crate::progress::Belief::of(&probabilities);
    let summarised = started.elapsed();
    let round = assessments::write(
        tx,
        bisect,
        RoundWrite {
            changed: &rows,
            verdicts: verdict_bytes.as_deref(),
            measured: serde_json::Value::Array(measured),
            candidates_remaining: remaining(assessments, confidence) as i32,
            belief: &belief,
        },
    )
    .await?;
    tracing::debug!(
        bisect,
        rows = rows.len(),
        flipped,
        compared_ms = compared.as_secs_f64() * 1e3,
        summarised_ms = (summarised - compared).as_secs_f64() * 1e3,
        written_ms = (started.elapsed() - summarised).as_secs_f64() * 1e3,
        "assessments stored"
    );
    copy.round = round;
    *loaded.assessed.lock().expect("assessed copy") = Some(copy);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(i: usize, v: perfbisect_engine::Verdict, p: f64) -> Assessment {
        Assessment {
            point: Point::Candidate(i),
            verdict: v,
            culprit_probability: Some(p),
            bad_probability: None,
        }
    }

    #[test]
    fn only_verdicts_that_flip_and_probabilities_that_move_are_written() {
        use perfbisect_engine::Verdict as V;
        let known = vec![
            (Verdict::Unknown, Some(0.5)),
            (Verdict::Unknown, Some(0.5)),
            (Verdict::Unknown, None),
        ];
        let now = [
            a(0, V::Unknown, 0.50001), // moved less than a step
            a(1, V::Good, 0.5),        // verdict flipped
            a(2, V::Unknown, 0.00001), // tiny probability where none was stored
        ];
        let c = changes(&known, &now);
        assert_eq!(c, vec![(1, Verdict::Good, Some(0.5))]);
        let later = [a(0, V::Unknown, 0.9)];
        assert_eq!(
            changes(&known, &later),
            vec![(0, Verdict::Unknown, Some(0.9))]
        );
    }

    #[test]
    fn the_credible_set_is_counted_from_the_largest_probabilities() {
        use perfbisect_engine::Verdict as V;
        let now = [
            a(0, V::Unknown, 0.6),
            a(1, V::Unknown, 0.395),
            a(2, V::Good, 0.005),
        ];
        assert_eq!(remaining(&now, 0.99), 2);
        assert_eq!(remaining(&now, 0.5), 1);
    }
}
