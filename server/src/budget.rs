//! A bisect's budget of runs (`bisects.max_runs`, the engine's `Settings::max_runs`).
//!
//! At submission the budget is the cap: the operator's ceiling (`--max-runs-ceiling`), or
//! the submitter's explicit `max_runs` when that is lower. Once both endpoints are measured
//! the engine predicts the runs the confidence target still needs (`findings.prediction`);
//! the first such prediction sets the budget to the runs spent and queued plus a margin over
//! it, under the cap. When the engine later sees another change point (a question the first
//! prediction did not cover) the budget is set again the same way, only ever up. So a budget
//! follows from the measured noise and step, a bisect whose prediction was too hopeful runs
//! out and says what more would cost, and the cap is never exceeded.

use perfbisect_wire::findings::{BudgetPrediction, EngineFindings};

/// The ceiling when the operator sets none: the product's budget before predictions.
pub const DEFAULT_CEILING: u32 = 400;
/// The budget allows this many times the predicted runs: the prediction is about the
/// engine's mean cost (bisect-sim's overhead over the information bound), and single
/// bisects scatter around the mean.
const MARGIN: f64 = 3.0;
/// ... and at least this many runs beyond those spent, so that a prediction made from the
/// endpoints' first few runs cannot starve the search.
const FLOOR: u32 = 40;

/// The budget a bisect starts with.
pub fn initial(requested: Option<u32>, ceiling: u32) -> u32 {
    requested.map_or(ceiling, |r| r.min(ceiling)).max(2)
}

/// The budget once the engine predicts `predicted` more runs, with `used` runs spent or
/// queued; `current` (the ceiling or the submitter's number) caps it.
pub fn from_prediction(current: u32, used: u32, predicted: u32) -> u32 {
    let more = ((MARGIN * f64::from(predicted)).ceil() as u32).max(FLOOR);
    current.min(used.saturating_add(more))
}

/// Sets the budget from the engine's prediction: the first time after the endpoints, and
/// again (only ever up, under the same cap) each time the engine sees another change point.
/// Records an event saying how. Returns the new budget when it was set now.
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
        .max(if findings.more_than_one_change { 2 } else { 1 }) as i32;
    let row: Option<(i32, Option<i32>, i32)> = sqlx::query_as(
        "SELECT max_runs, budget_cap, budget_steps FROM bisects
         WHERE id = $1 AND budget_steps IS NOT NULL",
    )
    .bind(bisect)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((current, cap, set_for)) = row else {
        return Ok(None);
    };
    if set_for >= steps {
        return Ok(None);
    }
    let current = current.max(0) as u32;
    let cap = cap.map_or(current, |c| c.max(0) as u32);
    let wanted = from_prediction(cap, used, p.runs);
    let budget = if set_for == 0 {
        wanted
    } else {
        wanted.max(current)
    };
    sqlx::query(
        "UPDATE bisects SET max_runs = $2, budget_cap = $3, budget_steps = $4 WHERE id = $1",
    )
    .bind(bisect)
    .bind(budget as i32)
    .bind(cap as i32)
    .bind(steps)
    .execute(&mut *tx)
    .await?;
    let time = p
        .machine_secs
        .map(|s| format!(" and about {s:.0} s of machine time"))
        .unwrap_or_default();
    let how = if budget < cap {
        format!(
            "{MARGIN}× the prediction (at least {FLOOR}) beyond the {used} runs used, under the \
             cap of {cap}"
        )
    } else {
        format!(
            "the cap of {cap}; {MARGIN}× the prediction (at least {FLOOR}) beyond the {used} \
             runs used would be more"
        )
    };
    let first = if set_for == 0 {
        format!("Budget set to {budget} runs from the prediction.")
    } else {
        format!("Budget set to {budget} runs for change point {steps}.")
    };
    let message = format!(
        "{first}\nThe target confidence needs about {} more runs, {} builds{time}; the budget is \
         {how}.",
        p.runs, p.builds
    );
    crate::store::events::record(&mut *tx, bisect, "budget", &message).await?;
    Ok(Some(budget))
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
    let last: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT findings -> 'prediction' FROM bisects WHERE id = $1")
            .bind(bisect)
            .fetch_optional(&mut *tx)
            .await?
            .flatten();
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
pub fn inconclusive_sentence(
    listed: usize,
    mass: f64,
    max_runs: Option<u32>,
    prediction: Option<&BudgetPrediction>,
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
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_inconclusive_reason_gives_the_mass_and_the_cost_of_more() {
        let p = BudgetPrediction {
            runs: 42,
            builds: 3,
            machine_secs: Some(310.4),
        };
        assert_eq!(
            inconclusive_sentence(4, 0.9312, Some(120), Some(&p)),
            "No commit reached the target confidence within the budget of 120 runs: the 4 \
             most likely commits hold 93.1% of the probability; about 42 more runs, 3 builds \
             and 310 s of machine time would be needed."
        );
        assert_eq!(
            inconclusive_sentence(0, 0.0, None, None),
            "No commit reached the target confidence."
        );
    }
}
