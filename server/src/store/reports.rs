//! What a report reads (`report_input`): a bisect with its repository and job, its commits,
//! its runs with their tasks' commits, the machine of a host, the watch that found it, and
//! other found bisects of the same culprit. Reads only.

use sqlx::PgConnection;

/// A bisect as its report needs it.
#[derive(Debug)]
pub struct ReportBisect {
    pub repository: String,
    pub repository_id: i64,
    pub url: String,
    pub bad_rev: String,
    pub good_rev: String,
    pub good_sha: String,
    pub bad_sha: String,
    pub metric: String,
    pub status: String,
    pub status_reason: Option<String>,
    pub culprit_sha: Option<String>,
    pub culprit_confidence: Option<f64>,
    pub confidence: f64,
    pub assessments: serde_json::Value,
    pub notify: serde_json::Value,
    pub spec: serde_json::Value,
    pub testcase: String,
    pub findings: Option<serde_json::Value>,
    pub direction: Option<String>,
    pub max_runs: i32,
    pub runs_done: i64,
}

pub async fn bisect(conn: &mut PgConnection, id: i64) -> sqlx::Result<Option<ReportBisect>> {
    sqlx::query_as!(
        ReportBisect,
        r#"SELECT r.name AS repository, r.id AS repository_id, r.url, b.bad_rev, b.good_rev,
                  b.good_sha, b.bad_sha, b.metric, b.status, b.status_reason, b.culprit_sha,
                  b.culprit_confidence, b.confidence, b.assessments, b.notify, j.spec, j.testcase,
                  b.findings, b.direction, b.max_runs,
                  (SELECT count(*) FROM runs WHERE bisect_id = b.id) AS "runs_done!"
           FROM bisects b JOIN repositories r ON r.id = b.repository_id
           JOIN job_specs j ON j.id = b.job_spec_id
           WHERE b.id = $1"#,
        id,
    )
    .fetch_optional(conn)
    .await
}

/// A commit of the bisect's candidate set (or its good endpoint, idx -1).
#[derive(Debug)]
pub struct ReportCommit {
    pub idx: i32,
    pub sha: String,
    pub parents: Vec<i32>,
    pub subject: String,
    pub author: String,
}

/// Every commit of the bisect's graph (`store::candidates::graph`) with its subject and
/// author (empty where its details are missing).
pub async fn commits(conn: &mut PgConnection, bisect: i64) -> sqlx::Result<Vec<ReportCommit>> {
    let graph = super::candidates::graph(&mut *conn, bisect).await?;
    let mut details: std::collections::HashMap<i32, (String, String)> = sqlx::query!(
        "SELECT idx, subject, author FROM bisect_commit_details WHERE bisect_id = $1",
        bisect,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|d| (d.idx, (d.subject, d.author)))
    .collect();
    Ok(graph
        .into_iter()
        .map(|c| {
            let (subject, author) = details.remove(&c.idx).unwrap_or_default();
            ReportCommit {
                idx: c.idx,
                sha: c.sha,
                parents: c.parents,
                subject,
                author,
            }
        })
        .collect())
}

/// A run with its task's commits and every metric it produced.
#[derive(Debug)]
pub struct ReportRun {
    pub sha: String,
    pub task_sha: String,
    pub pair_sha: Option<String>,
    pub host_id: i64,
    pub completed: bool,
    pub metrics: serde_json::Value,
}

pub async fn runs(conn: &mut PgConnection, bisect: i64) -> sqlx::Result<Vec<ReportRun>> {
    sqlx::query_as!(
        ReportRun,
        "SELECT r.sha, t.sha AS task_sha, t.pair_sha, r.host_id, r.completed, r.metrics
         FROM runs r JOIN tasks t ON t.id = r.task_id
         WHERE r.bisect_id = $1 ORDER BY r.task_id, r.iteration",
        bisect,
    )
    .fetch_all(conn)
    .await
}

/// The watch change that opened the bisect: watch, branch, the heads before and after.
pub async fn found_by(
    conn: &mut PgConnection,
    bisect: i64,
) -> sqlx::Result<Option<(String, String, String, String)>> {
    let row = sqlx::query!(
        r#"SELECT w.name, c.ref_name, hb.sha AS before, ha.sha AS after FROM watch_changes c
           JOIN watches w ON w.id = c.watch_id
           JOIN watch_heads hb ON hb.id = c.before_head_id
           JOIN watch_heads ha ON ha.id = c.after_head_id
           WHERE c.bisect_id = $1 AND c.action = 'bisecting' ORDER BY c.id LIMIT 1"#,
        bisect,
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.name, r.ref_name, r.before, r.after)))
}

/// The machine the bisect's runs on `host` saw from inside, else what the worker
/// registered with.
pub async fn machine(
    conn: &mut PgConnection,
    bisect: i64,
    host: i64,
) -> sqlx::Result<Option<serde_json::Value>> {
    let json = sqlx::query_scalar!(
        "SELECT COALESCE(
             (SELECT environment->'machine' FROM runs
              WHERE bisect_id = $2 AND host_id = $1 AND environment ? 'machine'
              ORDER BY id DESC LIMIT 1),
             (SELECT machine FROM hosts WHERE id = $1))",
        host,
        bisect,
    )
    .fetch_optional(conn)
    .await?;
    Ok(json.flatten())
}

/// Other found bisects of `culprit` with another testcase, at most `limit`, oldest first.
pub async fn same_culprit(
    conn: &mut PgConnection,
    culprit: &str,
    besides: i64,
    testcase: &str,
    limit: i64,
) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!(
        "SELECT b.id FROM bisects b JOIN job_specs j ON j.id = b.job_spec_id
         WHERE b.status = 'found' AND b.culprit_sha = $1 AND b.id <> $2 AND j.testcase <> $3
         ORDER BY b.id LIMIT $4",
        culprit,
        besides,
        testcase,
        limit,
    )
    .fetch_all(conn)
    .await
}
