//! A simulated lab for the engine: a synthetic history with one planted step change, noisy
//! benchmark runs, unbuildable commits, and a loop that feeds [`decide`](crate::decide) its
//! own results.
//!
//! Used by the `bisect-sim` binary and by tests. The noise is drawn from a seeded generator,
//! so every trial is reproducible from its seed.

use crate::budget::{Budget, Forecast};
use crate::types::{Decision, Outcome, Phase, Point, Request, Settings};
use crate::{CandidateGraph, Evidence, decide_explained};
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
    /// One-sided multiplicative noise (a busy host only ever slows a run down): an
    /// exponential slowdown with relative standard deviation `cv`, mean removed.
    Skewed { cv: f64 },
    /// Gaussian `cv`, and one run in 20 slowed by 20% to 100%.
    Outliers { cv: f64 },
    /// Gaussian, and one run in 50 is 15% lower: the example repository's benchmark.
    SlowRuns { cv: f64 },
}

impl Noise {
    pub fn cv(&self) -> f64 {
        match *self {
            Noise::Gaussian { cv }
            | Noise::StudentT3 { cv }
            | Noise::Bimodal { cv }
            | Noise::Drift { cv }
            | Noise::Skewed { cv }
            | Noise::Outliers { cv }
            | Noise::SlowRuns { cv } => cv,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Noise::Gaussian { .. } => "gauss",
            Noise::StudentT3 { .. } => "t3",
            Noise::Bimodal { .. } => "bimodal",
            Noise::Drift { .. } => "drift",
            Noise::Skewed { .. } => "skewed",
            Noise::Outliers { .. } => "outliers",
            Noise::SlowRuns { .. } => "slowruns",
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
            Noise::Skewed { cv } => {
                let e: f64 = rand_distr::Exp1.sample(rng);
                cv * (e - 1.0)
            }
            Noise::Outliers { cv } => {
                let slow = rng.random::<f64>() < 0.05;
                cv * z
                    + if slow {
                        0.2 + 0.8 * rng.random::<f64>()
                    } else {
                        0.0
                    }
            }
            Noise::SlowRuns { cv } => {
                let slow = rng.random::<f64>() < 0.02;
                let x = cv * z;
                if slow { 0.85 * (1.0 + x) - 1.0 } else { x }
            }
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
    /// What else the lab does: more changes, drift, warm-up, costs.
    pub lab: Lab,
}

/// Effects beyond one step and stationary noise.
#[derive(Debug, Clone, PartialEq)]
pub struct Lab {
    /// More change points: (commit, relative step), on top of `culprit`.
    pub extra_changes: Vec<(usize, f64)>,
    /// Linear drift of the host, relative, per run (0.0003: 3% per 100 runs).
    pub drift_per_run: f64,
    /// The host's first runs are slower by this (relative), decaying with time constant
    /// `warmup_runs` runs.
    pub warmup: f64,
    pub warmup_runs: f64,
    /// Each task's first run of a commit is off by this (relative), its second by this/e,
    /// and so on: a freshly booted kernel or a cold page cache at every deployment.
    pub cold: f64,
    /// Noise multiplier at commits that carry the change (1: unchanged).
    pub noise_after: f64,
    /// Fraction of the runs of a commit carrying the first change that show it (1: all):
    /// an intermittent regression (a lock that is contended in some runs only), each run
    /// that shows it off by delta / this, so the mean moves by delta as for a plain step.
    pub intermittent: f64,
    /// What a build costs, in runs.
    pub build_cost: f64,
    /// Standard deviation of each host's own level (relative): hosts of one group are not
    /// identical machines, so the same commit runs a little faster on some.
    pub host_sd: f64,
    /// Resolution of the reported value (the good level is 100): a benchmark that prints
    /// whole seconds or a rounded score reports many equal values. 0: exact.
    pub quantum: f64,
    /// Lag-one correlation of the noise of consecutive runs (a host whose state, caches or
    /// background load, outlasts one run). 0: independent runs.
    pub ar: f64,
    /// Standard deviation (relative) of a level drawn at every boot and shared by every run
    /// of that boot: a kernel whose memory layout or boot-time choices differ from boot to
    /// boot, so runs of one boot agree more than runs of two. Boots follow the ssh runner:
    /// a host keeps the commit it booted, and a run of another commit boots that one (so
    /// each run of a couple boots, and a request with `fresh_deploy` boots at its first
    /// run). With it, a run's `seq` is its place since its boot.
    pub boot_sd: f64,
    /// What a boot costs, in runs (machine time only; it is not a run).
    pub boot_cost: f64,
    /// A step in every host's level (relative) from run `jump_at` of the bisect on: a
    /// neighbour that starts to load the lab, a firmware or governor change, a cooling
    /// fault. Unlike drift it is sudden, so no smooth trend in time describes it.
    pub jump: f64,
    pub jump_at: u64,
    /// Standard deviation (relative) of a level of each commit's own, drawn once per
    /// commit: every commit changes the binary's layout (alignment, inlining, link order),
    /// so commits that carry no change still differ a little, and more runs do not remove
    /// that. 0: commits on one side of the change run alike.
    pub commit_sd: f64,
    /// A change of the noise alone, not of the level: commits that carry this commit run
    /// with their noise multiplied by the factor (a commit that adds jitter, not cost).
    pub noise_step: Option<(usize, f64)>,
    /// Noise multiplier of the lab's first host (1: like the others): one machine of the
    /// group jitters more (a noisy neighbour, a failing fan, another kernel config).
    pub noisy_host: f64,
    /// Hosts the change shows on (the first this many; 0: all): a regression that one
    /// machine type of a mixed group has and another does not (a cache size, a NUMA layout).
    pub change_on_hosts: usize,
    /// Standard deviation (relative) of a small change of each commit's own that its
    /// descendants inherit: the level walks from commit to commit, as an instruction count
    /// does when every commit adds or removes a little code. 0: no walk.
    pub commit_walk: f64,
}

impl Default for Lab {
    fn default() -> Self {
        Self {
            extra_changes: Vec::new(),
            drift_per_run: 0.0,
            warmup: 0.0,
            warmup_runs: 20.0,
            cold: 0.0,
            noise_after: 1.0,
            intermittent: 1.0,
            build_cost: 1.0,
            host_sd: 0.0,
            quantum: 0.0,
            ar: 0.0,
            boot_sd: 0.0,
            boot_cost: 0.0,
            jump: 0.0,
            jump_at: 0,
            commit_sd: 0.0,
            noise_step: None,
            noisy_host: 1.0,
            change_on_hosts: 0,
            commit_walk: 0.0,
        }
    }
}

impl World {
    /// Every planted change point, in history order.
    pub fn culprits(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .culprit
            .into_iter()
            .chain(self.lab.extra_changes.iter().map(|c| c.0))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Which commits carry commit `k` (`k` itself and its descendants).
    fn carries(&self, k: usize) -> Vec<bool> {
        let n = self.graph.len();
        let mut m = vec![false; n];
        if k < n {
            m[k] = true;
            for c in k + 1..n {
                m[c] = self.graph.parents(c).iter().any(|&p| m[p]);
            }
        }
        m
    }

    /// Level factor of every commit (1 + every step it carries) and whether it carries the
    /// first change.
    fn levels(&self) -> (Vec<f64>, Vec<bool>) {
        let n = self.graph.len();
        let carries = |k: usize| self.carries(k);
        let first = self.culprit.map_or(vec![false; n], carries);
        let mut level: Vec<f64> = first
            .iter()
            .map(|&b| if b { 1.0 + self.delta } else { 1.0 })
            .collect();
        for &(k, d) in &self.lab.extra_changes {
            for (c, m) in carries(k).into_iter().enumerate() {
                if m {
                    level[c] *= 1.0 + d;
                }
            }
        }
        (level, first)
    }
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
    /// Distinct commits built (the endpoints included).
    pub builds: u32,
    /// Machine time in runs: runs + builds × the build's cost.
    pub machine: f64,
    /// Runs by what asked for them: reproducing, searching at an endpoint, searching
    /// elsewhere, verification couples (both sides), other runs while verifying (the
    /// predictive check's search).
    pub phase_runs: [u32; 5],
    /// The engine's first prediction: (runs used when it was made, runs it predicted).
    pub first_prediction: Option<(u32, u32)>,
}

impl Trial {
    /// The exact culprit was found (every planted one, when there are several), or "not
    /// reproduced" was reported for a range without change (an inconclusive A/A is not right).
    pub fn correct(&self, world: &World) -> bool {
        let truth = world.culprits();
        match &self.outcome {
            Outcome::NotReproduced { .. } => truth.is_empty(),
            _ => !truth.is_empty() && self.named() == truth,
        }
    }

    /// The commits the outcome names as culprits, in history order.
    pub fn named(&self) -> Vec<usize> {
        let mut v: Vec<usize> = match &self.outcome {
            Outcome::Found { culprit, .. } => vec![*culprit],
            Outcome::Changes { changes, .. } => changes.iter().filter_map(|c| c.culprit).collect(),
            _ => vec![],
        };
        v.sort_unstable();
        v
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
    run_trial_budgeted(world, settings, None, seed, observe)
}

/// [`run_trial_observed`] under a budget that follows the engine's predictions as the
/// product's does ([`Budget::settle`] after every decision); without one, the budget is
/// `settings.max_runs` throughout.
pub fn run_trial_budgeted(
    world: &World,
    settings: &Settings,
    mut budget: Option<Budget>,
    seed: u64,
    observe: &mut dyn FnMut(&Decision, &Evidence),
) -> Trial {
    let mut settings = settings.clone();
    if let Some(b) = &budget {
        settings.max_runs = b.runs;
        settings.ceiling = Some(b.cap);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    // Drawn apart from the trial's stream, so cells without host offsets keep their trials.
    let mut host_rng = StdRng::seed_from_u64(seed ^ 0x5eed_0ff5e7);
    let host_level: Vec<f64> = (0..settings.idle_hosts.max(1))
        .map(|_| {
            let z: f64 = StandardNormal.sample(&mut host_rng);
            world.lab.host_sd * z
        })
        .collect();
    let (mut factor, has_change) = world.levels();
    // Each commit's small inherited change (a walk), from a stream of its own; a commit's
    // level carries the changes of all its ancestors in the range.
    if world.lab.commit_walk > 0.0 {
        let n = world.graph.len();
        let mut r = StdRng::seed_from_u64(seed ^ 0x3a1c_5eed_0bad);
        let own: Vec<f64> = (0..n)
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut r);
                (1.0 + world.lab.commit_walk * z).ln()
            })
            .collect();
        let words = n.div_ceil(64);
        let mut ancestors: Vec<Vec<u64>> = Vec::with_capacity(n);
        for c in 0..n {
            let mut a = vec![0u64; words];
            a[c / 64] |= 1 << (c % 64);
            for &p in world.graph.parents(c) {
                for (x, y) in a.iter_mut().zip(&ancestors[p]) {
                    *x |= *y;
                }
            }
            let walk: f64 = (0..n)
                .filter(|&i| a[i / 64] >> (i % 64) & 1 == 1)
                .map(|i| own[i])
                .sum();
            factor[c] *= walk.exp();
            ancestors.push(a);
        }
    }
    // Each commit's own level (layout), from a stream of its own so that cells without it
    // keep their trials; the last entry is the good endpoint's.
    let commit_level: Vec<f64> = if world.lab.commit_sd > 0.0 {
        let mut r = StdRng::seed_from_u64(seed ^ 0x1a40_07c0_ffee);
        (0..=world.graph.len())
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut r);
                1.0 + world.lab.commit_sd * z
            })
            .collect()
    } else {
        vec![1.0; world.graph.len() + 1]
    };
    let level = |p: Point| -> f64 {
        match p {
            Point::Good => 100.0 * commit_level[world.graph.len()],
            Point::Candidate(c) => 100.0 * factor[c] * commit_level[c],
        }
    };
    let noisier = world.lab.noise_step.map(|(k, f)| (world.carries(k), f));
    let noise_at = |p: Point| -> f64 {
        let step = match (&noisier, p) {
            (Some((m, f)), Point::Candidate(c)) if m[c] => *f,
            _ => 1.0,
        };
        step * match p {
            Point::Candidate(c) if has_change[c] => world.lab.noise_after,
            _ => 1.0,
        }
    };
    let mut ev = Evidence {
        costs: crate::Costs {
            build_secs: world.lab.build_cost,
            run_secs: 1.0,
            // As the server measures it, where runs say which came right after a boot.
            boot_secs: world.lab.boot_cost,
        },
        ..Evidence::default()
    };
    let mut runs = 0u32;
    let mut rounds = 0u32;
    let mut clock = 0u64;
    let mut built: BTreeSet<Point> = BTreeSet::new();
    let mut phase_runs = [0u32; 5];
    let mut first_prediction = None;
    let mut ar_state = 0.0f64;
    // Per host: the point it booted, that boot's level and the runs since (`boot_sd`,
    // `boot_cost`), and how many boots there were.
    let mut booted: Vec<Option<(Point, f64, u32)>> = vec![None; host_level.len()];
    let mut boots = 0u32;
    let track_boots = world.lab.boot_sd > 0.0 || world.lab.boot_cost > 0.0;
    let machine = |runs: u32, built: &BTreeSet<Point>, boots: u32| {
        runs as f64
            + built.len() as f64 * world.lab.build_cost
            + f64::from(boots) * world.lab.boot_cost
    };
    loop {
        let mut explained = decide_explained(&world.graph, &ev, &settings);
        // As the server does: a bisect that just ran out of its budget may finish when
        // what is left is small beside what it used; the engine then decides again.
        let used = ev.runs_spent() + ev.runs_pending();
        if let Some(b) = &mut budget
            && matches!(
                explained.decision,
                Decision::Done(Outcome::Inconclusive { .. })
            )
            && used >= settings.max_runs
            && let Some(f) = Forecast::of(&explained.findings)
            && b.settle(&f, used).is_some()
        {
            settings.max_runs = b.runs;
            explained = decide_explained(&world.graph, &ev, &settings);
        }
        let decision = explained.decision;
        observe(&decision, &ev);
        if first_prediction.is_none()
            && !matches!(decision, Decision::Done(_))
            && let Some(p) = explained.findings.prediction
        {
            first_prediction = Some((ev.runs_spent() + ev.runs_pending(), p.runs));
        }
        if let Some(b) = &mut budget
            && !matches!(decision, Decision::Done(_))
            && let Some(f) = Forecast::of(&explained.findings)
        {
            let used = ev.runs_spent() + ev.runs_pending();
            if b.settle(&f, used).is_some() {
                settings.max_runs = b.runs;
            }
        }
        match decision {
            Decision::Done(outcome) => {
                return Trial {
                    outcome,
                    runs,
                    rounds,
                    stalled: false,
                    builds: built.len() as u32,
                    machine: machine(runs, &built, boots),
                    phase_runs,
                    first_prediction,
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
                    builds: built.len() as u32,
                    machine: machine(runs, &built, boots),
                    phase_runs,
                    first_prediction,
                };
            }
            Decision::Measure {
                requests, phase, ..
            } => {
                rounds += 1;
                for r in &requests {
                    let endpoint =
                        r.point == Point::Good || r.point == Point::Candidate(world.graph.bad());
                    let bucket = match (phase, r.pair_with.is_some(), endpoint) {
                        (Phase::Reproducing, _, _) => 0,
                        (_, true, _) => 3,
                        (Phase::Searching, false, true) => 1,
                        (Phase::Searching, false, false) => 2,
                        (Phase::Verifying, false, _) => 4,
                    };
                    phase_runs[bucket] += r.runs * if r.pair_with.is_some() { 2 } else { 1 };
                }
                // Which host takes which request: the request's place in the round, or, where
                // hosts differ, whichever host is free (a shuffle), as a lab's queue does.
                let mut hosts: Vec<usize> = (0..host_level.len()).collect();
                if world.lab.host_sd > 0.0 {
                    rand::seq::SliceRandom::shuffle(hosts.as_mut_slice(), &mut host_rng);
                }
                for (
                    slot,
                    Request {
                        point,
                        runs: k,
                        pair_with,
                        fresh_deploy,
                    },
                ) in requests.into_iter().enumerate()
                {
                    if fresh_deploy {
                        booted[hosts[slot % hosts.len()]] = None;
                    }
                    let points: Vec<Point> = std::iter::once(point).chain(pair_with).collect();
                    for &p in &points {
                        built.insert(p);
                        ev.built.insert(p);
                    }
                    // A couple cannot be measured when either side cannot be built.
                    let untestable: Vec<usize> = points
                        .iter()
                        .filter_map(|p| match p {
                            Point::Candidate(c) if world.untestable.contains(c) => Some(*c),
                            _ => None,
                        })
                        .collect();
                    if !untestable.is_empty() {
                        ev.untestable.extend(untestable);
                        continue;
                    }
                    for iteration in 0..k {
                        let mut couple = Vec::with_capacity(2);
                        for &p in &points {
                            runs += 1;
                            clock += 1;
                            if rng.random::<f64>() < world.incomplete_rate {
                                *ev.failed.entry(p).or_default() += 1;
                                continue;
                            }
                            let jumped = if clock >= world.lab.jump_at {
                                world.lab.jump
                            } else {
                                0.0
                            };
                            let host = world.lab.drift_per_run * clock as f64
                                + jumped
                                + world.lab.warmup
                                    * (-(clock as f64) / world.lab.warmup_runs.max(1e-9)).exp()
                                + world.lab.cold * (-f64::from(iteration)).exp();
                            let host_i = hosts[slot % hosts.len()];
                            let (boot, seq) = if track_boots {
                                let b = match &mut booted[host_i] {
                                    Some(b) if b.0 == p => b,
                                    b => {
                                        boots += 1;
                                        let level = if world.lab.boot_sd > 0.0 {
                                            let z: f64 = StandardNormal.sample(&mut host_rng);
                                            world.lab.boot_sd * z
                                        } else {
                                            0.0
                                        };
                                        b.insert((p, level, 0))
                                    }
                                };
                                b.2 += 1;
                                (b.1, b.2 - 1)
                            } else {
                                (0.0, iteration)
                            };
                            let mut e = world.noise.draw(&mut rng, clock);
                            if world.lab.ar != 0.0 {
                                let r = world.lab.ar;
                                ar_state = r * ar_state + (1.0 - r * r).sqrt() * e;
                                e = ar_state;
                            }
                            let mut lv = level(p);
                            if world.lab.intermittent < 1.0
                                && let Point::Candidate(c) = p
                                && has_change[c]
                            {
                                let q = world.lab.intermittent.max(1e-3);
                                let shows = rng.random::<f64>() < q;
                                lv = lv / (1.0 + world.delta)
                                    * if shows { 1.0 + world.delta / q } else { 1.0 };
                            }
                            if world.lab.change_on_hosts > 0
                                && host_i >= world.lab.change_on_hosts
                                && let Point::Candidate(c) = p
                                && has_change[c]
                            {
                                lv /= 1.0 + world.delta;
                            }
                            let mut y = lv
                                * (1.0 + host)
                                * (1.0 + host_level[host_i])
                                * (1.0 + boot)
                                * (1.0
                                    + noise_at(p)
                                        * if host_i == 0 {
                                            world.lab.noisy_host
                                        } else {
                                            1.0
                                        }
                                        * e);
                            if world.lab.quantum > 0.0 {
                                y = (y / world.lab.quantum).round() * world.lab.quantum;
                            }
                            ev.samples.entry(p).or_default().push(y);
                            ev.taken.entry(p).or_default().push(crate::Taken {
                                at: clock as f64,
                                seq,
                                // Each request of a round runs on a host of its own.
                                host: host_i as i64,
                            });
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
                builds: built.len() as u32,
                machine: machine(runs, &built, boots),
                phase_runs,
                first_prediction,
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
                builds: rounds,
                machine: runs as f64 + rounds as f64 * world.lab.build_cost,
                phase_runs: [0; 5],
                first_prediction: None,
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
                builds: rounds,
                machine: runs as f64 + rounds as f64 * world.lab.build_cost,
                phase_runs: [0; 5],
                first_prediction: None,
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
