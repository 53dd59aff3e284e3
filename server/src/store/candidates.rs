//! `bisect_commits`: a bisect's candidate set and its good endpoint, fixed at submission.

use crate::git::Range;
use std::fmt::Write;

/// COPY text format: backslash, tab, newline and carriage return are escaped.
fn copy_text(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

/// One row: bisect, idx, sha, parents, subject, author, first parent outside.
struct Row<'a> {
    idx: i64,
    sha: &'a str,
    parents: &'a [usize],
    subject: &'a str,
    author: &'a str,
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
    out.push_str("}\t");
    copy_text(out, r.subject);
    out.push('\t');
    copy_text(out, r.author);
    out.push_str(if r.first_parent_outside {
        "\tt\n"
    } else {
        "\tf\n"
    });
}

/// Opens the COPY of a candidate set, with the good endpoint's row (idx -1) written.
/// (COPY is not a statement the query macros can check.)
async fn open_copy<'c>(
    tx: &'c mut sqlx::PgConnection,
    bisect: i64,
    range: &Range,
) -> sqlx::Result<(sqlx::postgres::PgCopyIn<&'c mut sqlx::PgConnection>, String)> {
    let copy = tx
        .copy_in_raw(
            "COPY bisect_commits (bisect_id, idx, sha, parents, subject, author, first_parent_outside)
             FROM STDIN WITH (FORMAT text)",
        )
        .await?;
    let mut buf = String::with_capacity(1 << 20);
    let good = Row {
        idx: -1,
        sha: &range.good,
        parents: &[],
        subject: &range.good_subject,
        author: &range.good_author,
        first_parent_outside: false,
    };
    row(&mut buf, bisect, &good);
    Ok((copy, buf))
}

/// Candidate `i`'s row, with its subject and author.
fn candidate(buf: &mut String, bisect: i64, range: &Range, i: usize, subject: &str, author: &str) {
    let c = &range.candidates[i];
    let r = Row {
        idx: i as i64,
        sha: &c.sha,
        parents: &c.parents,
        subject,
        author,
        first_parent_outside: c.first_parent_outside,
    };
    row(buf, bisect, &r);
}

/// Stores the good endpoint (idx -1) and every candidate with one COPY: the fastest way
/// PostgreSQL takes 100,000 rows.
pub async fn insert(tx: &mut sqlx::PgConnection, bisect: i64, range: &Range) -> sqlx::Result<()> {
    let (mut copy, mut buf) = open_copy(tx, bisect, range).await?;
    for (i, c) in range.candidates.iter().enumerate() {
        candidate(&mut buf, bisect, range, i, &c.subject, &c.author);
        if buf.len() > 1 << 20 {
            copy.send(buf.as_bytes()).await?;
            buf.clear();
        }
    }
    copy.send(buf.as_bytes()).await?;
    copy.finish().await?;
    Ok(())
}

/// `insert` while the candidates' subjects and authors are still being read: they arrive
/// in index order, in batches, from `details`, and each batch is sent on as COPY rows, so
/// reading the commits and storing them overlap. Returns how many candidates were stored:
/// fewer than the range holds when `details` ended early (the caller must not commit).
pub async fn insert_streamed(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    range: &Range,
    mut details: tokio::sync::mpsc::Receiver<Vec<(String, String)>>,
) -> sqlx::Result<usize> {
    let (mut copy, mut buf) = open_copy(tx, bisect, range).await?;
    let mut i = 0;
    while let Some(batch) = details.recv().await {
        for (subject, author) in batch.iter().take(range.candidates.len() - i) {
            candidate(&mut buf, bisect, range, i, subject, author);
            i += 1;
        }
        if buf.len() > 1 << 19 {
            copy.send(buf.as_bytes()).await?;
            buf.clear();
        }
    }
    copy.send(buf.as_bytes()).await?;
    copy.finish().await?;
    Ok(i)
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

/// The subjects of the bisect's commits among `shas`.
pub async fn subjects(
    db: &sqlx::PgPool,
    bisect: i64,
    shas: &[String],
) -> sqlx::Result<std::collections::HashMap<String, String>> {
    let rows = sqlx::query!(
        "SELECT sha, subject FROM bisect_commits WHERE bisect_id = $1 AND sha = ANY($2)",
        bisect,
        shas,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.sha, r.subject)).collect())
}

/// The good endpoint and the candidates among `shas`: index, commit, subject, author.
pub async fn shown(
    db: &sqlx::PgPool,
    bisect: i64,
    shas: &[&str],
) -> sqlx::Result<Vec<(i32, String, String, String)>> {
    let rows = sqlx::query!(
        "SELECT idx, sha, subject, author FROM bisect_commits
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
    sqlx::query_scalar!(
        "SELECT p.sha FROM bisect_commits c JOIN bisect_commits p
           ON p.bisect_id = c.bisect_id AND p.idx = c.parents[1]
         WHERE c.bisect_id = $1 AND c.sha = $2",
        bisect,
        sha,
    )
    .fetch_optional(db)
    .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn rows_escape_what_copy_would_misread() {
        let mut out = String::new();
        let r = super::Row {
            idx: 3,
            sha: "abc",
            parents: &[1, 2],
            subject: "fix\ttab\\path\nnext",
            author: "A <a@b>",
            first_parent_outside: true,
        };
        super::row(&mut out, 7, &r);
        assert_eq!(
            out,
            "7\t3\tabc\t{1,2}\tfix\\ttab\\\\path\\nnext\tA <a@b>\tt\n"
        );
    }
}
