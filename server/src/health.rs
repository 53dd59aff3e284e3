//! Is the server able to serve? `/healthz` asks the database with a short deadline, and a
//! watchdog brings an embedded cluster back when it stops (a crash, an OOM kill, someone's
//! `pg_ctl stop`). An external `DATABASE_URL` is reconnected by the pool on its own; the
//! server keeps answering 503 (with the reason) until it is back.

use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use std::path::PathBuf;
use std::time::Duration;

/// How long `/healthz` waits for the database: well within the 5 s a monitor allows.
const PING_DEADLINE: Duration = Duration::from_secs(2);

/// True when the database answers `SELECT 1` within the deadline.
pub async fn database_ok(db: &sqlx::PgPool) -> Result<(), String> {
    match tokio::time::timeout(PING_DEADLINE, crate::store::ping(db)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("database error: {e}")),
        Err(_) => Err(format!(
            "the database did not answer within {PING_DEADLINE:?}"
        )),
    }
}

/// `GET /healthz`: 200 `ok`, or 503 with the reason.
pub async fn healthz(State(state): State<AppState>) -> (StatusCode, String) {
    match database_ok(&state.db).await {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// The embedded cluster the watchdog restarts.
pub struct Embedded {
    pub dir: PathBuf,
    pub options: crate::pg::ClusterOptions,
}

/// Checks the database every `every`; when it does not answer and the cluster is embedded,
/// starts it again (`Cluster::start_with` attaches when it is in fact running).
pub async fn watchdog(state: AppState, embedded: Option<Embedded>, every: Duration) {
    let mut down_since: Option<std::time::Instant> = None;
    loop {
        tokio::time::sleep(every).await;
        if state.db.is_closed() {
            // The server is shutting down (it closes the pool before it stops an embedded
            // cluster): starting the cluster again now would leave it running after the
            // server has gone.
            return;
        }
        match database_ok(&state.db).await {
            Ok(()) => {
                if let Some(since) = down_since.take() {
                    tracing::info!(
                        secs = since.elapsed().as_secs_f64(),
                        "database reachable again"
                    );
                }
            }
            Err(why) => {
                let busy_only = matches!(
                    tokio::time::timeout(PING_DEADLINE, crate::store::ping_alone(&state.db)).await,
                    Ok(Ok(()))
                );
                if busy_only {
                    // The database answers on a connection of its own: the pool is only
                    // saturated (a fleet of 1,000 hosts starting saturated it for seconds).
                    // Nothing is down and nothing is started.
                    tracing::warn!(why, "the pool is busy; the database answers");
                    continue;
                }
                let since = *down_since.get_or_insert_with(std::time::Instant::now);
                tracing::error!(
                    why,
                    down_secs = since.elapsed().as_secs(),
                    "database unreachable"
                );
                if let Some(e) = embedded.as_ref().filter(|_| !state.db.is_closed()) {
                    let (dir, options) = (e.dir.clone(), e.options.clone());
                    match tokio::task::spawn_blocking(move || {
                        crate::pg::Cluster::start_with(&dir, &options)
                    })
                    .await
                    {
                        // `start_with` attaches to a cluster that is in fact running (a
                        // saturated pool answers late too): started or found running.
                        Ok(Ok(_)) => {
                            tracing::warn!("embedded PostgreSQL running (started or attached)")
                        }
                        Ok(Err(e)) => tracing::error!(error = %e, "restarting embedded PostgreSQL"),
                        Err(e) => tracing::error!(error = %e, "restarting embedded PostgreSQL"),
                    }
                }
            }
        }
    }
}
