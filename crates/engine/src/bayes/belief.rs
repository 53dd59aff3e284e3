//! The posterior over "commit k is the culprit": the evidence prepared once per decision
//! ([`Prepared`]) and the belief computed from it ([`belief`], [`belief_with`]).

use super::*;

/// What the wild-runs fit is tempered by beyond the core's share.
const WILD_TEMPER: f64 = 0.85;
/// A commit's probability of carrying the change (or not) at which its runs may join an
/// endpoint's to show an intermittent change.
const SURE_SIDE: f64 = 0.99;

/// The posterior. `allowed` masks the candidates that may be the culprit.
///
/// `fixed`: the commits carrying a change already known (the descendants of a first change
/// point). Then the hypotheses are about a *further* change: every point's level is
/// `μ + δ₁·[carries the known change] + δ₂·[carries this one]`, with μ and δ₁ flat (both
/// are in every hypothesis, so their improper priors cancel) and δ₂ under the same prior as
/// a single change. Its culprit may lie anywhere, also on a branch merged after the known
/// change, which a split of the range into "below" and "above" cannot see.
pub(crate) fn belief(
    graph: &CandidateGraph,
    prep: &Prepared,
    settings: &Settings,
    allowed: &[bool],
    no_change_prior: f64,
    fixed: Option<&[bool]>,
) -> Belief {
    let ev = prep.ev;
    let under = |m| {
        belief_with(
            graph,
            prep,
            settings,
            allowed,
            no_change_prior,
            fixed,
            m,
            0.0,
        )
    };
    let b = under(None);
    if b.to_show.is_some() || fixed.is_some() {
        return b;
    }
    // The endpoints' runs may be too few to show an intermittent change (eight runs, four
    // of them far, fit one wide level about as well); the commits the belief already
    // places surely on either side hold more of the same two distributions.
    // In the points' order, not the map's: the same evidence gives the same belief.
    let mut points: Vec<Point> = b.means.keys().copied().collect();
    points.sort();
    let sure = |want_bad: bool| -> Vec<f64> {
        points
            .iter()
            .filter(|p| match p {
                Point::Good => !want_bad,
                Point::Candidate(c) => {
                    let pb = b.bad.get(*c).copied().unwrap_or(0.0);
                    if want_bad {
                        pb >= SURE_SIDE
                    } else {
                        pb <= 1.0 - SURE_SIDE
                    }
                }
            })
            .flat_map(|&p| ev.at(p).iter().copied())
            .collect()
    };
    match crate::intermittent::fit(&sure(false), &sure(true)) {
        // Fitted to the runs as measured; the belief works relative to its reference level.
        Some(m) => {
            let r = b.reference;
            let m = crate::intermittent::Mixture {
                core: m.core / r - 1.0,
                far: m.far / r - 1.0,
                scale: m.scale / r,
                ..m
            };
            under(Some(m))
        }
        None => b,
    }
}

/// What every belief of one decision shares, because it depends on the evidence and the
/// graph only: the measured points, their runs relative to the reference level with host
/// drift taken out, and which measured points descend from each commit (its signature). A
/// decision weighs many hypotheses (the one-change check fits up to 14 conditional beliefs),
/// and on a 100,000-commit range the drift fit and the signatures were most of each one's
/// cost, so they are prepared once per decision. It holds the evidence it was made from, so a
/// belief cannot be given the runs of one evidence and the drift fit of another.
pub(crate) struct Prepared<'a> {
    pub(super) ev: &'a Evidence,
    /// Points with samples: the good endpoint first, then measured candidates.
    pub(super) points: Vec<Point>,
    pub(super) samples: usize,
    pub(super) reference: f64,
    /// Relative runs, detrended, by point.
    pub(super) zs: Vec<Vec<f64>>,
    /// (candidate, index in `points`) of every measured candidate, in `points` order.
    pub(super) measured: Vec<(usize, usize)>,
    /// Bit rows: which of `measured` descend from each commit, `words` words a commit.
    pub(super) bits: Vec<u64>,
    pub(super) words: usize,
    /// Each commit's signature, and the first commit of each signature.
    pub(super) sig_of: Vec<u32>,
    pub(super) sig_rows: Vec<usize>,
    /// The variance rounding adds to a run, in the runs' own units (0 unless the values sit
    /// on a grid: [`crate::stats::rounding_variance`]).
    pub(super) rounding: f64,
    /// Every point's runs repeat one value exactly (a deterministic metric).
    pub(super) runs_exact: bool,
}

impl<'a> Prepared<'a> {
    pub(crate) fn new(graph: &CandidateGraph, ev: &'a Evidence) -> Self {
        let n = graph.len();
        let mut points: Vec<Point> = Vec::new();
        let mut raw: Vec<&[f64]> = Vec::new();
        for (&p, s) in &ev.samples {
            let s = s.as_slice();
            if s.iter().any(|x| x.is_finite()) && p.candidate().is_none_or(|c| c < n) {
                points.push(p);
                raw.push(s);
            }
        }
        let mut all: Vec<f64> = raw
            .iter()
            .flat_map(|s| s.iter().copied())
            .filter(|x| x.is_finite())
            .collect();
        let samples = all.len();
        let reference = {
            let m = median(&mut all);
            if m.abs() > 0.0 && m.is_finite() {
                m.abs()
            } else {
                1.0
            }
        };
        let zs: Vec<Vec<f64>> = raw
            .iter()
            .map(|s| {
                s.iter()
                    .filter(|x| x.is_finite())
                    .map(|&y| y / reference - 1.0)
                    .collect()
            })
            .collect();
        // Host drift, fitted within re-measured points, is taken out first.
        let zs = crate::drift::detrend(ev, &points, zs);

        // Signatures: which measured candidates descend from each commit.
        let measured: Vec<(usize, usize)> = points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.candidate().map(|c| (c, i)))
            .collect();
        let words = measured.len().div_ceil(64).max(1);
        let mut bits = vec![0u64; n * words];
        for (j, &(c, _)) in measured.iter().enumerate() {
            bits[c * words + j / 64] |= 1 << (j % 64);
        }
        for c in (1..n).rev() {
            let (lo, hi) = bits.split_at_mut(c * words);
            let row = &hi[..words];
            if row.iter().all(|&x| x == 0) {
                continue;
            }
            for &p in graph.parents(c) {
                for (a, b) in lo[p * words..(p + 1) * words].iter_mut().zip(row) {
                    *a |= *b;
                }
            }
        }
        let mut sig_of = vec![0u32; n];
        let mut sig_rows: Vec<usize> = Vec::new();
        {
            let mut sig_index: HashMap<&[u64], u32, BuildFx> = HashMap::default();
            for c in 0..n {
                let row = &bits[c * words..(c + 1) * words];
                if c > 0 && row == &bits[(c - 1) * words..c * words] {
                    // Runs of commits between measured points share a signature: skip the hash.
                    sig_of[c] = sig_of[c - 1];
                    continue;
                }
                let next = sig_rows.len() as u32;
                let id = *sig_index.entry(row).or_insert_with(|| {
                    sig_rows.push(c);
                    next
                });
                sig_of[c] = id;
            }
        }
        Prepared {
            ev,
            points,
            samples,
            reference,
            zs,
            measured,
            bits,
            words,
            sig_of,
            sig_rows,
            rounding: crate::stats::rounding_variance(raw.iter().copied()),
            runs_exact: crate::stats::repeats_exactly(raw.iter().copied()),
        }
    }
}

/// The belief under the intermittent change `mixture` when given, else under the one the
/// endpoints show, if any; every point's mean with a commit's own level of variance
/// `kappa` times the run variance (see [`commit_levels_weighed`]).
#[expect(
    clippy::too_many_arguments,
    reason = "the model's parts, each chosen by the caller"
)]
pub(super) fn belief_with(
    graph: &CandidateGraph,
    prep: &Prepared,
    settings: &Settings,
    allowed: &[bool],
    no_change_prior: f64,
    fixed: Option<&[bool]>,
    mixture: Option<crate::intermittent::Mixture>,
    kappa: f64,
) -> Belief {
    let n = graph.len();
    let ev = prep.ev;
    let points = &prep.points;
    let (samples, reference) = (prep.samples, prep.reference);
    let zs = &prep.zs;
    let good_i = points.iter().position(|&p| p == Point::Good);
    let bad_i = points
        .iter()
        .position(|&p| p == Point::Candidate(graph.bad()));
    let mixture = mixture.or_else(|| {
        good_i
            .zip(bad_i)
            .and_then(|(g, b)| crate::intermittent::fit(&zs[g], &zs[b]))
    });
    let to_show = mixture.map(|m| m.runs_to_show());
    let (mut weights, scale, shape) = robust_weights(zs, good_i, bad_i, mixture.is_some());
    // A host that jitters more than the others weighs less, run by run (`hosts`).
    if let Some(by_host) = crate::hosts::weights(ev, points, zs, &weights) {
        for (w, h) in weights.iter_mut().zip(by_host) {
            for (l, f) in w.iter_mut().zip(h) {
                *l *= f;
            }
        }
    }
    let (tail, wild) = match shape {
        Tail::Gaussian => (None, None),
        Tail::StudentT(nu) => (Some(nu), None),
        Tail::Wild(eps) => (None, Some(eps)),
    };
    let mut stats: Vec<Stats> = zs
        .iter()
        .zip(&weights)
        .map(|(v, w)| {
            let mut st = Stats::default();
            for (&z, &l) in v.iter().zip(w) {
                st.n += 1.0;
                st.w += l;
                st.s += l * z;
                st.q += l * z * z;
                st.us += z;
                st.uq += z * z;
            }
            st
        })
        .collect();
    // Runs of one deployment share its boot's part: where the points' deployments show one
    // (ρ > 0), each deployment's mean weighs 1/(ρ + 1/W) runs (`boots`), and its runs'
    // scatter around that mean still counts in full (their sum of squares stays).
    let deployed: Option<Vec<Vec<crate::boots::Deployment>>> =
        crate::boots::deployments(ev, points, zs).map(|ids| {
            zs.iter()
                .zip(&weights)
                .zip(&ids)
                .map(|((z, l), ids)| crate::boots::group(z, l, ids))
                .collect()
        });
    let boot_ratio = deployed.as_deref().map_or(0.0, |d| {
        crate::boots::ratio(d, prep.rounding / (prep.reference * prep.reference))
    });
    if boot_ratio > 0.0
        && let Some(deployed) = &deployed
    {
        for (st, ds) in stats.iter_mut().zip(deployed) {
            let (mut w, mut s, mut q) = (0.0, 0.0, 0.0);
            for d in ds.iter().filter(|d| d.w > 0.0) {
                let we = 1.0 / (boot_ratio + 1.0 / d.w);
                w += we;
                s += we * d.mean;
                q += we * d.mean * d.mean + d.ss;
            }
            st.w = w;
            st.s = s;
            st.q = q;
        }
    }
    let noise_ratio = good_i
        .zip(bad_i)
        .and_then(|(g, b)| endpoint_noise_ratio(&zs[g], &zs[b]));
    // Given a known change whose side is noisier, that side's samples weigh by the ratio in
    // every hypothesis about a further change, "no further change" included (judged with
    // one pooled noise, the noisier side looked like a further step: the predictive check
    // spent 5× the runs of a clean bisect on it).
    let stats: Vec<Stats> = match (fixed, noise_ratio) {
        (Some(f), Some(r2)) if shape == Tail::Gaussian => stats
            .into_iter()
            .zip(points)
            .map(|(st, p)| match p {
                Point::Candidate(c) if f.get(*c) == Some(&true) => st.scaled(1.0 / r2),
                _ => st,
            })
            .collect(),
        _ => stats,
    };
    // A commit's own level (κ): a point's mean of W runs' worth then weighs 1/(κ + 1/W)
    // runs, its runs' scatter around it still counts in full; the density of the means
    // gains −½·ln(1 + κW) a point.
    let mut log_det_kappa = 0.0;
    let stats: Vec<Stats> = if kappa > 0.0 {
        stats
            .into_iter()
            .map(|st| {
                if st.w <= 0.0 {
                    return st;
                }
                let (m, ss) = (st.mean(), st.ss());
                let we = 1.0 / (kappa + 1.0 / st.w);
                log_det_kappa -= 0.5 * (1.0 + kappa * st.w).ln();
                Stats {
                    w: we,
                    s: we * m,
                    q: we * m * m + ss,
                    ..st
                }
            })
            .collect()
    } else {
        stats
    };
    // Each point's robust level (the Student-t weighted mean) and the weight behind it.
    let means: HashMap<Point, (f64, f64)> = points
        .iter()
        .zip(&stats)
        .filter(|(_, st)| st.w > 0.0)
        .map(|(&p, st)| (p, (st.mean(), st.w)))
        .collect();
    let mut total = Stats::default();
    for st in &stats {
        total.add(st);
    }
    // Which group each point is in: 1 when it carries the known change.
    let group: Vec<usize> = points
        .iter()
        .map(|p| match (p, fixed) {
            (Point::Candidate(c), Some(f)) if f.get(*c) == Some(&true) => 1,
            _ => 0,
        })
        .collect();
    let mut totals = [Stats::default(); 2];
    for (st, &g) in stats.iter().zip(&group) {
        totals[g].add(st);
    }
    let groups = totals.iter().filter(|t| t.n > 0.0).count().max(1) as f64;

    let (measured, bits, words) = (&prep.measured, &prep.bits, prep.words);
    let (sig_of, sig_rows) = (&prep.sig_of, &prep.sig_rows);

    // Marginal likelihood per signature (constants shared by all hypotheses dropped).
    let prior = delta_prior(settings);
    let count = total.n;
    // With Student-t weights held fixed, the weighted Gaussian likelihood is sharper than the
    // t likelihood it stands for: its information per sample is 1/s² where the t model's is
    // (ν+1)/((ν+3)s²). Temper the fit by that ratio so the posterior stays calibrated.
    // With a clean core and wild runs, the weights are near 1 or near 0: the fit counts
    // every run, the wild ones as if they had no residual, so it is tempered to the core's
    // share.
    let temper = match shape {
        Tail::Gaussian => 1.0,
        Tail::StudentT(nu) => (nu + 1.0) / (nu + 3.0),
        Tail::Wild(eps) => (1.0 - eps) * WILD_TEMPER,
    };
    let power = temper * (count - groups).max(0.0) / 2.0;
    let floor = 1e-18 * count.max(1.0);
    let scale2 = (scale * scale).max(1e-12);
    let ss0 = totals[0].ss() + totals[1].ss();
    let log_ml0 = -power * (ss0 + floor).ln();
    // Within each group, the points carrying this change (`b`) against the others: the
    // step's information h and its estimate d pool the groups' contrasts. `r2`: the noise
    // variance of the points carrying the change over that of the others. Returns the log
    // marginal likelihood, d, the residual sum of squares and h.
    let fit_on = |totals: &[Stats; 2], b: &[Stats; 2], r2: f64| -> Option<(f64, f64, f64, f64)> {
        let (mut h, mut x, mut ss) = (0.0, 0.0, 0.0);
        for (t, bg) in totals.iter().zip(b) {
            let g = t.sub(bg);
            let bg = bg.scaled(1.0 / r2);
            let mut both = g;
            both.add(&bg);
            ss += both.ss();
            if g.w > 1e-12 && bg.w > 1e-12 {
                let hg = g.w * bg.w / (g.w + bg.w);
                h += hg;
                x += hg * (bg.mean() - g.mean());
            }
        }
        if h <= 1e-12 {
            return None;
        }
        let d = x / h;
        let ssw = (ss - x * x / h).max(0.0) + floor;
        let ml = log_sum_exp(prior.iter().map(|&(pi, mu, tau)| {
            let gg = tau * tau / scale2;
            pi.ln()
                - 0.5 * (1.0 + h * gg).ln()
                - power * (ssw + (d - mu).powi(2) / (1.0 / h + gg)).ln()
        }));
        let carried: f64 = b.iter().map(|x| x.n).sum();
        // The density of the changed points' samples under a noise r times larger.
        Some((ml - temper * carried * 0.5 * r2.ln(), d, ssw, h))
    };
    // Where the noise changes need not be where the level does (a commit that adds jitter
    // but no cost, elsewhere in the range): see `NoiseApart`.
    let apart = match noise_ratio {
        Some(r2) if fixed.is_none() => NoiseApart::new(&stats, prep, allowed, r2, temper),
        _ => None,
    };
    let log_ml0 = match &apart {
        Some(a) => {
            let ss = a.total.ss();
            let ml = -power * (ss + floor).ln() + a.log_det + a.log_occam;
            log_sum_exp([0.5f64.ln() + log_ml0, 0.5f64.ln() + ml].into_iter())
        }
        None => log_ml0,
    };
    let mut sig_stats: Vec<(Stats, Stats)> = Vec::with_capacity(sig_rows.len());
    // The step and the residual sum of squares under each signature.
    let mut sig_fit: Vec<(f64, f64)> = Vec::with_capacity(sig_rows.len());
    let log_ml: Vec<f64> = sig_rows
        .iter()
        .map(|&c| {
            let row = &bits[c * words..(c + 1) * words];
            let mut b = [Stats::default(); 2];
            for (j, &(_, i)) in measured.iter().enumerate() {
                if row[j / 64] >> (j % 64) & 1 == 1 {
                    b[group[i]].add(&stats[i]);
                }
            }
            let mut above = b[0];
            above.add(&b[1]);
            sig_stats.push((total.sub(&above), above));
            let fit = |r2: f64| fit_on(&totals, &b, r2);
            let Some((ml, d, ssw, _)) = fit(1.0) else {
                sig_fit.push((0.0, ss0));
                return log_ml0;
            };
            sig_fit.push((d, ssw));
            // The noise may change with the change (a change that makes runs noisier, a
            // side that lands on a busier code path): when the endpoints show it clearly,
            // every hypothesis may judge the changed side with that ratio, so a step that
            // doubles the noise is not judged with one pooled scale alone (which cost 2.6×
            // the runs of a clean step in bisect-sim). One ratio for all: a ratio chosen per
            // hypothesis from a grid let a wrong one absorb a misplaced point in an inflated
            // side.
            // Not for a further change point: given a known change, a further "step" that
            // moved the noise alone would stand for the known change's own noisier side.
            // Averaged with the same noise on both sides, half and half: a ratio misread
            // from heavy-tailed endpoints must not make every change fit worse than "no
            // change" (forced, it ended 1.5 to 6% of bisect-sim's CV 5% Student-t trials as
            // "not reproduced").
            // Half of the noise's change is taken where the level changes, half where the
            // runs' own scatter places it (`NoiseApart`); a commit that moved the noise
            // alone then gains from it only what placing that noise change there earns.
            match (noise_ratio, &apart) {
                (Some(r2), Some(a)) => {
                    let mut bp = [Stats::default(); 2];
                    for (j, &(_, i)) in measured.iter().enumerate() {
                        if row[j / 64] >> (j % 64) & 1 == 1 {
                            bp[0].add(&a.stats[i]);
                        }
                    }
                    let totals_p = [a.total, Stats::default()];
                    let placed = fit_on(&totals_p, &bp, 1.0).map(|f| f.0 + a.log_det + a.log_occam);
                    let with_level = fit(r2).map(|f| f.0);
                    log_sum_exp(
                        std::iter::once(0.5f64.ln() + ml)
                            .chain(with_level.map(|x| 0.25f64.ln() + x))
                            .chain(placed.map(|x| 0.25f64.ln() + x))
                            .collect::<Vec<f64>>()
                            .into_iter(),
                    )
                }
                (Some(r2), None) if fixed.is_none() => fit(r2).map_or(ml, |f| {
                    log_sum_exp([0.5f64.ln() + ml, 0.5f64.ln() + f.0].into_iter())
                }),
                _ => ml,
            }
        })
        .collect();
    // An intermittent change: a commit that carries it is a mixture of the good level and
    // the far one, not a shifted copy. Under the shift, runs of a changed commit that
    // happened not to show it read as good for certain (k such runs: about k·d²/2σ² nats);
    // under the mixture, as what they are worth, k·ln(1 − q). The mixture's parameters are
    // the endpoints'; each hypothesis is the sum of its changed points' log ratios.
    let (log_ml, log_ml0) = match mixture.filter(|_| fixed.is_none()) {
        Some(m) => {
            let lr: Vec<f64> = zs
                .iter()
                .map(|v| v.iter().map(|&z| m.log_ratio(z)).sum())
                .collect();
            let log_ml = sig_rows
                .iter()
                .map(|&c| {
                    let row = &bits[c * words..(c + 1) * words];
                    measured
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| row[j / 64] >> (j % 64) & 1 == 1)
                        .map(|(_, &(_, i))| lr[i])
                        .sum()
                })
                .collect();
            (log_ml, 0.0)
        }
        None => (log_ml, log_ml0),
    };

    let allowed_count = allowed.iter().filter(|&&a| a).count().max(1) as f64;
    let log_prior = ((1.0 - no_change_prior) / allowed_count).ln();
    // Every allowed commit with the same signature has the same posterior: work per signature.
    let mut allowed_per_sig = vec![0usize; log_ml.len()];
    for c in 0..n {
        if allowed[c] {
            allowed_per_sig[sig_of[c] as usize] += 1;
        }
    }
    let log0 = no_change_prior.ln() + log_ml0;
    let z = log_sum_exp(
        (0..log_ml.len())
            .filter(|&i| allowed_per_sig[i] > 0)
            .map(|i| log_prior + (allowed_per_sig[i] as f64).ln() + log_ml[i])
            .chain(std::iter::once(log0)),
    );
    let sig_p: Vec<f64> = log_ml.iter().map(|&l| (log_prior + l - z).exp()).collect();
    let p: Vec<f64> = (0..n)
        .map(|c| {
            if allowed[c] {
                sig_p[sig_of[c] as usize]
            } else {
                0.0
            }
        })
        .collect();
    let no_change = (log0 - z).exp();
    let bad = graph.ancestor_mass(&p);

    // Estimates under the most probable hypothesis, for explanations and run counts.
    let map = (0..n)
        .max_by(|&a, &b| p[a].total_cmp(&p[b]))
        .unwrap_or(graph.bad());
    let (g, b) = sig_stats[sig_of[map] as usize];
    let (change, noise) = if fixed.is_some() && g.n > 0.0 && b.n > 0.0 {
        // A further step: its own size (the known one fitted apart), against the good level.
        let (d, ssw) = sig_fit[sig_of[map] as usize];
        let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
        let noise = (ssw / (count - 3.0).max(1.0)).sqrt() / good_level;
        (d / good_level, noise)
    } else if g.n > 0.0 && b.n > 0.0 {
        // Samples are relative to the median of all samples; the change and noise shown are
        // relative to the good level: (bad − good) / good.
        let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
        let change = (b.us / b.n - g.us / g.n) / good_level;
        let noise = ((g.uss() + b.uss()) / (count - 2.0).max(1.0)).sqrt() / good_level;
        (change, noise)
    } else {
        (0.0, (total.uss() / (count - 1.0).max(1.0)).sqrt())
    };
    // The noise the search effectively works against: the robust (Student-t weighted)
    // scale, over the tempering that keeps the weighted fit honest. Under Gaussian noise it
    // is `noise`; under heavy tails, far less than the plain standard deviation (which made
    // predictions 10 to 100 times too high for Student-t and outlier noise in bisect-sim).
    let effective_noise = if fixed.is_none() && g.n > 2.0 && b.n > 0.0 && g.w > 0.0 {
        let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
        let s2 = (g.ss() + b.ss()) / (count - 2.0).max(1.0);
        ((s2 / temper).sqrt() / good_level).min(noise)
    } else {
        noise
    };
    let endpoint_mad_noise = good_i
        .zip(bad_i)
        .filter(|_| fixed.is_none() && g.n > 0.0)
        .and_then(|(gi, bi)| {
            let (zg, zb) = (&zs[gi], &zs[bi]);
            if zg.len() < 3 || zb.len() < 3 {
                return None;
            }
            let deviations = |v: &[f64]| {
                let m = median(&mut v.to_vec());
                v.iter().map(|x| (x - m).abs()).collect::<Vec<f64>>()
            };
            let mut all = deviations(zg);
            all.extend(deviations(zb));
            let good_level = (1.0 + g.us / g.n).abs().max(1e-12);
            let mad = 1.4826 * median(&mut all) / good_level;
            (mad > 0.0 && mad.is_finite()).then_some(mad)
        });
    let sides_differ = fixed.is_none()
        && noise_ratio.is_some()
        && good_i
            .zip(bad_i)
            .and_then(|(g, b)| noise_ratio_by(&zs[g], &zs[b], Scale::Mad))
            .is_some();
    let planning_noise = if sides_differ { noise } else { effective_noise };
    let ranked = ranked(&p, 64);
    Belief {
        p,
        no_change,
        bad,
        change,
        noise,
        effective_noise,
        endpoint_mad_noise,
        planning_noise,
        samples,
        tail,
        wild,
        ranked,
        signature: sig_of.clone(),
        means,
        noise_ratio: noise_ratio.filter(|_| fixed.is_none()),
        boot_ratio,
        to_show,
        reference,
        rounding: prep.rounding,
        runs_exact: prep.runs_exact,
        mixture: mixture.filter(|_| fixed.is_none()),
        log_evidence: z + temper * log_det_kappa,
    }
}
