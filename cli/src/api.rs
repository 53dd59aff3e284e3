//! A small client for the user-facing REST API.

use perfbisect_wire::api::{
    Bisect, BisectList, CreateRepository, ErrorBody, Repository, SubmitBisect,
};
use perfbisect_wire::watch::{ChangePoint, CreateWatch, PollResult, Series, UpdateWatch, Watch};
use serde::de::DeserializeOwned;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("cannot reach the server at {url}: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    #[error("{status}: {}{message}", field.as_ref().map(|f| format!("{f}: ")).unwrap_or_default())]
    Refused {
        status: u16,
        field: Option<String>,
        message: String,
    },
    #[error("unexpected answer: {0}")]
    Protocol(String),
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    pub fn new(base: &str, token: Option<String>) -> Self {
        Self {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(300))
                .build()
                .expect("HTTP client"),
            base: base.trim_end_matches('/').to_string(),
            token,
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn send<R: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<R, ApiError> {
        let req = match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        };
        let resp = req.send().await.map_err(|source| ApiError::Unreachable {
            url: self.base.clone(),
            source,
        })?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|source| ApiError::Unreachable {
            url: self.base.clone(),
            source,
        })?;
        if !status.is_success() {
            let (field, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(b) => (b.error.field, b.error.message),
                Err(_) => (None, String::from_utf8_lossy(&bytes).into_owned()),
            };
            return Err(ApiError::Refused {
                status: status.as_u16(),
                field,
                message,
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| ApiError::Protocol(e.to_string()))
    }

    pub async fn healthy(&self) -> bool {
        matches!(self.http.get(format!("{}/healthz", self.base)).send().await, Ok(r) if r.status().is_success())
    }

    pub async fn add_repository(&self, name: &str, url: &str) -> Result<Repository, ApiError> {
        let body = CreateRepository {
            name: name.into(),
            url: url.into(),
        };
        self.send(
            self.http
                .post(format!("{}/api/v1/repositories", self.base))
                .json(&body),
        )
        .await
    }

    pub async fn submit(&self, req: &SubmitBisect) -> Result<Bisect, ApiError> {
        self.send(
            self.http
                .post(format!("{}/api/v1/bisects", self.base))
                .json(req),
        )
        .await
    }

    pub async fn bisect(&self, id: i64) -> Result<Bisect, ApiError> {
        self.send(self.http.get(format!("{}/api/v1/bisects/{id}", self.base)))
            .await
    }

    pub async fn list(&self, status: Option<&str>) -> Result<BisectList, ApiError> {
        // Statuses are plain words (checked by the server), no escaping needed.
        let query = status.map(|s| format!("?status={s}")).unwrap_or_default();
        self.send(
            self.http
                .get(format!("{}/api/v1/bisects{query}", self.base)),
        )
        .await
    }

    pub async fn cancel(&self, id: i64) -> Result<Bisect, ApiError> {
        self.send(
            self.http
                .post(format!("{}/api/v1/bisects/{id}/cancel", self.base)),
        )
        .await
    }

    pub async fn create_watch(&self, req: &CreateWatch) -> Result<Watch, ApiError> {
        self.send(
            self.http
                .post(format!("{}/api/v1/watches", self.base))
                .json(req),
        )
        .await
    }

    pub async fn update_watch(&self, id: i64, req: &UpdateWatch) -> Result<Watch, ApiError> {
        self.send(
            self.http
                .patch(format!("{}/api/v1/watches/{id}", self.base))
                .json(req),
        )
        .await
    }

    pub async fn watches(&self) -> Result<Vec<Watch>, ApiError> {
        self.send(self.http.get(format!("{}/api/v1/watches", self.base)))
            .await
    }

    pub async fn watch(&self, id: i64) -> Result<Watch, ApiError> {
        self.send(self.http.get(format!("{}/api/v1/watches/{id}", self.base)))
            .await
    }

    /// The push webhook: fetch and measure the new heads now.
    pub async fn push_watch(&self, id: i64) -> Result<PollResult, ApiError> {
        self.send(
            self.http
                .post(format!("{}/api/v1/watches/{id}/push", self.base)),
        )
        .await
    }

    pub async fn series(&self, id: i64) -> Result<Vec<Series>, ApiError> {
        self.send(
            self.http
                .get(format!("{}/api/v1/watches/{id}/series", self.base)),
        )
        .await
    }

    /// Change points of one watch, or of every watch (`open`: only those still to bisect).
    pub async fn changes(
        &self,
        watch: Option<i64>,
        open: bool,
    ) -> Result<Vec<ChangePoint>, ApiError> {
        let url = match watch {
            Some(id) => format!("{}/api/v1/watches/{id}/changes", self.base),
            None => format!("{}/api/v1/changes?open={open}", self.base),
        };
        self.send(self.http.get(url)).await
    }

    pub async fn hosts(&self) -> Result<serde_json::Value, ApiError> {
        self.send(self.http.get(format!("{}/api/v1/hosts", self.base)))
            .await
    }
}

/// One progress line: status, candidates left, runs, pending tasks.
pub fn progress_line(b: &Bisect) -> String {
    format!(
        "bisect {} [{}] candidates {}/{} · runs {} · tasks pending {}",
        b.id, b.status, b.candidates_remaining, b.candidates_total, b.runs_done, b.tasks_pending
    )
}

/// The per-commit table and the outcome, as the CLI prints them.
pub fn render(b: &Bisect) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "bisect {} of {} {}..{} on {} ({}): {}\n",
        b.id, b.repository, b.good.rev, b.bad.rev, b.metric, b.testcase, b.status
    ));
    if let Some(r) = &b.status_reason {
        out.push_str(&format!("  {r}\n"));
    }
    out.push_str(&format!(
        "\n  {:<12} {:<13} {:<8} {:>3} {:>12} {:>9} {:>8}  {}\n",
        "commit", "role", "verdict", "n", "mean", "stddev", "%stddev", "subject"
    ));
    for c in &b.commits {
        let pct = match (c.mean, c.stddev) {
            (Some(m), Some(s)) if m != 0.0 => format!("{:.1}%", 100.0 * s / m.abs()),
            _ => "-".into(),
        };
        let role = c.role.replace("_endpoint", "");
        out.push_str(&format!(
            "  {:<12} {:<13} {:<8} {:>3} {:>12} {:>9} {:>8}  {}\n",
            &c.sha[..12],
            role,
            c.verdict,
            c.n,
            c.mean.map(|m| format!("{m:.2}")).unwrap_or("-".into()),
            c.stddev.map(|m| format!("{m:.2}")).unwrap_or("-".into()),
            pct,
            c.subject.chars().take(50).collect::<String>()
        ));
    }
    if let Some(c) = &b.culprit {
        out.push_str(&format!(
            "\nculprit: {} (\"{}\")\n  author: {}\n  confidence: {:.4}\n",
            c.commit.sha, c.commit.subject, c.commit.author, c.confidence
        ));
    }
    out
}
