//! `api_tokens`: the API's tokens, stored only as SHA-256 hashes (`auth::hash_token`), with
//! their kind (the role they grant) and where they came from (`startup` or `api`).

use chrono::{DateTime, Utc};
use perfbisect_wire::states::TokenKind;
use sqlx::PgPool;

/// A token as operators list it; never its value, which is not stored.
#[derive(Debug)]
pub struct TokenRow {
    pub id: i64,
    pub name: String,
    pub kind: TokenKind,
    /// `startup` (given to the server at start) or `api` (made through the API).
    pub source: String,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Stores a token of `kind` unless a token with the same hash is already stored.
pub async fn ensure(db: &PgPool, kind: TokenKind, name: &str, hash: &str) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO api_tokens (name, kind, token_hash) VALUES ($1, $2, $3)
         ON CONFLICT (token_hash) DO NOTHING",
        name,
        kind.as_str(),
        hash,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Makes the token with `hash` the startup token of `kind` (valid again if it had been
/// revoked) and revokes every other startup token of that kind, in one transaction; returns
/// how many it revoked. Tokens made through the API are not touched.
pub async fn replace_startup(db: &PgPool, kind: TokenKind, hash: &str) -> sqlx::Result<u64> {
    let mut tx = db.begin().await?;
    sqlx::query!(
        "INSERT INTO api_tokens (name, kind, token_hash, source) VALUES ('startup', $1, $2, 'startup')
         ON CONFLICT (token_hash) DO UPDATE SET revoked_at = NULL
         WHERE api_tokens.kind = EXCLUDED.kind AND api_tokens.source = 'startup'",
        kind.as_str(),
        hash,
    )
    .execute(&mut *tx)
    .await?;
    let revoked = sqlx::query!(
        "UPDATE api_tokens SET revoked_at = now()
         WHERE kind = $1 AND source = 'startup' AND token_hash <> $2 AND revoked_at IS NULL",
        kind.as_str(),
        hash,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(revoked)
}

/// The valid (not revoked) token with this hash: its id and kind.
pub async fn valid(db: &PgPool, hash: &str) -> sqlx::Result<Option<(i64, TokenKind)>> {
    let row = sqlx::query!(
        r#"SELECT id, kind AS "kind: TokenKind" FROM api_tokens
           WHERE token_hash = $1 AND revoked_at IS NULL"#,
        hash,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.id, r.kind)))
}

/// Is `hash` any token that may read: an API token of a reading role, or a worker's?
/// (Enrollment tokens only register workers.)
pub async fn may_read(db: &PgPool, hash: &str) -> sqlx::Result<bool> {
    let found = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM api_tokens
                          WHERE token_hash = $1 AND revoked_at IS NULL AND kind <> 'enroll')
               OR EXISTS (SELECT 1 FROM hosts WHERE token_hash = $1) AS "found!""#,
        hash,
    )
    .fetch_one(db)
    .await?;
    Ok(found)
}

/// Stores a token made through the API.
pub async fn create(
    db: &PgPool,
    name: &str,
    kind: TokenKind,
    hash: &str,
) -> sqlx::Result<TokenRow> {
    sqlx::query_as!(
        TokenRow,
        r#"INSERT INTO api_tokens (name, kind, token_hash, source) VALUES ($1, $2, $3, 'api')
           RETURNING id, name, kind AS "kind: TokenKind", source, created_at, revoked_at"#,
        name,
        kind.as_str(),
        hash,
    )
    .fetch_one(db)
    .await
}

/// Every token, newest first.
pub async fn all(db: &PgPool) -> sqlx::Result<Vec<TokenRow>> {
    sqlx::query_as!(
        TokenRow,
        r#"SELECT id, name, kind AS "kind: TokenKind", source, created_at, revoked_at
           FROM api_tokens ORDER BY id DESC"#,
    )
    .fetch_all(db)
    .await
}

/// Revokes a token (a revoked one keeps its first revocation time); `None`: no such token.
pub async fn revoke(db: &PgPool, id: i64) -> sqlx::Result<Option<TokenRow>> {
    sqlx::query_as!(
        TokenRow,
        r#"UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1
           RETURNING id, name, kind AS "kind: TokenKind", source, created_at, revoked_at"#,
        id,
    )
    .fetch_optional(db)
    .await
}
