//! `bisect_mail_options`: a bisect's threading, Reply-To and extra headers, set by its
//! submitter until its mail is frozen.

use sqlx::PgPool;

/// The stored options: in-reply-to, reply-to, extra headers as `[[name, value], ...]`.
#[derive(Debug)]
pub struct Stored {
    pub in_reply_to: Option<String>,
    pub reply_to: Option<String>,
    pub headers: serde_json::Value,
}

pub async fn get(db: &PgPool, bisect: i64) -> sqlx::Result<Option<Stored>> {
    sqlx::query_as!(
        Stored,
        "SELECT in_reply_to, reply_to, headers FROM bisect_mail_options WHERE bisect_id = $1",
        bisect,
    )
    .fetch_optional(db)
    .await
}

pub async fn put(
    db: &PgPool,
    bisect: i64,
    in_reply_to: Option<&str>,
    reply_to: Option<&str>,
    headers: &serde_json::Value,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO bisect_mail_options (bisect_id, in_reply_to, reply_to, headers)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (bisect_id) DO UPDATE SET in_reply_to = $2, reply_to = $3, headers = $4,
             updated_at = now()",
        bisect,
        in_reply_to,
        reply_to,
        headers,
    )
    .execute(db)
    .await?;
    Ok(())
}
