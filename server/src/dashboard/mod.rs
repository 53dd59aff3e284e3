//! The web dashboard: server-rendered pages over the same database and loaders as the REST
//! API. Templates live in `web/templates` and are compiled into the binary (askama); the
//! stylesheet and the one small script are embedded too (`assets`). Pages read; every change
//! (submit, cancel) goes through the REST API from the browser with the user's token.
//!
//! Pages: `/bisects` (list), `/bisects/{id}` (one bisect; `/bisects/{id}/live` is its live
//! part), `/submit`, `/hosts`, `/queue`, `/tasks/{id}` (one task's runs, logs and
//! environments), `/watches`, `/watches/{id}`; `/` leads to the list.

mod assets;
mod axis;
mod detail;
mod error;
mod findings;
mod format;
mod hosts;
mod list;
mod plot;
mod queue;
mod series_plot;
mod submit;
mod task;
mod watches;

use crate::state::AppState;
use axum::Router;
use axum::response::Redirect;
use axum::routing::get;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/bisects") }))
        .route("/bisects", get(list::page))
        .route("/bisects/{id}", get(detail::page))
        .route("/bisects/{id}/live", get(detail::live))
        .route("/submit", get(submit::page))
        .route("/hosts", get(hosts::page))
        .route("/queue", get(queue::page))
        .route("/tasks/{id}", get(task::page))
        .route("/watches", get(watches::list))
        .route("/watches/{id}", get(watches::detail))
        .route("/static/{name}", get(assets::serve))
}
