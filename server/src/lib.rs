//! The perfbisect server: REST API, scheduler, git mirrors, and the embedded PostgreSQL.
//!
//! `run` is the whole process: configuration → database (embedded or `DATABASE_URL`) →
//! migrations → tokens → background loops (scheduler, lease reaper, queue listener) → HTTP.

pub mod api;
pub mod auth;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod error;
pub mod git;
pub mod graphs;
pub mod notify;
pub mod pg;
pub mod queue;
pub mod report_input;
pub mod scheduler;
pub mod watch;

use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

pub use config::ServerConfig;

/// What every handler and loop shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub db: sqlx::PgPool,
    pub mirrors: git::Mirrors,
    /// Woken when tasks may have been queued (by this replica or, through LISTEN, another).
    pub task_queued: Arc<Notify>,
    pub lease: Duration,
    pub public_url: String,
    /// Mail settings (SMTP, senders, KPI directions of reports).
    pub mail: Arc<notify::MailSettings>,
    /// Candidate graphs of bisects this replica has advanced.
    pub graphs: graphs::GraphCache,
}

impl AppState {
    pub fn new(
        db: sqlx::PgPool,
        data_dir: &std::path::Path,
        lease: Duration,
        public_url: String,
    ) -> Self {
        AppState {
            db,
            mirrors: git::Mirrors::new(data_dir.join("mirrors")),
            task_queued: Arc::new(Notify::new()),
            lease,
            public_url,
            mail: Arc::new(notify::MailSettings::default()),
            graphs: graphs::GraphCache::default(),
        }
    }
}

/// Runs the server until ctrl-c or SIGTERM.
pub async fn run(config: ServerConfig) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data directory {}", config.data_dir.display()))?;
    let (url, cluster) = match &config.database_url {
        Some(url) => (url.clone(), None),
        None => {
            let dir = config.data_dir.join("postgres");
            let cluster = tokio::task::spawn_blocking(move || pg::Cluster::start(&dir)).await??;
            tracing::info!(port = cluster.port(), dir = %cluster.data_dir().display(), "embedded PostgreSQL running");
            db::ensure_database(&cluster.url("postgres"), "perfbisect").await?;
            (cluster.url("perfbisect"), Some(cluster))
        }
    };
    let db = db::connect(&url).await?;
    db::migrate(&db).await?;
    let token_file_dir = config.data_dir.clone();
    let api_token = match &config.api_token {
        Some(t) => t.clone(),
        None => read_or_create_token(&token_file_dir.join("api-token"))?,
    };
    let enroll_token = match &config.enroll_token {
        Some(t) => t.clone(),
        None => read_or_create_token(&token_file_dir.join("enroll-token"))?,
    };
    auth::ensure_token(&db, "api", "configured", &api_token).await?;
    auth::ensure_token(&db, "enroll", "configured", &enroll_token).await?;

    let mut state = AppState::new(
        db.clone(),
        &config.data_dir,
        Duration::from_secs(config.lease_secs),
        config.public_url(),
    );
    state.mail = Arc::new(config.mail.settings()?);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    tokio::spawn(queue::listen_for_tasks(state.clone(), url.clone()));
    tokio::spawn(queue::reap_expired_leases(state.clone()));
    tokio::spawn(scheduler::tick(state.clone()));
    tokio::spawn(watch::run(state.clone()));
    notify::sender::spawn(&state)?;
    tracing::info!(%addr, "perfbisect server listening");
    println!("perfbisect server listening on http://{addr}");
    axum::serve(listener, api::router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    db.close().await;
    if let Some(cluster) = cluster {
        tracing::info!("stopping embedded PostgreSQL");
        tokio::task::spawn_blocking(move || cluster.stop()).await??;
    }
    Ok(())
}

fn read_or_create_token(path: &std::path::Path) -> anyhow::Result<String> {
    if let Ok(t) = std::fs::read_to_string(path) {
        return Ok(t.trim().to_string());
    }
    let token = auth::new_token();
    std::fs::write(path, &token).with_context(|| format!("writing {}", path.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    tracing::info!(file = %path.display(), "created a new token");
    Ok(token)
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {},
        _ = term.recv() => {},
    }
    tracing::info!("shutting down");
}

/// Sets up tracing: `PERFBISECT_LOG_FORMAT=json` for structured logs, `RUST_LOG` for levels.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("PERFBISECT_LOG_FORMAT").as_deref() == Ok("json") {
        builder.json().init();
    } else {
        builder.init();
    }
}
