//! The Bayesian engine through the public seam: decisions, phases, stopping and outcomes.

use perfbisect_engine::budget::Budget;
use perfbisect_engine::sim::{Noise, Trial, World, run_trial, run_trial_budgeted};
use perfbisect_engine::synth::{self, Shape, SplitMix};
use perfbisect_engine::{
    CandidateGraph, Decision, Evidence, Outcome, Phase, Point, Settings, Verdict, decide,
};
use std::collections::BTreeSet;

fn linear(n: usize) -> CandidateGraph {
    synth::graph(Shape::linear(n), 0)
}

/// Deterministic pseudo-noise: `k` samples around `level` with relative spread `cv`.
fn samples(level: f64, cv: f64, k: usize, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix::new(seed);
    (0..k)
        .map(|_| {
            let z = (0..12).map(|_| rng.uniform()).sum::<f64>() - 6.0;
            level * (1.0 + cv * z)
        })
        .collect()
}

fn world(seed: u64, n: usize, culprit: Option<usize>, noise: Noise) -> World {
    World {
        graph: synth::graph(Shape::merges(n), seed),
        culprit,
        delta: 0.03,
        noise,
        untestable: BTreeSet::new(),
        incomplete_rate: 0.0,
        lab: Default::default(),
    }
}

/// A history with two planted steps (commit, relative size) and Gaussian noise.
fn two_steps(graph: &CandidateGraph, first: (usize, f64), second: (usize, f64), cv: f64) -> World {
    World {
        graph: graph.clone(),
        culprit: Some(first.0),
        delta: first.1,
        noise: Noise::Gaussian { cv },
        untestable: BTreeSet::new(),
        incomplete_rate: 0.0,
        lab: perfbisect_engine::sim::Lab {
            extra_changes: vec![second],
            ..Default::default()
        },
    }
}

#[test]
fn starts_by_reproducing_at_the_endpoints() {
    let g = linear(50);
    let settings = Settings {
        idle_hosts: 4,
        ..Settings::default()
    };
    let (d, assessments) = decide(&g, &Evidence::default(), &settings);
    let Decision::Measure {
        phase, requests, ..
    } = d
    else {
        panic!("{d:?}")
    };
    assert_eq!(phase, Phase::Reproducing);
    let points: BTreeSet<Point> = requests.iter().map(|r| r.point).collect();
    assert_eq!(points, BTreeSet::from([Point::Good, Point::Candidate(49)]));
    // One assessment for the good endpoint and one per candidate, uniform culprit mass.
    assert_eq!(assessments.len(), 51);
    let p = assessments[1].culprit_probability.unwrap();
    assert!((p - 0.8 / 50.0).abs() < 1e-9, "{p}");
}

#[test]
fn same_evidence_same_decision_and_pending_means_wait() {
    let g = linear(100);
    let mut ev = Evidence::default();
    ev.samples.insert(Point::Good, samples(100.0, 0.01, 5, 1));
    ev.samples
        .insert(Point::Candidate(99), samples(103.0, 0.01, 5, 2));
    let settings = Settings {
        idle_hosts: 3,
        ..Settings::default()
    };
    let (a, _) = decide(&g, &ev, &settings);
    let (b, _) = decide(&g, &ev, &settings);
    assert_eq!(a, b);
    let Decision::Measure {
        phase: Phase::Searching,
        requests,
        ..
    } = a
    else {
        panic!("{a:?}")
    };
    assert!(!requests.is_empty() && requests.len() <= 3);
    // With every proposal pending and no host idle beyond them, nothing new is asked twice.
    let mut ev2 = ev.clone();
    for r in &requests {
        *ev2.pending.entry(r.point).or_default() += r.runs;
    }
    let (c, _) = decide(
        &g,
        &ev2,
        &Settings {
            idle_hosts: 1,
            ..settings.clone()
        },
    );
    if let Decision::Measure {
        requests: again, ..
    } = &c
    {
        for r in again {
            assert!(
                !ev2.pending.contains_key(&r.point),
                "re-asked pending {r:?}"
            );
        }
    }
    // The reproducing phase waits for its pending endpoint runs.
    let mut ev3 = Evidence::default();
    ev3.pending.insert(Point::Good, 5);
    ev3.pending.insert(Point::Candidate(99), 5);
    let (d, _) = decide(&g, &ev3, &settings);
    assert_eq!(
        d,
        Decision::Wait {
            phase: Phase::Reproducing
        }
    );
}

#[test]
fn clean_data_points_at_the_culprit_then_verifies_it() {
    let g = linear(64);
    let culprit = 37;
    let mut ev = Evidence::default();
    ev.samples.insert(Point::Good, samples(100.0, 0.005, 6, 1));
    for c in (0..64).step_by(3).chain([35, 36, 37, 38, 63]) {
        let level = if c >= culprit { 103.0 } else { 100.0 };
        ev.samples
            .insert(Point::Candidate(c), samples(level, 0.005, 4, c as u64 + 10));
    }
    let settings = Settings::default();
    let (d, assessments) = decide(&g, &ev, &settings);
    let a = &assessments[1 + culprit];
    assert!(a.culprit_probability.unwrap() > 0.99, "{a:?}");
    assert_eq!(assessments[1 + 36].verdict, Verdict::Good);
    assert_eq!(assessments[1 + 40].verdict, Verdict::Bad);
    // Verification: interleaved runs of the culprit and its parent on one host.
    let Decision::Measure {
        phase: Phase::Verifying,
        requests,
        ..
    } = d
    else {
        panic!("{d:?}")
    };
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].point, Point::Candidate(culprit));
    assert_eq!(requests[0].pair_with, Some(Point::Candidate(culprit - 1)));
    // Pairs that confirm the change finish the bisect.
    let a = samples(103.0, 0.005, 4, 99);
    let b = samples(100.0, 0.005, 4, 98);
    ev.pairs.insert(
        (Point::Candidate(culprit), Point::Candidate(culprit - 1)),
        a.iter().copied().zip(b.iter().copied()).collect(),
    );
    ev.samples
        .entry(Point::Candidate(culprit))
        .or_default()
        .extend(&a);
    ev.samples
        .entry(Point::Candidate(culprit - 1))
        .or_default()
        .extend(&b);
    let (d, _) = decide(&g, &ev, &settings);
    assert!(
        matches!(d, Decision::Done(Outcome::Found { culprit: 37, confidence }) if confidence > 0.99),
        "{d:?}"
    );
}

#[test]
fn equal_endpoints_are_not_reproduced() {
    let g = linear(100);
    let mut ev = Evidence::default();
    ev.samples.insert(Point::Good, samples(100.0, 0.01, 60, 1));
    ev.samples
        .insert(Point::Candidate(99), samples(100.0, 0.01, 60, 2));
    let settings = Settings {
        max_runs: 400,
        ..Settings::default()
    };
    let (d, _) = decide(&g, &ev, &settings);
    assert!(
        matches!(d, Decision::Done(Outcome::NotReproduced { .. })),
        "{d:?}"
    );
}

#[test]
fn an_untestable_parent_leaves_a_set_of_two() {
    let g = linear(40);
    let culprit = 20;
    let mut ev = Evidence::default();
    ev.untestable.insert(19);
    ev.samples.insert(Point::Good, samples(100.0, 0.005, 8, 1));
    for c in [5, 10, 15, 18, 20, 21, 25, 30, 39] {
        let level = if c >= culprit { 103.0 } else { 100.0 };
        ev.samples
            .insert(Point::Candidate(c), samples(level, 0.005, 8, c as u64));
    }
    let (d, assessments) = decide(&g, &ev, &Settings::default());
    let Decision::Done(Outcome::Inconclusive { candidates, reason }) = d else {
        panic!("{d:?}")
    };
    let set: BTreeSet<usize> = candidates.iter().map(|&(c, _)| c).collect();
    assert_eq!(set, BTreeSet::from([19, 20]), "{reason}");
    assert!(reason.contains("untestable"), "{reason}");
    assert_eq!(assessments[1 + 19].verdict, Verdict::Skipped);
}

#[test]
fn run_cap_ends_inconclusive_with_candidates() {
    let w = world(3, 300, Some(150), Noise::Gaussian { cv: 0.05 });
    let settings = Settings {
        max_runs: 60,
        ..Settings::default()
    };
    let t = run_trial(&w, &settings, 3);
    assert!(!t.stalled);
    assert!(t.runs <= 60, "{t:?}");
    let Outcome::Inconclusive { candidates, .. } = &t.outcome else {
        panic!("{t:?}")
    };
    assert!(!candidates.is_empty());
    assert!(
        candidates.windows(2).all(|w| w[0].1 >= w[1].1),
        "sorted by probability"
    );
}

#[test]
fn finds_planted_steps_under_noise_with_merges() {
    let mut exact = 0;
    for seed in 0..30 {
        let culprit = SplitMix::new(seed).below(400);
        let noise = if seed % 2 == 0 {
            Noise::Gaussian { cv: 0.01 }
        } else {
            Noise::StudentT3 { cv: 0.01 }
        };
        let w = world(seed, 400, Some(culprit), noise);
        let t = run_trial(
            &w,
            &Settings {
                max_runs: 1000,
                ..Settings::default()
            },
            seed,
        );
        assert!(!t.stalled, "seed {seed}: {t:?}");
        exact += usize::from(t.correct(&w));
    }
    assert!(exact >= 29, "{exact} of 30");
}

#[test]
fn several_hosts_use_them_and_ranges_without_change_end_without_culprit() {
    for seed in 0..6 {
        let w = world(seed, 300, None, Noise::Gaussian { cv: 0.02 });
        let settings = Settings {
            idle_hosts: 8,
            max_runs: 1000,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        assert!(
            !matches!(t.outcome, Outcome::Found { .. }),
            "seed {seed}: {t:?}"
        );
        let w = world(
            seed,
            300,
            Some(100 + seed as usize),
            Noise::Gaussian { cv: 0.02 },
        );
        let t = run_trial(&w, &settings, seed);
        assert!(t.correct(&w), "seed {seed}: {t:?}");
    }
}

#[test]
fn first_parent_mode_answers_with_a_mainline_commit() {
    for seed in 0..5 {
        let g = synth::graph(Shape::merges(300), seed);
        let chain = g.first_parent_chain();
        // Plant the change on a topic branch commit: the answer is the merge that brought it.
        let culprit = (0..g.len())
            .find(|&c| !chain[c] && c > 100)
            .expect("a topic commit");
        let merge = (culprit + 1..g.len())
            .find(|&m| chain[m] && g.ancestors(&[m])[culprit])
            .expect("merged into mainline");
        let w = World {
            graph: g,
            ..world(seed, 300, Some(culprit), Noise::Gaussian { cv: 0.01 })
        };
        let settings = Settings {
            first_parent: true,
            max_runs: 1000,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        assert!(
            matches!(t.outcome, Outcome::Found { culprit: c, .. } if c == merge),
            "seed {seed}: {t:?}"
        );
    }
}

#[test]
fn a_known_magnitude_saves_runs() {
    // The saving is about 5% of the runs (bisect-sim, 400 trials at n = 300, CV 2%: 91.2
    // against 86.7), and one bisect's runs scatter by about 40% of their mean; so the
    // comparison is paired, over enough seeds that a 5% saving shows.
    let (mut plain, mut told, mut missed) = (0, 0, 0);
    for seed in 0..60 {
        let w = world(
            seed,
            300,
            Some(50 + 17 * (seed as usize % 12)),
            Noise::Gaussian { cv: 0.02 },
        );
        let base = Settings {
            max_runs: 2000,
            ..Settings::default()
        };
        plain += run_trial(&w, &base, seed).runs;
        let hinted = Settings {
            magnitude: Some(0.03),
            direction: Some(perfbisect_engine::Direction::Increase),
            ..base
        };
        let t = run_trial(&w, &hinted, seed);
        // At 99% confidence about one bisect in 100 may name a wrong commit (seed 22 names
        // a neighbour of the planted one): count them rather than demand none.
        missed += usize::from(!t.correct(&w));
        told += t.runs;
    }
    assert!(missed <= 2, "{missed} of 60 hinted bisects missed");
    assert!(told < plain, "with magnitude {told} runs, without {plain}");
}

#[test]
fn never_asks_again_for_an_untestable_commit_and_never_hangs() {
    use perfbisect_engine::sim::run_trial_observed;
    let mut missed_sets = Vec::new();
    for seed in 0..10 {
        let mut rng = SplitMix::new(seed + 7);
        let culprit = rng.below(300);
        let mut w = world(seed, 300, Some(culprit), Noise::Gaussian { cv: 0.02 });
        // A fifth of the commits fail to build, the culprit's neighbours included.
        w.untestable = (0..299)
            .filter(|&c| c != culprit && rng.uniform() < 0.2)
            .collect();
        w.incomplete_rate = 0.1;
        let settings = Settings {
            idle_hosts: 1 + (seed % 4) as u32,
            max_runs: 1500,
            ..Settings::default()
        };
        let mut observe = |d: &Decision, ev: &Evidence| {
            if let Decision::Measure { requests, .. } = d {
                assert!(requests.len() <= settings.idle_hosts as usize);
                for r in requests {
                    for p in std::iter::once(r.point).chain(r.pair_with) {
                        if let Point::Candidate(c) = p {
                            assert!(
                                !ev.untestable.contains(&c),
                                "seed {seed}: asked for untestable {c}"
                            );
                        }
                    }
                }
            }
        };
        let t = run_trial_observed(&w, &settings, seed, &mut observe);
        assert!(!t.stalled, "seed {seed}: {t:?}");
        match &t.outcome {
            Outcome::Found { culprit: c, .. } => assert_eq!(*c, culprit, "seed {seed}"),
            Outcome::Inconclusive { candidates, .. } => {
                if !candidates.iter().any(|&(c, _)| c == culprit) {
                    missed_sets.push(format!("seed {seed}: {t:?}"));
                }
            }
            other => panic!("seed {seed}: {other:?}"),
        }
    }
    // A candidate set that misses the culprit is a chance event at this noise, not never:
    // bisect-sim's `n=300 shape=linear skip=0.2 fail=0.1` cells hold the culprit in 99.5-100%
    // of 400 trials at 1, 2 and 4 hosts (seed 5 here: its first runs read the noise as 0.55%
    // at CV 2%, and c277 and c283 as good).
    assert!(missed_sets.len() <= 1, "{missed_sets:#?}");
}

#[test]
fn an_unbuildable_bad_commit_ends_the_bisect() {
    let g = linear(10);
    let mut ev = Evidence::default();
    ev.untestable.insert(9);
    let (d, _) = decide(&g, &ev, &Settings::default());
    assert!(
        matches!(d, Decision::Done(Outcome::Inconclusive { .. })),
        "{d:?}"
    );
}

fn one_idle_host() -> Settings {
    Settings {
        idle_hosts: 1,
        ..Settings::default()
    }
}

/// What `decide` asks for, which must be measurements while the endpoints reproduce.
fn reproducing_requests(
    g: &CandidateGraph,
    ev: &Evidence,
    settings: &Settings,
) -> Vec<perfbisect_engine::Request> {
    match decide(g, ev, settings).0 {
        Decision::Measure {
            phase: Phase::Reproducing,
            requests,
            ..
        } => requests,
        d => panic!("{d:?}"),
    }
}

#[test]
fn a_slow_endpoint_does_not_pile_runs_on_the_other() {
    // The bad endpoint is measured; the good one is still building. Idle hosts build the
    // search's first points instead of measuring the bad endpoint again.
    let g = linear(13);
    let mut ev = Evidence::default();
    ev.samples
        .insert(Point::Candidate(12), samples(102.0, 0.03, 5, 3));
    ev.pending.insert(Point::Good, 5);
    let settings = one_idle_host();
    let requests = reproducing_requests(&g, &ev, &settings);
    assert_eq!(requests.len(), 1);
    assert!(
        matches!(requests[0].point, Point::Candidate(c) if c < 12),
        "{requests:?}"
    );
}

#[test]
fn a_settled_search_waits_for_an_endpoints_second_deployment_without_running_ahead() {
    // The end-to-end bisect whose good commit builds for 12 s: the search has settled on
    // commit 7 while the good endpoint's second deployment is still building. The idle host
    // measures 7 against its parent (the verification, which needs no endpoint) rather than
    // one more run of 7 or 6 on a boot of its own (18 such runs in a 49-run bisect).
    let g = linear(13);
    let taken = |host: i64, seqs: &[u32]| -> Vec<perfbisect_engine::Taken> {
        seqs.iter()
            .enumerate()
            .map(|(i, &seq)| perfbisect_engine::Taken {
                at: i as f64,
                host,
                seq,
            })
            .collect()
    };
    let mut ev = Evidence::default();
    let mut measured = |p: Point, level: f64, host: i64, seqs: &[u32], seed: u64| {
        ev.samples
            .insert(p, samples(level, 0.005, seqs.len(), seed));
        ev.taken.insert(p, taken(host, seqs));
    };
    measured(Point::Good, 100.0, 1, &[0, 1, 2], 1);
    measured(
        Point::Candidate(12),
        102.0,
        2,
        &[0, 1, 2, 3, 4, 0, 1, 2, 3, 4],
        2,
    );
    measured(Point::Candidate(7), 102.0, 2, &[0; 6], 3);
    measured(Point::Candidate(6), 100.0, 2, &[0; 6], 4);
    measured(Point::Candidate(3), 100.0, 2, &[0, 1, 2], 5);
    measured(Point::Candidate(9), 102.0, 2, &[0, 1, 2], 6);
    // The endpoints' couple that brings the good one's second deployment is under way.
    ev.pending.insert(Point::Good, 2);
    ev.pending.insert(Point::Candidate(12), 2);
    let settings = one_idle_host();
    let requests = reproducing_requests(&g, &ev, &settings);
    assert_eq!(requests.len(), 1, "{requests:?}");
    let r = &requests[0];
    assert_eq!(
        (r.point, r.pair_with),
        (Point::Candidate(7), Some(Point::Candidate(6))),
        "{requests:?}"
    );
    // Once the pairs are in, nothing more runs ahead of the endpoint.
    let pairs: Vec<(f64, f64)> = samples(102.0, 0.005, 6, 7)
        .into_iter()
        .zip(samples(100.0, 0.005, 6, 8))
        .collect();
    ev.pairs
        .insert((Point::Candidate(7), Point::Candidate(6)), pairs);
    let (d, _) = decide(&g, &ev, &settings);
    match &d {
        Decision::Measure { requests, .. } => assert!(requests.is_empty(), "{d:?}"),
        Decision::Wait { .. } => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_deterministic_metric_needs_about_log2_n_builds() {
    // Identical values every run, a build 30 runs dear: about log2(200) builds, a few runs
    // each.
    let mut builds = Vec::new();
    for seed in 0..10 {
        let mut w = world(
            seed,
            200,
            Some(17 + 13 * seed as usize),
            Noise::Gaussian { cv: 0.0 },
        );
        w.lab.build_cost = 30.0;
        let t = run_trial(&w, &Settings::default(), seed);
        assert!(t.correct(&w), "seed {seed}: {:?}", t.outcome);
        assert!(
            t.runs as f64 <= 2.5 * t.builds as f64,
            "seed {seed}: {} runs for {} builds",
            t.runs,
            t.builds
        );
        builds.push(t.builds);
    }
    let mean = builds.iter().sum::<u32>() as f64 / builds.len() as f64;
    assert!(mean <= (200f64).log2() + 3.0, "{builds:?}");
}

#[test]
fn the_change_is_measured_against_the_good_level() {
    let g = linear(20);
    let mut ev = Evidence::default();
    ev.samples.insert(Point::Good, vec![100.0; 5]);
    ev.samples.insert(Point::Candidate(19), vec![2.0; 5]);
    ev.samples.insert(Point::Candidate(5), vec![2.0; 5]);
    ev.samples.insert(Point::Candidate(2), vec![100.0; 5]);
    let e = perfbisect_engine::decide_explained(&g, &ev, &Settings::default());
    let change = e.findings.change.expect("both endpoints measured");
    assert!((change + 0.98).abs() < 1e-9, "{change}");
    let cp = &e.findings.changes[0];
    assert!((cp.change + 0.98).abs() < 0.02, "{cp:?}");
}

#[test]
fn a_contrary_direction_hint_is_reported() {
    let g = linear(20);
    let mut ev = Evidence::default();
    ev.samples.insert(Point::Good, samples(100.0, 0.01, 6, 1));
    ev.samples
        .insert(Point::Candidate(19), samples(97.0, 0.01, 6, 2));
    let hinted = |direction| Settings {
        direction: Some(direction),
        ..Settings::default()
    };
    let e = perfbisect_engine::decide_explained(
        &g,
        &ev,
        &hinted(perfbisect_engine::Direction::Increase),
    );
    assert!(e.findings.direction_contradicted);
    let e = perfbisect_engine::decide_explained(
        &g,
        &ev,
        &hinted(perfbisect_engine::Direction::Decrease),
    );
    assert!(!e.findings.direction_contradicted);
}

#[test]
fn a_second_step_merged_from_a_branch_is_named_at_its_commit_not_at_the_merge() {
    // 0-1-2-3-4-----7-8-9 (9: bad); 5-6 branch off 1 and merge at 7. Steps at 3 and at 6:
    // seen from the mainline the second step arrives with the merge 7, but 6 made it.
    let parents = vec![
        vec![],
        vec![0],
        vec![1],
        vec![2],
        vec![3],
        vec![1],
        vec![5],
        vec![4, 6],
        vec![7],
        vec![8],
    ];
    let ids = (0..parents.len()).map(|i| format!("c{i}")).collect();
    let graph = CandidateGraph::new(ids, parents).expect("a valid DAG");
    for seed in 0..6 {
        let w = two_steps(&graph, (3, 0.03), (6, 0.03), 0.01);
        let t = run_trial(&w, &Settings::default(), seed);
        assert!(!t.stalled, "seed {seed}: {t:?}");
        assert_eq!(t.named(), vec![3, 6], "seed {seed}: {:?}", t.outcome);
    }
}

#[test]
fn a_regression_partly_undone_later_in_the_range_is_reported_as_two_changes() {
    // +3% at one commit and −1.5% at a later one (a regression, then a partial fix), or the
    // other way round, in 60 commits at CV 2%: the range moves by +1.5% while the step at
    // the regression is +3%. One step at c20 puts c20 at the bad level, and c20 measured
    // above it is a change of the other sign after c20 (its parent below the good level:
    // one before it). Checked only for a step that fell short of the range's change, such
    // bisects named the regression alone ("found", one change): 4 of these 40 reported two
    // changes, 14 with the check.
    let g = linear(60);
    let mut reported = Vec::new();
    let seeds = 20;
    for seed in 0..seeds {
        for (first, second) in [((20, 0.03), (40, -0.015)), ((20, -0.015), (40, 0.03))] {
            let w = two_steps(&g, first, second, 0.02);
            let t = run_trial(&w, &Settings::default(), seed);
            assert!(!t.stalled, "seed {seed}: {t:?}");
            let named = t.named();
            assert!(
                named.iter().all(|c| *c == 20 || *c == 40),
                "seed {seed}: a wrong culprit: {:?}",
                t.outcome
            );
            reported.push(matches!(t.outcome, Outcome::Changes { .. }));
        }
    }
    let both = reported.iter().filter(|&&r| r).count();
    eprintln!(
        "{both} of {} reported as more than one change",
        reported.len()
    );
    assert!(both >= 10, "{both} of {}: {reported:?}", reported.len());
}

#[test]
fn two_branches_each_carrying_half_the_change_do_not_make_their_merge_the_culprit() {
    // 0-1-2-3-----7-8 (8: bad); 4-5-6 branch off 0 and merge at 7. +1.5% at 2 and at 5: the
    // merge differs from each parent by about the same as from the good level by half, the
    // pattern that made bisect-sim name a merge in about 1% of two-change trials. In this
    // 9-commit history it still names the merge in about 5% of trials (23 of 400 seeds at
    // be5463a, 20 of 400 after the swap e-value; 52 of 1000 before the noise placed apart,
    // 49 of 1000 and 22 of these 400 after it): the bound is on that rate, not on any one
    // seed. Without the merge parents' combined doubt it was 15 of 200.
    let parents = vec![
        vec![],
        vec![0],
        vec![1],
        vec![2],
        vec![0],
        vec![4],
        vec![5],
        vec![3, 6],
        vec![7],
    ];
    let ids = (0..parents.len()).map(|i| format!("c{i}")).collect();
    let graph = CandidateGraph::new(ids, parents).expect("a valid DAG");
    let mut named_merge = Vec::new();
    let seeds = 400;
    for seed in 0..seeds {
        let w = two_steps(&graph, (2, 0.015), (5, 0.015), 0.02);
        let t = run_trial(&w, &Settings::default(), seed);
        assert!(!t.stalled, "seed {seed}: {t:?}");
        if t.named().contains(&7) {
            named_merge.push((seed, t.outcome));
        }
    }
    assert!(
        named_merge.len() <= 28,
        "{} of {seeds}: {named_merge:?}",
        named_merge.len()
    );
}

#[test]
fn a_step_below_the_smallest_change_of_interest_at_the_run_cap_is_not_reproduced() {
    let g = linear(100);
    let at = |bad: f64| {
        let mut ev = Evidence::default();
        ev.samples.insert(Point::Good, samples(100.0, 0.02, 40, 1));
        for (i, c) in [25, 50, 75].into_iter().enumerate() {
            ev.samples
                .insert(Point::Candidate(c), samples(100.0, 0.02, 10, 10 + i as u64));
        }
        ev.samples
            .insert(Point::Candidate(99), samples(bad, 0.02, 40, 2));
        let settings = Settings {
            max_runs: 110,
            ..Settings::default()
        };
        decide(&g, &ev, &settings).0
    };
    // +0.6%: below the 1% the prior looks for, and "no change" still possible.
    let Decision::Done(Outcome::NotReproduced { reason }) = at(100.6) else {
        panic!("{:?}", at(100.6))
    };
    assert!(
        reason.contains("no change of interest within the run cap of 110"),
        "{reason}"
    );
    // +3%: a change of interest that ran out of runs is inconclusive, not "no change".
    let d = at(103.0);
    assert!(
        matches!(d, Decision::Done(Outcome::Inconclusive { .. })),
        "{d:?}"
    );
}

/// The world of bisect-sim's trial `seed` in an `n=1000 shape=merges delta=0.03` cell with
/// Gaussian noise `cv` and unbuildable rate `skip` (as `bisect-sim --trace SEED` replays
/// it), and its culprit.
fn sim_cell_world(seed: u64, cv: f64, skip: f64) -> (World, usize) {
    let graph = synth::graph(Shape::merges(1000), seed);
    let mut rng = SplitMix::new(seed ^ 0xc0ffee);
    let culprit = rng.below(graph.len());
    let untestable: BTreeSet<usize> = (0..graph.len() - 1)
        .filter(|&c| c != culprit && rng.uniform() < skip)
        .collect();
    let world = World {
        graph,
        culprit: Some(culprit),
        delta: 0.03,
        noise: Noise::Gaussian { cv },
        untestable,
        incomplete_rate: 0.0,
        lab: Default::default(),
    };
    (world, culprit)
}

#[test]
fn a_clear_change_against_the_stated_direction_is_bisected_not_called_no_change() {
    // The user says "increase"; the range falls 3% at CV 2%. With the hint kept as a prior
    // of one sign, 17 of 100 such bisect-sim trials ended "no change between the
    // endpoints" (P(no change) 0.95 with the endpoints 2.4–3.7% apart) while the other 83
    // found the commit; these are five of the 17. The endpoints contradict the hint, so it
    // is dropped, and the findings say it was contradicted.
    for i in [11, 12, 16, 23, 25] {
        let seed = 1_000_003 * i + 17;
        let (mut w, culprit) = sim_cell_world(seed, 0.02, 0.0);
        w.delta = -0.03;
        let settings = Settings {
            max_runs: 2000,
            direction: Some(perfbisect_engine::Direction::Increase),
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        assert_eq!(
            t.named(),
            vec![culprit],
            "seed {seed}: {:?} after {} runs",
            t.outcome,
            t.runs
        );
    }
}

#[test]
fn an_unbuildable_parent_of_a_merge_culprit_is_not_asked_for_again() {
    // bisect-sim's `skip=0.05` cell, seed 38000131: the culprit c237 is a merge whose parent
    // c234 cannot be built. The partial-step check asked for c234 forever (a runaway).
    let seed = 38_000_131;
    let (w, _) = sim_cell_world(seed, 0.02, 0.05);
    let settings = Settings {
        max_runs: 3000,
        ..Settings::default()
    };
    let t = run_trial(&w, &settings, seed);
    assert!(!t.stalled, "{t:?}");
    assert!(t.runs < 3000, "{t:?}");
}

/// One bisect of `w` under the product's budget and its default ceiling of 2000 runs, as
/// bisect-sim's `budget=product` cells run.
fn under_the_default_ceiling(w: &World, seed: u64) -> Trial {
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    run_trial_budgeted(
        w,
        &settings,
        Some(Budget::new(None, 2000)),
        seed,
        &mut |_, _| {},
    )
}

#[test]
fn a_culprit_whose_check_reads_a_little_off_for_long_is_found_not_run_out() {
    // bisect-sim's CV 5% cell under the product's budget, seed 233000716: the culprit c66
    // held 1.0000 and was verified, but c66 and the bad endpoint, 600 runs each, read 0.7%
    // apart (2.5 standard errors of a 3% step): the partial-step check measured them until
    // the 2000-run ceiling and the bisect ended inconclusive.
    let seed = 233_000_716;
    let (w, culprit) = sim_cell_world(seed, 0.05, 0.0);
    let t = under_the_default_ceiling(&w, seed);
    assert!(
        matches!(t.outcome, Outcome::Found { culprit: c, .. } if c == culprit),
        "{t:?}"
    );
    assert!(t.runs < 2000, "{t:?}");
}

#[test]
fn a_range_too_noisy_for_the_ceiling_ends_early_and_says_what_it_would_take() {
    // At CV 30%, telling a 1% change from none takes thousands of runs more than the 2000-run
    // ceiling allows, and so does naming a commit for a +3% step: such a bisect spent the
    // whole ceiling and ended inconclusive all the same (1988 runs a bisect in bisect-sim).
    for seed in 1..=4 {
        let culprit = (seed % 2 == 0).then_some(300 + seed as usize);
        let w = world(seed, 1000, culprit, Noise::Gaussian { cv: 0.3 });
        let t = under_the_default_ceiling(&w, seed);
        let Outcome::Inconclusive { reason, .. } = &t.outcome else {
            panic!("{t:?}")
        };
        assert!(
            reason.contains("the ceiling of 2000 cannot settle this range"),
            "{reason}"
        );
        assert!(reason.contains("more runs"), "{reason}");
        assert!(t.runs < 1000, "{t:?}");
    }
    // A step as large as the noise is found as before, and a range the ceiling can settle
    // (CV 10%: "not reproduced" takes about 700 runs) is still measured to its end.
    let mut w = world(5, 1000, Some(400), Noise::Gaussian { cv: 0.3 });
    w.delta = 0.3;
    let t = under_the_default_ceiling(&w, 5);
    assert!(
        matches!(t.outcome, Outcome::Found { culprit: 400, .. }),
        "{t:?}"
    );
    let w = world(6, 1000, None, Noise::Gaussian { cv: 0.1 });
    let t = under_the_default_ceiling(&w, 6);
    assert!(matches!(t.outcome, Outcome::NotReproduced { .. }), "{t:?}");
}

#[test]
fn a_merge_that_only_combines_what_its_branches_bring_is_not_named() {
    // bisect-sim's exact metric whose level walks 0.1% a commit (`cv=0 walk=0.001`): in
    // these three bisects the +3% step sits on a branch (c515, c362, c294) while the main
    // line walked about as far, so the merge that joins them (c516, c364, c299) differs
    // from both of its parents by 2–3% and was named, with its verification passing
    // against each. Its own step, level(merge) − level(first parent) − level(branch
    // parent) + level(merge base), is a few hundredths of a percent.
    for (seed, merge) in [(165_000_512, 516), (166_000_515, 364), (181_000_560, 299)] {
        let (mut w, culprit) = sim_cell_world(seed, 0.0, 0.0);
        w.lab.commit_walk = 0.001;
        let t = under_the_default_ceiling(&w, seed);
        assert!(!t.stalled, "{t:?}");
        assert!(!t.named().contains(&merge), "the merge was named: {t:?}");
        assert!(
            t.named().iter().all(|&c| c == culprit),
            "{:?} for {culprit}",
            t.named()
        );
        if seed == 165_000_512 {
            assert_eq!(t.named(), vec![culprit], "{t:?}");
        }
    }
}

#[test]
fn hosts_that_differ_in_level_do_not_hide_the_culprit_or_waste_runs() {
    // Four hosts whose own levels are 2.5% apart (more than the 2% noise), each request
    // taken by whichever host is free: a host's level is read from the commits measured on
    // more than one host, and taken out before the hypotheses are compared.
    let (exact, mean) = twelve_trials_in_a_lab(4, |lab| lab.host_sd = 0.025);
    assert!(exact >= 11, "{exact} of 12");
    assert!(mean < 200.0, "mean runs {mean}");
}

/// Twelve bisects of 300 commits at CV 2% in a lab that `lab` sets up, on `hosts` hosts;
/// panics on a wrong culprit, else gives how many named theirs and the mean runs.
fn twelve_trials_in_a_lab(
    hosts: u32,
    lab: impl Fn(&mut perfbisect_engine::sim::Lab),
) -> (usize, f64) {
    let (mut exact, mut runs) = (0, 0);
    let trials = 12;
    for seed in 0..trials {
        let mut w = world(
            seed,
            300,
            Some(40 + 19 * seed as usize),
            Noise::Gaussian { cv: 0.02 },
        );
        lab(&mut w.lab);
        let settings = Settings {
            idle_hosts: hosts,
            max_runs: 2000,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        assert!(
            !matches!(t.outcome, Outcome::Found { culprit, .. } if Some(culprit) != w.culprit),
            "seed {seed}: a wrong culprit: {t:?}"
        );
        exact += usize::from(t.correct(&w));
        runs += t.runs;
    }
    (exact, f64::from(runs) / trials as f64)
}

#[test]
fn a_step_read_within_its_noise_predicts_what_a_change_of_interest_costs() {
    // bisect-sim's `noiseafter=2` cell (CV 2%, a +3% step whose side is twice as noisy),
    // seed 58: after 25 endpoint runs the step read +0.01% while the noises told the sides
    // apart, and the first prediction was 1/d² of that: 26,357,567 more runs, where 87 more
    // did it. Under the model's prior a change is at least about half a percent.
    let (mut w, culprit) = sim_cell_world(58, 0.02, 0.0);
    w.lab.noise_after = 2.0;
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    let t = run_trial(&w, &settings, 58);
    assert_eq!(t.named(), vec![culprit], "{t:?}");
    let (used, predicted) = t
        .first_prediction
        .expect("a prediction after the endpoints");
    // (35 since each endpoint is measured in two deployments first; 70 since "no change"
    // with the noise changing elsewhere (`NoiseApart`) must be ruled out too.)
    assert!(used <= 80, "{t:?}");
    // A +0.5% step at 3.4% noise (0.15 noise units) costs a few thousand runs; the old
    // prediction was four orders of magnitude above that.
    assert!(
        predicted < 10_000,
        "first prediction {predicted} runs: {t:?}"
    );
    assert!(predicted as f64 > f64::from(t.runs - used), "{t:?}");
}

#[test]
fn wild_runs_do_not_keep_a_settled_culprit_under_the_partial_step_check() {
    // bisect-sim's `noise=outliers` cell (CV 2%, one run in twenty 20-100% slow). The
    // partial-step check judged the robust levels of the culprit's parents with the plain
    // noise (9-13%, the wild runs in it): seed 12 held c657 at P 1.0000 for 345 runs, and the
    // check's search averaged 36.5 runs a bisect over 400 (5.5 for clean noise).
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    let seeds = 1..=24u64;
    let mut check = 0;
    for seed in seeds.clone() {
        let (mut w, culprit) = sim_cell_world(seed, 0.02, 0.0);
        w.noise = Noise::Outliers { cv: 0.02 };
        let t = run_trial(&w, &settings, seed);
        if !matches!(t.outcome, Outcome::Inconclusive { .. }) {
            assert_eq!(t.named(), vec![culprit], "seed {seed}: {t:?}");
        }
        check += t.phase_runs[4];
    }
    let mean = f64::from(check) / seeds.count() as f64;
    assert!(
        mean <= 15.0,
        "the predictive check took {mean:.1} runs a bisect"
    );
}

#[test]
fn an_intermittent_change_is_searched_with_runs_that_show_it() {
    // A quarter of a changed commit's runs 12% slow, the rest as before (the mean moves 3%,
    // at CV 2%). Weighed as wild runs, the slow runs were explained away ("no change" at
    // P 0.95 with a +2.5% step), and commits measured in a run or two that did not show it
    // read as good: half the bisects of bisect-sim's cell ended without a culprit, 0.6-1.3%
    // named a wrong one. With the change told from the endpoints, runs weigh alike and each
    // commit gets the runs that show it: 98.1% exact, 0.5% wrong over 1000.
    let (mut exact, mut wrong) = (0, 0);
    for seed in 0..10 {
        let (mut w, culprit) = sim_cell_world(500 + seed, 0.02, 0.0);
        w.lab.intermittent = 0.25;
        let settings = Settings {
            max_runs: 2000,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        assert!(!t.stalled, "{t:?}");
        match t.outcome {
            Outcome::Found { culprit: c, .. } if c == culprit => exact += 1,
            Outcome::Found { .. } => wrong += 1,
            _ => {}
        }
    }
    assert_eq!(wrong, 0);
    assert!(exact >= 8, "{exact} of 10");
}

#[test]
fn a_sudden_step_in_the_labs_level_is_not_read_as_the_change() {
    // From run 30 on every run reads 6% higher (three noise widths): a neighbour that starts
    // to load the hosts. Commits first measured after it look changed; the endpoints,
    // re-measured on both sides of it, show the step in time, and it is taken out.
    let (exact, mean) = twelve_trials_in_a_lab(1, |lab| {
        lab.jump = 0.06;
        lab.jump_at = 30;
    });
    assert!(exact >= 11, "{exact} of 12");
    // 125 runs with the step in time fitted; 183 when it is not (every seed still right,
    // each search led astray and set back by its verification).
    assert!(mean < 150.0, "mean runs {mean}");
}

#[test]
fn one_wild_run_among_the_endpoints_first_runs_does_not_inflate_the_first_prediction() {
    // bisect-sim's `noise=outliers` cell (CV 2%, one run in twenty 20-100% slow). After the
    // endpoints' first 5 + 5 runs, one wild run among them held the robust scale near its
    // own size: 7 first predictions in 200 said 4,710 to 21,533 more runs where about 140
    // were taken. A prediction now plans with the endpoints' median absolute deviation
    // when the robust scale is more than three times it. Every first prediction of 40
    // bisects stays under 20 times the runs then taken (it was 107 times).
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    let mut ratios = Vec::new();
    for seed in 1..=40u64 {
        let (mut w, _) = sim_cell_world(seed, 0.02, 0.0);
        w.noise = Noise::Outliers { cv: 0.02 };
        let t = run_trial(&w, &settings, seed);
        let Some((used, predicted)) = t.first_prediction else {
            continue;
        };
        let taken = t.runs.saturating_sub(used).max(1);
        ratios.push((f64::from(predicted) / f64::from(taken), seed));
    }
    ratios.sort_by(|a, b| b.0.total_cmp(&a.0));
    assert!(ratios.len() >= 30, "{ratios:?}");
    // Seed 33 predicted 16,199 runs (151 taken) and seed 38 1,214 (168): now 188 and 80.
    // One in ten still predicts 5-14x what is taken: the wild run sits at an endpoint's
    // median there, or the step itself reads small.
    assert!(ratios[0].0 < 20.0, "(predicted / taken, seed): {ratios:?}");
}

#[test]
fn a_commit_that_moves_only_the_noise_is_not_named() {
    // Twelve bisects of 300 commits at CV 2% with a +3% step, and elsewhere in the range
    // (before the culprit in half, after it in the rest) a commit that triples the noise
    // and leaves the level alone: a commit that adds jitter, not cost. Its pattern of noise
    // is no evidence of where the level changed, and its couples with its parent show no
    // step. Read as part of the change, it was named in 5.5% of bisect-sim's trials and
    // half of them ended without a culprit (1,019 mean runs).
    let (mut exact, mut runs) = (0, 0);
    let trials = 12u64;
    for seed in 0..trials {
        let culprit = 100 + 8 * seed as usize;
        let mut w = world(seed, 300, Some(culprit), Noise::Gaussian { cv: 0.02 });
        let noisy_from = if seed % 2 == 0 {
            culprit - 60
        } else {
            culprit + 60
        };
        w.lab.noise_step = Some((noisy_from, 3.0));
        let settings = Settings {
            max_runs: 2000,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        let named = t.named();
        assert!(
            named.iter().all(|&c| c == culprit),
            "seed {seed}: named {named:?}, the step is at {culprit}, the noise at {noisy_from}"
        );
        exact += usize::from(t.correct(&w));
        runs += t.runs;
    }
    assert!(exact >= 11, "{exact} of 12");
    let mean = f64::from(runs) / trials as f64;
    assert!(mean < 800.0, "mean runs {mean}");
}

#[test]
fn a_host_that_jitters_more_weighs_less() {
    // Two hosts, the first four times as noisy as the other (a noisy neighbour, a failing
    // fan): every run weighed alike, its runs made every comparison as uncertain as its
    // worst. Each host's noise is read within points and each run weighs by its host's.
    let (exact, mean) = twelve_trials_in_a_lab(2, |lab| lab.noisy_host = 4.0);
    assert!(exact >= 11, "{exact} of 12");
    // 529 runs with each host's noise, 909 with one noise for every run.
    assert!(mean < 750.0, "mean runs {mean}");
}

#[test]
fn a_commit_that_runs_at_a_level_of_its_own_is_not_named_a_second_change() {
    // Every commit runs at a level of its own (0.5% standard deviation, not inherited: code
    // layout), beside a +3% step at CV 2%. The culprit's parent or child, measured fifty
    // times under verification, is known to a seventh of the noise, so its own level read as
    // a second step: bisect-sim named a spurious second change point in 14% of such bisects.
    // A second change point must now also hold when commits have levels of their own, and
    // another commit of its stretch is measured instead of more runs of its couple.
    let trials = 40;
    let (spurious, exact, mean) = with_commit_levels(trials, 0.02, 0.005, |seed| 60 + 5 * seed);
    assert!(
        spurious.len() <= 1,
        "named besides the culprit: {spurious:?}"
    );
    assert!(exact >= 34, "{exact} of {trials}");
    assert!(mean < 700.0, "mean runs {mean}");
}

#[test]
fn a_step_smaller_than_the_size_of_interest_is_not_named_beside_the_culprit() {
    // A near-exact metric (instruction counts: CV 0.1%) whose commits each move it a little
    // of their own (0.2% standard deviation), beside a +3% step. Every such small move is as
    // certain as the step, so the multi-change check found a second change point and named
    // it (−0.9%, +0.8%): bisect-sim named a second commit in 10 of 100 such bisects, this
    // test in 4 of 60 (seeds 14, 38, 52, 54). A change point whose step is below the 1%
    // this bisect looks for is no culprit of it.
    let trials = 60;
    let (extra, exact, _) = with_commit_levels(trials, 0.001, 0.002, |seed| 60 + 3 * seed);
    assert!(extra.is_empty(), "named besides the culprit: {extra:?}");
    assert!(exact >= 58, "{exact} of {trials}");
}

#[test]
fn a_quiet_metric_whose_commits_run_at_levels_of_their_own_names_no_second_change() {
    // A quiet benchmark (CV 0.2%) whose commits each run at a level of their own (0.5%: code
    // layout, two and a half times the run noise), beside a +3% step. The culprit's step
    // against its parent then reads past the range's change, a change of the other sign is
    // searched for, and two neighbours whose own levels differ by a percent look like it.
    // The commit-level check allowed a commit's own level only up to half the run noise
    // (0.1% here): bisect-sim named a second change point in 17 of 100 such bisects. It now
    // also allows a quarter, a half and one percent of the level.
    let trials = 40;
    let (spurious, exact, _) = with_commit_levels(trials, 0.002, 0.005, |seed| 40 + 7 * seed);
    assert!(
        spurious.len() <= 1,
        "named besides the culprit: {spurious:?}"
    );
    assert!(exact >= 34, "{exact} of {trials}");
}

/// Bisects of 300 commits with merges, a +3% step at `culprit(seed)`, Gaussian noise of
/// `cv` and every commit at a level of its own (`commit_sd`), up to 2000 runs each: those
/// that named a commit besides the culprit (seed, names), how many were exact, mean runs.
fn with_commit_levels(
    trials: u64,
    cv: f64,
    commit_sd: f64,
    culprit: impl Fn(u64) -> u64,
) -> (Vec<(u64, Vec<usize>)>, usize, f64) {
    let (mut besides, mut exact, mut runs) = (Vec::new(), 0, 0);
    for seed in 0..trials {
        let culprit = culprit(seed) as usize;
        let mut w = world(seed, 300, Some(culprit), Noise::Gaussian { cv });
        w.lab.commit_sd = commit_sd;
        let settings = Settings {
            max_runs: 2000,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        let named = t.named();
        if named.iter().any(|&c| c != culprit) {
            besides.push((seed, named));
        }
        exact += usize::from(t.correct(&w));
        runs += t.runs;
    }
    (besides, exact, f64::from(runs) / trials as f64)
}

#[test]
fn an_exact_metric_that_moves_a_little_at_every_commit_is_not_measured_again_and_again() {
    // Instruction counts: every run of a commit repeats one value, and every commit moves it
    // a little (0.01%, inherited), beside a +3% step. The search's check for a further step
    // finds one of those small moves, and the two-change search then asked for its commits
    // one run at a time, each run repeating the last: 302 runs a bisect in bisect-sim (N =
    // 1000), where 62 do; here 189.4 against 58.5. A change point below the size of
    // interest, in an exact metric, is dropped even before it settles.
    let trials = 20;
    let (exact, runs) = walking(trials, 300, 0.0, 0.0001, |seed| 60 + 10 * seed);
    assert_eq!(exact, trials as usize, "{exact} of {trials}");
    let mean = f64::from(runs.iter().sum::<u32>()) / trials as f64;
    assert!(mean < 100.0, "mean runs {mean}");
}

#[test]
fn a_near_exact_metric_does_not_search_a_move_below_interest_to_the_cap() {
    // Instruction counts with a little run noise (CV 0.1%) whose every commit moves them a
    // little (0.01%, inherited), beside a +3% step. Once the step was settled, the search
    // for a further change point of −0.3% (many small moves, no commit of its own) only
    // re-measured commits it had measured well, one run at a time, and some bisects ran to
    // the cap (bisect-sim: 6% of them, 191 runs a bisect on average; 44.5 now). Here seeds
    // 6 and 14 took 2000 and 1873 runs.
    let trials = 20;
    let (exact, runs) = walking(trials, 1000, 0.001, 0.0001, |seed| 100 + 5 * seed);
    let worst = runs.iter().copied().max().unwrap_or(0);
    assert_eq!(exact, trials as usize, "{exact} of {trials}");
    assert!(worst < 1000, "a bisect took {worst} runs");
}

#[test]
fn a_commit_whose_own_move_is_below_interest_is_not_named_where_the_level_walks() {
    // A near-exact metric (CV 0.1%) whose level walks 0.1% a commit (every commit's own
    // move, inherited), beside a +3% step. Each small move is as certain as the step, and
    // the search settled on some of them: bisect-sim (N = 1000) named a wrong commit in 21
    // of 100 such bisects, its own step between −0.9% and +0.8%, beside or instead of the
    // culprit; this test in 4 of 30 (seeds 3, 7, 24, 28). A change point whose own step is surely below the 1% this bisect looks for
    // stays in the outcome without a name.
    let trials = 30;
    let (mut wrong, mut listed_unnamed) = (Vec::new(), 0);
    for seed in 0..trials {
        let culprit = (100 + 13 * seed) as usize;
        let (_, t) = walking_trial(seed, 1000, 0.001, 0.001, culprit);
        let named = t.named();
        if named.iter().any(|&c| c != culprit) {
            wrong.push((seed, named));
        }
        if let perfbisect_engine::Outcome::Changes { changes, .. } = &t.outcome {
            listed_unnamed += changes.iter().filter(|c| c.below_interest).count();
        }
    }
    assert!(
        wrong.is_empty(),
        "named a commit that is not the culprit: {wrong:?}"
    );
    // The withdrawn ones stay in the outcome, marked, for the report to say why.
    assert!(
        listed_unnamed > 0,
        "no change point listed as below interest"
    );
}

#[test]
fn a_walking_near_exact_metric_does_not_rerun_pinned_points_to_the_cap() {
    // CV 0.1% and a level that walks 0.1% a commit: the one-step belief reads 0.5–1% of
    // noise, five times what the runs scatter, so each new run of a point it has measured
    // moves it only as far as a misfit lets it. bisect-sim ran 18 of 100 such bisects to
    // the 2000-run cap, re-measuring the same three commits and then the endpoints one run
    // at a time (666.5 runs a bisect); this test's seeds 2, 5 and 7 to the cap, 6 to 1430. A point
    // with a few runs has its level pinned there; the search measures other commits, and
    // ends when none is left to split the candidates.
    let mut runs = Vec::new();
    for seed in 0..12 {
        let (_, t) = walking_trial(seed, 1000, 0.001, 0.001, (150 + 61 * seed) as usize);
        runs.push(t.runs);
    }
    let worst = runs.iter().copied().max().unwrap_or(0);
    assert!(worst < 1000, "runs of each bisect: {runs:?}");
}

/// [`walking_trial`]s, one a seed: how many were exact, and each one's runs.
fn walking(
    trials: u64,
    n: usize,
    cv: f64,
    walk: f64,
    culprit: impl Fn(u64) -> u64,
) -> (usize, Vec<u32>) {
    let (mut exact, mut runs) = (0, Vec::new());
    for seed in 0..trials {
        let culprit = culprit(seed) as usize;
        let (w, t) = walking_trial(seed, n, cv, walk, culprit);
        exact += usize::from(t.correct(&w));
        runs.push(t.runs);
    }
    (exact, runs)
}

/// One bisect of `n` commits with merges, a +3% step at `culprit`, Gaussian noise of `cv`
/// and a level that walks `walk` a commit (each commit's own move, inherited), up to 2000
/// runs.
fn walking_trial(seed: u64, n: usize, cv: f64, walk: f64, culprit: usize) -> (World, Trial) {
    let mut w = world(seed, n, Some(culprit), Noise::Gaussian { cv });
    w.lab.commit_walk = walk;
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    let t = run_trial(&w, &settings, seed);
    (w, t)
}

#[test]
fn a_metric_on_a_coarse_grid_is_bisected_like_any_other() {
    // A benchmark that reports whole steps of 2% at a noise of 0.5%: most runs of a commit
    // read one value, a few the next one. Before rounding was counted, runs of one
    // deployment that all tied read as noiseless, the boots as 10¹⁵ times apart, and 2% of
    // such bisects re-measured one commit until the run cap.
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    let mut found = 0;
    for seed in 0..40u64 {
        let culprit = SplitMix::new(seed).below(1000);
        let mut w = world(seed, 1000, Some(culprit), Noise::Gaussian { cv: 0.005 });
        w.lab.quantum = 2.0;
        let t = run_trial(&w, &settings, seed);
        assert!(!t.stalled && t.runs < 400, "seed {seed}: {t:?}");
        assert!(
            !matches!(t.outcome, Outcome::Found { culprit: c, .. } if c != culprit),
            "seed {seed}: a wrong culprit, {t:?}"
        );
        found += usize::from(t.correct(&w));
    }
    assert!(found >= 39, "{found} of 40 found");
}

#[test]
fn endpoints_that_repeat_one_value_earn_no_change_with_a_few_more_runs() {
    let g = linear(100);
    let decide_at = |runs: usize| {
        let mut ev = Evidence::default();
        ev.samples.insert(Point::Good, vec![100.0; runs]);
        ev.samples.insert(Point::Candidate(99), vec![100.0; runs]);
        decide(&g, &ev, &Settings::default()).0
    };
    // Three runs a side, all alike: a deterministic metric's A/A range, or a coarse metric
    // whose runs happened to land on one step: more runs at the endpoints.
    let d = decide_at(3);
    let Decision::Measure { requests, .. } = &d else {
        panic!("{d:?}")
    };
    assert!(
        requests
            .iter()
            .all(|r| matches!(r.point, Point::Good | Point::Candidate(99))),
        "{d:?}"
    );
    // Five a side: no change.
    let d = decide_at(5);
    assert!(
        matches!(d, Decision::Done(Outcome::NotReproduced { .. })),
        "{d:?}"
    );
}

#[test]
fn couples_on_a_grid_are_judged_with_half_a_step_of_noise() {
    // Heavy-tailed runs on a 2% grid at CV 0.5%: a commit whose level sits between two grid
    // values reads one or the other. Judged at the belief's 0.5% noise, three couples one
    // step apart each verified a second change point that is not there (seed 440: c918
    // beside the culprit c395).
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    for seed in 420..460u64 {
        let culprit = SplitMix::new(seed).below(1000);
        let mut w = world(seed, 1000, Some(culprit), Noise::StudentT3 { cv: 0.005 });
        w.lab.quantum = 2.0;
        let t = run_trial(&w, &settings, seed);
        assert!(
            t.named().iter().all(|&c| c == culprit),
            "seed {seed}: named {:?} for {culprit}",
            t.named()
        );
    }
}

/// A world on a stored real history: one step of +3% at `culprit`, Gaussian noise.
fn on_history(name: &str, culprit: usize, cv: f64) -> World {
    World {
        graph: perfbisect_engine::histories::stored(name).unwrap(),
        culprit: Some(culprit),
        delta: 0.03,
        noise: Noise::Gaussian { cv },
        untestable: BTreeSet::new(),
        incomplete_rate: 0.0,
        lab: Default::default(),
    }
}

#[test]
fn real_release_histories_name_the_planted_commit() {
    // git.git's v2.46.0..v2.47.0 and u-boot's v2024.07..v2024.10, as `git rev-list` gives
    // them: commits anywhere, and in git.git roots of topic branches forked before the good
    // release (no parent in the range), which synthetic histories have few of.
    for name in ["git-v2.47", "u-boot-v2024.10"] {
        let g = perfbisect_engine::histories::stored(name).unwrap();
        let roots: Vec<usize> = (1..g.len()).filter(|&c| g.parents(c).is_empty()).collect();
        assert!(!roots.is_empty(), "{name}");
        for seed in 0..6u64 {
            let culprit = if seed % 2 == 0 {
                SplitMix::new(seed).below(g.len())
            } else {
                roots[SplitMix::new(seed).below(roots.len())]
            };
            let w = on_history(name, culprit, 0.01);
            let t = run_trial(&w, &Settings::default(), seed);
            assert!(t.correct(&w), "{name}, seed {seed}, c{culprit}: {t:?}");
        }
    }
}

#[test]
fn a_maintainers_pull_request_is_named_in_first_parent_mode() {
    // u-boot's mainline is a first-parent chain of pull requests, each dozens of commits.
    let name = "u-boot-v2024.10";
    let g = perfbisect_engine::histories::stored(name).unwrap();
    let chain = g.first_parent_chain();
    for seed in 0..4u64 {
        let mut rng = SplitMix::new(seed);
        let culprit = loop {
            let c = rng.below(g.len());
            if !chain[c] {
                break c;
            }
        };
        let merge = (culprit + 1..g.len())
            .find(|&m| chain[m] && g.ancestors(&[m])[culprit])
            .expect("merged into mainline");
        let w = on_history(name, culprit, 0.01);
        let settings = Settings {
            first_parent: true,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        assert!(
            matches!(t.outcome, Outcome::Found { culprit: c, .. } if c == merge),
            "seed {seed}, c{culprit} merged by c{merge}: {t:?}"
        );
    }
}

#[test]
fn a_merge_of_two_changed_lines_is_not_named_when_a_third_change_fills_the_model() {
    // Three +1% steps at CV 0.5%: one on each line a merge joins (after the lines' common
    // base), one elsewhere. The merge differs from each parent by the other line's step,
    // so verification against every parent passes, and with two change points the model
    // has no room for both lines once the third change holds one: bisect-sim named such a
    // merge in 8 of 100 bisects of random three-step worlds. It is no culprit: its parents
    // each carry part of its step.
    let mut wrong = Vec::new();
    let mut tried = 0;
    for seed in 0..40u64 {
        let g = synth::graph(Shape::merges(600), seed);
        let chain = g.first_parent_chain();
        // A mainline merge from the middle of the range whose topic branch has its own
        // commit and whose mainline side has one since the fork.
        let Some((merge, on_main, on_topic)) = (250..450).find_map(|m| {
            let &[p1, p2] = g.parents(m) else { return None };
            if !chain[m] || p2 <= 1 {
                return None;
            }
            let (a1, a2) = (g.ancestors(&[p1]), g.ancestors(&[p2]));
            let base = (0..p1.min(p2)).rev().find(|&c| a1[c] && a2[c])?;
            let on_main = (base + 1..=p1)
                .rev()
                .find(|&c| a1[c] && !a2[c] && chain[c])?;
            let on_topic = (base + 1..=p2).rev().find(|&c| a2[c] && !a1[c])?;
            Some((m, on_main, on_topic))
        }) else {
            continue;
        };
        tried += 1;
        let third = 550;
        let w = World {
            graph: g,
            culprit: Some(on_main),
            delta: 0.01,
            noise: Noise::Gaussian { cv: 0.005 },
            untestable: BTreeSet::new(),
            incomplete_rate: 0.0,
            lab: perfbisect_engine::sim::Lab {
                extra_changes: vec![(on_topic, 0.01), (third, 0.01)],
                ..Default::default()
            },
        };
        let settings = Settings {
            max_runs: 1500,
            ..Settings::default()
        };
        let t = run_trial(&w, &settings, seed);
        assert!(!t.stalled, "seed {seed}: {t:?}");
        if t.named().contains(&merge) {
            wrong.push((seed, merge, t.named()));
        }
        if tried == 8 {
            break;
        }
    }
    assert_eq!(tried, 8, "histories with such a merge");
    assert!(
        wrong.is_empty(),
        "named the merge of two changed lines: {wrong:?}"
    );
}

/// `k` runs about `level` with relative spread `cv`, their mean exactly `level`.
fn centred(level: f64, cv: f64, k: usize, seed: u64) -> Vec<f64> {
    let v = samples(level, cv, k, seed);
    let m = v.iter().sum::<f64>() / k as f64;
    v.into_iter().map(|x| x - m + level).collect()
}

/// A merge (3) of two lines from a common base (0), a commit on each (1, 2), and the bad
/// commit (4) after it: the runs a bisect holds once the merge is verified against both
/// parents, with the parents at `parents` (+3% at the merge, CV 2%).
fn merge_of_two_lines(parents: f64) -> (CandidateGraph, Evidence) {
    merge_of_two_lines_measured(parents, (64, 40), 30)
}

/// [`merge_of_two_lines`] with `n` runs of each parent (each verified against the merge) and
/// `n_good` of the good commit.
fn merge_of_two_lines_measured(
    parents: f64,
    n: (usize, usize),
    n_good: usize,
) -> (CandidateGraph, Evidence) {
    let ids = (0..5).map(|i| format!("{i:040x}")).collect();
    let g = CandidateGraph::new(ids, vec![vec![], vec![0], vec![0], vec![1, 2], vec![3]])
        .expect("graph");
    let (n1, n2) = n;
    let mut ev = Evidence::default();
    let (p1, p2) = (centred(parents, 0.02, n1, 3), centred(parents, 0.02, n2, 4));
    let merge = centred(103.0, 0.02, n1 + n2, 5);
    ev.samples
        .insert(Point::Good, centred(100.0, 0.02, n_good, 1));
    ev.samples
        .insert(Point::Candidate(0), centred(100.0, 0.02, 8, 2));
    ev.samples.insert(Point::Candidate(1), p1.clone());
    ev.samples.insert(Point::Candidate(2), p2.clone());
    ev.samples.insert(Point::Candidate(3), merge.clone());
    ev.samples
        .insert(Point::Candidate(4), centred(103.0, 0.02, 24, 6));
    ev.pairs.insert(
        (Point::Candidate(3), Point::Candidate(1)),
        merge[..n1].iter().copied().zip(p1).collect(),
    );
    ev.pairs.insert(
        (Point::Candidate(3), Point::Candidate(2)),
        merge[n1..].iter().copied().zip(p2).collect(),
    );
    (g, ev)
}

/// The merge of [`merge_of_two_lines`] is not named: the good commit or a parent is measured.
fn assert_merge_held_back(d: &Decision) {
    match d {
        Decision::Measure { requests, .. } => assert!(
            requests
                .iter()
                .any(|r| matches!(r.point, Point::Good | Point::Candidate(1 | 2))),
            "{d:?}"
        ),
        _ => panic!("the merge of two lines that each carry part of the change was named: {d:?}"),
    }
}

#[test]
fn a_merge_whose_parents_both_lean_towards_the_change_is_not_named_on_a_weak_doubt() {
    // Two +1.5% steps, one on each line a merge joins: the merge differs from each parent
    // by the other line's step, so it passes verification against both, and only the
    // parents' levels say its step is not its own. Here both parents read +0.6% (1.3 and
    // 1.2 standard errors over the good level, where +1.5% is the truth): the doubt that
    // the merge's step is the whole change reads 0.17, under the 0.2 that names a commit,
    // and git.git's history had bisects end so. Both parents leaning the same way, the
    // merge waits for the doubt to fall to 0.05: more runs at the good commit and a parent.
    let settings = Settings {
        max_runs: 2000,
        ..Settings::default()
    };
    let (g, ev) = merge_of_two_lines(100.6);
    let (d, _) = decide(&g, &ev, &settings);
    assert_merge_held_back(&d);
    // A merge with a step of its own: its parents at the good level, the same runs
    // otherwise. It is named as before.
    let (g, ev) = merge_of_two_lines(100.0);
    let (d, _) = decide(&g, &ev, &settings);
    assert!(
        matches!(d, Decision::Done(Outcome::Found { culprit: 3, .. })),
        "{d:?}"
    );
}

#[test]
fn a_merge_whose_parents_carry_parts_of_the_change_together_is_not_named() {
    // Two lines meeting at a merge, each parent measured well (100 runs, as is the good
    // commit: a standard error of 0.28% at CV 2%) and each reading +0.5%. Each part alone is
    // under the 1% this bisect looks for by more than a standard error, which once dropped
    // each parent's doubt; together they are +1%, a change of interest. git.git's history
    // had a bisect end so (seed 367001118: parents at +0.53% and +0.35%, the merge named
    // alone). The merge is held back: the good commit or a parent is measured again.
    let settings = Settings {
        max_runs: 4000,
        ..Settings::default()
    };
    let (g, ev) = merge_of_two_lines_measured(100.5, (100, 100), 100);
    let (d, _) = decide(&g, &ev, &settings);
    assert_merge_held_back(&d);
    // Parents at +0.2% each, +0.4% together: what is left is no change of interest, and the
    // merge is named.
    let (g, ev) = merge_of_two_lines_measured(100.2, (100, 100), 100);
    let (d, _) = decide(&g, &ev, &settings);
    assert!(
        matches!(d, Decision::Done(Outcome::Found { culprit: 3, .. })),
        "{d:?}"
    );
}
