//! The list pages' cache (`GET /bisects`, `GET /api/v1/bisects`): every open dashboard tab
//! polls its list, and a page costs a count over every matching bisect and a join over the
//! page's rows (about 1 ms of PostgreSQL's time with 10,000 bisects stored, so 50 readers
//! at once queued behind each other on 2 cores).
//!
//! A cached page is served while two things hold:
//! - **The list version has not moved** (`store::summaries::list_version`, one sequence
//!   read per request). It moves when a bisect is added or removed or its status, culprit or
//!   endpoints change, on whichever replica, as that commit ends (migration 0028). A new
//!   bisect or a finished one is therefore on the next page any replica serves.
//! - **It is younger than the age limit** (`--list-cache-ms`, 1 s by default). The moving
//!   progress of running bisects (runs done, candidates left, belief, measured change)
//!   changes every scheduling round; the list shows it at most that old. A bisect's own page
//!   is never cached.
//!
//! Why the version is read before the page: a change committed before that read is in the
//! page's rows (they are read later, in a later snapshot), so a page is never older than the
//! version it is kept under. The one gap is a commit between its trigger and its end (the
//! trigger runs just before the commit record is written): a page read in that instant
//! misses it and is kept until the age limit.
//!
//! One read per page and version: requests that miss the same page wait for the one read
//! under way and are served what it read. Without that, every request in flight when the
//! list moved read the page itself (31 to 99 reads of one page per move, with 50 readers).

use crate::store::summaries::{self, ListFilter, SummaryRow};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a page is kept at most, unless configured.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_millis(1000);

/// Pages kept at once (each filter, limit and offset is a page).
const PAGES: usize = 128;

/// Longer pages are read every time: a 500-row API page in each of 128 slots would hold
/// about 60 MB.
const MAX_ROWS_KEPT: i64 = 100;

/// One page of a list, as read at one list version.
#[derive(Debug)]
pub struct Page {
    /// Bisects that match the filter.
    pub total: i64,
    /// The page's rows, newest first.
    pub rows: Vec<SummaryRow>,
    version: i64,
    read_at: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    status: Option<String>,
    repository: Option<String>,
    testcase: Option<String>,
    metric: Option<String>,
    limit: i64,
    offset: i64,
}

/// The dashboard list's filter choices: every repository, test case and metric.
#[derive(Debug)]
pub struct Choices {
    pub repositories: Vec<String>,
    pub testcases: Vec<String>,
    pub metrics: Vec<String>,
    version: i64,
    read_at: Instant,
}

/// The list version as one request read it, and when (`ListCache::version`).
#[derive(Debug, Clone, Copy)]
pub struct Version {
    /// `None` when nothing is kept (`--list-cache-ms 0`).
    value: Option<i64>,
    read_at: Instant,
}

/// A page as kept: the last one read, and the lock its next read holds.
#[derive(Default)]
struct Slot {
    page: Option<Arc<Page>>,
    read: Arc<tokio::sync::Mutex<()>>,
}

/// Pages of the lists, shared by this replica's requests.
pub struct ListCache {
    max_age: Duration,
    pages: Mutex<lru::LruCache<Key, Slot>>,
    choices: Mutex<Option<Arc<Choices>>>,
    reads: std::sync::atomic::AtomicU64,
}

impl Default for ListCache {
    fn default() -> Self {
        ListCache::new(DEFAULT_MAX_AGE)
    }
}

impl ListCache {
    /// A cache whose pages are kept at most `max_age`; zero keeps none.
    pub fn new(max_age: Duration) -> Self {
        ListCache {
            max_age,
            pages: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(PAGES).expect("PAGES > 0"),
            )),
            choices: Mutex::default(),
            reads: Default::default(),
        }
    }

    /// Pages this cache has read from the database so far (kept or not).
    pub fn pages_read(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The list version now: read first, before any page it validates (see above).
    pub async fn version(&self, db: &sqlx::PgPool) -> sqlx::Result<Version> {
        let read_at = Instant::now();
        let value = if self.max_age.is_zero() {
            None
        } else {
            Some(summaries::list_version(db).await?)
        };
        Ok(Version { value, read_at })
    }

    /// Whether something read at `read` under `version` may be served at `now`.
    fn current(&self, kept_version: i64, kept_at: Instant, now: Version) -> bool {
        now.value == Some(kept_version) && now.read_at.duration_since(kept_at) < self.max_age
    }

    /// The page of bisects matching `f`, from the cache when it is current at `v`.
    pub async fn page(
        &self,
        db: &sqlx::PgPool,
        v: Version,
        f: ListFilter<'_>,
        limit: i64,
        offset: i64,
    ) -> sqlx::Result<Arc<Page>> {
        let read = async {
            self.reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let rows = summaries::list(db, f, limit, offset).await?;
            let total = summaries::count(db, f).await?;
            Ok::<_, sqlx::Error>(Page {
                total,
                rows,
                version: v.value.unwrap_or_default(),
                read_at: v.read_at,
            })
        };
        let Some(version) = v.value.filter(|_| limit <= MAX_ROWS_KEPT) else {
            crate::metrics::list_page(false);
            return Ok(Arc::new(read.await?));
        };
        let key = Key {
            status: f.status.map(str::to_owned),
            repository: f.repository.map(str::to_owned),
            testcase: f.testcase.map(str::to_owned),
            metric: f.metric.map(str::to_owned),
            limit,
            offset,
        };
        let kept = |pages: &mut lru::LruCache<Key, Slot>| {
            let slot = pages.get_or_insert_mut(key.clone(), Slot::default);
            let page = slot.page.clone();
            (
                page.filter(|p| self.current(p.version, p.read_at, v)),
                slot.read.clone(),
            )
        };
        let (page, read_lock) = kept(&mut self.pages.lock().expect("list cache lock"));
        if let Some(page) = page {
            crate::metrics::list_page(true);
            return Ok(page);
        }
        // One read at a time per page: whoever waited here finds what the read before it
        // kept, when that is current at its own version.
        let _reading = read_lock.lock().await;
        let (page, _) = kept(&mut self.pages.lock().expect("list cache lock"));
        if let Some(page) = page {
            crate::metrics::list_page(true);
            return Ok(page);
        }
        crate::metrics::list_page(false);
        let page = Arc::new(read.await?);
        let mut pages = self.pages.lock().expect("list cache lock");
        let slot = pages.get_or_insert_mut(key, Slot::default);
        // A request that read at an older version than the page kept leaves it.
        if slot.page.as_ref().is_none_or(|p| p.version <= version) {
            slot.page = Some(page.clone());
        }
        Ok(page)
    }

    /// The filter choices, from the cache when they are current at `v`. A repository or
    /// job registered without a bisect does not move the version: it shows in the choices
    /// within the age limit.
    pub async fn choices(&self, db: &sqlx::PgPool, v: Version) -> sqlx::Result<Arc<Choices>> {
        let kept = self.choices.lock().expect("list cache lock").clone();
        if let Some(c) = kept.filter(|c| self.current(c.version, c.read_at, v)) {
            return Ok(c);
        }
        let c = Arc::new(Choices {
            repositories: crate::store::repositories::names(db).await?,
            testcases: crate::store::jobs::testcases(db).await?,
            metrics: crate::store::bisects::metrics(db).await?,
            version: v.value.unwrap_or_default(),
            read_at: v.read_at,
        });
        if let Some(version) = v.value {
            let mut kept = self.choices.lock().expect("list cache lock");
            if kept.as_ref().is_none_or(|k| k.version <= version) {
                *kept = Some(c.clone());
            }
        }
        Ok(c)
    }
}
