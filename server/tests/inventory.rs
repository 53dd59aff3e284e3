//! Host inventory through the API, against a real PostgreSQL database: workers report what
//! their hosts do, repeated host failures quarantine a host (which then claims nothing while
//! the group's other host works), operators drain and release hosts, and the hosts page
//! shows it all.

use axum::http::StatusCode;
use serde_json::{Value, json};

mod common;

use common::{ENROLL, JOB, TOKEN, call, request, with_repo};

async fn register(f: &common::Fixture, name: &str) -> String {
    let (s, reg) = call(
        f,
        "POST",
        "/api/v1/worker/register",
        Some(ENROLL),
        Some(json!({"name": name, "host_group": "g"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{reg}");
    reg["token"].as_str().unwrap().to_string()
}

async fn report(f: &common::Fixture, token: &str, body: Value) -> (StatusCode, Value) {
    call(
        f,
        "POST",
        "/api/v1/worker/host-state",
        Some(token),
        Some(body),
    )
    .await
}

async fn host(f: &common::Fixture, name: &str) -> Value {
    let (s, all) = call(f, "GET", "/api/v1/inventory", None, None).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    all.as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not in {all}"))
}

const OPERATOR: &str = "test-operator-token";

/// The operator's token: draining and releasing hosts is theirs.
async fn operator(f: &common::Fixture) -> &'static str {
    perfbisect_server::auth::ensure_token(
        &f.state.db,
        perfbisect_wire::states::TokenKind::Operator,
        "test",
        OPERATOR,
    )
    .await
    .unwrap();
    OPERATOR
}

async fn claim(f: &common::Fixture, token: &str) -> StatusCode {
    call(
        f,
        "POST",
        "/api/v1/worker/claim",
        Some(token),
        Some(json!({"wait_secs": 0})),
    )
    .await
    .0
}

#[tokio::test]
async fn a_failing_host_is_quarantined_and_the_other_takes_the_work() {
    let f = with_repo().await;
    let h1 = register(&f, "h1").await;
    let h2 = register(&f, "h2").await;
    assert_eq!(host(&f, "h1").await["state"], "idle");

    // A boot under way, then the host up on the commit's kernel after a power cycle.
    let (s, r) = report(&f, &h1, json!({"activity": "booting"})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(host(&f, "h1").await["state"], "booting");
    let (s, _) = report(
        &f,
        &h1,
        json!({"activity": "idle", "kernel": "6.1.158-pb0123456789ab",
               "power_action": "cycle (ipmi)", "outcome": "healthy"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let h = host(&f, "h1").await;
    assert_eq!(h["current_kernel"], "6.1.158-pb0123456789ab");
    assert_eq!(h["last_power_action"], "cycle (ipmi)");
    assert!(h["last_power_action_at"].is_string(), "{h}");
    assert_eq!(h["failure_streak"], 0);

    // Three boots that never came back, even after a power cycle: quarantined.
    for n in 1..=3 {
        let (s, r) = report(
            &f,
            &h1,
            json!({"activity": "powered_off", "outcome": "failed",
                   "message": "root@lab1 did not come back after a power cycle"}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{r}");
        assert_eq!(r["failure_streak"], n);
        assert_eq!(r["available"], n < 3, "{r}");
    }
    let h = host(&f, "h1").await;
    assert_eq!(h["state"], "quarantined", "{h}");
    assert!(
        h["quarantine_reason"]
            .as_str()
            .unwrap()
            .contains("did not come back"),
        "{h}"
    );

    // Work is queued: the quarantined host gets none, the other host does.
    let (s, b) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "r", "good": "v1", "bad": "v5", "job": JOB, "metric": "t.x"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(claim(&f, &h1).await, StatusCode::NO_CONTENT);
    assert_eq!(claim(&f, &h2).await, StatusCode::OK);

    // The page shows it.
    let (s, page) = request(&f.state, "GET", "/hosts", None, None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(page.contains("data-inventory=\"h1\""), "{page}");
    assert!(page.contains("state-quarantined"), "{page}");
    assert!(page.contains("6.1.158-pb0123456789ab"), "{page}");

    // The operator releases it: back to work, streak cleared.
    let id = h["id"].as_i64().unwrap();
    let op = operator(&f).await;
    let (s, r) = call(
        &f,
        "POST",
        &format!("/api/v1/hosts/{id}/release"),
        Some(op),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["state"], "powered_off");
    assert_eq!(r["available"], true);
    assert_eq!(r["failure_streak"], 0);
    assert_eq!(claim(&f, &h1).await, StatusCode::OK);
}

#[tokio::test]
async fn an_operator_drains_and_releases_a_host() {
    let f = with_repo().await;
    let h1 = register(&f, "h1").await;
    let id = host(&f, "h1").await["id"].as_i64().unwrap();
    let (s, _) = call(&f, "POST", &format!("/api/v1/hosts/{id}/drain"), None, None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "draining needs a token");
    let (s, r) = call(
        &f,
        "POST",
        &format!("/api/v1/hosts/{id}/drain"),
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!(
        s,
        StatusCode::FORBIDDEN,
        "a submitter may not drain a host: {r}"
    );
    assert_eq!(host(&f, "h1").await["drained"], false);
    let op = operator(&f).await;
    let (s, r) = call(
        &f,
        "POST",
        &format!("/api/v1/hosts/{id}/drain"),
        Some(op),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["drained"], true);
    assert_eq!(r["available"], false);
    let (s, b) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "r", "good": "v1", "bad": "v5", "job": JOB, "metric": "t.x"})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(claim(&f, &h1).await, StatusCode::NO_CONTENT);
    let (s, r) = call(
        &f,
        "POST",
        &format!("/api/v1/hosts/{id}/release"),
        Some(op),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["drained"], false);
    assert_eq!(claim(&f, &h1).await, StatusCode::OK);
    let (s, r) = call(&f, "POST", "/api/v1/hosts/99999/drain", Some(op), None).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{r}");
}

#[tokio::test]
async fn a_bad_host_state_report_names_its_field() {
    let f = with_repo().await;
    let h1 = register(&f, "h1").await;
    let (s, r) = report(&f, &h1, json!({"activity": "idle", "kernel": ""})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(r["error"]["field"], "kernel", "{r}");
    let (s, r) = report(&f, &h1, json!({"activity": "dancing"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert!(r.to_string().contains("activity"), "{r}");
    // Nothing was stored.
    assert_eq!(host(&f, "h1").await["state"], "idle");
}
