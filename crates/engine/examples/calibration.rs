//! Is the posterior itself calibrated? Over simulated bisects (N = 1000 with merges, one
//! change, Gaussian noise), the first time the most probable commit's probability reaches
//! each level, how often that commit is the planted one. A calibrated posterior is right
//! about as often as it claims; one right far more often than it claims spends runs it does
//! not need.
//!
//! cargo run --release -p perfbisect-engine --example calibration -- [cv] [step] [trials]

use perfbisect_engine::sim::{Lab, Noise, World, run_trial_observed};
use perfbisect_engine::synth::{self, Shape, SplitMix};
use perfbisect_engine::{Point, Settings, decide_explained};
use std::collections::BTreeSet;

const LEVELS: [f64; 6] = [0.5, 0.8, 0.9, 0.95, 0.99, 0.999];

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let cv: f64 = a.first().map_or(0.02, |s| s.parse().expect("cv"));
    let step: f64 = a.get(1).map_or(0.03, |s| s.parse().expect("step"));
    let trials: u64 = a.get(2).map_or(200, |s| s.parse().expect("trials"));
    let settings = Settings {
        confidence: 0.99,
        ..Settings::default()
    };
    let mut reached = [0u32; LEVELS.len()];
    let mut right = [0u32; LEVELS.len()];
    let mut claimed = [0.0f64; LEVELS.len()];
    for seed in 0..trials {
        let graph = synth::graph(Shape::merges(1000), seed);
        let culprit = SplitMix::new(seed ^ 0xc0ffee).below(graph.len());
        let world = World {
            graph: graph.clone(),
            culprit: Some(culprit),
            delta: step,
            noise: Noise::Gaussian { cv },
            untestable: BTreeSet::new(),
            incomplete_rate: 0.0,
            lab: Lab::default(),
        };
        let mut seen = [false; LEVELS.len()];
        run_trial_observed(&world, &settings, seed, &mut |_, ev| {
            let x = decide_explained(&graph, ev, &settings);
            let (top, p) = x
                .assessments
                .iter()
                .filter_map(|s| match (s.point, s.culprit_probability) {
                    (Point::Candidate(c), Some(p)) => Some((c, p)),
                    _ => None,
                })
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or((0, 0.0));
            for (i, &l) in LEVELS.iter().enumerate() {
                if !seen[i] && p >= l {
                    seen[i] = true;
                    reached[i] += 1;
                    claimed[i] += p;
                    if top == culprit {
                        right[i] += 1;
                    }
                }
            }
        });
    }
    println!("cv {cv} step {step}, {trials} bisects: the first time the top commit reached");
    for (i, &l) in LEVELS.iter().enumerate() {
        println!(
            "  {l:>5}: {:>4} bisects, claimed {:.4} on average, right {:.4}",
            reached[i],
            claimed[i] / reached[i].max(1) as f64,
            right[i] as f64 / reached[i].max(1) as f64
        );
    }
}
