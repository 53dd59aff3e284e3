//! A simulated lab for the engine: a synthetic history with one planted step change, noisy
//! benchmark runs, unbuildable commits, and a loop that feeds [`decide`] its own results.
//!
//! Used by the `bisect-sim` binary and by tests. The noise is drawn from a seeded generator,
//! so every trial is reproducible from its seed.

use crate::decide::{Decision, Outcome, Point, Request, Settings};
use crate::{CandidateGraph, Evidence, decide};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal, StudentT};
use std::collections::BTreeSet;

/// How one benchmark run scatters around its commit's level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Noise {
    /// Normal, relative standard deviation `cv`.
    Gaussian { cv: f64 },
    /// Student-t with 3 degrees of freedom, scaled to relative standard deviation `cv`.
    StudentT3 { cv: f64 },
    /// Two modes (70% / 30%, 1.5·cv apart) with total relative standard deviation `cv`.
    Bimodal { cv: f64 },
    /// Gaussian `cv` plus a slow wander of amplitude `cv` over the bisect's runs.
    Drift { cv: f64 },
}

impl Noise {
    pub fn cv(&self) -> f64 {
        match *self {
            Noise::Gaussian { cv }
            | Noise::StudentT3 { cv }
            | Noise::Bimodal { cv }
            | Noise::Drift { cv } => cv,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Noise::Gaussian { .. } => "gauss",
            Noise::StudentT3 { .. } => "t3",
            Noise::Bimodal { .. } => "bimodal",
            Noise::Drift { .. } => "drift",
        }
    }

    /// Relative deviation of run number `t` of the bisect.
    fn draw(&self, rng: &mut StdRng, t: u64) -> f64 {
        let z: f64 = StandardNormal.sample(rng);
        match *self {
            Noise::Gaussian { cv } => cv * z,
            Noise::StudentT3 { cv } => {
                let t3: f64 = StudentT::new(3.0).expect("3 > 0").sample(rng);
                cv * t3 / 3f64.sqrt()
            }
            Noise::Bimodal { cv } => {
                let slow = rng.random::<f64>() < 0.3;
                let shift = 1.5 * cv;
                let within = cv * (1.0 - 0.21 * 2.25f64).sqrt();
                within * z + if slow { 0.7 * shift } else { -0.3 * shift }
            }
            Noise::Drift { cv } => cv * z + cv * (t as f64 / 150.0).sin(),
        }
    }
}

/// One simulated bisect: the history, the planted change and the lab's behaviour.
#[derive(Debug, Clone)]
pub struct World {
    pub graph: CandidateGraph,
    /// The commit that changed the metric, or None for a range without change.
    pub culprit: Option<usize>,
    /// Relative change at the culprit (0.03 = +3%).
    pub delta: f64,
    pub noise: Noise,
    /// Commits that fail to build or boot.
    pub untestable: BTreeSet<usize>,
    /// Fraction of runs that do not complete (they cost a run and yield no sample).
    pub incomplete_rate: f64,
}

/// What happened in one trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub outcome: Outcome,
    /// Runs spent (complete or not).
    pub runs: u32,
    /// Rounds of requests (one round: every request of one decision, run in parallel).
    pub rounds: u32,
    /// True when the engine asked for nothing while nothing was pending (a bug).
    pub stalled: bool,
}

impl Trial {
    /// The exact culprit was found (or "no culprit" was reported for a range without change).
    pub fn correct(&self, world: &World) -> bool {
        match (&self.outcome, world.culprit) {
            (Outcome::Found { culprit, .. }, Some(c)) => *culprit == c,
            (Outcome::Found { .. }, None) => false,
            (_, Some(_)) => false,
            (_, None) => true,
        }
    }
}

/// Runs one bisect to its end: every round, all requested runs complete before the next
/// decision, with `settings.idle_hosts` hosts free each round.
pub fn run_trial(world: &World, settings: &Settings, seed: u64) -> Trial {
    run_trial_observed(world, settings, seed, &mut |_, _| {})
}

/// [`run_trial`], showing `observe` every decision and the evidence it was made on.
pub fn run_trial_observed(
    world: &World,
    settings: &Settings,
    seed: u64,
    observe: &mut dyn FnMut(&Decision, &Evidence),
) -> Trial {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = world.graph.len();
    // has_change[c]: the culprit is an ancestor-or-self of c.
    let has_change: Vec<bool> = match world.culprit {
        None => vec![false; n],
        Some(k) => {
            let mut m = vec![false; n];
            m[k] = true;
            for c in k + 1..n {
                m[c] = world.graph.parents(c).iter().any(|&p| m[p]);
            }
            m
        }
    };
    let level = |p: Point| -> f64 {
        match p {
            Point::Good => 100.0,
            Point::Candidate(c) if has_change[c] => 100.0 * (1.0 + world.delta),
            Point::Candidate(_) => 100.0,
        }
    };
    let mut ev = Evidence::default();
    let mut runs = 0u32;
    let mut rounds = 0u32;
    let mut clock = 0u64;
    loop {
        let (decision, _) = decide(&world.graph, &ev, settings);
        observe(&decision, &ev);
        match decision {
            Decision::Done(outcome) => {
                return Trial {
                    outcome,
                    runs,
                    rounds,
                    stalled: false,
                };
            }
            Decision::Wait { .. } => {
                let outcome = Outcome::Inconclusive {
                    reason: "stalled".into(),
                    candidates: vec![],
                };
                return Trial {
                    outcome,
                    runs,
                    rounds,
                    stalled: true,
                };
            }
            Decision::Measure { requests, .. } => {
                rounds += 1;
                for Request {
                    point,
                    runs: k,
                    pair_with,
                } in requests
                {
                    let points: Vec<Point> = std::iter::once(point).chain(pair_with).collect();
                    if let Point::Candidate(c) = point
                        && world.untestable.contains(&c)
                    {
                        ev.untestable.insert(c);
                        continue;
                    }
                    for _ in 0..k {
                        let mut couple = Vec::with_capacity(2);
                        for &p in &points {
                            runs += 1;
                            clock += 1;
                            if rng.random::<f64>() < world.incomplete_rate {
                                *ev.failed.entry(p).or_default() += 1;
                                continue;
                            }
                            let y = level(p) * (1.0 + world.noise.draw(&mut rng, clock));
                            ev.samples.entry(p).or_default().push(y);
                            couple.push(y);
                        }
                        if let (Some(q), [a, b]) = (pair_with, couple.as_slice()) {
                            ev.pairs.entry((point, q)).or_default().push((*a, *b));
                        }
                    }
                }
            }
        }
        if runs > 20 * settings.max_runs.max(1) || rounds > 100_000 {
            let outcome = Outcome::Inconclusive {
                reason: "runaway".into(),
                candidates: vec![],
            };
            return Trial {
                outcome,
                runs,
                rounds,
                stalled: true,
            };
        }
    }
}

/// The baselines the engine is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// `git bisect` with one run a step, good/bad by which endpoint run the result is nearer.
    PlainGit,
    /// LKP's practice: 3 runs a step, good/bad by which side of the midpoint of the
    /// endpoints' 3-run means the step's mean falls.
    FixedRuns3,
}

/// Runs a baseline bisect on `world` (one host, one step at a time).
pub fn run_baseline(world: &World, baseline: Baseline, seed: u64) -> Trial {
    let mut rng = StdRng::seed_from_u64(seed);
    let g = &world.graph;
    let n = g.len();
    let has_change: Vec<bool> = match world.culprit {
        None => vec![false; n],
        Some(k) => {
            let mut m = vec![false; n];
            m[k] = true;
            for c in k + 1..n {
                m[c] = g.parents(c).iter().any(|&p| m[p]);
            }
            m
        }
    };
    let per_step = match baseline {
        Baseline::PlainGit => 1,
        Baseline::FixedRuns3 => 3,
    };
    let mut runs = 0u32;
    let mut rounds = 0u32;
    let mut clock = 0u64;
    // Mean of `per_step` complete runs (retrying incomplete ones).
    let mut measure = |changed: bool, runs: &mut u32| -> f64 {
        let level = if changed {
            100.0 * (1.0 + world.delta)
        } else {
            100.0
        };
        let mut got = Vec::new();
        while got.len() < per_step {
            *runs += 1;
            clock += 1;
            if rng.random::<f64>() < world.incomplete_rate {
                continue;
            }
            got.push(level * (1.0 + world.noise.draw(&mut rng, clock)));
        }
        got.iter().sum::<f64>() / per_step as f64
    };
    let good_level = measure(false, &mut runs);
    let bad_level = measure(has_change[g.bad()], &mut runs);
    rounds += 2;
    let mid = (good_level + bad_level) / 2.0;
    let up = bad_level > good_level;
    let mut goods = Vec::new();
    let mut bads = vec![g.bad()];
    let mut skip = vec![false; n];
    loop {
        let set = g.remaining(&goods, &bads);
        let live: Vec<usize> = (0..n).filter(|&c| set[c]).collect();
        if live.len() == 1 {
            let outcome = Outcome::Found {
                culprit: live[0],
                confidence: 1.0,
            };
            return Trial {
                outcome,
                runs,
                rounds,
                stalled: false,
            };
        }
        let split = g.best_split(&set, &skip).filter(|&(_, d)| d > 0);
        let Some((c, _)) = split else {
            let p = 1.0 / live.len().max(1) as f64;
            let outcome = Outcome::Inconclusive {
                reason: "only skipped commits left".into(),
                candidates: live.iter().map(|&c| (c, p)).collect(),
            };
            return Trial {
                outcome,
                runs,
                rounds,
                stalled: false,
            };
        };
        rounds += 1;
        if world.untestable.contains(&c) {
            skip[c] = true;
            continue;
        }
        let y = measure(has_change[c], &mut runs);
        if (y > mid) == up {
            bads.push(c)
        } else {
            goods.push(c)
        }
    }
}
