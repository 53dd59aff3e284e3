//! Candidate graphs, loaded once per bisect and kept in memory.
//!
//! A bisect's candidate set never changes after submission, and the engine caches its
//! ancestry plan inside the graph, so reloading 100,000 rows and rebuilding the plan after
//! every result would be waste. Each replica keeps its own cache; the database stays the
//! source of truth.

use anyhow::Context;
use perfbisect_engine::{CandidateGraph, Point};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A bisect's graph and the point of every sha in it (good endpoint included).
pub struct LoadedGraph {
    pub graph: CandidateGraph,
    pub points: HashMap<String, Point>,
}

/// Bisects whose graphs are kept; beyond it the cache starts over (graphs are cheap to reload
/// compared to how rarely that happens).
const CAPACITY: usize = 64;

#[derive(Clone, Default)]
pub struct GraphCache {
    inner: Arc<Mutex<HashMap<i64, Arc<LoadedGraph>>>>,
}

impl GraphCache {
    /// The graph of `bisect`, from memory or from `bisect_commits`.
    pub async fn get<'e>(
        &self,
        db: impl sqlx::PgExecutor<'e>,
        bisect: i64,
    ) -> anyhow::Result<Arc<LoadedGraph>> {
        if let Some(g) = self.inner.lock().expect("graph cache lock").get(&bisect) {
            return Ok(g.clone());
        }
        let loaded = Arc::new(load(db, bisect).await?);
        let mut map = self.inner.lock().expect("graph cache lock");
        if map.len() >= CAPACITY {
            map.clear();
        }
        map.insert(bisect, loaded.clone());
        Ok(loaded)
    }

    /// Drops a finished bisect's graph.
    pub fn forget(&self, bisect: i64) {
        self.inner.lock().expect("graph cache lock").remove(&bisect);
    }
}

async fn load<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> anyhow::Result<LoadedGraph> {
    let rows: Vec<(i32, String, Vec<i32>, bool)> = sqlx::query_as(
        "SELECT idx, sha, parents, first_parent_outside FROM bisect_commits WHERE bisect_id = $1 ORDER BY idx",
    )
    .bind(bisect)
    .fetch_all(db)
    .await?;
    let mut points = HashMap::new();
    let mut ids = Vec::new();
    let mut parents = Vec::new();
    let mut outside = Vec::new();
    for (idx, sha, ps, first_parent_outside) in rows {
        if idx < 0 {
            points.insert(sha, Point::Good);
        } else {
            points.insert(sha.clone(), Point::Candidate(idx as usize));
            if first_parent_outside {
                outside.push(idx as usize);
            }
            ids.push(sha);
            parents.push(ps.into_iter().map(|p| p as usize).collect());
        }
    }
    let mut graph = CandidateGraph::new(ids, parents).context("stored candidate graph")?;
    for i in outside {
        graph.mark_first_parent_outside(i);
    }
    Ok(LoadedGraph { graph, points })
}
