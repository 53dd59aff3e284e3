//! `bisect_events`: each bisect's story, one line per step (submitted, measure, budget, the
//! final status, ...). Written by the scheduler, the queue, the fetcher and the API alike.

/// Records a line of the bisect's story.
pub async fn record<'e>(
    db: impl sqlx::PgExecutor<'e>,
    bisect: i64,
    kind: &str,
    message: &str,
) -> sqlx::Result<()> {
    sqlx::query("INSERT INTO bisect_events (bisect_id, kind, message) VALUES ($1, $2, $3)")
        .bind(bisect)
        .bind(kind)
        .bind(message)
        .execute(db)
        .await?;
    Ok(())
}
