//! TLS for the HTTP clients that talk to the server (the worker's, and the CLI's): rustls
//! over the ring provider (aws-lc-rs, reqwest's default, is the heaviest C build in the
//! tree), trusting the system's roots plus, with `--ca-file`, a private CA's certificate.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading the CA file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("the CA file {path} holds no PEM certificate: {source}")]
    Pem {
        path: String,
        source: reqwest::Error,
    },
    #[error("building the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Makes ring the process's rustls provider (once; later calls change nothing). Every
/// reqwest client needs a provider installed before it is built.
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client builder that also trusts the certificates in `ca_file` (PEM), if given.
pub fn client_builder(ca_file: Option<&Path>) -> Result<reqwest::ClientBuilder, TlsError> {
    install_provider();
    // The server closes a kept-alive connection that sends no request for its header-read
    // timeout (20 s by default, against slowloris). A pooled connection reused just as the
    // server closes it fails the request (`IncompleteMessage`), so idle connections are
    // dropped here well before that.
    let mut b = reqwest::Client::builder().pool_idle_timeout(std::time::Duration::from_secs(5));
    if let Some(path) = ca_file {
        let shown = path.display().to_string();
        let pem = std::fs::read(path).map_err(|source| TlsError::Read {
            path: shown.clone(),
            source,
        })?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| TlsError::Pem {
            path: shown,
            source,
        })? {
            b = b.add_root_certificate(cert);
        }
    }
    Ok(b)
}
