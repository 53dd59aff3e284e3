//! Runs of one deployment agree more than runs of two: boot-to-boot variance.
//!
//! A kernel's memory layout, its boot-time choices, the page cache it starts with: some of a
//! run's deviation is drawn once per boot (a deployment) and shared by every run of that
//! boot. Counted as independent, five runs of one boot weigh five times what one does while
//! they know little more of the commit's level than one run: the endpoints' first tasks and
//! every repeated task looked surer than they were, and bisect-sim's cell with a per-boot
//! level of 3% at CV 2% named a wrong commit in 5.75% of its trials (0.75% with this model).
//!
//! The model is one-way random effects: a run is `level + boot + noise`, the boot's part with
//! variance ρ·σ² and the run's with σ². A deployment's mean then has variance σ²·(ρ + 1/n)
//! for its n runs, so it weighs 1/(ρ + 1/n) runs' worth: n when ρ = 0, and never more than
//! 1/ρ however many runs it holds. ρ is estimated within points (the points' levels are
//! not a hypothesis's business) from points measured in two deployments or more, by the
//! moments of the one-way analysis of variance, and is 0 when nothing tells it.

use crate::types::{Evidence, Point};

/// Deployments of the runs of each point (aligned with `zs`, the finite samples of
/// `points`): per point, the index of each sample's deployment (0, 1, … in first-seen order).
///
/// A run starts a deployment when its `seq` (runs of this commit since it was deployed on its
/// host) is 0, or does not follow the last run of this point on the same host: the runner
/// deployed it again in between. A runner that deploys for every run (a VM a run) reports 0
/// for each, so each run is its own deployment. `None` when the evidence does not say where
/// its runs were taken.
pub(crate) fn deployments(
    ev: &Evidence,
    points: &[Point],
    zs: &[Vec<f64>],
) -> Option<Vec<Vec<usize>>> {
    let mut out = Vec::with_capacity(points.len());
    for (p, z) in points.iter().zip(zs) {
        let (taken, raw) = (ev.taken.get(p)?, ev.at(*p));
        if taken.len() != raw.len() {
            return None;
        }
        // Per host: its current deployment's index and the seq of its last run.
        let mut last: Vec<(i64, usize, u32)> = Vec::new();
        let mut ids = Vec::with_capacity(z.len());
        let mut next = 0usize;
        for (_, t) in raw.iter().zip(taken).filter(|(y, _)| y.is_finite()) {
            let at = last.iter().position(|l| l.0 == t.host);
            let id = match at {
                Some(i) if t.seq != 0 && last[i].2.checked_add(1) == Some(t.seq) => {
                    last[i].2 = t.seq;
                    last[i].1
                }
                _ => {
                    let id = next;
                    next += 1;
                    match at {
                        Some(i) => last[i] = (t.host, id, t.seq),
                        None => last.push((t.host, id, t.seq)),
                    }
                    id
                }
            };
            ids.push(id);
        }
        if ids.len() != z.len() {
            return None;
        }
        out.push(ids);
    }
    Some(out)
}

/// How many deployments `point`'s complete runs came from (`None` when the evidence does not
/// say where they were taken).
pub(crate) fn count(ev: &Evidence, point: Point) -> Option<usize> {
    let z: Vec<f64> = ev
        .at(point)
        .iter()
        .copied()
        .filter(|y| y.is_finite())
        .collect();
    let ids = deployments(ev, &[point], &[z])?;
    Some(ids[0].iter().max().map_or(0, |m| m + 1))
}

/// One deployment's weighted runs: weight sum, weighted mean, weighted sum of squares around
/// it, and its run count.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Deployment {
    pub w: f64,
    pub mean: f64,
    pub ss: f64,
    pub n: f64,
}

/// The deployments of one point, from its samples `z`, their weights `l` and deployment ids.
pub(crate) fn group(z: &[f64], l: &[f64], ids: &[usize]) -> Vec<Deployment> {
    let k = ids.iter().max().map_or(0, |m| m + 1);
    let mut sums = vec![(0.0f64, 0.0f64, 0.0f64, 0.0f64); k];
    for ((&z, &l), &d) in z.iter().zip(l).zip(ids) {
        let s = &mut sums[d];
        s.0 += l;
        s.1 += l * z;
        s.2 += l * z * z;
        s.3 += 1.0;
    }
    sums.into_iter()
        .filter(|s| s.3 > 0.0)
        .map(|(w, s, q, n)| {
            let mean = if w > 0.0 { s / w } else { 0.0 };
            Deployment {
                w,
                mean,
                ss: if w > 0.0 {
                    (q - s * s / w).max(0.0)
                } else {
                    0.0
                },
                n,
            }
        })
        .collect()
}

/// Within-deployment degrees of freedom needed before ρ is estimated, and deployments
/// beyond one per point (between degrees of freedom).
const MIN_WITHIN_DF: f64 = 4.0;
const MIN_BETWEEN_DF: f64 = 2.0;

/// How far above chance the between-deployment scatter must stand, in its standard
/// deviations, before it is read as boot variance.
const MARGIN: f64 = 2.0;

/// How far above its estimate ρ is then read, in the same standard deviations.
const LEAN: f64 = 1.0;

/// ρ, the boot variance over the run variance, from the deployments of every point (each
/// point's level fitted apart). Method of moments of the one-way analysis of variance,
/// weighted: E[between SS] = (D − 1)·σ² + ρ·σ²·(W − ΣW_d²/W) per point. The run variance
/// is at least `rounding`, what rounding to the values' resolution adds to a run
/// ([`crate::stats::rounding_variance`]): runs of one boot that read one grid value do not
/// make a metric noiseless within boots.
pub(crate) fn ratio(points: &[Vec<Deployment>], rounding: f64) -> f64 {
    let (mut ss_w, mut df_w, mut ss_b, mut df_b, mut k) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for ds in points {
        for d in ds {
            ss_w += d.ss;
            df_w += (d.n - 1.0).max(0.0);
        }
        if ds.len() < 2 {
            continue;
        }
        let w: f64 = ds.iter().map(|d| d.w).sum();
        if w <= 0.0 {
            continue;
        }
        let m = ds.iter().map(|d| d.w * d.mean).sum::<f64>() / w;
        ss_b += ds.iter().map(|d| d.w * (d.mean - m).powi(2)).sum::<f64>();
        df_b += ds.len() as f64 - 1.0;
        k += w - ds.iter().map(|d| d.w * d.w).sum::<f64>() / w;
    }
    if df_w < MIN_WITHIN_DF || df_b < MIN_BETWEEN_DF || k <= 0.0 || ss_w <= 0.0 {
        return 0.0;
    }
    let s2 = (ss_w / df_w).max(rounding);
    // Between over within is about 1 ± sd, sd = √(2/df_b + 2/df_w), without boot variance:
    // ρ is read only when it stands MARGIN·sd above 1 (chance scatter read as ρ made clean
    // bisects dearer: at a margin of 1, bisect-sim's 10,000-commit CV 2% cell cost 9.5% more
    // runs and its Student-t cell 8.5%). Then it is read LEAN·sd high: subtracting the
    // margin instead read a 3% boot level (ρ = 2.25) as about 1 while few points had two
    // deployments, and runs of one boot then weighed twice what they knew. bisect-sim, 400
    // trials, a per-boot level of 3% at CV 2%: wrong culprit 5.75% (no boot model), 1.25%
    // (margin subtracted), 0.75% (this); the clean CV 2% cell 98.5 → 101.5 mean runs and the
    // Student-t one 72.8 → 75.6 (200 trials, no boot model → this).
    let f = ss_b / df_b / s2;
    let sd = (2.0 / df_b + 2.0 / df_w).sqrt();
    if f < 1.0 + MARGIN * sd {
        return 0.0;
    }
    // Once shown, read high rather than low: a ρ read low weighs each deployment more than
    // it knows, and a bisect then runs on one boot's luck.
    (f - 1.0 + LEAN * sd) * df_b / k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Taken;
    use rand::{SeedableRng, rngs::StdRng};
    use rand_distr::{Distribution, StandardNormal};

    fn taken(host: i64, seq: u32) -> Taken {
        Taken { at: 0.0, host, seq }
    }

    #[test]
    fn a_deployment_is_a_run_of_consecutive_places_on_one_host() {
        let p = Point::Good;
        let mut ev = Evidence::default();
        // Host 1 runs 0,1,2 then (another commit in between) 0,1; host 2 runs 3,4 (its task
        // continued a deployment made earlier) interleaved with host 1's; host 1 then 7 (a
        // gap: deployed again in between); a VM a run reports 0 for each.
        let t = [
            taken(1, 0),
            taken(1, 1),
            taken(2, 3),
            taken(1, 2),
            taken(2, 4),
            taken(1, 0),
            taken(1, 1),
            taken(1, 7),
            taken(3, 0),
            taken(3, 0),
        ];
        ev.samples.insert(p, vec![1.0; t.len()]);
        ev.taken.insert(p, t.to_vec());
        let zs = vec![vec![0.0; t.len()]];
        let ids = deployments(&ev, &[p], &zs).expect("taken is known");
        assert_eq!(ids, vec![vec![0, 0, 1, 0, 1, 2, 2, 3, 4, 5]]);
        // Without where the runs were taken, nothing is known of deployments.
        ev.taken.clear();
        assert!(deployments(&ev, &[p], &zs).is_none());
    }

    /// Points of `d` deployments of `n` runs, each run `boot + noise` with the boot's part of
    /// standard deviation `boot_sd` and the run's of 1.
    fn points(d: usize, n: usize, boot_sd: f64, seed: u64) -> Vec<Vec<Deployment>> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..6)
            .map(|_| {
                let mut z = Vec::new();
                let mut ids = Vec::new();
                for k in 0..d {
                    let boot: f64 = StandardNormal.sample(&mut rng);
                    for _ in 0..n {
                        let e: f64 = StandardNormal.sample(&mut rng);
                        z.push(boot_sd * boot + e);
                        ids.push(k);
                    }
                }
                group(&z, &vec![1.0; z.len()], &ids)
            })
            .collect()
    }

    #[test]
    fn the_boot_ratio_is_read_from_the_points_deployments() {
        // ρ = 4 (a boot's part twice the run's): read as about 4.
        let rho = ratio(&points(8, 6, 2.0, 1), 0.0);
        assert!((2.5..6.0).contains(&rho), "ρ read as {rho}");
        // No boot variance: 0 (the margin keeps chance scatter out).
        assert_eq!(ratio(&points(8, 6, 0.0, 2), 0.0), 0.0);
        // Every deployment a single run (a VM a run): nothing tells ρ apart from the noise.
        assert_eq!(ratio(&points(8, 1, 2.0, 3), 0.0), 0.0);
        // One deployment a point: nothing to compare.
        assert_eq!(ratio(&points(1, 10, 2.0, 4), 0.0), 0.0);
    }

    #[test]
    fn runs_that_tie_on_a_grid_do_not_make_boots_look_infinitely_apart() {
        // Values on a grid of 2 (a coarse resolution), three runs a deployment that each
        // read one grid value, and a residue of 1e-12 where detrending moved them off it:
        // the runs' own scatter reads as nearly nothing next to the deployments' means.
        let mut rng = StdRng::seed_from_u64(11);
        let pts: Vec<Vec<Deployment>> = (0..6)
            .map(|_| {
                let (mut z, mut ids) = (Vec::new(), Vec::new());
                for k in 0..4 {
                    let u: f64 = StandardNormal.sample(&mut rng);
                    let at = if u > 0.0 { 102.0 } else { 100.0 };
                    for _ in 0..3 {
                        let e: f64 = StandardNormal.sample(&mut rng);
                        z.push(at + 1e-12 * e);
                        ids.push(k);
                    }
                }
                group(&z, &vec![1.0; z.len()], &ids)
            })
            .collect();
        let raw = ratio(&pts, 0.0);
        let floored = ratio(&pts, 4.0 / 12.0);
        assert!(
            raw > 1e6,
            "without the floor the ties read as boot variance: {raw}"
        );
        assert!(
            floored < 10.0,
            "with rounding's variance counted: {floored}"
        );
    }
}
