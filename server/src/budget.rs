//! A bisect's budget of runs (`bisects.max_runs`, the engine's `Settings::max_runs`),
//! stored. The rule itself is the engine's ([`perfbisect_engine::budget`]), so bisect-sim
//! measures the product under the same budget: the cap until the first prediction after
//! the endpoints, then a margin over the prediction, set again (only up, under the cap)
//! when the engine sees another change point, when the measured step shrinks well below
//! the one the budget was set from, or when the bisect is close to its end.

use crate::store;
use perfbisect_engine::budget::{self as rule, Budget, Forecast, Reason};
use perfbisect_wire::findings::{BudgetPrediction, EngineFindings};

pub use rule::DEFAULT_CEILING;

/// The budget a bisect starts with.
pub fn initial(requested: Option<u32>, ceiling: u32) -> u32 {
    rule::initial(requested, ceiling)
}

/// Sets the budget from the engine's prediction when the rule says it is due, and records
/// an event saying how. Returns the new budget when it was set now.
pub async fn settle(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    findings: &EngineFindings,
    used: u32,
) -> sqlx::Result<Option<u32>> {
    let Some(p) = &findings.prediction else {
        return Ok(None);
    };
    // Change points the prediction stands for: "more than one" counts as two at least.
    let steps = findings
        .changes
        .len()
        .max(if findings.more_than_one_change { 2 } else { 1 }) as u32;
    let forecast = Forecast {
        runs: p.runs,
        steps,
        step_in_noise: p.step_in_noise.filter(|d| d.is_finite()),
    };
    let row = store::bisects::budget(&mut *tx, bisect).await?;
    let Some(store::bisects::StoredBudget {
        max_runs: current,
        budget_cap: cap,
        budget_steps: set_for,
        budget_basis: basis,
    }) = row
    else {
        return Ok(None);
    };
    let current = current.max(0) as u32;
    let mut budget = Budget {
        runs: current,
        cap: cap.map_or(current, |c| c.max(0) as u32),
        steps: set_for.max(0) as u32,
        basis,
    };
    let Some(reason) = budget.settle(&forecast, used) else {
        return Ok(None);
    };
    let stored = store::bisects::StoredBudget {
        max_runs: budget.runs as i32,
        budget_cap: Some(budget.cap as i32),
        budget_steps: budget.steps as i32,
        budget_basis: budget.basis,
    };
    store::bisects::set_budget(&mut *tx, bisect, &stored).await?;
    let message = event_message(&budget, reason, p, used);
    store::events::record(&mut *tx, bisect, "budget", &message).await?;
    Ok(Some(budget.runs))
}

/// The event that says how the budget was set.
fn event_message(budget: &Budget, reason: Reason, p: &BudgetPrediction, used: u32) -> String {
    let (runs, cap) = (budget.runs, budget.cap);
    let (margin, floor) = (rule::MARGIN, rule::FLOOR);
    let first = match reason {
        Reason::First => format!("Budget set to {runs} runs from the prediction."),
        Reason::ChangePoint(n) => format!("Budget set to {runs} runs for change point {n}."),
        Reason::SmallerStep { from, to } => format!(
            "Budget set to {runs} runs: the measured step is {to:.2} noise standard deviations, \
             not the {from:.2} it was set from."
        ),
        Reason::Finishing => format!(
            "Budget set to {runs} runs to finish: what is left is small beside the {used} runs \
             used."
        ),
    };
    let time = p
        .machine_secs
        .map(|s| format!(" and about {s:.0} s of machine time"))
        .unwrap_or_default();
    let how = if runs < cap {
        format!(
            "{margin}× the prediction (at least {floor}) beyond the {used} runs used, under the \
             cap of {cap}"
        )
    } else {
        format!(
            "the cap of {cap}; {margin}× the prediction (at least {floor}) beyond the {used} \
             runs used would be more"
        )
    };
    format!(
        "{first}\nThe target confidence needs about {} more runs, {} builds{time}; the budget is \
         {how}.",
        p.runs, p.builds
    )
}

/// The engine predicts nothing on the advance that ends a bisect for its budget; the last
/// prediction it made stays in the findings, as what more would have cost.
pub async fn carry_prediction(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    findings: &mut perfbisect_wire::findings::EngineFindings,
) -> sqlx::Result<()> {
    if findings.prediction.is_some() {
        return Ok(());
    }
    let last = store::bisects::last_prediction(&mut *tx, bisect).await?;
    findings.prediction = last.and_then(|v| serde_json::from_value(v).ok());
    Ok(())
}

/// What more would cost, in words: `about 42 more runs, 3 builds and 310 s of machine time`.
pub fn cost_phrase(p: &BudgetPrediction) -> String {
    match p.machine_secs {
        Some(s) => format!(
            "about {} more runs, {} builds and {s:.0} s of machine time",
            p.runs, p.builds
        ),
        None => format!("about {} more runs and {} builds", p.runs, p.builds),
    }
}

/// The first line of an inconclusive bisect's reason: the credible set and its mass, and
/// what more would cost.
/// `why`: for a bisect that ended before its budget ran out, the engine's reason (its
/// first clause, up to "; ", is said as a sentence of its own: "Ended after 433 runs: the
/// ceiling of 2000 cannot settle this range at the noise of 30.9%: …").
pub fn inconclusive_sentence(
    listed: usize,
    mass: f64,
    max_runs: Option<u32>,
    prediction: Option<&BudgetPrediction>,
    why: Option<&str>,
) -> String {
    let mut s = String::from("No commit reached the target confidence");
    if let Some(m) = max_runs {
        s += &format!(" within the budget of {m} runs");
    }
    if listed > 0 {
        s += &format!(
            ": the {listed} most likely commits hold {:.1}% of the probability",
            100.0 * mass.min(1.0)
        );
    }
    if let Some(p) = prediction {
        s += &format!("; {} would be needed", cost_phrase(p));
    }
    s += ".";
    let first = why
        .map(|w| {
            w.split("; ")
                .next()
                .unwrap_or(w)
                .lines()
                .next()
                .unwrap_or("")
        })
        .map(str::trim)
        .filter(|w| !w.is_empty());
    if let Some(w) = first {
        let mut chars = w.chars();
        let head: String = chars
            .next()
            .into_iter()
            .flat_map(char::to_uppercase)
            .collect();
        s += &format!(" {head}{}.", chars.as_str().trim_end_matches('.'));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inconclusive_reason_gives_the_mass_and_the_cost_of_more() {
        let p = BudgetPrediction {
            runs: 42,
            builds: 3,
            machine_secs: Some(310.4),
            step_in_noise: Some(2.0),
        };
        assert_eq!(
            inconclusive_sentence(4, 0.9312, Some(120), Some(&p), None),
            "No commit reached the target confidence within the budget of 120 runs: the 4 \
             most likely commits hold 93.1% of the probability; about 42 more runs, 3 builds \
             and 310 s of machine time would be needed."
        );
        assert_eq!(
            inconclusive_sentence(0, 0.0, None, None, None),
            "No commit reached the target confidence."
        );
        // Ended before the budget ran out: the engine's first clause says why.
        assert_eq!(
            inconclusive_sentence(
                20,
                0.068,
                None,
                None,
                Some(
                    "ended after 433 runs: the ceiling of 2000 cannot settle this range at the \
                     noise of 30.9%; about 17854 more runs would be needed; P(no change) 0.3"
                )
            ),
            "No commit reached the target confidence: the 20 most likely commits hold 6.8% of \
             the probability. Ended after 433 runs: the ceiling of 2000 cannot settle this \
             range at the noise of 30.9%."
        );
    }
}
