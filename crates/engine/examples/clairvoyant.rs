//! How many runs the engine's own model needs before one commit can hold the confidence
//! target, for a measurer that already knows where the change is: every run goes to the
//! culprit, its parent or the endpoints, balanced, with the noise the cell names. A lower
//! bound on any search's runs under this model (prior, step prior and "no change" included);
//! no verification is counted.
//!
//! cargo run --release -p perfbisect-engine --example clairvoyant -- [cv] [step] [conf] [mode]
//! [noise ratio]
//! mode: couples (culprit and parent only), weighted (the same, runs in proportion to each
//! side's noise), four (both endpoints too) or ladder (culprit and
//! parent, and in turn one of the endpoints and the commits 2, 4, 8, ... away on either
//! side, which cut the rest of the range into groups of hypotheses that the couple alone
//! cannot tell apart), or greedy (each run where a noiseless sample would raise the
//! culprit's probability most, among those points). The noise ratio (default 1) multiplies
//! the noise of the culprit and everything after it: bisect-sim's noise-change cell is 2.

use perfbisect_engine::synth::{self, Shape};
use perfbisect_engine::{Evidence, Point, Settings, decide_explained};
use rand::{SeedableRng, rngs::StdRng};
use rand_distr::{Distribution, StandardNormal};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let cv: f64 = a.first().map_or(0.02, |s| s.parse().expect("cv"));
    let step: f64 = a.get(1).map_or(0.03, |s| s.parse().expect("step"));
    let conf: f64 = a.get(2).map_or(0.99, |s| s.parse().expect("conf"));
    let mode = a.get(3).map_or("couples", String::as_str);
    let ratio: f64 = a.get(4).map_or(1.0, |s| s.parse().expect("noise ratio"));
    let graph = synth::graph(Shape::linear(1000), 1);
    let c = 500;
    let settings = Settings {
        confidence: conf,
        ..Settings::default()
    };
    let trials = 60;
    let mut total = 0.0;
    for seed in 0..trials {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut ev = Evidence::default();
        let (lo, hi) = (100.0, 100.0 * (1.0 + step));
        let couple = [(Point::Candidate(c - 1), lo), (Point::Candidate(c), hi)];
        let mut ladder: Vec<(Point, f64)> =
            vec![(Point::Good, lo), (Point::Candidate(graph.bad()), hi)];
        let mut j = 2;
        while j < c {
            ladder.push((Point::Candidate(c - 1 - j), lo));
            ladder.push((Point::Candidate(c + j), hi));
            j *= 2;
        }
        let points: Vec<(Point, f64)> = match mode {
            "four" => [couple.to_vec(), ladder[..2].to_vec()].concat(),
            // Runs in proportion to each side's noise (what minimises the variance of the
            // difference): the culprit `ratio` times per parent run.
            "weighted" => std::iter::once(couple[0])
                .chain(std::iter::repeat_n(
                    couple[1],
                    ratio.round().max(1.0) as usize,
                ))
                .collect(),
            "ladder" => {
                // A couple, then one ladder point, in turn.
                let mut v = Vec::new();
                for l in &ladder {
                    v.extend_from_slice(&couple);
                    v.push(*l);
                }
                v
            }
            _ => couple.to_vec(),
        };
        let all: Vec<(Point, f64)> = [couple.to_vec(), ladder.clone()].concat();
        let p_of = |ev: &Evidence| {
            decide_explained(&graph, ev, &settings)
                .assessments
                .iter()
                .find(|s| s.point == Point::Candidate(c))
                .and_then(|s| s.culprit_probability)
                .unwrap_or(0.0)
        };
        let mut n = 0;
        loop {
            let (p, level) = if mode == "greedy" && n >= 4 {
                // Where a sample at its level (no noise) would raise P(culprit) most.
                *all.iter()
                    .max_by(|a, b| {
                        let gain = |x: &(Point, f64)| {
                            let mut e = ev.clone();
                            e.samples.entry(x.0).or_default().push(x.1);
                            p_of(&e)
                        };
                        gain(a).total_cmp(&gain(b))
                    })
                    .expect("points")
            } else {
                points[n % points.len()]
            };
            let z: f64 = StandardNormal.sample(&mut rng);
            // The changed side is the one at the bad level.
            let sd = if (level - lo).abs() > 0.0 {
                cv * ratio
            } else {
                cv
            };
            ev.samples
                .entry(p)
                .or_default()
                .push(level * (1.0 + sd * z));
            n += 1;
            if n >= 4 {
                let pc = p_of(&ev);
                if pc >= conf || n >= 2000 {
                    break;
                }
            }
        }
        total += n as f64;
    }
    println!(
        "cv {cv} step {step} conf {conf} {mode} noise ratio {ratio}: mean runs until P(culprit) >= conf: {:.1}",
        total / trials as f64
    );
}
