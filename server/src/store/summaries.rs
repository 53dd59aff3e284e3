//! One line per bisect for the list pages (`GET /bisects`, `GET /api/v1/bisects`): read from
//! the bisect's row and its summary columns, never from its candidates or assessments.

use crate::progress::Belief;
use chrono::{DateTime, Utc};
use perfbisect_wire::api::MeasuredChange;
use perfbisect_wire::states::BisectStatus;
use sqlx::types::Json;

/// The list filters; `None` means any.
#[derive(Debug, Default, Clone, Copy)]
pub struct ListFilter<'a> {
    pub status: Option<&'a str>,
    pub repository: Option<&'a str>,
    pub testcase: Option<&'a str>,
    pub metric: Option<&'a str>,
}

#[derive(Debug, Clone)]
pub struct SummaryRow {
    pub id: i64,
    pub repository: String,
    pub good_rev: String,
    pub bad_rev: String,
    pub good_sha: String,
    pub bad_sha: String,
    pub metric: String,
    pub testcase: String,
    pub status: BisectStatus,
    pub culprit_sha: Option<String>,
    pub culprit_subject: Option<String>,
    pub created_at: DateTime<Utc>,
    /// None for bisects stored before the summary columns existed.
    pub candidates_total: Option<i32>,
    pub candidates_remaining: Option<i32>,
    pub runs_done: i64,
    /// As the last advance measured it (`Json(None)`: nothing to compare yet); `None` when
    /// not stored yet (before the first advance, just after the end, older bisects).
    pub measured_change: Option<Json<Option<MeasuredChange>>>,
    /// The engine's belief in brief, as of the last round.
    pub belief: Option<Json<Belief>>,
}

// `list` and `count` read the same rows: `count` writes `list`'s joins as semi-joins, so
// without a repository or testcase filter it reads `bisects` alone (an index-only scan of
// `bisects_metric` once the table is vacuumed: 1.3 ms for 10,000 bisects, not 7 ms joined).

/// A page of bisects, newest first.
pub async fn list<'e>(
    db: impl sqlx::PgExecutor<'e>,
    f: ListFilter<'_>,
    limit: i64,
    offset: i64,
) -> sqlx::Result<Vec<SummaryRow>> {
    sqlx::query_as!(
        SummaryRow,
        r#"SELECT b.id, r.name AS repository, b.good_rev, b.bad_rev, b.good_sha, b.bad_sha, b.metric,
                  j.testcase, b.status AS "status: BisectStatus", b.culprit_sha,
                  (SELECT d.subject FROM bisect_commit_details d
                   WHERE d.bisect_id = b.id AND d.sha = b.culprit_sha) AS culprit_subject,
                  b.created_at, b.candidates_total, b.candidates_remaining,
                  (SELECT count(*) FROM runs u WHERE u.bisect_id = b.id) AS "runs_done!",
                  b.measured_change AS "measured_change: Json<Option<MeasuredChange>>",
                  b.belief AS "belief: Json<Belief>"
           FROM bisects b JOIN repositories r ON r.id = b.repository_id
           JOIN job_specs j ON j.id = b.job_spec_id
           WHERE ($1::text IS NULL OR b.status = $1) AND ($2::text IS NULL OR r.name = $2)
             AND ($3::text IS NULL OR j.testcase = $3) AND ($4::text IS NULL OR b.metric = $4)
           ORDER BY b.id DESC LIMIT $5 OFFSET $6"#,
        f.status,
        f.repository,
        f.testcase,
        f.metric,
        limit,
        offset,
    )
    .fetch_all(db)
    .await
}

/// How many bisects match.
pub async fn count<'e>(db: impl sqlx::PgExecutor<'e>, f: ListFilter<'_>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM bisects b
           WHERE ($1::text IS NULL OR b.status = $1)
             AND ($2::text IS NULL
                  OR b.repository_id IN (SELECT r.id FROM repositories r WHERE r.name = $2))
             AND ($3::text IS NULL
                  OR b.job_spec_id IN (SELECT j.id FROM job_specs j WHERE j.testcase = $3))
             AND ($4::text IS NULL OR b.metric = $4)"#,
        f.status,
        f.repository,
        f.testcase,
        f.metric,
    )
    .fetch_one(db)
    .await
}

/// The list version: moves when a bisect is added or removed or its status, culprit or
/// endpoints change, as those commits end (migration 0028; see `list_cache`).
pub async fn list_version<'e>(db: impl sqlx::PgExecutor<'e>) -> sqlx::Result<i64> {
    sqlx::query_scalar!(r#"SELECT last_value AS "v!" FROM bisect_list_version"#)
        .fetch_one(db)
        .await
}

/// Stores the change the list pages show (`None`: nothing to compare yet).
pub async fn set_measured_change<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    change: Option<&MeasuredChange>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE bisects SET measured_change = $2 WHERE id = $1",
        bisect,
        Json(change) as _,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// The stored belief of one bisect (what its running page shows), if a round wrote one.
pub async fn belief<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
) -> sqlx::Result<Option<Belief>> {
    let b = sqlx::query_scalar!(
        r#"SELECT belief AS "belief: Json<Belief>" FROM bisects WHERE id = $1"#,
        bisect,
    )
    .fetch_optional(db)
    .await?;
    Ok(b.flatten().map(|j| j.0))
}
