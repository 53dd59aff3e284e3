//! Host drift and warm-up, blocked out with the points measured more than once.
//!
//! When the evidence says when each sample was taken, a trend in time (a polynomial of
//! degree 1 to [`MAX_DEGREE`]) is fitted *within* points: every point keeps a free level of
//! its own, so only a point's samples taken at different times (the endpoints, re-measured
//! commits, verification couples) say anything about the trend, and a level difference
//! between points (a change) can never be read as drift. The trend is kept only when it is
//! more probable than "no drift" (Zellner's g-prior Bayes factor and the prior odds against
//! a drifting host), and is then removed from every sample before the hypotheses are
//! compared. A warm-up (each host's first runs off by a·exp(−r/τ), r the host's run count)
//! competes with the trends the same way, and so does a step: every run from some moment on
//! off by one amount (a neighbour that starts to load the lab, a governor or firmware
//! change). No trend of low degree follows a step, and a trend that passes midway through it
//! moves the points measured near it in opposite directions. The step's odds are summed
//! over a grid of moments, the likeliest grid moment is refined to the run, and the step
//! removed is averaged over the moments with their posterior weights, so a point measured
//! where the re-measured runs cannot place the step is moved only in part. A cold start
//! (each task's first runs of a commit off by c·exp(−s/τ), s the run's place in its task: a
//! freshly booted kernel, caches not yet filled) is fitted beside any of these, since it
//! comes with every deployment rather than once a host.

use std::collections::HashMap;

use crate::{Evidence, Point};

/// Highest degree of the time trend considered.
const MAX_DEGREE: usize = 3;
/// Within-point degrees of freedom needed before a trend is considered: with fewer, a few
/// re-measured points that happened to come out higher the second time look like drift.
const MIN_FREE: usize = 30;
/// Prior probability that a host's first runs differ (warm-up: caches, frequency, boot),
/// split evenly over the time constants in [`WARMUP_RUNS`]. Common on real hosts after a
/// boot; at 0.1, bisect-sim's warm-up cell cost 1.56× the clean one (400 trials), at 0.3
/// 1.48×, with the clean, CV 5% and two-change cells unchanged (0.5: 1.44×, but 1.17%
/// wrong culprits in the two-change cell against 0.83%, 600 trials).
const WARMUP_PRIOR: f64 = 0.3;
/// Time constants of warm-up considered, in runs of the host.
const WARMUP_RUNS: [f64; 3] = [4.0, 10.0, 25.0];
/// Prior probability that the lab's level steps once during a bisect (a neighbour starts to
/// load the hosts, a firmware or governor change, a cooling fault), split evenly over the
/// moments of the grid in [`step_times`]. Sudden, so no trend of low degree describes it.
const STEP_PRIOR: f64 = 0.1;
/// Moments a step is first looked for at (evenly spaced quantiles of the runs' times); the
/// likeliest is then refined to the run.
const STEP_TIMES: usize = 16;
/// Within-point degrees of freedom needed before a cold start alone is considered. From 8
/// (the endpoints' first two tasks of five runs each), against MIN_FREE: bisect-sim's cold
/// cells took 128.5 → 116.9 runs (5%) and 119.2 → 116.5 (15%), and their first budget
/// prediction 0.69× → 1.06× and 0.39× → 1.29× the runs then taken; clean, warm-up, drift,
/// A/A, outliers and CV 1/5% unchanged (400 to 1,200 trials, the same wrong seeds).
const MIN_FREE_COLD: usize = 8;
/// Prior probability that each task's first runs differ (a cold start after every
/// deployment), split evenly over the time constants in [`COLD_RUNS`]. At 0.3 one clean
/// bisect of 1,000 named a wrong commit (a cold start fitted with a trend to the endpoints'
/// two tasks, −3.2%); at 0.1 none of 1,000, and the cold-start cells cost the same.
const COLD_PRIOR: f64 = 0.1;
/// Time constants of a cold start considered, in runs of the task.
const COLD_RUNS: [f64; 3] = [0.25, 1.0, 3.0];
/// Prior probability that the host's level moves with time during a bisect.
const DRIFT_PRIOR: f64 = 0.1;
/// Prior probability that the hosts a bisect runs on differ in level: machines of one
/// group rarely run a benchmark exactly alike.
const HOST_PRIOR: f64 = 0.5;
/// Most hosts whose levels are fitted (the reference included).
const MAX_HOSTS: usize = 24;

/// `zs` (relative samples by point, finite ones only, in `ev.samples` order) with the drift
/// removed, or `zs` unchanged when timing is unknown or there is no clear drift.
pub(crate) fn detrend(ev: &Evidence, points: &[Point], zs: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    // When each kept sample was taken; every point must say, for all of its samples.
    let mut times: Vec<Vec<f64>> = Vec::with_capacity(zs.len());
    let mut hosts: Vec<Vec<i64>> = Vec::with_capacity(zs.len());
    let mut seqs: Vec<Vec<f64>> = Vec::with_capacity(zs.len());
    for (p, z) in points.iter().zip(&zs) {
        let Some(kept) = ev.taken_complete(*p).filter(|k| k.len() == z.len()) else {
            return zs;
        };
        times.push(kept.iter().map(|t| t.at).collect());
        hosts.push(kept.iter().map(|t| t.host).collect());
        seqs.push(kept.iter().map(|t| f64::from(t.seq)).collect());
    }
    // Each sample's place among the runs of its host (0: the host's first run), for warm-up.
    let mut order: Vec<(i64, f64, usize, usize)> = Vec::new();
    for (i, (t, h)) in times.iter().zip(&hosts).enumerate() {
        for (j, (&t, &h)) in t.iter().zip(h).enumerate() {
            order.push((h, t, i, j));
        }
    }
    order.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut rank: Vec<Vec<f64>> = times.iter().map(|t| vec![0.0; t.len()]).collect();
    let mut prev_host = None;
    let mut r = 0.0;
    for &(h, _, i, j) in &order {
        if prev_host != Some(h) {
            prev_host = Some(h);
            r = 0.0;
        }
        rank[i][j] = r;
        r += 1.0;
    }
    let all = times.iter().flatten().copied();
    let (t0, t1) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), t| {
        (a.min(t), b.max(t))
    });
    if t1 <= t0 || !t1.is_finite() {
        return zs;
    }
    let u = |t: f64| (t - t0) / (t1 - t0) - 0.5;
    let n: usize = zs.iter().map(Vec::len).sum();
    let free = n.saturating_sub(zs.iter().filter(|z| !z.is_empty()).count());
    // Below MIN_FREE only a cold start is fitted: every task of several runs informs it, the
    // endpoints' first tasks already.
    if free < MIN_FREE_COLD {
        return zs;
    }
    let only_cold = free < MIN_FREE;
    // Within-point residuals of the samples (the baseline) and of each power of time.
    let demean = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len().max(1) as f64;
        v.iter().map(|x| x - m).collect::<Vec<f64>>()
    };
    let y: Vec<f64> = zs.iter().flat_map(|z| demean(z)).collect();
    let cols: Vec<Vec<f64>> = (1..=MAX_DEGREE)
        .map(|k| {
            times
                .iter()
                .flat_map(|t| demean(&t.iter().map(|&t| u(t).powi(k as i32)).collect::<Vec<_>>()))
                .collect()
        })
        .collect();
    // A step: every run from some moment on off by one amount. Seen, like a trend, only
    // through the points measured on both sides of that moment.
    let mut moments: Vec<f64> = times.iter().flatten().copied().collect();
    moments.sort_by(f64::total_cmp);
    moments.dedup();
    let moments = moments.split_off(1);
    let step_col = |at: f64| -> Vec<f64> {
        times
            .iter()
            .flat_map(|t| {
                demean(
                    &t.iter()
                        .map(|&t| f64::from(u8::from(t >= at)))
                        .collect::<Vec<_>>(),
                )
            })
            .collect()
    };
    let mut steps = step_times(&moments);
    let mut step_cols: Vec<Vec<f64>> = steps.iter().map(|&at| step_col(at)).collect();
    // Warm-up: a host's first runs slower (or faster), decaying as exp(−r/τ) in its run count.
    let warm = |tau: f64, r: f64| (-r / tau).exp();
    let warm_cols: Vec<Vec<f64>> = WARMUP_RUNS
        .iter()
        .map(|&tau| {
            rank.iter()
                .flat_map(|r| demean(&r.iter().map(|&r| warm(tau, r)).collect::<Vec<_>>()))
                .collect()
        })
        .collect();
    // Cold start: a task's first runs of a commit off, decaying as exp(−s/τ) in the run's
    // place in the task. Only points measured by runs at different places say anything.
    let cold = |tau: f64, s: f64| (-s / tau).exp();
    let cold_cols: Vec<Option<Vec<f64>>> = COLD_RUNS
        .iter()
        .map(|&tau| {
            let col: Vec<f64> = seqs
                .iter()
                .flat_map(|s| demean(&s.iter().map(|&s| cold(tau, s)).collect::<Vec<_>>()))
                .collect();
            (col.iter().map(|x| x * x).sum::<f64>() > 1e-9).then_some(col)
        })
        .collect();
    // Host levels: machines of one group are not identical, so each host may run every
    // commit a little faster or slower. Seen through the points measured on more than one
    // host; one column per host but the first (the reference), and only the hosts whose
    // column is not already spanned by those kept (a host that only ever ran the same
    // points as another cannot be told from it).
    // The reference is the host with the most samples; past MAX_HOSTS the hosts with fewest
    // samples are left as they are (their few runs cannot pin a level anyway).
    let mut counts: HashMap<i64, usize> = HashMap::new();
    for &h in hosts.iter().flatten() {
        *counts.entry(h).or_default() += 1;
    }
    let mut host_ids: Vec<(usize, i64)> = counts.into_iter().map(|(h, c)| (c, h)).collect();
    host_ids.sort_unstable_by(|a, b| b.cmp(a));
    let mut host_cols: Vec<(i64, Vec<f64>)> = Vec::new();
    let mut basis: Vec<Vec<f64>> = Vec::new();
    for &(_, h) in host_ids.iter().skip(1) {
        if host_cols.len() + 1 >= MAX_HOSTS {
            break;
        }
        let col: Vec<f64> = hosts
            .iter()
            .flat_map(|hs| {
                demean(
                    &hs.iter()
                        .map(|&x| f64::from(u8::from(x == h)))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        if let Some(unit) = orthogonal_part(&basis, &col) {
            basis.push(unit);
            host_cols.push((h, col));
        }
    }
    let ss = |r: &[f64]| r.iter().map(|x| x * x).sum::<f64>();
    let nf = free as f64;
    let ss0 = ss(&y);
    if ss0 <= 0.0 {
        return zs;
    }
    // Log posterior odds of each model against none: Zellner's g-prior Bayes factor with
    // unit information (g = n), exact for Gaussian noise (Liang et al., 2008), times the
    // prior odds of a drifting host, a warming host and hosts that differ.
    let g = nf;
    let drift_odds = (DRIFT_PRIOR / (1.0 - DRIFT_PRIOR)).ln();
    let warm_odds = (WARMUP_PRIOR / WARMUP_RUNS.len() as f64 / (1.0 - WARMUP_PRIOR)).ln();
    let host_odds = (HOST_PRIOR / (1.0 - HOST_PRIOR)).ln();
    let cold_odds = (COLD_PRIOR / COLD_RUNS.len() as f64 / (1.0 - COLD_PRIOR)).ln();
    // Per moment of the grid, each standing for the moments around it.
    let step_odds = (STEP_PRIOR / steps.len().max(1) as f64 / (1.0 - STEP_PRIOR)).ln();
    let mut cold_models: Vec<(Option<usize>, f64)> = vec![(None, 0.0)];
    cold_models.extend(
        cold_cols
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_some())
            .map(|(i, _)| (Some(i), cold_odds)),
    );
    let mut time_models: Vec<(Time, f64)> = vec![(Time::None, 0.0)];
    time_models.extend((1..=MAX_DEGREE).map(|d| (Time::Trend(d), drift_odds)));
    time_models.extend((0..WARMUP_RUNS.len()).map(|i| (Time::Warm(i), warm_odds)));
    time_models.extend(
        (0..steps.len())
            .filter(|&i| step_cols[i].iter().map(|x| x * x).sum::<f64>() > 1e-9)
            .map(|i| (Time::Step(i), step_odds)),
    );
    // Every model is fitted from the same columns' products: each is computed once (a
    // decision fits about two hundred models of up to 28 columns, and recomputing the
    // products was most of the engine's time on large ranges).
    let products = Products::default();
    // One model's log posterior odds against none and its coefficients, shrunk as their
    // posterior mean is (by g / (1 + g)); None when it cannot be fitted.
    let evaluate = |time: Time,
                    step_cols: &[Vec<f64>],
                    cold_at: Option<usize>,
                    with_hosts: bool,
                    odds: f64|
     -> Option<Fit> {
        let mut design: Vec<(Col, &[f64])> = Vec::new();
        match time {
            Time::None => {}
            Time::Trend(d) => design.extend(
                cols[..d]
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (Col::Trend(i), c.as_slice())),
            ),
            Time::Warm(i) => design.push((Col::Warm(i), &warm_cols[i])),
            Time::Step(i) => design.push((Col::Step(i), &step_cols[i])),
        }
        if let Some((i, c)) = cold_at.and_then(|i| cold_cols[i].as_deref().map(|c| (i, c))) {
            design.push((Col::Cold(i), c));
        }
        if with_hosts {
            design.extend(
                host_cols
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (Col::Host(i), c.1.as_slice())),
            );
        }
        let k = design.len() as f64;
        if design.is_empty() || nf <= k {
            return None;
        }
        let beta = least_squares(
            design.len(),
            |i, j| products.dot((design[i].0, Some(design[j].0)), design[i].1, design[j].1),
            |i| products.dot((design[i].0, None), design[i].1, &y),
        )?;
        let resid: Vec<f64> = (0..y.len())
            .map(|i| {
                y[i] - design
                    .iter()
                    .zip(&beta)
                    .map(|(c, b)| b * c.1[i])
                    .sum::<f64>()
            })
            .collect();
        let r2 = (1.0 - ss(&resid) / ss0).clamp(0.0, 1.0);
        let log_bf = (nf - k) / 2.0 * (1.0 + g).ln() - nf / 2.0 * (1.0 + g * (1.0 - r2)).ln();
        Some(Fit {
            log_odds: log_bf + odds + if with_hosts { host_odds } else { 0.0 },
            time,
            cold_at,
            with_hosts,
            beta: beta.iter().map(|b| b * g / (1.0 + g)).collect(),
        })
    };
    let mut best: Option<Fit> = None;
    let mut step_fits: Vec<Fit> = Vec::new();
    for with_hosts in [false, true] {
        if with_hosts && (host_cols.is_empty() || only_cold) {
            continue;
        }
        for (&(time, time_odds), &(cold_at, cold_odds)) in time_models
            .iter()
            .flat_map(|t| cold_models.iter().map(move |c| (t, c)))
        {
            if only_cold && !matches!(time, Time::None) {
                continue;
            }
            let Some(fit) = evaluate(time, &step_cols, cold_at, with_hosts, time_odds + cold_odds)
            else {
                continue;
            };
            if matches!(time, Time::Step(_)) {
                step_fits.push(fit);
            } else if fit.log_odds > best.as_ref().map_or(0.0, |b| b.log_odds) {
                best = Some(fit);
            }
        }
    }
    // A step's odds are summed over the grid's moments, each standing for those around it
    // (the odds of "a step at some moment"), for the other terms that make it likeliest.
    let mut step_model: Option<(f64, Option<usize>, bool)> = None;
    for f in &step_fits {
        let config = (f.cold_at, f.with_hosts);
        if step_model.is_some_and(|m| (m.1, m.2) == config) {
            continue;
        }
        let same = step_fits
            .iter()
            .filter(|g| (g.cold_at, g.with_hosts) == config);
        let top = same
            .clone()
            .map(|g| g.log_odds)
            .fold(f64::NEG_INFINITY, f64::max);
        let sum = top + same.map(|g| (g.log_odds - top).exp()).sum::<f64>().ln();
        if step_model.is_none_or(|m| sum > m.0) {
            step_model = Some((sum, config.0, config.1));
        }
    }
    let floor = best.as_ref().map_or(0.0, |b| b.log_odds);
    let step_model = step_model.filter(|m| m.0 > floor);
    if let Some((_, cold_at, with_hosts)) = step_model {
        step_fits.retain(|f| f.cold_at == cold_at && f.with_hosts == with_hosts);
        // The grid finds roughly when the level stepped; every moment between the likeliest
        // grid moment's neighbours is then tried too, since a moment off by a few runs
        // misplaces the runs between. Each counts as one moment: the prior per moment is
        // the same, so the posterior weighs them by their fit alone.
        let top = step_fits
            .iter()
            .max_by(|a, b| a.log_odds.total_cmp(&b.log_odds))
            .expect("a step model has fits");
        let Time::Step(i) = top.time else {
            unreachable!("only steps are kept here")
        };
        let lo = if i > 0 {
            steps[i - 1]
        } else {
            f64::NEG_INFINITY
        };
        let hi = steps.get(i + 1).copied().unwrap_or(f64::INFINITY);
        let odds = step_odds + cold_at.map_or(0.0, |_| cold_odds);
        let fine: Vec<f64> = moments
            .iter()
            .copied()
            .filter(|&t| t > lo && t < hi && t != steps[i])
            .collect();
        for at in fine {
            steps.push(at);
            step_cols.push(step_col(at));
            if let Some(fit) = evaluate(
                Time::Step(steps.len() - 1),
                &step_cols,
                cold_at,
                with_hosts,
                odds,
            ) {
                step_fits.push(fit);
            }
        }
    }
    // What one model says each sample owes to time, the task's start and the host.
    let correction = |fit: &Fit, i: usize, j: usize| -> f64 {
        let beta = &fit.beta;
        let t = times[i][j];
        let (in_time, time_terms) = match fit.time {
            Time::None => (0.0, 0),
            Time::Trend(d) => ((0..d).map(|k| beta[k] * u(t).powi(k as i32 + 1)).sum(), d),
            Time::Warm(w) => (beta[0] * warm(WARMUP_RUNS[w], rank[i][j]), 1),
            Time::Step(k) => (beta[0] * f64::from(u8::from(t >= steps[k])), 1),
        };
        let at_start = fit
            .cold_at
            .map_or(0.0, |c| beta[time_terms] * cold(COLD_RUNS[c], seqs[i][j]));
        let host = if fit.with_hosts {
            let first = time_terms + usize::from(fit.cold_at.is_some());
            host_cols
                .iter()
                .zip(&beta[first..])
                .find(|(c, _)| c.0 == hosts[i][j])
                .map_or(0.0, |(_, &b)| b)
        } else {
            0.0
        };
        in_time + at_start + host
    };
    let chosen: Vec<(f64, &Fit)> = if step_model.is_some() {
        // The step's moment is averaged over with the posterior's weights: a point measured
        // only between two re-measured runs is not moved by the whole step when the data
        // cannot say which side of it the point ran on.
        let top = step_fits
            .iter()
            .map(|f| f.log_odds)
            .fold(f64::NEG_INFINITY, f64::max);
        step_fits
            .iter()
            .map(|f| ((f.log_odds - top).exp(), f))
            .collect()
    } else {
        match &best {
            Some(b) => vec![(1.0, b)],
            None => return zs,
        }
    };
    let total: f64 = chosen.iter().map(|c| c.0).sum();
    zs.into_iter()
        .enumerate()
        .map(|(i, z)| {
            z.iter()
                .enumerate()
                .map(|(j, &x)| {
                    x - chosen
                        .iter()
                        .map(|(w, f)| w * correction(f, i, j))
                        .sum::<f64>()
                        / total
                })
                .collect()
        })
        .collect()
}

/// The likeliest model so far: its log posterior odds against none, its time term, its cold
/// start (the τ's index), whether it fits host levels, and its coefficients in that order.
struct Fit {
    log_odds: f64,
    time: Time,
    cold_at: Option<usize>,
    with_hosts: bool,
    beta: Vec<f64>,
}

/// What a model says of time: nothing, a trend of some degree, a warm-up (its τ's index) or
/// a step (its moment's index among those tried).
#[derive(Debug, Clone, Copy)]
enum Time {
    None,
    Trend(usize),
    Warm(usize),
    Step(usize),
}

/// The moments a step in the lab's level is first looked for at: [`STEP_TIMES`] evenly
/// spaced quantiles of `moments` (the samples' distinct times after the first, sorted).
fn step_times(moments: &[f64]) -> Vec<f64> {
    let mut at: Vec<f64> = (1..=STEP_TIMES)
        .filter_map(|k| moments.get(k * moments.len() / (STEP_TIMES + 1)).copied())
        .collect();
    at.dedup();
    at
}

/// `col`'s part outside the span of the orthonormal `basis`, normalised, or None when that
/// part is negligible (a column in the span would make the normal equations singular).
fn orthogonal_part(basis: &[Vec<f64>], col: &[f64]) -> Option<Vec<f64>> {
    let norm = col.iter().map(|x| x * x).sum::<f64>();
    if norm <= 1e-12 {
        return None;
    }
    let mut r = col.to_vec();
    for e in basis {
        let dot: f64 = r.iter().zip(e).map(|(x, y)| x * y).sum();
        for (x, y) in r.iter_mut().zip(e) {
            *x -= dot * y;
        }
    }
    let left = r.iter().map(|x| x * x).sum::<f64>();
    if left <= 1e-6 * norm {
        return None;
    }
    let l = left.sqrt();
    Some(r.into_iter().map(|x| x / l).collect())
}

/// A column of the drift models' design, by what it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Col {
    Trend(usize),
    Warm(usize),
    Step(usize),
    Cold(usize),
    Host(usize),
}

/// Dot products of design columns with each other (`Some`) or with the response, the runs'
/// within-point residuals (`None`), computed once each.
#[derive(Default)]
struct Products(std::cell::RefCell<HashMap<(Col, Option<Col>), f64>>);

impl Products {
    fn dot(&self, key: (Col, Option<Col>), a: &[f64], b: &[f64]) -> f64 {
        // Symmetric: x·y and y·x sum the same terms in the same order, so one entry serves
        // both.
        let key = match key {
            (x, Some(y)) if y < x => (y, Some(x)),
            k => k,
        };
        *self
            .0
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>())
    }
}

/// The least-squares coefficients of `m` columns (normal equations, Gauss–Jordan) from their
/// products with each other (`gram`) and with the response (`xy`), or None when the columns
/// are (nearly) collinear.
fn least_squares(
    m: usize,
    gram: impl Fn(usize, usize) -> f64,
    xy: impl Fn(usize) -> f64,
) -> Option<Vec<f64>> {
    let mut a: Vec<Vec<f64>> = (0..m)
        .map(|i| {
            let mut row: Vec<f64> = (0..m).map(|j| gram(i, j)).collect();
            row.push(xy(i));
            row
        })
        .collect();
    for c in 0..m {
        let p = (c..m).max_by(|&x, &z| a[x][c].abs().total_cmp(&a[z][c].abs()))?;
        a.swap(c, p);
        let d = a[c][c];
        if d.abs() <= 1e-12 * (1.0 + a[c].iter().map(|x| x.abs()).fold(0.0, f64::max)) {
            return None;
        }
        for x in a[c][c..=m].iter_mut() {
            *x /= d;
        }
        let pivot = a[c].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let f = row[c];
                for (x, p) in row[c..=m].iter_mut().zip(&pivot[c..=m]) {
                    *x -= f * p;
                }
            }
        }
    }
    Some(a.iter().map(|row| row[m]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Taken;

    fn ev_of(points: &[(Point, Vec<(f64, f64)>)]) -> Evidence {
        let mut ev = Evidence::default();
        for (p, v) in points {
            ev.samples.insert(*p, v.iter().map(|x| x.1).collect());
            ev.taken.insert(
                *p,
                v.iter()
                    .map(|x| Taken {
                        at: x.0,
                        host: 0,
                        seq: 0,
                    })
                    .collect(),
            );
        }
        ev
    }

    #[test]
    fn a_drift_seen_by_a_re_measured_point_is_removed_and_a_step_between_points_is_kept() {
        // The good commit measured early and late drifts by 0.5 per unit of time; the bad
        // commit, measured once in the middle, sits 3 above.
        let jitter = |i: i32| if i % 2 == 0 { 0.01 } else { -0.01 };
        let good: Vec<(f64, f64)> = (0..20)
            .chain(80..100)
            .map(|i| (f64::from(i), 0.5 * f64::from(i) + jitter(i)))
            .collect();
        let bad: Vec<(f64, f64)> = (45..55)
            .map(|i| (f64::from(i), 0.5 * f64::from(i) + 3.0 + jitter(i)))
            .collect();
        let points = [Point::Good, Point::Candidate(0)];
        let ev = ev_of(&[(points[0], good.clone()), (points[1], bad.clone())]);
        let zs = vec![
            good.iter().map(|x| x.1).collect(),
            bad.iter().map(|x| x.1).collect(),
        ];
        let out = detrend(&ev, &points, zs);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let spread = out[0]
            .iter()
            .map(|x| (x - mean(&out[0])).abs())
            .fold(0.0, f64::max);
        // 50 before; what is left is the g-prior's shrinkage, 1 / (1 + n) of the trend.
        assert!(spread < 1.5, "good after detrending: {:?}", out[0]);
        let step = mean(&out[1]) - mean(&out[0]);
        assert!((step - 3.0).abs() < 0.2, "step {step}");
    }

    #[test]
    fn a_step_in_the_labs_level_seen_by_a_re_measured_point_is_taken_out_of_those_run_once() {
        // From time 50 on every run reads 4 higher. The good commit ran at every even time;
        // c1 at the odd times just before the step and c0 at those just after it, and
        // neither differs from the good commit. A smooth trend through the good commit's
        // runs passes midway near the step, leaving c1 and c0 2.66 apart (measured with the
        // step's prior set to nothing); the best grid moment alone, 1.09.
        let jitter = |i: i32| f64::from((i * 7919 + 13) % 101) / 500.0 - 0.1;
        let lab = |t: i32| if t >= 50 { 4.0 } else { 0.0 };
        let runs = |r: Vec<i32>| -> Vec<(f64, f64)> {
            r.into_iter()
                .map(|t| (f64::from(t), lab(t) + jitter(t)))
                .collect()
        };
        let good = runs((0..=90).step_by(2).collect());
        let before = runs((41..=49).step_by(2).collect());
        let after = runs((53..=61).step_by(2).collect());
        let points = [Point::Good, Point::Candidate(1), Point::Candidate(0)];
        let ev = ev_of(&[
            (points[0], good.clone()),
            (points[1], before.clone()),
            (points[2], after.clone()),
        ]);
        let zs: Vec<Vec<f64>> = [&good, &before, &after]
            .iter()
            .map(|v| v.iter().map(|x| x.1).collect())
            .collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean(&zs[2]) - mean(&zs[1]) - 4.0).abs() < 0.1);
        let out = detrend(&ev, &points, zs);
        let apart = mean(&out[2]) - mean(&out[1]);
        assert!(apart.abs() < 0.5, "c0 - c1 after: {apart}: {out:?}");
        let spread = out[0]
            .iter()
            .map(|x| (x - mean(&out[0])).abs())
            .fold(0.0, f64::max);
        assert!(spread < 0.5, "good after: {:?}", out[0]);
    }

    #[test]
    fn a_host_level_seen_by_points_run_on_two_hosts_is_taken_out_of_a_point_run_on_one() {
        // Host 1 runs everything 2 above host 0. The good commit ran on both hosts; the
        // candidate, 3 above the good commit, ran on host 1 only, so it reads 5 above.
        let jitter = |i: i32| [0.05, -0.05, 0.0][(i % 3) as usize];
        let mut ev = Evidence::default();
        let good: Vec<(f64, i64, f64)> = (0..40)
            .map(|i| {
                (
                    f64::from(i),
                    i64::from(i % 2),
                    2.0 * f64::from(i % 2) + jitter(i),
                )
            })
            .collect();
        let bad: Vec<(f64, i64, f64)> = (40..50)
            .map(|i| (f64::from(i), 1, 5.0 + jitter(i)))
            .collect();
        for (p, v) in [(Point::Good, &good), (Point::Candidate(0), &bad)] {
            ev.samples.insert(p, v.iter().map(|x| x.2).collect());
            ev.taken.insert(
                p,
                v.iter()
                    .map(|x| Taken {
                        at: x.0,
                        host: x.1,
                        seq: 0,
                    })
                    .collect(),
            );
        }
        let points = [Point::Good, Point::Candidate(0)];
        let zs = vec![
            good.iter().map(|x| x.2).collect(),
            bad.iter().map(|x| x.2).collect(),
        ];
        let out = detrend(&ev, &points, zs);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let step = mean(&out[1]) - mean(&out[0]);
        // Without the host's level: 5 − 1 = 4. What is left is the g-prior's shrinkage.
        assert!((step - 3.0).abs() < 0.1, "step {step}: {out:?}");
    }

    #[test]
    fn hosts_that_run_alike_change_nothing() {
        // Pseudo-random, so that no host's runs lean one way by construction.
        let jitter = |i: i32| f64::from((i * 7919 + 13) % 101) / 1000.0 - 0.05;
        let mut ev = Evidence::default();
        let good: Vec<(f64, i64, f64)> = (0..40)
            .map(|i| (f64::from(i), i64::from(i % 3), jitter(i)))
            .collect();
        ev.samples
            .insert(Point::Good, good.iter().map(|x| x.2).collect());
        ev.taken.insert(
            Point::Good,
            good.iter()
                .map(|x| Taken {
                    at: x.0,
                    host: x.1,
                    seq: 0,
                })
                .collect(),
        );
        let zs = vec![good.iter().map(|x| x.2).collect::<Vec<f64>>()];
        assert_eq!(detrend(&ev, &[Point::Good], zs.clone()), zs);
    }

    /// A sample taken on host 0: (at, seq, value).
    type Run = (f64, u32, f64);

    /// Pseudo-random noise of ±0.1 at time `i`, so that no task's runs lean one way by
    /// construction.
    fn jitter(i: i32) -> f64 {
        f64::from((i * 7919 + 13) % 101) / 500.0 - 0.1
    }

    /// A cold start of 5 on each task's first run of a commit.
    fn cold(seq: u32) -> f64 {
        if seq == 0 { 5.0 } else { 0.0 }
    }

    /// Samples of tasks of `per_task` runs each, taken one after another on one host.
    fn tasks_of(
        tasks: usize,
        per_task: u32,
        start: i32,
        value: impl Fn(i32, u32) -> f64,
    ) -> Vec<Run> {
        (0..tasks)
            .flat_map(|t| (0..per_task).map(move |s| (t, s)))
            .enumerate()
            .map(|(i, (_, s))| {
                let at = start + i as i32;
                (f64::from(at), s, value(at, s))
            })
            .collect()
    }

    fn ev_with_seq(points: &[(Point, &[Run])]) -> (Evidence, Vec<Vec<f64>>) {
        let mut ev = Evidence::default();
        let mut zs = Vec::new();
        for (p, v) in points {
            ev.samples.insert(*p, v.iter().map(|x| x.2).collect());
            let taken = v.iter().map(|x| Taken {
                at: x.0,
                host: 0,
                seq: x.1,
            });
            ev.taken.insert(*p, taken.collect());
            zs.push(v.iter().map(|x| x.2).collect());
        }
        (ev, zs)
    }

    #[test]
    fn a_cold_start_seen_in_tasks_of_several_runs_is_taken_out_of_points_run_once_a_task() {
        // Every task's first run reads 5 high. The good commit ran in six tasks of five runs;
        // the candidate, 3 above it, in ten tasks of one run, so every run of it is a first
        // run and it reads 8 above, against 1 above for the good commit's mean.
        let good = tasks_of(6, 5, 0, |at, s| cold(s) + jitter(at));
        let bad = tasks_of(10, 1, 30, |at, s| 3.0 + cold(s) + jitter(at));
        let points = [Point::Good, Point::Candidate(0)];
        let (ev, zs) = ev_with_seq(&[(points[0], &good), (points[1], &bad)]);
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean(&zs[1]) - mean(&zs[0]) - 7.0).abs() < 0.2);
        let out = detrend(&ev, &points, zs);
        let step = mean(&out[1]) - mean(&out[0]);
        // What is left is the g-prior's shrinkage and the fit's exp(−s/τ) against a step.
        assert!((step - 3.0).abs() < 0.5, "step {step}: {out:?}");
    }

    #[test]
    fn the_endpoints_first_tasks_alone_take_a_cold_start_out() {
        // Two tasks of five runs at each endpoint (8 free, below MIN_FREE), the first run of
        // each 5 high: taken out of the spread, the step between them kept.
        let good = tasks_of(2, 5, 0, |at, s| cold(s) + jitter(at));
        let bad = tasks_of(2, 5, 10, |at, s| 3.0 + cold(s) + jitter(at));
        let points = [Point::Good, Point::Candidate(0)];
        let (ev, zs) = ev_with_seq(&[(points[0], &good), (points[1], &bad)]);
        let out = detrend(&ev, &points, zs);
        let spread = |v: &[f64]| {
            let m = v.iter().sum::<f64>() / v.len() as f64;
            v.iter().map(|x| (x - m).abs()).fold(0.0, f64::max)
        };
        // 4 before (the cold run against the others' mean); what is left is the shrinkage.
        assert!(spread(&out[0]) < 1.0, "{out:?}");
        assert!(spread(&out[1]) < 1.0, "{out:?}");
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!((mean(&out[1]) - mean(&out[0]) - 3.0).abs() < 0.2, "{out:?}");
    }

    #[test]
    fn tasks_without_a_cold_start_change_nothing() {
        let good = tasks_of(6, 5, 0, |at, _| jitter(at));
        let bad = tasks_of(10, 1, 30, |at, _| 3.0 + jitter(at));
        let points = [Point::Good, Point::Candidate(0)];
        let (ev, zs) = ev_with_seq(&[(points[0], &good), (points[1], &bad)]);
        assert_eq!(detrend(&ev, &points, zs.clone()), zs);
    }

    #[test]
    fn without_drift_the_samples_are_unchanged() {
        let good: Vec<(f64, f64)> = (0..60)
            .map(|i| (i as f64, if i % 3 == 0 { 0.02 } else { -0.01 }))
            .collect();
        let points = [Point::Good];
        let ev = ev_of(&[(points[0], good.clone())]);
        let zs = vec![good.iter().map(|x| x.1).collect::<Vec<f64>>()];
        assert_eq!(detrend(&ev, &points, zs.clone()), zs);
    }
}
