//! `kconfigs`: kernel configs by name, immutable once stored (a job names its config, and
//! its hash must keep meaning the same measurement).

use sqlx::PgPool;

/// What storing a config under a name did.
#[derive(Debug, PartialEq, Eq)]
pub enum Stored {
    /// The name was free: the config is stored now.
    New,
    /// The name holds a config with this SHA-256, stored before (the same one or another).
    Existing { sha256: String },
}

/// Stores `content` under `name` unless the name is taken; never overwrites.
pub async fn store(db: &PgPool, name: &str, content: &str, sha256: &str) -> sqlx::Result<Stored> {
    let inserted = sqlx::query!(
        "INSERT INTO kconfigs (name, content, sha256) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
        name,
        content,
        sha256,
    )
    .execute(db)
    .await?;
    if inserted.rows_affected() == 1 {
        return Ok(Stored::New);
    }
    let sha256 = sqlx::query_scalar!("SELECT sha256 FROM kconfigs WHERE name = $1", name)
        .fetch_one(db)
        .await?;
    Ok(Stored::Existing { sha256 })
}

/// The config stored under `name`.
pub async fn content(db: &PgPool, name: &str) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!("SELECT content FROM kconfigs WHERE name = $1", name)
        .fetch_optional(db)
        .await
}

/// Is a config stored under `name`?
pub async fn exists(db: &PgPool, name: &str) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM kconfigs WHERE name = $1) AS "found!""#,
        name
    )
    .fetch_one(db)
    .await?;
    Ok(found)
}
