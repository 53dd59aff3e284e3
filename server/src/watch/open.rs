//! From a change to its bisect: once per (repository, job, range), through the same code as
//! `POST /api/v1/bisects`.

use crate::state::AppState;
use perfbisect_wire::api::SubmitBisect;

#[derive(Debug, sqlx::FromRow)]
struct Pending {
    id: i64,
    watch_id: i64,
    metric: String,
    relative: f64,
    repository_id: i64,
    repository: String,
    job_spec_id: i64,
    job_yaml: String,
    recipients: serde_json::Value,
    created_by: Option<i64>,
    good_sha: String,
    bad_sha: String,
}

/// Opens the bisect of every change that should have one and has none yet (a crash between
/// recording a change and opening its bisect leaves such a row; the next tick opens it).
///
/// The range is one measured commit wider on each side than the detected pair: from the
/// commit before the last one on the old level to the commit after the first one on the new
/// level. The detector places about one change in six a commit off (cp-bench, 5 runs per
/// commit, a 3% step), and a range that misses its change can only end "not reproduced";
/// the wider range costs one or two more bisection steps, and if it brings in a second
/// change the engine reports both.
pub async fn open_pending(state: &AppState) -> anyhow::Result<()> {
    let pending: Vec<Pending> = sqlx::query_as(
        "SELECT c.id, c.watch_id, c.metric, c.relative, w.repository_id, r.name AS repository,
                w.job_spec_id, j.yaml AS job_yaml, w.recipients, w.created_by,
                COALESCE(hg.sha, hb.sha) AS good_sha, COALESCE(hr.sha, ha.sha) AS bad_sha
         FROM watch_changes c
         JOIN watches w ON w.id = c.watch_id
         JOIN repositories r ON r.id = w.repository_id
         JOIN job_specs j ON j.id = w.job_spec_id
         JOIN watch_heads hb ON hb.id = c.before_head_id
         JOIN watch_heads ha ON ha.id = c.after_head_id
         LEFT JOIN watch_heads hg ON hg.watch_id = hb.watch_id AND hg.ref_name = hb.ref_name
                                 AND hg.seq = hb.seq - 1
         LEFT JOIN watch_heads hr ON hr.watch_id = ha.watch_id AND hr.ref_name = ha.ref_name
                                 AND hr.seq = ha.seq + 1
         WHERE c.action = 'bisecting' AND c.bisect_id IS NULL
         ORDER BY c.id",
    )
    .fetch_all(&state.db)
    .await?;
    for p in pending {
        if let Err(e) = open(state, &p).await {
            tracing::warn!(change = p.id, error = ?e, "opening a bisect");
        }
    }
    Ok(())
}

/// Opens (or finds) the bisect of one change. The `watch_bisects` row of the range is held
/// `FOR UPDATE` while the bisect is submitted, so a change of another metric or another
/// watch with the same range waits, then links to the same bisect.
async fn open(state: &AppState, p: &Pending) -> anyhow::Result<()> {
    let mut tx = state.db.begin().await?;
    // Re-read under lock: another replica may have handled it.
    let still: Option<i64> = sqlx::query_scalar(
        "SELECT id FROM watch_changes WHERE id = $1 AND action = 'bisecting' AND bisect_id IS NULL
         FOR UPDATE SKIP LOCKED",
    )
    .bind(p.id)
    .fetch_optional(&mut *tx)
    .await?;
    if still.is_none() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO watch_bisects (repository_id, job_spec_id, good_sha, bad_sha)
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
    )
    .bind(p.repository_id)
    .bind(p.job_spec_id)
    .bind(&p.good_sha)
    .bind(&p.bad_sha)
    .execute(&mut *tx)
    .await?;
    let existing: Option<i64> = sqlx::query_scalar(
        "SELECT bisect_id FROM watch_bisects
         WHERE repository_id = $1 AND job_spec_id = $2 AND good_sha = $3 AND bad_sha = $4
         FOR UPDATE",
    )
    .bind(p.repository_id)
    .bind(p.job_spec_id)
    .bind(&p.good_sha)
    .bind(&p.bad_sha)
    .fetch_one(&mut *tx)
    .await?;
    if let Some(bisect) = existing {
        sqlx::query(
            "UPDATE watch_changes SET action = 'duplicate', bisect_id = $2,
                 message = 'the same range is already bisected by bisect ' || $2
             WHERE id = $1",
        )
        .bind(p.id)
        .bind(bisect)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tracing::info!(change = p.id, bisect, "change already bisected");
        return Ok(());
    }
    let recipients: Vec<String> = serde_json::from_value(p.recipients.clone()).unwrap_or_default();
    let req = SubmitBisect {
        repository: p.repository.clone(),
        good: p.good_sha.clone(),
        bad: p.bad_sha.clone(),
        job: p.job_yaml.clone(),
        metric: p.metric.clone(),
        direction: Some(
            if p.relative >= 0.0 {
                "increase"
            } else {
                "decrease"
            }
            .into(),
        ),
        magnitude_pct: Some((p.relative.abs() * 100.0).max(0.01)),
        confidence: None,
        max_runs: None,
        notify: recipients,
        use_merge_base: true,
        first_parent: false,
    };
    match crate::submission::submit(state, p.created_by, &req).await {
        Ok(bisect) => {
            sqlx::query(
                "UPDATE watch_bisects SET bisect_id = $5
                 WHERE repository_id = $1 AND job_spec_id = $2 AND good_sha = $3 AND bad_sha = $4",
            )
            .bind(p.repository_id)
            .bind(p.job_spec_id)
            .bind(&p.good_sha)
            .bind(&p.bad_sha)
            .bind(bisect)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE watch_changes SET bisect_id = $2 WHERE id = $1")
                .bind(p.id)
                .bind(bisect)
                .execute(&mut *tx)
                .await?;
            tracing::info!(
                change = p.id,
                watch = p.watch_id,
                bisect,
                "change opened a bisect"
            );
        }
        Err(e) => {
            sqlx::query("UPDATE watch_changes SET action = 'failed', message = $2 WHERE id = $1")
                .bind(p.id)
                .bind(format!("the bisect could not be opened: {e}"))
                .execute(&mut *tx)
                .await?;
            tracing::warn!(change = p.id, error = %e, "change could not open a bisect");
        }
    }
    tx.commit().await?;
    Ok(())
}
