//! Static assets (stylesheet, the one script), compiled into the binary so the server needs
//! no files beside it and the pages load nothing from elsewhere.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../../web/static/style.css"),
    },
    Asset {
        name: "dashboard.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../../web/static/dashboard.js"),
    },
    Asset {
        name: "watches.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../../web/static/watches.js"),
    },
];

pub async fn serve(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => (
            [
                (header::CONTENT_TYPE, a.content_type),
                // Short: a new server version's assets reach browsers within minutes.
                (header::CACHE_CONTROL, "public, max-age=300"),
            ],
            a.body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
