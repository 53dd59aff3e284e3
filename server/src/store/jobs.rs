//! `job_specs`: one row per canonical hash.

/// The id of the job spec with `hash`, storing it first if it is new. `DO NOTHING` takes no
/// lock on an existing row, so concurrent submits of the same job do not wait for each other.
pub async fn ensure<'e, E: sqlx::PgExecutor<'e> + Copy>(
    db: E,
    hash: &str,
    spec: &serde_json::Value,
    yaml: &str,
    testcase: &str,
    tbox_group: &str,
) -> sqlx::Result<i64> {
    let inserted = sqlx::query_scalar!(
        "INSERT INTO job_specs (hash, spec, yaml, testcase, tbox_group) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (hash) DO NOTHING RETURNING id",
        hash,
        spec,
        yaml,
        testcase,
        tbox_group,
    )
    .fetch_optional(db)
    .await?;
    match inserted {
        Some(id) => Ok(id),
        None => {
            sqlx::query_scalar!("SELECT id FROM job_specs WHERE hash = $1", hash)
                .fetch_one(db)
                .await
        }
    }
}

/// The metric names complete runs of this job hash produced, sorted (from its latest runs).
pub async fn metric_names(db: &sqlx::PgPool, job_hash: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"SELECT DISTINCT k AS "k!" FROM (
             SELECT r.metrics FROM runs r JOIN bisects b ON b.id = r.bisect_id
             JOIN job_specs j ON j.id = b.job_spec_id
             WHERE j.hash = $1 AND r.completed ORDER BY r.id DESC LIMIT 50) recent,
           LATERAL jsonb_object_keys(recent.metrics) AS k ORDER BY k"#,
        job_hash,
    )
    .fetch_all(db)
    .await
}

/// What a bisect's mail attaches: its job spec as submitted, and the kernel config the job
/// names, when one is stored under that name.
#[derive(Debug)]
pub struct Attachments {
    pub yaml: String,
    pub kconfig_name: Option<String>,
    pub kconfig: Option<String>,
}

pub async fn attachments(db: &sqlx::PgPool, bisect: i64) -> sqlx::Result<Option<Attachments>> {
    sqlx::query_as!(
        Attachments,
        r#"SELECT j.yaml, k.name AS "kconfig_name?", k.content AS "kconfig?" FROM bisects b
           JOIN job_specs j ON j.id = b.job_spec_id
           LEFT JOIN kconfigs k ON k.name = j.spec ->> 'kconfig'
           WHERE b.id = $1"#,
        bisect,
    )
    .fetch_optional(db)
    .await
}

/// Like `ensure`, in a transaction: stores the job spec unless its hash is known, and
/// returns its id either way (one statement; the row it finds is locked until the
/// transaction ends).
pub async fn ensure_in(
    tx: &mut sqlx::PgConnection,
    hash: &str,
    spec: &serde_json::Value,
    yaml: &str,
    testcase: &str,
    tbox_group: &str,
) -> sqlx::Result<i64> {
    sqlx::query_scalar!(
        "INSERT INTO job_specs (hash, spec, yaml, testcase, tbox_group) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (hash) DO UPDATE SET hash = EXCLUDED.hash RETURNING id",
        hash,
        spec,
        yaml,
        testcase,
        tbox_group,
    )
    .fetch_one(tx)
    .await
}

/// Every testcase of a stored job, sorted (the list page's filter).
pub async fn testcases(db: &sqlx::PgPool) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!("SELECT DISTINCT testcase FROM job_specs ORDER BY testcase")
        .fetch_all(db)
        .await
}

/// The job spec with this canonical hash, as first submitted.
pub async fn yaml_by_hash(db: &sqlx::PgPool, hash: &str) -> sqlx::Result<Option<String>> {
    sqlx::query_scalar!("SELECT yaml FROM job_specs WHERE hash = $1", hash)
        .fetch_optional(db)
        .await
}
