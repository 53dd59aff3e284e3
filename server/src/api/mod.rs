//! The HTTP surface: `/api/v1/...` (JSON), `/api/openapi.json`, `/docs` (Swagger UI).
//! Each area is a module with its own routes, merged here.

mod bisects;
mod inventory;
mod kconfigs;
mod reports;
mod repositories;
mod tasks;
mod workers;

pub(crate) use bisects::load_bisect;
pub(crate) use inventory::load_all as load_inventory;

use crate::AppState;
use crate::error::ApiError;
use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

#[derive(OpenApi)]
#[openapi(
    info(title = "perfbisect", description = "Find the commit that changed a benchmark's result."),
    tags(
        (name = "repositories", description = "Repositories and their mirrors"),
        (name = "bisects", description = "Submitting and following bisects"),
        (name = "workers", description = "The worker protocol"),
        (name = "tasks", description = "What each task did: runs, environments, build logs"),
        (name = "kconfigs", description = "Kernel configs that kernel jobs name"),
    )
)]
struct ApiDoc;

pub fn router(state: AppState) -> Router {
    let (api, openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(repositories::routes())
        .merge(bisects::routes())
        .merge(workers::routes())
        .merge(kconfigs::routes())
        .merge(tasks::routes())
        .merge(reports::routes())
        .merge(inventory::routes())
        .split_for_parts();
    // SwaggerUi serves the document itself at /api/openapi.json.
    Router::new()
        .merge(api)
        .merge(crate::dashboard::routes())
        .merge(utoipa_swagger_ui::SwaggerUi::new("/docs").url("/api/openapi.json", openapi))
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .with_state(state)
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

/// The OpenAPI document, for snapshot tests and `perfbisect openapi`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let (_, openapi) = OpenApiRouter::<AppState>::with_openapi(ApiDoc::openapi())
        .merge(repositories::routes())
        .merge(bisects::routes())
        .merge(workers::routes())
        .merge(kconfigs::routes())
        .merge(tasks::routes())
        .merge(reports::routes())
        .merge(inventory::routes())
        .split_for_parts();
    openapi
}

/// `Json<T>` whose rejections are our error body, naming the field serde complained about.
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    axum::Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => {
                let message = rejection.body_text();
                Err(ApiError::BadRequest {
                    field: field_in_serde_message(&message),
                    message,
                })
            }
        }
    }
}

/// serde names fields as "missing field `x`" / "unknown field `x`" / "invalid type ... for key `x`".
fn field_in_serde_message(message: &str) -> Option<String> {
    for marker in ["missing field `", "unknown field `", "duplicate field `"] {
        if let Some(start) = message.find(marker) {
            let rest = &message[start + marker.len()..];
            return rest.find('`').map(|end| rest[..end].to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_field_names_in_serde_messages() {
        assert_eq!(
            super::field_in_serde_message(
                "Failed to deserialize: missing field `metric` at line 1"
            )
            .as_deref(),
            Some("metric")
        );
        assert_eq!(
            super::field_in_serde_message("expected value at line 1"),
            None
        );
    }
}
