//! Migrations that move stored data, run against a real PostgreSQL: what was stored before
//! comes out the same after.

use perfbisect_server::{db, store};

type Row = (i64, i32, String, Vec<i32>, bool);

/// Every commit of bisects 5 and 6, one row a commit, by bisect and idx.
async fn rows(pool: &sqlx::PgPool) -> Vec<Row> {
    sqlx::query_as(
        "SELECT bisect_id, idx, sha, parents, first_parent_outside FROM bisect_commits
         WHERE bisect_id IN (5, 6) ORDER BY bisect_id, idx",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Migration 0025 moves graphs stored one row a commit into chunks of 1,000: every commit
/// keeps its idx, sha, parents (merges and commits without parents in the set included)
/// and first-parent flag, read through the view and through the server's own reads.
#[tokio::test]
async fn graphs_stored_a_row_a_commit_move_into_chunks_whole() {
    let url = perfbisect_server::pg::testing::fresh_database()
        .await
        .unwrap();
    let pool = db::connect(&url).await.unwrap();
    db::MIGRATOR.run_to(24, &pool).await.unwrap();
    // Bisect 5: 2,500 candidates over three chunks, a merge every seventh, a first parent
    // outside every eleventh, the first candidate without parents in the set. Bisect 6: a
    // good endpoint and two candidates without parents in the set.
    sqlx::query(
        "INSERT INTO bisect_commits (bisect_id, idx, sha, parents, first_parent_outside)
         SELECT 5, i, md5(i::text), CASE WHEN i <= 0 THEN '{}'::int[]
                                         WHEN i % 7 = 0 AND i > 3 THEN ARRAY[i - 1, i - 3]
                                         ELSE ARRAY[i - 1] END,
                i % 11 = 0
         FROM generate_series(-1, 2499) i
         UNION ALL
         SELECT 6, i, md5('six' || i), '{}', false FROM generate_series(-1, 1) i",
    )
    .execute(&pool)
    .await
    .unwrap();
    let before = rows(&pool).await;
    assert_eq!(before.len(), 2501 + 3);
    db::MIGRATOR.run(&pool).await.unwrap();

    assert_eq!(rows(&pool).await, before, "through the view");
    for bisect in [5, 6] {
        let graph: Vec<Row> = store::candidates::graph(&pool, bisect)
            .await
            .unwrap()
            .into_iter()
            .map(|c| (bisect, c.idx, c.sha, c.parents, c.first_parent_outside))
            .collect();
        let want: Vec<&Row> = before.iter().filter(|r| r.0 == bisect).collect();
        assert_eq!(graph.iter().collect::<Vec<_>>(), want, "bisect {bisect}");
    }
    let chunks: Vec<(i64, i32)> = sqlx::query_as(
        "SELECT bisect_id, first_idx FROM bisect_graph_chunks ORDER BY bisect_id, first_idx",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(chunks, [(5, -1), (5, 999), (5, 1999), (6, -1)]);
    // One commit by idx, at a chunk's edges and past the end.
    for (idx, want) in [
        (998, Some(998)),
        (999, Some(999)),
        (2499, Some(2499)),
        (2500, None),
    ] {
        let got: Option<(String, Vec<i32>)> =
            sqlx::query_as("SELECT sha, parents FROM bisect_commit_at(5, $1)")
                .bind(idx)
                .fetch_optional(&pool)
                .await
                .unwrap();
        let want = want.map(|i| {
            let r = before.iter().find(|r| r.0 == 5 && r.1 == i).unwrap();
            (r.2.clone(), r.3.clone())
        });
        assert_eq!(got, want, "idx {idx}");
    }
}
