//! A repository's fetch state (`repositories.state`, generations, last error) and the
//! bisects waiting for a fetch (`bisects.status = 'fetching'`).

use perfbisect_wire::states::{BisectStatus, RepoState};
use sqlx::PgExecutor;

/// The two-key advisory lock space of repository fetches: `(FETCH_LOCK_CLASS, repo_id)`.
/// Distinct from the one-key locks of bisects (`pg_advisory_xact_lock(bisect_id)`).
pub const FETCH_LOCK_CLASS: i32 = 0x6665_7463; // "fetc"

/// What a fetch job needs to know about a repository.
#[derive(Debug, Clone)]
pub struct FetchState {
    pub url: String,
    pub state: RepoState,
    pub fetch_requested: i64,
    pub fetch_done: i64,
    pub fetch_error: Option<String>,
}

pub async fn get<'e>(db: impl PgExecutor<'e>, repo: i64) -> sqlx::Result<Option<FetchState>> {
    sqlx::query_as!(
        FetchState,
        r#"SELECT url, state AS "state: RepoState", fetch_requested, fetch_done, fetch_error
           FROM repositories WHERE id = $1"#,
        repo,
    )
    .fetch_optional(db)
    .await
}

/// Asks for a fetch: returns the generation that answers it.
pub async fn request<'e>(db: impl PgExecutor<'e>, repo: i64) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        "UPDATE repositories SET fetch_requested = fetch_requested + 1 WHERE id = $1
         RETURNING fetch_requested",
        repo,
    )
    .fetch_one(db)
    .await
}

/// Records the end of the fetch of `generation`: `ready` after success; after a failure,
/// `failed` if the repository was never mirrored, else it stays `ready` (its mirror still
/// serves) with the error shown.
pub async fn finished<'e>(
    db: impl PgExecutor<'e>,
    repo: i64,
    generation: i64,
    error: Option<&str>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE repositories SET fetch_done = GREATEST(fetch_done, $2), fetch_error = $3,
             fetched_at = CASE WHEN $3::text IS NULL THEN now() ELSE fetched_at END,
             state = CASE WHEN $3::text IS NULL THEN 'ready'
                          WHEN state = 'mirroring' THEN 'failed' ELSE state END
         WHERE id = $1",
        repo,
        generation,
        error,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A bisect waiting for its repository's fetch.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub id: i64,
    pub good_rev: String,
    pub bad_rev: String,
    pub use_merge_base: bool,
}

/// The bisects of `repo` whose fetch (a generation up to `done`) has ended.
pub async fn waiting<'e>(
    db: impl PgExecutor<'e>,
    repo: i64,
    done: i64,
) -> sqlx::Result<Vec<Waiting>> {
    sqlx::query_as!(
        Waiting,
        "SELECT id, good_rev, bad_rev, use_merge_base FROM bisects
         WHERE repository_id = $1 AND status = 'fetching' AND fetch_generation <= $2 ORDER BY id",
        repo,
        done,
    )
    .fetch_all(db)
    .await
}

/// Repositories with a fetch to run or waiting bisects to resolve: what a replica that
/// restarted (or outlived another) picks up. Each with the generation to reach.
pub async fn pending<'e>(db: impl PgExecutor<'e>) -> sqlx::Result<Vec<(i64, i64)>> {
    let rows = sqlx::query!(
        "SELECT r.id, r.fetch_requested FROM repositories r
         WHERE r.fetch_requested > r.fetch_done
            OR EXISTS (SELECT 1 FROM bisects b WHERE b.repository_id = r.id
                       AND b.status = 'fetching' AND b.fetch_generation <= r.fetch_done)
         ORDER BY r.id",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.fetch_requested))
        .collect())
}

/// Tries to take the session advisory lock of `repo`'s fetch on `conn`, a connection of the
/// fetch job's own: it is released when that connection closes, so a job that dies frees it.
pub async fn try_lock(conn: &mut sqlx::PgConnection, repo: i64) -> sqlx::Result<bool> {
    let locked = sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_lock($1, $2::int4) AS "locked!""#,
        FETCH_LOCK_CLASS,
        repo as i32,
    )
    .fetch_one(conn)
    .await?;
    Ok(locked)
}

/// Locks the waiting bisect for its resolution; false when it no longer waits (cancelled).
pub async fn lock_waiting(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<bool> {
    super::wakeups::lock_bisect(&mut *tx, bisect).await?;
    let status = sqlx::query_scalar!(
        r#"SELECT status AS "status: BisectStatus" FROM bisects WHERE id = $1 FOR NO KEY UPDATE"#,
        bisect,
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(status == Some(BisectStatus::Fetching))
}

/// The resolved range of a waiting bisect: its commits and candidate count; it is `queued`.
pub async fn resolved(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    good_sha: &str,
    bad_sha: &str,
    candidates: usize,
) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE bisects SET good_sha = $2, bad_sha = $3, candidates_total = $4, status = 'queued',
             updated_at = now()
         WHERE id = $1",
        bisect,
        good_sha,
        bad_sha,
        candidates as i32,
    )
    .execute(tx)
    .await?;
    Ok(())
}
