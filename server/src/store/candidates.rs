//! `bisect_commits`: a bisect's candidate set and its good endpoint, fixed at submission
//! (the graph: idx, sha, parents; the subjects and authors are in `store::details`).

use crate::git::Range;

/// PostgreSQL's binary COPY: the signature, no flags, no header extension.
const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The OID of `int4`, the element type of `parents`.
const INT4_OID: u32 = 23;

/// One row of the binary COPY: bisect, idx, sha, parents, first parent outside. Binary, so
/// that PostgreSQL parses no text (`int4[]` literals were most of the text COPY's parsing).
fn row(out: &mut Vec<u8>, bisect: i64, idx: i32, sha: &str, parents: &[usize], outside: bool) {
    out.extend_from_slice(&5i16.to_be_bytes());
    out.extend_from_slice(&8i32.to_be_bytes());
    out.extend_from_slice(&bisect.to_be_bytes());
    out.extend_from_slice(&4i32.to_be_bytes());
    out.extend_from_slice(&idx.to_be_bytes());
    out.extend_from_slice(&(sha.len() as i32).to_be_bytes());
    out.extend_from_slice(sha.as_bytes());
    // An array: dimensions, has-nulls, element type, then (one dimension) its length and
    // lower bound, then each element's length and value. An empty array has no dimension.
    let dims = i32::from(!parents.is_empty());
    let len = 12 + 8 * dims + 8 * parents.len() as i32;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&dims.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&INT4_OID.to_be_bytes());
    if dims == 1 {
        out.extend_from_slice(&(parents.len() as i32).to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
    }
    for p in parents {
        out.extend_from_slice(&4i32.to_be_bytes());
        out.extend_from_slice(&(*p as i32).to_be_bytes());
    }
    out.extend_from_slice(&1i32.to_be_bytes());
    out.push(u8::from(outside));
}

/// Stores the good endpoint (idx -1) and every candidate with one COPY in binary format: the
/// fastest way PostgreSQL takes 100,000 rows. Only what scheduling needs (the graph); the
/// subjects and authors go to `bisect_commit_details` (`store::details`). (COPY is not a
/// statement the query macros can check.)
pub async fn insert(tx: &mut sqlx::PgConnection, bisect: i64, range: &Range) -> sqlx::Result<()> {
    let mut copy = tx
        .copy_in_raw(
            "COPY bisect_commits (bisect_id, idx, sha, parents, first_parent_outside)
             FROM STDIN WITH (FORMAT binary)",
        )
        .await?;
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(COPY_HEADER);
    row(&mut buf, bisect, -1, &range.good, &[], false);
    for (i, c) in range.candidates.iter().enumerate() {
        row(
            &mut buf,
            bisect,
            i as i32,
            &c.sha,
            &c.parents,
            c.first_parent_outside,
        );
        if buf.len() > 1 << 20 {
            copy.send(buf.as_slice()).await?;
            buf.clear();
        }
    }
    // The trailer: a field count of -1.
    buf.extend_from_slice(&(-1i16).to_be_bytes());
    copy.send(buf.as_slice()).await?;
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
    fn a_row_is_binary_copy() {
        let mut out = Vec::new();
        super::row(&mut out, 7, 3, "abc", &[1, 2], true);
        let mut want: Vec<u8> = vec![0, 5];
        want.extend([0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 7]);
        want.extend([0, 0, 0, 4, 0, 0, 0, 3]);
        want.extend([0, 0, 0, 3, b'a', b'b', b'c']);
        // int4[]: 12 bytes of header, one dimension (8), two elements (8 each).
        want.extend([
            0, 0, 0, 36, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 2, 0, 0, 0, 1,
        ]);
        want.extend([0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2]);
        want.extend([0, 0, 0, 1, 1]);
        assert_eq!(out, want);
        // An empty array has no dimension.
        out.clear();
        super::row(&mut out, 7, -1, "g", &[], false);
        assert_eq!(
            &out[out.len() - 5 - 12..out.len() - 5],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 23]
        );
    }
}
