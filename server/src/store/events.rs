//! `bisect_events`: each bisect's story, one line per step (submitted, measure, budget, the
//! final status, ...). Written by the scheduler, the queue, the fetcher and the API alike.

/// Records a line of the bisect's story.
pub async fn record<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    kind: &str,
    message: &str,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO bisect_events (bisect_id, kind, message) VALUES ($1, $2, $3)",
        bisect,
        kind,
        message,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// One line of a bisect's story.
#[derive(Debug)]
pub struct Line {
    pub at: chrono::DateTime<chrono::Utc>,
    pub kind: String,
    pub message: String,
}

/// The bisect's story, oldest first.
pub async fn of_bisect(db: &sqlx::PgPool, bisect: i64) -> sqlx::Result<Vec<Line>> {
    sqlx::query_as!(
        Line,
        "SELECT at, kind, message FROM bisect_events WHERE bisect_id = $1 ORDER BY id",
        bisect,
    )
    .fetch_all(db)
    .await
}

/// The bisect's latest `limit` lines, newest first.
pub async fn latest(db: &sqlx::PgPool, bisect: i64, limit: i64) -> sqlx::Result<Vec<Line>> {
    sqlx::query_as!(
        Line,
        "SELECT at, kind, message FROM bisect_events WHERE bisect_id = $1 ORDER BY id DESC LIMIT $2",
        bisect,
        limit,
    )
    .fetch_all(db)
    .await
}
