//! `GET /metrics` in the Prometheus text format.
//!
//! Latencies and counts are recorded in this process as they happen (each replica reports
//! its own); queue depth, bisects, hosts and the outbox are read from the database at scrape
//! time, so every replica reports the same shared state.

use crate::state::AppState;
use crate::store::gauges;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::OnceLock;
use std::time::Duration;

type Labels = Vec<(String, String)>;

struct Recorded {
    advance: Histogram,
    claim: Histogram,
    claim_acquire: Histogram,
    claim_statement: Histogram,
    claim_batch: Histogram,
    upload_batch: Histogram,
    complete_batch: Histogram,
    upload: Histogram,
    complete: Histogram,
    runs: Counter,
    /// List pages served, by `cached` ("true": from `list_cache`, "false": read).
    list_pages: Family<Labels, Counter>,
}

fn recorded() -> &'static Recorded {
    static R: OnceLock<Recorded> = OnceLock::new();
    // 1 ms to about 65 s, two buckets per doubling: a p99 read from the buckets is then
    // known to within √2 (with one per doubling, "≤ 512 ms" could mean 260 ms). Beside them,
    // the bounds operators set targets at (50 and 100 ms: the loadtest's claim and upload
    // targets), so "p99 within 50 ms" can be read as it is and not as "≤ 64 ms".
    let buckets = || {
        let mut bounds: Vec<f64> = exponential_buckets(0.001, std::f64::consts::SQRT_2, 33)
            .chain([0.05, 0.1])
            .collect();
        bounds.sort_by(f64::total_cmp);
        Histogram::new(bounds)
    };
    R.get_or_init(|| Recorded {
        advance: buckets(),
        claim: buckets(),
        claim_acquire: buckets(),
        claim_statement: buckets(),
        // 1 to 256 looks.
        claim_batch: Histogram::new(exponential_buckets(1.0, 2.0, 9)),
        // 1 to 128 uploads.
        upload_batch: Histogram::new(exponential_buckets(1.0, 2.0, 8)),
        complete_batch: Histogram::new(exponential_buckets(1.0, 2.0, 8)),
        upload: buckets(),
        complete: buckets(),
        runs: Counter::default(),
        list_pages: Family::default(),
    })
}

pub fn observe_advance(d: Duration) {
    recorded().advance.observe(d.as_secs_f64());
}

/// One claim statement, answering `looks` looks at once (`queue::claim`).
pub fn observe_claim_batch(looks: usize) {
    recorded().claim_batch.observe(looks as f64);
}

/// One upload statement, storing `uploads` runs at once (`worker_writes::upload`).
pub fn observe_upload_batch(uploads: usize) {
    recorded().upload_batch.observe(uploads as f64);
}

/// One completion statement, ending `tasks` tasks at once (`worker_writes::complete`).
pub fn observe_complete_batch(tasks: usize) {
    recorded().complete_batch.observe(tasks as f64);
}

/// One look for a task (not the long-poll wait around it): the wait for its claim statement's
/// connection (a slot, the looks before it, the pool) and the statement, each on its own and
/// together.
pub fn observe_claim(acquire: Duration, statement: Duration) {
    let r = recorded();
    r.claim_acquire.observe(acquire.as_secs_f64());
    r.claim_statement.observe(statement.as_secs_f64());
    r.claim.observe((acquire + statement).as_secs_f64());
}

pub fn observe_upload(d: Duration) {
    recorded().upload.observe(d.as_secs_f64());
    recorded().runs.inc();
}

pub fn observe_complete(d: Duration) {
    recorded().complete.observe(d.as_secs_f64());
}

/// One list page served, from the cache (`cached`) or read (`list_cache`).
pub fn list_page(cached: bool) {
    let label = vec![("cached".to_string(), cached.to_string())];
    recorded().list_pages.get_or_create(&label).inc();
}

fn family(rows: Vec<(String, i64)>, label: &str) -> Family<Labels, Gauge> {
    let f = Family::<Labels, Gauge>::default();
    for (value, n) in rows {
        f.get_or_create(&vec![(label.to_string(), value)]).set(n);
    }
    f
}

async fn render(state: &AppState) -> anyhow::Result<String> {
    let db = &state.db;
    let queued = gauges::tasks_per_group(db, "queued").await?;
    let running = gauges::tasks_per_group(db, "running").await?;
    let bisects = gauges::scheduled_bisects(db).await?;
    let hosts =
        gauges::hosts_by_state(db, crate::store::allocation::LIVE_HOST_WINDOW_SECS as f64).await?;
    let outbox = gauges::outbox_backlog(db).await?;
    let wakeups = crate::store::wakeups::backlog(db).await?;
    let (graphs, graph_bytes) = state.graphs.usage();

    let mut reg = Registry::with_prefix("perfbisect");
    let r = recorded();
    reg.register(
        "advance_seconds",
        "Duration of one scheduling round of one bisect",
        r.advance.clone(),
    );
    reg.register(
        "claim_seconds",
        "Duration of a task claim (connection wait and statement, not the long-poll wait)",
        r.claim.clone(),
    );
    reg.register(
        "claim_acquire_seconds",
        "Of a task claim, the wait for its statement's database connection (a statement slot, the batches before it, the pool)",
        r.claim_acquire.clone(),
    );
    reg.register(
        "claim_statement_seconds",
        "Of a task claim, the claim statement on its connection",
        r.claim_statement.clone(),
    );
    reg.register(
        "claim_batch_looks",
        "Looks answered by one claim statement",
        r.claim_batch.clone(),
    );
    reg.register(
        "upload_batch_runs",
        "Run uploads answered by one upload statement",
        r.upload_batch.clone(),
    );
    reg.register(
        "complete_batch_tasks",
        "Task completions answered by one completion statement",
        r.complete_batch.clone(),
    );
    reg.register(
        "upload_seconds",
        "Duration of a run upload request",
        r.upload.clone(),
    );
    reg.register(
        "complete_seconds",
        "Duration of a task completion request",
        r.complete.clone(),
    );
    reg.register(
        "runs_stored",
        "Runs uploaded to this replica",
        r.runs.clone(),
    );
    reg.register(
        "list_pages",
        "List pages served by this replica, from its cache or read from the database",
        r.list_pages.clone(),
    );
    reg.register(
        "queue_depth",
        "Queued tasks per host group",
        family(queued, "host_group"),
    );
    reg.register(
        "tasks_running",
        "Running tasks per host group",
        family(running, "host_group"),
    );
    reg.register(
        "active_bisects",
        "Bisects not yet ended, per status",
        family(bisects, "status"),
    );
    reg.register("hosts", "Hosts by state", family(hosts, "state"));
    reg.register(
        "outbox_backlog",
        "Mails not yet sent, per state",
        family(outbox, "state"),
    );
    let g = Gauge::<i64>::default();
    g.set(wakeups);
    reg.register("scheduler_wakeups", "Wake-ups not yet answered", g);
    let g = Gauge::<i64>::default();
    g.set(graphs as i64);
    reg.register(
        "graph_cache_graphs",
        "Candidate graphs held by this replica",
        g,
    );
    let g = Gauge::<i64>::default();
    g.set(graph_bytes as i64);
    reg.register(
        "graph_cache_bytes",
        "Estimated bytes of the candidate graphs held by this replica",
        g,
    );
    let mut out = String::new();
    encode(&mut out, &reg)?;
    Ok(out)
}

/// The scrape endpoint.
pub async fn handler(State(state): State<AppState>) -> axum::response::Response {
    match render(&state).await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(error = ?e, "rendering /metrics");
            (
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                format!("metrics unavailable: {e}\n"),
            )
                .into_response()
        }
    }
}
