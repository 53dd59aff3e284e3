//! `bisects`: one search over one range for one job and metric, with its status.

use sqlx::PgPool;

/// Is there a bisect with this id?
pub async fn exists(db: &PgPool, id: i64) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM bisects WHERE id = $1) AS "found!""#,
        id
    )
    .fetch_one(db)
    .await?;
    Ok(found)
}
