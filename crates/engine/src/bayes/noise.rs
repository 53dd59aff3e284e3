//! Where the noise itself changes: the endpoints' noise ratio, and the noise's own change
//! point placed apart from the level's ([`NoiseApart`]).

use super::*;

/// The endpoints' log variance ratio is shrunk towards 0 by this many times its sampling
/// variance over its square (positive-part James–Stein): a ratio the endpoints show clearly
/// is kept nearly whole, one within noise is dropped.
const NOISE_RATIO_SHRINK: f64 = 2.0;
const NOISE_RATIO_MIN_SAMPLES: usize = 8;
/// The ratio of noise standard deviations used at most (and at least).
const NOISE_RATIO_RANGE: (f64, f64) = (0.5, 2.0);

/// The bad endpoint's noise variance over the good one's (at least
/// [`NOISE_RATIO_MIN_SAMPLES`] a side), its logarithm shrunk towards 0 by
/// [`NOISE_RATIO_SHRINK`] and clamped to [`NOISE_RATIO_RANGE`]; None when shrunk to nothing.
/// An F test at 1% used to gate it: at CV 2% it let a doubled noise through only after
/// dozens of endpoint runs, and the search judged every point with the pooled noise until
/// then (2.0× the runs of a clean step). Heavy tails can fool the estimate; the likelihood
/// therefore only averages the ratio in, beside equal noise (see `belief`).
pub(super) fn endpoint_noise_ratio(good: &[f64], bad: &[f64]) -> Option<f64> {
    noise_ratio_by(good, bad, Scale::StandardDeviation)
}

/// How [`noise_ratio_by`] measures each side's spread.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Scale {
    StandardDeviation,
    /// The median absolute deviation: blind to a few wild runs, worth 37% of a standard
    /// deviation's degrees of freedom under Gaussian noise.
    Mad,
}

pub(super) fn noise_ratio_by(good: &[f64], bad: &[f64], scale: Scale) -> Option<f64> {
    if good.len() < NOISE_RATIO_MIN_SAMPLES || bad.len() < NOISE_RATIO_MIN_SAMPLES {
        return None;
    }
    let sd = |v: &[f64]| match scale {
        Scale::StandardDeviation => {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
        }
        Scale::Mad => {
            let m = median(&mut v.to_vec());
            1.4826 * median(&mut v.iter().map(|x| (x - m).abs()).collect::<Vec<_>>())
        }
    };
    let (sg, sb) = (sd(good), sd(bad));
    if sg <= 0.0 || sb <= 0.0 || !sg.is_finite() || !sb.is_finite() {
        return None;
    }
    let log_f = (sb / sg).powi(2).ln();
    // The sampling variance of a log variance ratio: 2/df for each side.
    let efficiency = if scale == Scale::Mad { 0.37 } else { 1.0 };
    let df = |n: usize| (efficiency * (n - 1) as f64).max(1.0);
    let var = 2.0 / df(good.len()) + 2.0 / df(bad.len());
    let shrink = 1.0 - NOISE_RATIO_SHRINK * var / (log_f * log_f).max(1e-12);
    let (lo, hi) = NOISE_RATIO_RANGE;
    (shrink > 0.0).then(|| (log_f * shrink).exp().clamp(lo * lo, hi * hi))
}

/// The noise's change placed by the runs' scatter within points alone, apart from any
/// change of level. The endpoints may show that one side is noisier (`noise_ratio`); the
/// level's hypotheses judge the changed side with that ratio, which makes the noise's
/// pattern evidence of where the *level* changed. Where the two move at one commit (a
/// change that makes runs noisier) that is right; where a commit adds jitter but no cost,
/// that commit won the posterior, and with the noise tripled there bisect-sim named it in
/// 5.5% of trials. So a second reading: the noise changes at a commit j of its own, with
/// its posterior from the points' within-point sums of squares (their levels free, so no
/// level enters it), and every point's noise is its expected one under it. Its likelihood
/// carries the Occam factor of placing j, `log_occam`, so the coincident reading wins where
/// the level's change and the noise's fall together.
pub(super) struct NoiseApart {
    /// Every point's statistics, weighted by its expected noise variance.
    pub(super) stats: Vec<Stats>,
    pub(super) total: Stats,
    /// −½ Σ n·ln v over the points (tempered), v each point's expected variance factor.
    pub(super) log_det: f64,
    /// ln Σ_j π(j)·L(j) − max_j ln L(j): what placing the noise's change costs.
    pub(super) log_occam: f64,
}

impl NoiseApart {
    pub(super) fn new(
        stats: &[Stats],
        prep: &Prepared,
        allowed: &[bool],
        r2: f64,
        temper: f64,
    ) -> Option<Self> {
        if !(r2 > 0.0 && r2.is_finite()) || r2 == 1.0 {
            return None;
        }
        let (measured, bits, words) = (&prep.measured, &prep.bits, prep.words);
        let (sig_rows, sig_of) = (&prep.sig_rows, &prep.sig_of);
        let within: Vec<(f64, f64)> = stats
            .iter()
            .map(|st| (st.ss(), (st.n - 1.0).max(0.0)))
            .collect();
        let (ss_all, df_all) = within
            .iter()
            .fold((0.0, 0.0), |(a, b), &(s, d)| (a + s, b + d));
        if df_all < 2.0 || ss_all <= 0.0 {
            return None;
        }
        let mut per_sig = vec![0usize; sig_rows.len()];
        for (c, &a) in allowed.iter().enumerate() {
            if a {
                per_sig[sig_of[c] as usize] += 1;
            }
        }
        let allowed_count = per_sig.iter().sum::<usize>().max(1) as f64;
        let carries = |c: usize, j: usize| bits[c * words + j / 64] >> (j % 64) & 1 == 1;
        // ln L(j) of the within-point scatter with the noise r times larger after j.
        let log_l: Vec<Option<f64>> = sig_rows
            .iter()
            .zip(&per_sig)
            .map(|(&c, &k)| {
                if k == 0 {
                    return None;
                }
                let (mut ss_a, mut df_a) = (0.0, 0.0);
                for (j, &(_, i)) in measured.iter().enumerate() {
                    if carries(c, j) {
                        ss_a += within[i].0;
                        df_a += within[i].1;
                    }
                }
                let rest = ss_all - ss_a;
                Some(
                    -temper
                        * (df_all / 2.0 * (rest.max(0.0) + ss_a / r2 + 1e-300).ln()
                            + df_a / 2.0 * r2.ln()),
                )
            })
            .collect();
        let top = log_l
            .iter()
            .flatten()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        if !top.is_finite() {
            return None;
        }
        let terms: Vec<f64> = log_l
            .iter()
            .zip(&per_sig)
            .filter_map(|(l, &k)| l.map(|l| (k as f64 / allowed_count).ln() + l - top))
            .collect();
        let log_z = log_sum_exp(terms.iter().copied());
        // P(point carries the noise's change), summed over j.
        let mut noisy = vec![0.0f64; stats.len()];
        for ((&c, l), &k) in sig_rows.iter().zip(&log_l).zip(&per_sig) {
            let Some(l) = l else { continue };
            let p = ((k as f64 / allowed_count).ln() + l - top - log_z).exp();
            if p < 1e-12 {
                continue;
            }
            for (j, &(_, i)) in measured.iter().enumerate() {
                if carries(c, j) {
                    noisy[i] += p;
                }
            }
        }
        let mut total = Stats::default();
        let mut log_det = 0.0;
        let stats: Vec<Stats> = stats
            .iter()
            .zip(&noisy)
            .map(|(st, &p)| {
                let v = 1.0 + (r2 - 1.0) * p.min(1.0);
                log_det -= temper * 0.5 * st.n * v.ln();
                let x = st.scaled(1.0 / v);
                total.add(&x);
                x
            })
            .collect();
        Some(Self {
            stats,
            total,
            log_det,
            log_occam: log_z,
        })
    }
}
