//! Change detection over each (watch, branch, metric) series: the heads measured since the
//! last analysis go through `perfbisect_changepoint::detect`, one at a time, and each change
//! found is recorded with what to do about it.

use crate::state::AppState;
use crate::store::series::{self, Point};
use crate::store::{watch_changes, watches};
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
    let metrics = watches::metrics(&state.db, watch_id).await?;
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
    let analyzed = series::lock_analyzed(&mut tx, watch_id, branch, &metric.name).await?;
    // The detector reads at most `window` values back: load that much before the new heads.
    let from = (analyzed + 1 - 2 * config.window as i32).max(0);
    let points = series::points(&mut *tx, watch_id, branch, &metric.name, from).await?;
    // Only a finished prefix is analysed: a head still measuring holds back those after it.
    let finished = points.iter().take_while(|p| p.finished()).count();
    let Some(last) = points[..finished].last().map(|p| p.seq) else {
        return Ok(());
    };
    if last <= analyzed {
        return Ok(());
    }
    let last_change_seq =
        watch_changes::last_change_seq(&mut tx, watch_id, branch, &metric.name).await?;
    let valued: Vec<(&Point, f64)> = points[..finished]
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
        let recorded = watch_changes::NewChange {
            watch: watch_id,
            branch,
            metric: &metric.name,
            before_head: before.head_id,
            after_head: after.head_id,
            detected_head: detected.head_id,
            relative: change.relative,
            confidence: change.confidence(),
            detection: serde_json::to_value(change)?,
            action,
            message: message.as_deref(),
        };
        watch_changes::record(&mut tx, &recorded).await?;
    }
    series::set_analyzed(&mut tx, watch_id, branch, &metric.name, last).await?;
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
