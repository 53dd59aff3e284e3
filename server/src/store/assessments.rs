//! `bisect_assessments`: the engine's verdict and culprit probability per candidate, stored
//! incrementally (only rows whose value changed), plus the compact summary on `bisects`.

use perfbisect_wire::states::Verdict;

/// One candidate's stored assessment.
#[derive(Debug, Clone)]
pub struct AssessmentRow {
    pub idx: i32,
    pub verdict: Verdict,
    pub p: Option<f32>,
}

/// Every stored row of a bisect (candidates without a row are unknown, without probability).
pub async fn load<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
) -> sqlx::Result<Vec<AssessmentRow>> {
    sqlx::query_as!(
        AssessmentRow,
        r#"SELECT idx, verdict AS "verdict: Verdict", p FROM bisect_assessments WHERE bisect_id = $1"#,
        bisect,
    )
    .fetch_all(db)
    .await
}

/// The stored assessments as the JSON list `bisects.assessments` used to hold
/// (`[{sha, verdict, p}]`), for pages that show every candidate.
pub async fn as_json<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
) -> sqlx::Result<serde_json::Value> {
    sqlx::query_scalar!(
        r#"SELECT coalesce(jsonb_agg(jsonb_build_object('sha', c.sha, 'verdict', a.verdict, 'p', a.p)), '[]')
                  AS "assessments!"
           FROM bisect_assessments a JOIN bisect_commits c ON c.bisect_id = a.bisect_id AND c.idx = a.idx
           WHERE a.bisect_id = $1"#,
        bisect,
    )
    .fetch_one(db)
    .await
}

/// The round the stored rows belong to (see `write`).
pub async fn round<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar!("SELECT assessed_round FROM bisects WHERE id = $1", bisect)
        .fetch_one(db)
        .await
}

/// What one round changed and the summary it leaves.
pub struct RoundWrite<'a> {
    pub changed: &'a [(i32, Verdict, Option<f32>)],
    /// `bisects.assessments`: only the measured and skipped points (`[{sha, verdict, p}]`).
    pub measured: serde_json::Value,
    pub candidates_remaining: i32,
    /// `bisects.belief`: what the running page's progress is computed from.
    pub belief: &'a crate::progress::Belief,
}

/// Upserts the changed rows in one statement and updates the summary; returns the new round.
pub async fn write(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    w: RoundWrite<'_>,
) -> sqlx::Result<i64> {
    if !w.changed.is_empty() {
        let idx: Vec<i32> = w.changed.iter().map(|c| c.0).collect();
        let verdict: Vec<Verdict> = w.changed.iter().map(|c| c.1).collect();
        let p: Vec<Option<f32>> = w.changed.iter().map(|c| c.2).collect();
        sqlx::query!(
            "INSERT INTO bisect_assessments (bisect_id, idx, verdict, p)
             SELECT $1, i, v, p FROM UNNEST($2::int[], $3::text[], $4::real[]) AS u(i, v, p)
             ON CONFLICT (bisect_id, idx) DO UPDATE SET verdict = EXCLUDED.verdict, p = EXCLUDED.p",
            bisect,
            &idx,
            &verdict as &[Verdict],
            &p as &[Option<f32>],
        )
        .execute(&mut *tx)
        .await?;
    }
    sqlx::query_scalar!(
        "UPDATE bisects SET assessments = $2, candidates_remaining = $3, belief = $5,
                assessed_round = assessed_round + CASE WHEN $4 THEN 1 ELSE 0 END
         WHERE id = $1 RETURNING assessed_round",
        bisect,
        w.measured,
        w.candidates_remaining,
        !w.changed.is_empty(),
        sqlx::types::Json(w.belief) as _,
    )
    .fetch_one(&mut *tx)
    .await
}
