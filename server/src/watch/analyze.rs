//! Change detection over each (watch, branch, metric) series: the heads measured since the
//! last analysis go through `perfbisect_changepoint::detect`, one at a time, and each change
//! found is recorded with what to do about it.

use super::series::{self, PointRow};
use crate::state::AppState;
use perfbisect_changepoint::{Change, Config, detect};
use perfbisect_wire::watch::WatchMetric;

/// What a change leads to, given the metric's direction and threshold.
pub fn action(metric: &WatchMetric, change: &Change) -> (&'static str, Option<String>) {
    let pct = change.relative * 100.0;
    if pct.abs() < metric.threshold_pct {
        return (
            "ignored",
            Some(format!(
                "{pct:+.2}% is below the threshold of {}%",
                metric.threshold_pct
            )),
        );
    }
    let wrong_way = match metric.direction.as_str() {
        "increase" => pct < 0.0,
        "decrease" => pct > 0.0,
        _ => false,
    };
    if wrong_way {
        return (
            "ignored",
            Some(format!(
                "{pct:+.2}% is not an {}, the direction this metric bisects",
                metric.direction
            )),
        );
    }
    ("bisecting", None)
}

/// Analyses every series of the watch.
pub async fn analyze(state: &AppState, watch_id: i64) -> anyhow::Result<()> {
    let metrics: serde_json::Value =
        sqlx::query_scalar("SELECT metrics FROM watches WHERE id = $1")
            .bind(watch_id)
            .fetch_one(&state.db)
            .await?;
    let metrics: Vec<WatchMetric> = serde_json::from_value(metrics)?;
    for branch in series::branches(&state.db, watch_id).await? {
        for metric in &metrics {
            analyze_series(state, watch_id, &branch, metric).await?;
        }
    }
    Ok(())
}

/// Feeds the finished heads not analysed yet to the detector, in order. The series row is
/// held `FOR UPDATE` throughout, so two replicas never record the same change twice.
async fn analyze_series(
    state: &AppState,
    watch_id: i64,
    branch: &str,
    metric: &WatchMetric,
) -> anyhow::Result<()> {
    let config = Config::default();
    let mut tx = state.db.begin().await?;
    sqlx::query(
        "INSERT INTO watch_series (watch_id, ref_name, metric) VALUES ($1, $2, $3)
         ON CONFLICT DO NOTHING",
    )
    .bind(watch_id)
    .bind(branch)
    .bind(&metric.name)
    .execute(&mut *tx)
    .await?;
    let analyzed: i32 = sqlx::query_scalar(
        "SELECT analyzed_seq FROM watch_series WHERE watch_id = $1 AND ref_name = $2 AND metric = $3
         FOR UPDATE",
    )
    .bind(watch_id)
    .bind(branch)
    .bind(&metric.name)
    .fetch_one(&mut *tx)
    .await?;
    // The detector reads at most `window` values back: load that much before the new heads.
    let from = (analyzed + 1 - 2 * config.window as i32).max(0);
    let points = series::load(&mut *tx, watch_id, branch, &metric.name, from).await?;
    // Only a finished prefix is analysed: a head still measuring holds back those after it.
    let finished = points.iter().take_while(|p| p.finished()).count();
    let Some(last) = points[..finished].last().map(|p| p.seq) else {
        return Ok(());
    };
    if last <= analyzed {
        return Ok(());
    }
    let last_change_seq: Option<i32> = sqlx::query_scalar(
        "SELECT max(h.seq) FROM watch_changes c JOIN watch_heads h ON h.id = c.after_head_id
         WHERE c.watch_id = $1 AND c.ref_name = $2 AND c.metric = $3",
    )
    .bind(watch_id)
    .bind(branch)
    .bind(&metric.name)
    .fetch_one(&mut *tx)
    .await?;
    let valued: Vec<(&PointRow, f64)> = points[..finished]
        .iter()
        .filter_map(|p| p.mean().map(|m| (p, m)))
        .collect();
    let values: Vec<f64> = valued.iter().map(|(_, v)| *v).collect();
    let mut segment_start = last_change_seq
        .map(|s| valued.iter().take_while(|(p, _)| p.seq < s).count())
        .unwrap_or(0);
    for i in 0..valued.len() {
        if valued[i].0.seq <= analyzed {
            continue;
        }
        let Some(change) = detect(&config, &values[..=i], segment_start) else {
            continue;
        };
        segment_start = change.index;
        let before = valued[change.index - 1].0;
        let after = valued[change.index].0;
        let detected = valued[i].0;
        let (action, message) = action(metric, &change);
        tracing::info!(
            watch = watch_id,
            branch,
            metric = metric.name,
            before = before.sha,
            after = after.sha,
            change_pct = change.relative * 100.0,
            action,
            "change point"
        );
        sqlx::query(
            "INSERT INTO watch_changes (watch_id, ref_name, metric, before_head_id, after_head_id,
                 detected_head_id, relative, confidence, detection, action, message)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
             ON CONFLICT (watch_id, ref_name, metric, after_head_id) DO NOTHING",
        )
        .bind(watch_id)
        .bind(branch)
        .bind(&metric.name)
        .bind(before.head_id)
        .bind(after.head_id)
        .bind(detected.head_id)
        .bind(change.relative)
        .bind(change.confidence())
        .bind(serde_json::to_value(change)?)
        .bind(action)
        .bind(message)
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query(
        "UPDATE watch_series SET analyzed_seq = $4 WHERE watch_id = $1 AND ref_name = $2 AND metric = $3",
    )
    .bind(watch_id)
    .bind(branch)
    .bind(&metric.name)
    .bind(last)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(relative: f64) -> Change {
        Change {
            index: 10,
            detected_at: 12,
            before: 100.0,
            after: 100.0 * (1.0 + relative),
            relative,
            z: 5.0,
            p_value: 1e-6,
        }
    }

    fn metric(direction: &str, threshold_pct: f64) -> WatchMetric {
        WatchMetric {
            name: "demo.score".into(),
            direction: direction.into(),
            threshold_pct,
        }
    }

    #[test]
    fn threshold_and_direction_decide_the_action() {
        assert_eq!(action(&metric("either", 2.0), &change(0.05)).0, "bisecting");
        assert_eq!(
            action(&metric("either", 2.0), &change(-0.05)).0,
            "bisecting"
        );
        let (a, why) = action(&metric("either", 10.0), &change(0.05));
        assert_eq!(a, "ignored");
        assert!(why.unwrap().contains("below the threshold of 10%"));
        assert_eq!(
            action(&metric("increase", 2.0), &change(-0.05)).0,
            "ignored"
        );
        assert_eq!(
            action(&metric("decrease", 2.0), &change(-0.05)).0,
            "bisecting"
        );
    }
}
