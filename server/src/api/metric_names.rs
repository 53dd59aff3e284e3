//! Metric names a job is known to produce, so that a wrong `--metric` is refused at submission
//! instead of failing after the first task, and so that users can look the names up.
//!
//! "Known" means seen in a complete run of the same job spec (same canonical hash: the same
//! build, run command and format, hence the same names). A job never run before is accepted
//! as is: nothing is known about it yet (`perfbisect metrics` checks a saved output offline).
//! The names are `store::jobs::metric_names`; the check at submission is in `submission`.

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::jobs;
use axum::Json;
use axum::extract::{Query, State};
use perfbisect_wire::api::ErrorBody;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_metric_names))
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
    let metrics = jobs::metric_names(&state.db, &q.job).await?;
    Ok(Json(MetricNames {
        job: q.job,
        metrics,
    }))
}
