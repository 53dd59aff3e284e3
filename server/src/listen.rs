//! Serving the router on the listening socket, over HTTP or HTTPS, with bounds a client
//! cannot stretch: a connection must deliver a request's headers within the header-read
//! timeout (the first request and every later one on a kept-alive connection), so slow or
//! silent clients (slowloris) cannot hold sockets and tasks open. Both plain and TLS go
//! through axum-server (hyper-util's builder), which installs the timer hyper needs for
//! the timeout; `axum::serve` offers no such setting. Two settings make the bound: hyper's
//! `header_read_timeout` runs only once hyper knows the protocol, so a connection that
//! sends nothing at all is bounded by axum-server's `first_request_timeout`.

use axum_server::tls_rustls::RustlsConfig;
use std::future::Future;
use std::time::Duration;

/// How long a request's headers may take to arrive, unless configured.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(20);

/// How long requests under way may finish after the shutdown signal (long polls end
/// within their own wait).
const GRACE: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` (with TLS when `tls` is given) until `shutdown` resolves,
/// then lets requests under way finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<RustlsConfig>,
    app: axum::Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopper.graceful_shutdown(Some(GRACE));
    });
    let listener = listener.into_std()?;
    let service = app.into_make_service();
    match tls {
        Some(tls) => {
            let mut server = axum_server::from_tcp_rustls(listener, tls)?
                .handle(handle)
                .first_request_timeout(header_read_timeout);
            server
                .http_builder()
                .http1()
                .header_read_timeout(header_read_timeout);
            server.serve(service).await?;
        }
        None => {
            let mut server = axum_server::from_tcp(listener)?
                .handle(handle)
                .first_request_timeout(header_read_timeout);
            server
                .http_builder()
                .http1()
                .header_read_timeout(header_read_timeout);
            server.serve(service).await?;
        }
    }
    Ok(())
}
