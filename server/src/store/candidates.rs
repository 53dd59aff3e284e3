//! `bisect_graph_chunks`: a bisect's candidate set and its good endpoint, fixed at
//! submission (the graph: idx, sha, parents; the subjects and authors are in
//! `store::details`). Stored 1,000 commits a row: migration 0025 says why and how a chunk is
//! laid out. The server reads the chunks themselves (unnested once each); the view
//! `bisect_commits`, one row a commit, is for people and tests.

use crate::git::Range;

/// Commits a chunk row holds. Readers find a commit's chunk by its rows' `first_idx` (the
/// last chunk starting at or before the commit's idx), never by arithmetic on this size.
const CHUNK: usize = 1000;
/// PostgreSQL's binary COPY: the signature, no flags, no header extension.
const COPY_HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The OIDs of the arrays' element types.
const BOOL_OID: u32 = 16;
const INT4_OID: u32 = 23;
const TEXT_OID: u32 = 25;

/// One array field of the binary COPY: its length, then dimensions, has-nulls, element
/// type, (one dimension) its length and lower bound, then each element's length and value.
/// An empty array has no dimension.
fn array<T>(out: &mut Vec<u8>, oid: u32, items: &[T], mut value: impl FnMut(&mut Vec<u8>, &T)) {
    let at = out.len();
    out.extend_from_slice(&0i32.to_be_bytes());
    let dims = i32::from(!items.is_empty());
    out.extend_from_slice(&dims.to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&oid.to_be_bytes());
    if dims == 1 {
        out.extend_from_slice(&(items.len() as i32).to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
    }
    for item in items {
        value(out, item);
    }
    let len = (out.len() - at - 4) as i32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// One commit as a chunk holds it.
struct Commit<'a> {
    sha: &'a str,
    parents: &'a [usize],
    outside: bool,
}

/// One chunk row of the binary COPY: bisect, first idx, shas, parents one after another,
/// whose commit each parent is, first parent outside.
fn chunk_row(out: &mut Vec<u8>, bisect: i64, first_idx: i32, commits: &[Commit]) {
    out.extend_from_slice(&6i16.to_be_bytes());
    out.extend_from_slice(&8i32.to_be_bytes());
    out.extend_from_slice(&bisect.to_be_bytes());
    out.extend_from_slice(&4i32.to_be_bytes());
    out.extend_from_slice(&first_idx.to_be_bytes());
    array(out, TEXT_OID, commits, |out, c| {
        out.extend_from_slice(&(c.sha.len() as i32).to_be_bytes());
        out.extend_from_slice(c.sha.as_bytes());
    });
    let parents: Vec<i32> = commits
        .iter()
        .flat_map(|c| c.parents.iter().map(|&p| p as i32))
        .collect();
    array(out, INT4_OID, &parents, |out, p| {
        out.extend_from_slice(&4i32.to_be_bytes());
        out.extend_from_slice(&p.to_be_bytes());
    });
    // The position (1-based) in the chunk of the commit each parent belongs to.
    let parent_of: Vec<i32> = (1..)
        .zip(commits)
        .flat_map(|(o, c)| std::iter::repeat_n(o, c.parents.len()))
        .collect();
    array(out, INT4_OID, &parent_of, |out, o| {
        out.extend_from_slice(&4i32.to_be_bytes());
        out.extend_from_slice(&o.to_be_bytes());
    });
    array(out, BOOL_OID, commits, |out, c| {
        out.extend_from_slice(&1i32.to_be_bytes());
        out.push(u8::from(c.outside));
    });
}

/// Stores the good endpoint (idx -1) and every candidate, 1,000 a row, with one COPY in
/// binary format. Only what scheduling needs (the graph); the subjects and authors go to
/// `bisect_commit_details` (`store::details`). (COPY is not a statement the query macros
/// can check.)
pub async fn insert(tx: &mut sqlx::PgConnection, bisect: i64, range: &Range) -> sqlx::Result<()> {
    let commits: Vec<Commit> = std::iter::once(Commit {
        sha: &range.good,
        parents: &[],
        outside: false,
    })
    .chain(range.candidates.iter().map(|c| Commit {
        sha: &c.sha,
        parents: &c.parents,
        outside: c.first_parent_outside,
    }))
    .collect();
    let mut copy = tx
        .copy_in_raw(
            "COPY bisect_graph_chunks
                 (bisect_id, first_idx, shas, parents, parent_of, first_parent_outside)
             FROM STDIN WITH (FORMAT binary)",
        )
        .await?;
    let mut buf = Vec::with_capacity(1 << 20);
    buf.extend_from_slice(COPY_HEADER);
    for (k, chunk) in commits.chunks(CHUNK).enumerate() {
        chunk_row(&mut buf, bisect, -1 + (k * CHUNK) as i32, chunk);
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

/// A chunk row as stored (migration 0025).
struct ChunkRow {
    first_idx: i32,
    shas: Vec<String>,
    parents: Vec<i32>,
    parent_of: Vec<i32>,
    first_parent_outside: Vec<bool>,
}

impl ChunkRow {
    /// The chunk's commits, one row each, in idx order.
    fn commits(self) -> impl Iterator<Item = GraphRow> {
        let mut parents: Vec<Vec<i32>> = vec![Vec::new(); self.shas.len()];
        for (p, o) in self.parents.into_iter().zip(self.parent_of) {
            if let Some(own) = usize::try_from(o - 1).ok().and_then(|o| parents.get_mut(o)) {
                own.push(p);
            }
        }
        let first = self.first_idx;
        self.shas
            .into_iter()
            .zip(parents)
            .zip(self.first_parent_outside)
            .zip(first..)
            .map(|(((sha, parents), first_parent_outside), idx)| GraphRow {
                idx,
                sha,
                parents,
                first_parent_outside,
            })
    }
}

/// The good endpoint and every candidate, by index. The chunks are read as stored and
/// unnested here: for 100,000 commits psql reads them in 25-36 ms, the view
/// `bisect_commits` (the same in SQL) in 220 ms.
pub async fn graph<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> sqlx::Result<Vec<GraphRow>> {
    let chunks = sqlx::query_as!(
        ChunkRow,
        "SELECT first_idx, shas, parents, parent_of, first_parent_outside
         FROM bisect_graph_chunks WHERE bisect_id = $1 ORDER BY first_idx",
        bisect,
    )
    .fetch_all(db)
    .await?;
    Ok(chunks.into_iter().flat_map(ChunkRow::commits).collect())
}

/// Every candidate's commit, by index (the good endpoint left out).
pub async fn shas(db: &sqlx::PgPool, bisect: i64) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"SELECT s.sha AS "sha!" FROM bisect_graph_chunks g,
                  unnest(g.shas) WITH ORDINALITY AS s (sha, o)
           WHERE g.bisect_id = $1 AND g.first_idx + s.o > 0 ORDER BY g.first_idx, s.o"#,
        bisect,
    )
    .fetch_all(db)
    .await
}

// Lookups by sha go through `bisect_commit_details` and its hash index once the bisect's
// details are stored; while they are missing (`bisects.details_missing`, for the moment
// after a submit), through the bisect's chunks along their primary key.
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
            r#"SELECT (g.first_idx + s.o - 1)::INTEGER AS "idx!", s.sha AS "sha!"
               FROM bisect_graph_chunks g, unnest(g.shas) WITH ORDINALITY AS s (sha, o)
               WHERE g.bisect_id = $1 AND (g.first_idx + s.o - 1 < 0 OR s.sha = ANY($2))
               ORDER BY 1"#,
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
        r#"SELECT coalesce(sum(cardinality(shas)), 1) - 1 AS "n!" FROM bisect_graph_chunks
           WHERE bisect_id = $1"#,
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
            "SELECT p.sha FROM bisect_graph_chunks g,
                    unnest(g.shas) WITH ORDINALITY AS s (sha, o),
                    LATERAL bisect_commit_at(g.bisect_id, (g.first_idx + s.o - 1)::INTEGER) c,
                    LATERAL bisect_commit_at(g.bisect_id, c.parents[1]) p
             WHERE g.bisect_id = $1 AND s.sha = $2",
            bisect,
            sha,
        )
        .fetch_optional(db)
        .await
        .map(Option::flatten);
    }
    // Each idx read from its chunk (`bisect_commit_at`).
    sqlx::query_scalar!(
        "SELECT p.sha FROM bisect_commit_details d,
                LATERAL bisect_commit_at(d.bisect_id, d.idx) c,
                LATERAL bisect_commit_at(d.bisect_id, c.parents[1]) p
         WHERE d.bisect_id = $1 AND d.sha = $2",
        bisect,
        sha,
    )
    .fetch_optional(db)
    .await
    .map(Option::flatten)
}

#[cfg(test)]
mod tests {
    use super::Commit;

    #[test]
    fn a_chunk_is_one_binary_copy_row() {
        let mut out = Vec::new();
        let commits = [
            Commit {
                sha: "abc",
                parents: &[1, 2],
                outside: true,
            },
            Commit {
                sha: "d",
                parents: &[],
                outside: false,
            },
        ];
        super::chunk_row(&mut out, 7, -1, &commits);
        let mut want: Vec<u8> = vec![0, 6];
        want.extend([0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 7]);
        want.extend([0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff]);
        // Each array: its length, 12 bytes of header (one dimension, no nulls, the element
        // type), the dimension's length and lower bound (8), then length and value of each
        // element.
        let head = |len: u8, oid: u8, n: u8| {
            [
                0, 0, 0, len, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, oid, 0, 0, 0, n, 0, 0, 0, 1,
            ]
        };
        want.extend(head(20 + 7 + 5, 25, 2));
        want.extend([0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 1, b'd']);
        want.extend(head(20 + 16, 23, 2));
        want.extend([0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2]);
        // Both parents are the first commit's (position 1).
        want.extend(head(20 + 16, 23, 2));
        want.extend([0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1]);
        want.extend(head(20 + 10, 16, 2));
        want.extend([0, 0, 0, 1, 1, 0, 0, 0, 1, 0]);
        assert_eq!(out, want);
    }

    #[test]
    fn an_empty_array_has_no_dimension() {
        let mut out = Vec::new();
        super::array::<i32>(&mut out, super::INT4_OID, &[], |_, _| {});
        assert_eq!(out, [0, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 23]);
    }
}
