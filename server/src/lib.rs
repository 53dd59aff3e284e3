//! The perfbisect server: REST API, scheduler, git mirrors, and the embedded PostgreSQL.
//!
//! `run` is the whole process: configuration → database (embedded or `DATABASE_URL`) →
//! migrations → tokens → background loops (scheduler, lease reaper, queue listener) → HTTP.

pub mod allocator;
pub mod api;
pub mod assessing;
pub mod auth;
pub mod bisect_view;
pub mod budget;
pub mod change;
pub mod coalesce;
pub mod config;
pub mod dashboard;
pub mod db;
pub mod details;
pub mod dispatch;
pub mod error;
pub mod fetcher;
pub mod findings;
pub mod git;
pub mod graphs;
pub mod health;
pub mod heap;
pub mod list_cache;
pub mod listen;
pub mod mail_policy;
pub mod materials;
pub mod metrics;
pub mod notify;
pub mod pg;
pub mod progress;
pub mod queue;
pub mod repo_policy;
pub mod report_findings;
pub mod report_input;
pub mod scheduler;
pub mod state;
pub mod store;
pub mod submission;
pub mod tls;
pub mod url_policy;
pub mod watch;
pub mod webhook;
pub mod worker_writes;

use anyhow::Context;
use perfbisect_wire::states::TokenKind;
use std::sync::Arc;
use std::time::Duration;

pub use config::ServerConfig;
pub use state::AppState;

/// Runs the server until ctrl-c or SIGTERM.
pub async fn run(mut config: ServerConfig) -> anyhow::Result<()> {
    // Before anything else: secrets leave this process's command line and environment.
    config.conceal_secrets()?;
    // Freed memory goes back to the system (see `heap`).
    heap::keep_small();
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data directory {}", config.data_dir.display()))?;
    let mut embedded = None;
    let (url, cluster) = match &config.database_url {
        Some(url) => (url.clone(), None),
        None => {
            let dir = config.data_dir.join("postgres");
            let options = pg::ClusterOptions {
                fsync: true,
                tcp: config.embedded_pg_listen,
            };
            embedded = Some(health::Embedded {
                dir: dir.clone(),
                options: options.clone(),
            });
            let cluster =
                tokio::task::spawn_blocking(move || pg::Cluster::start_with(&dir, &options))
                    .await??;
            tracing::info!(port = cluster.port(), dir = %cluster.data_dir().display(), "embedded PostgreSQL running");
            db::ensure_database(&cluster.url("postgres"), "perfbisect").await?;
            (cluster.url("perfbisect"), Some(cluster))
        }
    };
    let db = db::connect(&url).await?;
    db::migrate(&db).await?;
    // Tokens given at start replace the previous start's: a rotated token stops working.
    for (kind, file, given) in [
        (TokenKind::Api, "api-token", config.api_token()?),
        (TokenKind::Enroll, "enroll-token", config.enroll_token()?),
        (
            TokenKind::Operator,
            "operator-token",
            config.operator_token()?,
        ),
    ] {
        let token = match given {
            Some(t) => t,
            None => read_or_create_token(&config.data_dir.join(file))?,
        };
        let revoked = auth::replace_startup_token(&db, kind, &token).await?;
        if revoked > 0 {
            tracing::info!(%kind, revoked, "revoked the previous startup token");
        }
    }

    let mut state = AppState::new(
        db.clone(),
        &config.data_dir,
        Duration::from_secs(config.lease_secs),
        config.public_url(),
    );
    state.mail = Arc::new(config.mail.settings()?);
    state.mirrors = state.mirrors.clone().with_auth((*config.git).clone());
    state.mirrors = (state.mirrors.clone())
        .with_url_policy(url_policy::UrlPolicy::new(config.repo_urls.clone()));
    state.access = Arc::new(config.read_access()?);
    state.max_runs_ceiling = config.max_runs_ceiling;
    state.max_hosts_per_bisect = config.max_hosts_per_bisect;
    state.webhook_secret = config.webhook_secret()?.map(Arc::from);
    state.lists = Arc::new(list_cache::ListCache::new(Duration::from_millis(
        config.list_cache_ms,
    )));
    // The claim and write connections open now, warmed, rather than under the first burst
    // of workers (a restart meets every worker of the lab polling at once).
    db::open_all(&state.claims_db).await?;
    db::open_all(&state.writes_db).await?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let addr = listener.local_addr()?;
    tokio::spawn(queue::listen_for_tasks(state.clone(), url.clone()));
    tokio::spawn(queue::reap_expired_leases(state.clone()));
    dispatch::spawn(&state);
    tokio::spawn(health::watchdog(
        state.clone(),
        embedded,
        Duration::from_secs(2),
    ));
    tokio::spawn(watch::run(state.clone()));
    tokio::spawn(fetcher::run(state.clone()));
    tokio::spawn(details::run(state.clone()));
    notify::sender::spawn(&state)?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(tls::server_config(cert, key)?),
        _ => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(%addr, scheme, "perfbisect server listening");
    println!("perfbisect server listening on {scheme}://{addr}");
    listen::serve(
        listener,
        tls,
        api::router(state.clone()),
        Duration::from_secs(config.header_read_timeout_secs),
        async move {
            shutdown_signal().await;
            // Long polls answer now: the graceful stop then waits for no worker's poll.
            state.task_queued.stop();
        },
    )
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
    // Mode 600 from the moment it exists: never readable by others, not even briefly.
    pg::write_private(path, token.as_bytes())?;
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
