//! `watch_bisects`: one bisect per (repository, job, range), the key that changes of other
//! metrics and other watches with the same range find their bisect by.

use sqlx::PgConnection;

/// A range of a job in a repository: the commits reachable from `bad_sha` and not from
/// `good_sha`.
#[derive(Debug, Clone, Copy)]
pub struct Range<'a> {
    pub repository_id: i64,
    pub job_spec_id: i64,
    pub good_sha: &'a str,
    pub bad_sha: &'a str,
}

/// Locks the range's row (storing it first if it is new) until the transaction ends, and
/// returns the bisect already opened for it.
pub async fn lock(tx: &mut PgConnection, r: Range<'_>) -> sqlx::Result<Option<i64>> {
    sqlx::query!(
        "INSERT INTO watch_bisects (repository_id, job_spec_id, good_sha, bad_sha)
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        r.repository_id,
        r.job_spec_id,
        r.good_sha,
        r.bad_sha,
    )
    .execute(&mut *tx)
    .await?;
    sqlx::query_scalar!(
        "SELECT bisect_id FROM watch_bisects
         WHERE repository_id = $1 AND job_spec_id = $2 AND good_sha = $3 AND bad_sha = $4
         FOR UPDATE",
        r.repository_id,
        r.job_spec_id,
        r.good_sha,
        r.bad_sha,
    )
    .fetch_one(tx)
    .await
}

/// Records `bisect` as the one of the range, so a later change of the same range links to it.
pub async fn link(tx: &mut PgConnection, r: Range<'_>, bisect: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE watch_bisects SET bisect_id = $5
         WHERE repository_id = $1 AND job_spec_id = $2 AND good_sha = $3 AND bad_sha = $4",
        r.repository_id,
        r.job_spec_id,
        r.good_sha,
        r.bad_sha,
        bisect,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A bisect opened for a watched range, with its range.
#[derive(Debug)]
pub struct Opened {
    pub id: i64,
    pub good_sha: String,
    pub bad_sha: String,
}

/// The bisects opened for watched ranges of this repository and job that may still answer
/// a change: not failed, cancelled or ended not reproduced, and past their fetch (a range
/// resolved); in id order.
pub async fn answering(
    tx: &mut PgConnection,
    repository: i64,
    job_spec: i64,
) -> sqlx::Result<Vec<Opened>> {
    sqlx::query_as!(
        Opened,
        "SELECT b.id, b.good_sha, b.bad_sha FROM watch_bisects wb
         JOIN bisects b ON b.id = wb.bisect_id
         WHERE wb.repository_id = $1 AND wb.job_spec_id = $2
           AND b.status NOT IN ('failed', 'cancelled', 'not_reproduced') AND b.good_sha <> ''
         ORDER BY b.id",
        repository,
        job_spec,
    )
    .fetch_all(tx)
    .await
}
