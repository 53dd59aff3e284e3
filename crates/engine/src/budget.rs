//! A bisect's budget of runs: how the product's default budget follows the engine's
//! predictions. Pure, so that the server (which stores it in `bisects`) and bisect-sim
//! (which must measure the product as it runs) apply the same rule.
//!
//! At submission the budget is the cap: the operator's ceiling, or the submitter's explicit
//! number when that is lower. The first prediction after the endpoints sets the budget to
//! the runs spent and queued plus a margin over the prediction, under the cap. It is set
//! again, only ever up and under the same cap, when the prediction's ground moves:
//! - the engine sees another change point (a question the first prediction did not cover);
//! - the measured step, in noise units, has shrunk well below the one the budget was set
//!   from. A prediction made from the endpoints' first few runs can overrate the step (on
//!   the example repository, +10.6% measured after 12 runs where the step is +6%), and the
//!   runs a step needs grow with the inverse square of its size, so such a budget would end
//!   a sound bisect as inconclusive;
//! - the bisect is close to its end: the engine predicts that what is left to do is at
//!   most a quarter of the runs already used, and the budget would run out before it. The
//!   runs used are spent whether the bisect ends inconclusive or found, and on the example
//!   repository 6 of 400 simulated bisects ran out needing 6 to 16 more runs after 88 to
//!   219 (most in their verification).
//!
//! A bisect whose step holds but whose search is slower than predicted still runs out,
//! and says what more would cost. Nothing raises a budget above its cap.

/// The ceiling when the operator sets none.
pub const DEFAULT_CEILING: u32 = 2000;
/// The budget allows this many times the predicted runs: the prediction is the engine's
/// mean cost, and single bisects scatter around their mean.
pub const MARGIN: f64 = 3.0;
/// ... and at least this many runs beyond those used, so that a prediction made from the
/// endpoints' first few runs cannot starve the search.
pub const FLOOR: u32 = 40;
/// The budget is set again when the measured step in noise units falls below this share
/// of the one it was set from.
pub const SHRINK: f64 = 0.75;
/// A bisect whose predicted remainder is at most this share of the runs it used may
/// finish beyond its budget (under the cap).
pub const FINISH: f64 = 0.25;

/// The budget a bisect starts with.
pub fn initial(requested: Option<u32>, ceiling: u32) -> u32 {
    requested.map_or(ceiling, |r| r.min(ceiling)).max(2)
}

/// The budget once the engine predicts `predicted` more runs with `used` runs spent or
/// queued, under `cap`.
pub fn from_prediction(cap: u32, used: u32, predicted: u32) -> u32 {
    let more = ((MARGIN * f64::from(predicted)).ceil() as u32).max(FLOOR);
    cap.min(used.saturating_add(more))
}

/// A bisect's budget and what it was last set from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Runs the bisect may use (the engine's `Settings::max_runs`).
    pub runs: u32,
    /// The cap no budget exceeds.
    pub cap: u32,
    /// Change points the budget was set for; 0 while it is still the cap.
    pub steps: u32,
    /// |step| / noise when the budget was last set, if both were measured.
    pub basis: Option<f64>,
}

/// What the engine said on one advance, as far as the budget cares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Forecast {
    /// Runs it still predicts for the target confidence.
    pub runs: u32,
    /// Change points it sees (at least 1; "more than one" counts as 2).
    pub steps: u32,
    /// |step| / noise of the range as measured now.
    pub step_in_noise: Option<f64>,
}

/// Why the budget was set now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// The first prediction after the endpoints.
    First,
    /// The engine sees this many change points now.
    ChangePoint(u32),
    /// The measured step shrank from `from` to `to` noise standard deviations.
    SmallerStep { from: f64, to: f64 },
    /// Close to its end: the predicted remainder is small beside the runs used.
    Finishing,
}

impl Forecast {
    /// The forecast in the engine's findings, once it predicts.
    pub fn of(findings: &crate::Findings) -> Option<Forecast> {
        let p = findings.prediction?;
        let steps = findings
            .changes
            .len()
            .max(if findings.misfit { 2 } else { 1 });
        Some(Forecast {
            runs: p.runs,
            steps: steps as u32,
            step_in_noise: Some(p.step_in_noise).filter(|d| d.is_finite()),
        })
    }
}

impl Budget {
    /// A new bisect's budget: the cap until the first prediction.
    pub fn new(requested: Option<u32>, ceiling: u32) -> Budget {
        let runs = initial(requested, ceiling);
        Budget {
            runs,
            cap: runs,
            steps: 0,
            basis: None,
        }
    }

    /// Sets the budget from `forecast` when it is due (see the module's docs), with `used`
    /// runs spent or queued. Returns why, when it was set now.
    pub fn settle(&mut self, forecast: &Forecast, used: u32) -> Option<Reason> {
        let steps = forecast.steps.max(1);
        let shrunk = match (self.basis, forecast.step_in_noise) {
            (Some(from), Some(to)) if to.is_finite() && to < SHRINK * from => Some((from, to)),
            _ => None,
        };
        let reason = if self.steps == 0 {
            Reason::First
        } else if steps > self.steps {
            Reason::ChangePoint(steps)
        } else if let Some((from, to)) = shrunk {
            Reason::SmallerStep { from, to }
        } else if used.saturating_add(forecast.runs) > self.runs
            && self.runs < self.cap
            && f64::from(forecast.runs) <= FINISH * f64::from(used)
        {
            Reason::Finishing
        } else {
            return None;
        };
        let wanted = from_prediction(self.cap, used, forecast.runs);
        self.runs = if reason == Reason::First {
            wanted
        } else {
            wanted.max(self.runs)
        };
        self.steps = self.steps.max(steps);
        // The basis moves with every setting, so a step that keeps shrinking raises the
        // budget again only once it has shrunk by another quarter.
        if forecast.step_in_noise.is_some_and(f64::is_finite) {
            self.basis = forecast.step_in_noise;
        }
        Some(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forecast(runs: u32, steps: u32, d: f64) -> Forecast {
        Forecast {
            runs,
            steps,
            step_in_noise: Some(d),
        }
    }

    #[test]
    fn the_budget_follows_the_prediction_under_every_cap() {
        assert_eq!(initial(None, 400), 400);
        assert_eq!(initial(Some(1000), 400), 400);
        assert_eq!(initial(Some(50), 400), 50);
        // 30 predicted: 90 more than the 20 used.
        assert_eq!(from_prediction(400, 20, 30), 110);
        // A tiny prediction still leaves the floor.
        assert_eq!(from_prediction(400, 20, 2), 60);
        // The cap wins over a large prediction.
        assert_eq!(from_prediction(400, 20, 500), 400);
        assert_eq!(from_prediction(50, 20, 30), 50);
    }

    #[test]
    fn a_budget_is_set_once_unless_its_ground_moves() {
        let mut b = Budget::new(None, 400);
        assert_eq!(b.runs, 400);
        assert_eq!(b.settle(&forecast(25, 1, 2.7), 12), Some(Reason::First));
        assert_eq!(b.runs, 12 + 75);
        // The same ground: a slower search does not buy more runs.
        assert_eq!(b.settle(&forecast(60, 1, 2.5), 50), None);
        assert_eq!(b.runs, 87);
        // The step shrank to about half: set again from the new prediction.
        assert_eq!(
            b.settle(&forecast(57, 1, 1.4), 47),
            Some(Reason::SmallerStep { from: 2.7, to: 1.4 })
        );
        assert_eq!(b.runs, 47 + 171);
        // A second change point raises it; never lowers it.
        assert_eq!(
            b.settle(&forecast(5, 2, 1.4), 60),
            Some(Reason::ChangePoint(2))
        );
        assert_eq!(b.runs, 218);
        // Never above the cap.
        assert_eq!(
            b.settle(&forecast(500, 3, 1.4), 100),
            Some(Reason::ChangePoint(3))
        );
        assert_eq!(b.runs, 400);
    }

    #[test]
    fn a_bisect_close_to_its_end_may_finish() {
        let mut b = Budget::new(None, 400);
        b.settle(&forecast(25, 1, 2.0), 12);
        assert_eq!(b.runs, 87);
        // 80 used, 30 more predicted: too much to finish beyond the budget.
        assert_eq!(b.settle(&forecast(30, 1, 2.0), 80), None);
        // 86 used, 16 more predicted (at most a quarter): finishing is allowed.
        assert_eq!(b.settle(&forecast(16, 1, 2.0), 86), Some(Reason::Finishing));
        assert_eq!(b.runs, 86 + 48);
        // Within the budget now: nothing more.
        assert_eq!(b.settle(&forecast(10, 1, 2.0), 100), None);
        // At the cap, no extension.
        let mut capped = Budget::new(Some(60), 400);
        capped.settle(&forecast(10, 1, 2.0), 20);
        assert_eq!(capped.runs, 60);
        assert_eq!(capped.settle(&forecast(5, 1, 2.0), 58), None);
    }

    #[test]
    fn a_submitters_number_is_the_cap() {
        let mut b = Budget::new(Some(60), 400);
        assert_eq!(b.settle(&forecast(100, 1, 1.0), 10), Some(Reason::First));
        assert_eq!(b.runs, 60);
    }
}
