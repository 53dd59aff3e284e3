//! `bisect_commits`: a bisect's candidate set and its good endpoint, fixed at submission
//! (the graph: idx, sha, parents; the subjects and authors are in `store::details`).

use crate::git::Range;
use std::fmt::Write;

/// One row: bisect, idx, sha, parents, first parent outside.
struct Row<'a> {
    idx: i64,
    sha: &'a str,
    parents: &'a [usize],
    first_parent_outside: bool,
}

fn row(out: &mut String, bisect: i64, r: &Row<'_>) {
    let _ = write!(out, "{bisect}\t{}\t{}\t{{", r.idx, r.sha);
    for (i, p) in r.parents.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{p}");
    }
    out.push_str(if r.first_parent_outside {
        "}\tt\n"
    } else {
        "}\tf\n"
    });
}

/// Stores the good endpoint (idx -1) and every candidate with one COPY: the fastest way
/// PostgreSQL takes 100,000 rows. Only what scheduling needs (the graph); the subjects and
/// authors go to `bisect_commit_details` (`store::details`). (COPY is not a statement the
/// query macros can check.)
pub async fn insert(tx: &mut sqlx::PgConnection, bisect: i64, range: &Range) -> sqlx::Result<()> {
    let mut copy = tx
        .copy_in_raw(
            "COPY bisect_commits (bisect_id, idx, sha, parents, first_parent_outside)
             FROM STDIN WITH (FORMAT text)",
        )
        .await?;
    let mut buf = String::with_capacity(1 << 20);
    let good = Row {
        idx: -1,
        sha: &range.good,
        parents: &[],
        first_parent_outside: false,
    };
    row(&mut buf, bisect, &good);
    for (i, c) in range.candidates.iter().enumerate() {
        let r = Row {
            idx: i as i64,
            sha: &c.sha,
            parents: &c.parents,
            first_parent_outside: c.first_parent_outside,
        };
        row(&mut buf, bisect, &r);
        if buf.len() > 1 << 20 {
            copy.send(buf.as_bytes()).await?;
            buf.clear();
        }
    }
    copy.send(buf.as_bytes()).await?;
    copy.finish().await?;
    Ok(())
}

/// One stored commit of a bisect's graph, as the engine's graph is rebuilt from it.
#[derive(Debug)]
pub struct GraphRow {
    /// -1 for the good endpoint, else the candidate's index (parents first).
    pub idx: i32,
    pub sha: String,
    /// Indexes of the candidate's parents within the set.
    pub parents: Vec<i32>,
    pub first_parent_outside: bool,
}

/// The good endpoint and every candidate, by index.
pub async fn graph<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> sqlx::Result<Vec<GraphRow>> {
    sqlx::query_as!(
        GraphRow,
        "SELECT idx, sha, parents, first_parent_outside FROM bisect_commits
         WHERE bisect_id = $1 ORDER BY idx",
        bisect,
    )
    .fetch_all(db)
    .await
}

/// Every candidate's commit, by index (the good endpoint left out).
pub async fn shas(db: &sqlx::PgPool, bisect: i64) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        "SELECT sha FROM bisect_commits WHERE bisect_id = $1 AND idx >= 0 ORDER BY idx",
        bisect,
    )
    .fetch_all(db)
    .await
}

// Lookups by sha go through `bisect_commit_details` and its hash index once the bisect's
// details are stored; while they are missing (`bisects.details_missing`, for the moment
// after a submit), through `bisect_commits` along its primary key: one bisect's rows.
// Either way gives the same commits, whichever order the flag and the fill's commit come in.

/// The subjects of the bisect's commits among `shas` (none while its details are missing:
/// `store::details`).
pub async fn subjects(
    db: &sqlx::PgPool,
    bisect: i64,
    shas: &[String],
) -> sqlx::Result<std::collections::HashMap<String, String>> {
    let rows = sqlx::query!(
        "SELECT sha, subject FROM bisect_commit_details WHERE bisect_id = $1 AND sha = ANY($2)",
        bisect,
        shas,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.sha, r.subject)).collect())
}

/// The good endpoint and the candidates among `shas`: index, commit, subject, author
/// (empty while the bisect's details are missing: `store::details`).
pub async fn shown(
    db: &sqlx::PgPool,
    bisect: i64,
    shas: &[&str],
) -> sqlx::Result<Vec<(i32, String, String, String)>> {
    if super::details::is_missing(db, bisect).await? {
        let rows = sqlx::query!(
            "SELECT idx, sha FROM bisect_commits
             WHERE bisect_id = $1 AND (idx < 0 OR sha = ANY($2)) ORDER BY idx",
            bisect,
            shas as &[&str],
        )
        .fetch_all(db)
        .await?;
        return Ok(rows
            .into_iter()
            .map(|r| (r.idx, r.sha, String::new(), String::new()))
            .collect());
    }
    let rows = sqlx::query!(
        "SELECT idx, sha, subject, author FROM bisect_commit_details
         WHERE bisect_id = $1 AND (idx < 0 OR sha = ANY($2)) ORDER BY idx",
        bisect,
        shas as &[&str],
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.idx, r.sha, r.subject, r.author))
        .collect())
}

/// How many candidates the bisect has (for rows stored before `candidates_total`).
pub async fn count(db: &sqlx::PgPool, bisect: i64) -> sqlx::Result<i64> {
    let n = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM bisect_commits WHERE bisect_id = $1 AND idx >= 0"#,
        bisect,
    )
    .fetch_one(db)
    .await?;
    Ok(n)
}

/// The first parent of `sha` within the bisect's candidate set, or the good endpoint.
pub async fn first_parent(
    db: &mut sqlx::PgConnection,
    bisect: i64,
    sha: &str,
) -> sqlx::Result<Option<String>> {
    if super::details::is_missing(&mut *db, bisect).await? {
        return sqlx::query_scalar!(
            "SELECT p.sha FROM bisect_commits c JOIN bisect_commits p
               ON p.bisect_id = c.bisect_id AND p.idx = c.parents[1]
             WHERE c.bisect_id = $1 AND c.sha = $2",
            bisect,
            sha,
        )
        .fetch_optional(db)
        .await;
    }
    sqlx::query_scalar!(
        "SELECT p.sha FROM bisect_commit_details d
         JOIN bisect_commits c ON c.bisect_id = d.bisect_id AND c.idx = d.idx
         JOIN bisect_commits p ON p.bisect_id = c.bisect_id AND p.idx = c.parents[1]
         WHERE d.bisect_id = $1 AND d.sha = $2",
        bisect,
        sha,
    )
    .fetch_optional(db)
    .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_row_is_copy_text() {
        let mut out = String::new();
        let r = super::Row {
            idx: 3,
            sha: "abc",
            parents: &[1, 2],
            first_parent_outside: true,
        };
        super::row(&mut out, 7, &r);
        assert_eq!(out, "7\t3\tabc\t{1,2}\tt\n");
    }
}
