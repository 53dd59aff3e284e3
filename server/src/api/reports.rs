//! Reports and their delivery: a bisect's report as text, JSON or the `.eml` of its mail,
//! per-bisect mail options, and (in the submodules) the outbox and the subscriptions.
//!
//! Text and JSON are public like every other read. The `.eml`, the outbox, the options
//! and the subscriptions carry people's addresses and need the API token.

mod outbox;
mod subscriptions;

use crate::auth::ApiUser;
use crate::error::{ApiError, ApiResult};
use crate::notify::compose::{self, MailOptions};
use crate::notify::{Event, outbox as store, recipients};
use crate::report_input::{self, Loaded, ReportContext, ReportInputError};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use perfbisect_wire::api::ErrorBody;
use serde::Deserialize;
use std::time::SystemTime;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_report))
        .routes(routes!(get_report_eml))
        .routes(routes!(get_mail_options, put_mail_options))
        .merge(outbox::routes())
        .merge(subscriptions::routes())
}

impl From<ReportInputError> for ApiError {
    fn from(e: ReportInputError) -> Self {
        match e {
            ReportInputError::NotFound(_) => ApiError::NotFound(e.to_string()),
            ReportInputError::NotFinished { .. } => ApiError::Conflict(e.to_string()),
            ReportInputError::Db(e) => ApiError::Internal(e.into()),
            ReportInputError::Inconsistent { .. } => ApiError::Internal(e.into()),
        }
    }
}

async fn load(state: &AppState, id: i64) -> ApiResult<Loaded> {
    let ctx = ReportContext {
        robot: state.mail.robot(),
        public_url: state.public_url.clone(),
    };
    // A report shows every commit with its subject: stored now if the submit's fill has not.
    crate::details::ensure(state, id)
        .await
        .map_err(ApiError::Internal)?;
    let mut conn = state.db.acquire().await?;
    Ok(report_input::load(&mut conn, id, &ctx).await?)
}

fn unrenderable(e: impl std::fmt::Display) -> ApiError {
    ApiError::Unprocessable {
        field: None,
        message: format!("the report cannot be rendered: {e}"),
    }
}

#[derive(Debug, Clone, Copy, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReportFormat {
    /// The mail's text body: LKP's layout.
    #[default]
    Text,
    /// The rendered report: subject, headline, table rows, plots (text and SVG), bodies.
    Json,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct ReportQuery {
    /// `text` (default) or `json`. The mail itself is at `/report.eml`.
    format: Option<ReportFormat>,
}

/// The report of an ended bisect, as its mail's text body or as JSON.
#[utoipa::path(get, path = "/api/v1/bisects/{id}/report", tag = "reports",
    params(("id" = i64, Path, description = "Bisect id"), ReportQuery),
    responses(
        (status = 200, description = "The report", content(
            (String = "text/plain"),
            (serde_json::Value = "application/json"))),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The bisect has not ended", body = ErrorBody),
        (status = 422, description = "The stored runs cannot make a report", body = ErrorBody)))]
async fn get_report(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Query(q): Query<ReportQuery>,
) -> ApiResult<Response> {
    let loaded = load(&state, id).await?;
    let mut report =
        perfbisect_report::render(&loaded.input, &state.mail.report).map_err(unrenderable)?;
    if let Some(m) = crate::materials::load(&state.db, id, &state.public_url).await? {
        report.text = perfbisect_report::materials::insert(&report.text, &m);
    }
    Ok(match q.format.unwrap_or_default() {
        ReportFormat::Text => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            report.text,
        )
            .into_response(),
        ReportFormat::Json => Json(report).into_response(),
    })
}

/// The mail of an ended bisect (`message/rfc822`): the message as sent once the outbox
/// froze it, else a preview built now with the current recipients and options.
#[utoipa::path(get, path = "/api/v1/bisects/{id}/report.eml", tag = "reports",
    params(("id" = i64, Path, description = "Bisect id")),
    responses(
        (status = 200, description = "The mail", content((String = "message/rfc822"))),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "The bisect has not ended", body = ErrorBody)),
    security(("api_token" = [])))]
async fn get_report_eml(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
) -> ApiResult<Response> {
    let loaded = load(&state, id).await?;
    let mail = store::final_mail(&state.db, id).await?;
    let raw = match mail {
        Some((_, Some(raw))) => raw,
        _ => {
            let settings = &state.mail;
            // A cancelled bisect is never mailed; its preview reads as a failure.
            let event = Event::of_final_status(&loaded.status).unwrap_or(Event::Failed);
            let key = match &mail {
                Some((key, _)) => key.clone(),
                None => format!("perfbisect.{id}.preview"),
            };
            let rcpt =
                recipients::resolve(&state.db, &state.mirrors, settings, &loaded, event).await?;
            let mut content = compose::content(&loaded, event, settings).map_err(unrenderable)?;
            compose::add_materials(&state.db, id, event, &state.public_url, &mut content).await?;
            let options = MailOptions::load(&state.db, id).await?;
            let extras = compose::extras(&state.db, id, event, settings).await?;
            compose::compose(
                content,
                id,
                event,
                rcpt,
                settings.clone(),
                options,
                extras,
                compose::message_id(&key, settings),
                SystemTime::now(),
            )
            .await
            .map_err(unrenderable)?
            .raw
        }
    };
    Ok((
        [
            (header::CONTENT_TYPE, "message/rfc822".to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("inline; filename=\"bisect-{id}.eml\""),
            ),
        ],
        raw,
    )
        .into_response())
}

async fn bisect_exists(state: &AppState, id: i64) -> ApiResult<()> {
    if crate::store::bisects::exists(&state.db, id).await? {
        Ok(())
    } else {
        Err(ApiError::NotFound(format!("no bisect with id {id}")))
    }
}

/// The bisect's mail options (threading, Reply-To, extra headers).
#[utoipa::path(get, path = "/api/v1/bisects/{id}/mail", tag = "notifications",
    params(("id" = i64, Path, description = "Bisect id")),
    responses((status = 200, body = MailOptions), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("api_token" = [])))]
async fn get_mail_options(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
) -> ApiResult<Json<MailOptions>> {
    bisect_exists(&state, id).await?;
    Ok(Json(MailOptions::load(&state.db, id).await?))
}

fn validate_options(o: &MailOptions) -> ApiResult<()> {
    if let Some(id) = &o.in_reply_to {
        let ok = id.starts_with('<')
            && id.ends_with('>')
            && id.contains('@')
            && !id.contains(char::is_whitespace);
        if !ok {
            return Err(ApiError::bad(
                "in_reply_to",
                "must be a Message-ID such as `<20240101.123@example.org>`",
            ));
        }
    }
    if let Some(r) = &o.reply_to
        && r.parse::<lettre::message::Mailbox>().is_err()
    {
        return Err(ApiError::bad(
            "reply_to",
            format!("`{r}` is not a mail address"),
        ));
    }
    if o.headers.len() > crate::mail_policy::MAX_EXTRA_HEADERS {
        return Err(ApiError::unprocessable(
            "headers",
            format!(
                "at most {} extra headers",
                crate::mail_policy::MAX_EXTRA_HEADERS
            ),
        ));
    }
    for (i, (name, _)) in o.headers.iter().enumerate() {
        if let Some(why) = crate::mail_policy::refuse_header(name) {
            return Err(ApiError::unprocessable(&format!("headers[{i}]"), why));
        }
    }
    for (i, (name, value)) in o.headers.iter().enumerate() {
        if crate::notify::config::parse_header(&format!("{name}: {value}")).is_none() {
            return Err(ApiError::bad(
                &format!("headers[{i}]"),
                "must be [name, value] with a header name of printable ASCII and a one-line value",
            ));
        }
    }
    Ok(())
}

/// Sets the bisect's mail options; refused (409) once its mail is frozen.
#[utoipa::path(put, path = "/api/v1/bisects/{id}/mail", tag = "notifications",
    params(("id" = i64, Path, description = "Bisect id")), request_body = MailOptions,
    responses((status = 200, body = MailOptions), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)),
    security(("api_token" = [])))]
async fn put_mail_options(
    State(state): State<AppState>,
    _user: ApiUser,
    Path(id): Path<i64>,
    super::ApiJson(options): super::ApiJson<MailOptions>,
) -> ApiResult<Json<MailOptions>> {
    validate_options(&options)?;
    bisect_exists(&state, id).await?;
    if store::any_frozen(&state.db, id).await? {
        return Err(ApiError::Conflict(format!(
            "bisect {id}'s mail is already composed; its options can no longer change"
        )));
    }
    let headers = serde_json::to_value(&options.headers).map_err(anyhow::Error::from)?;
    crate::store::mail_options::put(
        &state.db,
        id,
        options.in_reply_to.as_deref(),
        options.reply_to.as_deref(),
        &headers,
    )
    .await?;
    Ok(Json(options))
}
