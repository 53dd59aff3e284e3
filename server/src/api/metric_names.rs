//! Metric names a job is known to produce, so that a wrong `--metric` is refused at submission
//! instead of failing after the first task, and so that users can look the names up.
//!
//! "Known" means seen in a complete run of the same job spec (same canonical hash: the same
//! build, run command and format, hence the same names). A job never run before is accepted
//! as is: nothing is known about it yet (`perfbisect metrics` checks a saved output offline).

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Query, State};
use perfbisect_wire::api::ErrorBody;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Names listed in a refusal, at most.
const NAMES_SHOWN: usize = 20;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_metric_names))
}

/// The metric names complete runs of this job hash produced, sorted (from its latest runs).
async fn known(state: &AppState, job_hash: &str) -> sqlx::Result<Vec<String>> {
    sqlx::query_scalar(
        "SELECT DISTINCT k FROM (
           SELECT r.metrics FROM runs r JOIN bisects b ON b.id = r.bisect_id
           JOIN job_specs j ON j.id = b.job_spec_id
           WHERE j.hash = $1 AND r.completed ORDER BY r.id DESC LIMIT 50) recent,
         LATERAL jsonb_object_keys(recent.metrics) AS k ORDER BY k",
    )
    .bind(job_hash)
    .fetch_all(&state.db)
    .await
}

/// Refuses `metric` when runs of this job are stored and none of them produced it.
pub async fn check_submitted(state: &AppState, job_hash: &str, metric: &str) -> ApiResult<()> {
    let names = known(state, job_hash).await?;
    if names.is_empty() || names.iter().any(|n| n == metric) {
        return Ok(());
    }
    let shown: Vec<&str> = names.iter().take(NAMES_SHOWN).map(String::as_str).collect();
    Err(ApiError::unprocessable(
        "metric",
        format!(
            "earlier runs of this job never produced `{metric}`; they produced {}{}",
            shown.join(", "),
            if names.len() > NAMES_SHOWN {
                ", …"
            } else {
                ""
            }
        ),
    ))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct MetricNamesQuery {
    /// The job spec's canonical hash (`job_hash` of a bisect).
    job: String,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MetricNames {
    pub job: String,
    /// Every metric name complete runs of this job produced, sorted; empty if it never ran.
    pub metrics: Vec<String>,
}

/// The metric names a job's runs produced: what `metric` may be for that job.
#[utoipa::path(get, path = "/api/v1/metric-names", tag = "bisects", params(MetricNamesQuery),
    responses((status = 200, body = MetricNames), (status = 400, body = ErrorBody)))]
async fn list_metric_names(
    State(state): State<AppState>,
    Query(q): Query<MetricNamesQuery>,
) -> ApiResult<Json<MetricNames>> {
    if q.job.len() != 64 || !q.job.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::bad("job", "must be a job hash (64 hex digits)"));
    }
    let metrics = known(&state, &q.job).await?;
    Ok(Json(MetricNames {
        job: q.job,
        metrics,
    }))
}
