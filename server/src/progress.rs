//! Progress that moves: from the engine's culprit probabilities (`bisects.assessments`),
//! the most likely culprit, how many candidates hold 90% of the probability, and the
//! uncertainty left in bits; from the runs so far, an estimate of the time left.
//!
//! "Candidates left" (the credible set at the bisect's confidence target) hardly moves
//! until the very end; entropy falls with every informative run, so it is what the ETA
//! extrapolates: bits resolved per run so far, seconds per run so far, capped by the budget.

use perfbisect_wire::api::Progress;

/// Entropy at which the search is about done: a top candidate near 99% leaves ~0.1 bit.
const DONE_BITS: f64 = 0.1;
/// Below this many resolved bits the pace is not yet known: the ETA is the budget's.
const MIN_RESOLVED_BITS: f64 = 0.05;

/// What progress is computed from.
pub struct Inputs<'a> {
    /// (commit, probability that it is the culprit) for every candidate that has one.
    pub probabilities: &'a [(&'a str, f64)],
    pub candidates_total: usize,
    pub runs_done: usize,
    pub max_runs: usize,
    /// Seconds since the bisect was submitted (or its whole duration, once ended).
    pub elapsed_secs: f64,
    pub is_final: bool,
}

/// What the probabilities say, in brief: computed by the advance with each round and stored
/// on the bisect's row (`bisects.belief`), so a page that polls reads four numbers instead of
/// every candidate's probability.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Belief {
    pub top_sha: Option<String>,
    pub top_probability: Option<f64>,
    pub candidates_90: Option<usize>,
    pub entropy_bits: Option<f64>,
    /// The candidates' probabilities summed: P(a change in the range). The four above are
    /// given a change. Absent in rows stored before it was kept.
    #[serde(default)]
    pub change_probability: Option<f64>,
}

impl Belief {
    /// From (commit, probability that it is the culprit) of every candidate that has one.
    pub fn of(probabilities: &[(&str, f64)]) -> Belief {
        let usable = |p: f64| p.is_finite() && p > 0.0;
        let total: f64 = probabilities
            .iter()
            .map(|(_, p)| *p)
            .filter(|p| usable(*p))
            .sum();
        if total <= 0.0 {
            return Belief::default();
        }
        // One pass for the top (ties to the smaller sha) and the entropy; only the 90% set
        // needs an order, and only of the values (a large range has 100,000 of them).
        let mut top: Option<(&str, f64)> = None;
        let mut entropy = 0.0;
        let mut values: Vec<f64> = Vec::with_capacity(probabilities.len());
        // Commits between the same measured points share one probability, and they come in
        // runs: a logarithm per run of equal values, not per commit.
        let mut last = (f64::NAN, 0.0);
        for &(sha, p) in probabilities.iter().filter(|(_, p)| usable(*p)) {
            let p = p / total;
            if p != last.0 {
                last = (p, p * p.log2());
            }
            entropy -= last.1;
            values.push(p);
            if top.is_none_or(|(s, q)| p > q || (p == q && sha < s)) {
                top = Some((sha, p));
            }
        }
        let candidates_90 = largest_holding(&values, 0.9);
        Belief {
            top_sha: top.map(|(s, _)| s.to_string()),
            top_probability: top.map(|(_, p)| p),
            candidates_90: Some(candidates_90),
            entropy_bits: Some(entropy.max(0.0)),
            change_probability: Some(total.min(1.0)),
        }
    }
}

/// How many of `values` (each at least 0), taken largest first, hold at least `mass` (all of
/// them when they never do). Only the values at or above a threshold whose values already
/// hold `mass` are sorted: the k largest values are among them, in the same order as in a
/// sort of all. In a large range's belief nearly all of 100,000 values are tiny, and two
/// full sorts a round were a measurable part of the scheduling round.
pub fn largest_holding(values: &[f64], mass: f64) -> usize {
    let max = values.iter().copied().fold(0.0, f64::max);
    let mut threshold = max * 1e-3;
    loop {
        let mut top: Vec<f64> = values.iter().copied().filter(|&v| v >= threshold).collect();
        let held: f64 = top.iter().sum();
        if held >= mass || threshold <= 0.0 || top.len() == values.len() {
            top.sort_unstable_by(|a, b| b.total_cmp(a));
            let mut sum = 0.0;
            return top
                .iter()
                .position(|v| {
                    sum += v;
                    sum >= mass
                })
                .map_or(values.len(), |k| k + 1);
        }
        // A thousandth of the last threshold, until it would be below every value's worth.
        threshold = if threshold > max * 1e-15 {
            threshold * 1e-3
        } else {
            0.0
        };
    }
}

pub fn compute(i: &Inputs) -> Progress {
    with_belief(&Belief::of(i.probabilities), i)
}

/// Progress from a belief already summarised (`i.probabilities` is not read).
pub fn with_belief(belief: &Belief, i: &Inputs) -> Progress {
    let start = (i.candidates_total.max(1) as f64).log2();
    let entropy = belief.entropy_bits;
    let budget_runs_left = i.max_runs.saturating_sub(i.runs_done);
    let secs_per_run =
        (i.runs_done > 0 && i.elapsed_secs > 0.0).then(|| i.elapsed_secs / i.runs_done as f64);
    let budget_secs = secs_per_run.map(|s| (s * budget_runs_left as f64).round() as i64);
    let eta_secs = if i.is_final {
        Some(0)
    } else {
        secs_per_run.map(|spr| {
            let runs_left = match entropy {
                Some(h) if start - h > MIN_RESOLVED_BITS => {
                    let bits_per_run = (start - h) / i.runs_done as f64;
                    (((h - DONE_BITS).max(0.0) / bits_per_run).ceil() as usize)
                        .min(budget_runs_left)
                }
                _ => budget_runs_left,
            };
            (spr * runs_left as f64).round() as i64
        })
    };
    Progress {
        top_sha: belief.top_sha.clone(),
        top_probability: belief.top_probability,
        candidates_90: belief.candidates_90,
        change_probability: belief.change_probability,
        entropy_bits: entropy,
        entropy_bits_start: start,
        budget_runs_left,
        eta_secs,
        budget_secs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count a sort of every value gives.
    fn by_full_sort(values: &[f64], mass: f64) -> usize {
        let mut sorted = values.to_vec();
        sorted.sort_unstable_by(|a, b| b.total_cmp(a));
        let mut sum = 0.0;
        sorted
            .iter()
            .position(|v| {
                sum += v;
                sum >= mass
            })
            .map_or(values.len(), |k| k + 1)
    }

    #[test]
    fn the_largest_values_holding_a_mass_are_counted_as_a_full_sort_counts_them() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for case in 0..200 {
            let n = rng.random_range(1..3000);
            // Beliefs from flat to peaked: a few heavy values over many tiny ones, some zero.
            let spread = rng.random_range(0.0..30.0);
            let mut values: Vec<f64> = (0..n)
                .map(|_| match rng.random_range(0..10) {
                    0 => 0.0,
                    _ => (-spread * rng.random::<f64>()).exp() * rng.random::<f64>(),
                })
                .collect();
            let total: f64 = values.iter().sum();
            if total > 0.0 {
                values.iter_mut().for_each(|v| *v /= total);
            }
            for mass in [0.5, 0.9, 0.99, 0.999, 1.0, 1.5] {
                assert_eq!(
                    largest_holding(&values, mass),
                    by_full_sort(&values, mass),
                    "case {case}, n {n}, mass {mass}"
                );
            }
        }
        assert_eq!(largest_holding(&[], 0.9), 0);
        assert_eq!(largest_holding(&[0.0, 0.0], 0.9), 2);
    }

    fn inputs<'a>(ps: &'a [(&'a str, f64)], runs: usize) -> Inputs<'a> {
        Inputs {
            probabilities: ps,
            candidates_total: 4,
            runs_done: runs,
            max_runs: 100,
            elapsed_secs: runs as f64 * 2.0,
            is_final: false,
        }
    }

    #[test]
    fn a_flat_belief_has_all_its_bits_and_the_budgets_eta() {
        let flat = [("a", 0.25), ("b", 0.25), ("c", 0.25), ("d", 0.25)];
        let p = compute(&inputs(&flat, 10));
        assert!((p.entropy_bits.unwrap() - 2.0).abs() < 1e-12);
        assert_eq!(p.entropy_bits_start, 2.0);
        assert_eq!(p.candidates_90, Some(4));
        assert_eq!(p.budget_runs_left, 90);
        assert_eq!(p.budget_secs, Some(180));
        assert_eq!(p.eta_secs, Some(180), "no pace yet: the budget's bound");
    }

    #[test]
    fn a_narrowing_belief_moves_every_measure() {
        let wide = [("a", 0.4), ("b", 0.3), ("c", 0.2), ("d", 0.1)];
        let narrow = [("a", 0.9), ("b", 0.05), ("c", 0.03), ("d", 0.02)];
        let w = compute(&inputs(&wide, 10));
        let n = compute(&inputs(&narrow, 20));
        assert_eq!(n.top_sha.as_deref(), Some("a"));
        assert!(n.top_probability > w.top_probability);
        assert!(n.entropy_bits < w.entropy_bits);
        assert!(n.candidates_90 < w.candidates_90, "{n:?} {w:?}");
        assert_eq!(n.candidates_90, Some(1));
        // 20 runs resolved 2 − H bits; the rest at that pace, 2 s per run.
        let h = n.entropy_bits.unwrap();
        let runs = ((h - DONE_BITS) / ((2.0 - h) / 20.0)).ceil();
        assert_eq!(n.eta_secs, Some((runs * 2.0) as i64));
        assert!(n.eta_secs < n.budget_secs);
    }

    #[test]
    fn a_stored_belief_gives_the_progress_of_its_probabilities() {
        let ps = [("a", 0.7), ("b", 0.2), ("c", 0.1)];
        let stored: Belief =
            serde_json::from_value(serde_json::to_value(Belief::of(&ps)).unwrap()).unwrap();
        let i = inputs(&ps, 12);
        assert_eq!(with_belief(&stored, &inputs(&[], 12)), compute(&i));
        assert_eq!(stored.top_sha.as_deref(), Some("a"));
    }

    #[test]
    fn the_measures_are_given_a_change_whose_probability_is_kept_beside_them() {
        // The candidates hold 10% between them: "no change" holds the rest.
        let ps = [("a", 0.05), ("b", 0.03), ("c", 0.02)];
        let b = Belief::of(&ps);
        assert!((b.change_probability.unwrap() - 0.1).abs() < 1e-12, "{b:?}");
        assert!((b.top_probability.unwrap() - 0.5).abs() < 1e-12, "{b:?}");
        assert_eq!(
            compute(&inputs(&ps, 12)).change_probability,
            b.change_probability
        );
        // A belief stored before the field existed reads as not saying.
        let old: Belief = serde_json::from_value(serde_json::json!(
            {"top_sha": "a", "top_probability": 0.5, "candidates_90": 2, "entropy_bits": 1.4}
        ))
        .unwrap();
        assert_eq!(old.change_probability, None);
    }

    #[test]
    fn before_any_run_and_after_the_end() {
        let p = compute(&inputs(&[], 0));
        assert_eq!(
            (p.entropy_bits, p.eta_secs, p.candidates_90),
            (None, None, None)
        );
        let done = Inputs {
            is_final: true,
            ..inputs(&[("a", 1.0)], 5)
        };
        let p = compute(&done);
        assert_eq!(p.eta_secs, Some(0));
        assert_eq!(p.entropy_bits, Some(0.0));
    }
}
