//! `bisect_commit_details`: each commit of a bisect (by `idx`, as in its graph) with
//! its sha, subject and author, found by sha through its hash index; and
//! `bisects.details_missing`, set while they are not stored yet. `server::details` fills them.

use crate::git::Range;

/// The two-key advisory lock space of details fills: `(DETAILS_LOCK_CLASS, bisect_id)`.
/// Distinct from the one-key locks of advances, so a fill never holds up a decision.
pub const DETAILS_LOCK_CLASS: i32 = 0x6465_7461; // "deta"

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

/// One row: bisect, idx, sha, subject, author.
fn row(out: &mut String, bisect: i64, idx: i64, sha: &str, subject: &str, author: &str) {
    use std::fmt::Write;
    let _ = write!(out, "{bisect}\t{idx}\t{sha}\t");
    copy_text(out, subject);
    out.push('\t');
    copy_text(out, author);
    out.push('\n');
}

/// Opens the COPY of a bisect's details. (COPY is not a statement the query macros can
/// check.)
async fn open_copy(
    tx: &mut sqlx::PgConnection,
) -> sqlx::Result<sqlx::postgres::PgCopyIn<&mut sqlx::PgConnection>> {
    tx.copy_in_raw(
        "COPY bisect_commit_details (bisect_id, idx, sha, subject, author)
         FROM STDIN WITH (FORMAT text)",
    )
    .await
}

/// Stores the details a range holds already (the good endpoint's and every candidate's).
pub async fn insert(tx: &mut sqlx::PgConnection, bisect: i64, range: &Range) -> sqlx::Result<()> {
    let mut copy = open_copy(tx).await?;
    let mut buf = String::with_capacity(1 << 20);
    let (good, subject, author) = (&range.good, &range.good_subject, &range.good_author);
    row(&mut buf, bisect, -1, good, subject, author);
    for (i, c) in range.candidates.iter().enumerate() {
        row(&mut buf, bisect, i as i64, &c.sha, &c.subject, &c.author);
        if buf.len() > 1 << 20 {
            copy.send(buf.as_bytes()).await?;
            buf.clear();
        }
    }
    copy.send(buf.as_bytes()).await?;
    copy.finish().await?;
    Ok(())
}

/// Stores details as they are read: batches of (sha, subject, author) in index order from
/// idx -1 (the good endpoint) on. Returns how many rows were stored: fewer than the bisect has
/// when `details` ended early (the caller must not commit).
pub async fn insert_streamed(
    tx: &mut sqlx::PgConnection,
    bisect: i64,
    mut details: tokio::sync::mpsc::Receiver<Vec<(String, String, String)>>,
) -> sqlx::Result<usize> {
    let mut copy = open_copy(tx).await?;
    let mut buf = String::with_capacity(1 << 20);
    let mut n = 0usize;
    while let Some(batch) = details.recv().await {
        for (sha, subject, author) in &batch {
            row(&mut buf, bisect, n as i64 - 1, sha, subject, author);
            n += 1;
        }
        if buf.len() > 1 << 19 {
            copy.send(buf.as_bytes()).await?;
            buf.clear();
        }
    }
    copy.send(buf.as_bytes()).await?;
    copy.finish().await?;
    Ok(n)
}

/// Waits for the lock of bisect `id`'s fill, for the rest of the transaction.
pub async fn lock(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock($1, $2::int4)",
        DETAILS_LOCK_CLASS,
        bisect as i32,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Tries to take the lock of bisect `id`'s fill, for the rest of the transaction.
pub async fn try_lock(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<bool> {
    sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_xact_lock($1, $2::int4) AS "locked!""#,
        DETAILS_LOCK_CLASS,
        bisect as i32,
    )
    .fetch_one(tx)
    .await
}

/// A bisect whose details are missing: where to read them.
#[derive(Debug)]
pub struct Missing {
    pub repository_id: i64,
    pub url: String,
}

/// Where bisect `id`'s details are to be read from, if they are missing.
pub async fn missing(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<Option<Missing>> {
    sqlx::query_as!(
        Missing,
        "SELECT b.repository_id, r.url FROM bisects b JOIN repositories r ON r.id = b.repository_id
         WHERE b.id = $1 AND b.details_missing",
        bisect,
    )
    .fetch_optional(tx)
    .await
}

/// Every bisect whose details are missing, oldest first.
pub async fn all_missing(db: &sqlx::PgPool) -> sqlx::Result<Vec<i64>> {
    sqlx::query_scalar!("SELECT id FROM bisects WHERE details_missing ORDER BY id")
        .fetch_all(db)
        .await
}

/// Whether bisect `id`'s details are missing.
pub async fn is_missing<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> sqlx::Result<bool> {
    let missing = sqlx::query_scalar!("SELECT details_missing FROM bisects WHERE id = $1", bisect)
        .fetch_optional(db)
        .await?;
    Ok(missing.unwrap_or(false))
}

/// The commits whose details are read, by idx from -1 (the good endpoint) on.
pub async fn commits(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"SELECT s.sha AS "sha!" FROM bisect_graph_chunks g,
                  unnest(g.shas) WITH ORDINALITY AS s (sha, o)
           WHERE g.bisect_id = $1 ORDER BY g.first_idx, s.o"#,
        bisect,
    )
    .fetch_all(tx)
    .await
}

/// Marks the details stored (in the transaction that stored them).
pub async fn filled(tx: &mut sqlx::PgConnection, bisect: i64) -> sqlx::Result<()> {
    sqlx::query!(
        "UPDATE bisects SET details_missing = false WHERE id = $1",
        bisect
    )
    .execute(tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn rows_escape_what_copy_would_misread() {
        let mut out = String::new();
        super::row(
            &mut out,
            7,
            3,
            "abc",
            "fix\ttab\\path\nnext\rend",
            "A <a@b>",
        );
        assert_eq!(out, "7\t3\tabc\tfix\\ttab\\\\path\\nnext\\rend\tA <a@b>\n");
    }
}
