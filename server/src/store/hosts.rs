//! `hosts`: registered workers, each with its host group, token hash and signs of life.

use sqlx::PgPool;

/// The host holding the worker token with `hash`: its id and host group. Refreshes its
/// `last_seen_at` when that is older than `seen_every_secs`: every worker request is a sign
/// of life, but writing each one would cost a commit per request and tell nobody anything new
/// (liveness windows are minutes).
pub async fn authenticate(
    db: &PgPool,
    hash: &str,
    seen_every_secs: f64,
) -> sqlx::Result<Option<(i64, String)>> {
    let row = sqlx::query!(
        r#"WITH h AS (SELECT id, host_group, last_seen_at FROM hosts WHERE token_hash = $1),
                seen AS (UPDATE hosts SET last_seen_at = now() FROM h
                         WHERE hosts.id = h.id AND h.last_seen_at < now() - make_interval(secs => $2))
           SELECT id AS "id!", host_group AS "host_group!" FROM h"#,
        hash,
        seen_every_secs,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.id, r.host_group)))
}
