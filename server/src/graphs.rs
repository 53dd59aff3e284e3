//! Candidate graphs, loaded once per bisect and kept in memory while the bisect is active.
//!
//! A bisect's candidate set never changes after submission, and the engine caches its
//! ancestry plan inside the graph, so reloading 100,000 rows and rebuilding the plan after
//! every result would be waste. Each replica keeps its own cache; the database stays the
//! source of truth. The cache is least-recently-used under a memory budget (a graph is
//! estimated by its size), so it holds the active bisects a replica works on rather than a
//! fixed count; a graph is dropped when its bisect ends.

use anyhow::Context;
use perfbisect_engine::{CandidateGraph, Point};
use perfbisect_wire::states::Verdict;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The candidates' assessments as last written to `bisect_assessments` (see
/// `assessing`), with the round they belong to.
#[derive(Debug, Clone)]
pub struct AssessedCopy {
    pub round: i64,
    pub values: Vec<(Verdict, Option<f32>)>,
}

/// A bisect's graph and the point of every sha in it (good endpoint included).
pub struct LoadedGraph {
    pub graph: CandidateGraph,
    pub points: HashMap<String, Point>,
    /// Taken by the advance that holds the bisect's lock, put back after it wrote.
    pub assessed: Mutex<Option<AssessedCopy>>,
}

impl LoadedGraph {
    /// Builds the graph from the candidates in order (parents first): (sha, candidate parents,
    /// first parent outside the range).
    pub fn build(
        good: String,
        candidates: impl IntoIterator<Item = (String, Vec<usize>, bool)>,
    ) -> anyhow::Result<Self> {
        let mut points = HashMap::new();
        points.insert(good, Point::Good);
        let mut ids = Vec::new();
        let mut parents = Vec::new();
        let mut outside = Vec::new();
        for (i, (sha, ps, first_parent_outside)) in candidates.into_iter().enumerate() {
            points.insert(sha.clone(), Point::Candidate(i));
            if first_parent_outside {
                outside.push(i);
            }
            ids.push(sha);
            parents.push(ps);
        }
        let mut graph = CandidateGraph::new(ids, parents).context("candidate graph")?;
        for i in outside {
            graph.mark_first_parent_outside(i);
        }
        Ok(LoadedGraph {
            graph,
            points,
            assessed: Mutex::new(None),
        })
    }

    /// Rough bytes held: shas twice (graph and map), the map entry, parents, the engine's
    /// per-candidate plan and the assessed copy.
    pub fn estimated_bytes(&self) -> usize {
        self.graph.len() * 400 + 4096
    }
}

/// Default memory budget of the cache (`PERFBISECT_GRAPH_CACHE_MB` overrides it).
pub const DEFAULT_BUDGET_MB: usize = 1024;

struct Inner {
    lru: lru::LruCache<i64, Arc<LoadedGraph>>,
    bytes: usize,
    budget: usize,
}

#[derive(Clone)]
pub struct GraphCache {
    inner: Arc<Mutex<Inner>>,
}

impl Default for GraphCache {
    fn default() -> Self {
        let mb = std::env::var("PERFBISECT_GRAPH_CACHE_MB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(DEFAULT_BUDGET_MB);
        GraphCache::with_budget(mb << 20)
    }
}

impl GraphCache {
    pub fn with_budget(budget_bytes: usize) -> Self {
        GraphCache {
            inner: Arc::new(Mutex::new(Inner {
                lru: lru::LruCache::unbounded(),
                bytes: 0,
                budget: budget_bytes,
            })),
        }
    }

    /// The graph of `bisect`, from memory or from `bisect_commits`.
    pub async fn get<'e>(
        &self,
        db: impl sqlx::PgExecutor<'e>,
        bisect: i64,
    ) -> anyhow::Result<Arc<LoadedGraph>> {
        if let Some(g) = self
            .inner
            .lock()
            .expect("graph cache lock")
            .lru
            .get(&bisect)
        {
            return Ok(g.clone());
        }
        let loaded = Arc::new(load(db, bisect).await?);
        self.insert(bisect, loaded.clone());
        Ok(loaded)
    }

    /// Keeps a graph built elsewhere (the submission already has the candidates in memory).
    pub fn insert(&self, bisect: i64, graph: Arc<LoadedGraph>) {
        let mut inner = self.inner.lock().expect("graph cache lock");
        inner.bytes += graph.estimated_bytes();
        if let Some(old) = inner.lru.put(bisect, graph) {
            inner.bytes -= old.estimated_bytes();
        }
        // The least recently used go first; the graph just added always stays.
        while inner.bytes > inner.budget && inner.lru.len() > 1 {
            match inner.lru.pop_lru() {
                Some((_, g)) => inner.bytes -= g.estimated_bytes(),
                None => break,
            }
        }
    }

    /// Drops a finished bisect's graph and gives its memory back to the system.
    pub fn forget(&self, bisect: i64) {
        let removed = {
            let mut inner = self.inner.lock().expect("graph cache lock");
            let removed = inner.lru.pop(&bisect);
            if let Some(g) = &removed {
                inner.bytes -= g.estimated_bytes();
            }
            removed
        };
        if let Some(g) = removed {
            let large = g.graph.len() >= 10_000;
            drop(g);
            if large {
                trim_heap();
            }
        }
    }

    /// Graphs held and their estimated bytes (for `/metrics`).
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.inner.lock().expect("graph cache lock");
        (inner.lru.len(), inner.bytes)
    }
}

/// glibc keeps freed memory in its arenas; a large graph's worth is handed back explicitly so
/// the server's size returns after a large bisect ends.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

async fn load<'e>(db: impl sqlx::PgExecutor<'e>, bisect: i64) -> anyhow::Result<LoadedGraph> {
    let rows = crate::store::candidates::graph(db, bisect).await?;
    let mut good = None;
    let mut candidates = Vec::with_capacity(rows.len());
    for r in rows {
        if r.idx < 0 {
            good = Some(r.sha);
        } else {
            candidates.push((
                r.sha,
                r.parents.into_iter().map(|p| p as usize).collect(),
                r.first_parent_outside,
            ));
        }
    }
    let good = good.context("stored candidate graph has no good endpoint")?;
    LoadedGraph::build(good, candidates).context("stored candidate graph")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: usize) -> Arc<LoadedGraph> {
        let candidates = (0..n).map(|i| {
            (
                format!("{i:040x}"),
                if i == 0 { vec![] } else { vec![i - 1] },
                false,
            )
        });
        Arc::new(LoadedGraph::build("g".repeat(40), candidates).unwrap())
    }

    #[test]
    fn the_least_recently_used_graph_leaves_when_the_budget_is_spent() {
        let one = chain(100).estimated_bytes();
        let cache = GraphCache::with_budget(one * 2);
        cache.insert(1, chain(100));
        cache.insert(2, chain(100));
        // Touch 1, so 2 is the least recently used when 3 arrives.
        assert!(cache.inner.lock().unwrap().lru.get(&1).is_some());
        cache.insert(3, chain(100));
        let inner = cache.inner.lock().unwrap();
        assert!(inner.lru.contains(&1) && inner.lru.contains(&3) && !inner.lru.contains(&2));
        assert_eq!(inner.bytes, one * 2);
    }

    #[test]
    fn forgetting_a_graph_returns_its_budget() {
        let cache = GraphCache::with_budget(1 << 30);
        cache.insert(1, chain(10));
        cache.forget(1);
        assert_eq!(cache.usage(), (0, 0));
    }
}
