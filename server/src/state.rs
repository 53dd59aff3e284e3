//! `AppState`: what every handler and loop shares (pool, mirrors, settings, caches).

use crate::db::{self, Plans};
use crate::{auth, budget, git, graphs, notify, queue, repo_policy, worker_writes};
use std::sync::Arc;
use std::time::Duration;

/// What every handler and loop shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub db: sqlx::PgPool,
    /// The claim statements' own connections (`db::side_pool`).
    pub claims_db: sqlx::PgPool,
    /// The upload and completion statements' own connections (`db::side_pool`).
    pub writes_db: sqlx::PgPool,
    /// Uploads and completions waiting for a statement, and those running (`worker_writes`).
    pub writes: Arc<worker_writes::Writes>,
    pub mirrors: git::Mirrors,
    /// Woken when tasks may have been queued (by this replica or, through LISTEN, another).
    pub task_queued: Arc<queue::Waiters>,
    pub lease: Duration,
    pub public_url: String,
    /// Mail settings (SMTP, senders, KPI directions of reports).
    pub mail: Arc<notify::MailSettings>,
    /// Candidate graphs of bisects this replica has advanced.
    pub graphs: graphs::GraphCache,
    /// Who may read (`--require-read-token`, `--trusted-user-header`).
    pub access: Arc<auth::ReadAccess>,
    /// The most runs a bisect may take (`--max-runs-ceiling`, see `budget`).
    pub max_runs_ceiling: u32,
    /// The most hosts one bisect works on at once (`--max-hosts-per-bisect`, see `allocator`).
    pub max_hosts_per_bisect: u32,
    /// The secret forges sign push webhooks with (`--webhook-secret-file`, see `webhook`).
    pub webhook_secret: Option<Arc<str>>,
    /// Pages of the bisect lists (`--list-cache-ms`, see `list_cache`).
    pub lists: Arc<crate::list_cache::ListCache>,
}

impl AppState {
    pub fn new(
        db: sqlx::PgPool,
        data_dir: &std::path::Path,
        lease: Duration,
        public_url: String,
    ) -> Self {
        repo_policy::ensure_fetch_timeouts();
        AppState {
            claims_db: db::side_pool(&db, queue::BATCHES_AT_ONCE, Plans::Generic, queue::warm),
            writes_db: db::side_pool(
                &db,
                worker_writes::CONNECTIONS,
                Plans::Custom,
                worker_writes::warm,
            ),
            writes: Arc::default(),
            db,
            mirrors: git::Mirrors::new(data_dir.join("mirrors")),
            task_queued: Arc::default(),
            lease,
            public_url,
            mail: Arc::new(notify::MailSettings::default()),
            graphs: graphs::GraphCache::default(),
            access: Arc::default(),
            max_runs_ceiling: budget::DEFAULT_CEILING,
            max_hosts_per_bisect: crate::allocator::DEFAULT_MAX_HOSTS_PER_BISECT,
            webhook_secret: None,
            lists: Arc::default(),
        }
    }
}
