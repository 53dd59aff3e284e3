use super::*;

#[test]
fn a_clean_core_with_wild_runs_is_told_from_heavy_tails() {
    use rand::{Rng, SeedableRng, rngs::StdRng};
    use rand_distr::{Distribution, StandardNormal, StudentT};
    let mut rng = StdRng::seed_from_u64(7);
    // Eight points of 12 runs: CV 2% with one run in twenty 20-100% slow.
    let wild: Vec<Vec<f64>> = (0..8)
        .map(|_| {
            (0..12)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    let slow = if rng.random::<f64>() < 0.05 {
                        0.2 + 0.8 * rng.random::<f64>()
                    } else {
                        0.0
                    };
                    0.02 * z + slow
                })
                .collect()
        })
        .collect();
    let (weights, scale, shape) = robust_weights(&wild, Some(0), Some(1), false);
    let Tail::Wild(eps) = shape else {
        panic!("chose {shape:?}");
    };
    assert!((0.01..0.15).contains(&eps), "wild share {eps}");
    assert!((0.015..0.025).contains(&scale), "scale {scale}");
    for (v, w) in wild.iter().flatten().zip(weights.iter().flatten()) {
        if *v > 0.15 {
            assert!(*w < 0.01, "a wild run {v} weighs {w}");
        } else if v.abs() < 0.03 {
            // Residuals are from each point's median: 0.03 may lie 2.5σ from it.
            assert!(*w > 0.8, "a core run {v} weighs {w}");
        }
    }
    // Student-t noise (3 degrees of freedom) stays Student-t: its fit is tempered more.
    let t3 = StudentT::new(3.0).expect("t3");
    let heavy: Vec<Vec<f64>> = (0..8)
        .map(|_| (0..12).map(|_| 0.02 * t3.sample(&mut rng)).collect())
        .collect();
    let (_, _, shape) = robust_weights(&heavy, Some(0), Some(1), false);
    assert!(matches!(shape, Tail::StudentT(_)), "chose {shape:?}");
    // Gaussian noise stays Gaussian.
    let clean: Vec<Vec<f64>> = (0..8)
        .map(|_| {
            (0..12)
                .map(|_| {
                    let z: f64 = StandardNormal.sample(&mut rng);
                    0.02 * z
                })
                .collect()
        })
        .collect();
    let (_, _, shape) = robust_weights(&clean, Some(0), Some(1), false);
    assert_eq!(shape, Tail::Gaussian);
}

#[test]
fn runs_of_one_boot_weigh_as_one_boot_not_as_many() {
    // c0 - c1 - c2 (the bad endpoint). Each endpoint booted four times, ten runs a boot:
    // the boots' levels scatter by ±3 while runs of one boot scatter by about 0.5. c1
    // booted once and read the bad level. Ten runs of one boot say little more than one
    // boot does, so "c2 changed it" (c1's boot was merely high) must keep some mass.
    let graph = CandidateGraph::new(
        vec!["a".into(), "b".into(), "c".into()],
        vec![vec![], vec![0], vec![1]],
    )
    .expect("graph");
    let wiggle = [0.5, -0.5, 0.3, -0.3, 0.7, -0.7, 0.1, -0.1, 0.4, -0.4];
    let mut ev = Evidence::default();
    let mut add = |p: Point, host: i64, boots: &[f64]| {
        for &b in boots {
            for (seq, w) in wiggle.iter().enumerate() {
                ev.samples.entry(p).or_default().push(b + w);
                ev.taken.entry(p).or_default().push(crate::Taken {
                    at: 0.0,
                    host,
                    seq: seq as u32,
                });
            }
        }
    };
    add(Point::Good, 1, &[97.0, 103.0, 100.0, 100.0]);
    add(Point::Candidate(2), 2, &[103.0, 109.0, 106.0, 106.0]);
    add(Point::Candidate(1), 3, &[106.0]);
    let settings = Settings::default();
    let plain = |ev: &Evidence| {
        let prep = Prepared::new(&graph, ev);
        belief(&graph, &prep, &settings, &[true; 3], 0.2, None)
    };
    let b = plain(&ev);
    assert!(b.p[2] > 0.01, "c2 kept {:.2e} of the mass", b.p[2]);
    // The boots' scatter (variance about 6) over the runs' (about 0.2).
    assert!(b.boot_ratio > 10.0, "ρ read as {}", b.boot_ratio);
    // A run still to come brings a boot of its own: the prediction counts it.
    let with_boots = predict(&b, crate::Costs::default(), 0.99, &settings);
    // Counted as 40, 40 and 10 independent runs, c1's boot settles it.
    ev.taken.clear();
    let b = plain(&ev);
    assert!(b.p[2] < 1e-4, "c2 kept {:.2e} of the mass", b.p[2]);
    assert_eq!(b.boot_ratio, 0.0);
    let without = predict(&b, crate::Costs::default(), 0.99, &settings);
    assert!(
        with_boots.step_in_noise < without.step_in_noise,
        "{with_boots:?} against {without:?}"
    );
}

/// Adds one deployment of `values` at `p` on `host` (places since the boot 0, 1, ...).
fn deploy(ev: &mut Evidence, p: Point, host: i64, values: &[f64]) {
    for (seq, &y) in values.iter().enumerate() {
        ev.samples.entry(p).or_default().push(y);
        ev.taken.entry(p).or_default().push(crate::Taken {
            at: 0.0,
            host,
            seq: seq as u32,
        });
    }
}

#[test]
fn each_endpoint_is_measured_in_two_deployments_and_a_point_again_on_one_of_its_own() {
    let n = 16;
    let graph = CandidateGraph::new(
        (0..n).map(|i| format!("c{i}")).collect(),
        (0..n)
            .map(|i| if i == 0 { vec![] } else { vec![i - 1] })
            .collect(),
    )
    .expect("graph");
    let bad = Point::Candidate(n - 1);
    let settings = Settings {
        idle_hosts: 1,
        ..Settings::default()
    };
    let requests = |ev: &Evidence| match decide(&graph, ev, &settings).decision {
        Decision::Measure {
            phase, requests, ..
        } => (phase, requests),
        other => panic!("{other:?}"),
    };
    // Nothing measured: a first deployment of a few runs, not a fresh one.
    let (phase, first) = requests(&Evidence::default());
    assert_eq!(phase, Phase::Reproducing);
    assert_eq!(first.len(), 1);
    assert!(!first[0].fresh_deploy);
    assert!(first[0].runs < settings.runs_per_request);
    // A clear step, but each endpoint seen on one boot: they are measured again, each on
    // a deployment of its own, for the rest of a request's runs.
    let mut ev = Evidence::default();
    deploy(&mut ev, Point::Good, 0, &[100.0, 100.4, 99.7]);
    deploy(&mut ev, bad, 0, &[110.0, 110.3, 109.8]);
    let (phase, again) = requests(&ev);
    assert_eq!(phase, Phase::Reproducing);
    assert!(!again.is_empty());
    for r in &again {
        assert!(r.point == Point::Good || r.point == bad, "{r:?}");
        assert!(r.fresh_deploy, "{r:?}");
        assert_eq!(r.runs, settings.runs_per_request - 3);
    }
    // A second deployment each: the search begins, on commits never measured.
    let mut two = ev.clone();
    deploy(&mut two, Point::Good, 0, &[100.2, 99.9]);
    deploy(&mut two, bad, 0, &[110.1, 109.9]);
    let (phase, search) = requests(&two);
    assert_eq!(phase, Phase::Searching);
    for r in search.iter().filter(|r| r.pair_with.is_none()) {
        assert_eq!(r.fresh_deploy, !two.at(r.point).is_empty(), "{r:?}");
    }
    // A runner that never deploys again (its places run on): twice a request's runs
    // end the wait all the same.
    let mut kept = Evidence::default();
    let runs = 2 * settings.runs_per_request as usize;
    let level = |base: f64| -> Vec<f64> {
        (0..runs)
            .map(|i| base + 0.3 * (i as f64 % 3.0 - 1.0))
            .collect()
    };
    deploy(&mut kept, Point::Good, 0, &level(100.0));
    deploy(&mut kept, bad, 1, &level(110.0));
    assert_eq!(crate::boots::count(&kept, Point::Good), Some(1));
    assert_eq!(requests(&kept).0, Phase::Searching);
}

#[test]
fn with_boot_variance_a_request_takes_what_one_boot_is_worth() {
    // (ρ + 1/m)(B + m) is least at m = √(B/ρ), B one run: ρ = 2.25 (a 3% boot level at
    // CV 2%) wants one run a boot, ρ = 0.1 three, no boot variance any number.
    assert_eq!(runs_per_boot(2.25, 1.0), 1);
    assert_eq!(runs_per_boot(0.1, 1.0), 3);
    assert_eq!(runs_per_boot(0.0, 1.0), u32::MAX);
    // A boot that costs nine runs (a slow firmware): three runs a boot at ρ = 1.
    assert_eq!(runs_per_boot(1.0, 9.0), 3);
    let costs = crate::Costs {
        build_secs: 0.0,
        run_secs: 20.0,
        boot_secs: 180.0,
    };
    assert_eq!(costs.boot_in_runs(), 9.0);
    assert_eq!(crate::Costs::default().boot_in_runs(), 1.0);
    let mut ev = Evidence::default();
    deploy(&mut ev, Point::Candidate(3), 0, &[1.0, 2.0]);
    let asked = vec![
        Request::new(Point::Candidate(3), 5),
        Request::new(Point::Candidate(4), 5),
        Request::paired(Point::Candidate(3), Point::Candidate(2), 5),
    ];
    let got = deploy_fresh(asked.clone(), &ev, 0.1);
    // The point measured before: a boot of its own, three runs; the new one: three runs on
    // whatever deployment it gets; the couple (each of its runs a deployment) as asked.
    assert_eq!((got[0].runs, got[0].fresh_deploy), (3, true));
    assert_eq!((got[1].runs, got[1].fresh_deploy), (3, false));
    assert_eq!(got[2], asked[2]);
    // Without boot variance only the deployment changes.
    let got = deploy_fresh(asked.clone(), &ev, 0.0);
    assert_eq!((got[0].runs, got[0].fresh_deploy), (5, true));
    assert_eq!((got[1].runs, got[1].fresh_deploy), (5, false));
}

#[test]
fn the_noise_ratio_is_used_only_when_the_endpoints_show_it() {
    // Deterministic "noise": a fixed pattern scaled per side.
    let pattern = [
        -1.2, 0.4, 0.9, -0.3, 1.5, -0.8, 0.1, -0.6, 1.1, -1.1, 0.7, -0.7,
    ];
    // 24 samples a side: the pattern and its mirror.
    let side = |scale: f64, level: f64| -> Vec<f64> {
        pattern
            .iter()
            .chain(pattern.iter().rev())
            .map(|x| level + scale * x)
            .collect()
    };
    // Same noise, different levels: no ratio.
    assert_eq!(
        endpoint_noise_ratio(&side(0.02, 0.0), &side(0.02, 0.03)),
        None
    );
    // Twice the noise after the change: the variance ratio 4, its logarithm shrunk by
    // 2 · (2/23 + 2/23) / ln²4 (24 samples a side): 4^0.819 = 3.11.
    let r2 = endpoint_noise_ratio(&side(0.02, 0.0), &side(0.04, 0.03)).unwrap();
    let shrink = 1.0 - 2.0 * (4.0 / 23.0) / 4f64.ln().powi(2);
    assert!((r2 - 4f64.powf(shrink)).abs() < 1e-9, "{r2}");
    assert!(r2 > 3.0 && r2 < 4.0, "{r2}");
    // A ratio of 1.2 from 24 samples a side is within noise: dropped.
    assert_eq!(
        endpoint_noise_ratio(&side(0.02, 0.0), &side(0.02 * 1.2f64.sqrt(), 0.03)),
        None
    );
    // Three times: clamped to the range's end.
    let r2 = endpoint_noise_ratio(&side(0.02, 0.0), &side(0.06, 0.03)).unwrap();
    assert!((r2 - 4.0).abs() < 1e-9, "{r2}");
    // Too few samples to tell.
    assert_eq!(
        endpoint_noise_ratio(&side(0.02, 0.0)[..5], &side(0.08, 0.03)[..5]),
        None
    );
}

#[test]
fn identical_differences_are_unbounded_only_for_runs_without_noise() {
    // Three couples that each differ by one grid step of a metric known to be noisy: the
    // t-test cannot judge them (no scatter), so they count as what the known noise and
    // the signs make of them, not as certain.
    let grid = [(104.0, 100.0); 3];
    let noisy = paired_e_expecting(&grid, 1.0, Some(2.0), Some(3.0));
    assert!(noisy.is_finite() && noisy < 1.0 / VERIFY_ALPHA, "{noisy}");
    // A deterministic metric's couples: unbounded, as before.
    assert_eq!(paired_e_expecting(&grid, 1.0, None, None), f64::INFINITY);
}

#[test]
fn paired_e_value_sides_and_bound() {
    let up: Vec<(f64, f64)> = (0..10)
        .map(|i| (101.0 + (i % 3) as f64 * 0.1, 100.0))
        .collect();
    assert!(paired_e(&up, 1.0, None) > 1000.0);
    assert!(paired_e(&up, -1.0, None) < 1.0);
    assert_eq!(paired_e(&up[..1], 1.0, None), 1.0);
    // Under "no difference", the e-value crosses 1/α on at most about α of sequences,
    // looked at after every couple.
    use rand::{SeedableRng, rngs::StdRng};
    use rand_distr::{Distribution, StandardNormal};
    let mut rng = StdRng::seed_from_u64(7);
    let (trials, mut crossed) = (2000, 0);
    for _ in 0..trials {
        let mut pairs = Vec::new();
        for _ in 0..60 {
            let a: f64 = StandardNormal.sample(&mut rng);
            let b: f64 = StandardNormal.sample(&mut rng);
            pairs.push((100.0 + a, 100.0 + b));
            if pairs.len() >= 3 && paired_e(&pairs, 1.0, Some(1.0)) >= 1.0 / VERIFY_ALPHA {
                crossed += 1;
                break;
            }
        }
    }
    let rate = crossed as f64 / trials as f64;
    assert!(rate <= VERIFY_ALPHA, "crossed on {rate}");
    // The same with the prior's scale set from a measured step (one-sided, half-normal).
    for effect in [0.3, 1.0, 3.0] {
        let mut crossed = 0;
        for _ in 0..trials {
            let mut pairs = Vec::new();
            for _ in 0..60 {
                let a: f64 = StandardNormal.sample(&mut rng);
                let b: f64 = StandardNormal.sample(&mut rng);
                pairs.push((100.0 + a, 100.0 + b));
                let e = paired_e_expecting(&pairs, 1.0, Some(1.0), Some(effect));
                if pairs.len() >= 3 && e >= 1.0 / VERIFY_ALPHA {
                    crossed += 1;
                    break;
                }
            }
        }
        let rate = crossed as f64 / trials as f64;
        assert!(rate <= VERIFY_ALPHA, "effect {effect}: crossed on {rate}");
    }
}

#[test]
fn the_swap_e_value_keeps_its_bound_and_sees_a_change_of_noise() {
    use rand::{SeedableRng, rngs::StdRng};
    use rand_distr::{Distribution, StandardNormal};
    let mut rng = StdRng::seed_from_u64(11);
    let mut z = || -> f64 { StandardNormal.sample(&mut rng) };
    // Endpoints: good 100 ± 1, bad 103 ± 2.
    let sides = [(100.0, 1.0), (103.0, 2.0)];
    // Culprit and parent alike (here both at the good level, or both between): the
    // e-value crosses 1/α on at most about α of sequences, looked at after every couple.
    for level in [100.0, 101.5] {
        let (trials, mut crossed) = (2000, 0);
        for _ in 0..trials {
            let mut pairs = Vec::new();
            for _ in 0..60 {
                pairs.push((level + z(), level + z()));
                if swap_e(&pairs, sides) >= 1.0 / VERIFY_ALPHA {
                    crossed += 1;
                    break;
                }
            }
        }
        let rate = crossed as f64 / trials as f64;
        assert!(rate <= VERIFY_ALPHA, "level {level}: crossed on {rate}");
    }
    // A culprit at the bad level and noise against a parent at the good one passes
    // within a few couples; one wild parent run does not sink it.
    let mut pairs: Vec<(f64, f64)> = (0..8).map(|_| (103.0 + 2.0 * z(), 100.0 + z())).collect();
    assert!(swap_e(&pairs, sides) > 10.0, "{}", swap_e(&pairs, sides));
    pairs.push((103.0, 150.0));
    assert!(swap_e(&pairs, sides) > 1.0, "{}", swap_e(&pairs, sides));
    // Only the noise changed (same mean, twice the spread): differences alone see
    // nothing, the swap e-value grows.
    let noisy: Vec<(f64, f64)> = (0..40).map(|_| (100.0 + 2.0 * z(), 100.0 + z())).collect();
    let only_noise = [(100.0, 1.0), (100.0, 2.0)];
    assert!(
        swap_e(&noisy, only_noise) > 10.0,
        "{}",
        swap_e(&noisy, only_noise)
    );
}

#[test]
fn the_sign_e_value_grows_with_positive_signs_only() {
    let up = vec![1.0; 20];
    assert!(sign_e(&up) > 1e4);
    let mixed: Vec<f64> = (0..20)
        .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
        .collect();
    assert!(sign_e(&mixed) < 2.0);
    assert_eq!(sign_e(&[]), 1.0);
}

#[test]
fn smallest_set_reaches_the_target() {
    let p = [0.5, 0.3, 0.15, 0.05];
    let r = ranked(&p, 64);
    assert_eq!(r[0], (0, 0.5));
    assert_eq!(smallest_set(&r, 0.9, 10).len(), 3);
    assert_eq!(smallest_set(&r, 0.9, 2).len(), 2);
}
