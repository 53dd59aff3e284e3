//! Measures the detector on synthetic series: false alarms on A/A streams, detection delay of
//! a step, and the cost of adding a head to a long series.
//!
//! `cargo run --release -p perfbisect-changepoint --bin cp-bench`
//!
//! Noise model: each run is normal with the given CV around the level, and 1% of runs are
//! outliers 10–30% off in either direction (a noisy neighbour, a page-cache miss). A head's
//! value is `head_value` of its runs, as the server computes it. A detection is "placed at
//! the step" when it lies between the last head before the step and the first after it.

use std::time::Instant;

use perfbisect_changepoint::{Config, Detector, head_value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

const CV: f64 = 0.02;
const OUTLIER_RATE: f64 = 0.01;

fn head(rng: &mut StdRng, level: f64, runs: usize) -> f64 {
    let samples: Vec<f64> = (0..runs)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            let mut x = level * (1.0 + CV * z);
            if rng.random_bool(OUTLIER_RATE) {
                let size = rng.random_range(0.10..0.30);
                x *= if rng.random_bool(0.5) {
                    1.0 + size
                } else {
                    1.0 - size
                };
            }
            x
        })
        .collect();
    head_value(&samples).unwrap_or(level)
}

/// False alarms over `streams` A/A streams of 1,000 heads each.
fn false_alarms(config: Config, runs: usize, streams: u64) -> (usize, usize) {
    let (mut total, mut worst) = (0, 0);
    for s in 0..streams {
        let mut rng = StdRng::seed_from_u64(1000 + s);
        let mut d = Detector::new(config);
        for _ in 0..1000 {
            d.push(head(&mut rng, 100.0, runs));
        }
        total += d.changes().len();
        worst = worst.max(d.changes().len());
    }
    (total, worst)
}

/// What the step trials found.
struct Delays {
    /// Heads after the step until it was detected (including the detecting head), sorted.
    found: Vec<usize>,
    /// Not detected within 50 heads.
    missed: usize,
    /// Changes detected before the step.
    early: usize,
    /// Detections placed exactly between the last head before the step and the first after.
    placed: usize,
}

/// Streams 60 heads, then a `step`, per trial, and records when and where it was detected.
fn delays(config: Config, runs: usize, step: f64, trials: u64) -> Delays {
    let (mut found, mut missed, mut early, mut placed) = (Vec::new(), 0, 0, 0);
    for t in 0..trials {
        let mut rng = StdRng::seed_from_u64(50_000 + t);
        let mut d = Detector::new(config);
        for _ in 0..60 {
            d.push(head(&mut rng, 100.0, runs));
        }
        early += d.changes().len();
        let before = d.changes().len();
        let mut got = None;
        for k in 1..=50 {
            d.push(head(&mut rng, 100.0 * (1.0 + step), runs));
            if d.changes().len() > before {
                got = Some(k);
                placed += usize::from(d.changes()[before].index == 60);
                break;
            }
        }
        match got {
            Some(k) => found.push(k),
            None => missed += 1,
        }
    }
    found.sort_unstable();
    Delays {
        found,
        missed,
        early,
        placed,
    }
}

fn percentile(sorted: &[usize], q: f64) -> usize {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let config = Config::default();
    println!("perfbisect-changepoint cp-bench");
    println!(
        "config: window {} heads, min {} before / {} after, clip {}σ, alpha {:e}",
        config.window, config.min_before, config.min_after, config.clip, config.alpha
    );
    println!(
        "noise: CV {:.0}% per run, {:.0}% of runs are 10-30% outliers; head = mean of its runs",
        CV * 100.0,
        OUTLIER_RATE * 100.0
    );
    for runs in [1usize, 3, 5] {
        println!("\n== {runs} run(s) per head ==");
        let streams = 50;
        let (total, worst) = false_alarms(config, runs, streams);
        println!(
            "A/A: {streams} streams x 1000 heads: {total} false alarms in all, {:.2} per 1000 heads, worst stream {worst}",
            total as f64 / streams as f64
        );
        for step in [0.03, 0.05, -0.03, 0.10] {
            let trials = 300;
            let r = delays(config, runs, step, trials);
            let d = &r.found;
            let mean = d.iter().sum::<usize>() as f64 / d.len().max(1) as f64;
            println!(
                "step {:+.0}%: detected {}/{trials}, delay in heads: median {}, mean {:.1}, p90 {}, max {}, within 5 heads {}/{trials}; placed at the step {}/{} (missed within 50: {}; alarms before the step: {})",
                step * 100.0,
                d.len(),
                percentile(d, 0.5),
                mean,
                percentile(d, 0.9),
                d.last().copied().unwrap_or(0),
                d.iter().filter(|&&h| h <= 5).count(),
                r.placed,
                d.len(),
                r.missed,
                r.early,
            );
        }
    }

    println!("\n== cost of adding a head to a 10,000-head series ==");
    let mut rng = StdRng::seed_from_u64(7);
    let mut d = Detector::new(config);
    for _ in 0..10_000 {
        d.push(head(&mut rng, 100.0, 1));
    }
    let mut times = Vec::new();
    for _ in 0..1000 {
        let v = head(&mut rng, 100.0, 1);
        let t0 = Instant::now();
        d.push(v);
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "1000 pushes on a series of {}..{} heads: median {:.4} ms, mean {:.4} ms, p99 {:.4} ms, max {:.4} ms (wall clock: a busy machine shows in the tail)",
        10_000,
        d.values().len(),
        times[499],
        times.iter().sum::<f64>() / times.len() as f64,
        times[989],
        times[999]
    );
}
