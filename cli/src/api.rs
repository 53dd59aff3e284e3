//! A small client for the user-facing REST API.

use perfbisect_wire::api::{
    Bisect, BisectList, CreateRepository, ErrorBody, Repository, SubmitBisect,
};
use perfbisect_wire::watch::{ChangePoint, CreateWatch, PollResult, Series, UpdateWatch, Watch};
use serde::de::DeserializeOwned;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    // The cause is the error's source: `{:#}` prints it once, after this.
    #[error("cannot reach the server at {url} (set it with --server or PERFBISECT_SERVER)")]
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

/// How long `add_repository` waits for a repository's first fetch.
pub const REPOSITORY_WAIT: Duration = Duration::from_secs(3600);

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    pub fn new(base: &str, token: Option<String>) -> Self {
        Self {
            http: perfbisect_worker::tls::client_builder(None)
                .expect("no CA file to read")
                .timeout(Duration::from_secs(300))
                .build()
                .expect("HTTP client"),
            base: base.trim_end_matches('/').to_string(),
            token,
        }
    }

    /// A client for an `https://` server whose certificate a private CA (PEM file) signed.
    pub fn with_ca(
        base: &str,
        token: Option<String>,
        ca_file: &std::path::Path,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            http: perfbisect_worker::tls::client_builder(Some(ca_file))?
                .timeout(Duration::from_secs(300))
                .build()?,
            base: base.trim_end_matches('/').to_string(),
            token,
        })
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
        self.add_repository_with_web(name, url, None).await
    }

    /// Registers a repository with its web view's commit URL template (`{sha}`), and waits
    /// until it is mirrored: a failed first fetch is a refusal naming `url`, with the reason.
    pub async fn add_repository_with_web(
        &self,
        name: &str,
        url: &str,
        web_url: Option<&str>,
    ) -> Result<Repository, ApiError> {
        self.register_repository(name, url, web_url).await?;
        self.wait_repository(name, REPOSITORY_WAIT).await
    }

    /// Registers a repository and returns at once (the server answers `mirroring`).
    pub async fn register_repository(
        &self,
        name: &str,
        url: &str,
        web_url: Option<&str>,
    ) -> Result<Repository, ApiError> {
        let body = CreateRepository {
            name: name.into(),
            url: url.into(),
            web_url: web_url.map(str::to_string),
        };
        self.send(
            self.http
                .post(format!("{}/api/v1/repositories", self.base))
                .json(&body),
        )
        .await
    }

    pub async fn repositories(&self) -> Result<Vec<Repository>, ApiError> {
        self.send(self.http.get(format!("{}/api/v1/repositories", self.base)))
            .await
    }

    /// Polls the repository until it is no longer `mirroring`: `ready`, or `failed` (a
    /// refusal with its fetch error), or still mirroring at the deadline.
    pub async fn wait_repository(
        &self,
        name: &str,
        within: Duration,
    ) -> Result<Repository, ApiError> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let repo = self
                .repositories()
                .await?
                .into_iter()
                .find(|r| r.name == name)
                .ok_or_else(|| ApiError::Protocol(format!("repository `{name}` is not listed")))?;
            match repo.state.as_str() {
                "mirroring" if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                "mirroring" => {
                    return Err(ApiError::Protocol(format!(
                        "repository `{name}` is still mirroring after {} s (see `perfbisect repos`)",
                        within.as_secs()
                    )));
                }
                "failed" => {
                    return Err(ApiError::Refused {
                        status: 422,
                        field: Some("url".into()),
                        message: repo
                            .fetch_error
                            .unwrap_or_else(|| "the first fetch failed".into()),
                    });
                }
                _ => return Ok(repo),
            }
        }
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

/// A change as printed: `+4.8%`, `-9.7%`.
pub fn signed_pct(pct: f64) -> String {
    let s = format!("{:.1}%", pct.abs());
    if s == "0.0%" {
        s
    } else if pct > 0.0 {
        format!("+{s}")
    } else {
        format!("-{s}")
    }
}

/// `3 min`, `1 h 5 min`.
fn duration(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        _ => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

/// One progress line: status, the measures that move (most likely culprit, candidates
/// holding 90%, bits left), runs, and the time left.
pub fn progress_line(b: &Bisect) -> String {
    let mut line = format!("bisect {} [{}]", b.id, b.status);
    match &b.progress {
        Some(p) if p.entropy_bits.is_some() && b.culprit.is_none() => {
            if let (Some(sha), Some(top)) = (&p.top_sha, p.top_probability) {
                line += &format!(" top {} {:.1}%", &sha[..sha.len().min(12)], 100.0 * top);
            }
            if let Some(n) = p.candidates_90 {
                line += &format!(" · 90% in {n} of {}", b.candidates_total);
            }
            // Those are given a change; say so where a change is itself in doubt.
            if let Some(c) = p
                .change_probability
                .filter(|c| *c < perfbisect_wire::api::CHANGE_SURE)
            {
                line += &format!(" (if there is a change: P {:.1}%)", 100.0 * c);
            }
            line += &format!(
                " · {:.1} of {:.1} bits left",
                p.entropy_bits.unwrap_or_default(),
                p.entropy_bits_start
            );
        }
        _ => line += &format!(" candidates {}", b.candidates_total),
    }
    line += &format!(" · runs {}/{}", b.runs_done, b.max_runs);
    if let Some(p) = b.findings.as_ref().and_then(|f| f.prediction.as_ref())
        && !perfbisect_wire::api::status_is_final(&b.status)
    {
        line += &format!(" · about {} more predicted", p.runs);
    }
    if let Some(eta) = b.progress.as_ref().and_then(|p| p.eta_secs)
        && !perfbisect_wire::api::status_is_final(&b.status)
    {
        line += &format!(" · about {} left", duration(eta));
    }
    if let Some(c) = &b.measured_change {
        line += &format!(" · change {} ({})", signed_pct(c.pct), c.kind);
    }
    line
}

/// The per-commit table and the outcome, as the CLI prints them.
pub fn render(b: &Bisect) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "bisect {} of {} {}..{} on {} ({}): {}\n",
        b.id, b.repository, b.good.rev, b.bad.rev, b.metric, b.testcase, b.status
    ));
    if let Some(c) = &b.measured_change {
        out.push_str(&format!(
            "  {} {} of {} ({} -> {}; {})\n",
            signed_pct(c.pct),
            c.kind,
            b.metric,
            fmt_num(c.good_mean),
            fmt_num(c.bad_mean),
            c.runs_used
        ));
    }
    if let Some(r) = &b.status_reason {
        // The reason's first line is a sentence; the rest is detail for `--json`.
        out.push_str(&format!("  {}\n", r.lines().next().unwrap_or("")));
    }
    out.push_str(&crate::findings::render(b));
    let culprit = b.culprit.as_ref().map(|c| c.commit.sha.as_str());
    out.push_str(&format!(
        "\n  {:<12} {:<13} {:<9} {:>3} {:>12} {:>12} {:>8} {:>9}  {}\n",
        "commit", "role", "verdict", "n", "mean", "stddev", "%stddev", "P(culprit)", "subject"
    ));
    for c in &b.commits {
        let pct = match (c.mean, c.stddev) {
            (Some(m), Some(s)) if m != 0.0 => format!("{:.1}%", 100.0 * s / m.abs()),
            _ => "-".into(),
        };
        let role = if Some(c.sha.as_str()) == culprit {
            "CULPRIT".to_string()
        } else {
            c.role.replace("_endpoint", "")
        };
        out.push_str(&format!(
            "{} {:<12} {:<13} {:<9} {:>3} {:>12} {:>12} {:>8} {:>9}  {}\n",
            if Some(c.sha.as_str()) == culprit {
                '>'
            } else {
                ' '
            },
            &c.sha[..12.min(c.sha.len())],
            role,
            c.verdict,
            c.n,
            c.mean.map(fmt_num).unwrap_or("-".into()),
            c.stddev.map(fmt_num).unwrap_or("-".into()),
            pct,
            c.culprit_probability
                .map(|p| format!("{:.1}%", 100.0 * p))
                .unwrap_or_default(),
            c.subject.chars().take(50).collect::<String>()
        ));
    }
    if let Some(c) = &b.culprit {
        out.push_str(&format!(
            "\nculprit: {} (\"{}\")\n  author: {}\n  probability: {}\n",
            c.commit.sha,
            c.commit.subject,
            c.commit.author,
            probability(c.confidence)
        ));
    }
    out
}

/// Six significant digits, no exponent for ordinary magnitudes: `1218093`, `0.0123457`.
fn fmt_num(v: f64) -> String {
    // log10(0) is −∞: a zero (a stddev of identical runs) has no digits to count.
    if v == 0.0 {
        return "0".into();
    }
    if v.abs() >= 1e12 || v.abs() < 1e-4 {
        format!("{v:.5e}")
    } else {
        let digits = (5 - v.abs().log10().floor() as i32).max(0) as usize;
        let s = format!("{v:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

/// A probability that never rounds a confidence short of certainty up to 100%.
pub fn probability(p: f64) -> String {
    let pct = 100.0 * p;
    if (99.9..100.0).contains(&pct) {
        let s = format!("{pct:.2}%");
        if s == "100.00%" { ">99.99%".into() } else { s }
    } else {
        format!("{pct:.1}%")
    }
}

/// How `watch` (and `submit --watch`) exit: 0 with a culprit, 1 when the bisect failed, 2
/// when it ended without a culprit (not reproduced, inconclusive, cancelled).
pub fn exit_code(status: &str) -> i32 {
    match status {
        "found" => 0,
        "failed" => 1,
        _ => 2,
    }
}

/// The `list` table: a header, then one row per bisect with its change and age.
pub fn render_list(list: &BisectList, now: chrono::DateTime<chrono::Utc>) -> String {
    let mut out = format!(
        "{:>6}  {:<14} {:<12} {:<24} {:<24} {:>8}  {:<12} {:>8}\n",
        "id", "status", "repository", "range", "metric", "change", "culprit", "age"
    );
    for b in &list.bisects {
        let range = format!("{}..{}", b.good, b.bad);
        out += &format!(
            "{:>6}  {:<14} {:<12} {:<24} {:<24} {:>8}  {:<12} {:>8}\n",
            b.id,
            b.status,
            b.repository,
            range,
            b.metric,
            b.change_pct.map(signed_pct).unwrap_or_else(|| "-".into()),
            b.culprit
                .as_deref()
                .map(|c| &c[..12.min(c.len())])
                .unwrap_or("-"),
            format!("{} ago", duration((now - b.created_at).num_seconds()))
        );
    }
    out += &format!("({} in all)\n", list.total);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_probabilities_and_exit_codes() {
        assert_eq!(fmt_num(1218093.0), "1218093");
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(1.214e9), "1214000000");
        assert_eq!(fmt_num(23.456789), "23.4568");
        assert_eq!(probability(0.9998), "99.98%");
        assert_eq!(probability(0.99999), ">99.99%");
        assert_eq!(signed_pct(-9.66), "-9.7%");
        assert_eq!(exit_code("found"), 0);
        assert_eq!(exit_code("failed"), 1);
        assert_eq!(exit_code("inconclusive"), 2);
        assert_eq!(exit_code("not_reproduced"), 2);
    }

    /// A running bisect whose progress is `progress` (the API's JSON).
    fn searching(progress: serde_json::Value) -> Bisect {
        serde_json::from_value(serde_json::json!({
            "id": 1, "repository": "example", "metric": "demo.score", "direction": null,
            "good": {"rev": "good", "sha": "a".repeat(40)},
            "bad": {"rev": "bad", "sha": "b".repeat(40)},
            "confidence": 0.99, "max_runs": 2000, "status": "searching", "status_reason": null,
            "testcase": "demo", "tbox_group": "local", "job_hash": "h",
            "candidates_total": 240, "candidates_remaining": 2, "runs_done": 180,
            "tasks_pending": 1, "culprit": null, "commits": [],
            "created_at": "2026-12-07T15:00:00Z", "updated_at": "2026-12-07T15:01:00Z",
            "finished_at": null, "progress": progress
        }))
        .expect("a bisect")
    }

    #[test]
    fn the_progress_line_says_when_its_culprit_is_given_a_change_in_doubt() {
        let mut progress = serde_json::json!({
            "top_sha": "1".repeat(40), "top_probability": 0.501, "candidates_90": 2,
            "entropy_bits": 1.0, "entropy_bits_start": 7.9, "budget_runs_left": 1820,
            "eta_secs": null, "budget_secs": null, "change_probability": 0.102
        });
        let line = progress_line(&searching(progress.clone()));
        assert!(
            line.contains(
                "top 111111111111 50.1% · 90% in 2 of 240 (if there is a change: P 10.2%)"
            ),
            "{line}"
        );
        // A change that is all but sure, or a server that does not say: nothing added.
        progress["change_probability"] = serde_json::json!(0.995);
        assert!(!progress_line(&searching(progress.clone())).contains("if there is"));
        progress
            .as_object_mut()
            .unwrap()
            .remove("change_probability");
        assert!(!progress_line(&searching(progress)).contains("if there is"));
    }
}
