//! Hosts that jitter more than others: each host's own noise scale.
//!
//! A group's machines rarely scatter alike: one has a noisy neighbour, another a failing fan
//! or a different firmware. With one noise for every run, a host three times as noisy as its
//! peers makes every comparison as uncertain as its worst runs, and the runs it took read as
//! a change wherever it happened to measure. bisect-sim with four hosts, one of them 3×
//! noisier at CV 2%, took 412 mean runs where alike hosts take about 120; with two hosts,
//! one 4× noisier, 2% of the bisects named a wrong commit.
//!
//! The model: a run's noise is σ·√v_h on host h. v_h is read from the runs' weighted
//! residuals on each host around their deployment's mean (each deployment's level fitted
//! apart, so no hypothesis enters it; around their point's mean where runs do not tell
//! deployments apart), over the variance of a run of factor 1, its logarithm shrunk towards 0
//! by twice its sampling variance over its square (as the endpoints' noise ratio is), so
//! that hosts alike within chance stay alike. Each run then weighs 1/v_h.

use crate::types::{Evidence, Point};

/// Within-point degrees of freedom a host needs before its own scale is read.
const MIN_DF: f64 = 4.0;
/// How far a host's log variance ratio is shrunk, in its sampling variances (2/df).
const SHRINK: f64 = 2.0;
/// A host's variance ratio is kept within this range.
const RANGE: (f64, f64) = (1.0 / 25.0, 25.0);
/// Rounds of reading the factors with the factors read before.
const ROUNDS: usize = 3;

/// Per point, per finite sample (aligned with `zs`): the factor 1/v_h of the host that took
/// it, where hosts differ in noise; None where they do not, or the evidence does not say
/// which host took each run. `weights` are the samples' robust weights (a wild run counts
/// little towards its host's scale).
pub(crate) fn weights(
    ev: &Evidence,
    points: &[Point],
    zs: &[Vec<f64>],
    weights: &[Vec<f64>],
) -> Option<Vec<Vec<f64>>> {
    // Each complete sample's host.
    let mut hosts: Vec<Vec<i64>> = Vec::with_capacity(points.len());
    for (p, z) in points.iter().zip(zs) {
        let kept = ev.taken_complete(*p).filter(|k| k.len() == z.len())?;
        hosts.push(kept.iter().map(|t| t.host).collect());
    }
    let mut ids: Vec<i64> = hosts.iter().flatten().copied().collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() < 2 {
        return None;
    }
    let k_of = |host: &i64| ids.binary_search(host).expect("every host is listed");
    // Per host: the runs' weighted residual sum of squares around their group's weighted
    // mean, and its degrees of freedom (a group of W weight spends one on its mean, shared
    // by its runs in proportion to their weight). Groups are deployments where the runs say
    // which they share (a boot's own level is `boots`' to read, not a host's noise: read
    // within points, hosts that booted a commit several times looked noisier than one that
    // booted it once), else points. The means are not weighed by the hosts' factors:
    // weighed by them, a host read noisier by chance moved the means away from its runs
    // and read noisier still.
    let by_deployment = crate::boots::deployments(ev, points, zs);
    let scatter = |groups: Option<&Vec<Vec<usize>>>| {
        let mut ss = vec![0.0f64; ids.len()];
        let mut df = vec![0.0f64; ids.len()];
        for (i, ((z, l), h)) in zs.iter().zip(weights).zip(&hosts).enumerate() {
            let group = |r: usize| groups.map_or(0, |g| g[i][r]);
            // Per group: runs, weight and weighted sum.
            let mut sums: Vec<(usize, f64, f64)> = Vec::new();
            for r in 0..z.len() {
                let g = group(r);
                if sums.len() <= g {
                    sums.resize(g + 1, (0, 0.0, 0.0));
                }
                sums[g].0 += 1;
                sums[g].1 += l[r];
                sums[g].2 += l[r] * z[r];
            }
            for r in 0..z.len() {
                let (n, w, s) = sums[group(r)];
                if n < 2 || w <= 0.0 {
                    continue;
                }
                let k = k_of(&h[r]);
                ss[k] += l[r] * (z[r] - s / w).powi(2);
                df[k] += l[r] * (1.0 - l[r] / w);
            }
        }
        (ss, df)
    };
    let (ss, df) = match scatter(by_deployment.as_ref()) {
        (ss, df) if df.iter().sum::<f64>() >= 2.0 * MIN_DF => (ss, df),
        _ => scatter(None),
    };
    let df_all: f64 = df.iter().sum();
    if df_all < 2.0 * MIN_DF {
        return None;
    }
    let mut ratio = vec![1.0f64; ids.len()];
    // The reference is read in turn with the hosts' factors, so that it stands for a run of
    // factor 1, not for a pooled variance the noisy host inflates (against that, every host
    // looked apart).
    for _ in 0..ROUNDS {
        let reference: f64 = ss.iter().zip(&ratio).map(|(s, r)| s / r).sum::<f64>() / df_all;
        if reference <= 0.0 || !reference.is_finite() {
            return None;
        }
        ratio = ss
            .iter()
            .zip(&df)
            .map(|(&s, &d)| {
                if d < MIN_DF || s <= 0.0 {
                    return 1.0;
                }
                let log_r = (s / d / reference).ln();
                let shrink = 1.0 - SHRINK * (2.0 / d) / (log_r * log_r).max(1e-12);
                if shrink > 0.0 {
                    (log_r * shrink).exp().clamp(RANGE.0, RANGE.1)
                } else {
                    1.0
                }
            })
            .collect();
    }
    if ratio.iter().all(|&r| r == 1.0) {
        return None;
    }
    Some(
        hosts
            .iter()
            .map(|h| h.iter().map(|host| 1.0 / ratio[k_of(host)]).collect())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Taken;
    use rand::{SeedableRng, rngs::StdRng};
    use rand_distr::{Distribution, StandardNormal};

    /// Eight points of 12 runs each over hosts 0..4, host 0's noise `noisy` times the others'.
    fn lab(noisy: f64, seed: u64) -> (Evidence, Vec<Point>, Vec<Vec<f64>>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut ev = Evidence::default();
        let points: Vec<Point> = (0..8).map(Point::Candidate).collect();
        let mut zs = Vec::new();
        for (i, &p) in points.iter().enumerate() {
            let mut z = Vec::new();
            let mut taken = Vec::new();
            for r in 0..12 {
                let host = (r % 4) as i64;
                let e: f64 = StandardNormal.sample(&mut rng);
                let sd = if host == 0 { noisy } else { 1.0 };
                z.push(0.01 * (i as f64 + sd * e));
                taken.push(Taken {
                    at: r as f64,
                    seq: 0,
                    host,
                });
            }
            ev.samples
                .insert(p, z.iter().map(|x| 100.0 * (1.0 + x)).collect());
            ev.taken.insert(p, taken);
            zs.push(z);
        }
        (ev, points, zs)
    }

    #[test]
    fn a_noisier_host_weighs_less_and_alike_hosts_stay_alike() {
        let (ev, points, zs) = lab(3.0, 1);
        let ones: Vec<Vec<f64>> = zs.iter().map(|z| vec![1.0; z.len()]).collect();
        let w = weights(&ev, &points, &zs, &ones).expect("host 0 is noisier");
        // Host 0 takes runs 0, 4, 8 of each point: it weighs at most half what a quiet one does.
        assert!(w[0][0] < 0.5 * w[0][1], "{:?}", w[0]);
        let mut differ = 0;
        for seed in 0..40 {
            let (ev, points, zs) = lab(1.0, seed);
            differ += usize::from(
                weights(&ev, &points, &zs, &ones)
                    .is_some_and(|w| w.iter().flatten().any(|&x| !(0.5..=2.0).contains(&x))),
            );
        }
        assert!(differ <= 2, "alike hosts read apart in {differ} of 40");
    }
}
