//! Robust weights for runs: the noise model (Gaussian, Student-t, or a Gaussian core with
//! a few wild runs) fitted to all residuals at once, and each run's weight under it.

use super::*;

/// How much wider than the core the wild runs' normal is (see `fit_wild`).
const WILD_SPREAD: f64 = 10.0;
/// The largest fraction of wild runs fitted.
const WILD_MAX: f64 = 0.25;

/// Log-likelihood of residuals `r` under Student-t with `nu` degrees of freedom (None:
/// Gaussian), with the scale fitted by EM; returns it with the scale.
pub(super) fn fit_scale(r: &[f64], nu: Option<f64>, start: f64) -> (f64, f64) {
    let n = r.len() as f64;
    let mut s2 = start * start;
    match nu {
        None => {
            s2 = (r.iter().map(|x| x * x).sum::<f64>() / n).max(1e-300);
            let ll = -0.5 * n * (2.0 * std::f64::consts::PI * s2).ln() - 0.5 * n;
            (ll, s2.sqrt())
        }
        Some(nu) => {
            for _ in 0..50 {
                let acc: f64 = r
                    .iter()
                    .map(|x| (nu + 1.0) / (nu + x * x / s2) * x * x)
                    .sum();
                let next = (acc / n).max(s2 * 1e-6);
                let done = (next - s2).abs() <= 1e-7 * s2;
                s2 = next;
                if done {
                    break;
                }
            }
            use statrs::function::gamma::ln_gamma;
            let c = ln_gamma((nu + 1.0) / 2.0)
                - ln_gamma(nu / 2.0)
                - 0.5 * (nu * std::f64::consts::PI).ln()
                - 0.5 * s2.ln();
            let ll: f64 = r
                .iter()
                .map(|x| c - (nu + 1.0) / 2.0 * (1.0 + x * x / (nu * s2)).ln())
                .sum();
            (ll, s2.sqrt())
        }
    }
}

/// The noise shape `robust_weights` chose.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Tail {
    Gaussian,
    StudentT(f64),
    /// A Gaussian core and this fraction of wild runs.
    Wild(f64),
}

/// A Gaussian core with a fraction ε of wild runs (a normal [`WILD_SPREAD`] times wider),
/// fitted by EM from `start`: the log-likelihood, the core's scale and ε.
pub(super) fn fit_wild(r: &[f64], start: f64) -> (f64, f64, f64) {
    let n = r.len() as f64;
    let (mut s2, mut eps) = (start * start, 0.05);
    let k2 = WILD_SPREAD * WILD_SPREAD;
    let dens =
        |x: f64, v: f64| (-x * x / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt();
    let core = |x: f64, s2: f64, eps: f64| {
        let a = (1.0 - eps) * dens(x, s2);
        let b = eps * dens(x, k2 * s2);
        (a / (a + b).max(1e-300), (a + b).max(1e-300))
    };
    for _ in 0..100 {
        let (mut g, mut gx2) = (0.0, 0.0);
        for &x in r {
            let (w, _) = core(x, s2, eps);
            g += w;
            gx2 += w * x * x;
        }
        let next = (gx2 / g.max(1e-300)).max(s2 * 1e-6);
        let next_eps = (1.0 - g / n).clamp(1e-4, WILD_MAX);
        let done = (next - s2).abs() <= 1e-7 * s2 && (next_eps - eps).abs() < 1e-6;
        (s2, eps) = (next, next_eps);
        if done {
            break;
        }
    }
    let ll = r.iter().map(|&x| core(x, s2, eps).1.ln()).sum();
    (ll, s2.sqrt(), eps)
}

/// Robustness weights for every sample of every point (same shape as `zs`), the scale of
/// the noise, and the tail index chosen (None: Gaussian).
///
/// Residuals are taken from the median of the point's other samples (points with three or
/// more), else from the nearer endpoint median. The noise shape is chosen among Student-t
/// with 3, 5 and 10 degrees of freedom and the Gaussian by likelihood, so Gaussian noise
/// keeps weights of 1 (and the exact conjugate model) while heavy tails are down-weighted
/// the way the t model would.
pub(super) fn robust_weights(
    zs: &[Vec<f64>],
    good: Option<usize>,
    bad: Option<usize>,
    intermittent: bool,
) -> (Vec<Vec<f64>>, f64, Tail) {
    let endpoint_median = |i: Option<usize>| {
        i.filter(|&i| !zs[i].is_empty())
            .map(|i| median(&mut zs[i].clone()))
    };
    let (mg, mb) = (endpoint_median(good), endpoint_median(bad));
    let mut residuals: Vec<Vec<f64>> = Vec::with_capacity(zs.len());
    let mut fit: Vec<f64> = Vec::new();
    for v in zs {
        if v.len() >= 10 {
            // Many samples: the point's own median is as good as leaving one out.
            let m = median(&mut v.clone());
            let r: Vec<f64> = v.iter().map(|&z| z - m).collect();
            fit.extend(&r);
            residuals.push(r);
        } else if v.len() >= 3 {
            let mut others = Vec::with_capacity(v.len() - 1);
            let r: Vec<f64> = (0..v.len())
                .map(|i| {
                    others.clear();
                    others.extend(
                        v.iter()
                            .enumerate()
                            .filter(|&(j, _)| j != i)
                            .map(|(_, &x)| x),
                    );
                    v[i] - median(&mut others)
                })
                .collect();
            fit.extend(&r);
            residuals.push(r);
        } else {
            residuals.push(
                v.iter()
                    .map(|&z| {
                        let reference = match (mg, mb) {
                            (Some(a), Some(b)) if (z - a).abs() > (z - b).abs() => b,
                            (Some(a), _) | (None, Some(a)) => a,
                            (None, None) => 0.0,
                        };
                        z - reference
                    })
                    .collect(),
            );
        }
    }
    if fit.len() < 12 {
        fit = residuals.iter().flatten().copied().collect();
    }
    let mut abs: Vec<f64> = fit.iter().map(|r| r.abs()).collect();
    let mad = 1.4826 * median(&mut abs);
    let ones = || zs.iter().map(|v| vec![1.0; v.len()]).collect();
    if mad <= 0.0 || !mad.is_finite() {
        // Identical samples (a deterministic metric): every weight 1.
        let rms = (fit.iter().map(|x| x * x).sum::<f64>() / fit.len().max(1) as f64).sqrt();
        return (ones(), rms, Tail::Gaussian);
    }
    // Runs that show an intermittent change are the change, not noise to weigh down: heavy
    // tails and wild runs explained them away (P(no change) 0.95 with a +2.5% step).
    let choices: &[Option<f64>] = if intermittent {
        &[None]
    } else if fit.len() >= 20 {
        &[None, Some(10.0), Some(5.0), Some(3.0)]
    } else {
        &[Some(10.0)]
    };
    // Heavier tails must beat the Gaussian clearly (2 nats a step), not by chance.
    let (mut nu, mut best, mut scale) = (None, f64::NEG_INFINITY, mad);
    for (step, &c) in choices.iter().enumerate() {
        let (ll, sc) = fit_scale(&fit, c, mad);
        if ll - 2.0 * step as f64 > best {
            (nu, best, scale) = (c, ll - 2.0 * step as f64, sc);
        }
    }
    // A clean core with a few wild runs (a slow run now and then) must beat the best of
    // those as clearly again: Student-t down-weights every run a little and its fit is
    // tempered to (ν+1)/(ν+3) of the runs' information (0.67 at ν = 3); the core keeps
    // nearly all of it.
    if fit.len() >= 20 && !intermittent {
        let (ll, sc, eps) = fit_wild(&fit, mad);
        if ll - 2.0 * choices.len() as f64 > best {
            let (s2, k2) = (sc * sc, WILD_SPREAD * WILD_SPREAD);
            let weights = residuals
                .iter()
                .map(|v| {
                    v.iter()
                        .map(|r| {
                            let a = (1.0 - eps) * (-r * r / (2.0 * s2)).exp();
                            let b = eps / WILD_SPREAD * (-r * r / (2.0 * k2 * s2)).exp();
                            a / (a + b).max(1e-300)
                        })
                        .collect()
                })
                .collect();
            return (weights, sc, Tail::Wild(eps));
        }
    }
    let Some(nu) = nu else {
        return (ones(), scale, Tail::Gaussian);
    };
    let s2 = scale * scale;
    let weights = residuals
        .iter()
        .map(|v| v.iter().map(|r| (nu + 1.0) / (nu + r * r / s2)).collect())
        .collect();
    (weights, scale, Tail::StudentT(nu))
}
