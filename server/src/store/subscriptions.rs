//! `subscriptions`: who else gets mail, by repository, testcase or metric glob.

use crate::notify::recipients::Subscription;
use sqlx::PgPool;

/// What a new subscription holds (validated by the API).
pub struct NewSubscription<'a> {
    pub email: &'a str,
    pub repository: Option<&'a str>,
    pub testcase: Option<&'a str>,
    pub metric: Option<&'a str>,
    pub events: &'a [String],
    pub created_by: i64,
}

pub async fn create(db: &PgPool, new: NewSubscription<'_>) -> sqlx::Result<Subscription> {
    sqlx::query_as!(
        Subscription,
        "INSERT INTO subscriptions (email, repository, testcase, metric, events, created_by)
         VALUES ($1, $2, $3, $4, $5, $6)
         RETURNING id, email, repository, testcase, metric, events, created_at",
        new.email,
        new.repository,
        new.testcase,
        new.metric,
        new.events,
        new.created_by,
    )
    .fetch_one(db)
    .await
}

/// Every subscription, oldest first.
pub async fn all(db: &PgPool) -> sqlx::Result<Vec<Subscription>> {
    sqlx::query_as!(
        Subscription,
        "SELECT id, email, repository, testcase, metric, events, created_at
         FROM subscriptions ORDER BY id",
    )
    .fetch_all(db)
    .await
}

/// Deletes a subscription; false when there was none with this id.
pub async fn delete(db: &PgPool, id: i64) -> sqlx::Result<bool> {
    let done = sqlx::query!("DELETE FROM subscriptions WHERE id = $1", id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() > 0)
}
