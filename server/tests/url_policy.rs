//! The repository URL policy through the API: URLs on loopback, private or link-local
//! addresses, and transports not allowed, are refused with a 422 naming `url` and the
//! rule, nothing is stored, and an operator's explicit allowance lets them through.

mod common;

use common::{TOKEN, call};
use perfbisect_server::url_policy::{UrlPolicy, UrlPolicyConfig};
use serde_json::json;

async fn register(f: &common::Fixture, name: &str, url: &str) -> (u16, serde_json::Value) {
    let (s, v) = call(
        f,
        "POST",
        "/api/v1/repositories",
        Some(TOKEN),
        Some(json!({"name": name, "url": url})),
    )
    .await;
    (s.as_u16(), v)
}

async fn stored(f: &common::Fixture) -> usize {
    let (s, v) = call(f, "GET", "/api/v1/repositories", Some(TOKEN), None).await;
    assert_eq!(s.as_u16(), 200, "{v}");
    v.as_array().unwrap().len()
}

#[tokio::test]
async fn private_addresses_and_unlisted_schemes_are_refused_unless_allowed() {
    let mut f = common::fixture().await;
    // A real git daemon is not needed: the policy refuses before anything connects.
    for (url, rule) in [
        ("git://127.0.0.1:9/x.git", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("https://10.0.0.1/x.git", "private"),
        ("ssh://root@[::1]:22/x.git", "loopback"),
        ("root@192.168.0.1:x.git", "private"),
        ("https://localhost/x.git", "loopback"),
        (
            "ext::sh -c touch% /tmp/pwned",
            "scheme `ext` is not allowed",
        ),
    ] {
        let (s, v) = register(&f, "probe", url).await;
        assert_eq!(s, 422, "{url}: {v}");
        assert_eq!(v["error"]["field"], "url", "{url}: {v}");
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("URL policy") && msg.contains(rule),
            "{url}: {msg}"
        );
    }
    assert_eq!(stored(&f).await, 0, "a refused URL stores nothing");

    // Local paths are allowed by default (the `file` scheme).
    let repo = f.repo.display().to_string();
    let (s, v) = register(&f, "local", &repo).await;
    assert_eq!(s, 202, "{v}");
    common::wait_repository(&f.state, "local", "ready").await;

    // An operator that drops `file` refuses local paths too.
    f.state.mirrors = (f.state.mirrors.clone()).with_url_policy(UrlPolicy::new(UrlPolicyConfig {
        schemes: vec!["https".into()],
        ..Default::default()
    }));
    let (s, v) = register(&f, "local2", &repo).await;
    assert_eq!(s, 422, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--repo-schemes"),
        "{v}"
    );
    // Refused on submission too: the stored URL is checked again before each fetch.
    let (s, v) = call(
        &f,
        "POST",
        "/api/v1/bisects",
        Some(TOKEN),
        Some(json!({"repository": "local", "good": "good", "bad": "bad",
                    "job": common::JOB, "metric": "t.x"})),
    )
    .await;
    assert!(s.is_client_error(), "{s}: {v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("URL policy"),
        "{v}"
    );

    // Allowing private addresses lets a loopback remote through to the fetch itself
    // (which then fails for its own reason: nothing listens there).
    f.state.mirrors = (f.state.mirrors.clone()).with_url_policy(UrlPolicy::allowing_private());
    let (s, v) = register(&f, "probe", "git://127.0.0.1:9/x.git").await;
    assert_eq!(s, 202, "{v}");
    let r = common::wait_repository(&f.state, "probe", "failed").await;
    let reason = r["fetch_error"].as_str().unwrap();
    assert!(!reason.contains("URL policy"), "{r}");
}
