//! `repositories`: registered remotes, each with its mirror's state. The fetch bookkeeping
//! (generations, errors, the advisory lock of a fetch) is in `store::fetches`.

use chrono::{DateTime, Utc};
use perfbisect_wire::states::RepoState;
use sqlx::PgPool;

/// A registered repository.
#[derive(Debug, Clone)]
pub struct Repo {
    pub id: i64,
    pub name: String,
    pub url: String,
    pub created_at: DateTime<Utc>,
    pub fetched_at: Option<DateTime<Utc>>,
    /// The web view's commit page, with `{sha}` where the commit goes.
    pub web_url: Option<String>,
    pub state: RepoState,
    pub fetch_error: Option<String>,
    /// The latest fetch generation asked for.
    pub fetch_requested: i64,
}

impl From<Repo> for perfbisect_wire::api::Repository {
    fn from(r: Repo) -> Self {
        perfbisect_wire::api::Repository {
            id: r.id,
            name: r.name,
            url: r.url,
            created_at: r.created_at,
            fetched_at: r.fetched_at,
            web_url: r.web_url,
            state: r.state.as_str().to_string(),
            fetch_error: r.fetch_error,
        }
    }
}

/// The repository registered as `name`.
pub async fn by_name(db: &PgPool, name: &str) -> sqlx::Result<Option<Repo>> {
    sqlx::query_as!(
        Repo,
        r#"SELECT id, name, url, created_at, fetched_at, web_url, state AS "state: RepoState",
                  fetch_error, fetch_requested
           FROM repositories WHERE name = $1"#,
        name,
    )
    .fetch_optional(db)
    .await
}

/// Every registered repository, by name.
pub async fn all(db: &PgPool) -> sqlx::Result<Vec<Repo>> {
    sqlx::query_as!(
        Repo,
        r#"SELECT id, name, url, created_at, fetched_at, web_url, state AS "state: RepoState",
                  fetch_error, fetch_requested
           FROM repositories ORDER BY name"#,
    )
    .fetch_all(db)
    .await
}

/// Registers `name` (as `mirroring`, with its first fetch generation asked for), or asks
/// an already registered one for a fresh fetch. A repository that failed before it was ever
/// mirrored takes the new URL and is mirrored again; a given `web_url` replaces the old one.
pub async fn register(
    db: &PgPool,
    name: &str,
    url: &str,
    web_url: Option<&str>,
) -> sqlx::Result<Repo> {
    sqlx::query_as!(
        Repo,
        r#"INSERT INTO repositories (name, url, web_url, state, fetch_requested)
           VALUES ($1, $2, $3, 'mirroring', 1)
           ON CONFLICT (name) DO UPDATE SET
               fetch_requested = repositories.fetch_requested + 1,
               url = CASE WHEN repositories.state = 'failed' AND repositories.fetched_at IS NULL
                          THEN EXCLUDED.url ELSE repositories.url END,
               state = CASE WHEN repositories.state = 'failed' THEN 'mirroring' ELSE repositories.state END,
               web_url = COALESCE(EXCLUDED.web_url, repositories.web_url)
           RETURNING id, name, url, created_at, fetched_at, web_url, state AS "state: RepoState",
                     fetch_error, fetch_requested"#,
        name,
        url,
        web_url,
    )
    .fetch_one(db)
    .await
}

/// The id of the repository registered as `name`.
pub async fn id_by_name(db: &PgPool, name: &str) -> sqlx::Result<Option<i64>> {
    sqlx::query_scalar!("SELECT id FROM repositories WHERE name = $1", name)
        .fetch_optional(db)
        .await
}

/// Every registered repository's name, sorted.
pub async fn names(db: &PgPool) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!("SELECT name FROM repositories ORDER BY name")
        .fetch_all(db)
        .await
}

/// The repositories whose mirror is not ready: name, state, fetch error.
pub async fn not_ready(db: &PgPool) -> sqlx::Result<Vec<(String, RepoState, Option<String>)>> {
    let rows = sqlx::query!(
        r#"SELECT name, state AS "state: RepoState", fetch_error FROM repositories
           WHERE state <> 'ready' ORDER BY name"#,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.name, r.state, r.fetch_error))
        .collect())
}

/// The fetch URL and web view template of the bisect's repository.
pub async fn of_bisect(db: &PgPool, bisect: i64) -> sqlx::Result<(String, Option<String>)> {
    let r = sqlx::query!(
        "SELECT r.url, r.web_url FROM bisects b JOIN repositories r ON r.id = b.repository_id
         WHERE b.id = $1",
        bisect,
    )
    .fetch_one(db)
    .await?;
    Ok((r.url, r.web_url))
}
