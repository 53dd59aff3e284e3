//! The error answers the edge of the API gives to any operation, whatever its handler
//! declares, written into the OpenAPI document so that clients (and schemathesis) find
//! every status they can meet: 400 for a path, query or body that does not parse, 401/403
//! for a missing or insufficient token (reads too, under `--require-read-token`), 404 for
//! an id that names nothing, 413 for a body over the limit, 415 for a body that is not
//! JSON, 422 for text PostgreSQL cannot hold (a NUL) or a value out of range. Each has the
//! API's `ErrorBody`.

use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};

fn error(description: &str) -> RefOr<utoipa::openapi::Response> {
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build(),
    )
}

fn add(op: &mut Operation) {
    let params = op.parameters.as_deref().unwrap_or_default();
    let in_path = params
        .iter()
        .any(|p| matches!(p, RefOr::T(p) if p.parameter_in == ParameterIn::Path));
    let has_body = op.request_body.is_some();
    let mut codes = vec![
        (
            "400",
            "The path, query or body does not parse (the field is named)",
        ),
        ("401", "No token, or a token that is not valid here"),
        ("403", "The token's role may not do this"),
        (
            "422",
            "A value is refused (the field is named), e.g. text with a NUL",
        ),
    ];
    if in_path {
        codes.push(("404", "Nothing with this id or name"));
    }
    if has_body {
        codes.push(("413", "The body is over the size limit"));
        codes.push(("415", "The body is not `application/json`"));
    }
    for (code, what) in codes {
        op.responses
            .responses
            .entry(code.to_string())
            .or_insert_with(|| error(what));
    }
}

/// Adds the edge's error answers to every operation of `openapi`.
pub fn document(openapi: &mut OpenApi) {
    for item in openapi.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
        {
            add(op);
        }
    }
}
