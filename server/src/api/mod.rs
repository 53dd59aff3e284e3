//! The HTTP surface: `/api/v1/...` (JSON), `/api/openapi.json`, `/docs` (Swagger UI).
//! Each area is a module with its own routes, merged here.

mod bisects;
mod edge;
mod inventory;
mod kconfigs;
mod materials;
mod metric_names;
mod openapi_errors;
mod priority;
mod reports;
mod repositories;
mod tasks;
mod tokens;
mod watches;
mod workers;

use crate::error::ApiError;
use crate::state::AppState;
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
        (name = "tokens", description = "Tokens and their roles (operators only)"),
        (name = "watches", description = "Watched branches, their series and change points"),
    ),
    modifiers(&SecuritySchemes)
)]
struct ApiDoc;

/// The bearer tokens the `security` of each operation names (roles: ARCHITECTURE.md).
struct SecuritySchemes;

impl utoipa::Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, what) in [
            ("reader_token", "A reader's token (any valid token reads)"),
            ("api_token", "A submitter's (or operator's) token"),
            ("operator_token", "An operator's token"),
            ("enroll_token", "An enrollment (or operator's) token"),
            ("worker_token", "The worker token answered by registration"),
        ] {
            components.add_security_scheme(
                name,
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .description(Some(what))
                        .build(),
                ),
            );
        }
    }
}

/// The one route list of the API: each area's routes, documented where they are declared
/// (`routes!`). Both the router and the OpenAPI document are made from it, so the document
/// lists every API route the router serves (`tests/api.rs` checks it against the router).
fn documented() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (api, mut openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(repositories::routes())
        .merge(bisects::routes())
        .merge(workers::routes())
        .merge(kconfigs::routes())
        .merge(metric_names::routes())
        .merge(tasks::routes())
        .merge(reports::routes())
        .merge(materials::routes())
        .merge(tokens::routes())
        .merge(priority::routes())
        .merge(watches::routes())
        .merge(inventory::routes())
        .split_for_parts();
    openapi_errors::document(&mut openapi);
    (api, openapi)
}

pub fn router(state: AppState) -> Router {
    let (api, openapi) = documented();
    // SwaggerUi serves the document itself at /api/openapi.json.
    Router::new()
        .merge(api)
        .merge(crate::dashboard::routes())
        .merge(utoipa_swagger_ui::SwaggerUi::new("/docs").url("/api/openapi.json", openapi))
        .route("/healthz", axum::routing::get(crate::health::healthz))
        .route("/metrics", axum::routing::get(crate::metrics::handler))
        .with_state(state.clone())
        .layer(axum::middleware::from_fn_with_state(
            state,
            crate::auth::read_gate,
        ))
        .layer(axum::middleware::from_fn(edge::json_errors))
        .layer(axum::middleware::from_fn(edge::refuse_nul_in_uri))
        .layer(tower_http::trace::TraceLayer::new_for_http())
}

/// The OpenAPI document, for snapshot tests and `perfbisect openapi`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    documented().1
}

/// `Json<T>` whose rejections are our error body, naming the field serde complained about.
pub struct ApiJson<T>(pub T);

/// Text with a NUL character (which PostgreSQL cannot store) is refused here, for every
/// body, with 422 naming the field; a body over the limit is 413.
impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let value = match axum::Json::<serde_json::Value>::from_request(req, state).await {
            Ok(axum::Json(v)) => v,
            Err(rejection) => return Err(json_rejection(rejection)),
        };
        if let Some(path) = perfbisect_wire::text::find_nul(&value) {
            return Err(ApiError::unprocessable(
                &path,
                "contains a NUL character, which cannot be stored",
            ));
        }
        serde_path_to_error::deserialize(value)
            .map(ApiJson)
            .map_err(|e| {
                // The path names the field even where serde's own message does not (an
                // unknown enum variant, a wrong type).
                let path = e.path().to_string();
                let message = format!(
                    "Failed to deserialize the JSON body into the target type: {path}: {}",
                    e.inner()
                );
                let field = match path.as_str() {
                    "." => field_in_serde_message(&message),
                    _ => Some(path),
                };
                ApiError::BadRequest { field, message }
            })
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    let message = rejection.body_text();
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::TooLarge(format!(
            "the body is larger than the server accepts: {message}"
        ));
    }
    ApiError::BadRequest {
        field: field_in_serde_message(&message),
        message,
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
