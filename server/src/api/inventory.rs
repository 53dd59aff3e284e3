//! Host inventory: each host's state, kernel, last power action and failure streak; the
//! worker's host-state reports; quarantine after repeated failures; drain and release.
//!
//! A host that is quarantined or drained claims nothing (checked by the claim's own statement,
//! `store::queue::claim_batch`): its worker keeps polling and gets no task until an operator
//! releases it.

use super::ApiJson;
use crate::auth::{Operator, WorkerHost};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;
use crate::store::inventory;
use axum::Json;
use axum::extract::{Path, State};
use perfbisect_wire::api::ErrorBody;
use perfbisect_wire::hosts::{
    HostInventory, HostOutcome, HostState, HostStateReply, HostStateReport,
};
use sqlx::PgPool;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Host failures in a row (boots that never came back, even after a power cycle) after
/// which a host is quarantined.
pub const QUARANTINE_AFTER: i32 = 3;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(inventory))
        .routes(routes!(report_state))
        .routes(routes!(drain))
        .routes(routes!(release))
}

async fn load_one(db: &PgPool, id: i64) -> ApiResult<HostInventory> {
    inventory::one(db, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("host {id} does not exist")))
}

/// Every host with its state (idle, booting, running, powered off, quarantined), whether it
/// is drained, its current kernel, last power action and failure streak.
#[utoipa::path(get, path = "/api/v1/inventory", tag = "workers",
    responses((status = 200, body = Vec<HostInventory>)))]
async fn inventory(State(state): State<AppState>) -> ApiResult<Json<Vec<HostInventory>>> {
    Ok(Json(inventory::all(&state.db).await?))
}

/// A worker reports what its host does and how its last boot went. A failure lengthens the
/// streak (and quarantines the host at the limit); a healthy boot ends it.
#[utoipa::path(post, path = "/api/v1/worker/host-state", tag = "workers", request_body = HostStateReport,
    responses((status = 200, body = HostStateReply), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("worker_token" = [])))]
async fn report_state(
    State(state): State<AppState>,
    host: WorkerHost,
    ApiJson(report): ApiJson<HostStateReport>,
) -> ApiResult<Json<HostStateReply>> {
    if let Some(k) = &report.kernel
        && (k.is_empty() || k.len() > 256)
    {
        return Err(ApiError::bad(
            "kernel",
            "must be a kernel release of 1 to 256 characters",
        ));
    }
    if report.power_action.as_ref().is_some_and(|a| a.len() > 256) {
        return Err(ApiError::bad(
            "power_action",
            "must be at most 256 characters",
        ));
    }
    let failed = report.outcome == Some(HostOutcome::Failed);
    let healthy = report.outcome == Some(HostOutcome::Healthy);
    let reason = format!(
        "{QUARANTINE_AFTER} failures in a row; the last: {}",
        report
            .message
            .as_deref()
            .unwrap_or("the host did not come back")
    );
    inventory::report_state(
        &state.db,
        host.host_id,
        &inventory::StateReport {
            activity: report.activity,
            kernel: report.kernel.as_deref(),
            power_action: report.power_action.as_deref(),
            failed,
            healthy,
        },
        QUARANTINE_AFTER,
        &reason,
    )
    .await?;
    let inv = load_one(&state.db, host.host_id).await?;
    if failed && inv.state == HostState::Quarantined {
        tracing::warn!(
            host = inv.name,
            streak = inv.failure_streak,
            "host quarantined"
        );
    }
    Ok(Json(HostStateReply {
        state: inv.state,
        failure_streak: inv.failure_streak,
        available: inv.available,
    }))
}

/// Drain a host (operators only): it finishes its current task and claims no more until
/// released.
#[utoipa::path(post, path = "/api/v1/hosts/{id}/drain", tag = "workers",
    params(("id" = i64, Path, description = "host id")),
    responses((status = 200, body = HostInventory), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody)),
    security(("operator_token" = [])))]
async fn drain(
    State(state): State<AppState>,
    _operator: Operator,
    Path(id): Path<i64>,
) -> ApiResult<Json<HostInventory>> {
    inventory::drain(&state.db, id).await?;
    Ok(Json(load_one(&state.db, id).await?))
}

/// Release a drained or quarantined host (operators only): back to work, its failure streak
/// cleared.
#[utoipa::path(post, path = "/api/v1/hosts/{id}/release", tag = "workers",
    params(("id" = i64, Path, description = "host id")),
    responses((status = 200, body = HostInventory), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 404, body = ErrorBody)),
    security(("operator_token" = [])))]
async fn release(
    State(state): State<AppState>,
    _operator: Operator,
    Path(id): Path<i64>,
) -> ApiResult<Json<HostInventory>> {
    inventory::release(&state.db, id).await?;
    Ok(Json(load_one(&state.db, id).await?))
}
