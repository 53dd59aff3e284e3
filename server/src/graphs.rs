//! Candidate graphs, loaded once per bisect and kept in memory while the bisect is active.
//!
//! A bisect's candidate set never changes after submission, and the engine caches its
//! ancestry plan inside the graph, so reloading 100,000 rows and rebuilding the plan after
//! every result would be waste. Each replica keeps its own cache; the database stays the
//! source of truth. The cache is least-recently-used under a memory budget (a graph is
//! estimated by its size), so it holds the active bisects a replica works on rather than a
//! fixed count; a graph is dropped when its bisect ends. A large graph gives its memory back
//! to the system when it is freed, that is when its last holder lets go of it (the cache, or
//! the advance that was using it), not when the cache forgets it.

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
    /// Last, so it runs after the fields above are freed (fields drop in order).
    _release: Release,
}

/// Candidates from which a graph's memory is handed back to the system once it is freed.
pub const TRIM_FROM: usize = 10_000;

/// Hands freed memory back to the system when the graph that owned it is dropped, if the
/// graph was large: glibc keeps freed memory in its arenas, so without this the server's
/// size after a large bisect stays where the bisect took it.
struct Release {
    large: bool,
    trim: fn(),
}

impl Drop for Release {
    fn drop(&mut self) {
        if self.large {
            (self.trim)();
        }
    }
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
        let large = graph.len() >= TRIM_FROM;
        Ok(LoadedGraph {
            graph,
            points,
            assessed: Mutex::new(None),
            _release: Release {
                large,
                trim: crate::heap::trim,
            },
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

    /// The graph of `bisect`, from memory or from its stored chunks.
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
        let mut out = Vec::new();
        let mut inner = self.inner.lock().expect("graph cache lock");
        inner.bytes += graph.estimated_bytes();
        if let Some(old) = inner.lru.put(bisect, graph) {
            inner.bytes -= old.estimated_bytes();
            out.push(old);
        }
        // The least recently used go first; the graph just added always stays.
        while inner.bytes > inner.budget && inner.lru.len() > 1 {
            match inner.lru.pop_lru() {
                Some((_, g)) => {
                    inner.bytes -= g.estimated_bytes();
                    out.push(g);
                }
                None => break,
            }
        }
        // Freed (and maybe trimmed) outside the lock.
        drop(inner);
        drop(out);
    }

    /// Drops a finished bisect's graph. Its memory goes back to the system when the last
    /// holder lets go (the advance that ended the bisect still holds it here).
    pub fn forget(&self, bisect: i64) {
        let removed = {
            let mut inner = self.inner.lock().expect("graph cache lock");
            let removed = inner.lru.pop(&bisect);
            if let Some(g) = &removed {
                inner.bytes -= g.estimated_bytes();
            }
            removed
        };
        // Outside the lock: the last holder's drop may trim the heap.
        drop(removed);
    }

    /// Graphs held and their estimated bytes (for `/metrics`).
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.inner.lock().expect("graph cache lock");
        (inner.lru.len(), inner.bytes)
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

    /// A chain of `n` candidates whose release is counted in `counter` instead of trimming.
    fn counted_chain(n: usize, counter: fn()) -> Arc<LoadedGraph> {
        let mut g = chain(n);
        Arc::get_mut(&mut g).expect("only holder")._release.trim = counter;
        g
    }

    #[test]
    fn a_large_graph_is_released_when_its_last_holder_lets_go() {
        static RELEASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn count() {
            RELEASED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let released = || RELEASED.load(std::sync::atomic::Ordering::SeqCst);
        let cache = GraphCache::with_budget(1 << 30);
        let graph = counted_chain(TRIM_FROM, count);
        cache.insert(7, graph.clone());
        // The advance that ends the bisect holds the graph while the cache forgets it.
        let advance = graph;
        cache.forget(7);
        assert_eq!(
            cache.usage(),
            (0, 0),
            "an ended bisect's graph leaves the cache"
        );
        assert_eq!(
            released(),
            0,
            "nothing is freed while the advance holds the graph"
        );
        let weak = Arc::downgrade(&advance);
        drop(advance);
        assert!(weak.upgrade().is_none(), "nobody else holds it");
        assert_eq!(
            released(),
            1,
            "freed with the last holder, and then handed back"
        );
    }

    #[test]
    fn a_small_graph_is_freed_without_a_trim() {
        static RELEASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn count() {
            RELEASED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let cache = GraphCache::with_budget(1 << 30);
        cache.insert(1, counted_chain(TRIM_FROM - 1, count));
        cache.forget(1);
        assert_eq!(cache.usage(), (0, 0));
        assert_eq!(RELEASED.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn an_evicted_large_graph_is_released_too() {
        static RELEASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn count() {
            RELEASED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let one = chain(TRIM_FROM).estimated_bytes();
        let cache = GraphCache::with_budget(one);
        cache.insert(1, counted_chain(TRIM_FROM, count));
        cache.insert(2, counted_chain(TRIM_FROM, count));
        assert_eq!(cache.usage(), (1, one), "the first went over the budget");
        assert_eq!(RELEASED.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn forgetting_a_graph_returns_its_budget() {
        let cache = GraphCache::with_budget(1 << 30);
        cache.insert(1, chain(10));
        cache.forget(1);
        assert_eq!(cache.usage(), (0, 0));
    }
}
