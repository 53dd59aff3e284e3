//! The worker's side of the protocol, over HTTP.

use perfbisect_wire::api::ErrorBody;
use perfbisect_wire::worker::{
    BuildReport, ClaimRequest, CompleteTask, HandBack, HeartbeatReply, Interrupted,
    InterruptedReply, RegisterWorker, RunUpload, TaskAssignment, WorkerRegistered,
};
use reqwest::StatusCode;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server could not be reached (down, restarting): worth retrying.
    #[error("cannot reach the server: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// The server answered with an error.
    #[error("server answered {status}: {message}")]
    Refused {
        status: StatusCode,
        field: Option<String>,
        message: String,
    },
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),
}

impl ClientError {
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable(_) => true,
            ClientError::Refused { status, .. } => status.is_server_error(),
            ClientError::Protocol(_) => false,
        }
    }
}

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    /// Every body sent is scrubbed of the tokens this worker knows, and of NUL characters.
    scrubber: crate::sanitize::Scrubber,
}

impl Client {
    pub fn new(base: &str) -> Self {
        Self::with_ca(base, None).expect("HTTP client")
    }

    /// A client for an `https://` server whose certificate a private CA (PEM file) signed.
    pub fn with_ca(
        base: &str,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Self, crate::tls::TlsError> {
        Ok(Self {
            http: crate::tls::client_builder(ca_file)?
                .connect_timeout(Duration::from_secs(5))
                .build()
                .map_err(crate::tls::TlsError::Client)?,
            base: base.trim_end_matches('/').to_string(),
            token: String::new(),
            scrubber: Default::default(),
        })
    }

    pub fn with_token(mut self, token: &str) -> Self {
        self.scrubber.add(token);
        self.token = token.to_string();
        self
    }

    /// The secrets this client (and its clones) scrub from what they send.
    pub fn scrubber(&self) -> &crate::sanitize::Scrubber {
        &self.scrubber
    }

    async fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<Option<R>, ClientError> {
        let body = serde_json::to_value(body).map_err(|e| ClientError::Protocol(e.to_string()))?;
        let body = self.scrubber.json(body);
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .timeout(timeout)
            .send()
            .await
            .map_err(ClientError::Unreachable)?;
        let status = resp.status();
        if status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        let bytes = resp.bytes().await.map_err(ClientError::Unreachable)?;
        if !status.is_success() {
            let (field, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(b) => (b.error.field, b.error.message),
                Err(_) => (None, String::from_utf8_lossy(&bytes).into_owned()),
            };
            return Err(ClientError::Refused {
                status,
                field,
                message,
            });
        }
        if bytes.is_empty() {
            return Ok(None);
        }
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ClientError::Protocol(e.to_string()))
    }

    pub async fn register(&self, req: &RegisterWorker) -> Result<WorkerRegistered, ClientError> {
        self.post("/api/v1/worker/register", req, Duration::from_secs(30))
            .await?
            .ok_or_else(|| ClientError::Protocol("empty answer to register".into()))
    }

    pub async fn claim(&self, wait_secs: u64) -> Result<Option<TaskAssignment>, ClientError> {
        self.post(
            "/api/v1/worker/claim",
            &ClaimRequest { wait_secs },
            Duration::from_secs(wait_secs + 30),
        )
        .await
    }

    pub async fn heartbeat(&self, task: i64) -> Result<HeartbeatReply, ClientError> {
        self.post(
            &format!("/api/v1/worker/tasks/{task}/heartbeat"),
            &(),
            Duration::from_secs(15),
        )
        .await?
        .ok_or_else(|| ClientError::Protocol("empty heartbeat answer".into()))
    }

    pub async fn upload_run(&self, task: i64, run: &RunUpload) -> Result<(), ClientError> {
        self.post::<_, serde_json::Value>(
            &format!("/api/v1/worker/tasks/{task}/runs"),
            run,
            Duration::from_secs(60),
        )
        .await
        .map(|_| ())
    }

    pub async fn complete(&self, task: i64, req: &CompleteTask) -> Result<(), ClientError> {
        self.post::<_, serde_json::Value>(
            &format!("/api/v1/worker/tasks/{task}/complete"),
            req,
            Duration::from_secs(60),
        )
        .await
        .map(|_| ())
    }
}

impl Client {
    pub async fn report_build(&self, task: i64, build: &BuildReport) -> Result<(), ClientError> {
        self.post::<_, serde_json::Value>(
            &format!("/api/v1/worker/tasks/{task}/builds"),
            build,
            Duration::from_secs(60),
        )
        .await
        .map(|_| ())
    }

    pub async fn hand_back(&self, task: i64, req: &HandBack) -> Result<(), ClientError> {
        self.post::<_, serde_json::Value>(
            &format!("/api/v1/worker/tasks/{task}/handback"),
            req,
            Duration::from_secs(30),
        )
        .await
        .map(|_| ())
    }

    pub async fn interrupted(
        &self,
        task: i64,
        req: &Interrupted,
    ) -> Result<InterruptedReply, ClientError> {
        self.post(
            &format!("/api/v1/worker/tasks/{task}/interrupted"),
            req,
            Duration::from_secs(30),
        )
        .await?
        .ok_or_else(|| ClientError::Protocol("empty answer to interrupted".into()))
    }

    /// The kernel config stored on the server under `name`.
    /// Tells the server what the test host does and how its last boot went.
    pub async fn host_state(
        &self,
        report: &perfbisect_wire::hosts::HostStateReport,
    ) -> Result<Option<perfbisect_wire::hosts::HostStateReply>, ClientError> {
        self.post("/api/v1/worker/host-state", report, Duration::from_secs(30))
            .await
    }

    pub async fn kconfig(&self, name: &str) -> Result<String, ClientError> {
        let resp = self
            .http
            .get(format!("{}/api/v1/kconfigs/{name}", self.base))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(ClientError::Unreachable)?;
        let status = resp.status();
        let text = resp.text().await.map_err(ClientError::Unreachable)?;
        if status.is_success() {
            Ok(text)
        } else {
            Err(ClientError::Refused {
                status,
                field: None,
                message: text,
            })
        }
    }
}

/// Retries `f` while it fails transiently (server restarting), with capped backoff.
pub async fn retry<T, F, Fut>(what: &str, mut f: F) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut delay = Duration::from_millis(200);
    let mut tries = 0;
    loop {
        match f().await {
            Err(e) if e.is_transient() && tries < 150 => {
                tracing::warn!(error = %e, what, "retrying");
                tokio::time::sleep(jittered(delay)).await;
                delay = (delay * 2).min(Duration::from_secs(5));
                tries += 1;
            }
            other => return other,
        }
    }
}

/// A retry's wait: somewhere in the upper half of `delay`, at random. A lab's workers all
/// fail at the same instant when the server restarts; with one fixed backoff they would
/// come back in lockstep, every retry a thundering herd of the whole lab.
fn jittered(delay: Duration) -> Duration {
    delay.mul_f64(rand::random_range(0.5..=1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Workers that failed together retry at different moments, each within its backoff.
    #[test]
    fn workers_that_failed_together_do_not_retry_in_lockstep() {
        let delay = Duration::from_secs(4);
        let waits: Vec<Duration> = (0..200).map(|_| jittered(delay)).collect();
        assert!(
            waits.iter().all(|w| *w >= delay / 2 && *w <= delay),
            "a wait outside [2 s, 4 s]: {waits:?}"
        );
        let (least, most) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
        assert!(
            *most - *least > Duration::from_secs(1),
            "200 workers' waits span only {least:?}..{most:?}"
        );
    }
}
