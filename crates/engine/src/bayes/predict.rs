//! Predictions of the runs and machine time the target confidence still needs.

use super::*;

/// The engine's measured overhead over the information bound, for predictions.
const PREDICT_OVERHEAD: f64 = 2.5;

/// Capacity in bits of one run for a step of `d` noise units (a binary-input Gaussian
/// channel with inputs ±d/2), by numerical integration.
pub(super) fn capacity(d: f64) -> f64 {
    if !d.is_finite() || d > 12.0 {
        return 1.0;
    }
    let a = d / 2.0;
    let steps = 400;
    let (lo, hi) = (-a - 8.0, a + 8.0);
    let h = (hi - lo) / steps as f64;
    let mut acc = 0.0;
    for i in 0..=steps {
        let y = lo + i as f64 * h;
        let p = (-(y - a).powi(2) / 2.0).exp() / (2.0 * std::f64::consts::PI).sqrt();
        // log2(2 / (1 + exp(-2 a y)))
        let l = std::f64::consts::LN_2 - (1.0 + (-2.0 * a * y).exp()).ln();
        let w = if i == 0 || i == steps { 0.5 } else { 1.0 };
        acc += w * p * l / std::f64::consts::LN_2;
    }
    (acc * h).clamp(1e-6, 1.0)
}

/// What the bound-times-overhead prediction is multiplied by so that it is the engine's
/// mean: measured by bisect-sim (`--phases` prints the first prediction against the runs
/// taken after it), 100 trials a cell, n = 1000 with merges, one host. Taken/predicted was
/// 0.55, 0.56, 0.61, 0.74, 0.82, 1.06, 1.21 and 1.33 for steps of 6, 4, 3, 2, 1.5, 1, 0.75
/// and 0.6 noise standard deviations (about 0.45 + 0.55/d): the search's overhead over the
/// information bound grows as the step shrinks. With several hosts a round's points are
/// chosen before the others' results are known; w = 4, 8 and 32 cost 1.47, 1.9 and 3.0 the
/// runs of one host at 1.5 σ (about w^0.3).
pub(super) fn predict_calibration(d: f64, hosts: u32) -> f64 {
    let per_step = (0.45 + 0.55 / d.max(1e-3)).clamp(0.5, 2.5);
    per_step * f64::from(hosts.max(1)).powf(0.3)
}

/// The size of the step a prediction is made for: the median of |δ| under the posterior of
/// the step, with the prior the model searches under ([`delta_prior`]) and the step as
/// measured between the two sides of the most probable split, with its standard error.
///
/// The measured step alone is no ground for a prediction while it is measured within its
/// own noise: the runs a step needs grow as 1/d², and from 5 + 5 endpoint runs a +3% step
/// at CV 2% whose bad side is twice as noisy read +0.01% once in 60 bisects, predicting
/// 26,357,567 more runs (87 more did it). Under the prior a change is at least about
/// half a percent, so an unmeasured step predicts what a step of that size costs. The
/// median is used only where it is larger than the step measured: the prior pulls a step
/// measured from a few runs towards its smaller scales too, and the calibration of the
/// predictions ([`predict_calibration`]) was measured with the step as measured (taking the
/// median everywhere moved the first prediction from 0.94× to 0.67× the runs then taken at
/// CV 2%, and from 0.82× to 0.46× at CV 5%, 400 bisects each).
pub(super) fn step_for_prediction(b: &Belief, settings: &Settings) -> f64 {
    let measured = b.change.abs();
    // Weight on either side of the split: a point's weight times the probability that it
    // carries the change (the good endpoint never does).
    let (mut w_good, mut w_bad) = (0.0, 0.0);
    for (&p, &(_, w)) in &b.means {
        let carries = match p {
            Point::Good => 0.0,
            Point::Candidate(c) => b.bad.get(c).copied().unwrap_or(0.0),
        };
        w_good += w * (1.0 - carries);
        w_bad += w * carries;
    }
    let se = b.effective_noise * (1.0 / w_good + 1.0 / w_bad).sqrt();
    if !(se.is_finite() && se > 0.0 && b.change.is_finite()) {
        return measured;
    }
    // Each prior component N(μ, s²) times the measurement N(δ̂; δ, se²): a normal with
    // weight w·N(δ̂; μ, s² + se²).
    let post: Vec<(f64, f64, f64)> = delta_prior(settings)
        .into_iter()
        .map(|(w, mu, s)| {
            let v = s * s + se * se;
            let log_w = w.ln() - (b.change - mu).powi(2) / (2.0 * v) - 0.5 * v.ln();
            let mean = (mu * se * se + b.change * s * s) / v;
            (log_w, mean, (s * s * se * se / v).sqrt())
        })
        .collect();
    let top = post.iter().map(|c| c.0).fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = post.iter().map(|c| (c.0 - top).exp()).sum();
    let phi = |x: f64| 0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2);
    // P(|δ| ≤ t), increasing in t: its median by bisection.
    let below = |t: f64| {
        post.iter()
            .map(|&(lw, m, sd)| (lw - top).exp() * (phi((t - m) / sd) - phi((-t - m) / sd)) / total)
            .sum::<f64>()
    };
    let (mut lo, mut hi) = (0.0, 1.0f64.max(4.0 * measured));
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if below(mid) < 0.5 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    measured.max(0.5 * (lo + hi))
}

/// How far the robust scale may sit above the endpoints' median absolute deviation before a
/// prediction plans with the latter.
pub(super) const MAD_GAP: f64 = 3.0;

/// The noise a prediction plans with: the robust scale, unless it is more than [`MAD_GAP`]
/// times the endpoints' median absolute deviation. From an endpoint's first five runs the
/// Student-t weighting cannot yet tell one run 60% slow from the noise: in bisect-sim's
/// outliers cell (5% of runs 20–100% slow, CV 2%) the first prediction after 5 + 5 runs
/// said 4,710 to 21,533 more runs in 7 bisects of 200 (139 was the mean taken), a mean of
/// 791 against 139.
pub(super) fn prediction_noise(b: &Belief) -> f64 {
    match b.endpoint_mad_noise {
        Some(mad) if b.effective_noise > MAD_GAP * mad => mad,
        _ => b.effective_noise,
    }
}

/// Runs and builds still needed for the target, from the remaining entropy of the culprit
/// distribution, the information a run carries at the step (see [`step_for_prediction`])
/// and noise, and the engine's measured overhead over that bound (about 2.5×), plus the
/// verification.
pub(super) fn predict(
    b: &Belief,
    costs: crate::Costs,
    conf: f64,
    settings: &Settings,
) -> Prediction {
    let hosts = settings.idle_hosts;
    // A run still to come brings its boot's part too: at a per-boot level of 3% (CV 2%),
    // runs predicted from the run noise alone were 9.25× too few.
    let run_noise = prediction_noise(b) * (1.0 + b.boot_ratio).sqrt();
    let measured_d = if run_noise > 0.0 {
        (b.change / run_noise).abs()
    } else {
        12.0
    };
    let d = if run_noise > 0.0 {
        step_for_prediction(b, settings) / run_noise
    } else {
        12.0
    };
    let mass = (1.0 - b.no_change).max(1e-12);
    let q: Vec<f64> = b.ranked.iter().map(|&(_, p)| p / mass).collect();
    let rest = (1.0 - q.iter().sum::<f64>()).max(0.0);
    let spread = (b.p.len().saturating_sub(q.len())).max(1) as f64;
    // Bits still to learn: the entropy of the culprit distribution, none once one commit
    // holds the target.
    let entropy: f64 = q
        .iter()
        .filter(|&&x| x > 0.0)
        .map(|&x| -x * x.log2())
        .sum::<f64>()
        + if rest > 1e-12 {
            -rest * rest.log2() + rest * spread.log2()
        } else {
            0.0
        };
    let left = if q.first().is_some_and(|&x| x * mass >= conf) {
        0.0
    } else {
        entropy.max(0.0)
    };
    let search = PREDICT_OVERHEAD * left / capacity(d);
    let verify = 2.0 * verify_pairs(b) as f64;
    let runs = ((search + verify) * predict_calibration(d, hosts))
        .ceil()
        .max(0.0) as u32;
    let builds = left.ceil() as u32;
    let machine_secs = (costs.build_secs > 0.0 && costs.run_secs > 0.0)
        .then_some(runs as f64 * costs.run_secs + builds as f64 * costs.build_secs);
    Prediction {
        runs,
        builds,
        machine_secs,
        step_in_noise: measured_d,
    }
}
